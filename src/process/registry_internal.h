/* What the registry's files share (init.c, pools.c, lifecycle.c), and what the layers above
 * reach that the call bodies must not: the registry writable (sharing's release thread and
 * reclaim, the ladder), the backend the pools get, and each file's part of a fork (the fork
 * handler, calls/fork.c). */
#ifndef GP_REGISTRY_INTERNAL_H
#define GP_REGISTRY_INTERNAL_H

#include "backend.h"
#include "registry.h"

/* The registry, writable: init.c sets it up, pools.c keeps its pools and slots. */
struct gp_registry *gp_registry_self(void);

/* The backend the pools get (the runtime's or the driver's, guarded: backend_guard.h), set
 * when the registry is settled. */
const struct gp_backend *gp_registry_backend(void);

/* pools.c: the lock of creating and removing pools (rank GP_RANK_POOLS). */
void gp_registry_lock(void);
void gp_registry_unlock(void);

/* lifecycle.c: device resets and the pools they kill.
 * The reset gates and the reclaimer's fence: called by the initialisation, before any hook
 * can reach them. */
void gp_registry_lifecycle_init(void);
/* A backend for one new pool over the registry's (behind the device's reset gate), or NULL
 * (no host memory); bound to its pool once made, or freed when the pool could not be. */
const struct gp_backend *gp_registry_pool_backend_new(void);
void gp_registry_pool_backend_bind(const struct gp_backend *be, gp_pool *p);
void gp_registry_pool_backend_free(const struct gp_backend *be);
/* The pools a successful reset of `dev` killed, if any, leave for good (their slot's gauges
 * go to zero; they are parked, and freed once no thread can be inside them). Under the
 * registry lock, before a new pool of `dev` is made: it writes to the same slot. */
void gp_registry_retire_killed(int dev);
/* Frees the parked pools no thread can be inside any more (the fence thread calls it after
 * each action: gp_fence_thread_after_action). Takes the registry lock; cheap while none is parked. */
void gp_registry_reclaim_parked(void);

/* pools.c: the process's page (shared, or private when it could not be made); NULL before
 * the first pool. Its header never changes after that; its slots are each pool's. */
const struct gpupool_page *gp_registry_page(void);

/* pools.c: answers a release request of the page now, if one is pending (the release
 * thread; the allocating threads check on every call). */
void gp_registry_release_requests(void);

/* Each file's part of the child's reset (fork.c calls them in order): init.c's lock of
 * finding the runtime; pools.c's pools, slots, page and trace; lifecycle.c's killed and
 * parked pools, sentinel, readers' records and reset gates. */
void gp_registry_init_after_fork(void);
void gp_registry_pools_after_fork(void);
void gp_registry_lifecycle_after_fork(void);

#endif
