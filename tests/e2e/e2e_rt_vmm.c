/* The pool's virtual-memory segments under the runtime API: the fake runtime built on the
 * fake driver (tests/fake/ondriver, its path the first argument), as the real runtime sits on
 * libcuda. The runtime layer's pools take their chunks through the driver's own entry points
 * (never gpupool's driver hooks: nothing counted twice). Checked: cudaMalloc and
 * cudaMallocAsync served in chunks of one range, cudaMemset and cudaMemcpy on them across
 * chunk boundaries, cudaIpcGetMemHandle of a chunked block refused with the knob named and of
 * a large cudaMalloc (a whole segment) exported, gpupool_release giving back a free range in
 * the middle, and a driver that refuses maps: cudaErrorMemoryAllocation, the last error as
 * the runtime's, the page exact. The program is not linked to any runtime. */
#include <string.h>

#include "e2e_drv.h"

#define MiB ((size_t)1 << 20)

int main(int argc, char **argv)
{
	CHECK(argc > 1);
	e2e_shm_dir();
	void *rt = dlopen(argv[1], RTLD_NOW | RTLD_GLOBAL);
	if (!rt)
		fprintf(stderr, "%s\n", dlerror());
	CHECK(rt != NULL);
	cudaError_t (*Malloc)(void **, size_t), (*Free)(void *), (*Memset)(void *, int, size_t);
	cudaError_t (*Memcpy)(void *, const void *, size_t, enum cudaMemcpyKind);
	cudaError_t (*MallocAsync)(void **, size_t, cudaStream_t), (*FreeAsync)(void *, cudaStream_t);
	cudaError_t (*DeviceSynchronize)(void), (*GetLastError)(void);
	cudaError_t (*IpcGet)(cudaIpcMemHandle_t *, void *);
	E2E_FN(Malloc, dlsym(RTLD_DEFAULT, "cudaMalloc")); /* gpupool's, preloaded */
	E2E_FN(Free, dlsym(RTLD_DEFAULT, "cudaFree"));
	E2E_FN(MallocAsync, dlsym(RTLD_DEFAULT, "cudaMallocAsync"));
	E2E_FN(FreeAsync, dlsym(RTLD_DEFAULT, "cudaFreeAsync"));
	E2E_FN(Memset, dlsym(rt, "cudaMemset"));
	E2E_FN(Memcpy, dlsym(rt, "cudaMemcpy"));
	E2E_FN(DeviceSynchronize, dlsym(rt, "cudaDeviceSynchronize"));
	E2E_FN(GetLastError, dlsym(RTLD_DEFAULT, "cudaGetLastError"));
	E2E_FN(IpcGet, dlsym(RTLD_DEFAULT, "cudaIpcGetMemHandle"));
	long long (*release)(int);
	E2E_API(release, "gpupool_release");

	void *a, *b, *c, *big;
	CHECK(Malloc(&a, 3 * MiB) == cudaSuccess);
	CHECK(MallocAsync(&b, 3 * MiB, 0) == cudaSuccess);
	CHECK(Malloc(&c, 3 * MiB) == cudaSuccess);
	void *cu = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
	CHECK(cu != NULL);
	unsigned long (*calls)(const char *);
	size_t (*used)(int);
	int (*fail_nth)(const char *, unsigned long, CUresult);
	E2E_FN(calls, dlsym(cu, "gpfakecu_calls"));
	E2E_FN(used, dlsym(cu, "gpfakecu_used"));
	E2E_FN(fail_nth, dlsym(cu, "gpfakecu_fail_nth"));
	struct gpupool_device_stats st = e2e_stats(0);
	CHECK(st.vmm_granularity == 2 * MiB && st.allocs == 3 && st.driver_allocs == 0);
	CHECK(calls("cuMemCreate") == 5 && calls("cuMemAlloc_v2") == 0 && calls("cuMemAddressReserve") == 1);
	CHECK(used(0) == st.reserved_bytes && st.unpooled_bytes == 0); /* counted once, as pooled */

	/* the runtime's copies on chunked memory, across the chunk boundary at a + 2 MiB */
	char *h = malloc(3 * MiB);
	CHECK(h != NULL);
	CHECK(Memset(a, 0x3c, 3 * MiB) == cudaSuccess);
	CHECK(Memcpy(h, a, 3 * MiB, cudaMemcpyDeviceToHost) == cudaSuccess);
	for (size_t i = 0; i < 3 * MiB; i += 4096)
		CHECK(h[i] == 0x3c);
	memset(h, 0x7e, 3 * MiB);
	CHECK(Memcpy(c, h, 3 * MiB, cudaMemcpyHostToDevice) == cudaSuccess);
	CHECK(((unsigned char *)c)[3 * MiB - 1] == 0x7e);

	/* IPC: a chunked block refused (no handle made), a large cudaMalloc a whole segment */
	cudaIpcMemHandle_t ih;
	unsigned long ipc = calls("cuIpcGetMemHandle");
	CHECK(IpcGet(&ih, a) == cudaErrorInvalidValue);
	CHECK(GetLastError() == cudaErrorInvalidValue && GetLastError() == cudaSuccess);
	CHECK(Malloc(&big, 12 * MiB) == cudaSuccess);
	CHECK(IpcGet(&ih, big) == cudaSuccess);
	CHECK(calls("cuIpcGetMemHandle") <= ipc + 1);
	CHECK(Free(big) == cudaSuccess);

	/* the free range in the middle goes back, a's and c's bytes stay */
	CHECK(FreeAsync(b, 0) == cudaSuccess);
	CHECK(DeviceSynchronize() == cudaSuccess);
	size_t before = used(0);
	CHECK(release(0) > 0);
	CHECK(used(0) < before && used(0) == e2e_stats(0).reserved_bytes);
	CHECK(Memcpy(h, a, 3 * MiB, cudaMemcpyDeviceToHost) == cudaSuccess && h[3 * MiB - 1] == 0x3c);

	/* a driver that refuses every map: out of memory, as the runtime says it, nothing left
	 * (the pool's try and its retry after a release, both again as the GPU has the room:
	 * calls/ladder.c) */
	for (unsigned long n = 1; n <= 4; n++)
		CHECK(fail_nth("cuMemMap", n, CUDA_ERROR_OUT_OF_MEMORY) == 0);
	void *x = NULL;
	CHECK(Malloc(&x, 8 * MiB) == cudaErrorMemoryAllocation);
	CHECK(GetLastError() == cudaErrorMemoryAllocation && GetLastError() == cudaSuccess);
	st = e2e_stats(0);
	CHECK(used(0) == st.reserved_bytes && st.ooms == 1);
	CHECK(Malloc(&x, 8 * MiB) == cudaSuccess); /* and the next one works */
	CHECK(Free(x) == cudaSuccess);
	/* refused twice, as when the GPU was full, and the room there when the pool gave up (as
	 * when another process freed it meanwhile): tried once more, served, no out of memory */
	for (unsigned long n = 1; n <= 2; n++)
		CHECK(fail_nth("cuMemMap", n, CUDA_ERROR_OUT_OF_MEMORY) == 0);
	CHECK(Malloc(&x, 8 * MiB) == cudaSuccess);
	CHECK(e2e_stats(0).ooms == 1);
	CHECK(Free(x) == cudaSuccess);
	CHECK(Free(a) == cudaSuccess);
	CHECK(Free(c) == cudaSuccess);
	CHECK(DeviceSynchronize() == cudaSuccess);
	CHECK(release(0) > 0);
	CHECK(used(0) == 0 && e2e_stats(0).segments == 0);
	free(h);
	printf("runtime on virtual memory: chunks counted once, copies across chunks, IPC refused for chunks, "
	       "release in the middle, maps refused\n");
	return 0;
}
