"""Host cost of PyTorch's caching allocator, in the patterns of hostcost.cu / ANCHORS.md.

  python3 torch_alloc.py [--method cpp|python] [--build-only]

cpp (default): a small C++ extension (torch.utils.cpp_extension.load_inline, cached under
  $TORCH_EXTENSIONS_DIR, default /tmp/gpupool_torch_ext; the first build takes about a
  minute) times c10::cuda::CUDACachingAllocator::raw_alloc / raw_delete with
  std::chrono::steady_clock around each call: the allocator's own cost, as in ANCHORS.md.
python: torch.cuda.caching_allocator_alloc / caching_allocator_delete timed per call with
  time.perf_counter_ns, minus the median cost of timing a no-op Python call with the
  same arguments. The Python wrapper's own work stays in (an upper bound).
Pairs: 512 B, 64 KiB, 2 MiB, 32 MiB, 256 MiB, 1 GiB, 20,000 each (medians). Mixed: the
xorshift64 live-set pattern of hostcost.cu (same sizes, same order). key=value lines."""
import argparse
import math
import os
import statistics
import sys
import time

SIZES = [(512, "512B"), (64 << 10, "64KiB"), (2 << 20, "2MiB"), (32 << 20, "32MiB"), (256 << 20, "256MiB"),
         (1 << 30, "1GiB")]

CPP = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <vector>

static inline double now_us() {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
static double med(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}
static double p99(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, (size_t)(0.99 * v.size()))];
}
static inline uint64_t xs(uint64_t* s) {
  uint64_t x = *s; x ^= x << 13; x ^= x >> 7; x ^= x << 17; return *s = x;
}

// returns {alloc median, free median, pair median, pair p99, batched pair mean} in microseconds
std::vector<double> pairs(int64_t size, int64_t n) {
  namespace A = c10::cuda::CUDACachingAllocator;
  std::vector<double> ta, tf, tp;
  ta.reserve(n); tf.reserve(n); tp.reserve(n);
  for (int64_t i = 0; i < n + 20; i++) {
    double t0 = now_us();
    void* p = A::raw_alloc((size_t)size);
    double t1 = now_us();
    A::raw_delete(p);
    double t2 = now_us();
    if (i < 20) continue;
    ta.push_back(t1 - t0); tf.push_back(t2 - t1); tp.push_back(t2 - t0);
  }
  // the same pairs timed as one batch: no clock read inside, for the timer's own cost
  double b0 = now_us();
  for (int64_t i = 0; i < n; i++) A::raw_delete(A::raw_alloc((size_t)size));
  double batch = (now_us() - b0) / (double)n;
  return {med(ta), med(tf), med(tp), p99(tp), batch};
}

// returns {allocs, frees, alloc mean, free mean, alloc median, free median}
std::vector<double> mixed() {
  namespace A = c10::cuda::CUDACachingAllocator;
  const int max_live = 2000, ops = 20000;
  uint64_t s = 88172645463325252ull;
  std::vector<void*> live;
  std::vector<double> ta, tf;
  const double lo = std::log(512.0), hi = std::log(64.0 * 1024 * 1024);
  for (int i = 0; i < ops; i++) {
    uint64_t r = xs(&s);
    int n = (int)live.size();
    if (n == 0 || (n < max_live && (r & 1))) {
      double u = (double)(xs(&s) >> 11) * 0x1.0p-53;
      size_t size = (size_t)std::exp(lo + u * (hi - lo)) & ~(size_t)7;
      double t0 = now_us();
      void* p = A::raw_alloc(size);
      ta.push_back(now_us() - t0);
      live.push_back(p);
    } else {
      size_t k = (size_t)(xs(&s) % (uint64_t)n);
      void* p = live[k];
      live[k] = live.back();
      live.pop_back();
      double t0 = now_us();
      A::raw_delete(p);
      tf.push_back(now_us() - t0);
    }
  }
  for (void* p : live) A::raw_delete(p);
  double sa = 0, sf = 0;
  for (double x : ta) sa += x;
  for (double x : tf) sf += x;
  return {(double)ta.size(), (double)tf.size(), ta.empty() ? 0 : sa / ta.size(), tf.empty() ? 0 : sf / tf.size(),
          med(ta), med(tf)};
}
"""


def load_ext():
    from torch.utils.cpp_extension import load_inline
    os.environ.setdefault("TORCH_EXTENSIONS_DIR", "/tmp/gpupool_torch_ext")
    return load_inline(name="gpupool_torch_alloc", cpp_sources=[CPP], functions=["pairs", "mixed"],
                       with_cuda=True, extra_cflags=["-O2"], verbose=False)


def xorshift(s):
    s ^= (s << 13) & 0xFFFFFFFFFFFFFFFF
    s ^= s >> 7
    s ^= (s << 17) & 0xFFFFFFFFFFFFFFFF
    return s


def py_pairs(torch, size, n):
    stream = torch.cuda.current_stream()
    alloc, delete = torch.cuda.caching_allocator_alloc, torch.cuda.caching_allocator_delete
    clock = time.perf_counter_ns

    def noop(a, b=None, c=None):
        return 0

    base = []
    for _ in range(2000):
        t0 = clock()
        noop(size, 0, stream)
        base.append(clock() - t0)
    b = statistics.median(base) / 1e3
    ta, tf = [], []
    for i in range(n + 20):
        t0 = clock()
        p = alloc(size, 0, stream)
        t1 = clock()
        delete(p)
        t2 = clock()
        if i >= 20:
            ta.append((t1 - t0) / 1e3 - b)
            tf.append((t2 - t1) / 1e3 - b)
    tp = sorted(a + f for a, f in zip(ta, tf))
    return statistics.median(ta), statistics.median(tf), statistics.median(tp), tp[min(len(tp) - 1, int(.99 * len(tp)))]


def py_mixed(torch):
    stream = torch.cuda.current_stream()
    alloc, delete = torch.cuda.caching_allocator_alloc, torch.cuda.caching_allocator_delete
    clock = time.perf_counter_ns
    s, live, ta, tf = 88172645463325252, [], [], []
    lo, hi = math.log(512.0), math.log(64.0 * 1024 * 1024)
    for _ in range(20000):
        s = xorshift(s)
        r = s
        n = len(live)
        if n == 0 or (n < 2000 and (r & 1)):
            s = xorshift(s)
            u = (s >> 11) * 2.0 ** -53
            size = int(math.exp(lo + u * (hi - lo))) & ~7
            t0 = clock()
            p = alloc(size, 0, stream)
            ta.append((clock() - t0) / 1e3)
            live.append(p)
        else:
            s = xorshift(s)
            k = s % n
            p = live[k]
            live[k] = live[-1]
            live.pop()
            t0 = clock()
            delete(p)
            tf.append((clock() - t0) / 1e3)
    for p in live:
        delete(p)
    return (len(ta), len(tf), sum(ta) / len(ta), sum(tf) / len(tf), statistics.median(ta), statistics.median(tf))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--method", choices=["cpp", "python"], default="cpp")
    ap.add_argument("--build-only", action="store_true")
    ap.add_argument("--pairs", type=int, default=20000)
    a = ap.parse_args()
    import torch
    if a.build_only:
        load_ext()
        print("torch_alloc: extension built", flush=True)
        return 0
    if not torch.cuda.is_available():
        print("SKIP: no CUDA device")
        return 77
    torch.cuda.init()
    torch.empty(1, device="cuda")
    shim = int("libgpupool" in os.environ.get("LD_PRELOAD", ""))
    method = a.method
    ext = None
    if method == "cpp":
        try:
            ext = load_ext()
        except Exception as e:  # noqa: BLE001 - fall back, and say so
            print(f"torch_alloc: C++ extension unavailable ({str(e).splitlines()[0][:200]}); using python",
                  file=sys.stderr, flush=True)
            method = "python"
    for size, name in SIZES:
        r = ext.pairs(size, a.pairs) if ext else py_pairs(torch, size, a.pairs)
        print(f"bench=torch_alloc method={method} pattern=pair shim={shim} size={name} n={a.pairs} "
              f"alloc_us={r[0]:.3f} free_us={r[1]:.3f} pair_us={r[2]:.3f} pair_p99_us={r[3]:.3f}"
              + (f" pair_batch_us={r[4]:.3f}" if len(r) > 4 else ""), flush=True)
    r = ext.mixed() if ext else py_mixed(torch)
    torch.cuda.synchronize()
    print(f"bench=torch_alloc method={method} pattern=mixed shim={shim} allocs={int(r[0])} frees={int(r[1])} "
          f"alloc_mean_us={r[2]:.3f} free_mean_us={r[3]:.3f} alloc_median_us={r[4]:.3f} free_median_us={r[5]:.3f}",
          flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
