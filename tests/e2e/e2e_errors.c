/* Contract 5, errors look like CUDA's: invalid arguments give the runtime's own codes, a
 * double free or a pointer inside a block gives cudaErrorInvalidValue and leaves the pool
 * intact, out of memory gives cudaErrorMemoryAllocation once in cudaGetLastError, a
 * recovered failure of a real cudaMalloc leaves no stale error, and an error the program
 * already had pending survives. Runs with FAKECUDA_CAPACITY=64M. */
#include <cuda_runtime_api.h>

#include "e2e_util.h"

#define MB ((size_t)1 << 20)

typedef cudaError_t (*malloc_fn)(void **, size_t);
typedef long long (*release_fn)(int);

static void release_all(void)
{
	release_fn f;
	E2E_API(f, "gpupool_release");
	e2e_wait_no_pending(0);
	CHECK(f(-1) >= 0);
}

int main(void)
{
	e2e_shm_dir();
	malloc_fn native_malloc;
	E2E_FN(native_malloc, e2e_native("cudaMalloc"));
	CHECK(gpfake_capacity(0) == 64 * MB);

	/* invalid arguments: the same answer as the runtime, and the same last error */
	cudaError_t native = native_malloc(NULL, 16);
	CHECK(native == cudaErrorInvalidValue);
	CKE(cudaGetLastError(), native);
	CKE(cudaMalloc(NULL, 16), native);
	CKE(cudaGetLastError(), native);
	CKE(cudaGetLastError(), cudaSuccess);
	void *z = (void *)1, *zn = (void *)1;
	cudaError_t e0 = native_malloc(&zn, 0);
	CKE(cudaMalloc(&z, 0), e0);
	CHECK(z == zn);
	CKE(cudaGetLastError(), cudaSuccess);

	/* double free, a pointer inside a block */
	void *p = NULL, *q = NULL;
	CK(cudaMalloc(&p, 4096));
	CK(cudaMalloc(&q, 8192));
	CKE(cudaFree((char *)q + 512), cudaErrorInvalidValue);
	CKE(cudaGetLastError(), cudaErrorInvalidValue);
	CKE(cudaGetLastError(), cudaSuccess);
	CK(cudaFree(p));
	CKE(cudaFree(p), cudaErrorInvalidValue);
	CKE(cudaGetLastError(), cudaErrorInvalidValue);
	CKE(cudaGetLastError(), cudaSuccess);
	struct gpupool_device_stats st = e2e_stats(0);
	CHECK(st.invalid_frees == 2 && st.live_blocks == 1 && st.frees == 1 && st.allocs == 2);
	CHECK(st.allocated_bytes == 8192);
	CK(cudaMemset(q, 0x3C, 8192)); /* q is still q's */
	CHECK(e2e_dev_all(q, 8192, 0x3C));
	CK(cudaFree(q));
	void *r = NULL;
	CK(cudaMalloc(&r, 4096));
	CK(cudaMemset(r, 0x3D, 4096));
	CHECK(e2e_dev_all(r, 4096, 0x3D));
	CK(cudaFree(r));

	/* out of memory: 8 MiB blocks until the 64 MiB device is full */
	void *blk[32];
	int n = 0;
	cudaError_t e = cudaSuccess;
	while (n < 32 && (e = cudaMalloc(&blk[n], 8 * MB)) == cudaSuccess)
		n++;
	CHECK(n >= 4 && n < 8);
	CKE(e, cudaErrorMemoryAllocation);
	CKE(cudaGetLastError(), cudaErrorMemoryAllocation);
	CKE(cudaGetLastError(), cudaSuccess);
	st = e2e_stats(0);
	CHECK(st.ooms == 1 && st.oom_retries >= 1);
	for (int i = 0; i < n; i++)
		CK(cudaFree(blk[i]));
	e2e_wait_no_pending(0);
	CK(cudaMalloc(&blk[0], 8 * MB));
	CK(cudaFree(blk[0]));
	e2e_wait_no_pending(0);

	/* recovery: the cached segments are in the way of a 40 MiB block; the pool releases
	 * them and retries, and the failed real cudaMalloc leaves no error behind */
	uint64_t retries = e2e_stats(0).oom_retries;
	unsigned long frees = gpfake_calls("cudaFree");
	void *big = NULL;
	CK(cudaMalloc(&big, 40 * MB));
	CKE(cudaGetLastError(), cudaSuccess);
	st = e2e_stats(0);
	CHECK(st.oom_retries >= retries && st.segment_frees >= 3); /* the cache made room */
	CHECK(gpfake_calls("cudaFree") > frees);
	CK(cudaFree(big));
	CKE(cudaGetLastError(), cudaSuccess);

	/* recovery from an injected failure of the real cudaMalloc */
	release_all();
	uint64_t fails = e2e_stats(0).segment_alloc_failures;
	CHECK(gpfake_fail_nth("cudaMalloc", 1, cudaErrorMemoryAllocation) == 0);
	CK(cudaMalloc(&p, 4096));
	CHECK(e2e_stats(0).segment_alloc_failures == fails + 1); /* it did fail, and recovered */
	CKE(cudaGetLastError(), cudaSuccess);
	CK(cudaFree(p));

	/* a pending error of the program's own is not eaten by a recovery */
	release_all();
	CKE(cudaSetDevice(99), cudaErrorInvalidDevice);
	CHECK(gpfake_fail_nth("cudaMalloc", 1, cudaErrorMemoryAllocation) == 0);
	CK(cudaMalloc(&p, 4096));
	CHECK(e2e_stats(0).segment_alloc_failures == fails + 2);
	CKE(cudaGetLastError(), cudaErrorInvalidDevice);
	CKE(cudaGetLastError(), cudaSuccess);
	/* ...nor by a plain successful allocation */
	CKE(cudaSetDevice(99), cudaErrorInvalidDevice);
	CK(cudaMalloc(&q, 4096));
	CK(cudaFree(q));
	CKE(cudaGetLastError(), cudaErrorInvalidDevice);
	CK(cudaFree(p));
	CHECK(e2e_stats(0).live_blocks == 0);
	return 0;
}
