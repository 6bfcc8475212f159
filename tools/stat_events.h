/* gpupool-stat --watch's event lines: between two refreshes, what each process's reclaim and
 * decay counters say happened ("pid 123 (python) gave 80.0 GiB for a reclaim"), kept for a few
 * refreshes. Works on page copies only (format.h's gp_format_proc); no I/O but the formatter's
 * writer, no CUDA, no statpage reading. */
#ifndef GP_STAT_EVENTS_H
#define GP_STAT_EVENTS_H

#include <stdint.h>

#include "format.h"

/* Lines kept at most; the oldest go first. */
#define GP_STAT_EVENTS_MAX 64
/* A line stays until both this many refreshes and GP_STAT_EVENTS_KEEP_NS have passed. */
#define GP_STAT_EVENTS_KEEP_REFRESHES 5
#define GP_STAT_EVENTS_KEEP_NS (10 * 1000000000ull)
#define GP_STAT_EVENT_LEN 160

struct gp_stat_event {
	uint64_t round;   /* the refresh that found it */
	uint64_t mono_ns; /* CLOCK_MONOTONIC then */
	char text[GP_STAT_EVENT_LEN];
};

/* One slot's counters at the last refresh. */
struct gp_stat_event_seen {
	int32_t pid;
	int32_t device;
	uint64_t start_ns;
	uint64_t c[10]; /* the counters of events.c's list, in its order */
};

struct gp_stat_events {
	uint64_t round;    /* refreshes so far */
	uint64_t since_ns; /* CLOCK_REALTIME when the watch began (the first refresh) */
	struct gp_stat_event_seen *seen; /* malloc'd, sorted by (pid, start_ns, device) */
	size_t nseen;
	struct gp_stat_event ev[GP_STAT_EVENTS_MAX]; /* oldest first */
	unsigned nev;
};

/* Compares the listing procs[n] (stale processes and inconsistent slots left out) with the
 * last call's: one line per process whose counters moved, stamped with the local time of
 * wall_ns (CLOCK_REALTIME, HH:MM:SS) and with mono_ns. A slot first seen counts from zero when
 * its page was created after the watch began (the first call's wall_ns): all it did happened
 * since; one of an older process, or a counter that went back (another process got the pid),
 * gives none. A slot not readable now keeps its last counters for the next comparison. Then
 * forgets the lines old enough and remembers the listing. Returns 0, or -ENOMEM (nothing
 * remembered: the next call starts afresh, as the first). */
int gp_stat_events_update(struct gp_stat_events *e, const struct gp_format_proc *procs, size_t n, uint64_t wall_ns,
			  uint64_t mono_ns);
/* How many of the lines kept the last update found (the newest). */
unsigned gp_stat_events_fresh(const struct gp_stat_events *e);
/* The lines kept, at most `max` (the newest), each cut at `cut` characters unless 0.
 * Returns the count written. */
unsigned gp_stat_events_print(const struct gp_stat_events *e, struct gp_format_out *o, unsigned max, unsigned cut);
/* Frees what update allocated; e can be used again (it starts afresh). */
void gp_stat_events_reset(struct gp_stat_events *e);

#endif
