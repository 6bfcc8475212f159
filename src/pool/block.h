/* struct gp_block: one address range of a segment, with the links that the treap
 * (treap.h), the address map (addrmap.h) and the pool's lists thread it on, and the
 * assertion macro the pool's files share. Depends on nothing of gpupool's: the treap and
 * the address map build on this header alone. */
#ifndef GP_BLOCK_H
#define GP_BLOCK_H

#include <stddef.h>
#include <stdint.h>

#ifdef GP_INVARIANTS
#include <assert.h>
#define GP_ASSERT(x) assert(x)
#else
#define GP_ASSERT(x) ((void)0)
#endif

/* gp_block.state. B_HOLE: address space of a virtual-memory segment with nothing mapped in
 * it (vmm.c), in the pool's holes list, never handed out as it is. */
enum { B_FREE = 0, B_LIVE = 1, B_PENDING = 2, B_HOLE = 3 };

struct gp_slist;
struct gp_segment;

struct gp_block {
	uintptr_t addr;
	size_t size;               /* bytes */
	size_t requested;          /* live blocks: bytes asked for */
	struct gp_segment *seg;
	struct gp_block *prev, *next;   /* address neighbours in the segment */
	struct gp_block *left, *right;  /* free blocks: children in their list's treap */
	struct gp_block *pend_next;     /* pending blocks: the next newer one (fence.c) */
	struct gp_slist *list;     /* free blocks: the list holding them */
	uint64_t gen;              /* fence generation current when freed */
	uint64_t idle_since;       /* free blocks of virtual-memory segments: the decay pass that first
				    * found the block free as it is; 0: not yet (vmm.c) */
	uint32_t prio;             /* treap priority */
	uint8_t state;
	struct gp_block *hnext;    /* live blocks: chain in the address map */
};

#endif
