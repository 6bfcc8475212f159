/* A program that finds the driver as the CUDA runtime and cuda-python do, over a CUDA 11
 * driver (tests/fake/cuda11: no cuGetProcAddress_v2): it takes cuGetProcAddress_v2 where
 * dlsym on libcuda's handle finds it, else cuGetProcAddress. As without gpupool, dlsym must
 * not find cuGetProcAddress_v2 (on the handle, nor through RTLD_DEFAULT, where libgpupool.so
 * exports the name), so the program takes cuGetProcAddress, gpupool's, and what it finds
 * through it allocates from the pool. Asked for "cuGetProcAddress" at a version that has a
 * _v2 (12000), the driver gives its one version, and gpupool must not hand out its
 * cuGetProcAddress_v2 for it, neither when the driver's answer is its exported symbol nor
 * when it is another address (FAKECU_PROCADDR_INTERNAL=1, argument "internal"): the program
 * would call a function of five arguments with four. */
#include <cuda.h>

#include "e2e_util.h"

#define N 50

typedef CUresult (*get_v1_fn)(const char *, void **, int, cuuint64_t);
typedef CUresult (*get_v2_fn)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *);

static get_v1_fn get_v1;
static get_v2_fn get_v2;

/* The entry point `name` for CUDA 11.8, through whichever cuGetProcAddress the program took. */
static void *proc(const char *name)
{
	void *p = NULL;
	CUdriverProcAddressQueryResult st;
	CUresult e = get_v2 ? get_v2(name, &p, 11080, 0, &st) : get_v1(name, &p, 11080, 0);
	if (e != CUDA_SUCCESS)
		fprintf(stderr, "cuGetProcAddress%s(%s) -> CUresult %d\n", get_v2 ? "_v2" : "", name, (int)e);
	CHECK(e == CUDA_SUCCESS && p != NULL);
	return p;
}

int main(int argc, char **argv)
{
	int internal = argc > 1 && !strcmp(argv[1], "internal");
	e2e_shm_dir();
	void *h = dlopen("libcuda.so.1", RTLD_NOW);
	CHECK(h != NULL);
	int version = 0;
	CUresult (*driver_version)(int *);
	E2E_FN(driver_version, dlsym(h, "cuDriverGetVersion"));
	CHECK(driver_version(&version) == CUDA_SUCCESS && version == 11080);

	/* the program's choice: cuGetProcAddress_v2 where dlsym finds it */
	void *v2 = dlsym(h, "cuGetProcAddress_v2");
	if (v2)
		fprintf(stderr, "dlsym found cuGetProcAddress_v2 on a driver without it\n");
	CHECK(v2 == NULL);
	CHECK(dlsym(RTLD_DEFAULT, "cuGetProcAddress_v2") == NULL);
	memcpy(&get_v2, &v2, sizeof v2);
	E2E_FN(get_v1, dlsym(h, "cuGetProcAddress"));
	void *ours_v1 = dlsym(RTLD_DEFAULT, "cuGetProcAddress"), *got;
	memcpy(&got, &get_v1, sizeof got);
	CHECK(ours_v1 != NULL && got == ours_v1); /* gpupool's */

	CUresult (*init)(unsigned), (*retain)(CUcontext *, CUdevice), (*set)(CUcontext);
	CUresult (*alloc)(CUdeviceptr *, size_t), (*release)(CUdeviceptr);
	unsigned long (*calls)(const char *);
	E2E_FN(init, proc("cuInit"));
	E2E_FN(retain, proc("cuDevicePrimaryCtxRetain"));
	E2E_FN(set, proc("cuCtxSetCurrent"));
	E2E_FN(alloc, proc("cuMemAlloc"));
	E2E_FN(release, proc("cuMemFree"));
	E2E_FN(calls, dlsym(h, "gpfakecu_calls"));
	CUcontext ctx;
	CHECK(init(0) == CUDA_SUCCESS);
	CHECK(retain(&ctx, 0) == CUDA_SUCCESS);
	CHECK(set(ctx) == CUDA_SUCCESS);
	CUdeviceptr p[N];
	for (int i = 0; i < N; i++)
		CHECK(alloc(&p[i], 1000 + (size_t)i) == CUDA_SUCCESS);
	CHECK(e2e_stats(0).driver_allocs == N);
	unsigned long segments = calls("cuMemAlloc_v2") + calls("cuMemCreate"); /* whole, or chunks */
	CHECK(segments >= 1 && segments <= 2);
	for (int i = 0; i < N; i++)
		CHECK(release(p[i]) == CUDA_SUCCESS);
	CHECK(e2e_stats(0).driver_frees == N && calls("cuMemFree_v2") == 0);

	/* cuGetProcAddress of itself at 12.0: the driver's one version, never gpupool's _v2 */
	void *self = NULL;
	CHECK(get_v1("cuGetProcAddress", &self, 12000, 0) == CUDA_SUCCESS && self != NULL);
	CHECK(self != dlsym(RTLD_DEFAULT, "cuGetProcAddress_v2"));
	Dl_info info;
	CHECK(dladdr(self, &info) && info.dli_fname);
	/* gpupool's v1 whichever address the driver handed out: matched by address (its exported
	 * symbol) or, for another address, by the name it must have picked (the one version) */
	CHECK(self == ours_v1);
	(void)internal;
	get_v1_fn again;
	memcpy(&again, &self, sizeof again);
	void *q = NULL;
	CHECK(again("cuMemAlloc", &q, 11080, 0) == CUDA_SUCCESS && q != NULL);
	printf("CUDA 11 driver: cuGetProcAddress taken, %d allocations pooled in %lu segments; "
	       "cuGetProcAddress at 12.0 is %s's\n", N, segments, strrchr(info.dli_fname, '/') + 1);
	return 0;
}
