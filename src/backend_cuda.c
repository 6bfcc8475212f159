/* The real CUDA runtime: resolves the runtime's entry points once, from the libcudart the
 * process already loaded (dlsym(RTLD_NEXT), else the loaded copy found by
 * dl_iterate_phdr: never a second copy), and implements the pool backend over them.
 * Knows CUDA types; knows nothing of the pool's internals. */
#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "cudart.h"
#include "log.h"
#include "streamkey.h"

static struct gp_cudart rt;
static const struct gp_cudart *rt_ok;
static pthread_once_t rt_once = PTHREAD_ONCE_INIT;

struct find_ctx {
	char path[512];
};

static int find_cudart(struct dl_phdr_info *info, size_t size, void *data)
{
	struct find_ctx *f = data;
	(void)size;
	const char *name = info->dlpi_name;
	if (!name || !*name)
		return 0;
	const char *base = strrchr(name, '/');
	base = base ? base + 1 : name;
	if (strncmp(base, "libcudart.so", 12) != 0)
		return 0;
	snprintf(f->path, sizeof f->path, "%s", name);
	return 1;
}

static void resolve(void)
{
	void *handle = NULL;
	struct find_ctx f = {{0}};
	if (!dlsym(RTLD_NEXT, "cudaMalloc")) {
		dl_iterate_phdr(find_cudart, &f);
		if (f.path[0])
			handle = dlopen(f.path, RTLD_LAZY | RTLD_NOLOAD);
		if (!handle) {
			gp_log(GP_LOG_WARN, "no CUDA runtime (libcudart) is loaded in this process; passing calls through");
			return;
		}
		gp_log(GP_LOG_INFO, "CUDA runtime found at %s", f.path);
	}
#define SYM(field, name, required)                                                     \
	do {                                                                           \
		void *s_ = handle ? dlsym(handle, name) : dlsym(RTLD_NEXT, name);      \
		if (!s_ && required) {                                                 \
			gp_log(GP_LOG_WARN, "the CUDA runtime lacks %s; gpupool is off", name); \
			return;                                                        \
		}                                                                      \
		memcpy(&rt.field, &s_, sizeof s_);                                     \
	} while (0)
	SYM(Malloc, "cudaMalloc", 1);
	SYM(Free, "cudaFree", 1);
	SYM(MallocAsync, "cudaMallocAsync", 1);
	SYM(MallocAsync_ptsz, "cudaMallocAsync_ptsz", 0);
	SYM(FreeAsync, "cudaFreeAsync", 1);
	SYM(FreeAsync_ptsz, "cudaFreeAsync_ptsz", 0);
	SYM(GetDevice, "cudaGetDevice", 1);
	SYM(SetDevice, "cudaSetDevice", 1);
	SYM(GetDeviceCount, "cudaGetDeviceCount", 1);
	SYM(DeviceSynchronize, "cudaDeviceSynchronize", 1);
	SYM(GetLastError, "cudaGetLastError", 1);
	SYM(PeekAtLastError, "cudaPeekAtLastError", 1);
	SYM(MemGetInfo, "cudaMemGetInfo", 1);
	SYM(EventCreateWithFlags, "cudaEventCreateWithFlags", 1);
	SYM(EventRecord, "cudaEventRecord", 1);
	SYM(EventRecord_ptsz, "cudaEventRecord_ptsz", 0);
	SYM(EventDestroy, "cudaEventDestroy", 1);
	SYM(StreamWaitEvent, "cudaStreamWaitEvent", 1);
	SYM(StreamWaitEvent_ptsz, "cudaStreamWaitEvent_ptsz", 0);
	SYM(StreamIsCapturing, "cudaStreamIsCapturing", 1);
	SYM(StreamIsCapturing_ptsz, "cudaStreamIsCapturing_ptsz", 0);
	SYM(StreamBeginCapture, "cudaStreamBeginCapture", 1);
	SYM(StreamBeginCapture_ptsz, "cudaStreamBeginCapture_ptsz", 0);
	SYM(StreamEndCapture, "cudaStreamEndCapture", 1);
	SYM(StreamEndCapture_ptsz, "cudaStreamEndCapture_ptsz", 0);
	SYM(StreamDestroy, "cudaStreamDestroy", 1);
	SYM(ThreadExchangeStreamCaptureMode, "cudaThreadExchangeStreamCaptureMode", 0);
	SYM(IpcGetMemHandle, "cudaIpcGetMemHandle", 0);
	SYM(DeviceReset, "cudaDeviceReset", 0);
#undef SYM
	rt_ok = &rt;
}

const struct gp_cudart *gp_cudart_get(void)
{
	pthread_once(&rt_once, resolve);
	return rt_ok;
}

/* ---- captures ------------------------------------------------------------------------
 * A device synchronize while any stream captures would invalidate the capture (global
 * mode) or is at least meaningless. Captures are counted by the capture hooks; the gate
 * makes "no capture is active" and the synchronize one step, so a capture cannot begin in
 * the middle of a fence (it waits for the fence to end instead). */
static pthread_mutex_t gate = PTHREAD_MUTEX_INITIALIZER;
static atomic_int captures;

void gp_cudart_capture_begin(void)
{
	pthread_mutex_lock(&gate);
	atomic_fetch_add(&captures, 1);
	pthread_mutex_unlock(&gate);
}

void gp_cudart_capture_end(void)
{
	if (atomic_fetch_sub(&captures, 1) <= 0)
		atomic_fetch_add(&captures, 1); /* an end without a begin we saw */
}

int gp_cudart_captures(void) { return atomic_load_explicit(&captures, memory_order_relaxed); }

const atomic_int *gp_cudart_capture_counter(void) { return &captures; }

void gp_cudart_after_fork(void)
{
	pthread_mutex_init(&gate, NULL);
	atomic_store(&captures, 0);
}

/* ---- stream keys ---------------------------------------------------------------------- */

/* The legacy default stream is key 0. Each thread's per-thread default stream gets a
 * synthetic key (streamkey.h) from a process-wide serial. */
static _Thread_local gp_stream my_ptds;
static atomic_ulong ptds_serial;

gp_stream gp_cudart_ptds_key(void)
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

/* Runs in relaxed capture mode: the calls gpupool makes on its own behalf must not be
 * refused (and invalidate a capture) because another thread captures in global mode. */
static enum cudaStreamCaptureMode relax_begin(void)
{
	enum cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
	if (rt.ThreadExchangeStreamCaptureMode)
		(void)rt.ThreadExchangeStreamCaptureMode(&mode);
	return mode;
}

static void relax_end(enum cudaStreamCaptureMode mode)
{
	if (rt.ThreadExchangeStreamCaptureMode)
		(void)rt.ThreadExchangeStreamCaptureMode(&mode);
}

void gp_cudart_set_last_error(cudaError_t err)
{
	if (!rt_ok)
		return;
	void *p = NULL;
	enum cudaStreamCaptureMode mode = relax_begin();
	if (err == cudaErrorMemoryAllocation) {
		/* a request no device can satisfy fails at once and leaves the error behind */
		(void)rt.Malloc(&p, (size_t)1 << 62);
	} else {
		(void)rt.Malloc(NULL, 0);
	}
	relax_end(mode);
}

/* After an internal call failed: leave the runtime's last error as it was before it,
 * `before`. The failure overwrote it; a program's own pending error is put back by
 * repeating a failing call that produces it (the runtime has no "set last error"). */
static void restore_last_error(cudaError_t before)
{
	(void)rt.GetLastError();
	if (before == cudaSuccess)
		return;
	if (before == cudaErrorMemoryAllocation || before == cudaErrorInvalidValue)
		gp_cudart_set_last_error(before);
	else if (before == cudaErrorInvalidDevice)
		(void)rt.SetDevice(-1);
	else
		gp_log(GP_LOG_DEBUG, "a pending CUDA error (%d) was replaced by a recovered internal failure",
		       (int)before);
}

/* ---- the backend ----------------------------------------------------------------------- */

static int cu_segment_alloc(void *ctx, int device, size_t size, uintptr_t *addr)
{
	(void)ctx, (void)device;
	cudaError_t before = rt.PeekAtLastError();
	void *p = NULL;
	/* While a stream captures in global mode, cudaMalloc from any thread would be refused
	 * and would invalidate the capture; in this thread's relaxed mode it is allowed, and a
	 * new segment has nothing to do with the captured work. */
	enum cudaStreamCaptureMode mode = relax_begin();
	cudaError_t e = rt.Malloc(&p, size);
	if (e != cudaSuccess) {
		/* the pool may recover (release, retry): leave no stale error behind, and
		 * the program's own pending error as it was */
		restore_last_error(before);
		relax_end(mode);
		return e == cudaErrorMemoryAllocation ? -ENOMEM : -EIO;
	}
	relax_end(mode);
	*addr = (uintptr_t)p;
	return 0;
}

static int cu_segment_free(void *ctx, int device, uintptr_t addr, size_t size)
{
	(void)ctx, (void)device, (void)size;
	/* cudaFree synchronizes the device: not while a stream captures, and no capture may
	 * begin meanwhile (the gate, as for fences) */
	pthread_mutex_lock(&gate);
	if (atomic_load(&captures) > 0) {
		pthread_mutex_unlock(&gate);
		return -EBUSY;
	}
	cudaError_t e = rt.Free((void *)addr);
	pthread_mutex_unlock(&gate);
	return e == cudaSuccess ? 0 : -EIO;
}

static int cu_device_sync(void *ctx, int device)
{
	(void)ctx;
	if (gp_cudart_captures() > 0)
		return -EBUSY;
	pthread_mutex_lock(&gate);
	if (atomic_load(&captures) > 0) {
		pthread_mutex_unlock(&gate);
		return -EBUSY;
	}
	int cur = -1;
	if (rt.GetDevice(&cur) != cudaSuccess)
		cur = -1;
	if (cur != device)
		(void)rt.SetDevice(device);
	enum cudaStreamCaptureMode mode = relax_begin();
	cudaError_t e = rt.DeviceSynchronize();
	relax_end(mode);
	if (cur >= 0 && cur != device)
		(void)rt.SetDevice(cur);
	pthread_mutex_unlock(&gate);
	if (e != cudaSuccess) {
		gp_log(GP_LOG_WARN, "device %d: cudaDeviceSynchronize failed (%d) during a fence; pending frees stay pending",
		       device, (int)e);
		return -EIO;
	}
	return 0;
}

static int cu_stream_wait(void *ctx, int device, gp_stream from, gp_stream to)
{
	(void)ctx, (void)device;
	bool ok1, ok2;
	cudaStream_t f = key_handle(from, &ok1), t = key_handle(to, &ok2);
	/* while a stream captures, the event would be captured and the waiting stream joined
	 * to the capture: the block waits for a fence instead */
	if (!ok1 || !ok2 || gp_cudart_captures() > 0)
		return -EAGAIN;
	cudaError_t before = rt.PeekAtLastError();
	cudaEvent_t ev;
	if (rt.EventCreateWithFlags(&ev, cudaEventDisableTiming) != cudaSuccess)
		goto fail;
	if (rt.EventRecord(ev, f) != cudaSuccess || rt.StreamWaitEvent(t, ev, 0) != cudaSuccess) {
		(void)rt.EventDestroy(ev);
		goto fail;
	}
	(void)rt.EventDestroy(ev); /* the wait holds on to the recorded work */
	return 0;
fail:
	restore_last_error(before);
	return -EAGAIN;
}

static int cu_mem_info(void *ctx, int device, size_t *free_bytes, size_t *total_bytes)
{
	(void)ctx, (void)device;
	return rt.MemGetInfo(free_bytes, total_bytes) == cudaSuccess ? 0 : -EIO;
}

static const struct gp_backend cuda_backend = {
	.ctx = NULL,
	.segment_alloc = cu_segment_alloc,
	.segment_free = cu_segment_free,
	.device_sync = cu_device_sync,
	.stream_wait = cu_stream_wait,
	.mem_info = cu_mem_info,
};

const struct gp_backend *gp_cudart_backend(void) { return &cuda_backend; }
