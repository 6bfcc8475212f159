/* Shared helpers of the GPU suite (the tests here and bench/gpu/hostcost.cu): return-code
 * checks, the no-GPU skip (exit 77), pattern kernels with a time-based busy wait, and
 * detection of libgpupool.so in the process (dlsym of gpupool_version). Header-only. */
#ifndef GP_GPU_COMMON_H
#define GP_GPU_COMMON_H

#include <cuda_runtime.h>
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define GP_SKIP 77

#define CK(x)                                                                                      \
	do {                                                                                       \
		cudaError_t e_ = (x);                                                              \
		if (e_ != cudaSuccess) {                                                           \
			fprintf(stderr, "FAIL %s:%d: %s -> %s (%d)\n", __FILE__, __LINE__, #x,      \
				cudaGetErrorString(e_), (int)e_);                                  \
			exit(1);                                                                   \
		}                                                                                  \
	} while (0)

/* The driver API's CK, for programs that include cuda.h before this header. */
#ifdef __cuda_cuda_h__
#define CU(x)                                                                                      \
	do {                                                                                       \
		CUresult e_ = (x);                                                                 \
		if (e_ != CUDA_SUCCESS) {                                                          \
			fprintf(stderr, "FAIL %s:%d: %s -> CUresult %d\n", __FILE__, __LINE__, #x, (int)e_); \
			exit(1);                                                                   \
		}                                                                                  \
	} while (0)
#endif

#define EXPECT(cond, ...)                                                                          \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);             \
			fprintf(stderr, __VA_ARGS__);                                              \
			fputc('\n', stderr);                                                       \
			exit(1);                                                                   \
		}                                                                                  \
	} while (0)

/* Exit 77 (skip) when no device can be used. */
static inline void gp_require_gpu(void)
{
	int n = 0;
	cudaError_t e = cudaGetDeviceCount(&n);
	if (e != cudaSuccess || n == 0) {
		printf("SKIP: no CUDA device (%s)\n", cudaGetErrorString(e));
		exit(GP_SKIP);
	}
	CK(cudaSetDevice(0));
	CK(cudaFree(0)); /* create the context outside any timing */
}

/* Non-NULL when libgpupool.so is loaded (LD_PRELOAD). */
static inline void *gp_shim_sym(const char *name) { return dlsym(RTLD_DEFAULT, name); }
static inline int gp_shim_loaded(void) { return gp_shim_sym("gpupool_version") != NULL; }

static inline double gp_now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static inline uint64_t gp_xorshift64(uint64_t *s)
{
	uint64_t x = *s;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return *s = x;
}

#ifdef __CUDACC__
__device__ static inline uint64_t gp_globaltimer(void)
{
	uint64_t t;
	asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
	return t;
}

/* Busy-waits about `spin_ns` (each thread from its own start; the grid is small enough to be
 * resident at once), then writes word i = pat + i for i < n. The wait uses clock64 in a loop
 * bounded by the global timer so that it means wall time whatever the clock rate is. */
__global__ static void gp_spin_fill(uint32_t *p, size_t n, uint32_t pat, uint64_t spin_ns)
{
	if (spin_ns) {
		uint64_t t0 = gp_globaltimer();
		while (gp_globaltimer() - t0 < spin_ns) {
			long long c = clock64();
			while (clock64() - c < 1000)
				;
		}
	}
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
		p[i] = pat + (uint32_t)i;
}

/* Adds to *bad the number of words i < n with p[i] != pat + i. */
__global__ static void gp_check(const uint32_t *p, size_t n, uint32_t pat, unsigned long long *bad)
{
	unsigned long long local = 0;
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
		local += p[i] != pat + (uint32_t)i;
	if (local)
		atomicAdd(bad, local);
}

#define GP_GRID 264 /* 2 blocks of 256 threads per SM of an H200: resident at once */
#define GP_BLOCK 256

static inline void gp_fill(uint32_t *p, size_t bytes, uint32_t pat, double spin_us, cudaStream_t s)
{
	gp_spin_fill<<<GP_GRID, GP_BLOCK, 0, s>>>(p, bytes / 4, pat, (uint64_t)(spin_us * 1000.0));
	CK(cudaGetLastError());
}

static inline void gp_check_async(const uint32_t *p, size_t bytes, uint32_t pat, unsigned long long *bad,
				  cudaStream_t s)
{
	gp_check<<<GP_GRID, GP_BLOCK, 0, s>>>(p, bytes / 4, pat, bad);
	CK(cudaGetLastError());
}
#endif

#endif
