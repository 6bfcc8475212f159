/* Memory given back by idle neighbours before an out-of-memory error is returned: the one
 * step every allocation that found the GPU itself full takes, pooled or not. */
#ifndef GP_RECLAIM_H
#define GP_RECLAIM_H

#include <stddef.h>

/* Asks for `bytes` on `device` to be freed: 1 when memory was freed and a retry may
 * succeed, 0 otherwise. Call with no lock held. */
int gp_reclaim_before_oom(int device, size_t bytes);

#endif
