/* Helpers of the driver layer's end-to-end programs (e2e_drv_*.c): the driver's entry
 * points as a program without the CUDA runtime finds them (through cuGetProcAddress_v2 on
 * libcuda's handle, or dlsym of each name on it), the fake driver's control API, and a
 * primary context made current. Header-only, static. */
#ifndef GP_E2E_DRV_H
#define GP_E2E_DRV_H

#include <cuda.h>

#include "e2e_util.h"
#include "fakecu.h"

#define CU(call)                                                                                 \
	do {                                                                                     \
		CUresult e_ = (call);                                                            \
		if (e_ != CUDA_SUCCESS) {                                                        \
			fprintf(stderr, "%s:%d: %s -> CUresult %d\n", __FILE__, __LINE__, #call, (int)e_); \
			exit(1);                                                                 \
		}                                                                                \
	} while (0)

#define CUE(call, want)                                                                          \
	do {                                                                                     \
		CUresult e_ = (call);                                                            \
		if (e_ != (want)) {                                                              \
			fprintf(stderr, "%s:%d: %s -> CUresult %d, expected %d\n", __FILE__, __LINE__, #call, \
				(int)e_, (int)(want));                                           \
			exit(1);                                                                 \
		}                                                                                \
	} while (0)

/* X(field, name as cuGetProcAddress is asked, exported name) */
#define E2E_DRV_FUNCS(X)                                                                         \
	X(Init, "cuInit", "cuInit")                                                              \
	X(PrimaryRetain, "cuDevicePrimaryCtxRetain", "cuDevicePrimaryCtxRetain")                 \
	X(PrimaryReset, "cuDevicePrimaryCtxReset", "cuDevicePrimaryCtxReset_v2")                 \
	X(CtxSetCurrent, "cuCtxSetCurrent", "cuCtxSetCurrent")                                   \
	X(CtxCreate, "cuCtxCreate", "cuCtxCreate_v2")                                            \
	X(CtxDestroy, "cuCtxDestroy", "cuCtxDestroy_v2")                                         \
	X(CtxSynchronize, "cuCtxSynchronize", "cuCtxSynchronize")                                \
	X(MemAlloc, "cuMemAlloc", "cuMemAlloc_v2")                                               \
	X(MemFree, "cuMemFree", "cuMemFree_v2")                                                  \
	X(MemAllocAsync, "cuMemAllocAsync", "cuMemAllocAsync")                                   \
	X(MemFreeAsync, "cuMemFreeAsync", "cuMemFreeAsync")                                      \
	X(MemGetInfo, "cuMemGetInfo", "cuMemGetInfo_v2")                                         \
	X(MemGetAddressRange, "cuMemGetAddressRange", "cuMemGetAddressRange_v2")                 \
	X(PointerGetAttribute, "cuPointerGetAttribute", "cuPointerGetAttribute")                 \
	X(IpcGetMemHandle, "cuIpcGetMemHandle", "cuIpcGetMemHandle")                             \
	X(StreamCreate, "cuStreamCreate", "cuStreamCreate")                                      \
	X(StreamDestroy, "cuStreamDestroy", "cuStreamDestroy_v2")                                \
	X(StreamSynchronize, "cuStreamSynchronize", "cuStreamSynchronize")                       \
	X(StreamBeginCapture, "cuStreamBeginCapture", "cuStreamBeginCapture_v2")                 \
	X(StreamEndCapture, "cuStreamEndCapture", "cuStreamEndCapture")                          \
	X(MemsetD8Async, "cuMemsetD8Async", "cuMemsetD8Async")                                   \
	X(MemsetD8, "cuMemsetD8", "cuMemsetD8_v2")                                               \
	X(MemcpyDtoH, "cuMemcpyDtoH", "cuMemcpyDtoH_v2")

struct e2e_drv {
	void *handle;
	CUresult (*Init)(unsigned);
	CUresult (*PrimaryRetain)(CUcontext *, CUdevice);
	CUresult (*PrimaryReset)(CUdevice);
	CUresult (*CtxSetCurrent)(CUcontext);
	CUresult (*CtxCreate)(CUcontext *, unsigned, CUdevice);
	CUresult (*CtxDestroy)(CUcontext);
	CUresult (*CtxSynchronize)(void);
	CUresult (*MemAlloc)(CUdeviceptr *, size_t);
	CUresult (*MemFree)(CUdeviceptr);
	CUresult (*MemAllocAsync)(CUdeviceptr *, size_t, CUstream);
	CUresult (*MemFreeAsync)(CUdeviceptr, CUstream);
	CUresult (*MemGetInfo)(size_t *, size_t *);
	CUresult (*MemGetAddressRange)(CUdeviceptr *, size_t *, CUdeviceptr);
	CUresult (*PointerGetAttribute)(void *, CUpointer_attribute, CUdeviceptr);
	CUresult (*IpcGetMemHandle)(CUipcMemHandle *, CUdeviceptr);
	CUresult (*StreamCreate)(CUstream *, unsigned);
	CUresult (*StreamDestroy)(CUstream);
	CUresult (*StreamSynchronize)(CUstream);
	CUresult (*StreamBeginCapture)(CUstream, CUstreamCaptureMode);
	CUresult (*StreamEndCapture)(CUstream, CUgraph *);
	CUresult (*MemsetD8Async)(CUdeviceptr, unsigned char, size_t, CUstream);
	CUresult (*MemsetD8)(CUdeviceptr, unsigned char, size_t);
	CUresult (*MemcpyDtoH)(void *, CUdeviceptr, size_t);
	/* the fake driver's control API (not interposed) */
	unsigned long (*calls)(const char *);
	int (*fail_nth)(const char *, unsigned long, CUresult);
	size_t (*alloc_sizes)(size_t *, size_t);
	CUresult (*launch_fill)(CUdeviceptr, size_t, unsigned char, unsigned, CUstream);
	CUcontext primary[2];
};

/* Loads libcuda.so.1 and its entry points: through cuGetProcAddress_v2 (procaddr true) or
 * dlsym of each exported name on the handle; initialises the driver and makes device 0's
 * primary context current. */
static inline void e2e_drv_load(struct e2e_drv *d, int procaddr)
{
	memset(d, 0, sizeof *d);
	d->handle = dlopen("libcuda.so.1", RTLD_NOW);
	CHECK(d->handle != NULL);
	CUresult (*get)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *) = NULL;
	E2E_FN(get, dlsym(d->handle, "cuGetProcAddress_v2"));
	CUdriverProcAddressQueryResult st;
#define E2E_DRV_LOAD_(field, base, full)                                                  \
	if (procaddr) {                                                                   \
		void *p_ = NULL;                                                          \
		CU(get(base, &p_, 13000, 0, &st));                                        \
		E2E_FN(d->field, p_);                                                     \
	} else {                                                                          \
		E2E_FN(d->field, dlsym(d->handle, full));                                 \
	}
	E2E_DRV_FUNCS(E2E_DRV_LOAD_)
#undef E2E_DRV_LOAD_
	E2E_FN(d->calls, dlsym(d->handle, "gpfakecu_calls"));
	E2E_FN(d->fail_nth, dlsym(d->handle, "gpfakecu_fail_nth"));
	E2E_FN(d->alloc_sizes, dlsym(d->handle, "gpfakecu_alloc_sizes"));
	E2E_FN(d->launch_fill, dlsym(d->handle, "gpfakecu_launch_fill"));
	CU(d->Init(0));
	CU(d->PrimaryRetain(&d->primary[0], 0));
	CU(d->CtxSetCurrent(d->primary[0]));
}

/* Makes device `dev`'s primary context current on the calling thread. */
static inline void e2e_drv_use(struct e2e_drv *d, int dev)
{
	if (!d->primary[dev])
		CU(d->PrimaryRetain(&d->primary[dev], dev));
	CU(d->CtxSetCurrent(d->primary[dev]));
}

/* True when all n bytes at device address p equal v (after the device is done). */
static inline int e2e_drv_all(struct e2e_drv *d, CUdeviceptr p, size_t n, unsigned char v)
{
	unsigned char *h = malloc(n);
	CHECK(h != NULL);
	CU(d->MemcpyDtoH(h, p, n));
	size_t bad = n;
	for (size_t i = 0; i < n && bad == n; i++)
		if (h[i] != v)
			bad = i;
	if (bad != n)
		fprintf(stderr, "byte %zu of 0x%llx is 0x%02x, expected 0x%02x\n", bad, (unsigned long long)p, h[bad], v);
	free(h);
	return bad == n;
}

#endif
