/* ctx_destroy: cuCtxDestroy of the primary context is refused by the driver
 * (CUDA_ERROR_INVALID_CONTEXT, 201 on an H200), and nothing changes: a block at the start
 * of an allocation is freed alone, and its neighbour stays usable (cuMemsetD8 0, its range
 * found). Natively that is the driver's behaviour; under gpupool the two blocks share a
 * segment, and a pool dropped on the refused call would have let cuMemFree free the whole
 * segment under the neighbour (cuMemsetD8 then answered 1, its range 500).
 * Exit 0 pass, 1 fail, 77 skip (no GPU, or a driver that destroys a primary context). */
#include <cuda.h>

#include "common.h"

int main(void)
{
	gp_require_gpu(); /* the runtime makes the primary context current */
	CUcontext primary = NULL;
	CU(cuDevicePrimaryCtxRetain(&primary, 0));
	CU(cuCtxSetCurrent(primary));
	CUdeviceptr a = 0, b = 0;
	CU(cuMemAlloc(&a, 1000));
	CU(cuMemAlloc(&b, 1000));
	CUresult d = cuCtxDestroy(primary);
	if (d == CUDA_SUCCESS) {
		printf("SKIP: this driver destroyed the primary context with cuCtxDestroy\n");
		return GP_SKIP;
	}
	EXPECT(d == CUDA_ERROR_INVALID_CONTEXT, "cuCtxDestroy(primary) -> %d, expected %d", (int)d,
	       (int)CUDA_ERROR_INVALID_CONTEXT);
	CUresult f = cuMemFree(a);
	CUresult m = cuMemsetD8(b, 0x5a, 1000);
	CUdeviceptr base = 0;
	size_t size = 0;
	CUresult r = cuMemGetAddressRange(&base, &size, b);
	unsigned char h[1000];
	CUresult c = m == CUDA_SUCCESS ? cuMemcpyDtoH(h, b, sizeof h) : m;
	size_t bad = 0;
	for (size_t i = 0; c == CUDA_SUCCESS && i < sizeof h; i++)
		bad += h[i] != 0x5a;
	printf("ctx_destroy: cuCtxDestroy(primary) -> %d; then cuMemFree(a) -> %d, cuMemsetD8(b) -> %d, "
	       "cuMemGetAddressRange(b) -> %d (base %s, size %zu), %zu bad bytes (shim %s)\n",
	       (int)d, (int)f, (int)m, (int)r, base == b ? "b" : "other", size, bad, gp_shim_loaded() ? "on" : "off");
	EXPECT(f == CUDA_SUCCESS, "cuMemFree of the first block failed");
	EXPECT(m == CUDA_SUCCESS && c == CUDA_SUCCESS && bad == 0, "its neighbour is no longer usable");
	EXPECT(r == CUDA_SUCCESS && base == b && size >= 1000, "its neighbour's range is gone");
	CU(cuMemFree(b));
	CU(cuDevicePrimaryCtxRelease(0));
	return 0;
}
