/* The fence thread's schedule as one pure step (jemalloc's decay.h with background_thread.c
 * is the pattern): what the thread does now and when it wakes next are a function of this
 * state, the clock it is handed and what happened since the last step. The fence thread
 * (process/fence_thread.c) only acts and sleeps on the answer; the replay (replay/replay.c)
 * runs the same steps on the trace's clock. Depends on nothing: no clock of its own, no pool,
 * no lock, no I/O. Not thread-safe: one schedule per thread that steps it. */
#ifndef GP_FENCE_SCHEDULE_H
#define GP_FENCE_SCHEDULE_H

#include <stdbool.h>
#include <stdint.h>

/* The polls of outstanding markers: the first this long after the marker, each next one
 * twice as late, up to GP_FENCE_POLL_MAX_NS: quick to see a short queue drain, and a device
 * that lags by milliseconds costs a few wake-ups per marker, not a core. */
#define GP_FENCE_POLL_MIN_NS 50000ull
#define GP_FENCE_POLL_MAX_NS 1000000ull
/* After an action that failed (a capture refuses fences, or a sticky device error), the
 * next marker waits this long more than a burst's interval, doubled after each failure
 * while under GP_FENCE_BACKOFF_GROW_NS (so at most 128 ms): a capture may last long, a
 * sticky error for ever. */
#define GP_FENCE_BACKOFF_MIN_NS 1000000ull
#define GP_FENCE_BACKOFF_GROW_NS 100000000ull

/* No wake-up is due: the thread sleeps until a free asks for a fence. */
#define GP_FENCE_NEVER UINT64_MAX

/* What the thread does now. */
enum gp_fence_action {
	GP_FENCE_SLEEP, /* nothing: sleep until next_wake_ns (GP_FENCE_NEVER: until a free asks) */
	GP_FENCE_MARK,  /* every pool: retire what the device has passed and record a marker for
			 * the new pending frees (gp_pool_fence_poll(p, true)); a pool without
			 * markers: one gp_pool_fence when it has pending frees */
	GP_FENCE_POLL,  /* every pool: retire what the device has passed, no new marker
			 * (gp_pool_fence_poll(p, false)) */
};

/* What happened since the last step, or'ed together. */
enum gp_fence_event {
	GP_FENCE_EV_FREED = 1 << 0,       /* a cudaFree asked for a fence (gp_fence_thread_wake) */
	GP_FENCE_EV_OUTSTANDING = 1 << 1, /* the action just taken left markers outstanding */
	GP_FENCE_EV_REFUSED = 1 << 2,     /* it failed somewhere (a capture is active, or the
					   * device failed) */
};

struct gp_fence_step {
	enum gp_fence_action action;
	/* GP_FENCE_SLEEP: when to step again, on the same clock (GP_FENCE_NEVER: when a free
	 * asks). An action: now; step again as soon as it is done, with its outcome. */
	uint64_t next_wake_ns;
};

/* The state; set up by gp_fence_schedule_init, read and changed by gp_fence_schedule_next
 * only. All times in ns on the caller's clock. */
struct gp_fence_schedule {
	uint64_t interval_ns; /* a burst of frees gathers this long behind one marker */
	uint64_t due_ns;      /* when the next action is due; GP_FENCE_NEVER: none (idle) */
	uint64_t poll_ns;     /* delay of the next poll */
	uint64_t backoff_ns;  /* extra delay after the next failure */
	bool mark;            /* the action due records a marker (frees wait for one) */
	bool acted;           /* the last step asked for an action: this one gets its outcome */
};

/* Idle, with a burst's interval of interval_ns. */
void gp_fence_schedule_init(struct gp_fence_schedule *s, uint64_t interval_ns);

/* One step at clock time now_ns, told `events` (enum gp_fence_event bits). The rules:
 * - idle, a free asks: a marker interval_ns later (the burst gathers behind it);
 * - an action's outcome: failed: a marker after the backoff and the interval (the backoff
 *   doubles); else a free asked meanwhile: a marker interval_ns later (polls start again
 *   at GP_FENCE_POLL_MIN_NS); else markers outstanding: a poll after the poll delay, which
 *   then doubles up to GP_FENCE_POLL_MAX_NS; else idle;
 * - at the time due: a marker when one was due or a free asked since, else a poll;
 * - before it (an early wake): nothing, a free remembered for the action due.
 * Pure: no clock read, no call out. */
struct gp_fence_step gp_fence_schedule_next(struct gp_fence_schedule *s, uint64_t now_ns, unsigned events);

#endif
