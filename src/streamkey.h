/* Stream keys that are not stream handles: the one encoding of the synthetic keys gpupool
 * makes for per-thread default streams, shared by the CUDA backend and the trace replay.
 * Depends on backend.h (gp_stream) only: no CUDA headers, so the CUDA-free core can use it. */
#ifndef GP_STREAMKEY_H
#define GP_STREAMKEY_H

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

#endif
