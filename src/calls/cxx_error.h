/* Raising a C++ std::runtime_error from C, for gpupool_malloc: PyTorch's pluggable allocator
 * does not check the pointer its allocation function returns, so an out-of-memory must be
 * thrown, not returned as NULL. Uses the host's C++ runtime (libstdc++), found at run time;
 * never linked. No pool, no CUDA, no locks. */
#ifndef GP_CXX_ERROR_H
#define GP_CXX_ERROR_H

#include <stdbool.h>

/* True when the process has a C++ runtime that gp_cxx_throw can use. Thread-safe. */
bool gp_cxx_available(void);

/* Throws std::runtime_error(msg) (msg is copied) and does not return, or returns at once
 * when the process has no usable C++ runtime. The caller must hold no lock and own nothing
 * that needs cleaning up: C frames are unwound without cleanups. */
void gp_cxx_throw(const char *msg);

#endif
