/* The pool's invariant checker (pool_check.c), and the hook that runs it after every
 * operation when params.check is set. Depends on pool_internal.h only. */
#ifndef GP_POOL_CHECK_H
#define GP_POOL_CHECK_H

#include "pool_internal.h"

/* gp_pool_check with the lock held: 0, or -EFAULT after logging what is wrong. */
int gp_pool_check_locked(gp_pool *p);

#define GP_CHECK_AFTER(p)                                                              \
	do {                                                                           \
		if ((p)->prm.check)                                                    \
			(void)gp_pool_check_locked(p);                                 \
	} while (0)

#endif
