"""The GPU benchmark workloads, shared by train.py, torch_pluggable.py and lag.py.

Random weights (no download), synthetic inputs, fixed seeds: every run of a workload issues
the same sequence of shapes. Import after the allocator's environment is set and torch is
imported. One step of each:

  resnet50  training: torchvision ResNet-50, batch 64 of 3x224x224, bf16 autocast, SGD.
  gpt2      training: GPT-2 124M (transformers GPT2Config()), 8x1024 tokens, bf16 autocast, AdamW.
  bert      inference: BERT-base (transformers BertConfig(), 12 layers, hidden 768), bf16
            weights, torch.no_grad(); eight forward passes, each with a batch of 1-32
            sequences of 16-512 tokens, the (batch, length) pairs drawn from
            random.Random(BERT_SEED) for every step up front, so step i has the same eight
            shapes in every run that has the same warmup and steps.
  llama     generation: a Llama-style decoder with random weights (LlamaConfig: 8 layers,
            hidden 1024, intermediate 2816, 16 heads, vocab 32000), bf16, KV cache on;
            model.generate(prompt, max_new_tokens=128, min_new_tokens=128, do_sample=False):
            128 new tokens for a prompt of batch 1-4 and length 32-256, drawn from
            random.Random(LLAMA_SEED) per step as for bert.

build(name, dev, nsteps) returns (step, kind): step() runs one step and returns a tensor (the
loss for training, a checksum of the outputs for inference, the generated ids for
generation; reading it is left to the caller, since .item() synchronizes); kind is "train"
or "infer"; `model` is on step.model for hooks (lag.py).
"""
import random

import torch

MODELS = ("resnet50", "gpt2", "bert", "llama")
BERT_SEED = 1234
LLAMA_SEED = 4321
BERT_PASSES = 8
LLAMA_NEW_TOKENS = 128


def shapes(seed, nsteps, per_step, batch, length):
    """nsteps lists of per_step (batch, length) pairs, uniform in the closed ranges given."""
    rng = random.Random(seed)
    return [[(rng.randint(*batch), rng.randint(*length)) for _ in range(per_step)] for _ in range(nsteps)]


def _resnet50(dev, nsteps):
    import torchvision

    model = torchvision.models.resnet50(weights=None).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x = torch.randn(64, 3, 224, 224, device=dev)
    y = torch.randint(0, 1000, (64,), device=dev)

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss.detach()

    return model, step, "train"


def _gpt2(dev, nsteps):
    from transformers import GPT2Config, GPT2LMHeadModel

    model = GPT2LMHeadModel(GPT2Config()).to(dev)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    ids = torch.randint(0, 50257, (8, 1024), device=dev)

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        return loss.detach()

    return model, step, "train"


def _bert(dev, nsteps):
    from transformers import BertConfig, BertModel

    cfg = BertConfig()  # base: 12 layers, hidden 768, 12 heads, 512 positions, vocab 30522
    model = BertModel(cfg).to(dev, dtype=torch.bfloat16).eval()
    plan = shapes(BERT_SEED, nsteps, BERT_PASSES, (1, 32), (16, 512))
    gen = torch.Generator(device=dev).manual_seed(BERT_SEED)
    it = iter(plan)

    def step():
        total = torch.zeros((), device=dev, dtype=torch.float32)
        with torch.no_grad():
            for b, n in next(it):
                ids = torch.randint(0, cfg.vocab_size, (b, n), device=dev, generator=gen)
                out = model(input_ids=ids, attention_mask=torch.ones_like(ids))
                total += out.pooler_output.float().sum()
        return total

    return model, step, "infer"


def _llama(dev, nsteps):
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(vocab_size=32000, hidden_size=1024, intermediate_size=2816, num_hidden_layers=8,
                      num_attention_heads=16, num_key_value_heads=16, max_position_embeddings=1024)
    model = LlamaForCausalLM(cfg).to(dev, dtype=torch.bfloat16).eval()
    model.generation_config.pad_token_id = cfg.pad_token_id if cfg.pad_token_id is not None else 0
    plan = shapes(LLAMA_SEED, nsteps, 1, (1, 4), (32, 256))
    gen = torch.Generator(device=dev).manual_seed(LLAMA_SEED)
    it = iter(plan)

    def step():
        (b, n), = next(it)
        ids = torch.randint(3, cfg.vocab_size, (b, n), device=dev, generator=gen)
        with torch.no_grad():
            out = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=LLAMA_NEW_TOKENS,
                                 min_new_tokens=LLAMA_NEW_TOKENS, do_sample=False, use_cache=True)
        return out

    return model, step, "infer"


_BUILDERS = {"resnet50": _resnet50, "gpt2": _gpt2, "bert": _bert, "llama": _llama}


def build(name, dev, nsteps):
    """The workload `name` on `dev`, for at most nsteps calls of step (warmup included)."""
    model, step, kind = _BUILDERS[name](dev, nsteps)
    step.model = model
    return step, kind
