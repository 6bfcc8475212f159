/* The pool lock's contended path (lock.h). Depends on port/port.h only. */
#include "lock.h"

void gp_lock_take_slow(gp_lock *l)
{
	for (int spin = 0; spin < 100; spin++) {
		int c = 0;
		if (__atomic_compare_exchange_n(&l->v, &c, 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
			return;
		gp_port_cpu_relax();
	}
	while (__atomic_exchange_n(&l->v, 2, __ATOMIC_ACQUIRE) != 0)
		gp_port_wait(&l->v, 2);
}
