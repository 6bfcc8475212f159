/* A CUDA runtime loaded after the first CUDA call. This program is not linked to libcudart:
 * it probes for CUDA as a plugin host would, with dlsym(RTLD_DEFAULT, "cudaMalloc"), which
 * finds gpupool's. With no runtime in the process every call answers
 * cudaErrorInsufficientDriver (what libcudart answers where there is no driver) and nothing
 * is created; once libcudart.so.13 is dlopen'ed (RTLD_LOCAL), the next call finds it and
 * allocations are pooled. */
#include <cuda_runtime_api.h>

#include "e2e_util.h"

typedef cudaError_t (*malloc_fn)(void **, size_t);
typedef cudaError_t (*free_fn)(void *);
typedef unsigned long (*calls_fn)(const char *);

int main(void)
{
	e2e_shm_dir();
	int threads = e2e_thread_count(); /* qemu-user has threads of its own */
	malloc_fn cu_malloc;
	free_fn cu_free;
	E2E_FN(cu_malloc, dlsym(RTLD_DEFAULT, "cudaMalloc")); /* gpupool's: LD_PRELOAD */
	E2E_FN(cu_free, dlsym(RTLD_DEFAULT, "cudaFree"));
	CHECK(dlopen("libcudart.so.13", RTLD_NOW | RTLD_NOLOAD) == NULL);

	void *p = NULL;
	CHECK(cu_malloc(&p, 4096) == cudaErrorInsufficientDriver);
	CHECK(cu_free(NULL) == cudaErrorInsufficientDriver);
	struct gpupool_device_stats st;
	CHECK(e2e_stats_api()(0, &st) == -ENOSYS);
	CHECK(e2e_count_pages() == 0 && e2e_thread_count() == threads);

	void *h = dlopen("libcudart.so.13", RTLD_NOW | RTLD_LOCAL);
	CHECK(h != NULL);
	calls_fn calls;
	E2E_FN(calls, dlsym(h, "gpfake_calls"));
	CHECK(cu_free(NULL) == cudaSuccess && calls("cudaFree") == 1);
	void *q[4];
	for (int i = 0; i < 4; i++)
		CHECK(cu_malloc(&q[i], 4096) == cudaSuccess);
	CHECK(calls("cudaMalloc") == 1); /* one segment: pooled */
	CHECK(e2e_stats(0).allocs == 4 && e2e_count_pages() == 1);
	for (int i = 0; i < 4; i++)
		CHECK(cu_free(q[i]) == cudaSuccess);
	CHECK(calls("cudaFree") == 1);
	return 0;
}
