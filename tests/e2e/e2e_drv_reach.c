/* The driver layer reached by a program without the CUDA runtime: the entry points found
 * through cuGetProcAddress_v2 on libcuda's handle (argument "procaddr") or by dlsym of each
 * name on it ("dlsym") are gpupool's; each allocation is one pool request and the driver
 * sees only segment-sized allocations; a pooled block reports its own range, a sub-block
 * is not exported by IPC, a created context's allocations pass through (counted), and
 * cuMemGetInfo reports the limit (run with GPUPOOL_CONF=limit:64M). "unused": a program that
 * finds the driver through gpupool's dlsym and cuGetProcAddress_v2 but never allocates sees
 * no trace of gpupool (no page, no thread). */
#include "e2e_drv.h"

#define N 200

int main(int argc, char **argv)
{
	CHECK(argc > 1);
	int procaddr = strcmp(argv[1], "dlsym") != 0;
	e2e_shm_dir();
	struct e2e_drv d;
	e2e_drv_load(&d, procaddr);
	if (!strcmp(argv[1], "unused")) {
		CUstream s;
		CU(d.StreamCreate(&s, CU_STREAM_NON_BLOCKING));
		CU(d.StreamDestroy(s));
		CHECK(e2e_count_pages() == 0 && e2e_thread_count() == 1);
		printf("unused: no page, one thread\n");
		return 0;
	}
	/* what the program got is gpupool's export, not the driver's */
	void *ours = dlsym(RTLD_DEFAULT, "cuMemAlloc_v2"), *got;
	memcpy(&got, &d.MemAlloc, sizeof got);
	CHECK(ours != NULL && got == ours && got != dlsym(RTLD_DEFAULT, "gpfakecu_calls"));
	/* dlsym keeps the caller: RTLD_NEXT from this program searches after it, where
	 * libgpupool.so (preloaded) is */
	CHECK(dlsym(RTLD_NEXT, "gpupool_version") != NULL);

	size_t before = d.alloc_sizes(NULL, 0);
	CUdeviceptr p[N];
	for (int i = 0; i < N; i++)
		CU(d.MemAlloc(&p[i], 1000 + (size_t)i));
	struct gpupool_device_stats st = e2e_stats(0);
	CHECK(st.allocs == N && st.driver_allocs == N);
	size_t sizes[64];
	size_t n = d.alloc_sizes(sizes, 64);
	/* the pool's memory only: whole segments, or 2 MiB chunks of virtual memory */
	unsigned long chunks = d.calls("cuMemCreate");
	CHECK(n - before + chunks >= 1 && n - before + chunks <= 2 && n <= 64);
	for (size_t i = before; i < n; i++)
		CHECK(sizes[i] >= (size_t)2 << 20); /* segments only */
	CHECK(d.calls("cuMemAlloc_v2") == n);

	/* a pooled block's range is the block, not its segment */
	CUdeviceptr base = 0;
	size_t sz = 0;
	CU(d.MemGetAddressRange(&base, &sz, p[5] + 10));
	CHECK(base == p[5] && sz == 1005);
	CU(d.PointerGetAttribute(&base, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, p[7] + 1));
	CHECK(base == p[7]);
	CU(d.PointerGetAttribute(&sz, CU_POINTER_ATTRIBUTE_RANGE_SIZE, p[7] + 1));
	CHECK(sz == 1007);

	/* IPC: a block sharing its segment is refused, a whole segment is exported */
	CUipcMemHandle h;
	CUE(d.IpcGetMemHandle(&h, p[3]), CUDA_ERROR_INVALID_VALUE);
	CUdeviceptr big;
	CU(d.MemAlloc(&big, (size_t)12 << 20));
	CU(d.IpcGetMemHandle(&h, big));

	/* the per-thread-stream variant the driver picks for the flag is swapped for gpupool's */
	if (procaddr) {
		CUresult (*get)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *);
		E2E_FN(get, dlsym(d.handle, "cuGetProcAddress_v2"));
		void *pt = NULL;
		CUdriverProcAddressQueryResult qs;
		CU(get("cuMemAllocAsync", &pt, 13000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &qs));
		CHECK(pt != NULL && pt == dlsym(RTLD_DEFAULT, "cuMemAllocAsync_ptsz") && qs == CU_GET_PROC_ADDRESS_SUCCESS);
		CUresult (*alloc_ptsz)(CUdeviceptr *, size_t, CUstream);
		E2E_FN(alloc_ptsz, pt);
		CUdeviceptr x;
		CU(alloc_ptsz(&x, 777, 0)); /* stream 0: this thread's per-thread stream */
		CU(d.MemFreeAsync(x, CU_STREAM_PER_THREAD));
		CHECK(e2e_stats(0).driver_allocs == N + 2); /* and the whole-segment block above */
	}

	/* cuMemGetInfo: the limit is the total */
	size_t f = 0, t = 0;
	CU(d.MemGetInfo(&f, &t));
	CHECK(t == (size_t)64 << 20 && f <= t);

	unsigned long frees0 = d.calls("cuMemFree_v2");
	for (int i = 0; i < N; i++)
		CU(d.MemFree(p[i]));
	CU(d.MemFree(big));
	CUE(d.MemFree(p[0]), CUDA_ERROR_INVALID_VALUE); /* a double free */
	st = e2e_stats(0);
	CHECK(st.driver_frees == (uint64_t)(N + 1 + procaddr) && st.invalid_frees == 1);
	CHECK(d.calls("cuMemFree_v2") == frees0); /* the pool keeps its segments */

	/* another context than the primary one: passed through untouched, counted */
	CUcontext c;
	CU(d.CtxCreate(&c, 0, 0));
	unsigned long a0 = d.calls("cuMemAlloc_v2");
	CUdeviceptr q;
	CU(d.MemAlloc(&q, 4096));
	CHECK(d.calls("cuMemAlloc_v2") == a0 + 1);
	n = d.alloc_sizes(sizes, 64);
	CHECK(n <= 64 && sizes[n - 1] == 4096);
	CU(d.MemFree(q));
	CHECK(d.calls("cuMemFree_v2") == frees0 + 1);
	CU(d.CtxDestroy(c));
	CU(d.CtxSetCurrent(d.primary[0]));
	st = e2e_stats(0);
	CHECK(st.driver_passthrough_allocs == 1 && st.allocs == (uint64_t)(N + 1 + procaddr));
	printf("%s: %d allocations, %zu driver allocations (segments), passthrough %llu\n", argv[1], N + 1,
	       n - before - 1, (unsigned long long)st.driver_passthrough_allocs);
	return 0;
}
