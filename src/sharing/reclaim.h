/* Reclaim: idle memory goes where it is needed, across the processes that share a GPU
 * (docs/sharing.md). Both sides of share.h's exchange, as policy: the asker, when the GPU
 * itself refuses an allocation, asks the processes on the same physical GPU (matched by
 * UUID) for what they hold idle, largest first, and waits a bounded time; the holder, on its
 * release thread, gives back only idle memory, and only while the driver reports the GPU
 * short. Depends on the registry, the pool, share.h and framework.h. */
#ifndef GP_RECLAIM_H
#define GP_RECLAIM_H

#include <stdbool.h>
#include <stddef.h>

#include "share.h"

/* An allocation of `bytes` on `device` (whose pool exists) failed. When the GPU itself is
 * short of them (not the limit), and reclaim is on, asks the other processes on the same GPU
 * to give idle memory back, waiting at most reclaim_wait_ms. Returns 1 when memory was given
 * (or the GPU now has room: a retry may succeed), 0 otherwise. Never with a pool lock held. */
int gp_reclaim_before_oom(int device, size_t bytes);

/* In a forked child: no round of the parent's is the child's. */
void gp_reclaim_after_fork(void);

/* The holder's side: answers a QUERY (what could be given) or an ASK (give it) that came
 * on the release thread's socket fd from `from`. Other kinds are not its to answer. */
void gp_reclaim_answer(int fd, const struct gp_share_msg *m, const struct gp_share_peer *from);

#endif
