/* The interposer's cost per allocation: cudaMalloc/cudaFree and cudaMallocAsync/cudaFreeAsync
 * pairs at sizes from 512 B to 1 GiB, median ns per pair over batches, printed as key=value.
 * Run under LD_PRELOAD=libgpupool.so for the pool's figures and without it for the fake
 * runtime's native cost. The fake backs device memory with host memory and zero-fills every
 * real allocation, so native pairs of large sizes measure memset bandwidth.
 * Needs FAKECUDA_CAPACITY of at least 2G for the 1 GiB size (e.g. FAKECUDA_CAPACITY=8G).
 *   gpupool-shim-bench                      every size, both kinds of pair
 *   gpupool-shim-bench sync|async SIZE N    N pairs of one kind and size after one warm-up
 *                                            pair, untimed: for instruction counts (callgrind
 *                                            runs with two N; the difference over the
 *                                            difference of N is the cost of one pair) */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <cuda_runtime_api.h>

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

#define BATCHES 9

static uint64_t bench(size_t size, int async, cudaStream_t s, int pairs)
{
	uint64_t per[BATCHES];
	void *p = NULL;
	/* warm up: the pool takes its segment once */
	if ((async ? cudaMallocAsync(&p, size, s) : cudaMalloc(&p, size)) != cudaSuccess)
		return 0;
	(void)(async ? cudaFreeAsync(p, s) : cudaFree(p));
	for (int b = 0; b < BATCHES; b++) {
		uint64_t t0 = now_ns();
		for (int i = 0; i < pairs; i++) {
			if ((async ? cudaMallocAsync(&p, size, s) : cudaMalloc(&p, size)) != cudaSuccess)
				return 0;
			(void)(async ? cudaFreeAsync(p, s) : cudaFree(p));
		}
		per[b] = (now_ns() - t0) / (uint64_t)pairs;
	}
	(void)cudaStreamSynchronize(s);
	qsort(per, BATCHES, sizeof per[0], cmp);
	return per[BATCHES / 2];
}

/* `sync|async SIZE N`: N pairs after a warm-up one. 0, or 1 with a message. */
static int count_only(char **argv)
{
	int async = argv[1][0] == 'a';
	char *e1, *e2;
	unsigned long long size = strtoull(argv[2], &e1, 10), n = strtoull(argv[3], &e2, 10);
	if ((!async && argv[1][0] != 's') || *e1 || *e2 || size == 0 || n == 0) {
		fprintf(stderr, "usage: gpupool-shim-bench [sync|async SIZE PAIRS]\n");
		return 2;
	}
	cudaStream_t s;
	if (cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess)
		return 1;
	void *p = NULL;
	for (unsigned long long i = 0; i <= n; i++) {
		if ((async ? cudaMallocAsync(&p, size, s) : cudaMalloc(&p, size)) != cudaSuccess) {
			fprintf(stderr, "gpupool-shim-bench: allocation of %llu bytes failed\n", size);
			return 1;
		}
		(void)(async ? cudaFreeAsync(p, s) : cudaFree(p));
	}
	(void)cudaStreamSynchronize(s);
	(void)cudaStreamDestroy(s);
	printf("pairs=%llu size=%llu kind=%s\n", n, size, async ? "async" : "sync");
	return 0;
}

int main(int argc, char **argv)
{
	static const size_t sizes[] = {512, 65536, 2u << 20, 32u << 20, 256u << 20, 1u << 30};
	if (argc == 4)
		return count_only(argv);
	if (argc != 1) {
		fprintf(stderr, "usage: gpupool-shim-bench [sync|async SIZE PAIRS]\n");
		return 2;
	}
	cudaStream_t s;
	if (cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess)
		return 1;
	printf("shim_preloaded=%d\n", getenv("LD_PRELOAD") && *getenv("LD_PRELOAD"));
	for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
		size_t n = sizes[i];
		/* fewer pairs where each native pair zero-fills a large block */
		int pairs = n <= (2u << 20) ? 2000 : n <= (32u << 20) ? 50 : 4;
		uint64_t a = bench(n, 0, s, pairs);
		uint64_t b = bench(n, 1, s, pairs);
		printf("shim_pair_ns_median_%zu=%llu\n", n, (unsigned long long)a);
		printf("shim_async_pair_ns_median_%zu=%llu\n", n, (unsigned long long)b);
		if (!a || !b)
			fprintf(stderr, "size %zu: allocation failed (FAKECUDA_CAPACITY too small?)\n", n);
	}
	(void)cudaStreamDestroy(s);
	return 0;
}
