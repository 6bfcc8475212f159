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

/* ThreadSanitizer does not model standalone fences (GCC refuses them under -fsanitize=thread):
 * there they are left out. Every access to a slot is atomic (the writer's relaxed stores, the
 * reader's relaxed loads), so TSan has no race to find in a slot with or without them; what the
 * fences give is the seqlock's ordering, which TSan does not check. */
#if defined(__SANITIZE_THREAD__)
#define GP_STATS_FENCE(order) ((void)0)
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define GP_STATS_FENCE(order) ((void)0)
#endif
#endif
#ifndef GP_STATS_FENCE
#define GP_STATS_FENCE(order) atomic_thread_fence(order)
#endif

static inline void gp_stats_begin(struct gpupool_device_stats *s)
{
	uint64_t q = __atomic_load_n(&s->seq, __ATOMIC_RELAXED);
	__atomic_store_n(&s->seq, q + 1, __ATOMIC_RELAXED);
	/* the odd counter must be visible before any counter changes */
	GP_STATS_FENCE(memory_order_release);
}

static inline void gp_stats_end(struct gpupool_device_stats *s)
{
	uint64_t q = __atomic_load_n(&s->seq, __ATOMIC_RELAXED);
	__atomic_store_n(&s->seq, q + 1, __ATOMIC_RELEASE);
}

/* The writer's stores. Readers copy a slot while it changes (gp_stats_snapshot, the fence
 * thread's gp_pool_has_pending), so every store is a relaxed atomic: on the hardware the same
 * plain store, and no data race in the language's terms. The writer's own reads stay plain:
 * writers are serialised by the pool lock. */
#define GP_STAT_SET(s, name, value) __atomic_store_n(&(s)->name, (value), __ATOMIC_RELAXED)
/* Adds to a counter. */
#define GP_COUNT(s, name, delta) GP_STAT_SET(s, name, (s)->name + (delta))

/* Sets or adds to a gauge and keeps its peak. */
#define GP_GAUGE_SET(s, name, value)                                                   \
	do {                                                                           \
		uint64_t gv_ = (value);                                                \
		GP_STAT_SET(s, name, gv_);                                             \
		if (gv_ > (s)->name##_peak)                                            \
			GP_STAT_SET(s, name##_peak, gv_);                              \
	} while (0)
#define GP_GAUGE_ADD(s, name, delta) GP_GAUGE_SET(s, name, (s)->name + (delta))
#define GP_GAUGE_SUB(s, name, delta) GP_STAT_SET(s, name, (s)->name - (delta))

/* A slot is read word by word, each word a relaxed atomic load (the writer's stores are). */
typedef uint64_t __attribute__((may_alias)) gp_stats_word;
_Static_assert(sizeof(struct gpupool_device_stats) % sizeof(gp_stats_word) == 0, "a slot is whole words");

/* Copies a consistent snapshot of `src` into `dst`. Returns false when no consistent copy
 * was seen in `tries` attempts (the writer died mid-update, or is very busy). */
static inline bool gp_stats_snapshot(const struct gpupool_device_stats *src,
				     struct gpupool_device_stats *dst, int tries)
{
	while (tries-- > 0) {
		uint64_t a = __atomic_load_n(&src->seq, __ATOMIC_ACQUIRE);
		if (a & 1)
			continue;
		const gp_stats_word *from = (const gp_stats_word *)src;
		gp_stats_word *to = (gp_stats_word *)dst;
		for (size_t i = 0; i < sizeof *dst / sizeof *to; i++)
			to[i] = __atomic_load_n(&from[i], __ATOMIC_RELAXED);
		GP_STATS_FENCE(memory_order_acquire);
		uint64_t b = __atomic_load_n(&src->seq, __ATOMIC_RELAXED);
		if (a == b)
			return true;
	}
	return false;
}

#endif
