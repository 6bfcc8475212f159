/* Counters: the writer's and the reader's side of one device slot (gpupool/stats.h).
 * The writer (the pool, under its lock) brackets every change with gp_stats_begin/end so
 * the slot's sequence counter is odd while it changes; a reader copies with
 * gp_stats_snapshot and never blocks the writer. No locks live in the slot. */
#ifndef GP_STATS_H
#define GP_STATS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>

#include "gpupool/stats.h"

static inline void gp_stats_begin(struct gpupool_device_stats *s)
{
	uint64_t q = __atomic_load_n(&s->seq, __ATOMIC_RELAXED);
	__atomic_store_n(&s->seq, q + 1, __ATOMIC_RELAXED);
	/* the odd counter must be visible before any counter changes */
	atomic_thread_fence(memory_order_release);
}

static inline void gp_stats_end(struct gpupool_device_stats *s)
{
	uint64_t q = __atomic_load_n(&s->seq, __ATOMIC_RELAXED);
	__atomic_store_n(&s->seq, q + 1, __ATOMIC_RELEASE);
}

/* Adds to a gauge and keeps its peak. */
#define GP_GAUGE_ADD(s, name, delta)                                                   \
	do {                                                                           \
		(s)->name += (delta);                                                  \
		if ((s)->name > (s)->name##_peak)                                      \
			(s)->name##_peak = (s)->name;                                  \
	} while (0)
#define GP_GAUGE_SUB(s, name, delta) ((s)->name -= (delta))
#define GP_GAUGE_SET(s, name, value)                                                   \
	do {                                                                           \
		(s)->name = (value);                                                   \
		if ((s)->name > (s)->name##_peak)                                      \
			(s)->name##_peak = (s)->name;                                  \
	} while (0)

/* Copies a consistent snapshot of `src` into `dst`. Returns false when no consistent copy
 * was seen in `tries` attempts (the writer died mid-update, or is very busy). */
static inline bool gp_stats_snapshot(const struct gpupool_device_stats *src,
				     struct gpupool_device_stats *dst, int tries)
{
	while (tries-- > 0) {
		uint64_t a = __atomic_load_n(&src->seq, __ATOMIC_ACQUIRE);
		if (a & 1)
			continue;
		memcpy(dst, (const void *)src, sizeof *dst);
		atomic_thread_fence(memory_order_acquire);
		uint64_t b = __atomic_load_n(&src->seq, __ATOMIC_RELAXED);
		if (a == b)
			return true;
	}
	return false;
}

#endif
