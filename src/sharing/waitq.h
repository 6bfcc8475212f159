/* The wait queue of each GPU (docs/sharing.md, "Waiting for memory"): an allocation the GPU
 * cannot serve waits in line instead of failing, while the other processes on the GPU give
 * back what they hold idle and, as long as anyone waits, hand what they free to the driver at
 * once. There is no queue in shared memory: every process keeps its own copy of each GPU's
 * line, from the waiters' own messages (share.h: WAIT, DONE), and a waiter is woken by a
 * holder's FREED, not by polling.
 *   - A ticket is the CLOCK_MONOTONIC time a wait began; earlier tickets are served first:
 *     no allocation of any process may take device memory that an earlier waiter on that GPU
 *     needs (the gate in every budget take: budget.h).
 *   - When every process holding memory on the GPU waits in its line, none can go on (hold
 *     and wait): the later tickets that hold memory end in out of memory, the first goes on.
 *   - No wait outlasts reclaim_wait_ms; a head of the line that leaves memory it waits for
 *     unused loses its place for good. A peer's claim is checked (its ticket, its end, its
 *     size), kept only from a process that listens under its own name, and holds a place in
 *     line only while that process's status says it waits and it has a page (gpupool-stat
 *     lists it); a wait heard of late takes its place no earlier than LATE_NS before that.
 *   - Neither a user nor a process fills the line: when it is full, a newcomer takes the
 *     place of the user (then the process) with the most; this process's own waiters always
 *     get in. A holder's word keeps a waiter waiting only once its status backs it.
 * Depends on the registry, the pool, share.h and reclaim.h; never on the call bodies. */
#ifndef GP_WAITQ_H
#define GP_WAITQ_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gpupool/stats.h"
#include "share.h"

/* ---- a waiter ------------------------------------------------------------------------- */

/* One allocation's wait, on the allocating thread's stack. */
struct gp_wait {
	int dev;
	int fd;               /* its own socket: holders answer and wake it there */
	bool quick;           /* only what others give at once (a framework's first failure) */
	bool tried;           /* the last gp_waitq_next said try: if it is called again, that failed */
	bool again;           /* the GPU had the room when it began: try again at once */
	bool room;            /* gp_waitq_begin said false: the GPU has the room now, and no cap
				 * refused (freed since the allocation failed) */
	int nagain;
	uint64_t ticket, deadline, t0, last_told;
	size_t need;          /* bytes it waits for (the segment the allocation needs) */
	size_t free0, last_free;
	unsigned char uuid[GPUPOOL_UUID_LEN];
	int *told;            /* the processes told, for the DONE */
	int ntold;
	unsigned heard, waiting_holders, gifts;
	unsigned busy;        /* peers whose queue was full at the last telling (told again) */
	struct {
		int pid;
		uint64_t held;  /* what it holds on the GPU (its last answer) */
		uint64_t since; /* its first answer */
		bool backed;    /* its status says it holds memory there, or it gave */
	} holders[64];        /* who answered */
	int nholders;
	uint64_t received;
	char who[400];        /* "pid 12 gave 1.0 GiB in 0.003 s, ..." */
	int why;              /* how it ended: enum in waitq.c */
};

/* Begins the wait of an allocation of `bytes` on `dev` that the device could not serve:
 * false when there is nothing to wait for (reclaim off, no pool or UUID yet, exiting, or the
 * GPU has the room: the limit or the pool refused, which others cannot change; or, with no
 * cap refusing, the memory came back since the allocation failed: w->room, try once more).
 * Otherwise
 * takes a ticket, tells every process on the machine (each keeps the GPU's line), and
 * returns true: then call gp_waitq_next until it returns false, and gp_waitq_end once.
 * `quick` waits only for what others give at once (about 0.2 s), for a framework that
 * empties its own cache after a failure and asks again. Never with a lock of gpupool held. */
bool gp_waitq_begin(struct gp_wait *w, int dev, size_t bytes, bool quick);

/* Waits for memory: true when the allocation should be tried now (memory was freed and it
 * is this waiter's turn), false when the wait is over (its bound, nobody on the GPU holding
 * anything, or hold and wait). */
bool gp_waitq_next(struct gp_wait *w);

/* Ends the wait (`served`: the allocation got its memory): the others forget it, the
 * figures are counted, and one info line says what happened. */
void gp_waitq_end(struct gp_wait *w, bool served);

/* ---- the others ------------------------------------------------------------------------ */

/* Waiters of other processes known on device d (the free path's check: one relaxed load). */
extern atomic_uint gp_waitq_others[GPUPOOL_MAX_DEVICES];

/* Memory on `dev` was freed by this process while others wait: the release thread gives it
 * to the driver and wakes the first waiter (one datagram to itself; at most one outstanding
 * per device). */
void gp_waitq_freed(int dev);
static inline void gp_waitq_note_free(int dev)
{
	if (__builtin_expect(dev >= 0 && dev < GPUPOOL_MAX_DEVICES &&
				     atomic_load_explicit(&gp_waitq_others[dev], memory_order_relaxed),
			     0))
		gp_waitq_freed(dev);
}

/* The release thread: a WAIT, DONE or POKE that came on its socket fd, or the answer to the
 * status query it sent a waiter (STATUS_ANSWER). */
void gp_waitq_message(int fd, const struct gp_share_msg *m, const struct gp_share_peer *from);

/* The release thread, each time round: waits past their end are forgotten, and a head that
 * leaves what it waits for unused loses its place. Returns the milliseconds until it wants
 * to run again (its poll's timeout), -1 while no line has anyone in it. */
int gp_waitq_tick(void);

/* Starts the line's gate in the budget (once, with the release thread). */
void gp_waitq_arm(void);

/* The wait of `pid` with `ticket` on `dev` is still in this process's copy of the line. */
bool gp_waitq_waiting(int dev, int pid, uint64_t ticket);

/* Bytes this process's own waiters wait for on `dev` now, and since when (CLOCK_REALTIME
 * ns of the oldest; 0 none). */
uint64_t gp_waitq_own(int dev, uint64_t *since_ns);

/* In a forked child: the parent's waiters and its knowledge of others' are not the child's. */
void gp_waitq_after_fork(void);

#endif
