/* gpupool over a CUDA 12 runtime (libcudart.so.12, e.g. from the nvidia-cuda-runtime-cu12
 * wheel), which a program built with the CUDA 13 toolkit cannot link against: this program
 * uses no CUDA header and loads the runtime itself, as a Python framework does, then calls
 * cudaMalloc/cudaFree through the global scope (gpupool's, when preloaded: its unversioned
 * definitions take references of any runtime version). Checks the bytes written and read
 * back; under the shim, that the pool served every allocation once, in the runtime layer.
 * Exit 77 without libcudart.so.12 or a GPU.   cc -O2 tests/gpu/cudart12.c -o cudart12 -ldl */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../include/gpupool/stats.h"

typedef int err_t; /* cudaError_t */
#define N 1000

static void *sym(void *h, const char *name)
{
	void *s = h ? dlsym(h, name) : dlsym(RTLD_DEFAULT, name);
	if (!s) {
		fprintf(stderr, "FAIL: %s not found\n", name);
		exit(1);
	}
	return s;
}

#define FN(var, h, name) memcpy(&(var), &(void *){sym((h), (name))}, sizeof(var))
#define OK(call)                                                                   \
	do {                                                                       \
		err_t e_ = (call);                                                 \
		if (e_ != 0) {                                                     \
			fprintf(stderr, "FAIL: %s -> %d\n", #call, e_);            \
			exit(1);                                                   \
		}                                                                  \
	} while (0)

int main(void)
{
	void *rt = dlopen("libcudart.so.12", RTLD_NOW | RTLD_GLOBAL);
	if (!rt) {
		printf("SKIP: %s\n", dlerror());
		return 77;
	}
	err_t (*Malloc)(void **, size_t), (*Free)(void *), (*Count)(int *), (*Version)(int *);
	err_t (*Memset)(void *, int, size_t), (*Memcpy)(void *, const void *, size_t, int), (*Sync)(void);
	FN(Malloc, NULL, "cudaMalloc"); /* gpupool's when preloaded */
	FN(Free, NULL, "cudaFree");
	FN(Count, rt, "cudaGetDeviceCount");
	FN(Version, rt, "cudaRuntimeGetVersion");
	FN(Memset, rt, "cudaMemset");
	FN(Memcpy, rt, "cudaMemcpy");
	FN(Sync, rt, "cudaDeviceSynchronize");
	int n = 0, v = 0;
	if (Count(&n) != 0 || n == 0) {
		printf("SKIP: no GPU\n");
		return 77;
	}
	OK(Version(&v));
	void *p[N];
	unsigned char host[4096];
	for (int i = 0; i < N; i++) {
		size_t sz = 512 + (size_t)(i % 64) * 4096;
		OK(Malloc(&p[i], sz));
		OK(Memset(p[i], i & 0xff, sz));
	}
	OK(Sync());
	for (int i = 0; i < N; i++) {
		OK(Memcpy(host, p[i], sizeof host < 512 ? sizeof host : 512, 2 /* DeviceToHost */));
		for (int k = 0; k < 512; k++)
			if (host[k] != (unsigned char)(i & 0xff)) {
				fprintf(stderr, "FAIL: block %d byte %d is %u\n", i, k, host[k]);
				return 1;
			}
	}
	for (int i = 0; i < N; i++)
		OK(Free(p[i]));
	int (*stats)(int, struct gpupool_device_stats *) = NULL;
	void *s = dlsym(RTLD_DEFAULT, "gpupool_stats");
	memcpy(&stats, &s, sizeof stats);
	if (stats) {
		struct gpupool_device_stats st;
		if (stats(0, &st) != 0 || st.allocs != N || st.driver_allocs != 0) {
			fprintf(stderr, "FAIL: pool allocs %llu, through the driver layer %llu (want %d and 0)\n",
				(unsigned long long)st.allocs, (unsigned long long)st.driver_allocs, N);
			return 1;
		}
		printf("cudart12: runtime %d, %d allocations served by the pool once (segments %llu)\n", v, N,
		       (unsigned long long)st.segment_allocs);
	} else {
		printf("cudart12: runtime %d, %d allocations, no gpupool\n", v, N);
	}
	return 0;
}
