"""A short deterministic training run: prints each step's loss as a hex float.

The runner runs it without the shim and under the shim (default allocator,
PYTORCH_NO_CUDA_MEMORY_CACHING=1, PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync) and
compares the outputs bit for bit: a pool that hands out memory still in use, or loses
data, changes the losses. Exit 77 when no GPU is present."""
import os
import sys

os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")

import torch  # noqa: E402


def main():
    if not torch.cuda.is_available():
        print("SKIP: no CUDA device")
        return 77
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    torch.manual_seed(1234)
    torch.use_deterministic_algorithms(True)
    torch.backends.cudnn.benchmark = False
    torch.backends.cudnn.deterministic = True
    dev = torch.device("cuda")
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 32, 3, padding=1), torch.nn.BatchNorm2d(32), torch.nn.ReLU(),
        torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(32, 64, 3, padding=1), torch.nn.BatchNorm2d(64), torch.nn.ReLU(),
        torch.nn.MaxPool2d(2), torch.nn.Flatten(),  # AdaptiveAvgPool2d's backward is not deterministic
        torch.nn.Linear(64 * 64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10),
    ).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    g = torch.Generator(device="cpu").manual_seed(99)
    for step in range(steps):
        # fresh tensors of varying sizes each step, so allocations come and go
        batch = 32 + 16 * (step % 4)
        x = torch.randn(batch, 3, 32, 32, generator=g).to(dev)
        y = torch.randint(0, 10, (batch,), generator=g).to(dev)
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        print(f"step {step} loss {loss.item().hex()}", flush=True)
    torch.cuda.synchronize()
    return 0


if __name__ == "__main__":
    sys.exit(main())
