/* Reclaim: idle memory goes where it is needed, across the processes that share a GPU
 * (docs/sharing.md). The holder's side, as policy: on its release thread, a process gives
 * back only idle memory (whole free segments above its floor, then a framework's cache), and
 * only while a waiter on the same GPU (matched by UUID) lacks it; the asker's side is the
 * wait queue (waitq.h). Depends on the registry, the pool, share.h and framework.h. */
#ifndef GP_RECLAIM_H
#define GP_RECLAIM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "share.h"

/* The holder, on the release thread: gives back idle memory of `dev` toward `short_bytes`
 * (and a little slack) for the waiter `pid` (`uid`): whole free segments above the floor,
 * then, where that is not enough, the frameworks' caches (at most ten times a second).
 * short_bytes 0: this process freed memory while others wait; every whole free segment above
 * the floor goes (fenced first). Counted and logged. Returns what the GPU gained. */
size_t gp_reclaim_give(int dev, size_t short_bytes, int pid, unsigned uid, uint64_t ticket);

/* Bytes the frameworks gave on `dev` on their own thread since the last call (their memory
 * outside the pool, handed to the driver by the framework itself), for the next FREED. */
uint64_t gp_reclaim_take_credit(int dev);

/* What this process could give on `dev` now (*idle: from the last walk of its pool, made at
 * most ten times a second whoever asks, and what a framework above last said it holds
 * unused, above the floor), what it holds there (*held: reserved + unpooled), and *flags
 * (GP_SHARE_FRAMEWORK). `measure`: the framework's figure is measured anew (on its thread,
 * for the next answer) where it is a second old. The release thread only. */
void gp_reclaim_holding(int dev, bool measure, uint64_t *idle, uint64_t *held, uint32_t *flags);

/* The floor of `dev` (the reserve knob), decided at its first use: 0 none, or refused (one
 * line) when larger than the GPU or when the floors of the processes on it would together
 * pass it. The release thread only. */
uint64_t gp_reclaim_floor(int dev);

/* The waiter's figures (waitq.c), into the page: the processes on the GPU that heard it,
 * gifts, bytes received, time waited (reclaim_*); and, for a wait in line (not a framework's
 * quick first failure), waits, wait_ns and served or timed out. */
void gp_reclaim_count_wait(int dev, unsigned asked, unsigned answers, uint64_t received, uint64_t waited,
			   bool served, bool waited_in_line);

/* A call gpupool does not pool (virtual memory, managed, pitched, a program's pool) got out
 * of memory on `device`: waits in the GPU's line (waitq.h) until memory was freed for it
 * (1: make the call again) or the wait is over (0). Never with a pool lock held. */
int gp_reclaim_before_oom(int device, size_t bytes);

/* In a forked child: no floor or figure of the parent's is the child's. */
void gp_reclaim_after_fork(void);

/* The holder's side of a QUERY that came on the release thread's socket fd from `from`:
 * an OFFER (what it could give, what it holds, its floor). */
void gp_reclaim_answer(int fd, const struct gp_share_msg *m, const struct gp_share_peer *from);

#endif
