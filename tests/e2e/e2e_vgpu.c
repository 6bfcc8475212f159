/* A dlsym interposer shaped like HAMi-core's libvgpu.so (libe2e_vgpu.so): it exports its own
 * hooks of some driver entry points (cuMemAlloc_v2, cuMemFree_v2, cuMemcpyDtoH_v2, cuMemCreate: each counts
 * and calls "the real" one), and its dlsym answers any name beginning "cu" that it exports
 * with its hook, on any handle, looked up on its own handle; everything else it forwards. Its
 * "real" dlsym is the one dlvsym(RTLD_NEXT, "dlsym", V) finds for V = GLIBC_2.2.5, GLIBC_2.17,
 * GLIBC_2.34, in that order, as HAMi-core's; its "real" driver entry points are that dlsym's
 * answers on the handle of libcuda.so.1, loaded once on the first driver name. Built without
 * sanitizers (see e2e_tracer.c). */
#include <cuda.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "e2e_interposers.h"

typedef void *(*dlsym_fn)(void *, const char *);

static dlsym_fn real_dlsym;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static void *self;
static CUresult (*real_alloc)(CUdeviceptr *, size_t);
static CUresult (*real_free)(CUdeviceptr);
static CUresult (*real_dtoh)(void *, CUdeviceptr, size_t);
static CUresult (*real_create)(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *, unsigned long long);
static atomic_ulong n_alloc, n_free, n_dtoh, n_create;

#define VGPU_API __attribute__((visibility("default")))

VGPU_API unsigned long e2e_vgpu_calls(const char *name)
{
	if (!strcmp(name, "cuMemAlloc_v2"))
		return atomic_load(&n_alloc);
	if (!strcmp(name, "cuMemFree_v2"))
		return atomic_load(&n_free);
	if (!strcmp(name, "cuMemcpyDtoH_v2"))
		return atomic_load(&n_dtoh);
	if (!strcmp(name, "cuMemCreate"))
		return atomic_load(&n_create);
	return 0;
}

static void find_real(void)
{
	static const char *const versions[] = {"GLIBC_2.2.5", "GLIBC_2.17", "GLIBC_2.34"};
	for (size_t i = 0; !real_dlsym && i < sizeof versions / sizeof versions[0]; i++) {
		void *s = dlvsym(RTLD_NEXT, "dlsym", versions[i]);
		memcpy(&real_dlsym, &s, sizeof real_dlsym);
	}
}

static void load(void)
{
	Dl_info info;
	if (dladdr((void *)&n_alloc, &info) && info.dli_fname)
		self = dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
	void *table = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NODELETE);
	void *s = table ? real_dlsym(table, "cuMemAlloc_v2") : NULL;
	memcpy(&real_alloc, &s, sizeof s);
	s = table ? real_dlsym(table, "cuMemFree_v2") : NULL;
	memcpy(&real_free, &s, sizeof s);
	s = table ? real_dlsym(table, "cuMemcpyDtoH_v2") : NULL;
	memcpy(&real_dtoh, &s, sizeof s);
	s = table ? real_dlsym(table, "cuMemCreate") : NULL;
	memcpy(&real_create, &s, sizeof s);
}

VGPU_API void *dlsym(void *handle, const char *name)
{
	static pthread_once_t found = PTHREAD_ONCE_INIT;
	pthread_once(&found, find_real);
	if (!real_dlsym)
		return NULL;
	if (name[0] == 'c' && name[1] == 'u') {
		pthread_once(&once, load);
		void *f = self ? real_dlsym(self, name) : NULL;
		if (f)
			return f;
	}
	return real_dlsym(handle, name);
}

VGPU_API CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
	atomic_fetch_add(&n_alloc, 1);
	return real_alloc ? real_alloc(dptr, bytesize) : CUDA_ERROR_NOT_INITIALIZED;
}

VGPU_API CUresult cuMemFree_v2(CUdeviceptr dptr)
{
	atomic_fetch_add(&n_free, 1);
	return real_free ? real_free(dptr) : CUDA_ERROR_NOT_INITIALIZED;
}

VGPU_API CUresult cuMemCreate(CUmemGenericAllocationHandle *h, size_t size, const CUmemAllocationProp *prop,
			      unsigned long long flags)
{
	atomic_fetch_add(&n_create, 1);
	return real_create ? real_create(h, size, prop, flags) : CUDA_ERROR_NOT_INITIALIZED;
}

VGPU_API CUresult cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t n)
{
	atomic_fetch_add(&n_dtoh, 1);
	return real_dtoh ? real_dtoh(dst, src, n) : CUDA_ERROR_NOT_INITIALIZED;
}
