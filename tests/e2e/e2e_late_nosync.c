/* The driver settles gpupool first (cuInit, cuMemAlloc through libcuda.so.1, no runtime in
 * the process), then the program dlopens a runtime that lacks an entry point the pool needs
 * (argv[1]: tests/fake/nosync, without cudaDeviceSynchronize) and allocates through
 * cudaMalloc (gpupool's, found in the global scope), under limit:64M. The runtime layer is
 * off, and the cap it cannot apply is not dropped: every allocation is refused
 * (cudaErrorInvalidValue), not served past the cap (before: 20 x 16 MiB served). */
#include <cuda.h>
#include <cuda_runtime_api.h>

#include "e2e_util.h"

#define MB ((size_t)1 << 20)

int main(int argc, char **argv)
{
	CHECK(argc > 1);
	e2e_shm_dir();
	void *drv = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
	CHECK(drv != NULL);
	CUresult (*init)(unsigned);
	CUresult (*retain)(CUcontext *, CUdevice);
	CUresult (*set)(CUcontext);
	CUresult (*alloc)(CUdeviceptr *, size_t);
	E2E_FN(init, dlsym(RTLD_DEFAULT, "cuInit"));
	E2E_FN(retain, dlsym(RTLD_DEFAULT, "cuDevicePrimaryCtxRetain"));
	E2E_FN(set, dlsym(RTLD_DEFAULT, "cuCtxSetCurrent"));
	E2E_FN(alloc, dlsym(RTLD_DEFAULT, "cuMemAlloc_v2"));
	CUcontext c;
	CHECK(init(0) == CUDA_SUCCESS && retain(&c, 0) == CUDA_SUCCESS && set(c) == CUDA_SUCCESS);
	CUdeviceptr d0;
	CHECK(alloc(&d0, 16 * MB) == CUDA_SUCCESS); /* the driver settles gpupool */
	CHECK(dlopen(argv[1], RTLD_NOW | RTLD_GLOBAL) != NULL);
	cudaError_t (*rt_malloc)(void **, size_t);
	E2E_FN(rt_malloc, dlsym(RTLD_DEFAULT, "cudaMalloc")); /* gpupool's: LD_PRELOAD */
	int served = 0;
	cudaError_t e = cudaSuccess;
	for (int i = 0; i < 20; i++) {
		void *p = NULL;
		e = rt_malloc(&p, 16 * MB);
		served += e == cudaSuccess;
	}
	printf("cudaMalloc after the late runtime: %d x 16 MiB served, the last answer %d\n", served, (int)e);
	CHECK(served == 0 && e == cudaErrorInvalidValue);
	CUdeviceptr d1;
	CHECK(alloc(&d1, 16 * MB) == CUDA_ERROR_INVALID_VALUE); /* every allocation, from now on */
	return 0;
}
