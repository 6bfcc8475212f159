/* The status exchange, the holder's side (share.h's GP_SHARE_STATUS): what this process holds
 * on each device, told to whoever asks on the channel, so that a reader who may not open
 * this process's page (another user) can still list it. The figures come from the process's
 * own page slots, with the whole free segments counted afresh and the driver's figures
 * looked at again when they are older than GP_STATUS_FRESH_NS. Depends on the registry, the
 * pool and share.h; never on the call bodies or reclaim. */
#ifndef GP_STATUS_H
#define GP_STATUS_H

#include "pool.h"
#include "share.h"

/* How old the counted figures may be before a query counts them again: GP_STATUS_FRESH_NS,
 * or GP_STATUS_CHANGED_NS when the pool changed since (its slot's sequence counter moved: a
 * release just now, the program's frees), so that a listing right after a release shows it.
 * However many ask, each pool has one short pass under its lock per GP_STATUS_CHANGED_NS at
 * most. */
#define GP_STATUS_FRESH_NS (50 * 1000 * 1000ull)
#define GP_STATUS_CHANGED_NS (5 * 1000 * 1000ull)

/* Looks at device d's memory (the backend's mem_info: cudaMemGetInfo) and records its total,
 * its free memory and the time in the slot st (device_*), as independent words outside the
 * slot's seq bracket (the pool's lock holder owns it): the release thread's pass each second,
 * and a status answer's fresh look. Returns 0, or the backend's error (nothing recorded). */
int gp_status_look(gp_pool *p, struct gpupool_device_stats *st, int d);

/* Answers a GP_SHARE_STATUS that came on the release thread's socket fd from `from`: one
 * GP_SHARE_STATUS_ANSWER per device with a pool on the GPU asked about (every device when the
 * query's uuid is all zero), or one with count 0 when there is none. The release thread's
 * only (it opens its own registry read section). */
void gp_status_answer(int fd, const struct gp_share_msg *m, const struct gp_share_peer *from);

#endif
