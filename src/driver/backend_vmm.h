/* The virtual-memory calls of the pools' backend (backend.h vmm_*) over the real driver's
 * entry points (libcuda.h: the loaded libcuda's, never gpupool's own hooks), for the runtime
 * backend and the driver backend alike: a process that runs on the CUDA runtime has the
 * driver loaded too. Knows CUDA types; must not depend on the pool's internals, the runtime
 * layer or the registry. */
#ifndef GP_BACKEND_VMM_H
#define GP_BACKEND_VMM_H

#include "backend.h"

/* Sets be's vmm_* calls. They find the driver when first asked (vmm_granularity, at a pool's
 * creation): a device answers -ENOTSUP when no driver is loaded, the driver lacks one of the
 * calls, or the device has no virtual memory management
 * (CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED). Each call runs in the device's
 * primary context, in relaxed capture mode. A map creates one physical allocation per chunk
 * (cuMemCreate of the granularity), maps it (cuMemMap) and releases its handle at once (the
 * mapping keeps the memory, so an unmap gives it back), then grants the device read and
 * write access to the whole range in one cuMemSetAccess; a failure anywhere unmaps what the
 * call mapped and answers -ENOMEM, whatever the driver said. An unmap waits for the device
 * first when asked (cuCtxSynchronize), and is refused (-EBUSY) while a stream capture is in
 * progress (capture.h), as segment frees are. */
void gp_vmm_backend_add(struct gp_backend *be);

/* In a forked child: the driver's answers of the parent's are forgotten. */
void gp_vmm_backend_after_fork(void);

#endif
