/* The bodies of gpupool_malloc/gpupool_free, the entry points of PyTorch's pluggable
 * allocator (CUDAPluggableAllocator): an explicit device and stream, no cudaError_t; an
 * out-of-memory is thrown as a C++ exception. And gpupool_reset_peak_stats's, behind
 * torch.cuda.reset_peak_memory_stats in that mode. Only hooks.c includes this header. */
#ifndef GP_TORCH_ENTRY_H
#define GP_TORCH_ENTRY_H

#include <cuda_runtime_api.h>
#include <stddef.h>

/* `size` bytes from the pool of `device`, ordered on `stream`. NULL when gpupool is off or
 * the arguments are out of range; on out-of-memory throws std::runtime_error where the
 * process has a C++ runtime, else returns NULL (logged). */
void *gp_torch_malloc(size_t size, int device, cudaStream_t stream);
/* Frees a block gp_torch_malloc returned; anything else is logged and ignored. */
void gp_torch_free(void *ptr, int device, cudaStream_t stream);
/* Every gauge's peak restarts from its current value, on `device` (-1: every device that has
 * a pool). 0 (also for a device with no pool yet: nothing to reset); -ENODEV for a device
 * out of range; -ENOSYS when the pool is off. */
int gp_torch_reset_peak_stats(int device);

#endif
