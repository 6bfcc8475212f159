/* The fence thread: retires cudaFree'd blocks off the callers' threads, one fence (a marker,
 * or a device synchronize) per pool behind a burst of frees. Owns the thread, its lock, condition and flags. Works on the
 * pool array it is given: must not depend on the registry, the config or CUDA (the pools'
 * backend does the device synchronize). */
#ifndef GP_FENCE_THREAD_H
#define GP_FENCE_THREAD_H

#include <stdatomic.h>

#include "pool.h"

/* Starts the thread unless it runs already. Woken by gp_fence_thread_wake, it waits
 * interval_us (a burst of frees gathers behind one fence), then records a marker in every
 * pool of pools[0..ndev) with new pending frees (gp_pool_fence_poll; a pool without
 * markers gets gp_pool_fence), and polls the outstanding markers, 50 us later and then
 * ever more slowly up to every 1 ms, until none is left; it sleeps on its condition
 * variable while nothing is pending. The schedule is fence_schedule.h's (the replay runs
 * the same one on a trace's clock). `pools` must outlive the process; entries may be
 * NULL and may change. Logs and leaves it stopped when the thread cannot be created (pools
 * then fence inline). Thread-safe. */
void gp_fence_thread_start(_Atomic(gp_pool *) *pools, int ndev, unsigned interval_us);

/* `fn` runs on the thread after each of its actions (the registry frees the pools a device
 * reset killed once the thread is out of them). Set before gp_fence_thread_start. */
void gp_fence_thread_after_action(void (*fn)(void));

/* Asks for a fence soon. A no-op when the thread is not running. Cheap when a fence is
 * already wanted (one relaxed load). */
void gp_fence_thread_wake(void);

/* At exit: tells the thread to stop, and gives a fence that is inside the runtime up to 2 s
 * to finish (the runtime tears itself down after the exit handlers). Takes the thread's lock
 * only while the thread runs; no CUDA call. */
void gp_fence_thread_stop(void);

/* In a forked child: the thread did not survive the fork, and its lock may have been held
 * by a thread that does not exist here. Leaves it stopped; gp_fence_thread_start starts it
 * again. */
void gp_fence_thread_after_fork(void);

#endif
