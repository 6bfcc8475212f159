/* The pool backend over the real CUDA runtime (backend_cuda.h), through the resolved
 * table (runtime.h): segments, fences, markers (events, and the non-blocking streams they
 * must cover), and the stream keys it understands. Knows CUDA types; knows nothing of the
 * pool's internals or the registry. */
#include "backend_cuda.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "gpupool/stats.h"

#include "capture.h"
#include "last_error.h"
#include "log.h"
#include "runtime.h"
#include "streamkey.h"
#include "rank.h"

/* ---- stream keys ---------------------------------------------------------------------- */


/* The handle this thread can use for a key, or NULL with *ok = false when the key is
 * another thread's per-thread stream. */
static cudaStream_t key_handle(gp_stream k, bool *ok)
{
	uintptr_t h = 0;
	*ok = gp_streamkey_handle(k, &h);
	return *ok ? (cudaStream_t)h : NULL;
}

/* ---- the backend ----------------------------------------------------------------------- */

static _Thread_local cudaError_t segment_error; /* the last -EIO's (gp_cuda_backend_error) */

cudaError_t gp_cuda_backend_error(void) { return segment_error; }

static int cu_segment_alloc(void *ctx, int device, size_t size, uintptr_t *addr)
{
	(void)device;
	const struct gp_runtime *rt = ctx;
	cudaError_t before = rt->PeekAtLastError();
	void *p = NULL;
	/* While a stream captures in global mode, cudaMalloc from any thread would be refused
	 * and would invalidate the capture; in this thread's relaxed mode it is allowed, and a
	 * new segment has nothing to do with the captured work. */
	enum cudaStreamCaptureMode mode = gp_runtime_relax_begin(rt);
	cudaError_t e = rt->Malloc(&p, size);
	if (e != cudaSuccess && e != cudaErrorMemoryAllocation) {
		/* not out of memory (no driver, no device, a sticky error): the pool gives up, and
		 * the program gets this error, with the runtime's last error as cudaMalloc left it */
		gp_runtime_relax_end(rt, mode);
		segment_error = e;
		return -EIO;
	}
	if (e != cudaSuccess) {
		/* the pool may recover (release, retry): leave no stale error behind, and
		 * the program's own pending error as it was */
		gp_last_error_restore(rt, before);
		gp_runtime_relax_end(rt, mode);
		return -ENOMEM;
	}
	gp_runtime_relax_end(rt, mode);
	*addr = (uintptr_t)p;
	return 0;
}

static int cu_segment_free(void *ctx, int device, uintptr_t addr, size_t size)
{
	(void)size;
	const struct gp_runtime *rt = ctx;
	/* cudaFree synchronizes the device: not while a stream captures, and no capture may
	 * begin meanwhile (the gate, as for fences) */
	if (!gp_capture_gate_enter())
		return -EBUSY;
	/* in the segment's device: a thread of gpupool's own (the release thread) has no
	 * device set, and cudaFree would otherwise make device 0's context current */
	int cur = -1;
	if (rt->GetDevice(&cur) != cudaSuccess)
		cur = -1;
	if (cur != device)
		(void)rt->SetDevice(device);
	cudaError_t e = rt->Free((void *)addr);
	if (cur >= 0 && cur != device)
		(void)rt->SetDevice(cur);
	gp_capture_gate_leave();
	return e == cudaSuccess ? 0 : -EIO;
}

struct tails_mark {
	unsigned n;         /* tails recorded before the synchronize */
	unsigned long lost; /* tails lost before it (cu_device_streams.tails_lost_count) */
};
static struct tails_mark tails_before(int device);
static void tails_clear(const struct gp_runtime *rt, int device, struct tails_mark before);

static int cu_device_sync(void *ctx, int device)
{
	const struct gp_runtime *rt = ctx;
	if (gp_capture_count() > 0)
		return -EBUSY;
	if (!gp_capture_gate_enter())
		return -EBUSY;
	/* only the tails recorded before the synchronize are covered by it */
	struct tails_mark tb = tails_before(device);
	int cur = -1;
	if (rt->GetDevice(&cur) != cudaSuccess)
		cur = -1;
	if (cur != device)
		(void)rt->SetDevice(device);
	enum cudaStreamCaptureMode mode = gp_runtime_relax_begin(rt);
	cudaError_t e = rt->DeviceSynchronize();
	gp_runtime_relax_end(rt, mode);
	if (cur >= 0 && cur != device)
		(void)rt->SetDevice(cur);
	gp_capture_gate_leave();
	if (e != cudaSuccess) {
		gp_log(GP_LOG_WARN, "device %d: cudaDeviceSynchronize failed (%d) during a fence; pending frees stay pending",
		       device, (int)e);
		return -EIO;
	}
	tails_clear(rt, device, tb);
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
	const struct gp_runtime *rt = ctx;
	cudaError_t before = rt->PeekAtLastError();
	/* the device asked about, from any thread (the release thread has none of its own) */
	int cur = -1;
	if (rt->GetDevice(&cur) != cudaSuccess)
		cur = -1;
	if (cur != device)
		(void)rt->SetDevice(device);
	cudaError_t e = rt->MemGetInfo(free_bytes, total_bytes);
	if (cur >= 0 && cur != device)
		(void)rt->SetDevice(cur);
	if (e == cudaSuccess)
		return 0;
	gp_last_error_restore(rt, before); /* gpupool's own question: the program's error as it was */
	return -EIO;
}

/* ---- markers ------------------------------------------------------------------------- */

/* A marker is one event on the legacy default stream, which runs after all earlier work of
 * every blocking stream (the per-thread default streams included), plus one on each
 * non-blocking stream of the device that gpupool saw created: together, every stream the
 * process's runtime gave out. A stream destroyed with work queued leaves a "tail" event
 * recorded at its destruction, which the next marker's legacy stream waits on. Streams made
 * where gpupool cannot see them (the driver API, a statically linked runtime) are not
 * covered: GPUPOOL_CONF=fence_marker:0 fences with cudaDeviceSynchronize instead. */
#define GP_CUDA_MARK_STREAMS 64 /* more non-blocking streams on a device: -ENOTSUP */
#define GP_CUDA_TAILS 64        /* more destroyed streams between two markers: -ENOTSUP */
#define GP_CUDA_SPARES 80       /* markers kept for reuse per device; more are destroyed */

struct cu_marker {
	cudaEvent_t *ev;        /* ev[0] on the legacy stream, then one per non-blocking stream */
	unsigned n;             /* events recorded for this marker */
	unsigned made;          /* events created (reused from marker to marker) */
	unsigned done;          /* ev[0..done) seen complete (fence_query, under the pool lock) */
	struct cu_marker *next; /* spares */
	struct cu_marker *all_prev, *all_next; /* every marker of the device (spare or held by
						* a pool), for a device reset */
	bool orphan;            /* held by a pool when its device was reset: its events died with
				 * the reset; freed when the pool lets go (marker_put) */
};

struct cu_device_streams {
	cudaStream_t *nb;       /* the non-blocking streams made on this device, live */
	unsigned n, cap;
	bool lost;              /* one could not be tracked (host memory): -ENOTSUP for good */
	cudaEvent_t tails[GP_CUDA_TAILS];
	unsigned ntails;
	unsigned long tails_lost_count; /* tails lost so far (tails_clear clears tails_lost only
					 * when none was lost during its synchronize) */
	bool tails_lost;        /* a destroyed stream's tail could not be kept: -ENOTSUP until a
				 * device synchronize */
	struct cu_marker *spare;
	unsigned nspare;
	struct cu_marker *all;  /* every marker made, spare or held */
};

/* Everything below is guarded by `streams_lock`, taken after the capture gate. */
static pthread_mutex_t streams_lock = PTHREAD_MUTEX_INITIALIZER;
static struct cu_device_streams devs[GPUPOOL_MAX_DEVICES];

#define MARK_EVENT_FLAGS (cudaEventDisableTiming | cudaEventBlockingSync)

/* Makes `device` current; returns the device to give back to restore_device (-1: none). */
static int enter_device(const struct gp_runtime *rt, int device)
{
	int cur = -1;
	if (rt->GetDevice(&cur) != cudaSuccess)
		return -1;
	if (cur != device && rt->SetDevice(device) != cudaSuccess)
		return -1;
	return cur;
}

static void restore_device(const struct gp_runtime *rt, int device, int cur)
{
	if (cur >= 0 && cur != device)
		(void)rt->SetDevice(cur);
}

/* The program's last error as it was before gpupool's own calls (`before`): a call of
 * ours that failed, or an event query that answered cudaErrorNotReady, must not reach the
 * program's cudaGetLastError. */
static void keep_last_error(const struct gp_runtime *rt, cudaError_t before)
{
	if (rt->PeekAtLastError() != before)
		gp_last_error_restore(rt, before);
}

static bool has_marker_calls(const struct gp_runtime *rt)
{
	const struct gp_runtime_streamed *v = &rt->variant[GP_RT_PLAIN];
	return rt->EventCreateWithFlags && rt->EventDestroy && rt->EventQuery && rt->EventSynchronize &&
	       v->EventRecord && v->StreamWaitEvent;
}

void gp_cuda_stream_created(const struct gp_runtime *rt, cudaStream_t s, unsigned flags)
{
	int d = -1;
	if (!(flags & cudaStreamNonBlocking) || !s || rt->GetDevice(&d) != cudaSuccess)
		return;
	gp_cuda_stream_add(d, s);
}

void gp_cuda_stream_add(int d, cudaStream_t s)
{
	if (!s || d < 0 || d >= GPUPOOL_MAX_DEVICES)
		return; /* a device no pool serves */
	gp_mutex_lock(&streams_lock, GP_RANK_STREAMS);
	struct cu_device_streams *ds = &devs[d];
	for (unsigned j = 0; j < ds->n; j++) {
		if (ds->nb[j] == s) { /* told twice (both layers saw it made) */
			gp_mutex_unlock(&streams_lock, GP_RANK_STREAMS);
			return;
		}
	}
	if (ds->n == ds->cap) {
		unsigned cap = ds->cap ? ds->cap * 2 : 16;
		cudaStream_t *nb = realloc(ds->nb, cap * sizeof *nb);
		if (!nb) {
			ds->lost = true;
			gp_mutex_unlock(&streams_lock, GP_RANK_STREAMS);
			gp_log(GP_LOG_WARN, "device %d: out of host memory tracking streams: fences are "
					    "cudaDeviceSynchronize from now on", d);
			return;
		}
		ds->nb = nb;
		ds->cap = cap;
	}
	ds->nb[ds->n++] = s;
	gp_mutex_unlock(&streams_lock, GP_RANK_STREAMS);
}

void gp_cuda_stream_destroying(const struct gp_runtime *rt, cudaStream_t s)
{
	if (!s)
		return;
	/* the gate keeps a capture from beginning while the tail is recorded (as for markers;
	 * taken before streams_lock, in the same order) */
	bool gate = gp_capture_count() == 0 && gp_capture_gate_enter();
	gp_mutex_lock(&streams_lock, GP_RANK_STREAMS);
	int d = -1;
	for (int i = 0; i < GPUPOOL_MAX_DEVICES && d < 0; i++) {
		struct cu_device_streams *ds = &devs[i];
		for (unsigned j = 0; j < ds->n; j++) {
			if (ds->nb[j] == s) {
				ds->nb[j] = ds->nb[--ds->n];
				d = i;
				break;
			}
		}
	}
	if (d < 0) {
		gp_mutex_unlock(&streams_lock, GP_RANK_STREAMS);
		if (gate)
			gp_capture_gate_leave();
		return; /* a blocking stream: the legacy stream covers its work */
	}
	/* the work s still has queued: the next marker waits for it through a tail event
	 * (recording it during a capture could join s to the capture) */
	struct cu_device_streams *ds = &devs[d];
	bool kept = false;
	if (has_marker_calls(rt) && gate && ds->ntails < GP_CUDA_TAILS) {
		cudaError_t before = rt->PeekAtLastError();
		int cur = enter_device(rt, d);
		enum cudaStreamCaptureMode mode = gp_runtime_relax_begin(rt);
		cudaEvent_t ev;
		if (rt->EventCreateWithFlags(&ev, MARK_EVENT_FLAGS) == cudaSuccess) {
			if (rt->variant[GP_RT_PLAIN].EventRecord(ev, s) == cudaSuccess) {
				ds->tails[ds->ntails++] = ev;
				kept = true;
			} else {
				(void)rt->EventDestroy(ev);
			}
		}
		gp_runtime_relax_end(rt, mode);
		restore_device(rt, d, cur);
		keep_last_error(rt, before);
	}
	if (!kept) {
		ds->tails_lost = true;
		ds->tails_lost_count++;
	}
	gp_mutex_unlock(&streams_lock, GP_RANK_STREAMS);
	if (gate)
		gp_capture_gate_leave();
}

static struct tails_mark tails_before(int device)
{
	struct tails_mark m = {0, 0};
	if (device < 0 || device >= GPUPOOL_MAX_DEVICES)
		return m;
	gp_mutex_lock(&streams_lock, GP_RANK_STREAMS);
	m.n = devs[device].ntails;
	m.lost = devs[device].tails_lost_count;
	gp_mutex_unlock(&streams_lock, GP_RANK_STREAMS);
	return m;
}

/* After a device synchronize: the tails recorded before it have completed (a stream
 * destroyed during it may have added more, which stay, as does a loss during it). */
static void tails_clear(const struct gp_runtime *rt, int device, struct tails_mark before)
{
	if (device < 0 || device >= GPUPOOL_MAX_DEVICES)
		return;
	gp_mutex_lock(&streams_lock, GP_RANK_STREAMS);
	struct cu_device_streams *ds = &devs[device];
	unsigned n = before.n < ds->ntails ? before.n : ds->ntails;
	for (unsigned i = 0; i < n; i++)
		(void)rt->EventDestroy(ds->tails[i]);
	memmove(ds->tails, ds->tails + n, (ds->ntails - n) * sizeof ds->tails[0]);
	ds->ntails -= n;
	if (ds->tails_lost_count == before.lost)
		ds->tails_lost = false;
	gp_mutex_unlock(&streams_lock, GP_RANK_STREAMS);
}

static void marker_unlink(struct cu_device_streams *ds, struct cu_marker *m);

/* A marker with room for n events, all created (device current, streams_lock held); NULL
 * when host memory or an event cannot be had. */
static struct cu_marker *marker_get(const struct gp_runtime *rt, struct cu_device_streams *ds, unsigned n)
{
	struct cu_marker *m = ds->spare;
	if (m) {
		ds->spare = m->next;
		ds->nspare--;
	} else if (!(m = calloc(1, sizeof *m))) {
		return NULL;
	} else {
		m->all_next = ds->all;
		if (ds->all)
			ds->all->all_prev = m;
		ds->all = m;
	}
	if (m->made < n) {
		cudaEvent_t *ev = realloc(m->ev, n * sizeof *ev);
		if (!ev)
			goto fail;
		m->ev = ev;
		while (m->made < n && rt->EventCreateWithFlags(&m->ev[m->made], MARK_EVENT_FLAGS) == cudaSuccess)
			m->made++;
		if (m->made < n)
			goto fail;
	}
	m->n = n;
	m->done = 0;
	return m;
fail:
	m->next = ds->spare;
	ds->spare = m;
	ds->nspare++;
	return NULL;
}

static void marker_put(const struct gp_runtime *rt, struct cu_device_streams *ds, struct cu_marker *m)
{
	if (m->orphan) { /* no longer the device's: its events are gone */
		free(m->ev);
		free(m);
		return;
	}
	if (ds->nspare < GP_CUDA_SPARES) {
		m->next = ds->spare;
		ds->spare = m;
		ds->nspare++;
		return;
	}
	for (unsigned i = 0; i < m->made; i++)
		(void)rt->EventDestroy(m->ev[i]);
	marker_unlink(ds, m);
	free(m->ev);
	free(m);
}

static int cu_fence_mark(void *ctx, int device, uint64_t *token)
{
	const struct gp_runtime *rt = ctx;
	const struct gp_runtime_streamed *v = &rt->variant[GP_RT_PLAIN];
	if (device < 0 || device >= GPUPOOL_MAX_DEVICES || !has_marker_calls(rt))
		return -ENOTSUP;
	/* an event on the legacy stream while a blocking stream captures would invalidate
	 * the capture; the gate keeps a capture from beginning meanwhile */
	if (gp_capture_count() > 0 || !gp_capture_gate_enter())
		return -EBUSY;
	gp_mutex_lock(&streams_lock, GP_RANK_STREAMS);
	struct cu_device_streams *ds = &devs[device];
	int rc = 0;
	if (ds->lost || ds->tails_lost || ds->n > GP_CUDA_MARK_STREAMS) {
		rc = -ENOTSUP;
		goto out;
	}
	cudaError_t before = rt->PeekAtLastError();
	int cur = enter_device(rt, device);
	if (cur < 0) { /* the events would go to another device's queue */
		keep_last_error(rt, before);
		rc = -ENOTSUP;
		goto out;
	}
	enum cudaStreamCaptureMode mode = gp_runtime_relax_begin(rt);
	struct cu_marker *m = marker_get(rt, ds, 1 + ds->n);
	bool ok = m != NULL;
	/* destroyed streams' queued work: the legacy stream waits for it, so ev[0] covers it */
	for (unsigned i = 0; ok && i < ds->ntails; i++)
		ok = rt->EventQuery(ds->tails[i]) == cudaSuccess ||
		     v->StreamWaitEvent(cudaStreamLegacy, ds->tails[i], 0) == cudaSuccess;
	if (ok) {
		for (unsigned i = 0; i < ds->ntails; i++)
			(void)rt->EventDestroy(ds->tails[i]);
		ds->ntails = 0;
	}
	if (ok)
		ok = v->EventRecord(m->ev[0], cudaStreamLegacy) == cudaSuccess;
	for (unsigned i = 0; ok && i < ds->n; i++)
		ok = v->EventRecord(m->ev[1 + i], ds->nb[i]) == cudaSuccess;
	gp_runtime_relax_end(rt, mode);
	restore_device(rt, device, cur);
	keep_last_error(rt, before);
	if (ok) {
		*token = (uint64_t)(uintptr_t)m;
	} else {
		if (m)
			marker_put(rt, ds, m);
		rc = -ENOTSUP; /* the pool fences with a device synchronize instead */
	}
out:
	gp_mutex_unlock(&streams_lock, GP_RANK_STREAMS);
	gp_capture_gate_leave();
	return rc;
}

/* Event queries and synchronizes run in relaxed capture mode: in global mode another
 * thread's capture would refuse them (and be invalidated). */
static int cu_fence_query(void *ctx, int device, uint64_t token)
{
	(void)device;
	const struct gp_runtime *rt = ctx;
	struct cu_marker *m = (struct cu_marker *)(uintptr_t)token;
	cudaError_t before = rt->PeekAtLastError();
	enum cudaStreamCaptureMode mode = gp_runtime_relax_begin(rt);
	int rc = 0;
	while (m->done < m->n) {
		cudaError_t e = rt->EventQuery(m->ev[m->done]);
		if (e != cudaSuccess) {
			rc = e == cudaErrorNotReady ? -EAGAIN : -EIO;
			break;
		}
		m->done++;
	}
	gp_runtime_relax_end(rt, mode);
	keep_last_error(rt, before);
	return rc;
}

static int cu_fence_wait(void *ctx, int device, uint64_t token)
{
	const struct gp_runtime *rt = ctx;
	const struct cu_marker *m = (const struct cu_marker *)(uintptr_t)token;
	cudaError_t before = rt->PeekAtLastError();
	enum cudaStreamCaptureMode mode = gp_runtime_relax_begin(rt);
	cudaError_t e = cudaSuccess;
	for (unsigned i = 0; i < m->n && e == cudaSuccess; i++)
		e = rt->EventSynchronize(m->ev[i]);
	gp_runtime_relax_end(rt, mode);
	keep_last_error(rt, before);
	if (e != cudaSuccess) {
		gp_log(GP_LOG_WARN, "device %d: cudaEventSynchronize failed (%d) during a fence; pending frees stay pending",
		       device, (int)e);
		return -EIO;
	}
	return 0;
}

static void cu_fence_drop(void *ctx, int device, uint64_t token)
{
	const struct gp_runtime *rt = ctx;
	struct cu_marker *m = (struct cu_marker *)(uintptr_t)token;
	gp_mutex_lock(&streams_lock, GP_RANK_STREAMS);
	marker_put(rt, &devs[device], m);
	gp_mutex_unlock(&streams_lock, GP_RANK_STREAMS);
}

/* Unlinks m from its device's list of every marker (streams_lock held). */
static void marker_unlink(struct cu_device_streams *ds, struct cu_marker *m)
{
	if (m->all_prev)
		m->all_prev->all_next = m->all_next;
	else
		ds->all = m->all_next;
	if (m->all_next)
		m->all_next->all_prev = m->all_prev;
	m->all_prev = m->all_next = NULL;
}

void gp_cuda_device_reset_begin(const struct gp_runtime *rt, int device)
{
	if (device < 0 || device >= GPUPOOL_MAX_DEVICES)
		return;
	gp_mutex_lock(&streams_lock, GP_RANK_STREAMS);
	struct cu_device_streams *ds = &devs[device];
	/* A reset destroys every event of the device, after which their handles are invalid:
	 * the spare markers' events and the tails go now, while they are valid (a reset that
	 * fails leaves them to be made again). A marker a pool holds stays: the pools' backend
	 * calls wait at the reset gate meanwhile, and if the reset fails it is still good. */
	cudaError_t before = rt->PeekAtLastError();
	int cur = enter_device(rt, device);
	for (struct cu_marker *m = ds->spare, *next; m; m = next) {
		next = m->next;
		for (unsigned i = 0; i < m->made; i++)
			(void)rt->EventDestroy(m->ev[i]);
		marker_unlink(ds, m);
		free(m->ev);
		free(m);
	}
	ds->spare = NULL;
	ds->nspare = 0;
	for (unsigned i = 0; i < ds->ntails; i++)
		(void)rt->EventDestroy(ds->tails[i]);
	if (ds->ntails) {
		/* should the reset fail, the destroyed streams' queued work is no longer covered
		 * by a tail: markers wait for a device synchronize (tails_clear) */
		ds->ntails = 0;
		ds->tails_lost = true;
		ds->tails_lost_count++;
	}
	restore_device(rt, device, cur);
	keep_last_error(rt, before);
	gp_mutex_unlock(&streams_lock, GP_RANK_STREAMS);
}

void gp_cuda_device_reset_done(int device)
{
	if (device < 0 || device >= GPUPOOL_MAX_DEVICES)
		return;
	gp_mutex_lock(&streams_lock, GP_RANK_STREAMS);
	struct cu_device_streams *ds = &devs[device];
	/* the reset destroyed every stream and event of the device: no CUDA call on them. A
	 * marker a pool holds is left to the pool, an orphan freed when the pool lets it go
	 * (marker_put); the rest is forgotten */
	for (struct cu_marker *m = ds->all, *next; m; m = next) {
		next = m->all_next;
		m->all_prev = m->all_next = NULL;
		m->orphan = true;
	}
	free(ds->nb);
	memset(ds, 0, sizeof *ds);
	gp_mutex_unlock(&streams_lock, GP_RANK_STREAMS);
}

void gp_cuda_backend_after_fork(void)
{
	/* the parent's streams and events are not the child's: forgotten (not freed: the
	 * lock may have been held mid-update by a thread that does not exist here) */
	pthread_mutex_init(&streams_lock, NULL);
	memset(devs, 0, sizeof devs);
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
		.fence_mark = cu_fence_mark,
		.fence_query = cu_fence_query,
		.fence_wait = cu_fence_wait,
		.fence_drop = cu_fence_drop,
	};
}
