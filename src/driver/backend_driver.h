/* The pool backend over the real CUDA driver (libcuda.h), for a process without a dynamic
 * CUDA runtime (a program built with the static runtime, CuPy, Numba, JAX, the driver
 * bindings). Each call runs in the device's primary context, pushed on the calling thread
 * and popped after, whatever context the thread had current. Knows CUDA types; must not
 * depend on the pool's internals or the registry. */
#ifndef GP_BACKEND_DRIVER_H
#define GP_BACKEND_DRIVER_H

#include "backend.h"
#include "libcuda.h"

/* Fills `be` with the backend over `d`, which must outlive it. The primary context of a
 * device is retained on the backend's first call for it and kept (as the runtime keeps
 * it): the pool's segments live in it. Fences and segment frees are refused with -EBUSY
 * while a stream capture is in progress (capture.h). */
void gp_driver_backend_init(struct gp_backend *be, const struct gp_driver *d);

/* The error of this thread's last segment the driver refused with an error that is not out
 * of memory (segment_alloc's -EIO: cuMemAlloc's, or the primary context's when it could not
 * be made current); CUDA_SUCCESS when none. */
/* Keeps `e` as this thread's last -EIO error (the virtual-memory backend's, backend_vmm.c). */
void gp_driver_backend_keep_error(CUresult e);
CUresult gp_driver_backend_error(void);

/* The primary context of `device` was reset (cuDevicePrimaryCtxReset, or destroyed): the
 * retained handle is dropped without a release, the next call retains it again. */
void gp_driver_backend_forget(int device);

/* In a forked child: no retained context of the parent's is the child's. */
void gp_driver_backend_after_fork(void);

/* The primary context of `device` (retained on first use and kept, as above) pushed current
 * on this thread over the driver `d`: 0, or -EIO; gp_driver_primary_pop pops it. For every
 * call gpupool makes into the driver on a device's behalf (this backend's, backend_vmm.c's). */
int gp_driver_primary_push(const struct gp_driver *d, int device);
/* The same, with the driver's error in *why where it failed (CUDA_ERROR_INVALID_DEVICE for a
 * device out of range). */
int gp_driver_primary_push_why(const struct gp_driver *d, int device, CUresult *why);
void gp_driver_primary_pop(const struct gp_driver *d);
/* The calls gpupool makes on its own behalf run in relaxed capture mode: another thread's
 * global-mode capture must not refuse them (and be invalidated by them). begin answers the
 * mode to give back to end. */
CUstreamCaptureMode gp_driver_relax_begin(const struct gp_driver *d);
void gp_driver_relax_end(const struct gp_driver *d, CUstreamCaptureMode m);

#endif
