/* The shim: lazy initialisation, one pool per device over the real runtime, the fence
 * thread that retires cudaFree'd blocks, release requests from the statistics page, the
 * trace, the exit report, and fork. Sits between hooks.c (exported names) and the pool;
 * the only layer that combines CUDA types with the pool. No CUDA call in a constructor
 * or at exit. */
#include "shim.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "backend_cuda.h"
#include "capture.h"
#include "config.h"
#include "cxx_error.h"
#include "format.h"
#include "last_error.h"
#include "log.h"
#include "pool.h"
#include "runtime.h"
#include "statpage.h"
#include "stats.h"
#include "trace.h"

static struct {
	pthread_once_t once;
	const struct gp_runtime *rt; /* NULL: no runtime, everything passes through */
	struct gp_config cfg;
	bool off;                    /* disabled, or no runtime */
	bool refuse;                 /* strict mode with a bad knob: allocations fail */
	int ndev;
	_Atomic(gp_pool *) pools[GPUPOOL_MAX_DEVICES];
	struct gpupool_device_stats *slots[GPUPOOL_MAX_DEVICES]; /* each pool's page slot, set with it */
	gp_pool *parent_pools[GPUPOOL_MAX_DEVICES]; /* after fork: the parent's, left alone */
	pthread_mutex_t pools_lock;
	struct gpupool_page *page;   /* the shared page, or `local` */
	struct gpupool_page local;
	bool page_shared;
	const atomic_int *captures;  /* stream captures in progress (capture.c) */
	uint64_t release_seen;
	bool tracing;
	bool atexit_set;
	/* fence thread */
	pthread_t fence_thread;
	bool fence_started;
	pthread_mutex_t fence_lock;
	pthread_cond_t fence_cond;
	atomic_int fence_want;
	atomic_int fencing;          /* the fence thread is inside a CUDA call */
	atomic_int exiting;
	struct gpupool_device_stats parked; /* where pools abandoned by cudaDeviceReset write */
	gp_pool *parked_pools[64];   /* the latest pools abandoned by cudaDeviceReset, kept */
	unsigned nparked;
} S = {
	.once = PTHREAD_ONCE_INIT,
	.pools_lock = PTHREAD_MUTEX_INITIALIZER,
	.fence_lock = PTHREAD_MUTEX_INITIALIZER,
	.fence_cond = PTHREAD_COND_INITIALIZER,
};

static void at_fork_child(void);
static void at_exit_report(void);

/* ---- initialisation ---------------------------------------------------------------- */

static const char *env_get(const char *name) { return getenv(name); }

static void init_once(void)
{
	int rc = gp_config_parse(&S.cfg, env_get);
	gp_log_set_level(S.cfg.log_level);
	S.refuse = rc != 0;
	S.rt = gp_runtime_get();
	S.captures = gp_capture_counter();
	S.off = S.cfg.disable || !S.rt;
	if (S.refuse)
		gp_log(GP_LOG_ERROR, "GPUPOOL_CONF has a bad value and strict mode is on: every cudaMalloc and "
				     "cudaMallocAsync fails with cudaErrorInvalidValue until it is fixed");
	if (!S.off) {
		int n = 0;
		if (S.rt->GetDeviceCount(&n) != cudaSuccess || n <= 0)
			n = 1;
		/* cudaGetDeviceCount may fail before a driver is found; clear what it left */
		(void)S.rt->GetLastError();
		S.ndev = n > GPUPOOL_MAX_DEVICES ? GPUPOOL_MAX_DEVICES : n;
		if (n > GPUPOOL_MAX_DEVICES)
			gp_log(GP_LOG_WARN, "%d devices: gpupool pools the first %d and passes the rest through", n,
			       GPUPOOL_MAX_DEVICES);
	}
	pthread_atfork(NULL, NULL, at_fork_child);
}

/* Initialises on the first call. pthread_once: after that, one load. A child forked while
 * another thread was inside init_once runs it again (glibc's pthread_once restarts an
 * initialisation left in progress by a fork). */
static inline bool ready(void)
{
	pthread_once(&S.once, init_once);
	return !S.off;
}

/* The current device, or -1 when it is beyond the pooled ones. One device: no call. */
static inline int current_device(void)
{
	if (S.ndev == 1)
		return 0;
	int d = 0;
	if (S.rt->GetDevice(&d) != cudaSuccess)
		return -1;
	return d < S.ndev ? d : -1;
}

/* ---- the fence thread ----------------------------------------------------------------- */

static void *fence_main(void *arg)
{
	(void)arg;
	useconds_t backoff_us = 1000;
	for (;;) {
		pthread_mutex_lock(&S.fence_lock);
		while (!atomic_load(&S.fence_want) && !atomic_load(&S.exiting))
			pthread_cond_wait(&S.fence_cond, &S.fence_lock);
		pthread_mutex_unlock(&S.fence_lock);
		if (atomic_load(&S.exiting))
			break;
		/* let a burst of frees gather behind one fence */
		if (S.cfg.fence_interval_us)
			usleep(S.cfg.fence_interval_us);
		atomic_store(&S.fence_want, 0);
		bool again = false;
		for (int d = 0; d < S.ndev && !atomic_load(&S.exiting); d++) {
			gp_pool *p = atomic_load(&S.pools[d]);
			atomic_store(&S.fencing, 1);
			if (!atomic_load(&S.exiting) && p && gp_pool_has_pending(p) && gp_pool_fence(p) != 0)
				again = true; /* a capture is active, or the sync failed */
			atomic_store(&S.fencing, 0);
		}
		if (again) {
			/* back off: a capture may last long, a sticky error for ever */
			atomic_store(&S.fence_want, 1);
			usleep(backoff_us);
			if (backoff_us < 100000)
				backoff_us *= 2;
		} else {
			backoff_us = 1000;
		}
	}
	return NULL;
}

static void fence_wake(void)
{
	/* a plain read first: while a fence is already wanted, no write to a shared line */
	if (atomic_load_explicit(&S.fence_want, memory_order_relaxed) == 0 && atomic_exchange(&S.fence_want, 1) == 0) {
		pthread_mutex_lock(&S.fence_lock);
		pthread_cond_signal(&S.fence_cond);
		pthread_mutex_unlock(&S.fence_lock);
	}
}

/* ---- pools ----------------------------------------------------------------------------- */

static gp_pool *pool_create(int dev)
{
	pthread_mutex_lock(&S.pools_lock);
	gp_pool *p = atomic_load(&S.pools[dev]);
	if (p)
		goto out;
	if (!S.page) {
		if (S.cfg.stats_page)
			S.page = gp_statpage_open();
		S.page_shared = S.page != NULL;
		if (!S.page) {
			S.page = &S.local;
			gp_statpage_init(S.page);
		}
		S.release_seen = S.page->release_request;
		if (S.cfg.trace[0] && gp_trace_open(S.cfg.trace) == 0)
			S.tracing = true;
		if (!S.atexit_set)
			S.atexit_set = atexit(at_exit_report) == 0;
	}
	size_t dfree = 0, dtotal = 0;
	if (S.cfg.limit_percent && S.rt->MemGetInfo(&dfree, &dtotal) != cudaSuccess)
		dtotal = 0;
	struct gp_pool_params prm;
	gp_config_pool_params(&S.cfg, dtotal, &prm);
	struct gpupool_device_stats *slot = gp_statpage_slot(S.page, dev);
	if (!slot || gp_pool_create(&p, dev, &prm, gp_cuda_backend(), slot) != 0) {
		gp_log(GP_LOG_WARN, "device %d: cannot create a pool; passing its calls through", dev);
		p = NULL;
		goto out;
	}
	S.slots[dev] = slot; /* before the pool is visible: whoever sees the pool sees its slot */
	atomic_store(&S.pools[dev], p);
	if (S.cfg.fence == GP_FENCE_THREAD && !S.fence_started) {
		pthread_attr_t a;
		pthread_attr_init(&a);
		pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
		pthread_attr_setstacksize(&a, 256 * 1024); /* the runtime and driver run on it */
		if (pthread_create(&S.fence_thread, &a, fence_main, NULL) == 0)
			S.fence_started = true;
		else
			gp_log(GP_LOG_WARN, "cannot start the fence thread; allocations fence inline instead");
		pthread_attr_destroy(&a);
	}
out:
	pthread_mutex_unlock(&S.pools_lock);
	return p;
}

static inline gp_pool *pool_get(int dev)
{
	gp_pool *p = atomic_load_explicit(&S.pools[dev], memory_order_acquire);
	return p ? p : pool_create(dev);
}

/* Fence and release every pool: the answer to a release request or gpupool_release(). */
static long long release_all(int only)
{
	long long total = 0;
	for (int d = 0; d < S.ndev; d++) {
		gp_pool *p = atomic_load(&S.pools[d]);
		if (!p || (only >= 0 && d != only))
			continue;
		(void)gp_pool_fence(p);
		total += (long long)gp_pool_release(p, 0);
	}
	return total;
}

/* A release request from gpupool-stat: two plain reads of the page per call, the rest only
 * when a request is pending. */
static inline void check_release_request(void)
{
	if (__builtin_expect(!S.page_shared, 0) ||
	    __atomic_load_n(&S.page->release_request, __ATOMIC_RELAXED) == S.release_seen)
		return;
	uint64_t req;
	if (gp_statpage_release_pending(S.page, &req) && req != S.release_seen) {
		S.release_seen = req;
		long long n = release_all(-1);
		gp_log(GP_LOG_INFO, "released %lld bytes of cached memory on request", n);
		gp_statpage_release_ack(S.page, req);
	}
}

static void count_passthrough(int dev, bool alloc)
{
	gp_pool *p = dev >= 0 ? atomic_load(&S.pools[dev]) : NULL;
	struct gpupool_device_stats *st = p ? S.slots[dev] : NULL;
	if (!st)
		return;
	/* not under the pool lock, so no seq bracket (it would race with the pool's own):
	 * monotonic counters a reader may see one call late */
	if (alloc)
		__atomic_add_fetch(&st->passthrough_allocs, 1, __ATOMIC_RELAXED);
	else
		__atomic_add_fetch(&st->passthrough_frees, 1, __ATOMIC_RELAXED);
}

/* ---- the hooks' bodies ------------------------------------------------------------------ */

/* The runtime's entry points of the variant of `call` (stream 0 names the per-thread
 * default stream in the _ptsz one). */
static inline const struct gp_runtime_streamed *variant(enum gp_call call)
{
	return &S.rt->variant[call == GP_CALL_ASYNC_PTSZ ? GP_RT_PTSZ : GP_RT_PLAIN];
}

static cudaError_t real_malloc(void **ptr, size_t size, cudaStream_t s, enum gp_call call)
{
	if (call == GP_CALL_SYNC)
		return S.rt->Malloc(ptr, size);
	return variant(call)->MallocAsync(ptr, size, s);
}

static cudaError_t real_free(void *ptr, cudaStream_t s, enum gp_call call)
{
	if (call == GP_CALL_SYNC)
		return S.rt->Free(ptr);
	return variant(call)->FreeAsync(ptr, s);
}

/* Is `s` capturing? cudaSuccess and *yes, or the runtime's error for the stream (an invalid
 * handle), which is left as the last error, as the native call would. Asks the runtime only
 * while some capture is in progress. */
static cudaError_t capturing(cudaStream_t s, enum gp_call call, bool *yes)
{
	*yes = false;
	if (call == GP_CALL_SYNC || atomic_load_explicit(S.captures, memory_order_relaxed) == 0)
		return cudaSuccess;
	enum cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
	cudaError_t e = variant(call)->StreamIsCapturing(s, &cs);
	*yes = e == cudaSuccess && cs != cudaStreamCaptureStatusNone;
	return e;
}

/* One trace row for a call that began at t0 (gp_trace_now_ns). */
static void trace(int op, int dev, cudaStream_t s, size_t size, void *ptr, uint64_t t0, cudaError_t e)
{
	uint64_t t1 = gp_trace_now_ns();
	gp_trace_record_at(op, dev < 0 ? 0 : dev, (uintptr_t)s, size, (uintptr_t)ptr, t1, t1 - t0, (int)e);
}

/* "device 0: out of memory allocating 2.0 GiB (reserved 1.0 GiB, in use 512.0 MiB, limit
 * 1.0 GiB)": the one wording of an allocation gpupool could not serve. Returns buf. */
static const char *oom_message(char *buf, size_t cap, int dev, size_t size)
{
	struct gpupool_device_stats st;
	memset(&st, 0, sizeof st);
	gp_stats_snapshot(S.slots[dev], &st, 100);
	char b[4][32];
	int n = snprintf(buf, cap, "device %d: out of memory allocating %s (reserved %s, in use %s", dev,
			 gp_format_bytes(b[0], sizeof b[0], size), gp_format_bytes(b[1], sizeof b[1], st.reserved_bytes),
			 gp_format_bytes(b[2], sizeof b[2], st.allocated_bytes));
	if (n > 0 && (size_t)n < cap)
		snprintf(buf + n, cap - (size_t)n, "%s%s)", st.limit_bytes ? ", limit " : "",
			 st.limit_bytes ? gp_format_bytes(b[3], sizeof b[3], st.limit_bytes) : "");
	return buf;
}

/* One allocation from the pool of `dev` (answering a pending release request first),
 * traced as `op` on `s`. 0, or -ENOMEM with the out-of-memory message in msg; the
 * runtime's last error is left to the caller. */
static int pool_alloc(gp_pool *p, int dev, size_t size, gp_stream key, int op, cudaStream_t s, uintptr_t *a,
		      char *msg, size_t cap)
{
	uint64_t t0 = S.tracing ? gp_trace_now_ns() : 0;
	check_release_request();
	int rc = gp_pool_alloc(p, size, key, a);
	if (rc != 0)
		oom_message(msg, cap, dev, size);
	if (S.tracing)
		trace(op, dev, s, size, rc == 0 ? (void *)*a : NULL, t0,
		      rc == 0 ? cudaSuccess : cudaErrorMemoryAllocation);
	return rc;
}

cudaError_t gp_shim_malloc(void **ptr, size_t size, cudaStream_t s, enum gp_call call)
{
	if (!ready()) {
		if (!S.rt)
			return cudaErrorInitializationError;
		return real_malloc(ptr, size, s, call);
	}
	if (S.refuse)
		return cudaErrorInvalidValue;
	bool cap;
	if (!ptr || size == 0 || capturing(s, call, &cap) != cudaSuccess || cap)
		return real_malloc(ptr, size, s, call); /* the runtime's own answer and semantics */
	int dev = current_device();
	gp_pool *p = dev >= 0 ? pool_get(dev) : NULL;
	if (!p) {
		cudaError_t e = real_malloc(ptr, size, s, call);
		count_passthrough(dev, true);
		return e;
	}
	bool sync = call == GP_CALL_SYNC;
	gp_stream key = sync ? GP_NO_STREAM : gp_cuda_stream_key(s, call == GP_CALL_ASYNC_PTSZ);
	uintptr_t a = 0;
	char msg[256];
	if (pool_alloc(p, dev, size, key, sync ? GP_TRACE_MALLOC : GP_TRACE_MALLOC_ASYNC, sync ? 0 : s, &a, msg,
		       sizeof msg) != 0) {
		gp_last_error_set(cudaErrorMemoryAllocation);
		gp_log(GP_LOG_WARN, "%s", msg);
		return cudaErrorMemoryAllocation;
	}
	*ptr = (void *)a;
	return cudaSuccess;
}

cudaError_t gp_shim_free(void *ptr, cudaStream_t s, enum gp_call call)
{
	if (!ready() || !ptr) {
		if (!S.rt)
			return ptr ? cudaErrorInitializationError : cudaSuccess;
		return real_free(ptr, s, call); /* cudaFree(0) initialises the context */
	}
	uint64_t t0 = S.tracing ? gp_trace_now_ns() : 0;
	int dev = current_device();
	gp_stream key = call == GP_CALL_SYNC ? GP_NO_STREAM : gp_cuda_stream_key(s, call == GP_CALL_ASYNC_PTSZ);
	int rc = -ENOENT, owner = -1;
	gp_pool *p = dev >= 0 ? atomic_load(&S.pools[dev]) : NULL;
	bool cap = false;
	cudaError_t ce = p && call != GP_CALL_SYNC ? capturing(s, call, &cap) : cudaSuccess;
	if (ce != cudaSuccess)
		return ce; /* an invalid stream: the native call fails the same way */
	if (cap) {
		/* a free captured into a graph happens when the graph runs, maybe never: the
		 * block cannot be reused by anyone until then, so it stays allocated */
		struct gp_block_info bi;
		if (gp_pool_lookup(p, (uintptr_t)ptr, &bi) == 0) {
			gp_log(GP_LOG_WARN, "cudaFreeAsync(%p) inside a stream capture: gpupool keeps the block "
					    "allocated (free it with cudaFree after the capture to reuse it)", ptr);
			return cudaSuccess;
		}
	}
	if (p) {
		rc = gp_pool_free(p, (uintptr_t)ptr, key);
		owner = dev;
	}
	for (int d = 0; rc == -ENOENT && d < S.ndev; d++) {
		gp_pool *q = d == dev ? NULL : atomic_load(&S.pools[d]);
		if (q) {
			rc = gp_pool_free(q, (uintptr_t)ptr, key);
			owner = d;
		}
	}
	cudaError_t e = cudaSuccess;
	if (rc == -ENOENT) {
		e = real_free(ptr, s, call);
		count_passthrough(dev, false);
	} else if (rc == -EALREADY) {
		gp_log(GP_LOG_WARN, "%s(%p): not a live allocation (double free, or a pointer inside a block); "
				    "ignored, returning cudaErrorInvalidValue",
		       call == GP_CALL_SYNC ? "cudaFree" : "cudaFreeAsync", ptr);
		e = cudaErrorInvalidValue;
		gp_last_error_set(e);
	} else if (call == GP_CALL_SYNC && S.fence_started) {
		fence_wake();
	}
	if (S.tracing && rc != -ENOENT)
		trace(call == GP_CALL_SYNC ? GP_TRACE_FREE : GP_TRACE_FREE_ASYNC, owner, call == GP_CALL_SYNC ? 0 : s, 0,
		      ptr, t0, e);
	return e;
}

cudaError_t gp_shim_mem_get_info(size_t *free_bytes, size_t *total_bytes)
{
	if (!ready())
		return S.rt ? S.rt->MemGetInfo(free_bytes, total_bytes) : cudaErrorInitializationError;
	if (!free_bytes || !total_bytes)
		return S.rt->MemGetInfo(free_bytes, total_bytes);
	int dev = current_device();
	gp_pool *p = dev >= 0 ? atomic_load(&S.pools[dev]) : NULL;
	if (p) {
		size_t f, t;
		if (gp_pool_mem_info(p, &f, &t) == 0) {
			*free_bytes = f;
			*total_bytes = t;
			return cudaSuccess;
		}
		return S.rt->MemGetInfo(free_bytes, total_bytes);
	}
	cudaError_t e = S.rt->MemGetInfo(free_bytes, total_bytes);
	size_t lim = e == cudaSuccess ? gp_config_limit(&S.cfg, *total_bytes) : 0;
	if (lim) {
		/* no pool yet: the limit is all this process will get */
		if (lim < *total_bytes)
			*total_bytes = lim;
		if (*free_bytes > *total_bytes)
			*free_bytes = *total_bytes;
	}
	return e;
}

cudaError_t gp_shim_ipc_get_mem_handle(cudaIpcMemHandle_t *handle, void *ptr)
{
	if (!ready() || !ptr || !S.rt->IpcGetMemHandle)
		return S.rt && S.rt->IpcGetMemHandle ? S.rt->IpcGetMemHandle(handle, ptr) : cudaErrorNotSupported;
	for (int d = 0; d < S.ndev; d++) {
		gp_pool *p = atomic_load(&S.pools[d]);
		struct gp_block_info bi;
		if (!p || gp_pool_lookup(p, (uintptr_t)ptr, &bi) != 0)
			continue;
		if (bi.addr == (uintptr_t)ptr && bi.addr == bi.segment && bi.size == bi.segment_size)
			return S.rt->IpcGetMemHandle(handle, ptr); /* the block is its whole segment */
		/* the handle would name the whole segment: the other process would map other
		 * bytes at the address it gets */
		gp_log(GP_LOG_ERROR,
		       "cudaIpcGetMemHandle(%p): a %zu-byte pooled block at offset %zu of a %zu-byte segment cannot be "
		       "exported (the handle would share the whole segment); refusing with cudaErrorInvalidValue. "
		       "An allocation of at least GPUPOOL_CONF medium_max (now %zu bytes) that the pool grows for is a "
		       "whole segment: lower it (e.g. medium_max:1M) for smaller ones, or run with GPUPOOL_DISABLE=1",
		       ptr, (size_t)bi.size, (size_t)((uintptr_t)ptr - bi.segment), (size_t)bi.segment_size,
		       S.cfg.medium_max);
		gp_last_error_set(cudaErrorInvalidValue);
		return cudaErrorInvalidValue;
	}
	return S.rt->IpcGetMemHandle(handle, ptr);
}

cudaError_t gp_shim_begin_capture(cudaStream_t s, enum cudaStreamCaptureMode mode, bool ptsz)
{
	if (!ready() && !S.rt)
		return cudaErrorInitializationError;
	gp_capture_begin();
	cudaError_t e = S.rt->variant[ptsz ? GP_RT_PTSZ : GP_RT_PLAIN].StreamBeginCapture(s, mode);
	if (e != cudaSuccess)
		gp_capture_end();
	return e;
}

cudaError_t gp_shim_end_capture(cudaStream_t s, cudaGraph_t *graph, bool ptsz)
{
	if (!ready() && !S.rt)
		return cudaErrorInitializationError;
	const struct gp_runtime_streamed *v = &S.rt->variant[ptsz ? GP_RT_PTSZ : GP_RT_PLAIN];
	enum cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
	cudaError_t q = v->StreamIsCapturing(s, &cs);
	cudaError_t e = v->StreamEndCapture(s, graph);
	/* the capture is over whatever EndCapture says, if it was one */
	if (q != cudaSuccess || cs != cudaStreamCaptureStatusNone)
		gp_capture_end();
	return e;
}

cudaError_t gp_shim_stream_destroy(cudaStream_t s)
{
	if (ready() && s && s != cudaStreamLegacy && s != cudaStreamPerThread) {
		gp_stream key = gp_cuda_stream_key(s, false);
		for (int d = 0; d < S.ndev; d++) {
			gp_pool *p = atomic_load(&S.pools[d]);
			if (p)
				gp_pool_stream_retire(p, key);
		}
		if (S.fence_started)
			fence_wake();
	}
	return S.rt ? S.rt->StreamDestroy(s) : cudaErrorInitializationError;
}

cudaError_t gp_shim_device_reset(void)
{
	if (ready() && S.rt->DeviceReset) {
		int dev = current_device();
		pthread_mutex_lock(&S.pools_lock);
		gp_pool *p = dev >= 0 ? atomic_exchange(&S.pools[dev], NULL) : NULL;
		pthread_mutex_unlock(&S.pools_lock);
		if (p) {
			/* every allocation of the device dies with the reset. The pool is parked,
			 * not freed: the fence thread or another thread may still be inside one
			 * of its calls (its host memory, a few KiB, is the price of a reset). */
			struct gpupool_device_stats *st = S.slots[dev];
			gp_pool_abandon(p, &S.parked);
			pthread_mutex_lock(&S.pools_lock);
			S.parked_pools[S.nparked++ % 64] = p;
			pthread_mutex_unlock(&S.pools_lock);
			gp_stats_begin(st);
#define ZERO_(name, unit, help) st->name = 0;
			GPUPOOL_GAUGES(ZERO_)
#undef ZERO_
			gp_stats_end(st);
		}
	}
	return S.rt && S.rt->DeviceReset ? S.rt->DeviceReset() : cudaErrorInitializationError;
}

/* ---- public API ------------------------------------------------------------------------ */

long long gp_shim_release(int device)
{
	if (!ready())
		return -ENOSYS;
	if (device < -1 || device >= S.ndev)
		return -ENODEV;
	return release_all(device);
}

int gp_shim_stats(int device, struct gpupool_device_stats *out)
{
	if (!ready())
		return -ENOSYS;
	if (device < 0 || device >= S.ndev || !atomic_load(&S.pools[device]))
		return -ENODEV;
	return gp_stats_snapshot(S.slots[device], out, 1000) ? 0 : -EAGAIN;
}

void *gp_shim_torch_malloc(size_t size, int device, cudaStream_t stream)
{
	if (!ready() || S.refuse || device < 0 || device >= S.ndev || size == 0)
		return NULL;
	gp_pool *p = pool_get(device);
	if (!p)
		return NULL;
	/* a new segment comes from the current device: make it `device` for the call */
	int cur = device;
	if (S.ndev > 1 && (S.rt->GetDevice(&cur) != cudaSuccess || cur != device))
		(void)S.rt->SetDevice(device);
	uintptr_t a = 0;
	char msg[256] = "gpupool: ", *why = msg + 9;
	int rc = pool_alloc(p, device, size, gp_cuda_stream_key(stream, false), GP_TRACE_MALLOC_ASYNC, stream, &a,
			    why, sizeof msg - 9);
	if (cur != device)
		(void)S.rt->SetDevice(cur);
	if (rc == 0)
		return (void *)a;
	/* PyTorch does not check for NULL: a tensor at address 0 would fault in the first kernel
	 * that touches it. Throw, as PyTorch's own allocator does; it becomes a RuntimeError. */
	gp_cxx_throw(msg); /* returns only without a C++ runtime */
	gp_last_error_set(cudaErrorMemoryAllocation);
	gp_log(GP_LOG_WARN, "%s", why);
	return NULL;
}

void gp_shim_torch_free(void *ptr, int device, cudaStream_t stream)
{
	if (!ptr || !ready() || device < 0 || device >= S.ndev)
		return;
	uint64_t t0 = S.tracing ? gp_trace_now_ns() : 0;
	gp_pool *p = atomic_load(&S.pools[device]);
	int rc = p ? gp_pool_free(p, (uintptr_t)ptr, gp_cuda_stream_key(stream, false)) : -ENOENT;
	if (rc != 0)
		gp_log(GP_LOG_WARN, "gpupool_free(%p): not a live gpupool allocation of device %d; ignored", ptr, device);
	else if (S.tracing)
		trace(GP_TRACE_FREE_ASYNC, device, stream, 0, ptr, t0, cudaSuccess);
}

/* ---- exit and fork ------------------------------------------------------------------------ */

/* At exit: counters only, no CUDA (the runtime may already be gone), no locks. */
static void at_exit_report(void)
{
	atomic_store(&S.exiting, 1);
	if (!S.page)
		return; /* a forked child that never allocated */
	if (S.fence_started) {
		pthread_mutex_lock(&S.fence_lock);
		pthread_cond_signal(&S.fence_cond);
		pthread_mutex_unlock(&S.fence_lock);
		/* the runtime tears itself down after this handler: let a fence that is inside
		 * cudaDeviceSynchronize finish first (bounded: 2 s) */
		for (int i = 0; i < 2000 && atomic_load(&S.fencing); i++)
			usleep(1000);
	}
	if (S.tracing)
		gp_trace_close();
	struct gpupool_page snap;
	(void)gp_statpage_copy(S.page, &snap);
	const char *dest = S.cfg.report;
	if (strcmp(dest, "none") != 0) {
		struct gp_format_out o;
		FILE *f = NULL;
		if (!strcmp(dest, "stderr") || !strcmp(dest, "stdout")) {
			gp_format_to_fd(&o, !strcmp(dest, "stdout") ? 1 : 2);
		} else {
			f = fopen(dest, "w");
			if (!f)
				gp_log(GP_LOG_WARN, "cannot write the report to %s; writing it to stderr", dest);
			if (f)
				gp_format_to_file(&o, f);
			else
				gp_format_to_fd(&o, 2);
		}
		if (S.cfg.report_format == GP_REPORT_JSON) {
			struct gp_format_proc pr = {.page = &snap};
			gp_format_json(&o, &pr, 1);
		} else {
			gp_format_report(&o, &snap);
		}
		gp_format_flush(&o);
		if (f)
			fclose(f);
	}
	/* unlink only: other threads may still be inside the pool, whose counters live in the
	 * page; unmapping it here would crash them. The mapping goes with the process. */
	if (S.page_shared)
		gp_statpage_unlink(S.page);
}

/* The child of a fork starts clean: no pools (CUDA memory is not the child's to use), no
 * fence thread (threads do not survive fork), its own page on its first allocation. The
 * parent's pools, possibly locked by threads that no longer exist here, are left alone. */
static void at_fork_child(void)
{
	gp_capture_after_fork();
	atomic_store(&S.fencing, 0);
	for (int d = 0; d < GPUPOOL_MAX_DEVICES; d++) {
		gp_pool *p = atomic_exchange(&S.pools[d], NULL);
		if (p) /* still referenced: abandoned on purpose, not leaked (LeakSanitizer) */
			S.parent_pools[d] = p;
		S.slots[d] = NULL; /* the parent's page: the child gets its own */
	}
	pthread_mutex_init(&S.pools_lock, NULL);
	pthread_mutex_init(&S.fence_lock, NULL);
	pthread_cond_init(&S.fence_cond, NULL);
	atomic_store(&S.fence_want, 0);
	S.fence_started = false;
	if (S.page_shared)
		gp_statpage_forget(S.page);
	S.page = NULL;
	S.page_shared = false;
	if (S.tracing)
		gp_trace_forget();
	S.tracing = false;
}
