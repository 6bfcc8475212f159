/* Pending frees and fences: a cudaFree'd block waits on the pending list (oldest first,
 * by gp_block.pend_next) until a fence begun after its free completes. A fence is a marker
 * (backend.h: recorded, then polled or waited for without the pool lock) or, where there
 * are none, one device_sync run without the pool lock. Depends on pool_internal.h and
 * freelist.h; no allocation policy (when to fence is pool.c's and the fence thread's). */
#ifndef GP_FENCE_H
#define GP_FENCE_H

#include "pool_internal.h"

/* What a fence makes reusable by anyone once it completes. */
enum gp_fence_scope {
	GP_FENCE_PENDING_ONLY,    /* the pending (cudaFree'd) blocks freed before it began */
	GP_FENCE_PROMOTE_STREAMS, /* those, and every stream list's blocks freed before it began */
};

/* Block b (live, or free and out of every tree) waits for the next fence. */
void gp_pending_push(gp_pool *p, struct gp_block *b);

/* Every pending block freed before fence `k` began goes to the ready list. */
void gp_pending_retire(gp_pool *p, uint64_t k);

/* Every block of a stream's lists waits for a fence, like a cudaFree'd one: used when
 * nothing can order another stream after that stream (gone, or not ours to name). */
void gp_pending_from_list(gp_pool *p, struct gp_slist *sl);

/* One fence: begin (under lock), device_sync (unlocked), retire, and with
 * GP_FENCE_PROMOTE_STREAMS promote. Called and returns with the lock held and the stats
 * slot open (gp_stats_begin); 0 or the backend's error. */
int gp_fence_locked(gp_pool *p, enum gp_fence_scope scope);

/* Markers are on for this pool (the fence_marker parameter, and a backend that has them). */
bool gp_fence_markers(const gp_pool *p);

/* Asks the backend which outstanding markers are done, oldest first, and retires through
 * the newest done one. Lock held, never dropped. 0, or the backend's error. */
int gp_fence_poll_locked(gp_pool *p);

/* The allocating thread's fence for a request of `rounded` bytes (pool.c's ladder). With
 * markers: waits (lock dropped) for the oldest outstanding marker that covers a pending
 * block of at least `rounded` bytes (with the free neighbours it merges with), else, when
 * the pending bytes could serve it, for the newest; when the fitting blocks are newer than
 * every marker, a device_sync (waiting at once for a marker recorded now would be the same
 * wait, for more calls and on fewer streams). It waits only when the expected wait (the
 * device's lag less the marker's age) is near (20 us), or within both `budget_ns` and the
 * allocating threads' wait credit (fence.c). GP_FENCE_PROMOTE_STREAMS: whatever the wait,
 * and a device_sync when no pending block fits (the stream lists' blocks may). Without
 * markers: one gp_fence_locked, whatever the budget. Called and returns with the lock held
 * and the stats slot open. 0 after a fence (*last: nothing newer in flight is worth waiting
 * for), -ENOENT when no fence could serve the request within the budget (nothing waited),
 * or the backend's error. */
int gp_fence_serve_locked(gp_pool *p, enum gp_fence_scope scope, size_t rounded, uint64_t budget_ns,
			  bool *last);

/* The fence thread's action with markers (gp_pool_fence_poll, which checks that the pool
 * has them): retires the blocks of every marker the device has passed, and with `mark`
 * records one covering the pending blocks no marker covers yet (none while GP_MARKS_MAX are
 * outstanding: the next call). Never waits. 1 while markers are outstanding, 0 when none
 * is, or the backend's error. Lock held and stats slot open, never dropped. */
int gp_fence_poll_mark_locked(gp_pool *p, bool mark);

#endif
