/* The control API of the fake CUDA driver (libcuda.so.1 in tests/fake/, fakecu.c): call
 * counters, fault injection, the sizes the driver was asked for, and the fake "kernel"
 * gpfakecu_launch_fill, plus the prototypes of the per-thread-stream entry points the real
 * driver exports. Thread-safe; resolvable with dlsym on the driver's handle. */
#ifndef GPFAKE_FAKECU_H
#define GPFAKE_FAKECU_H

#include <cuda.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Calls that reached the fake for the exported entry point `name` (exact name). */
unsigned long gpfakecu_calls(const char *name);
/* Make the n-th next call (n >= 1) of `name` fail with `err` (it does nothing else); n == 0
 * removes the rules for `name`. 0, or -1 for an unknown name or a full table. Also from the
 * environment: FAKECU_FAIL=name:n[:err][,...] (err: a number; default CUDA_ERROR_OUT_OF_MEMORY
 * for the allocation calls, else CUDA_ERROR_UNKNOWN). */
int gpfakecu_fail_nth(const char *name, unsigned long n, CUresult err);
/* The same from the n-th next call on: that call and every later one fail (FAKECU_FAIL:
 * name:n+[:err]). `name` "*" (both functions, and FAKECU_FAIL): every entry point but the
 * queries (cuGetErrorName, cuDriverGetVersion, cuGetProcAddress(_v2), gpfakecu_launch_fill). */
int gpfakecu_fail_from(const char *name, unsigned long n, CUresult err);
/* A kernel fault: from now on every call but those queries fails with `err`
 * (CUDA_ERROR_ILLEGAL_ADDRESS, ...), as the driver's sticky errors; CUDA_SUCCESS clears it. */
void gpfakecu_fault(CUresult err);
/* Sizes (bytes, as asked) of the successful cuMemAlloc_v2 and cuMemAllocAsync calls so far,
 * in order: up to cap into out; returns how many there were. */
size_t gpfakecu_alloc_sizes(size_t *out, size_t cap);
/* Live allocations of `device` (-1: all), and the bytes this process holds on it (those
 * allocations, physical memory of cuMemCreate, what its memory pools keep reserved). */
unsigned long gpfakecu_allocations(int device);
size_t gpfakecu_used(int device);
/* 1 when [p, p + n) is virtual memory mapped end to end (cuMemMap) with read and write
 * access granted (cuMemSetAccess), else 0: memory a kernel or a copy may touch. */
int gpfakecu_mapped(CUdeviceptr p, size_t n);
/* A fake kernel: when `s` reaches it, sleep delay_us microseconds, then write `value` into
 * dst[0..n). Stream 0 is the legacy stream of the current context's device. */
CUresult gpfakecu_launch_fill(CUdeviceptr dst, size_t n, unsigned char value, unsigned delay_us, CUstream s);

CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev);
/* cuda.h names cuGetProcAddress_v2 cuGetProcAddress; the driver exports both, the first
 * (CUDA 11.3) without the status argument. */
#undef cuGetProcAddress
CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags);
CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream hStream);
CUresult cuMemMapArrayAsync_ptsz(CUarrayMapInfo *mapInfoList, unsigned int count, CUstream hStream);
CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream);
CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream);
CUresult cuStreamBeginCapture_v2_ptsz(CUstream hStream, CUstreamCaptureMode mode);
CUresult cuStreamEndCapture_ptsz(CUstream hStream, CUgraph *phGraph);
CUresult cuStreamIsCapturing_ptsz(CUstream hStream, CUstreamCaptureStatus *captureStatus);
CUresult cuEventRecord_ptsz(CUevent hEvent, CUstream hStream);
CUresult cuStreamWaitEvent_ptsz(CUstream hStream, CUevent hEvent, unsigned int Flags);
CUresult cuStreamSynchronize_ptsz(CUstream hStream);
CUresult cuMemsetD8Async_ptsz(CUdeviceptr dstDevice, unsigned char uc, size_t N, CUstream hStream);

#ifdef __cplusplus
}
#endif

#endif
