/* A program with the CUDA runtime linked in statically, as plain nvcc builds one: the fake
 * runtime's source is compiled into this executable (-DFK_ON_DRIVER), so there is no
 * libcudart for gpupool's runtime layer to interpose; the runtime finds the driver through
 * cuGetProcAddress_v2 on libcuda's handle and gets gpupool's driver entry points. Each
 * cudaMalloc is served by the pool through the driver layer; a recovered out-of-memory
 * leaves no stale error; a failed one is cudaErrorMemoryAllocation, once. The runtime's
 * cudaGetDriverEntryPoint asks the same cuGetProcAddress_v2, gpupool's, so what it hands out
 * is gpupool's too: its cuMemCreate is counted. Run with FAKECUDA_CAPACITY=64M. */
#define CUDA_ENABLE_DEPRECATED /* cudaGetDriverEntryPoint is deprecated in CUDA 13 */
#include "e2e_drv.h"

#define N 300

int main(void)
{
	e2e_shm_dir();
	CK(cudaSetDevice(0));
	void *p[N];
	for (int i = 0; i < N; i++)
		CK(cudaMalloc(&p[i], 1000 + (size_t)i));
	struct gpupool_device_stats st = e2e_stats(0);
	CHECK(st.allocs == N && st.driver_allocs == N);
	void *cu = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
	CHECK(cu != NULL);
	size_t (*alloc_sizes)(size_t *, size_t);
	int (*fail_nth)(const char *, unsigned long, CUresult);
	E2E_FN(alloc_sizes, dlsym(cu, "gpfakecu_alloc_sizes"));
	E2E_FN(fail_nth, dlsym(cu, "gpfakecu_fail_nth"));
	size_t sizes[64];
	size_t n = alloc_sizes(sizes, 64);
	unsigned long (*calls)(const char *);
	E2E_FN(calls, dlsym(cu, "gpfakecu_calls"));
	CHECK(n + calls("cuMemCreate") > 0 && n + calls("cuMemCreate") <= 2); /* segments, or chunks */
	for (int i = 0; i < N; i++)
		CK(cudaFree(p[i]));

	/* out of memory recovered: the cached segment is released and the request retried */
	void *a, *b;
	CK(cudaMalloc(&a, (size_t)40 << 20));
	CK(cudaFree(a));
	CK(cudaMalloc(&b, (size_t)50 << 20));
	CKE(cudaGetLastError(), cudaSuccess);
	CK(cudaFree(b));
	long long (*release)(int);
	E2E_API(release, "gpupool_release");
	CHECK(release(0) > 0);

	/* out of memory for good: the driver fails four times (the pool's try and its retry
	 * after a release, both again as the GPU has the room: calls/ladder.c); a small
	 * request's memory is a chunk of virtual memory (segments:auto) */
	for (unsigned long k = 1; k <= 4; k++)
		CHECK(fail_nth("cuMemCreate", k, CUDA_ERROR_OUT_OF_MEMORY) == 0);
	void *c = NULL;
	CKE(cudaMalloc(&c, 1000), cudaErrorMemoryAllocation);
	CKE(cudaGetLastError(), cudaErrorMemoryAllocation);
	CKE(cudaGetLastError(), cudaSuccess);
	CK(cudaMalloc(&c, 1000));
	CK(cudaFree(c));
	st = e2e_stats(0);
	CHECK(st.ooms == 1 && st.driver_allocs == N + 3 && st.driver_frees == N + 3);

	/* the driver's entry points as this runtime hands them out: gpupool's, counted */
	void *fn = NULL;
	enum cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
	CK(cudaGetDriverEntryPoint("cuMemCreate", &fn, cudaEnableDefault, &q));
	CHECK(q == cudaDriverEntryPointSuccess && fn == dlsym(RTLD_DEFAULT, "cuMemCreate"));
	CUresult (*create)(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *, unsigned long long);
	CUresult (*release_h)(CUmemGenericAllocationHandle);
	E2E_FN(create, fn);
	CK(cudaGetDriverEntryPointByVersion("cuMemRelease", &fn, 12000, cudaEnableDefault, &q));
	E2E_FN(release_h, fn);
	CUmemAllocationProp prop;
	memset(&prop, 0, sizeof prop);
	prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	CUmemGenericAllocationHandle h;
	CHECK(create(&h, (size_t)16 << 20, &prop, 0) == CUDA_SUCCESS);
	CHECK(e2e_stats(0).unpooled_vmm_bytes == (size_t)16 << 20);
	CHECK(release_h(h) == CUDA_SUCCESS);
	CHECK(e2e_stats(0).unpooled_vmm_bytes == 0);
	st = e2e_stats(0);
	printf("static runtime: %llu allocations through the driver layer, %llu OOM retries, %llu OOMs\n",
	       (unsigned long long)st.driver_allocs, (unsigned long long)st.oom_retries, (unsigned long long)st.ooms);
	return 0;
}
