/* The backend as the pools get it: the registry's backend (runtime or driver) with each of
 * its calls marking the calling thread as inside gpupool, so that the driver hooks pass a
 * call the runtime makes on gpupool's behalf (a segment's cudaMalloc reaching cuMemAlloc)
 * straight to the driver instead of back into the pool. The first line of that defence is
 * dlsym.c (a dynamic runtime gets the real driver); this one holds where a runtime found
 * gpupool's driver entry points some other way. Depends on backend.h only. */
#ifndef GP_BACKEND_GUARD_H
#define GP_BACKEND_GUARD_H

#include <stdbool.h>

#include "backend.h"

/* Fills `out` with `in`, every call wrapped (a call `in` lacks stays NULL); `in` must
 * outlive `out`. A call added to struct gp_backend must be wrapped here too: out->ctx is
 * `in`, not in->ctx. */
void gp_backend_guard_init(struct gp_backend *out, const struct gp_backend *in);

/* True while the calling thread is inside a backend call, or between enter and leave. */
bool gp_backend_guard_inside(void);

/* Marks the calling thread inside gpupool around a runtime call it makes for the program
 * and has counted already (an unpooled cudaMallocManaged reaching cuMemAllocManaged): the
 * driver hooks pass it through instead of counting it again. Nest; each enter its leave. */
void gp_backend_guard_enter(void);
void gp_backend_guard_leave(void);

#endif
