/* addr_range: cuMemGetAddressRange and cuPointerGetAttribute(RANGE_START_ADDR, RANGE_SIZE)
 * answer for memory that is allocated only. For p = cuMemAlloc(1000): p + 1000 (past the
 * allocation), p + 4095 (under gpupool a free part of p's segment) and p after cuMemFree(p)
 * must give CUDA_ERROR_NOT_FOUND (500) from the range query and CUDA_ERROR_INVALID_VALUE (1)
 * from both attributes, as natively on an H200; a live allocation q gives a range that
 * starts at q and holds its 1000 bytes, the same from the query and the attributes.
 * Exit 0 pass, 1 fail, 77 skip (no GPU). */
#include <cuda.h>

#include "common.h"

static int failed;

/* The three answers for an address that no allocation holds. */
static void not_allocated(const char *what, CUdeviceptr x)
{
	CUdeviceptr base = 0;
	size_t size = 0;
	CUresult r = cuMemGetAddressRange(&base, &size, x);
	CUresult s = cuPointerGetAttribute(&base, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, x);
	CUresult z = cuPointerGetAttribute(&size, CU_POINTER_ATTRIBUTE_RANGE_SIZE, x);
	if (r != CUDA_ERROR_NOT_FOUND || s != CUDA_ERROR_INVALID_VALUE || z != CUDA_ERROR_INVALID_VALUE) {
		fprintf(stderr, "FAIL %s: range %d, start %d, size %d; expected %d, %d, %d\n", what, (int)r, (int)s,
			(int)z, (int)CUDA_ERROR_NOT_FOUND, (int)CUDA_ERROR_INVALID_VALUE,
			(int)CUDA_ERROR_INVALID_VALUE);
		failed = 1;
	}
}

int main(void)
{
	gp_require_gpu();
	CUcontext primary = NULL;
	CU(cuDevicePrimaryCtxRetain(&primary, 0));
	CU(cuCtxSetCurrent(primary));
	CUdeviceptr p = 0, q = 0;
	CU(cuMemAlloc(&p, 1000));
	not_allocated("p + 1000", p + 1000);
	not_allocated("p + 4095", p + 4095);
	CU(cuMemAlloc(&q, 1000));
	CUdeviceptr base = 0, start = 0;
	size_t size = 0, asize = 0;
	CU(cuMemGetAddressRange(&base, &size, q + 10));
	CU(cuPointerGetAttribute(&start, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, q + 10));
	CU(cuPointerGetAttribute(&asize, CU_POINTER_ATTRIBUTE_RANGE_SIZE, q + 10));
	if (base != q || size < 1000 || start != base || asize != size) {
		fprintf(stderr, "FAIL q + 10: range base %s, size %zu; attributes start %s, size %zu\n",
			base == q ? "q" : "other", size, start == base ? "the same" : "other", asize);
		failed = 1;
	}
	CU(cuMemFree(p));
	not_allocated("p after cuMemFree", p);
	printf("addr_range: p+1000, p+4095, freed p: %s; live q: base %s, size %zu (shim %s)\n",
	       failed ? "WRONG" : "500 and 1 as natively", base == q ? "q" : "other", size,
	       gp_shim_loaded() ? "on" : "off");
	CU(cuMemFree(q));
	CU(cuDevicePrimaryCtxRelease(0));
	return failed;
}
