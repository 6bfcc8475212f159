/* The hooks' bodies (runtime_calls.c): each function is the body of one exported CUDA entry point
 * or gpupool_* call of hooks.c and speaks cudaError_t (or the public API's errno). Each
 * initialises gpupool on the first call of the process (registry.h). Only hooks.c includes
 * this header; nothing here may be needed by the layers below. */
#ifndef GP_RUNTIME_CALLS_H
#define GP_RUNTIME_CALLS_H

#include <cuda_runtime_api.h>
#include <stdbool.h>

#include "entries.h"
#include "gpupool/stats.h"

enum gp_call { GP_CALL_SYNC, GP_CALL_ASYNC, GP_CALL_ASYNC_PTSZ };

cudaError_t gp_calls_malloc(void **ptr, size_t size, cudaStream_t stream, enum gp_call call);
cudaError_t gp_calls_free(void *ptr, cudaStream_t stream, enum gp_call call);
cudaError_t gp_calls_mem_get_info(size_t *free_bytes, size_t *total_bytes);
cudaError_t gp_calls_ipc_get_mem_handle(cudaIpcMemHandle_t *handle, void *ptr);
cudaError_t gp_calls_begin_capture(cudaStream_t s, enum cudaStreamCaptureMode mode, bool ptsz);
cudaError_t gp_calls_end_capture(cudaStream_t s, cudaGraph_t *graph, bool ptsz);
cudaError_t gp_calls_stream_destroy(cudaStream_t s);
/* cudaStreamCreate (flags 0, no priority), cudaStreamCreateWithFlags (no priority) and
 * cudaStreamCreateWithPriority: the runtime's stream, remembered for markers. */
enum gp_stream_create { GP_STREAM_CREATE, GP_STREAM_CREATE_FLAGS, GP_STREAM_CREATE_PRIORITY };
cudaError_t gp_calls_stream_create(cudaStream_t *s, unsigned flags, int priority, enum gp_stream_create how);
cudaError_t gp_calls_device_reset(void);

/* Memory the pools do not hold, counted against the limit (unpooled.h): managed and pitched
 * allocations, and pools the program made. */
cudaError_t gp_calls_malloc_managed(void **ptr, size_t size, unsigned flags);
cudaError_t gp_calls_malloc_pitch(void **ptr, size_t *pitch, size_t width, size_t height);
cudaError_t gp_calls_malloc_3d(struct cudaPitchedPtr *out, struct cudaExtent extent);
cudaError_t gp_calls_malloc_from_pool(void **ptr, size_t size, cudaMemPool_t pool, cudaStream_t s, bool ptsz);
cudaError_t gp_calls_mem_pool_create(cudaMemPool_t *pool, const struct cudaMemPoolProps *props);
cudaError_t gp_calls_mem_pool_destroy(cudaMemPool_t pool);
cudaError_t gp_calls_device_set_mem_pool(int dev, cudaMemPool_t pool);

/* cudaGetDriverEntryPoint (by_version false: the runtime's own version) and
 * cudaGetDriverEntryPointByVersion, plain or _ptsz: the runtime's answer, with gpupool's
 * entry point from `t` (the hooks' table) in place of each driver entry point it
 * interposes. */
cudaError_t gp_calls_get_driver_entry_point(const char *symbol, void **fn, unsigned version, bool by_version,
					    unsigned long long flags, enum cudaDriverEntryPointQueryResult *status,
					    bool ptsz, const struct gp_entries *t);

/* The public API (gpupool.h). */
long long gp_calls_release(int device);
int gp_calls_stats(int device, struct gpupool_device_stats *out);
int gp_calls_trace_flush(char *path, size_t len);

#endif
