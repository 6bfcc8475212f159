/* PyTorch's entry points (torch_entry.h) over the registry's pools: the pluggable allocator's
 * malloc and free, and the peak reset behind torch.cuda.reset_peak_memory_stats. Must not
 * depend on the hook bodies (runtime_calls.c): these are the other way in, beside them, not through them. */
#include "torch_entry.h"

#include <errno.h>
#include <stdint.h>

#include "backend_cuda.h"
#include "cxx_error.h"
#include "last_error.h"
#include "ladder.h"
#include "log.h"
#include "registry.h"
#include "trace.h"
#include "waitq.h"

void *gp_torch_malloc(size_t size, int device, cudaStream_t stream)
{
	GP_REGISTRY_READER;
	const struct gp_registry *r = gp_registry_get();
	if (r->refuse) { /* PyTorch does not check for NULL (below): refused, as cudaMalloc is */
		gp_cxx_throw("gpupool: the configuration refuses every allocation (strict mode, or a cap that cannot be "
			     "applied as asked: see the error at the start)");
		return NULL;
	}
	if (r->off || device < 0 || device >= r->ndev || size == 0)
		return NULL;
	gp_pool *p = gp_ladder_pool(r, device);
	if (!p)
		return NULL;
	/* a new segment comes from the current device: make it `device` for the call */
	int cur = device;
	if (r->ndev > 1 && (r->rt->GetDevice(&cur) != cudaSuccess || cur != device))
		(void)r->rt->SetDevice(device);
	uintptr_t a = 0;
	int rc = gp_ladder_alloc(p, device, size, gp_cuda_stream_key(stream, false), GP_TRACE_MALLOC_ASYNC, stream,
				   &a, false);
	if (cur != device)
		(void)r->rt->SetDevice(cur);
	if (rc == 0)
		return (void *)a;
	char msg[256] = "gpupool: ", *why = msg + 9;
	bool drv = false;
	int code = rc == -EIO ? gp_ladder_device_error(&drv) : 0;
	if (code) /* the device's own error, not out of memory: said with CUDA's code */
		snprintf(why, sizeof msg - 9, "device %d: CUDA error %d (%s) allocating %zu bytes, not out of memory",
			 device, code, drv ? "CUresult" : "cudaError_t", size);
	else
		gp_registry_oom_message(why, sizeof msg - 9, device, size);
	/* PyTorch does not check for NULL: a tensor at address 0 would fault in the first kernel
	 * that touches it. Throw, as PyTorch's own allocator does; it becomes a RuntimeError. */
	gp_cxx_throw(msg); /* returns only without a C++ runtime */
	if (!code) {
		gp_last_error_set(r->rt, cudaErrorMemoryAllocation);
		gp_registry_oom_log(device, why); /* the first per device a warning, the rest at info */
	} else {
		gp_log(GP_LOG_WARN, "%s", why);
	}
	return NULL;
}

void gp_torch_free(void *ptr, int device, cudaStream_t stream)
{
	GP_REGISTRY_READER;
	if (!ptr)
		return;
	const struct gp_registry *r = gp_registry_get();
	if (r->off || device < 0 || device >= r->ndev)
		return;
	uint64_t t0 = r->tracing ? gp_trace_now_ns() : 0;
	gp_pool *p = atomic_load(&r->pools[device]);
	int rc = p ? gp_pool_free(p, (uintptr_t)ptr, gp_cuda_stream_key(stream, false)) : -ENOENT;
	if (rc != 0) {
		gp_log(GP_LOG_WARN, "gpupool_free(%p): not a live gpupool allocation of device %d; ignored", ptr, device);
		return;
	}
	gp_waitq_note_free(device); /* while others wait, what is freed goes to them */
	if (r->tracing)
		gp_registry_trace(GP_TRACE_FREE_ASYNC, device, stream, 0, ptr, t0, cudaSuccess);
}

int gp_torch_reset_peak_stats(int device)
{
	/* the pools serve both layers: on while either layer is (as gpupool_stats) */
	const struct gp_registry *r = gp_registry_get_driver();
	if (r->off && r->drv_off)
		return -ENOSYS;
	if (device < -1 || device >= r->ndev)
		return -ENODEV;
	for (int d = 0; d < r->ndev; d++) {
		gp_pool *p = atomic_load(&r->pools[d]);
		if (p && (device == -1 || d == device))
			gp_pool_reset_peaks(p);
	}
	return 0;
}
