/* The control API of the fake CUDA runtime (libcudart.so.13 in tests/fake/): call counters,
 * fault injection, per-device capacity and the fake "kernel" gpfake_launch_fill, plus the
 * prototypes of the per-thread-stream (_ptsz/_ptds) entry points the real runtime exports.
 * Every function here is thread-safe and may be resolved with dlsym(RTLD_DEFAULT, name). */
#ifndef GPFAKE_FAKECUDA_H
#define GPFAKE_FAKECUDA_H

#include <stddef.h>
#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Calls that reached the fake for one exported entry point, counted by its exact name:
 * "cudaMallocAsync" and "cudaMallocAsync_ptsz" are counted apart. 0 for unknown names. */
unsigned long gpfake_calls(const char *name);
/* Set every call counter to 0 (pending fault rules are kept). */
void gpfake_reset_counters(void);
/* Make the n-th next call (n >= 1) of entry point `name` fail with `err`: the call does nothing
 * else, sets the calling thread's last error and returns `err`. n == 0 removes the rules for
 * `name`. Returns 0, or -1 for an unknown name or a full rule table. */
int gpfake_fail_nth(const char *name, unsigned long n, cudaError_t err);
/* The same from the n-th next call on: that call and every later one fail with `err`.
 * `name` "*" (both functions): every entry point but the error and version queries
 * (cudaGetLastError, cudaPeekAtLastError, cudaGetErrorString, cudaGetErrorName,
 * cudaRuntimeGetVersion, cudaDriverGetVersion): a runtime with no usable driver (35), no
 * device (100), a device taken by another process in exclusive mode (46). */
int gpfake_fail_from(const char *name, unsigned long n, cudaError_t err);
/* A kernel fault: from now on every call but the error and version queries fails with `err`
 * (cudaErrorIllegalAddress, cudaErrorLaunchFailure, ...), and cudaGetLastError and
 * cudaPeekAtLastError return it without clearing it, as CUDA's sticky errors. */
void gpfake_fault(cudaError_t err);
/* Remove every pending fault rule (including those from FAKECUDA_FAIL). */
void gpfake_fail_clear(void);
/* Capacity (bytes) of `device`; allocations beyond it fail with cudaErrorMemoryAllocation.
 * With FAKECUDA_MACHINE, the physical device's capacity in the machine file, for every
 * process sharing it. */
void gpfake_set_capacity(int device, size_t bytes);
size_t gpfake_capacity(int device);
/* Bytes this process holds on `device`: live allocations (each rounded up to 512 bytes) and
 * what its memory pools keep reserved. */
size_t gpfake_used(int device);
/* Number of live allocations on `device` (-1: all devices). */
unsigned long gpfake_allocations(int device);
/* The worker threads the fake has started (its first stream operation starts them all). */
int gpfake_workers(void);
/* Stream work that found its device memory gone when it ran (the fake's "illegal address");
 * such work is skipped rather than touching freed host memory. */
unsigned long gpfake_faults(void);
/* A fake kernel: when `s` reaches it, sleep delay_us microseconds, then write `value` into
 * dst[0..n). dst must lie in one live fake allocation. Stream 0 is the legacy stream. */
cudaError_t gpfake_launch_fill(void *dst, size_t n, unsigned char value, unsigned delay_us,
                               cudaStream_t s);

/* Per-thread default stream twins: stream 0 means the calling thread's per-thread stream. */
cudaError_t cudaMallocAsync_ptsz(void **devPtr, size_t size, cudaStream_t hStream);
cudaError_t cudaFreeAsync_ptsz(void *devPtr, cudaStream_t hStream);
cudaError_t cudaMemcpy_ptds(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind);
cudaError_t cudaMemcpyAsync_ptsz(void *dst, const void *src, size_t count,
                                 enum cudaMemcpyKind kind, cudaStream_t stream);
cudaError_t cudaMemset_ptds(void *devPtr, int value, size_t count);
cudaError_t cudaMemsetAsync_ptsz(void *devPtr, int value, size_t count, cudaStream_t stream);
cudaError_t cudaStreamSynchronize_ptsz(cudaStream_t stream);
cudaError_t cudaStreamQuery_ptsz(cudaStream_t stream);
cudaError_t cudaStreamGetId_ptsz(cudaStream_t hStream, unsigned long long *streamId);
cudaError_t cudaStreamGetDevice_ptsz(cudaStream_t hStream, int *device);
cudaError_t cudaStreamGetFlags_ptsz(cudaStream_t hStream, unsigned int *flags);
cudaError_t cudaStreamWaitEvent_ptsz(cudaStream_t stream, cudaEvent_t event, unsigned int flags);
cudaError_t cudaEventRecord_ptsz(cudaEvent_t event, cudaStream_t stream);
cudaError_t cudaStreamBeginCapture_ptsz(cudaStream_t stream, enum cudaStreamCaptureMode mode);
cudaError_t cudaStreamEndCapture_ptsz(cudaStream_t stream, cudaGraph_t *pGraph);
cudaError_t cudaStreamIsCapturing_ptsz(cudaStream_t stream,
                                       enum cudaStreamCaptureStatus *pCaptureStatus);
cudaError_t cudaGraphLaunch_ptsz(cudaGraphExec_t graphExec, cudaStream_t stream);
cudaError_t cudaMallocFromPoolAsync_ptsz(void **ptr, size_t size, cudaMemPool_t memPool,
                                         cudaStream_t stream);
cudaError_t cudaGetDriverEntryPoint_ptsz(const char *symbol, void **funcPtr, unsigned long long flags,
                                         enum cudaDriverEntryPointQueryResult *driverStatus);
cudaError_t cudaGetDriverEntryPointByVersion_ptsz(const char *symbol, void **funcPtr, unsigned int cudaVersion,
                                                  unsigned long long flags,
                                                  enum cudaDriverEntryPointQueryResult *driverStatus);
/* CUDA 12's name of cudaGetDeviceProperties, still exported for programs built against it. */
cudaError_t cudaGetDeviceProperties_v2(struct cudaDeviceProp *prop, int device);

#ifdef __cplusplus
}
#endif

#endif
