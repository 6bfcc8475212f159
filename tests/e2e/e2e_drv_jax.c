/* JAX's (XLA's) way to the driver, under limit:64M: the program is linked to libcuda.so.1 and
 * calls cuMemCreate, cuMemRelease, cuMemMap & co. by name (the dynamic linker binds them: to
 * gpupool's exports where gpupool is preloaded), and takes more entry points through
 * cuGetProcAddress_v2. Its buffers are counted, and its growth is refused at the cap:
 *   prealloc   one arena of 75% of what cuMemGetInfo reports (XLA_PYTHON_CLIENT_PREALLOCATE's
 *              default): counted; growth past the limit refused
 *   grow       chunks of 4 MiB as arrays come (XLA_PYTHON_CLIENT_PREALLOCATE=false), until
 *              refused exactly at the limit, the driver not called for the refused one
 * Either way the release of every chunk gives the figures back. */
#include "e2e_drv.h"

#define MB ((size_t)1 << 20)

static CUmemAllocationProp prop0(void)
{
	CUmemAllocationProp p;
	memset(&p, 0, sizeof p);
	p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	p.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	return p;
}

int main(int argc, char **argv)
{
	e2e_shm_dir();
	CHECK(argc > 1);
	int prealloc = !strcmp(argv[1], "prealloc");
	CU(cuInit(0));
	CUcontext ctx;
	CU(cuDevicePrimaryCtxRetain(&ctx, 0));
	CU(cuCtxSetCurrent(ctx));
	/* what the dynamic linker bound, and what cuGetProcAddress_v2 hands out: gpupool's */
	CUresult (*get)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *) = cuGetProcAddress_v2;
	void *viaproc = NULL;
	CUdriverProcAddressQueryResult q;
	CU(get("cuMemCreate", &viaproc, 12000, 0, &q));
	Dl_info info;
	CHECK(dladdr(viaproc, &info) && strstr(info.dli_fname, "libgpupool"));
	CUresult (*bound)(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *, unsigned long long) =
		cuMemCreate;
	void *b;
	memcpy(&b, &bound, sizeof b);
	CHECK(b == viaproc);

	size_t fr = 0, tot = 0;
	CU(cuMemGetInfo(&fr, &tot));
	CHECK(tot == 64 * MB);
	CUmemAllocationProp prop = prop0();
	CUmemGenericAllocationHandle h[64];
	int n = 0;
	CUresult e;
	CUdeviceptr base;
	CU(cuMemAddressReserve(&base, 256 * MB, 0, 0, 0));
	size_t at = 0;
	if (prealloc) {
		size_t arena = tot / 4 * 3 / (2 * MB) * (2 * MB);
		CU(cuMemCreate(&h[n], arena, &prop, 0));
		CU(cuMemMap(base, arena, 0, h[n++], 0));
		at = arena;
		CHECK(e2e_stats(0).unpooled_vmm_bytes == arena);
		unsigned long before = gpfakecu_calls("cuMemCreate");
		CUE(cuMemCreate(&h[n], 32 * MB, &prop, 0), CUDA_ERROR_OUT_OF_MEMORY); /* 48 + 32 > 64 */
		CHECK(gpfakecu_calls("cuMemCreate") == before);
	} else {
		for (;;) {
			unsigned long before = gpfakecu_calls("cuMemCreate");
			e = cuMemCreate(&h[n], 4 * MB, &prop, 0);
			if (e != CUDA_SUCCESS) {
				CUE(e, CUDA_ERROR_OUT_OF_MEMORY);
				CHECK(gpfakecu_calls("cuMemCreate") == before);
				break;
			}
			CU(cuMemMap(base + at, 4 * MB, 0, h[n++], 0));
			at += 4 * MB;
			CHECK(n < 64);
		}
		CHECK(at == 64 * MB);
	}
	struct gpupool_device_stats st = e2e_stats(0);
	CHECK(st.unpooled_vmm_bytes == at && st.unpooled_refusals == 1 && st.limit_bytes == 64 * MB);
	CU(cuMemUnmap(base, at));
	for (int i = 0; i < n; i++)
		CU(cuMemRelease(h[i]));
	CU(cuMemAddressFree(base, 256 * MB));
	st = e2e_stats(0);
	CHECK(st.unpooled_vmm_bytes == 0 && st.unpooled_frees == (uint64_t)n);
	printf("JAX-like (%s): %zu MiB counted, growth refused at the limit, all given back\n", argv[1], at / MB);
	return 0;
}
