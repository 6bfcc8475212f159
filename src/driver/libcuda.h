/* The CUDA driver's entry points (libcuda.so.1), resolved from the copy the process has
 * loaded through the real dlsym (below), never through gpupool's own interposition, so
 * gpupool's calls into the driver never come back into its driver hooks. Owns the table, the
 * list of driver names gpupool interposes and the real dlsym; depends on the log only. */
#ifndef GP_LIBCUDA_H
#define GP_LIBCUDA_H

#include <cuda.h>
#include <stdbool.h>

/* cuda.h maps these to their newest versions with macros; gpupool interposes the older
 * versions too (a program built against older headers, or one that asks cuGetProcAddress
 * for an old version), under their own names. */
#undef cuStreamBeginCapture
#undef cuStreamDestroy
#undef cuCtxDestroy
#undef cuDevicePrimaryCtxReset
#undef cuGetProcAddress

/* The entry points cuda.h declares only under other names or for per-thread-stream builds. */
CUresult cuStreamBeginCapture(CUstream hStream);
CUresult cuStreamBeginCapture_ptsz(CUstream hStream);
CUresult cuStreamBeginCapture_v2_ptsz(CUstream hStream, CUstreamCaptureMode mode);
CUresult cuStreamEndCapture_ptsz(CUstream hStream, CUgraph *phGraph);
CUresult cuStreamIsCapturing_ptsz(CUstream hStream, CUstreamCaptureStatus *captureStatus);
CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream hStream);
CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream);
CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream);
CUresult cuMemMapArrayAsync_ptsz(CUarrayMapInfo *mapInfoList, unsigned int count, CUstream hStream);
CUresult cuEventRecord_ptsz(CUevent hEvent, CUstream hStream);
CUresult cuStreamWaitEvent_ptsz(CUstream hStream, CUevent hEvent, unsigned int Flags);
CUresult cuStreamDestroy(CUstream hStream);
CUresult cuCtxDestroy(CUcontext ctx);
CUresult cuDevicePrimaryCtxReset(CUdevice dev);
CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags);

/* The driver names gpupool interposes (exported by hooks_driver.c, answered by its dlsym and
 * cuGetProcAddress): X(name). */
#define GP_DRIVER_HOOKED(X)                                                                    \
	X(cuMemAlloc_v2) X(cuMemFree_v2) X(cuMemAllocAsync) X(cuMemAllocAsync_ptsz)                \
	X(cuMemFreeAsync) X(cuMemFreeAsync_ptsz) X(cuMemGetInfo_v2) X(cuIpcGetMemHandle)           \
	X(cuMemGetAddressRange_v2) X(cuPointerGetAttribute)                                        \
	X(cuStreamBeginCapture) X(cuStreamBeginCapture_ptsz) X(cuStreamBeginCapture_v2)            \
	X(cuStreamBeginCapture_v2_ptsz) X(cuStreamEndCapture) X(cuStreamEndCapture_ptsz)           \
	X(cuStreamCreate) X(cuStreamCreateWithPriority) X(cuStreamDestroy) X(cuStreamDestroy_v2)   \
	X(cuDevicePrimaryCtxReset) X(cuDevicePrimaryCtxReset_v2) X(cuCtxDestroy) X(cuCtxDestroy_v2) \
	X(cuGetProcAddress) X(cuGetProcAddress_v2)                                                 \
	X(cuMemCreate) X(cuMemRelease) X(cuMemMap) X(cuMemUnmap) X(cuMemRetainAllocationHandle)     \
	X(cuMemSetAccess) X(cuMemAddressFree)                                                      \
	X(cuMemExportToShareableHandle) X(cuMemMapArrayAsync) X(cuMemMapArrayAsync_ptsz)          \
	X(cuMemAllocManaged) X(cuMemAllocPitch_v2)                                                 \
	X(cuMemPoolCreate) X(cuMemPoolDestroy) X(cuDeviceSetMemPool)                               \
	X(cuMemAllocFromPoolAsync) X(cuMemAllocFromPoolAsync_ptsz)

/* What gpupool itself calls (besides the real versions of the names above): X(name). */
#define GP_DRIVER_USED(X)                                                                      \
	X(cuInit) X(cuDeviceGetCount) X(cuDeviceGet) X(cuDeviceGetUuid_v2) X(cuDeviceGetName)      \
	X(cuCtxGetCurrent)                                                                         \
	X(cuCtxGetDevice)                                                                          \
	X(cuDevicePrimaryCtxRetain) X(cuDevicePrimaryCtxRelease_v2) X(cuDevicePrimaryCtxGetState)  \
	X(cuCtxPushCurrent_v2) X(cuCtxPopCurrent_v2) X(cuCtxSynchronize) X(cuEventCreate)          \
	X(cuEventRecord) X(cuEventDestroy_v2) X(cuStreamWaitEvent) X(cuStreamIsCapturing)          \
	X(cuStreamIsCapturing_ptsz) X(cuThreadExchangeStreamCaptureMode)                          \
	X(cuMemPoolGetAttribute) X(cuMemPoolTrimTo)                                                \
	X(cuDeviceGetAttribute) X(cuMemGetAllocationGranularity)                                   \
	X(cuMemAddressReserve) /* cuMemMap, cuMemUnmap, cuMemSetAccess, cuMemAddressFree: hooked */

/* The real driver: each entry NULL where the loaded libcuda lacks it. */
#define GP_DRIVER_FIELD_(name) __typeof__(&name) name;
struct gp_driver {
	GP_DRIVER_HOOKED(GP_DRIVER_FIELD_)
	GP_DRIVER_USED(GP_DRIVER_FIELD_)
};
#undef GP_DRIVER_FIELD_

/* The table of the libcuda.so.1 loaded in the process, or NULL while none is (each call
 * looks again, with a lock and dlopen(RTLD_NOLOAD); once found, one acquire load and the
 * table never changes). Thread-safe; no CUDA call. */
const struct gp_driver *gp_libcuda_get(void);

/* True when `handle` (a dlopen handle) is the loaded libcuda's. Lock-free once libcuda has
 * been found. */
bool gp_libcuda_is_handle(void *handle);

/* The loaded libcuda's dlopen handle, or NULL while none is loaded. */
void *gp_libcuda_handle(void);

/* NULL when the pool can run over the driver `d`, else the first entry point it lacks. */
const char *gp_libcuda_lacks(const struct gp_driver *d);

/* The dlsym functions: glibc's, and the next one (the first definition of dlsym after
 * libgpupool.so in the search order: another interposer's where one is preloaded after
 * gpupool, else glibc's). Found once, at the first call of gp_dlsyms(); after that one
 * acquire load. Thread-safe; callable before any initialisation, also before a preloaded
 * sanitizer runtime has initialised. Neither is NULL. */
typedef void *(*gp_dlsym_fn)(void *, const char *);
struct gp_dlsyms {
	gp_dlsym_fn libc;
	gp_dlsym_fn next;
};
struct gp_dlsyms gp_dlsyms(void);

/* The real dlsym, for gpupool's own look-ups: never answered by gpupool. A handle (libcuda's)
 * is asked of the next dlsym, so an interposer preloaded after gpupool answers gpupool as it
 * would the program (gpupool's calls into the driver go through it, as the program's would
 * without gpupool). RTLD_NEXT goes to glibc's, with libgpupool.so as the caller, so it
 * searches after libgpupool.so (an interposer's forwarding would make itself the caller). */
void *gp_dlsym_real(void *handle, const char *name);

/* True when `addr` lies in this object (libgpupool.so): a return address of gpupool's own
 * code, or an entry point that is gpupool's. Two compares; callable before initialisation. */
bool gp_dlsym_is_ours(const void *addr);
/* The linker's bounds of this object (its ELF header, the end of its last segment). */
extern const char __ehdr_start[] __attribute__((visibility("hidden")));
extern const char _end[] __attribute__((visibility("hidden")));

/* The UUID of device `ordinal` (16 raw bytes, as nvidia-smi prints them after "GPU-"), from
 * the loaded driver (initialised first, as the runtime would), into out: 0, or -ENODEV when
 * no driver is loaded, it lacks the calls or does not answer. */
int gp_libcuda_device_uuid(int ordinal, unsigned char out[16]);
/* The name of device `ordinal` ("NVIDIA H100 80GB HBM3") from the loaded driver, NUL-terminated
 * in cap bytes: 0, or -ENODEV as gp_libcuda_device_uuid. */
int gp_libcuda_device_name(int ordinal, char *buf, size_t cap);

/* In a forked child: the lookup's lock is made free. */
void gp_libcuda_after_fork(void);

#endif
