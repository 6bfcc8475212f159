/* Trace replay (replay.h): rows through gp_pool in trace order on the fake backend, trace
 * pointers mapped to pool addresses with uthash, and time: a device that lags the program
 * by the fence latency (the fake backend's clock), the program's waits for it, and the fence
 * thread on that clock: the library's own schedule (fence_schedule.h), stepped when it asks.
 * Depends on the pool, config, the reader and the fake backend; never on CUDA or the shim. */
#define HASH_NONFATAL_OOM 1
#include "replay.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend_fake.h"
#include "config.h"
#include "fence_schedule.h"
#include "log.h"
#include "proc.h"
#include "replay_events.h"
#include "streamkey.h"
#include "tracefile.h"

static _Thread_local int rp_oom;
#define uthash_nonfatal_oom(e) (rp_oom = 1)
#include <uthash.h>

struct pmap {
	uintptr_t tptr;  /* the trace's pointer (key) */
	uintptr_t addr;  /* the pool's */
	int dev;
	UT_hash_handle hh;
};

struct state {
	struct gp_fake_backend fb;
	struct gpupool_device_stats st[GPUPOOL_MAX_DEVICES];
	gp_pool *pool[GPUPOOL_MAX_DEVICES];
	/* The fence thread, modelled on the program's clock: the library's own schedule
	 * (fence_schedule.h), stepped at the times it asks for */
	struct gp_fence_schedule sched;
	uint64_t thread_at;                      /* when it steps next; GP_FENCE_NEVER: asleep until a cudaFree */
	unsigned thread_ev;                      /* its last action's outcome, for that step */
	bool want;                               /* a cudaFree asked for a fence, no action took it yet */
	int act_dev;                             /* inside an action: the next device it reaches; -1: none */
	bool act_mark;                           /* that action records markers */
	bool act_sync;                           /* act_dev's device_sync was begun, done at thread_at */
	uint64_t first_ns, last_ns;              /* the trace's span (t_ns) */
	uint64_t next_decay;                     /* the program's clock at the next decay pass; 0: first row */
	struct pmap *map;
	struct gp_replay_events *ev;             /* observers' bookkeeping; NULL without one */
};

int gp_replay_grow(void **v, size_t *cap, size_t need, size_t elem)
{
	if (need <= *cap)
		return 0;
	size_t n = *cap ? *cap * 2 : 64;
	while (n < need)
		n *= 2;
	void *nv = realloc(*v, n * elem);
	if (!nv)
		return -ENOMEM;
	*v = nv;
	*cap = n;
	return 0;
}

void gp_replay_opts_from_config(struct gp_replay_opts *o, const struct gp_config *c)
{
	gp_config_pool_params(c, 0, &o->params);
	o->fence = (int)c->fence;
	o->fence_interval_us = c->fence_interval_us;
	o->legacy_stream = c->legacy_stream;
	o->decay_ms = c->decay_ms;
}

static const char *no_env(const char *name)
{
	(void)name;
	return NULL;
}

void gp_replay_opts_default(struct gp_replay_opts *o)
{
	struct gp_config c;
	(void)gp_config_parse(&c, no_env); /* nothing set: every knob at its default */
	memset(o, 0, sizeof *o);
	gp_replay_opts_from_config(o, &c);
	o->granularity = (size_t)2 << 20;
	o->vmm_cost_us = 20;
	o->vmm_unmap_cost_us = 20;
}

static uint64_t now_ns(void) { return gp_clock_ns(CLOCK_MONOTONIC); }

static uint64_t sat_add(uint64_t a, uint64_t b) { return a > UINT64_MAX - b ? UINT64_MAX : a + b; }

/* Trace stream handle -> pool stream key. 0 and 1 (cudaStreamLegacy) name the legacy
 * stream; 2 (cudaStreamPerThread) names one stream per calling thread (a synthetic key,
 * streamkey.h); real handles are 16-byte aligned pointers and are their own key. Never
 * GP_NO_STREAM (sync calls only). */
static gp_stream stream_key(const struct gp_trace_row *row)
{
	if (row->stream == 0 || row->stream == 1)
		return 0;
	if (row->stream == 2)
		return gp_streamkey_make((gp_stream)(uint32_t)row->tid, GP_STREAMKEY_TRACE_PTDS);
	if (row->stream == GP_NO_STREAM)
		return GP_NO_STREAM - 2;
	return row->stream;
}

static gp_pool *pool_for(struct state *s, const struct gp_replay_opts *o, int dev, int *rc)
{
	if (s->pool[dev])
		return s->pool[dev];
	s->st[dev].device = dev;
	*rc = gp_pool_create(&s->pool[dev], dev, &o->params, s->ev ? gp_replay_events_backend(s->ev) : &s->fb.be,
			     &s->st[dev]);
	if (*rc) {
		s->pool[dev] = NULL;
		return NULL;
	}
	s->st[dev].active = 1;
	return s->pool[dev];
}

static int row_error(struct gp_replay_result *r, const char *path, const struct gp_trace_row *row,
		     int rc, const char *what)
{
	r->error_line = row->line;
	snprintf(r->error, sizeof r->error, "%.300s:%lu: %s", path, row->line, what);
	return rc;
}

/* One device's part of the fence thread's action at clock time t (fence_thread.c's act):
 * with markers, a poll that records one (mark) for the new frees; without, a device_sync for
 * them, begun at t: act_sync is set, and it completes (complete_sync) a latency later. Answers
 * the outcome bits. */
static unsigned act_on(struct state *s, struct gp_replay_result *r, gp_pool *p, uint64_t t)
{
	uint64_t marks = s->fb.marks;
	s->fb.now_ns = t;
	int rc = gp_pool_fence_poll(p, s->act_mark);
	if (s->fb.marks != marks)
		r->model_fences++;
	if (rc == -ENOTSUP) {
		s->act_sync = s->act_mark && gp_pool_has_pending(p);
		return 0;
	}
	return rc == 1 ? GP_FENCE_EV_OUTSTANDING : rc < 0 ? GP_FENCE_EV_REFUSED : 0;
}

/* The device_sync act_on began returns, at t: the pool times it from its start, as the
 * library's thread's own sync is timed (last_fence_ns: the latency, which the allocating
 * threads' rungs judge fences by), and nobody's wait is billed for it. The fence covers the
 * frees made while it ran too: the model's one liberty. */
static unsigned complete_sync(struct state *s, struct gp_replay_result *r, gp_pool *p, uint64_t t)
{
	uint64_t billed = s->fb.waited_ns;
	s->act_sync = false;
	s->fb.now_ns = t - s->fb.latency_ns;
	s->fb.background = false; /* the sync moves the clock to t... */
	int rc = gp_pool_fence(p);
	s->fb.background = true;
	s->fb.waited_ns = billed; /* ...in the thread's time, not the program's */
	if (rc != 0)
		return GP_FENCE_EV_REFUSED;
	r->model_fences++;
	return 0;
}

/* The fence thread up to clock time `clock`, on the backend's clock and unbilled (its waits
 * are not the program's): fence_schedule.h's steps at the times they ask for, each action
 * device by device as the thread takes them, a device_sync holding the thread for the
 * modelled latency. */
static void model_fence_thread(struct state *s, struct gp_replay_result *r, uint64_t clock)
{
	s->fb.background = true;
	/* GP_FENCE_NEVER is also the end of the clock (a trace's t_ns near 2^64 saturates it):
	 * nothing steps there, or a saturated clock would never be passed */
	while (s->thread_at != GP_FENCE_NEVER && s->thread_at <= clock) {
		uint64_t t = s->thread_at;
		if (s->act_dev < 0) {
			struct gp_fence_step st =
				gp_fence_schedule_next(&s->sched, t, s->thread_ev | (s->want ? GP_FENCE_EV_FREED : 0));
			s->thread_ev = 0;
			if (st.action == GP_FENCE_SLEEP) {
				s->thread_at = st.next_wake_ns;
				continue;
			}
			s->act_mark = st.action == GP_FENCE_MARK; /* FREED always makes a MARK here */
			s->want = false;
			s->act_dev = 0;
		}
		for (; s->act_dev < GPUPOOL_MAX_DEVICES; s->act_dev++) {
			gp_pool *p = s->pool[s->act_dev];
			if (!p)
				continue;
			if (s->act_sync) {
				s->thread_ev |= complete_sync(s, r, p, t);
				continue;
			}
			s->thread_ev |= act_on(s, r, p, t);
			if (s->act_sync)
				break;
		}
		if (s->act_sync) {
			s->thread_at = sat_add(t, s->fb.latency_ns);
		} else {
			s->act_dev = -1; /* done: the next step, at once, gets the outcome */
		}
	}
	s->fb.now_ns = clock;
	s->fb.background = false;
}

/* An observer's bookkeeping failed: host memory, or a block the pool did not report. */
static int observer_error(struct gp_replay_result *r, const char *path, const struct gp_trace_row *row, int rc)
{
	return row_error(r, path, row, rc, rc == -ENOMEM ? "out of host memory recording the replay's events"
							 : "recording the replay's events failed");
}

static int replay_row(struct state *s, const struct gp_replay_opts *o, struct gp_replay_result *r,
		      const char *path, const struct gp_trace_row *row)
{
	int dev = row->dev, rc = 0;
	uint64_t t0, t1;

	if (dev >= GPUPOOL_MAX_DEVICES)
		return row_error(r, path, row, -EINVAL, "device ordinal above the 16 devices gpupool handles");
	if (r->ops == 1)
		s->first_ns = row->t_ns;
	if (row->t_ns > s->last_ns)
		s->last_ns = row->t_ns;
	/* the program's clock: its own time, delayed by every wait for the device so far */
	uint64_t clock = sat_add(sat_add(sat_add(row->t_ns, s->fb.waited_ns), s->fb.free_waited_ns), s->fb.vmm_ns);
	s->fb.now_ns = clock;
	if (s->ev)
		gp_replay_events_time(s->ev, row->t_ns, row->line, row->op);
	if (o->fence == GP_FENCE_THREAD) {
		model_fence_thread(s, r, clock);
		for (int d = 0; d < GPUPOOL_MAX_DEVICES && s->ev; d++)
			if (s->pool[d] && (rc = gp_replay_events_settle(s->ev, &s->st[d], d, row->t_ns)))
				return observer_error(r, path, row, rc);
	}
	if (o->decay_ms && clock >= s->next_decay) {
		/* the release thread's pass, as the library takes it: once a second, at most its
		 * budget of idle segments (release_thread.c) */
		for (int d = 0; d < GPUPOOL_MAX_DEVICES; d++)
			if (s->pool[d])
				(void)gp_pool_decay(s->pool[d], clock, (uint64_t)o->decay_ms * 1000000u, (size_t)2 << 30, NULL);
		s->next_decay = sat_add(clock, 1000000000u);
	}
	if (row->err != 0) {
		r->skipped_errors++;
		return 0;
	}
	if (row->op == GP_TRACE_MALLOC || row->op == GP_TRACE_MALLOC_ASYNC) {
		if (row->size == 0 || row->ptr == 0) {
			r->zero_allocs++;
			return 0;
		}
		gp_pool *p = pool_for(s, o, dev, &rc);
		if (!p)
			return row_error(r, path, row, rc, "cannot create a pool");
		gp_stream sk = row->op != GP_TRACE_MALLOC ? stream_key(row) : o->legacy_stream ? 0 : GP_NO_STREAM;
		uintptr_t addr;
		t0 = now_ns();
		rc = gp_pool_alloc(p, (size_t)row->size, sk, &addr);
		t1 = now_ns();
		r->pool_ns += t1 - t0;
		if (rc) {
			r->alloc_failures++;
			/* the fake has no capacity limit: it refuses only when its addresses run out */
			if (s->fb.fail_allocs)
				return row_error(r, path, row, -ERANGE, "the fake device's address space is used "
						 "up (segments are never placed at a freed address)");
			return 0;
		}
		r->allocs++;
		if (s->st[dev].reserved_bytes > GP_REPLAY_RESERVED_MAX)
			return row_error(r, path, row, -ERANGE, "the pool holds more than 2^50 bytes (1 PiB) "
					 "on one device, more than any device has");
		struct pmap *m;
		HASH_FIND(hh, s->map, &row->ptr, sizeof row->ptr, m);
		if (m) {
			/* the trace lost a free: the old block stays live in the pool */
			r->remapped_ptrs++;
		} else {
			m = malloc(sizeof *m);
			if (!m)
				return row_error(r, path, row, -ENOMEM, "out of host memory");
			m->tptr = row->ptr;
			rp_oom = 0;
			HASH_ADD(hh, s->map, tptr, sizeof m->tptr, m);
			if (rp_oom) {
				free(m);
				return row_error(r, path, row, -ENOMEM, "out of host memory");
			}
		}
		m->addr = addr;
		m->dev = dev;
		if (s->ev && (rc = gp_replay_events_alloc(s->ev, p, &s->st[dev], dev, addr, row->size,
							 row->op == GP_TRACE_MALLOC ? 0 : row->stream)))
			return observer_error(r, path, row, rc);
	} else {
		struct pmap *m;
		if (row->ptr == 0) {
			r->null_frees++;
			return 0;
		}
		HASH_FIND(hh, s->map, &row->ptr, sizeof row->ptr, m);
		if (!m) {
			if (r->unknown_frees++ == 0)
				gp_log(GP_LOG_WARN, "replay: %.300s:%lu: free of %lx, a pointer the trace "
				       "never allocated%s (counted in unknown_frees; later ones are not reported)",
				       path, row->line, (unsigned long)row->ptr,
				       r->alloc_failures ? ", or whose allocation failed in this replay (alloc_failures)" : "");
			return 0;
		}
		gp_stream sk = row->op != GP_TRACE_FREE ? stream_key(row) : o->legacy_stream ? 0 : GP_NO_STREAM;
		gp_pool *p = s->pool[m->dev];
		if (s->ev && (rc = gp_replay_events_free_begin(s->ev, p, m->dev, m->addr,
							      sk == GP_NO_STREAM ? 0 : row->stream)))
			return observer_error(r, path, row, rc);
		t0 = now_ns();
		rc = gp_pool_free(p, m->addr, sk);
		t1 = now_ns();
		r->pool_ns += t1 - t0;
		HASH_DEL(s->map, m);
		int mdev = m->dev;
		free(m);
		if (rc)
			return row_error(r, path, row, -EFAULT, "the pool refused the free of a live block");
		r->frees++;
		if (s->ev && (rc = gp_replay_events_free_end(s->ev, &s->st[mdev], mdev, sk != GP_NO_STREAM)))
			return observer_error(r, path, row, rc);
		if (sk == GP_NO_STREAM && o->fence == GP_FENCE_THREAD) {
			/* gp_fence_thread_wake: a thread asleep until a free wakes now */
			s->want = true;
			if (s->thread_at == GP_FENCE_NEVER)
				s->thread_at = clock;
		}
	}
	if (s->ev && (rc = gp_replay_events_row(s->ev, s->pool, s->st)))
		return observer_error(r, path, row, rc);
	if (o->params.check) {
		for (int d = 0; d < GPUPOOL_MAX_DEVICES; d++) {
			if (s->pool[d] && gp_pool_check(s->pool[d])) {
				r->check_failures++;
				return row_error(r, path, row, -EFAULT, "pool invariant check failed");
			}
		}
	}
	return 0;
}

int gp_replay_file(const char *path, const struct gp_replay_opts *o, struct gp_replay_result *r)
{
	struct gp_tracefile *tf;
	struct gp_trace_row row;
	const char *name = strcmp(path, "-") == 0 ? GP_TRACEFILE_STDIN : path; /* for messages */
	int rc;

	memset(r, 0, sizeof *r);
	struct state *s = calloc(1, sizeof *s);
	if (!s)
		return -ENOMEM;
	gp_fake_backend_init(&s->fb, 0);
	s->fb.granularity = o->granularity;
	s->fb.vmm_cost_ns = (uint64_t)o->vmm_cost_us * 1000u;
	s->fb.vmm_unmap_cost_ns = (uint64_t)o->vmm_unmap_cost_us * 1000u;
	s->fb.latency_ns = (uint64_t)o->fence_latency_us * 1000u;
	gp_fence_schedule_init(&s->sched, (uint64_t)o->fence_interval_us * 1000u);
	s->thread_at = GP_FENCE_NEVER;
	s->act_dev = -1;
	rc = gp_replay_events_new(&s->ev, o, &s->fb.be, s->pool);
	if (rc) {
		free(s);
		return rc;
	}
	rc = gp_tracefile_open(&tf, path, o->sort_window, r->error, sizeof r->error);
	if (rc) {
		r->error_line = 1;
		gp_replay_events_free(s->ev);
		free(s);
		return rc;
	}
	while (!o->limit_rows || r->ops < o->limit_rows) {
		rc = gp_tracefile_next(tf, &row);
		if (rc <= 0)
			break;
		r->ops++;
		rc = replay_row(s, o, r, name, &row);
		if (rc)
			break;
	}
	if (rc < 0 && !r->error[0]) {
		snprintf(r->error, sizeof r->error, "%s", gp_tracefile_error(tf));
		r->error_line = gp_tracefile_line(tf);
	}
	r->out_of_order = gp_tracefile_out_of_order(tf);
	gp_tracefile_close(tf);
	if (s->ev && rc >= 0) {
		int erc = gp_replay_events_end(s->ev, s->pool);
		if (erc && rc >= 0) {
			rc = erc;
			snprintf(r->error, sizeof r->error, "%.300s: writing the replay's outputs failed: %s", name,
				 strerror(-erc));
		}
	}

	r->live_at_end = HASH_COUNT(s->map);
	for (int d = 0; d < GPUPOOL_MAX_DEVICES; d++) {
		const struct gpupool_device_stats *st = &s->st[d];
		if (!s->pool[d])
			continue;
		r->devices++;
		r->peak_requested = sat_add(r->peak_requested, st->requested_bytes_peak);
		r->peak_allocated = sat_add(r->peak_allocated, st->allocated_bytes_peak);
		r->peak_reserved = sat_add(r->peak_reserved, st->reserved_bytes_peak);
		r->segments_peak += st->segments_peak;
		r->fences += st->fences;
		r->inline_fences += st->inline_fences;
		r->hits += st->hits;
		r->misses += st->misses;
		r->splits += st->splits;
		r->merges += st->merges;
		r->stream_steals += st->stream_steals;
		r->decay_releases += st->decay_releases;
		r->decayed_bytes = sat_add(r->decayed_bytes, st->decayed_bytes);
	}
	r->wait_ns = s->fb.waited_ns;
	r->free_wait_ns = s->fb.free_waited_ns;
	r->duration_ns = s->last_ns - s->first_ns;
	r->markers = s->fb.marks;
	r->backend_allocs = s->fb.allocs;
	r->backend_frees = s->fb.frees;
	r->vmm_reserves = s->fb.vmm_reserves;
	r->chunks_mapped = s->fb.chunks_mapped;
	r->chunks_unmapped = s->fb.chunks_unmapped;
	r->unmap_waits = s->fb.vmm_syncs;
	r->vmm_ns = s->fb.vmm_ns;
	if (r->allocs + r->frees)
		r->ns_per_op = (double)r->pool_ns / (double)(r->allocs + r->frees);
	if (r->peak_requested)
		r->reserved_over_requested = (double)r->peak_reserved / (double)r->peak_requested;
	if (r->peak_allocated)
		r->reserved_over_allocated = (double)r->peak_reserved / (double)r->peak_allocated;

	struct pmap *m, *tmp;
	HASH_ITER(hh, s->map, m, tmp) {
		HASH_DEL(s->map, m);
		free(m);
	}
	for (int d = 0; d < GPUPOOL_MAX_DEVICES; d++)
		if (s->pool[d])
			gp_pool_destroy(s->pool[d]);
	gp_replay_events_free(s->ev);
	gp_fake_backend_fini(&s->fb);
	free(s);
	return rc < 0 ? rc : 0;
}

/* The figures a replay prints, in order, for both forms (key=value and JSON): one table, so
 * the two never disagree. */
enum { F_U64, F_INT, F_RATIO, F_NS_PER_OP, F_MS };
static const struct field {
	const char *key;
	size_t off;
	int kind;
} fields[] = {
#define FU(k) {#k, offsetof(struct gp_replay_result, k), F_U64}
	FU(ops),
	FU(allocs),
	FU(frees),
	{"peak_requested_bytes", offsetof(struct gp_replay_result, peak_requested), F_U64},
	{"peak_allocated_bytes", offsetof(struct gp_replay_result, peak_allocated), F_U64},
	{"peak_reserved_bytes", offsetof(struct gp_replay_result, peak_reserved), F_U64},
	{"reserved_over_requested", offsetof(struct gp_replay_result, reserved_over_requested), F_RATIO},
	{"reserved_over_allocated", offsetof(struct gp_replay_result, reserved_over_allocated), F_RATIO},
	FU(segments_peak),
	FU(backend_allocs),
	FU(backend_frees),
	FU(vmm_reserves),
	FU(chunks_mapped),
	FU(chunks_unmapped),
	FU(unmap_waits),
	{"vmm_ms", offsetof(struct gp_replay_result, vmm_ns), F_MS},
	{"ns_per_op", offsetof(struct gp_replay_result, ns_per_op), F_NS_PER_OP},
	FU(unknown_frees),
	FU(skipped_errors),
	FU(null_frees),
	FU(zero_allocs),
	FU(remapped_ptrs),
	FU(alloc_failures),
	FU(live_at_end),
	FU(out_of_order),
	FU(model_fences),
	FU(fences),
	FU(inline_fences),
	FU(markers),
	{"wait_ms", offsetof(struct gp_replay_result, wait_ns), F_MS},
	{"segment_free_wait_ms", offsetof(struct gp_replay_result, free_wait_ns), F_MS},
	{"duration_ms", offsetof(struct gp_replay_result, duration_ns), F_MS},
	FU(hits),
	FU(misses),
	FU(splits),
	FU(merges),
	FU(stream_steals),
	FU(decay_releases),
	{"decayed_bytes", offsetof(struct gp_replay_result, decayed_bytes), F_U64},
	{"devices", offsetof(struct gp_replay_result, devices), F_INT},
#undef FU
};

/* One figure's value, as both forms write it (a JSON number too). */
static void put_value(FILE *f, const struct gp_replay_result *r, const struct field *fd)
{
	const char *p = (const char *)r + fd->off;
	uint64_t u;
	double d;
	int i;
	switch (fd->kind) {
	case F_U64: memcpy(&u, p, sizeof u); fprintf(f, "%llu", (unsigned long long)u); break;
	case F_INT: memcpy(&i, p, sizeof i); fprintf(f, "%d", i); break;
	case F_RATIO: memcpy(&d, p, sizeof d); fprintf(f, "%.3f", d); break;
	case F_NS_PER_OP: memcpy(&d, p, sizeof d); fprintf(f, "%.1f", d); break;
	default: memcpy(&u, p, sizeof u); fprintf(f, "%.3f", (double)u / 1e6); break;
	}
}

void gp_replay_print(FILE *f, const struct gp_replay_result *r)
{
	for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
		fprintf(f, "%s=", fields[i].key);
		put_value(f, r, &fields[i]);
		fputc('\n', f);
	}
}

/* s as a JSON string: quotes, backslashes and control characters escaped; bytes that are not
 * UTF-8 (a path may hold any) become U+FFFD. */
static void put_json_string(FILE *f, const char *s)
{
	const unsigned char *u = (const unsigned char *)s;
	fputc('"', f);
	while (*u) {
		unsigned c = *u;
		if (c == '"' || c == '\\') {
			fprintf(f, "\\%c", c);
			u++;
		} else if (c < 0x20 || c == 0x7f) {
			fprintf(f, "\\u%04x", c);
			u++;
		} else if (c < 0x80) {
			fputc((int)c, f);
			u++;
		} else {
			/* a well-formed sequence: lead byte, then 1-3 continuation bytes */
			int n = c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3 : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
			int k = 1;
			while (n && k < n && (u[k] & 0xc0) == 0x80)
				k++;
			bool ok = n && k == n && !(c == 0xe0 && u[1] < 0xa0) && !(c == 0xed && u[1] >= 0xa0) &&
				  !(c == 0xf0 && u[1] < 0x90) && !(c == 0xf4 && u[1] >= 0x90);
			if (ok)
				fwrite(u, 1, (size_t)n, f);
			else
				fputs("\\ufffd", f);
			u += ok ? n : 1;
		}
	}
	fputc('"', f);
}

void gp_replay_print_json(FILE *f, const struct gp_replay_result *r, const char *trace, const char *conf)
{
	fputs("{\"trace\":", f);
	put_json_string(f, trace ? trace : "");
	fputs(",\"conf\":", f);
	put_json_string(f, conf ? conf : "");
	for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
		fprintf(f, ",\"%s\":", fields[i].key);
		put_value(f, r, &fields[i]);
	}
	fputs("}\n", f);
}
