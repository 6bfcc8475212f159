/* What the registry's files share (init.c, pools.c, fork.c) and nothing else includes:
 * the registry writable, the backend the pools get, and each file's part of a fork. */
#ifndef GP_REGISTRY_INTERNAL_H
#define GP_REGISTRY_INTERNAL_H

#include "backend.h"
#include "registry.h"

/* The registry, writable: init.c sets it up, pools.c keeps its pools and slots. */
struct gp_registry *gp_registry_self(void);

/* The backend the pools get (the runtime's or the driver's, guarded: backend_guard.h), set
 * when the registry is settled. */
const struct gp_backend *gp_registry_backend(void);

/* pools.c's locks that need more than a static initialiser (the reset gates): called by
 * the initialisation, before any hook can reach them. */
void gp_registry_pools_init(void);

/* Registers the one fork handler (fork.c), once: called by the initialisation. */
void gp_fork_arm(void);

/* Each file's part of the child's reset (fork.c calls them in order): init.c's lock of
 * finding the runtime; pools.c's pools, slots, page and trace. */
void gp_registry_init_after_fork(void);
void gp_registry_pools_after_fork(void);

#endif
