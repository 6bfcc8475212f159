/* gpupool-stat --watch's event lines (stat_events.h): the reclaim and decay counters of each
 * slot compared between two refreshes, summed per process, said in one line. Reads page
 * copies only; depends on format.h and libc. */
#include "stat_events.h"

#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The counters compared, in the order of gp_stat_event_seen.c[]. */
enum { C_SERVED, C_REFUSED, C_GIVEN, C_EMPTIES, C_ASKS, C_ANSWERS, C_RECEIVED, C_WAIT, C_DECAYS, C_DECAYED, C_COUNT };
static const size_t counter_off[C_COUNT] = {
	[C_SERVED] = offsetof(struct gpupool_device_stats, reclaims_served),
	[C_REFUSED] = offsetof(struct gpupool_device_stats, reclaims_refused),
	[C_GIVEN] = offsetof(struct gpupool_device_stats, reclaim_given_bytes),
	[C_EMPTIES] = offsetof(struct gpupool_device_stats, framework_empties),
	[C_ASKS] = offsetof(struct gpupool_device_stats, reclaim_asks),
	[C_ANSWERS] = offsetof(struct gpupool_device_stats, reclaim_answers),
	[C_RECEIVED] = offsetof(struct gpupool_device_stats, reclaim_received_bytes),
	[C_WAIT] = offsetof(struct gpupool_device_stats, reclaim_wait_ns),
	[C_DECAYS] = offsetof(struct gpupool_device_stats, decay_releases),
	[C_DECAYED] = offsetof(struct gpupool_device_stats, decayed_bytes),
};
_Static_assert(C_COUNT == sizeof ((struct gp_stat_event_seen *)0)->c / sizeof(uint64_t), "one slot per counter");

static int seen_cmp(const void *a, const void *b)
{
	const struct gp_stat_event_seen *x = a, *y = b;
	if (x->pid != y->pid)
		return (x->pid > y->pid) - (x->pid < y->pid);
	if (x->start_ns != y->start_ns)
		return (x->start_ns > y->start_ns) - (x->start_ns < y->start_ns);
	return (x->device > y->device) - (x->device < y->device);
}

/* A slot whose counters can be compared: not a remote process's (an answer on the channel
 * carries no counters). */
static bool slot_ok(const struct gp_format_proc *p, uint32_t d)
{
	return !p->stale && !p->remote && !(p->inconsistent & (1u << d)) && p->page->dev[d].active;
}

static void slot_counters(const struct gpupool_device_stats *s, uint64_t c[C_COUNT])
{
	for (int k = 0; k < C_COUNT; k++)
		memcpy(&c[k], (const char *)s + counter_off[k], sizeof c[k]);
}

static uint64_t add_sat(uint64_t a, uint64_t b) { return a > UINT64_MAX - b ? UINT64_MAX : a + b; }

/* Appends a line, the oldest going when full. */
static void event_add(struct gp_stat_events *e, uint64_t mono_ns, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void event_add(struct gp_stat_events *e, uint64_t mono_ns, const char *fmt, ...)
{
	if (e->nev == GP_STAT_EVENTS_MAX) {
		memmove(&e->ev[0], &e->ev[1], (GP_STAT_EVENTS_MAX - 1) * sizeof e->ev[0]);
		e->nev--;
	}
	struct gp_stat_event *v = &e->ev[e->nev++];
	v->round = e->round;
	v->mono_ns = mono_ns;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(v->text, sizeof v->text, fmt, ap);
	va_end(ap);
}

/* Printable command name (the page's writer chose it). */
static void comm_of(char *dst, const struct gpupool_page *pg)
{
	size_t i = 0;
	for (; i < GPUPOOL_COMM_LEN - 1 && pg->comm[i]; i++) {
		unsigned char c = (unsigned char)pg->comm[i];
		dst[i] = c >= 0x20 && c < 0x7f ? (char)c : '?';
	}
	dst[i] = '\0';
}

static const char *plural(uint64_t n, const char *one, const char *many) { return n == 1 ? one : many; }

/* The lines of one process from its counters' differences d[]. */
static void process_events(struct gp_stat_events *e, const struct gpupool_page *pg, const uint64_t d[C_COUNT],
			   const char *at, uint64_t mono_ns)
{
	char comm[GPUPOOL_COMM_LEN], b[16], extra[64] = "";
	comm_of(comm, pg);
	int pid = (int)pg->pid;
	if (d[C_EMPTIES])
		snprintf(extra, sizeof extra, ", emptied its framework's cache%s",
			 d[C_EMPTIES] > 1 ? " more than once" : "");
	if (d[C_SERVED] || d[C_GIVEN]) {
		char refused[48] = "";
		if (d[C_REFUSED])
			snprintf(refused, sizeof refused, ", refused %llu", (unsigned long long)d[C_REFUSED]);
		if (d[C_SERVED] > 1)
			event_add(e, mono_ns, "%s pid %d (%s) gave %s for %llu reclaims%s%s", at, pid, comm,
				  gp_format_bytes(b, sizeof b, d[C_GIVEN]), (unsigned long long)d[C_SERVED], refused, extra);
		else
			event_add(e, mono_ns, "%s pid %d (%s) gave %s for a reclaim%s%s", at, pid, comm,
				  gp_format_bytes(b, sizeof b, d[C_GIVEN]), refused, extra);
	} else if (d[C_REFUSED]) {
		event_add(e, mono_ns, "%s pid %d (%s) refused %llu %s%s", at, pid, comm, (unsigned long long)d[C_REFUSED],
			  plural(d[C_REFUSED], "reclaim", "reclaims"), extra);
	} else if (d[C_EMPTIES]) {
		event_add(e, mono_ns, "%s pid %d (%s) emptied its framework's cache for a reclaim", at, pid, comm);
	}
	if (d[C_ANSWERS] || d[C_RECEIVED]) {
		event_add(e, mono_ns, "%s pid %d (%s) received %s after waiting %.2f s", at, pid, comm,
			  gp_format_bytes(b, sizeof b, d[C_RECEIVED]), (double)d[C_WAIT] / 1e9);
	} else if (d[C_ASKS]) {
		event_add(e, mono_ns, "%s pid %d (%s) asked other processes for memory %llu %s, waited %.2f s, received nothing",
			  at, pid, comm, (unsigned long long)d[C_ASKS], plural(d[C_ASKS], "time", "times"),
			  (double)d[C_WAIT] / 1e9);
	} else if (d[C_WAIT]) { /* a round that found no one to ask counts its wait only */
		event_add(e, mono_ns, "%s pid %d (%s) waited %.2f s for a reclaim and received nothing", at, pid, comm,
			  (double)d[C_WAIT] / 1e9);
	}
	if (d[C_DECAYS] || d[C_DECAYED])
		event_add(e, mono_ns, "%s pid %d (%s) gave back %s that sat unused (%llu %s)", at, pid, comm,
			  gp_format_bytes(b, sizeof b, d[C_DECAYED]), (unsigned long long)d[C_DECAYS],
			  plural(d[C_DECAYS], "segment", "segments"));
}

/* The first of e's records of pid and start_ns: where they would go when there is none. */
static size_t first_of(const struct gp_stat_events *e, int32_t pid, uint64_t start_ns)
{
	size_t lo = 0, hi = e->nseen;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const struct gp_stat_event_seen *r = &e->seen[mid];
		if (r->pid < pid || (r->pid == pid && r->start_ns < start_ns))
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* The records of p's slots not readable now (p gone, a slot mid-update) go on to next: once
 * readable again a slot is compared with what was last seen, not taken for a new one. */
static void carry_over(const struct gp_stat_events *e, const struct gp_format_proc *p, struct gp_stat_event_seen *next,
		       size_t *k, size_t cap)
{
	const struct gpupool_page *pg = p->page;
	for (size_t i = first_of(e, pg->pid, pg->start_time_ns);
	     i < e->nseen && e->seen[i].pid == pg->pid && e->seen[i].start_ns == pg->start_time_ns && *k < cap; i++) {
		bool readable = false;
		for (uint32_t d = 0; d < pg->ndevices && d < GPUPOOL_MAX_DEVICES; d++)
			readable |= slot_ok(p, d) && pg->dev[d].device == e->seen[i].device;
		if (!readable)
			next[(*k)++] = e->seen[i];
	}
}

int gp_stat_events_update(struct gp_stat_events *e, const struct gp_format_proc *procs, size_t n, uint64_t wall_ns,
			  uint64_t mono_ns)
{
	if (e->round++ == 0)
		e->since_ns = wall_ns;
	char at[16];
	struct tm tm;
	time_t wall = (time_t)(wall_ns / 1000000000u);
	if (!localtime_r(&wall, &tm) || !strftime(at, sizeof at, "%H:%M:%S", &tm))
		snprintf(at, sizeof at, "--:--:--");
	/* room for every readable slot and every record carried over */
	size_t cap = e->nseen;
	for (size_t i = 0; i < n; i++)
		for (uint32_t d = 0; d < procs[i].page->ndevices && d < GPUPOOL_MAX_DEVICES; d++)
			cap += slot_ok(&procs[i], d);
	struct gp_stat_event_seen *next = cap ? malloc(cap * sizeof *next) : NULL;
	static const struct gp_stat_event_seen none; /* a new process's counters before it began */
	size_t k = 0;
	for (size_t i = 0; i < n; i++) {
		const struct gpupool_page *pg = procs[i].page;
		uint64_t sum[C_COUNT] = {0};
		bool moved = false;
		for (uint32_t d = 0; d < pg->ndevices && d < GPUPOOL_MAX_DEVICES; d++) {
			if (!slot_ok(&procs[i], d))
				continue;
			struct gp_stat_event_seen cur = {pg->pid, pg->dev[d].device, pg->start_time_ns, {0}};
			slot_counters(&pg->dev[d], cur.c);
			if (next)
				next[k++] = cur;
			const struct gp_stat_event_seen *was =
				e->nseen ? bsearch(&cur, e->seen, e->nseen, sizeof *e->seen, seen_cmp) : NULL;
			/* first seen: a page made since the watch began has no history before it */
			if (!was && pg->start_time_ns > e->since_ns)
				was = &none;
			if (!was)
				continue;
			bool back = false;
			for (int c = 0; c < C_COUNT; c++)
				back |= cur.c[c] < was->c[c];
			if (back) /* not the counters seen last time: no difference to tell */
				continue;
			for (int c = 0; c < C_COUNT; c++) {
				sum[c] = add_sat(sum[c], cur.c[c] - was->c[c]);
				moved |= cur.c[c] != was->c[c];
			}
		}
		if (next)
			carry_over(e, &procs[i], next, &k, cap);
		if (moved)
			process_events(e, pg, sum, at, mono_ns);
	}
	/* forget the lines old by both measures */
	unsigned keep = 0;
	for (unsigned i = 0; i < e->nev; i++) {
		const struct gp_stat_event *v = &e->ev[i];
		bool young = e->round - v->round < GP_STAT_EVENTS_KEEP_REFRESHES ||
			     (mono_ns >= v->mono_ns && mono_ns - v->mono_ns < GP_STAT_EVENTS_KEEP_NS);
		if (young)
			e->ev[keep++] = *v;
	}
	e->nev = keep;
	free(e->seen);
	e->seen = next;
	e->nseen = next ? k : 0;
	if (next)
		qsort(e->seen, e->nseen, sizeof *e->seen, seen_cmp);
	if (cap && !next) { /* nothing known: begin again, so that no history counts as new */
		e->since_ns = wall_ns;
		return -ENOMEM;
	}
	return 0;
}

unsigned gp_stat_events_fresh(const struct gp_stat_events *e)
{
	unsigned k = 0;
	while (k < e->nev && e->ev[e->nev - 1 - k].round == e->round)
		k++;
	return k;
}

unsigned gp_stat_events_print(const struct gp_stat_events *e, struct gp_format_out *o, unsigned max, unsigned cut)
{
	unsigned from = e->nev > max ? e->nev - max : 0, lines = 0;
	for (unsigned i = from; i < e->nev; i++, lines++) {
		size_t len = strlen(e->ev[i].text);
		gp_format_printf(o, "%.*s\n", (int)(cut && cut < len ? cut : len), e->ev[i].text);
	}
	return lines;
}

void gp_stat_events_reset(struct gp_stat_events *e)
{
	free(e->seen);
	memset(e, 0, sizeof *e);
}
