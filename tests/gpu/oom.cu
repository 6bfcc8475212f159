/* oom: out of memory looks like CUDA's and the pool gives memory back (DESIGN.md, CUDA
 * semantics 5 and 8).
 *   oom limit   (run with GPUPOOL_CONF=limit:1G) 64 MiB blocks until cudaErrorMemoryAllocation;
 *               cudaGetLastError reports it exactly once; free one, the next allocation
 *               succeeds with no stale error; the limit caps the count under the shim.
 *   oom full    (no limit) 1 GiB blocks until the device is full, free all, cudaMemGetInfo
 *               must show the memory free again; gpupool_release(-1) (if loaded), again
 *               1 GiB blocks: about the same count; then 3 GiB blocks without a release:
 *               the pool's OOM path must give its cached 1 GiB segments back. */
#include <vector>

#include "common.h"

#define MiB (1ull << 20)
#define GiB (1ull << 30)

static int fill_until_oom(std::vector<void *> &v, size_t size, int cap)
{
	int n = 0;
	for (;;) {
		void *p = NULL;
		cudaError_t e = cudaMalloc(&p, size);
		if (e == cudaErrorMemoryAllocation)
			break;
		CK(e);
		v.push_back(p);
		if (++n >= cap)
			break;
	}
	return n;
}

static void free_all(std::vector<void *> &v)
{
	for (void *p : v)
		CK(cudaFree(p));
	v.clear();
}

static int mode_limit(bool shim)
{
	const char *conf = getenv("GPUPOOL_CONF");
	bool limited = shim && conf && strstr(conf, "limit:1G");
	std::vector<void *> v;
	int n = fill_until_oom(v, 64 * MiB, 4000);
	EXPECT(n < 4000, "no cudaErrorMemoryAllocation after 4000 x 64 MiB");
	cudaError_t l1 = cudaGetLastError(), l2 = cudaGetLastError();
	printf("oom limit: shim=%d limited=%d blocks=%d (%.2f GiB) last_error=%s then %s\n", shim, limited, n,
	       n * 64.0 / 1024, cudaGetErrorName(l1), cudaGetErrorName(l2));
	EXPECT(l1 == cudaErrorMemoryAllocation, "cudaGetLastError after the OOM: %s", cudaGetErrorName(l1));
	EXPECT(l2 == cudaSuccess, "cudaGetLastError twice: %s (the error should be reported once)", cudaGetErrorName(l2));
	if (limited)
		EXPECT(n >= 14 && n <= 16, "limit:1G allowed %d blocks of 64 MiB (expected 14..16)", n);
	CK(cudaFree(v.back()));
	v.pop_back();
	void *p = NULL;
	CK(cudaMalloc(&p, 64 * MiB));
	v.push_back(p);
	EXPECT(cudaGetLastError() == cudaSuccess, "a stale error after a successful cudaMalloc");
	/* full again: exactly one more OOM, once reported */
	void *q = NULL;
	cudaError_t e = cudaMalloc(&q, 64 * MiB);
	EXPECT(e == cudaErrorMemoryAllocation, "after refilling: %s", cudaGetErrorName(e));
	EXPECT(cudaGetLastError() == cudaErrorMemoryAllocation, "last error after the second OOM");
	/* smaller requests still fit in nothing more than the limit; a big free makes room */
	for (int i = 0; i < 4 && !v.empty(); i++) {
		CK(cudaFree(v.back()));
		v.pop_back();
	}
	CK(cudaMalloc(&q, 200 * MiB)); /* 4 x 64 MiB freed: 256 MiB of room */
	v.push_back(q);
	EXPECT(cudaGetLastError() == cudaSuccess, "a stale error after recovery");
	free_all(v);
	CK(cudaDeviceSynchronize());
	printf("PASS oom limit\n");
	return 0;
}

static int mode_full(bool shim)
{
	size_t f0, t0, f1, t1;
	CK(cudaMemGetInfo(&f0, &t0));
	std::vector<void *> v;
	int n1 = fill_until_oom(v, GiB, 100000);
	EXPECT(cudaGetLastError() == cudaErrorMemoryAllocation, "last error after the first OOM");
	free_all(v);
	CK(cudaMemGetInfo(&f1, &t1));
	printf("oom full: shim=%d round1=%d x 1 GiB, meminfo before free=%.2f GiB total=%.2f GiB, after free-all free=%.2f GiB\n",
	       shim, n1, f0 / (double)GiB, t0 / (double)GiB, f1 / (double)GiB);
	EXPECT(n1 >= 1, "not even one 1 GiB block");
	EXPECT(f1 + 2 * GiB >= f0, "cudaMemGetInfo after freeing everything: %.2f GiB free, %.2f GiB before (cached "
				   "memory must count as free)",
	       f1 / (double)GiB, f0 / (double)GiB);
	long long (*rel)(int) = (long long (*)(int))gp_shim_sym("gpupool_release");
	long long released = rel ? rel(-1) : -1;
	int n2 = fill_until_oom(v, GiB, 100000);
	(void)cudaGetLastError();
	free_all(v);
	int n3 = fill_until_oom(v, 3 * GiB, 100000); /* no explicit release: the OOM path must release */
	(void)cudaGetLastError();
	free_all(v);
	int n4 = fill_until_oom(v, GiB, 100000);
	(void)cudaGetLastError();
	free_all(v);
	printf("oom full: released=%lld round2=%d x 1 GiB round3=%d x 3 GiB round4=%d x 1 GiB\n", released, n2, n3, n4);
	EXPECT(n2 + 1 >= n1, "round 2 reached %d blocks, round 1 %d", n2, n1);
	EXPECT(n3 + 1 >= n1 / 3, "round 3 reached %d x 3 GiB with %d x 1 GiB possible: cached segments were not "
				 "given back on OOM",
	       n3, n1);
	EXPECT(n4 + 3 >= n1, "round 4 reached %d blocks, round 1 %d", n4, n1);
	CK(cudaDeviceSynchronize());
	printf("PASS oom full\n");
	return 0;
}

int main(int argc, char **argv)
{
	gp_require_gpu();
	bool shim = gp_shim_loaded();
	if (argc > 1 && !strcmp(argv[1], "limit"))
		return mode_limit(shim);
	if (argc > 1 && !strcmp(argv[1], "full"))
		return mode_full(shim);
	fprintf(stderr, "usage: oom limit|full\n");
	return 2;
}
