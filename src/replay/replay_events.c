/* The replay's observer plumbing (replay_events.h): a backend that forwards to the fake and
 * queues the segment calls, the cudaFree'd blocks waiting for a fence per device, and the
 * order in which events reach the observers. Depends on replay.h and the pool's contract;
 * never on the pool's internals, CUDA or I/O. */
#include "replay_events.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "trace_format.h"

/* A segment call made inside a pool call, reported once the call has returned. */
struct seg_ev {
	int kind, dev, op;
	unsigned long line;
	uintptr_t addr;
	size_t size;
};

/* A cudaFree'd block waiting for its fence. */
struct pend {
	uintptr_t addr;
	uint64_t size, requested;
	unsigned long line;        /* of the free */
};

struct pend_list {
	struct pend *v;
	size_t n, cap;
};

struct gp_replay_events {
	const struct gp_replay_observer *obs[GP_REPLAY_MAX_OBSERVERS];
	const struct gp_backend *inner;
	struct gp_backend be;
	gp_pool *const *pools;         /* replay.c's, one per device (NULL until made) */
	uint64_t t_ns;
	unsigned long line;
	int op;
	bool closed;
	int err;                       /* a queue that could not grow: reported at the next call */
	struct seg_ev *q;
	size_t nq, capq;
	struct pend_list pend[GPUPOOL_MAX_DEVICES];
	uint64_t fences[GPUPOOL_MAX_DEVICES]; /* st->fences when last looked at */
	struct pend cur_free;          /* the block between free_begin and free_end */
	uint64_t cur_stream;
};

static int emit(struct gp_replay_events *e, const struct gp_replay_event *ev)
{
	for (int i = 0; i < GP_REPLAY_MAX_OBSERVERS; i++) {
		if (!e->obs[i] || !e->obs[i]->event)
			continue;
		int rc = e->obs[i]->event(e->obs[i]->ctx, ev);
		if (rc < 0)
			return rc;
	}
	return 0;
}

static int queue_seg(struct gp_replay_events *e, int kind, int dev, uintptr_t addr, size_t size)
{
	if (e->closed)
		return 0;
	if (gp_replay_grow((void **)&e->q, &e->capq, e->nq + 1, sizeof *e->q)) {
		e->err = -ENOMEM;
		return 0; /* the pool's call goes on; the replay stops after it */
	}
	e->q[e->nq++] = (struct seg_ev){.kind = kind, .dev = dev, .addr = addr, .size = size, .line = e->line,
					.op = e->op};
	return 0;
}

static int ev_segment_alloc(void *ctx, int device, size_t size, uintptr_t *addr)
{
	struct gp_replay_events *e = ctx;
	int rc = e->inner->segment_alloc(e->inner->ctx, device, size, addr);
	if (rc == 0)
		queue_seg(e, GP_REPLAY_SEGMENT_ALLOC, device, *addr, size);
	return rc;
}

static int ev_segment_free(void *ctx, int device, uintptr_t addr, size_t size)
{
	struct gp_replay_events *e = ctx;
	int rc = e->inner->segment_free(e->inner->ctx, device, addr, size);
	if (rc == 0)
		queue_seg(e, GP_REPLAY_SEGMENT_FREE, device, addr, size);
	return rc;
}

static int ev_device_sync(void *ctx, int device)
{
	struct gp_replay_events *e = ctx;
	return e->inner->device_sync(e->inner->ctx, device);
}

static int ev_stream_wait(void *ctx, int device, gp_stream from, gp_stream to)
{
	struct gp_replay_events *e = ctx;
	return e->inner->stream_wait(e->inner->ctx, device, from, to);
}

static int ev_mem_info(void *ctx, int device, size_t *free_bytes, size_t *total_bytes)
{
	struct gp_replay_events *e = ctx;
	return e->inner->mem_info(e->inner->ctx, device, free_bytes, total_bytes);
}

/* The markers and the clock pass straight through: observers see their effect on the
 * pending blocks (settle), not the calls. */
static int ev_fence_mark(void *ctx, int device, uint64_t *token)
{
	struct gp_replay_events *e = ctx;
	return e->inner->fence_mark(e->inner->ctx, device, token);
}

static int ev_fence_query(void *ctx, int device, uint64_t token)
{
	struct gp_replay_events *e = ctx;
	return e->inner->fence_query(e->inner->ctx, device, token);
}

static int ev_fence_wait(void *ctx, int device, uint64_t token)
{
	struct gp_replay_events *e = ctx;
	return e->inner->fence_wait(e->inner->ctx, device, token);
}

static void ev_fence_drop(void *ctx, int device, uint64_t token)
{
	struct gp_replay_events *e = ctx;
	e->inner->fence_drop(e->inner->ctx, device, token);
}

static uint64_t ev_now_ns(void *ctx)
{
	struct gp_replay_events *e = ctx;
	return e->inner->now_ns(e->inner->ctx);
}

/* Virtual memory: the reservations pass through (address space, no memory); chunks mapped
 * and unmapped are queued as the segment calls are. */
static int ev_vmm_granularity(void *ctx, int device, size_t *bytes)
{
	struct gp_replay_events *e = ctx;
	return e->inner->vmm_granularity(e->inner->ctx, device, bytes);
}

static int ev_vmm_reserve(void *ctx, int device, size_t size, uintptr_t *addr)
{
	struct gp_replay_events *e = ctx;
	return e->inner->vmm_reserve(e->inner->ctx, device, size, addr);
}

static int ev_vmm_unreserve(void *ctx, int device, uintptr_t addr, size_t size)
{
	struct gp_replay_events *e = ctx;
	return e->inner->vmm_unreserve(e->inner->ctx, device, addr, size);
}

static int ev_vmm_map(void *ctx, int device, uintptr_t addr, size_t size, size_t *mapped)
{
	struct gp_replay_events *e = ctx;
	int rc = e->inner->vmm_map(e->inner->ctx, device, addr, size, mapped);
	if (*mapped)
		queue_seg(e, GP_REPLAY_SEGMENT_MAP, device, addr, *mapped);
	return rc;
}

static int ev_vmm_unmap(void *ctx, int device, uintptr_t addr, size_t size, bool sync, size_t *unmapped)
{
	struct gp_replay_events *e = ctx;
	int rc = e->inner->vmm_unmap(e->inner->ctx, device, addr, size, sync, unmapped);
	if (*unmapped)
		queue_seg(e, GP_REPLAY_SEGMENT_UNMAP, device, addr, *unmapped);
	return rc;
}

static const struct gp_backend observed_calls = {
	.segment_alloc = ev_segment_alloc,
	.segment_free = ev_segment_free,
	.device_sync = ev_device_sync,
	.stream_wait = ev_stream_wait,
	.mem_info = ev_mem_info,
	.fence_mark = ev_fence_mark,
	.fence_query = ev_fence_query,
	.fence_wait = ev_fence_wait,
	.fence_drop = ev_fence_drop,
	.now_ns = ev_now_ns,
	.vmm_granularity = ev_vmm_granularity,
	.vmm_reserve = ev_vmm_reserve,
	.vmm_unreserve = ev_vmm_unreserve,
	.vmm_map = ev_vmm_map,
	.vmm_unmap = ev_vmm_unmap,
};

int gp_replay_events_new(struct gp_replay_events **out, const struct gp_replay_opts *o,
			 const struct gp_backend *inner, gp_pool *const pools[GPUPOOL_MAX_DEVICES])
{
	*out = NULL;
	bool any = false;
	for (int i = 0; i < GP_REPLAY_MAX_OBSERVERS; i++)
		any = any || o->observers[i];
	if (!any)
		return 0;
	struct gp_replay_events *e = calloc(1, sizeof *e);
	if (!e)
		return -ENOMEM;
	memcpy(e->obs, o->observers, sizeof e->obs);
	e->inner = inner;
	e->pools = pools;
	e->be = gp_backend_wrap(inner, e, &observed_calls);
	*out = e;
	return 0;
}

const struct gp_backend *gp_replay_events_backend(struct gp_replay_events *e) { return &e->be; }

void gp_replay_events_free(struct gp_replay_events *e)
{
	if (!e)
		return;
	free(e->q);
	for (int d = 0; d < GPUPOOL_MAX_DEVICES; d++)
		free(e->pend[d].v);
	free(e);
}

void gp_replay_events_time(struct gp_replay_events *e, uint64_t t_ns, unsigned long line, int op)
{
	e->t_ns = t_ns;
	e->line = line;
	e->op = op;
}

/* The cudaFree'd blocks of dev that a fence completed since the last look, then the segment
 * calls queued meanwhile: a block is reusable before its segment can go back. A fence that
 * was a marker retires only the blocks freed before it: the others stay pending, in order. */
static int settle(struct gp_replay_events *e, const struct gpupool_device_stats *st, int dev, uint64_t t_ns)
{
	int rc = e->err;
	if (rc)
		return rc;
	if (st->fences != e->fences[dev]) {
		e->fences[dev] = st->fences;
		struct pend_list *pl = &e->pend[dev];
		gp_pool *p = e->pools[dev];
		/* a fence retires the blocks freed before it: a prefix of this list, in free
		 * order, so the first block still pending ends it */
		size_t i = 0;
		for (; i < pl->n && !rc; i++) {
			if (p && gp_pool_block_pending(p, pl->v[i].addr))
				break;
			struct gp_replay_event ev = {.kind = GP_REPLAY_FREE_COMPLETED, .dev = dev, .t_ns = t_ns,
						     .addr = pl->v[i].addr, .size = pl->v[i].size,
						     .requested = pl->v[i].requested, .line = pl->v[i].line,
						     .op = GP_TRACE_FREE};
			rc = emit(e, &ev);
		}
		if (i) {
			memmove(pl->v, pl->v + i, (pl->n - i) * sizeof *pl->v);
			pl->n -= i;
		}
	}
	for (size_t i = 0; i < e->nq && !rc; i++) {
		struct gp_replay_event ev = {.kind = e->q[i].kind, .dev = e->q[i].dev, .t_ns = e->t_ns,
					     .addr = e->q[i].addr, .size = e->q[i].size, .line = e->q[i].line,
					     .op = e->q[i].op};
		rc = emit(e, &ev);
	}
	e->nq = 0;
	return rc;
}

int gp_replay_events_alloc(struct gp_replay_events *e, gp_pool *p, const struct gpupool_device_stats *st,
			   int dev, uintptr_t addr, uint64_t requested, uint64_t stream)
{
	int rc = settle(e, st, dev, e->t_ns);
	if (rc)
		return rc;
	struct gp_block_info bi;
	if (gp_pool_lookup(p, addr, &bi))
		return -EFAULT; /* the pool just handed it out */
	struct gp_replay_event ev = {.kind = GP_REPLAY_ALLOC, .dev = dev, .t_ns = e->t_ns, .addr = addr,
				     .size = bi.size, .requested = requested, .stream = stream, .line = e->line,
				     .op = e->op};
	return emit(e, &ev);
}

int gp_replay_events_free_begin(struct gp_replay_events *e, gp_pool *p, int dev, uintptr_t addr,
				uint64_t stream)
{
	struct gp_block_info bi;
	if (gp_pool_lookup(p, addr, &bi) || bi.addr != addr)
		return -EFAULT; /* replay.c frees only the live blocks it mapped */
	e->cur_free = (struct pend){.addr = addr, .size = bi.size, .requested = bi.requested, .line = e->line};
	e->cur_stream = stream;
	struct gp_replay_event ev = {.kind = GP_REPLAY_FREE_REQUESTED, .dev = dev, .t_ns = e->t_ns, .addr = addr,
				     .size = bi.size, .requested = bi.requested, .stream = stream, .line = e->line,
				     .op = e->op};
	return emit(e, &ev);
}

int gp_replay_events_free_end(struct gp_replay_events *e, const struct gpupool_device_stats *st, int dev,
			      bool stream_ordered)
{
	if (stream_ordered) {
		struct gp_replay_event ev = {.kind = GP_REPLAY_FREE_COMPLETED, .dev = dev, .t_ns = e->t_ns,
					     .addr = e->cur_free.addr, .size = e->cur_free.size,
					     .requested = e->cur_free.requested, .stream = e->cur_stream,
					     .line = e->line, .op = e->op};
		int rc = emit(e, &ev);
		if (rc)
			return rc;
	} else {
		struct pend_list *pl = &e->pend[dev];
		if (gp_replay_grow((void **)&pl->v, &pl->cap, pl->n + 1, sizeof *pl->v))
			return -ENOMEM;
		pl->v[pl->n++] = e->cur_free;
	}
	/* a fence inside the free (fence:sync) retires it at once */
	return settle(e, st, dev, e->t_ns);
}

int gp_replay_events_settle(struct gp_replay_events *e, const struct gpupool_device_stats *st, int dev,
			    uint64_t t_ns)
{
	return settle(e, st, dev, t_ns);
}

int gp_replay_events_row(struct gp_replay_events *e, gp_pool *const pools[GPUPOOL_MAX_DEVICES],
			 const struct gpupool_device_stats st[GPUPOOL_MAX_DEVICES])
{
	for (int d = 0; d < GPUPOOL_MAX_DEVICES; d++) {
		if (!pools[d])
			continue;
		struct gp_replay_event ev = {.kind = GP_REPLAY_ROW, .dev = d, .t_ns = e->t_ns, .st = &st[d],
					     .line = e->line, .op = e->op};
		int rc = emit(e, &ev);
		if (rc)
			return rc;
	}
	return 0;
}

int gp_replay_events_end(struct gp_replay_events *e, gp_pool *const pools[GPUPOOL_MAX_DEVICES])
{
	int rc = 0;
	for (int i = 0; i < GP_REPLAY_MAX_OBSERVERS && !rc; i++)
		if (e->obs[i] && e->obs[i]->end)
			rc = e->obs[i]->end(e->obs[i]->ctx, pools, e->t_ns);
	e->closed = true;
	return rc;
}
