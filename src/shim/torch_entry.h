/* The bodies of gpupool_malloc/gpupool_free, the entry points of PyTorch's pluggable
 * allocator (CUDAPluggableAllocator): an explicit device and stream, no cudaError_t; an
 * out-of-memory is thrown as a C++ exception. Only hooks.c includes this header. */
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

#endif
