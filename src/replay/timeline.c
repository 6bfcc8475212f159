/* The memory timeline (timeline.h): the points where a device's requested, allocated or
 * reserved bytes changed, kept in memory (32 bytes each) and written at the end of the
 * replay, downsampled by equal runs of points when there are more than max_rows. Depends on
 * replay.h and outfile.h. */
#include "timeline.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "outfile.h"

struct point {
	uint64_t t_ns, requested, allocated, reserved;
};

struct series {
	struct point *v;
	size_t n, cap;
};

struct gp_timeline {
	struct gp_replay_observer obs;
	FILE *f;
	uint64_t max_rows;
	struct series dev[GPUPOOL_MAX_DEVICES];
};

static int on_event(void *ctx, const struct gp_replay_event *e)
{
	struct gp_timeline *t = ctx;
	if (e->kind != GP_REPLAY_ROW)
		return 0;
	struct series *s = &t->dev[e->dev];
	struct point p = {e->t_ns, e->st->requested_bytes, e->st->allocated_bytes, e->st->reserved_bytes};
	if (s->n) {
		const struct point *l = &s->v[s->n - 1];
		if (l->requested == p.requested && l->allocated == p.allocated && l->reserved == p.reserved)
			return 0;
	}
	if (gp_replay_grow((void **)&s->v, &s->cap, s->n + 1, sizeof *s->v))
		return -ENOMEM;
	s->v[s->n++] = p;
	return 0;
}

static void row(FILE *f, int dev, const struct point *p)
{
	fprintf(f, "%" PRIu64 ".%06" PRIu64 ",%d,%" PRIu64 ",%" PRIu64 ",%" PRIu64 "\n", p->t_ns / 1000000,
		p->t_ns % 1000000, dev, p->requested, p->allocated, p->reserved);
}

static int on_end(void *ctx, gp_pool *const pools[GPUPOOL_MAX_DEVICES], uint64_t last_t_ns)
{
	struct gp_timeline *t = ctx;
	(void)pools, (void)last_t_ns;
	uint64_t ndev = 0;
	for (int d = 0; d < GPUPOOL_MAX_DEVICES; d++)
		ndev += t->dev[d].n > 0;
	uint64_t budget = t->max_rows && ndev ? t->max_rows / ndev : 0;
	if (t->max_rows && budget < 2)
		budget = 2; /* a peak and the end, at least */
	fprintf(t->f, GP_TIMELINE_HEADER "\n");
	for (int d = 0; d < GPUPOOL_MAX_DEVICES; d++) {
		const struct series *s = &t->dev[d];
		if (!budget || s->n <= budget) {
			for (size_t i = 0; i < s->n; i++)
				row(t->f, d, &s->v[i]);
			continue;
		}
		/* budget - 1 runs of about n/budget points, each written at its last point's time
		 * with the peak of each column over the run, so no peak is lost; then the last
		 * point as it is, the state the replay ended in */
		size_t n = s->n - 1, runs = (size_t)budget - 1;
		for (size_t k = 0; k < runs; k++) {
			size_t a = k * n / runs, b = (k + 1) * n / runs;
			struct point m = s->v[a];
			for (size_t i = a + 1; i < b; i++) {
				const struct point *p = &s->v[i];
				m.t_ns = p->t_ns;
				m.requested = p->requested > m.requested ? p->requested : m.requested;
				m.allocated = p->allocated > m.allocated ? p->allocated : m.allocated;
				m.reserved = p->reserved > m.reserved ? p->reserved : m.reserved;
			}
			row(t->f, d, &m);
		}
		row(t->f, d, &s->v[s->n - 1]);
	}
	return fflush(t->f) == 0 && !ferror(t->f) ? 0 : -EIO;
}

int gp_timeline_new(struct gp_timeline **out, const char *out_path, uint64_t max_rows)
{
	*out = NULL;
	struct gp_timeline *t = calloc(1, sizeof *t);
	if (!t)
		return -ENOMEM;
	int fd = gp_outfile_open(out_path, 0644);
	if (fd < 0) {
		free(t);
		return fd;
	}
	t->f = fdopen(fd, "w");
	if (!t->f) {
		int err = -errno;
		close(fd);
		free(t);
		return err;
	}
	t->max_rows = max_rows;
	t->obs = (struct gp_replay_observer){.ctx = t, .event = on_event, .end = on_end};
	*out = t;
	return 0;
}

const struct gp_replay_observer *gp_timeline_observer(struct gp_timeline *t) { return &t->obs; }

int gp_timeline_close(struct gp_timeline *t)
{
	if (!t)
		return 0;
	int rc = fclose(t->f) == 0 ? 0 : -EIO;
	for (int d = 0; d < GPUPOOL_MAX_DEVICES; d++)
		free(t->dev[d].v);
	free(t);
	return rc;
}
