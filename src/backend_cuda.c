/* The pool backend over the real CUDA runtime (backend_cuda.h), through the resolved
 * table (runtime.h), and the stream keys it understands. Knows CUDA types; knows nothing
 * of the pool's internals or the registry. */
#include "backend_cuda.h"

#include <errno.h>
#include <stdatomic.h>
#include <stddef.h>

#include "capture.h"
#include "last_error.h"
#include "log.h"
#include "runtime.h"
#include "streamkey.h"

/* ---- stream keys ---------------------------------------------------------------------- */

/* The legacy default stream is key 0. Each thread's per-thread default stream gets a
 * synthetic key (streamkey.h) from a process-wide serial. */
static _Thread_local gp_stream my_ptds;
static atomic_ulong ptds_serial;

gp_stream gp_cuda_ptds_key(void)
{
	if (!my_ptds)
		my_ptds = gp_streamkey_make((gp_stream)(atomic_fetch_add(&ptds_serial, 1) + 1), GP_STREAMKEY_PTDS);
	return my_ptds;
}

/* The handle this thread can use for a key, or NULL with *ok = false when the key is
 * another thread's per-thread stream. */
static cudaStream_t key_handle(gp_stream k, bool *ok)
{
	*ok = true;
	if (k == 0)
		return cudaStreamLegacy;
	if (gp_streamkey_tag(k) == GP_STREAMKEY_PTDS) {
		if (k == my_ptds)
			return cudaStreamPerThread;
		*ok = false;
		return NULL;
	}
	return (cudaStream_t)k;
}

/* ---- the backend ----------------------------------------------------------------------- */

static int cu_segment_alloc(void *ctx, int device, size_t size, uintptr_t *addr)
{
	(void)device;
	const struct gp_runtime *rt = ctx;
	cudaError_t before = rt->PeekAtLastError();
	void *p = NULL;
	/* While a stream captures in global mode, cudaMalloc from any thread would be refused
	 * and would invalidate the capture; in this thread's relaxed mode it is allowed, and a
	 * new segment has nothing to do with the captured work. */
	enum cudaStreamCaptureMode mode = gp_capture_relax_begin(rt);
	cudaError_t e = rt->Malloc(&p, size);
	if (e != cudaSuccess) {
		/* the pool may recover (release, retry): leave no stale error behind, and
		 * the program's own pending error as it was */
		gp_last_error_restore(rt, before);
		gp_capture_relax_end(rt, mode);
		return e == cudaErrorMemoryAllocation ? -ENOMEM : -EIO;
	}
	gp_capture_relax_end(rt, mode);
	*addr = (uintptr_t)p;
	return 0;
}

static int cu_segment_free(void *ctx, int device, uintptr_t addr, size_t size)
{
	(void)device, (void)size;
	const struct gp_runtime *rt = ctx;
	/* cudaFree synchronizes the device: not while a stream captures, and no capture may
	 * begin meanwhile (the gate, as for fences) */
	if (!gp_capture_gate_enter())
		return -EBUSY;
	cudaError_t e = rt->Free((void *)addr);
	gp_capture_gate_leave();
	return e == cudaSuccess ? 0 : -EIO;
}

static int cu_device_sync(void *ctx, int device)
{
	const struct gp_runtime *rt = ctx;
	if (gp_capture_count() > 0)
		return -EBUSY;
	if (!gp_capture_gate_enter())
		return -EBUSY;
	int cur = -1;
	if (rt->GetDevice(&cur) != cudaSuccess)
		cur = -1;
	if (cur != device)
		(void)rt->SetDevice(device);
	enum cudaStreamCaptureMode mode = gp_capture_relax_begin(rt);
	cudaError_t e = rt->DeviceSynchronize();
	gp_capture_relax_end(rt, mode);
	if (cur >= 0 && cur != device)
		(void)rt->SetDevice(cur);
	gp_capture_gate_leave();
	if (e != cudaSuccess) {
		gp_log(GP_LOG_WARN, "device %d: cudaDeviceSynchronize failed (%d) during a fence; pending frees stay pending",
		       device, (int)e);
		return -EIO;
	}
	return 0;
}

static int cu_stream_wait(void *ctx, int device, gp_stream from, gp_stream to)
{
	(void)device;
	bool ok1, ok2;
	cudaStream_t f = key_handle(from, &ok1), t = key_handle(to, &ok2);
	const struct gp_runtime *rt = ctx;
	const struct gp_runtime_streamed *v = &rt->variant[GP_RT_PLAIN];
	/* while a stream captures, the event would be captured and the waiting stream joined
	 * to the capture; a runtime without events has no other way: the block waits for a
	 * fence instead */
	if (!ok1 || !ok2 || gp_capture_count() > 0 || !rt->EventCreateWithFlags || !rt->EventDestroy ||
	    !v->EventRecord || !v->StreamWaitEvent)
		return -EAGAIN;
	cudaError_t before = rt->PeekAtLastError();
	cudaEvent_t ev;
	if (rt->EventCreateWithFlags(&ev, cudaEventDisableTiming) != cudaSuccess)
		goto fail;
	if (v->EventRecord(ev, f) != cudaSuccess || v->StreamWaitEvent(t, ev, 0) != cudaSuccess) {
		(void)rt->EventDestroy(ev);
		goto fail;
	}
	(void)rt->EventDestroy(ev); /* the wait holds on to the recorded work */
	return 0;
fail:
	gp_last_error_restore(rt, before);
	return -EAGAIN;
}

static int cu_mem_info(void *ctx, int device, size_t *free_bytes, size_t *total_bytes)
{
	(void)device;
	const struct gp_runtime *rt = ctx;
	return rt->MemGetInfo(free_bytes, total_bytes) == cudaSuccess ? 0 : -EIO;
}

void gp_cuda_backend_init(struct gp_backend *be, const struct gp_runtime *rt)
{
	*be = (struct gp_backend){
		.ctx = (void *)rt, /* the pool hands it back as is; the backend only reads it */
		.segment_alloc = cu_segment_alloc,
		.segment_free = cu_segment_free,
		.device_sync = cu_device_sync,
		.stream_wait = cu_stream_wait,
		.mem_info = cu_mem_info,
	};
}
