/* Stream captures (CUDA graphs) as gpupool sees them: the count of captures in progress, the
 * gate that keeps a device synchronize out of the start of a capture, and the relaxed
 * capture mode gpupool's own runtime calls run in. Depends on the runtime table only: must
 * not depend on the pool or the registry. */
#ifndef GP_CAPTURE_H
#define GP_CAPTURE_H

#include <cuda_runtime_api.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "runtime.h"

/* Stream captures in progress, as seen by the capture hooks. Begin/end go through the
 * capture gate so that no fence's device synchronize overlaps the start of a capture. */
void gp_capture_begin(void);
void gp_capture_end(void);
int gp_capture_count(void);
/* The counter itself, for a check on the hot path without a call. */
const atomic_int *gp_capture_counter(void);

/* The gate, around a call that synchronizes the device (a fence, a real cudaFree): true
 * with the gate held when no capture is in progress (leave it with gp_capture_gate_leave),
 * false with the gate not held when one is. */
bool gp_capture_gate_enter(void);
void gp_capture_gate_leave(void);

/* Runs the calling thread in relaxed capture mode until gp_capture_relax_end(the returned
 * mode): the calls gpupool makes on its own behalf must not be refused (and invalidate a
 * capture) because another thread captures in global mode. `rt`: the resolved runtime. */
static inline enum cudaStreamCaptureMode gp_capture_relax_begin(const struct gp_runtime *rt)
{
	enum cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
	if (rt->ThreadExchangeStreamCaptureMode)
		(void)rt->ThreadExchangeStreamCaptureMode(&mode);
	return mode;
}

static inline void gp_capture_relax_end(const struct gp_runtime *rt, enum cudaStreamCaptureMode mode)
{
	if (rt->ThreadExchangeStreamCaptureMode)
		(void)rt->ThreadExchangeStreamCaptureMode(&mode);
}

/* In a forked child: no capture of the parent's is ours, and the gate may have been held
 * by a parent thread that does not exist here. */
void gp_capture_after_fork(void);

#endif
