/* The runtime's last error, as gpupool leaves it. The runtime has no "set last error":
 * an error is left behind by repeating a failing call that produces it. Depends on the
 * runtime table and the relaxed capture mode (capture.h) only. */
#ifndef GP_LAST_ERROR_H
#define GP_LAST_ERROR_H

#include <cuda_runtime_api.h>

#include "runtime.h"

/* Leaves `err` as the runtime's last error for this thread, as a failing native call
 * would (cudaErrorMemoryAllocation, cudaErrorInvalidValue or cudaErrorInvalidDevice; any
 * other is logged at debug level and left out). `rt`: the resolved runtime (NULL: no-op). */
void gp_last_error_set(const struct gp_runtime *rt, cudaError_t err);

/* After an internal call through `rt` failed: leaves the runtime's last error as it was
 * before it, `before` (cudaPeekAtLastError then). The failure overwrote it. */
void gp_last_error_restore(const struct gp_runtime *rt, cudaError_t before);

#endif
