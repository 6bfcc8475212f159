/* Stream keys, in one place for every layer: the key of a stream handle as the calling
 * thread names it (the runtime's and the driver's handles are the same values), the handle
 * a key stands for, and the synthetic keys of per-thread default streams (also the trace
 * replay's). Part of the pool's contract: depends on backend.h (gp_stream) only, no CUDA
 * headers. */
#ifndef GP_STREAMKEY_H
#define GP_STREAMKEY_H

#include <stdbool.h>
#include <stdint.h>

#include "backend.h"

/* A real stream handle is a pointer aligned to at least 16 bytes, so its low four bits are
 * zero; 0 is the legacy default stream. A synthetic key is an id shifted past those bits
 * with a nonzero tag in them, and so never equals a handle. */
#define GP_STREAMKEY_TAG_BITS 4
#define GP_STREAMKEY_TAG_MASK ((gp_stream)((1u << GP_STREAMKEY_TAG_BITS) - 1))

enum gp_streamkey_tag {
	/* replay: the per-thread default stream of one traced thread; the id is its tid */
	GP_STREAMKEY_TRACE_PTDS = 0x2,
	/* a live thread's per-thread default stream; the id is a process-wide serial, from 1 */
	GP_STREAMKEY_PTDS = 0x3,
};

static inline gp_stream gp_streamkey_make(gp_stream id, enum gp_streamkey_tag tag)
{
	return (id << GP_STREAMKEY_TAG_BITS) | (gp_stream)tag;
}

/* The tag of a key: 0 for a real handle or the legacy stream. */
static inline unsigned gp_streamkey_tag(gp_stream key) { return (unsigned)(key & GP_STREAMKEY_TAG_MASK); }

/* The special handle values both CUDA APIs share: cudaStreamLegacy is CU_STREAM_LEGACY,
 * cudaStreamPerThread is CU_STREAM_PER_THREAD (cuda.h and driver_types.h: 0x1 and 0x2). */
#define GP_STREAM_HANDLE_LEGACY ((uintptr_t)0x1)
#define GP_STREAM_HANDLE_PER_THREAD ((uintptr_t)0x2)

/* The calling thread's per-thread default stream key: a synthetic key from a process-wide
 * serial, made on the thread's first use. Thread-safe; no allocation. */
gp_stream gp_streamkey_ptds(void);

/* The key of stream handle `h` as the calling thread names it. `ptsz`: the call came
 * through a _ptsz entry point, where handle 0 is the per-thread default stream. The legacy
 * default stream is key 0. */
static inline gp_stream gp_streamkey_of(uintptr_t h, bool ptsz)
{
	if (h == GP_STREAM_HANDLE_PER_THREAD || (h == 0 && ptsz))
		return gp_streamkey_ptds();
	if (h == 0 || h == GP_STREAM_HANDLE_LEGACY)
		return 0;
	return (gp_stream)h;
}

/* The handle the calling thread can use for key `k` in *h (the legacy stream for key 0):
 * false when `k` is another thread's per-thread default stream, which no handle names
 * here. */
static inline bool gp_streamkey_handle(gp_stream k, uintptr_t *h)
{
	if (k == 0) {
		*h = GP_STREAM_HANDLE_LEGACY;
		return true;
	}
	if (gp_streamkey_tag(k) == GP_STREAMKEY_PTDS) {
		*h = GP_STREAM_HANDLE_PER_THREAD;
		return k == gp_streamkey_ptds();
	}
	*h = (uintptr_t)k;
	return true;
}

#endif
