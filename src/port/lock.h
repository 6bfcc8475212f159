/* The pool lock: a futex mutex (0 free, 1 held, 2 held with waiters) over the port layer.
 * The uncontended path is one atomic exchange each way, a third of pthread_mutex's cost on
 * the hot path; waiters sleep in the kernel, so a holder inside a slow cudaMalloc costs
 * them no CPU. Not recursive; zero-initialised is unlocked. Rank GP_RANK_POOL (rank.h). Depends on
 * port.h and rank.h only. */
#ifndef GP_LOCK_H
#define GP_LOCK_H

#include "port.h"
#include "rank.h"

typedef struct {
	int v;
} gp_lock;

/* The contended path: spins briefly, then sleeps. */
void gp_lock_take_slow(gp_lock *l);

static inline void gp_lock_take(gp_lock *l)
{
	gp_rank_take(GP_RANK_POOL);
	int c = 0;
	if (!__atomic_compare_exchange_n(&l->v, &c, 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
		gp_lock_take_slow(l);
}

static inline void gp_lock_give(gp_lock *l)
{
	if (__atomic_exchange_n(&l->v, 0, __ATOMIC_RELEASE) == 2)
		gp_port_wake_one(&l->v);
	gp_rank_give(GP_RANK_POOL);
}

#endif
