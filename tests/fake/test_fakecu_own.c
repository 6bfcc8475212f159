/* The fake driver's cuGetProcAddress hands out its own entry points, as the real driver's
 * does, even where an object earlier in the search order (a preloaded interposer such as
 * libgpupool.so; here this program, linked -rdynamic) exports the same names: in a -fPIC
 * library, the address of one of its own exported functions binds to the first definition
 * of the name in the process unless the library is linked -Bsymbolic-functions (or takes
 * hidden aliases), and a fake that handed out the interposer's entry points would hide a
 * runtime's escape from it. Loads libcuda.so.1 from LD_LIBRARY_PATH; links nothing fake. */
#include <cuda.h>
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#undef cuGetProcAddress
#undef cuMemAlloc

/* The interposer's exports (never called). */
__attribute__((visibility("default"))) CUresult cuMemCreate(CUmemGenericAllocationHandle *h, size_t n,
							    const CUmemAllocationProp *p, unsigned long long f);
__attribute__((visibility("default"))) CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t n);
__attribute__((visibility("default"))) CUresult cuMemRelease(CUmemGenericAllocationHandle h);
__attribute__((visibility("default"))) CUresult cuMemAllocAsync_ptsz(CUdeviceptr *p, size_t n, CUstream s);
CUresult cuMemCreate(CUmemGenericAllocationHandle *h, size_t n, const CUmemAllocationProp *p, unsigned long long f)
{
	(void)h, (void)n, (void)p, (void)f;
	return CUDA_ERROR_UNKNOWN;
}
CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t n)
{
	(void)p, (void)n;
	return CUDA_ERROR_UNKNOWN;
}
CUresult cuMemRelease(CUmemGenericAllocationHandle h)
{
	(void)h;
	return CUDA_ERROR_UNKNOWN;
}
CUresult cuMemAllocAsync_ptsz(CUdeviceptr *p, size_t n, CUstream s)
{
	(void)p, (void)n, (void)s;
	return CUDA_ERROR_UNKNOWN;
}

int main(void)
{
	void *h = dlopen("libcuda.so.1", RTLD_NOW);
	if (!h) {
		fprintf(stderr, "%s\n", dlerror());
		return 1;
	}
	CUresult (*get)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *);
	void *s = dlsym(h, "cuGetProcAddress_v2");
	memcpy(&get, &s, sizeof get);
	static const struct {
		const char *base;
		cuuint64_t flags;
		const char *full;
	} t[] = {{"cuMemCreate", 0, "cuMemCreate"},
		 {"cuMemAlloc", 0, "cuMemAlloc_v2"},
		 {"cuMemRelease", 0, "cuMemRelease"},
		 {"cuMemAllocAsync", CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, "cuMemAllocAsync_ptsz"}};
	int fail = !get;
	for (size_t i = 0; !fail && i < sizeof t / sizeof t[0]; i++) {
		void *fn = NULL;
		CUdriverProcAddressQueryResult st;
		Dl_info info;
		if (get(t[i].base, &fn, 13000, t[i].flags, &st) != CUDA_SUCCESS || !fn || !dladdr(fn, &info) ||
		    !info.dli_fname || !strstr(info.dli_fname, "libcuda.so") || fn == dlsym(RTLD_DEFAULT, t[i].full) ||
		    fn != dlsym(h, t[i].full)) {
			fprintf(stderr, "cuGetProcAddress_v2(%s) = %p (%s), not the fake driver's own %s %p\n", t[i].base, fn,
				fn && dladdr(fn, &info) ? info.dli_fname : "?", t[i].full, dlsym(h, t[i].full));
			fail = 1;
		}
	}
	if (!fail)
		printf("the fake driver's cuGetProcAddress hands out its own entry points, not the program's exports\n");
	return fail;
}
