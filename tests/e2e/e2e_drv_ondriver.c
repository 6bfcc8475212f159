/* (c) The fake runtime on top of the fake driver (tests/fake/ondriver, its path the first
 * argument), as the real runtime sits on libcuda: its cudaMalloc takes memory from the
 * driver's cuMemAlloc, found through cuGetProcAddress_v2. gpupool serves each allocation
 * once, in the runtime layer: the pool counts one request per call and none through the
 * driver layer, and the driver sees only the pool's segments (the runtime's dlsym on
 * libcuda's handle got the real driver, never gpupool's driver entry points). The program
 * is not linked to any runtime: it loads the one it is given, as Python modules do. */
#include "e2e_drv.h"

#define N 300

int main(int argc, char **argv)
{
	CHECK(argc > 1);
	e2e_shm_dir();
	void *rt = dlopen(argv[1], RTLD_NOW | RTLD_GLOBAL);
	if (!rt)
		fprintf(stderr, "%s\n", dlerror());
	CHECK(rt != NULL);
	cudaError_t (*Malloc)(void **, size_t), (*Free)(void *);
	cudaError_t (*MallocAsync)(void **, size_t, cudaStream_t), (*FreeAsync)(void *, cudaStream_t);
	cudaError_t (*DeviceSynchronize)(void);
	E2E_FN(Malloc, dlsym(RTLD_DEFAULT, "cudaMalloc")); /* gpupool's, preloaded */
	E2E_FN(Free, dlsym(RTLD_DEFAULT, "cudaFree"));
	E2E_FN(MallocAsync, dlsym(RTLD_DEFAULT, "cudaMallocAsync"));
	E2E_FN(FreeAsync, dlsym(RTLD_DEFAULT, "cudaFreeAsync"));
	E2E_FN(DeviceSynchronize, dlsym(RTLD_DEFAULT, "cudaDeviceSynchronize"));
	void *mine;
	memcpy(&mine, &Malloc, sizeof mine);
	CHECK(mine != dlsym(rt, "cudaMalloc"));

	void *p[2 * N];
	for (int i = 0; i < N; i++)
		CHECK(Malloc(&p[i], 1000 + (size_t)i) == cudaSuccess);
	for (int i = N; i < 2 * N; i++)
		CHECK(MallocAsync(&p[i], 3000 + (size_t)i, 0) == cudaSuccess);
	void *cu = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
	CHECK(cu != NULL); /* the runtime loaded the driver */
	unsigned long (*calls)(const char *);
	size_t (*alloc_sizes)(size_t *, size_t);
	E2E_FN(calls, dlsym(cu, "gpfakecu_calls"));
	E2E_FN(alloc_sizes, dlsym(cu, "gpfakecu_alloc_sizes"));
	struct gpupool_device_stats st = e2e_stats(0);
	CHECK(st.allocs == 2 * N && st.driver_allocs == 0 && st.driver_passthrough_allocs == 0);
	size_t sizes[64];
	size_t n = alloc_sizes(sizes, 64);
	/* only the pool's segments reached the driver: whole ones, or ranges of virtual memory */
	CHECK(n <= 64 && n + calls("cuMemAddressReserve") == st.segment_allocs && st.segment_allocs > 0);
	for (size_t i = 0; i < n; i++)
		CHECK(sizes[i] >= (size_t)2 << 20);
	CHECK(calls("cuMemAlloc_v2") == n);
	for (int i = 0; i < N; i++)
		CHECK(Free(p[i]) == cudaSuccess);
	for (int i = N; i < 2 * N; i++)
		CHECK(FreeAsync(p[i], 0) == cudaSuccess);
	CHECK(DeviceSynchronize() == cudaSuccess);
	st = e2e_stats(0);
	CHECK(st.frees == 2 * N && st.driver_frees == 0 && calls("cuMemFree_v2") == 0);
	printf("%d runtime allocations served once: %zu driver allocations (segments of %zu bytes and more)\n", 2 * N, n,
	       (size_t)2 << 20);
	return 0;
}
