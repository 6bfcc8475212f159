/* The caches of the frameworks above gpupool (PyTorch's caching allocator, CuPy's memory
 * pools), emptied when another process needs the GPU's memory (docs/sharing.md). Through the
 * Python interpreter already in the process, found with dlsym: nothing is loaded, no module
 * is imported, nothing runs unless a request is honoured. */
#ifndef GP_FRAMEWORK_H
#define GP_FRAMEWORK_H

#include <stdbool.h>
#include <stddef.h>

/* A Python interpreter runs in this process (not finalizing). Cheap: no lock taken. */
bool gp_framework_present(void);

/* Empties the caches of PyTorch (torch.cuda.empty_cache(), where torch is imported and its
 * CUDA initialised) and CuPy (free_all_blocks() of its default pools, where cupy is
 * imported), holding the interpreter's lock as the C API requires, only while the
 * interpreter runs (never during finalisation). An exception a framework raises is caught
 * and named in what[] ("torch: RuntimeError: ..."), never printed. Returns the number of
 * caches emptied, or -ENOSYS (no interpreter, or it is finalising). Never call it with a
 * lock of gpupool held: the frameworks' frees come back through the hooks. still(arg), when
 * given, is asked once the interpreter's lock is held (a busy program may have kept it for
 * seconds): false, and nothing is emptied (returns 0, "too late" in what[]). */
int gp_framework_empty(char *what, size_t cap, bool (*still)(void *), void *arg);

#endif
