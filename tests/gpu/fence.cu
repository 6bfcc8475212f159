/* fence: cudaFree is a fence (DESIGN.md, CUDA semantics 1). A kernel on a non-blocking
 * stream busy-waits 0..2000 us and then writes block A; cudaFree(A) is called while it
 * runs; cudaMalloc(B) of the same size and B's own pattern are issued on another
 * non-blocking stream. If B overlaps A and the pool reused A before the first kernel
 * finished, that kernel overwrites B: B's check fails. Under the shim (fence:thread or
 * inline) cudaFree must also return without waiting for the kernel.
 *   fence [--quick] [--driver-streams]
 * --quick: fewer, smaller rounds, for compute-sanitizer. --driver-streams: the two streams
 * come from the driver's cuStreamCreate(CU_STREAM_NON_BLOCKING), as Numba's and CuPy's do:
 * the runtime's fence markers must cover them too. */
#include <cuda.h>

#include <algorithm>
#include <vector>

#include "common.h"

int main(int argc, char **argv)
{
	bool quick = false, driver_streams = false;
	for (int i = 1; i < argc; i++) {
		quick |= !strcmp(argv[i], "--quick");
		driver_streams |= !strcmp(argv[i], "--driver-streams");
	}
	gp_require_gpu();
	bool shim = gp_shim_loaded();
	const char *conf = getenv("GPUPOOL_CONF");
	bool sync_fence = conf && strstr(conf, "fence:sync");
	int rounds = quick ? 24 : 200;
	size_t max_size = quick ? (4u << 20) : (64u << 20);

	cudaStream_t s1, s2;
	if (driver_streams) {
		CK(cudaFree(0)); /* the primary context, current */
		CUstream d1, d2;
		EXPECT(cuStreamCreate(&d1, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS &&
			       cuStreamCreate(&d2, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS,
		       "cuStreamCreate failed");
		s1 = (cudaStream_t)d1;
		s2 = (cudaStream_t)d2;
	} else {
		CK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
		CK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
	}
	unsigned long long *bad;
	CK(cudaMallocHost(&bad, sizeof *bad));
	*bad = 0;

	std::vector<double> free_us_long; /* cudaFree times when the kernel spins >= 1000 us */
	double free_max = 0;
	int overlaps = 0, same = 0;
	uint64_t rng = 88172645463325252ull;
	for (int i = 0; i < rounds; i++) {
		/* sizes 4 KiB .. max, log-spread, plus odd sizes; spins 0..2000 us */
		int steps = quick ? 11 : 15; /* 4K << 0..14 = 4 KiB .. 64 MiB */
		size_t size = (size_t)4096 << (i % steps);
		if (i % 3 == 1)
			size += 512 * (gp_xorshift64(&rng) % 8);
		if (size > max_size)
			size = max_size;
		double spin = (i % 5 == 0) ? 0.0 : (double)(gp_xorshift64(&rng) % 2001);
		uint32_t pa = 0xA0000000u + (uint32_t)i * 0x10000u, pb = 0xB0000000u + (uint32_t)i * 0x10000u;

		uint32_t *a = NULL, *b = NULL;
		CK(cudaMalloc(&a, size));
		gp_fill(a, size, pa, spin, s1);
		double t0 = gp_now_us();
		CK(cudaFree(a));
		double dt = gp_now_us() - t0;
		if (spin >= 1000)
			free_us_long.push_back(dt);
		free_max = std::max(free_max, dt);
		CK(cudaMalloc(&b, size));
		uintptr_t ua = (uintptr_t)a, ub = (uintptr_t)b;
		if (ub < ua + size && ua < ub + size)
			overlaps++;
		same += ua == ub;
		gp_fill(b, size, pb, 0, s2);
		CK(cudaDeviceSynchronize());
		gp_check_async(b, size, pb, bad, s2);
		CK(cudaStreamSynchronize(s2));
		EXPECT(*bad == 0, "round %d: size %zu spin %.0f us: %llu words of B overwritten (A=%p B=%p): the pool "
				  "reused A before the kernel writing it finished",
		       i, size, spin, *bad, (void *)a, (void *)b);
		CK(cudaFree(b));
	}
	CK(cudaDeviceSynchronize());
	std::sort(free_us_long.begin(), free_us_long.end());
	double med = free_us_long.empty() ? 0 : free_us_long[free_us_long.size() / 2];
	printf("fence%s rounds=%d shim=%d overlaps=%d same_address=%d free_us_median_spin_ge_1ms=%.1f free_us_max=%.1f\n",
	       driver_streams ? "(driver streams)" : "", rounds, shim, overlaps, same, med, free_max);
	if (shim && !sync_fence && !free_us_long.empty())
		EXPECT(med < 200.0, "cudaFree waited for the GPU under the shim: median %.1f us with kernels of >= 1 ms "
				    "running (a pool should park the free behind a fence, not wait)",
		       med);
	if (!shim && !free_us_long.empty() && med < 500.0)
		printf("note: native cudaFree did not wait for the kernel (median %.1f us)\n", med);
	CK(cudaFreeHost(bad));
	if (driver_streams)
		EXPECT(cuStreamDestroy((CUstream)s1) == CUDA_SUCCESS && cuStreamDestroy((CUstream)s2) == CUDA_SUCCESS,
		       "cuStreamDestroy failed");
	else {
		CK(cudaStreamDestroy(s1));
		CK(cudaStreamDestroy(s2));
	}
	printf("PASS fence\n");
	return 0;
}
