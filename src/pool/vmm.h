/* Virtual-memory segments: a reserved address range with physical chunks (of the backend's
 * granularity) mapped where blocks need them, grown by mapping chunks, and free chunks (the
 * middle of a segment too) unmapped by release and decay. Also the one place release and
 * decay are asked for, whole segments and chunks alike. Depends on pool_internal.h,
 * segment.h, freelist.h and the backend's vmm_* calls; no allocation policy (pool.c). All
 * functions: pool lock held. */
#ifndef GP_VMM_H
#define GP_VMM_H

#include "pool_internal.h"

/* At pool creation: turns virtual-memory segments on (p->gran, p->va_size) where the
 * parameters ask for them and the backend and the device have them; else leaves whole
 * segments. */
void gp_vmm_setup(gp_pool *p);

/* A block of at least `rounded` bytes with memory mapped behind it, free and in no list,
 * for a request on `stream`: from a hole (a free block of `stream`'s list or the ready list
 * just before it is taken in too, so that fewer chunks are mapped), from the tail of a
 * segment, or from a segment reserved now. NULL when the limit, the backend or host memory
 * refuses (what a failed map left mapped stays, free, in the ready list). */
struct gp_block *gp_vmm_grow(gp_pool *p, size_t rounded, gp_stream stream);

/* For another process (gp_pool_give): whole free segments, then free chunks anywhere, until
 * `want` bytes went, never below the pool's floor. Bytes released. */
size_t gp_vmm_give_locked(gp_pool *p, size_t want);
/* Hands cached memory back until cached bytes <= keep: whole free segments first, largest
 * first (segment.c), then free chunks of virtual-memory segments, those that need no wait
 * for the device first. Returns the bytes given back. */
size_t gp_vmm_release_locked(gp_pool *p, size_t keep);

/* Before the pool grows past its peak by `over` bytes: gives that many back from free chunks
 * elsewhere, where the time moving them takes fits the pool's credit for it and the free
 * chunks cover all of `over` (vmm.c); else nothing, and the pool grows. Returns the bytes
 * given back. */
size_t gp_vmm_release_for_peak(gp_pool *p, size_t over);

/* The decay (pool.h gp_pool_decay) of whole segments (segment.c) and of chunks: a range of
 * free chunks whose blocks all sat free and unchanged since a pass after_ns ago or more is
 * unmapped, within `budget` bytes per pass. Sets releasable_bytes (and *kept unless NULL)
 * to what could still go back. Returns the bytes given back. */
size_t gp_vmm_decay_locked(gp_pool *p, uint64_t now, uint64_t after_ns, size_t budget, size_t *kept);

/* Gives a virtual-memory segment's chunks and reservation back (gp_pool_destroy). */
void gp_vmm_segment_destroy(gp_pool *p, struct gp_segment *s);

#endif
