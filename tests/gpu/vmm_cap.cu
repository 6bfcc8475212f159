/* vmm_cap: the driver's virtual memory and CUDA's own errors on a real GPU (issue 32, items 1
 * and 2).
 *   vmm_cap cap        NVIDIA's pattern (cuMemCreate, cuMemMap, cuMemSetAccess, cuMemRelease:
 *                      the mapping keeps the memory) 16 times a block of 2% of the card. Under
 *                      the shim with GPUPOOL_CONF=limit:4%, at most 2 are made and cuMemGetInfo
 *                      says less than a block free; natively all 16. Then the driver's own
 *                      behaviour gpupool relies on: cuMemRetainAllocationHandle on a mapped,
 *                      released handle hands out the handle value it was mapped with, and one
 *                      cuMemUnmap of two mappings side by side unmaps both.
 *   vmm_cap poolrange  two 1 MiB blocks of cuMemAlloc side by side: cuMemUnmap, cuMemSetAccess,
 *                      cuMemAddressFree and cuMemMap on them and on their granule answer
 *                      CUDA_ERROR_INVALID_VALUE natively, and under the shim, whose pool
 *                      serves them from a virtual-memory segment (docs/driver.md, "The pool's
 *                      memory is not a mapping of the program's"); the neighbour keeps its bytes.
 *                      Prints what cuMemGetAccess answers on a block.
 *   vmm_cap nodevice   (run with CUDA_VISIBLE_DEVICES set empty) cudaMalloc and cudaMallocAsync
 *                      answer cudaErrorNoDevice, and cudaGetLastError after them, under the
 *                      shim as natively: not cudaErrorMemoryAllocation.
 * Prints one line per mode; exit 77 without a GPU (cap). */
#include <cuda.h>

#include "common.h"

static bool shim_loaded(void) { return dlsym(RTLD_DEFAULT, "gpupool_version") != NULL; }

/* Pinned memory on device 0, as cuMemCreate takes it */
static CUmemAllocationProp device0_prop(void)
{
	CUmemAllocationProp prop;
	memset(&prop, 0, sizeof prop);
	prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	prop.location.id = 0;
	return prop;
}

static int mode_cap(void)
{
	gp_require_gpu();
	/* the card's own size: under a limit, cudaMemGetInfo's total is the limit (the first run
	 * on an H100 sized the blocks from it, 2% of 4%, and all 16 fitted under the cap) */
	size_t fr = 0, total = 0;
	CK(cudaMemGetInfo(&fr, &total));
	CUdevice dev0 = 0;
	CU(cuDeviceGet(&dev0, 0));
	CU(cuDeviceTotalMem(&total, dev0));
	CUmemAllocationProp prop = device0_prop();
	size_t gran = 0;
	CU(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
	const char *conf = getenv("GPUPOOL_CONF");
	bool limited = shim_loaded() && conf && strstr(conf, "limit:4%");
	/* 2% of the card: under limit:4%, two fit and a third does not (a pool segment or two
	 * of the runtime's own may take a little of the 4% first) */
	size_t block = (total / 50 + gran - 1) / gran * gran;
	CUdeviceptr va[16];
	CUmemGenericAllocationHandle h;
	int made = 0;
	CUresult last = CUDA_SUCCESS;
	for (int i = 0; i < 16; i++) {
		last = cuMemCreate(&h, block, &prop, 0);
		if (last == CUDA_ERROR_OUT_OF_MEMORY)
			break;
		CU(last);
		CU(cuMemAddressReserve(&va[made], block, 0, 0, 0));
		CU(cuMemMap(va[made], block, 0, h, 0));
		CUmemAccessDesc acc = {{CU_MEM_LOCATION_TYPE_DEVICE, 0}, CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
		CU(cuMemSetAccess(va[made], block, &acc, 1));
		CU(cuMemRelease(h));
		made++;
	}
	size_t f2 = 0, t2 = 0;
	CU(cuMemGetInfo(&f2, &t2));
	printf("vmm cap: shim=%d limited=%d block=%.1f MiB made=%d of 16, cuMemGetInfo free %.1f MiB of %.1f MiB\n",
	       shim_loaded(), limited, block / 1048576.0, made, f2 / 1048576.0, t2 / 1048576.0);
	if (limited) {
		EXPECT(made <= 2, "limit:4%% let %d blocks of 2%% be mapped", made);
		EXPECT(f2 < block, "cuMemGetInfo says %zu bytes free with the limit's blocks all mapped", f2);
	} else {
		EXPECT(made == 16, "natively only %d blocks of 2%% were made", made);
	}
	for (int i = 0; i < made; i++) {
		CU(cuMemUnmap(va[i], block));
		CU(cuMemAddressFree(va[i], block));
	}
	/* the driver's own behaviour: a retain hands out the handle the memory was mapped with */
	/* (a handle is mapped whole: the real driver refuses to map part of one, 801) */
	CUdeviceptr r = 0;
	CU(cuMemCreate(&h, gran, &prop, 0));
	CU(cuMemAddressReserve(&r, 2 * gran, 0, 0, 0));
	CU(cuMemMap(r, gran, 0, h, 0));
	CUmemGenericAllocationHandle h2;
	CU(cuMemCreate(&h2, gran, &prop, 0));
	CU(cuMemMap(r + gran, gran, 0, h2, 0));
	CUmemGenericAllocationHandle back = 0;
	CU(cuMemRetainAllocationHandle(&back, (void *)(uintptr_t)r));
	EXPECT(back == h, "cuMemRetainAllocationHandle handed out %llx, mapped with %llx", (unsigned long long)back,
	       (unsigned long long)h);
	CU(cuMemRelease(back));
	CU(cuMemRelease(h));
	CU(cuMemRelease(h2));
	CUresult both = cuMemUnmap(r, 2 * gran); /* two mappings side by side */
	printf("vmm driver: retain hands out the mapped handle; one cuMemUnmap of two mappings -> %d\n", (int)both);
	if (both != CUDA_SUCCESS) { /* the driver wants one call per mapping: gpupool handles both */
		CU(cuMemUnmap(r, gran));
		CU(cuMemUnmap(r + gran, gran));
	}
	CU(cuMemAddressFree(r, 2 * gran));
	return 0;
}

static int mode_poolrange(void)
{
	gp_require_gpu();
	CK(cudaFree(0));
	CUmemAllocationProp prop = device0_prop();
	size_t gran = 0;
	CU(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
	CUdeviceptr a = 0, b = 0;
	CU(cuMemAlloc(&a, 1 << 20));
	CU(cuMemAlloc(&b, 1 << 20));
	CU(cuMemsetD8(b, 0x5a, 1 << 20));
	CU(cuCtxSynchronize());
	CUdeviceptr g = a & ~(CUdeviceptr)(gran - 1);
	CUmemAccessDesc rw = {{CU_MEM_LOCATION_TYPE_DEVICE, 0}, CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
	CUmemGenericAllocationHandle h;
	CU(cuMemCreate(&h, gran, &prop, 0));
	CUresult e[8] = {
		cuMemSetAccess(g, gran, &rw, 1), cuMemSetAccess(a, 1 << 20, &rw, 1), cuMemMap(g + gran, gran, 0, h, 0),
		cuMemUnmap(a, 1 << 20),          cuMemUnmap(g, gran),                cuMemAddressFree(g, gran),
		cuMemAddressFree(a, 1 << 20),    CUDA_SUCCESS,
	};
	CU(cuMemRelease(h));
	unsigned long long flags = 0;
	CUmemLocation loc = {CU_MEM_LOCATION_TYPE_DEVICE, 0};
	CUresult ga = cuMemGetAccess(&flags, &loc, a);
	unsigned char c = 0;
	CUresult rd = cuMemcpyDtoH(&c, b, 1);
	printf("poolrange: shim=%d setaccess %d %d map %d unmap %d %d addressfree %d %d; getaccess %d (flags %llu); "
	       "neighbour %d 0x%02x\n",
	       shim_loaded(), (int)e[0], (int)e[1], (int)e[2], (int)e[3], (int)e[4], (int)e[5], (int)e[6], (int)ga, flags,
	       (int)rd, c);
	for (int i = 0; i < 7; i++)
		EXPECT(e[i] == CUDA_ERROR_INVALID_VALUE, "call %d on cuMemAlloc's memory -> %d", i, (int)e[i]);
	EXPECT(rd == CUDA_SUCCESS && c == 0x5a, "the neighbouring block: %d, 0x%02x", (int)rd, c);
	CU(cuMemFree(a));
	CU(cuMemFree(b));
	return 0;
}

static int mode_nodevice(void)
{
	void *p = NULL;
	cudaError_t a = cudaMalloc(&p, 1 << 20);
	cudaError_t l1 = cudaGetLastError();
	cudaError_t b = cudaMallocAsync(&p, 1 << 20, 0);
	cudaError_t l2 = cudaGetLastError();
	printf("nodevice: shim=%d cudaMalloc=%s last=%s cudaMallocAsync=%s last=%s\n", shim_loaded(), cudaGetErrorName(a),
	       cudaGetErrorName(l1), cudaGetErrorName(b), cudaGetErrorName(l2));
	EXPECT(a == cudaErrorNoDevice && l1 == a, "cudaMalloc -> %s, then %s", cudaGetErrorName(a), cudaGetErrorName(l1));
	EXPECT(b == cudaErrorNoDevice && l2 == b, "cudaMallocAsync -> %s, then %s", cudaGetErrorName(b),
	       cudaGetErrorName(l2));
	return 0;
}

int main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "cap"))
		return mode_cap();
	if (argc > 1 && !strcmp(argv[1], "poolrange"))
		return mode_poolrange();
	if (argc > 1 && !strcmp(argv[1], "nodevice"))
		return mode_nodevice();
	fprintf(stderr, "usage: vmm_cap cap|poolrange|nodevice\n");
	return 2;
}
