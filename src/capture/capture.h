/* Stream captures (CUDA graphs) as gpupool sees them, for both CUDA layers: the count of
 * captures in progress and the gate that keeps a device synchronize out of the start of a
 * capture. No CUDA types: the runtime and the driver layer each count their API's captures
 * here. Depends on the port only (the gate's lock rank). */
#ifndef GP_CAPTURE_H
#define GP_CAPTURE_H

#include <stdatomic.h>
#include <stdbool.h>

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

/* In a forked child: no capture of the parent's is ours, and the gate may have been held
 * by a parent thread that does not exist here. */
void gp_capture_after_fork(void);

#endif
