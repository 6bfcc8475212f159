/* Contract 4, cudaFree(0) and pointers the pool does not own reach the runtime: counted by
 * the fake's per-entry-point counters. Foreign pointers come from the fake's own cudaMalloc
 * and cudaMallocAsync (resolved from libcudart.so.13 itself, past the interposer), some
 * made before the pool existed and some after. */
#include <cuda_runtime_api.h>

#include "e2e_util.h"

typedef cudaError_t (*malloc_fn)(void **, size_t);
typedef cudaError_t (*malloc_async_fn)(void **, size_t, cudaStream_t);

int main(void)
{
	e2e_shm_dir();
	malloc_fn native_malloc;
	malloc_async_fn native_malloc_async;
	E2E_FN(native_malloc, e2e_native("cudaMalloc"));
	E2E_FN(native_malloc_async, e2e_native("cudaMallocAsync"));

	/* cudaFree(0): the context-initialising call reaches the runtime, before and after init */
	unsigned long f = gpfake_calls("cudaFree");
	CK(cudaFree(NULL));
	CHECK(gpfake_calls("cudaFree") == f + 1);

	void *before = NULL;
	CK(native_malloc(&before, 1 << 20));
	CHECK(gpfake_allocations(-1) == 1);

	void *mine = NULL;
	CK(cudaMalloc(&mine, 4096)); /* the pool exists now */
	CK(cudaFree(NULL));
	CHECK(gpfake_calls("cudaFree") == f + 2);

	cudaStream_t s;
	CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	void *after = NULL, *async_native = NULL;
	CK(native_malloc(&after, 8192));
	CK(native_malloc_async(&async_native, 65536, s));
	unsigned long nalloc = gpfake_allocations(-1);

	f = gpfake_calls("cudaFree");
	unsigned long fa = gpfake_calls("cudaFreeAsync");
	CK(cudaFree(before));
	CHECK(gpfake_calls("cudaFree") == f + 1);
	CK(cudaFree(after));
	CHECK(gpfake_calls("cudaFree") == f + 2);
	CK(cudaFreeAsync(async_native, s));
	CHECK(gpfake_calls("cudaFreeAsync") == fa + 1);
	CK(cudaStreamSynchronize(s));
	CHECK(gpfake_allocations(-1) == nalloc - 3);

	/* a pointer nobody allocated: the runtime's answer, unchanged */
	int host = 0;
	CKE(cudaFree(&host), cudaErrorInvalidValue);
	CHECK(gpfake_calls("cudaFree") == f + 3);
	CKE(cudaGetLastError(), cudaErrorInvalidValue);
	CKE(cudaGetLastError(), cudaSuccess);

	/* the pool's own block does not reach the runtime */
	CK(cudaFree(mine));
	CHECK(gpfake_calls("cudaFree") == f + 3);
	struct gpupool_device_stats st = e2e_stats(0);
	CHECK(st.passthrough_frees == 4);
	CHECK(st.frees == 1 && st.allocs == 1);
	/* cudaMemGetInfo and cudaGetDeviceCount reach the runtime too */
	unsigned long mi = gpfake_calls("cudaMemGetInfo");
	size_t fr = 0, to = 0;
	CK(cudaMemGetInfo(&fr, &to));
	CHECK(gpfake_calls("cudaMemGetInfo") > mi && to == gpfake_capacity(0));
	CK(cudaStreamDestroy(s));
	return 0;
}
