/* Segments: the size classes that decide a new segment's size, growing the pool by one
 * segment, the block structs' slab, and giving whole free segments back (release).
 * Depends on pool_internal.h, freelist.h and the backend; no allocation policy (pool.c)
 * and no fences (fence.c). All functions: pool lock held. */
#ifndef GP_SEGMENT_H
#define GP_SEGMENT_H

#include "pool_internal.h"

/* Bytes of the segment made for a request of `rounded` bytes: small_segment up to
 * small_max, medium_segment below medium_max, else the request rounded up to large_round. */
size_t gp_segment_size_for(const struct gp_pool_params *prm, size_t rounded);

/* Takes a new segment for a request of `rounded` bytes from the backend (within the
 * limit) and answers its one block, free and in no list; NULL when the limit, the backend
 * or host memory refuses. */
struct gp_block *gp_segment_grow(gp_pool *p, size_t rounded);

/* Puts a new segment s (its own fields set) at the head of the pool's list, counted in
 * segment_allocs and the segments gauge. */
void gp_segment_add(gp_pool *p, struct gp_segment *s);
/* Takes segment s out of the pool's list (given back: counted in segment_frees and the
 * segments gauge); the caller frees it. */
void gp_segment_unlink(gp_pool *p, struct gp_segment *s);

/* Releases whole free segments, largest first, until cached bytes <= keep. Returns the
 * bytes released. */
size_t gp_segment_release_locked(gp_pool *p, size_t keep);

/* Whole free segments handed back, largest first, until `want` bytes went, never below the
 * pool's floor (p->floor: reserved stays at least that). Bytes released. */
size_t gp_segment_give_locked(gp_pool *p, size_t want);
/* One pass of the decay, on clock time `now` (ns): a whole free segment no block was taken
 * from since the last pass starts its idle time; one idle for after_ns or more is given
 * back (0: none is), at most `budget` bytes of them this pass (so that a large cache goes
 * back gradually, not in one stall). Sets releasable_bytes (and *kept, unless NULL) to the
 * bytes of the whole free segments kept. Returns the bytes given back. */
size_t gp_segment_decay_locked(gp_pool *p, uint64_t now, uint64_t after_ns, size_t budget, size_t *kept);

/* Counts the whole free segments (what a release gives back now) into releasable_bytes,
 * as a decay pass does but changing no segment's idle time. Returns the count. */
size_t gp_segment_releasable_locked(gp_pool *p);

/* The segment holding addr, or NULL. A linear walk: error paths only. */
struct gp_segment *gp_segment_of(gp_pool *p, uintptr_t addr);
/* A segment that shares a byte with [addr, addr + size) (size 0: the byte at addr; a range
 * past the end of the address space ends there), or NULL. A linear walk: rare calls only. */
struct gp_segment *gp_segment_meeting(gp_pool *p, uintptr_t addr, size_t size);

/* A block struct from the spares (a new chunk of them when none is left), its links
 * cleared and a fresh treap priority drawn; NULL when host memory runs out. */
struct gp_block *gp_block_new(gp_pool *p);

#endif
