/* The PyTorch memory snapshot (snapshot.h): events kept per device in a ring of the newest
 * max_entries, the live blocks' trace lines in a uthash, and at the end of the replay the
 * pools walked and everything written as one pickle. Depends on replay.h, pool.h, pickle.h,
 * outfile.h and uthash; no CUDA, no Python. */
#define HASH_NONFATAL_OOM 1
#include "snapshot.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "outfile.h"
#include "pickle.h"
#include "trace_format.h"

static _Thread_local int sn_oom;
#define uthash_nonfatal_oom(e) (sn_oom = 1)
#include <uthash.h>

/* One entry of a device's history, as PyTorch's TraceEntry. */
struct ent {
	uint8_t kind;             /* enum gp_replay_event_kind */
	uint8_t op;               /* the row's op */
	uint64_t stream, t_ns, size;
	uintptr_t addr;
	unsigned long line;
};

struct ring {
	struct ent *v;
	size_t cap, n, head;      /* n entries from head (the oldest), wrapping at cap */
};

/* A live block's allocation row, for its "frames" in the final state. */
struct live {
	uintptr_t addr;
	unsigned long line;
	int op;
	uint64_t stream;
	UT_hash_handle hh;
};

struct gp_snapshot {
	struct gp_replay_observer obs;
	struct gp_snapshot_opts o;
	char *trace_name;         /* trace_path with anything but printable ASCII as '?' */
	FILE *f;
	struct ring ring[GPUPOOL_MAX_DEVICES];
	int ndev;                 /* 1 + the highest device seen */
	uint64_t dropped;
	struct live *live;
};

static int ring_push(struct gp_snapshot *s, int dev, const struct ent *e)
{
	struct ring *r = &s->ring[dev];
	if (r->n == r->cap && r->cap < s->o.max_entries) {
		size_t nc = r->cap ? r->cap * 2 : 1024;
		if (nc > s->o.max_entries)
			nc = (size_t)s->o.max_entries;
		struct ent *nv = malloc(nc * sizeof *nv);
		if (!nv)
			return -ENOMEM;
		for (size_t i = 0; i < r->n; i++)
			nv[i] = r->v[(r->head + i) % r->cap];
		free(r->v);
		r->v = nv;
		r->cap = nc;
		r->head = 0;
	}
	if (r->n == r->cap) {
		/* full at max_entries: the oldest goes, as in PyTorch's ring of TraceEntry */
		r->v[r->head] = *e;
		r->head = (r->head + 1) % r->cap;
		s->dropped++;
		return 0;
	}
	r->v[(r->head + r->n) % r->cap] = *e;
	r->n++;
	return 0;
}

/* An event of the pool's own calls to the backend (a segment or chunks of one). */
static bool segment_call(int kind)
{
	return kind == GP_REPLAY_SEGMENT_ALLOC || kind == GP_REPLAY_SEGMENT_FREE || kind == GP_REPLAY_SEGMENT_MAP ||
	       kind == GP_REPLAY_SEGMENT_UNMAP;
}

static int on_event(void *ctx, const struct gp_replay_event *e)
{
	struct gp_snapshot *s = ctx;
	if (e->kind == GP_REPLAY_ROW)
		return 0;
	if (e->dev + 1 > s->ndev)
		s->ndev = e->dev + 1;
	if (e->kind == GP_REPLAY_ALLOC) {
		struct live *l;
		HASH_FIND(hh, s->live, &e->addr, sizeof e->addr, l);
		if (!l) {
			l = malloc(sizeof *l);
			if (!l)
				return -ENOMEM;
			l->addr = e->addr;
			sn_oom = 0;
			HASH_ADD(hh, s->live, addr, sizeof l->addr, l);
			if (sn_oom) {
				free(l);
				return -ENOMEM;
			}
		}
		l->line = e->line;
		l->op = e->op;
		l->stream = e->stream;
	} else if (e->kind == GP_REPLAY_FREE_REQUESTED) {
		struct live *l;
		HASH_FIND(hh, s->live, &e->addr, sizeof e->addr, l);
		if (l) {
			HASH_DEL(s->live, l);
			free(l);
		}
	}
	/* PyTorch's TraceEntry sizes: the segment's for segment calls, the bytes asked for (not
	 * the rounded block) for allocations and frees */
	bool seg = segment_call(e->kind);
	struct ent en = {.kind = (uint8_t)e->kind, .op = (uint8_t)e->op, .stream = e->stream, .t_ns = e->t_ns,
			 .size = seg ? e->size : e->requested, .addr = e->addr, .line = e->line};
	return ring_push(s, e->dev, &en);
}

static const char *op_name(int op)
{
	switch (op) {
	case GP_TRACE_MALLOC: return "cudaMalloc";
	case GP_TRACE_FREE: return "cudaFree";
	case GP_TRACE_MALLOC_ASYNC: return "cudaMallocAsync";
	case GP_TRACE_FREE_ASYNC: return "cudaFreeAsync";
	default: return "?";
	}
}

/* "frames": one frame naming the trace row behind it ({filename: TRACE, line: LINE, name:
 * cudaMalloc}), which the viewer shows as TRACE:LINE:cudaMalloc. */
static void frames(struct gp_snapshot *s, struct gp_pickle *pk, unsigned long line, int op, const char *what)
{
	gp_pickle_str(pk, "frames");
	if (!line) {
		gp_pickle_empty_list(pk);
	} else {
		char name[64];
		snprintf(name, sizeof name, "%s%s", op_name(op), what);
		gp_pickle_list_open(pk);
		gp_pickle_dict_open(pk);
		gp_pickle_kv_str(pk, "filename", s->trace_name);
		gp_pickle_kv_int(pk, "line", (int64_t)line);
		gp_pickle_kv_str(pk, "name", name);
		gp_pickle_close(pk);
		gp_pickle_next(pk);
		gp_pickle_close(pk);
	}
	gp_pickle_next(pk);
}

static const char *action(int kind)
{
	switch (kind) {
	case GP_REPLAY_SEGMENT_ALLOC: return "segment_alloc";
	case GP_REPLAY_SEGMENT_FREE: return "segment_free";
	case GP_REPLAY_SEGMENT_MAP: return "segment_map";
	case GP_REPLAY_SEGMENT_UNMAP: return "segment_unmap";
	case GP_REPLAY_ALLOC: return "alloc";
	case GP_REPLAY_FREE_REQUESTED: return "free_requested";
	default: return "free_completed";
	}
}

/* The final layout, collected by gp_pool_walk and sorted by address as PyTorch lists it. */
struct wseg {
	struct gp_walk_segment s;
	int dev;
	size_t first, n;          /* its blocks in walk.blocks */
};
struct walk {
	struct wseg *segs;
	size_t nsegs, capsegs;
	struct gp_walk_block *blocks;
	size_t nblocks, capblocks;
	int dev;
};

static int walk_segment(void *ctx, const struct gp_walk_segment *ws)
{
	struct walk *w = ctx;
	if (gp_replay_grow((void **)&w->segs, &w->capsegs, w->nsegs + 1, sizeof *w->segs))
		return -ENOMEM;
	w->segs[w->nsegs++] = (struct wseg){.s = *ws, .dev = w->dev, .first = w->nblocks};
	return 0;
}

static int walk_block(void *ctx, const struct gp_walk_block *wb)
{
	struct walk *w = ctx;
	if (gp_replay_grow((void **)&w->blocks, &w->capblocks, w->nblocks + 1, sizeof *w->blocks))
		return -ENOMEM;
	w->blocks[w->nblocks++] = *wb;
	w->segs[w->nsegs - 1].n++;
	return 0;
}

static int cmp_wseg(const void *a, const void *b)
{
	const struct wseg *x = a, *y = b;
	if (x->dev != y->dev)
		return x->dev < y->dev ? -1 : 1;
	return x->s.addr < y->s.addr ? -1 : x->s.addr > y->s.addr;
}

static void write_segment(struct gp_snapshot *s, struct gp_pickle *pk, const struct walk *w, const struct wseg *sg)
{
	uint64_t allocated = 0, active = 0, requested = 0;
	for (size_t i = 0; i < sg->n; i++) {
		const struct gp_walk_block *b = &w->blocks[sg->first + i];
		if (b->state == GP_WALK_LIVE) {
			allocated += b->size;
			requested += b->requested;
		}
		if (b->state != GP_WALK_FREE)
			active += b->size;
	}
	gp_pickle_dict_open(pk);
	gp_pickle_kv_int(pk, "device", sg->dev);
	gp_pickle_kv_int(pk, "address", (int64_t)sg->s.addr);
	gp_pickle_kv_int(pk, "total_size", (int64_t)sg->s.size);
	gp_pickle_kv_int(pk, "allocated_size", (int64_t)allocated);
	gp_pickle_kv_int(pk, "active_size", (int64_t)active);
	gp_pickle_kv_int(pk, "requested_size", (int64_t)requested);
	/* a gpupool segment serves every stream: its blocks carry their own */
	gp_pickle_kv_int(pk, "stream", 0);
	gp_pickle_kv_str(pk, "segment_type", sg->s.small ? "small" : "large");
	gp_pickle_str(pk, "segment_pool_id");
	gp_pickle_int(pk, 0);
	gp_pickle_int(pk, 0);
	gp_pickle_tuple2(pk);
	gp_pickle_next(pk);
	gp_pickle_kv_bool(pk, "is_expandable", sg->s.expandable);
	frames(s, pk, 0, 0, "");
	gp_pickle_str(pk, "blocks");
	gp_pickle_list_open(pk);
	for (size_t i = 0; i < sg->n; i++) {
		const struct gp_walk_block *b = &w->blocks[sg->first + i];
		gp_pickle_dict_open(pk);
		gp_pickle_kv_int(pk, "address", (int64_t)b->addr);
		gp_pickle_kv_int(pk, "size", (int64_t)b->size);
		gp_pickle_kv_int(pk, "requested_size", (int64_t)(b->state == GP_WALK_FREE ? 0 : b->requested));
		gp_pickle_kv_str(pk, "state", b->state == GP_WALK_LIVE ? "active_allocated"
					      : b->state == GP_WALK_PENDING ? "active_pending_free" : "inactive");
		struct live *l = NULL;
		if (b->state != GP_WALK_FREE)
			HASH_FIND(hh, s->live, &b->addr, sizeof b->addr, l);
		frames(s, pk, l ? l->line : 0, l ? l->op : 0, "");
		gp_pickle_close(pk);
		gp_pickle_next(pk);
	}
	gp_pickle_close(pk);
	gp_pickle_next(pk);
	gp_pickle_close(pk);
}

static void write_traces(struct gp_snapshot *s, struct gp_pickle *pk)
{
	gp_pickle_list_open(pk);
	for (int d = 0; d < s->ndev; d++) {
		const struct ring *r = &s->ring[d];
		gp_pickle_list_open(pk);
		for (size_t i = 0; i < r->n; i++) {
			const struct ent *e = &r->v[(r->head + i) % r->cap];
			gp_pickle_dict_open(pk);
			gp_pickle_kv_str(pk, "action", action(e->kind));
			gp_pickle_kv_int(pk, "addr", (int64_t)e->addr);
			gp_pickle_kv_int(pk, "size", (int64_t)e->size);
			gp_pickle_kv_int(pk, "stream", (int64_t)e->stream);
			gp_pickle_kv_int(pk, "time_us", (int64_t)(e->t_ns / 1000));
			bool seg = segment_call(e->kind);
			frames(s, pk, e->line, e->op,
			       seg ? " (the pool's segment call)"
				   : e->kind == GP_REPLAY_FREE_COMPLETED && e->op == GP_TRACE_FREE ? " (retired by a fence)" : "");
			gp_pickle_close(pk);
			gp_pickle_next(pk);
		}
		gp_pickle_close(pk);
		gp_pickle_next(pk);
	}
	gp_pickle_close(pk);
}

static int on_end(void *ctx, gp_pool *const pools[GPUPOOL_MAX_DEVICES], uint64_t last_t_ns)
{
	struct gp_snapshot *s = ctx;
	struct walk w = {0};
	int rc = 0;
	(void)last_t_ns;
	for (int d = 0; d < GPUPOOL_MAX_DEVICES && !rc; d++) {
		if (!pools[d])
			continue;
		if (d + 1 > s->ndev)
			s->ndev = d + 1;
		w.dev = d;
		struct gp_pool_walker wk = {.ctx = &w, .segment = walk_segment, .block = walk_block};
		rc = gp_pool_walk(pools[d], &wk);
	}
	if (rc == 0) {
		if (w.nsegs)
			qsort(w.segs, w.nsegs, sizeof *w.segs, cmp_wseg);
		struct gp_pickle pk;
		gp_pickle_begin(&pk, s->f);
		gp_pickle_dict_open(&pk);
		gp_pickle_str(&pk, "segments");
		gp_pickle_list_open(&pk);
		for (size_t i = 0; i < w.nsegs; i++) {
			write_segment(s, &pk, &w, &w.segs[i]);
			gp_pickle_next(&pk);
		}
		gp_pickle_close(&pk);
		gp_pickle_next(&pk);
		gp_pickle_str(&pk, "device_traces");
		write_traces(s, &pk);
		gp_pickle_next(&pk);
		/* PyTorch's keys, with what gpupool's pool has in their place */
		gp_pickle_str(&pk, "allocator_settings");
		gp_pickle_dict_open(&pk);
		gp_pickle_kv_str(&pk, "PYTORCH_CUDA_ALLOC_CONF", "");
		gp_pickle_kv_int(&pk, "max_split_size",
				 s->o.max_split_size == SIZE_MAX ? -1 : (int64_t)s->o.max_split_size);
		gp_pickle_str(&pk, "garbage_collection_threshold");
		gp_pickle_float(&pk, 0.0);
		gp_pickle_next(&pk);
		gp_pickle_kv_bool(&pk, "expandable_segments", false);
		gp_pickle_kv_bool(&pk, "release_lock_on_cudamalloc", false);
		gp_pickle_str(&pk, "roundup_power2_divisions");
		gp_pickle_dict_open(&pk);
		gp_pickle_close(&pk);
		gp_pickle_next(&pk);
		gp_pickle_close(&pk);
		gp_pickle_next(&pk);
		gp_pickle_str(&pk, "external_annotations");
		gp_pickle_empty_list(&pk);
		gp_pickle_next(&pk);
		/* where it came from: not PyTorch's, ignored by its readers */
		gp_pickle_str(&pk, "gpupool");
		gp_pickle_dict_open(&pk);
		gp_pickle_kv_str(&pk, "trace", s->trace_name);
		gp_pickle_kv_str(&pk, "conf", s->o.conf ? s->o.conf : "");
		gp_pickle_kv_str(&pk, "version", GP_VERSION);
		gp_pickle_kv_int(&pk, "dropped_events", (int64_t)s->dropped);
		gp_pickle_close(&pk);
		gp_pickle_next(&pk);
		gp_pickle_close(&pk);
		rc = gp_pickle_end(&pk);
		if (rc == 0 && fflush(s->f) != 0)
			rc = -EIO;
	}
	free(w.segs);
	free(w.blocks);
	return rc;
}

int gp_snapshot_new(struct gp_snapshot **out, const char *out_path, const struct gp_snapshot_opts *o)
{
	*out = NULL;
	struct gp_snapshot *s = calloc(1, sizeof *s);
	if (!s)
		return -ENOMEM;
	s->o = *o;
	if (!s->o.max_entries)
		s->o.max_entries = GP_SNAPSHOT_MAX_ENTRIES;
	const char *tp = o->trace_path ? o->trace_path : "";
	s->trace_name = strdup(tp);
	if (!s->trace_name) {
		free(s);
		return -ENOMEM;
	}
	/* the pickle's strings are UTF-8: keep the name printable ASCII */
	for (char *c = s->trace_name; *c; c++)
		if (*c < 0x20 || *c > 0x7e)
			*c = '?';
	int fd = gp_outfile_open(out_path, 0644);
	if (fd < 0) {
		free(s->trace_name);
		free(s);
		return fd;
	}
	s->f = fdopen(fd, "wb");
	if (!s->f) {
		int err = -errno;
		close(fd);
		free(s->trace_name);
		free(s);
		return err;
	}
	s->obs = (struct gp_replay_observer){.ctx = s, .event = on_event, .end = on_end};
	*out = s;
	return 0;
}

const struct gp_replay_observer *gp_snapshot_observer(struct gp_snapshot *s) { return &s->obs; }

uint64_t gp_snapshot_dropped(const struct gp_snapshot *s) { return s->dropped; }

int gp_snapshot_close(struct gp_snapshot *s)
{
	if (!s)
		return 0;
	int rc = fclose(s->f) == 0 ? 0 : -EIO;
	for (int d = 0; d < GPUPOOL_MAX_DEVICES; d++)
		free(s->ring[d].v);
	struct live *l, *tmp;
	HASH_ITER(hh, s->live, l, tmp) {
		HASH_DEL(s->live, l);
		free(l);
	}
	free(s->trace_name);
	free(s);
	return rc;
}
