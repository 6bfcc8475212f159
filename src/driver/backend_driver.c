/* The pool backend over the real driver (backend_driver.h): segments from cuMemAlloc_v2,
 * fences by cuCtxSynchronize, cross-stream order by an event, each in the device's primary
 * context. Knows CUDA types; knows nothing of the pool's internals or the registry. */
#include "backend_driver.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>

#include "capture.h"
#include "gpupool/stats.h"
#include "log.h"
#include "streamkey.h"
#include "rank.h"

static const struct gp_driver *D;
static _Atomic(CUcontext) primary[GPUPOOL_MAX_DEVICES]; /* retained by this backend */
static pthread_mutex_t retain_lock = PTHREAD_MUTEX_INITIALIZER;

static _Thread_local CUresult segment_error; /* the last -EIO's (gp_driver_backend_error) */

CUresult gp_driver_backend_error(void) { return segment_error; }

void gp_driver_backend_keep_error(CUresult e) { segment_error = e; }

int gp_driver_primary_push_why(const struct gp_driver *d, int device, CUresult *why)
{
	*why = CUDA_ERROR_INVALID_DEVICE;
	if (device < 0 || device >= GPUPOOL_MAX_DEVICES || !d->cuDevicePrimaryCtxRetain || !d->cuCtxPushCurrent_v2)
		return -EIO;
	CUcontext c = atomic_load_explicit(&primary[device], memory_order_acquire);
	if (!c) {
		gp_mutex_lock(&retain_lock, GP_RANK_PRIMARY_RETAIN);
		c = atomic_load(&primary[device]);
		if (!c && (*why = d->cuDevicePrimaryCtxRetain(&c, device)) == CUDA_SUCCESS)
			atomic_store(&primary[device], c);
		gp_mutex_unlock(&retain_lock, GP_RANK_PRIMARY_RETAIN);
		if (!c)
			return -EIO;
	}
	*why = d->cuCtxPushCurrent_v2(c);
	return *why == CUDA_SUCCESS ? 0 : -EIO;
}

int gp_driver_primary_push(const struct gp_driver *d, int device)
{
	CUresult why;
	return gp_driver_primary_push_why(d, device, &why);
}

void gp_driver_primary_pop(const struct gp_driver *d)
{
	CUcontext c;
	(void)d->cuCtxPopCurrent_v2(&c);
}

CUstreamCaptureMode gp_driver_relax_begin(const struct gp_driver *d)
{
	CUstreamCaptureMode m = CU_STREAM_CAPTURE_MODE_RELAXED;
	if (d->cuThreadExchangeStreamCaptureMode)
		(void)d->cuThreadExchangeStreamCaptureMode(&m);
	return m;
}

void gp_driver_relax_end(const struct gp_driver *d, CUstreamCaptureMode m)
{
	if (d->cuThreadExchangeStreamCaptureMode)
		(void)d->cuThreadExchangeStreamCaptureMode(&m);
}

/* Makes the primary context of `device` current on this thread (pushed): 0, or -EIO (with
 * the driver's error in *why). */
static int enter(int device) { return gp_driver_primary_push(D, device); }
static int enter_why(int device, CUresult *why) { return gp_driver_primary_push_why(D, device, why); }

static void leave(void) { gp_driver_primary_pop(D); }

static CUstreamCaptureMode relax_begin(void) { return gp_driver_relax_begin(D); }

static void relax_end(CUstreamCaptureMode m) { gp_driver_relax_end(D, m); }

static int drv_segment_alloc(void *ctx, int device, size_t size, uintptr_t *addr)
{
	(void)ctx;
	CUresult e;
	if (enter_why(device, &e) != 0) {
		segment_error = e;
		return -EIO;
	}
	CUstreamCaptureMode m = relax_begin();
	CUdeviceptr p = 0;
	e = D->cuMemAlloc_v2(&p, size);
	relax_end(m);
	leave();
	if (e != CUDA_SUCCESS && e != CUDA_ERROR_OUT_OF_MEMORY)
		segment_error = e; /* not out of memory: the pool gives up with this error */
	if (e != CUDA_SUCCESS)
		return e == CUDA_ERROR_OUT_OF_MEMORY ? -ENOMEM : -EIO;
	*addr = (uintptr_t)p;
	return 0;
}

static int drv_segment_free(void *ctx, int device, uintptr_t addr, size_t size)
{
	(void)ctx, (void)size;
	/* cuMemFree synchronizes: not while a stream captures (the gate, as for fences) */
	if (!gp_capture_gate_enter())
		return -EBUSY;
	int rc = enter(device);
	if (rc == 0) {
		rc = D->cuMemFree_v2((CUdeviceptr)addr) == CUDA_SUCCESS ? 0 : -EIO;
		leave();
	}
	gp_capture_gate_leave();
	return rc;
}

static int drv_device_sync(void *ctx, int device)
{
	(void)ctx;
	if (gp_capture_count() > 0 || !gp_capture_gate_enter())
		return -EBUSY;
	int rc = enter(device);
	CUresult e = CUDA_ERROR_INVALID_CONTEXT;
	if (rc == 0) {
		CUstreamCaptureMode m = relax_begin();
		e = D->cuCtxSynchronize();
		relax_end(m);
		leave();
	}
	gp_capture_gate_leave();
	if (e != CUDA_SUCCESS) {
		gp_log(GP_LOG_WARN, "device %d: cuCtxSynchronize failed (%d) during a fence; pending frees stay pending",
		       device, (int)e);
		return -EIO;
	}
	return 0;
}


/* The driver's handle for a stream key as this thread names it; false when the key is
 * another thread's per-thread default stream. */
static bool key_stream(gp_stream k, CUstream *out)
{
	uintptr_t h = 0;
	bool ok = gp_streamkey_handle(k, &h);
	*out = (CUstream)h;
	return ok;
}

static int drv_stream_wait(void *ctx, int device, gp_stream from, gp_stream to)
{
	(void)ctx;
	CUstream f, t;
	if (!key_stream(from, &f) || !key_stream(to, &t) || gp_capture_count() > 0 || !D->cuEventCreate ||
	    !D->cuEventRecord || !D->cuStreamWaitEvent || !D->cuEventDestroy_v2)
		return -EAGAIN; /* the block waits for a fence instead */
	if (enter(device) != 0)
		return -EAGAIN;
	int rc = -EAGAIN;
	CUevent ev;
	if (D->cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING) == CUDA_SUCCESS) {
		if (D->cuEventRecord(ev, f) == CUDA_SUCCESS && D->cuStreamWaitEvent(t, ev, 0) == CUDA_SUCCESS)
			rc = 0;
		(void)D->cuEventDestroy_v2(ev); /* the wait holds on to the recorded work */
	}
	leave();
	return rc;
}

static int drv_mem_info(void *ctx, int device, size_t *free_bytes, size_t *total_bytes)
{
	(void)ctx;
	if (enter(device) != 0)
		return -EIO;
	CUresult e = D->cuMemGetInfo_v2(free_bytes, total_bytes);
	leave();
	return e == CUDA_SUCCESS ? 0 : -EIO;
}

void gp_driver_backend_init(struct gp_backend *be, const struct gp_driver *d)
{
	D = d;
	*be = (struct gp_backend){
		.ctx = (void *)d,
		.segment_alloc = drv_segment_alloc,
		.segment_free = drv_segment_free,
		.device_sync = drv_device_sync,
		.stream_wait = drv_stream_wait,
		.mem_info = drv_mem_info,
	};
}

void gp_driver_backend_forget(int device)
{
	if (device >= 0 && device < GPUPOOL_MAX_DEVICES)
		atomic_store(&primary[device], NULL);
}

void gp_driver_backend_after_fork(void)
{
	pthread_mutex_init(&retain_lock, NULL);
	for (int d = 0; d < GPUPOOL_MAX_DEVICES; d++)
		atomic_store(&primary[d], NULL);
}
