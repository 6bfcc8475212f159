/* The address map: live blocks by address, chained (through gp_block.hnext) in a
 * power-of-two bucket array that doubles when it is as full as it is long. Depends on
 * block.h only; not thread-safe (the caller holds the pool lock). Chosen over uthash for
 * the hot path: a third of the instructions per alloc+free pair, and no failure mode. */
#ifndef GP_ADDRMAP_H
#define GP_ADDRMAP_H

#include <stddef.h>
#include <stdint.h>

#include "block.h"

struct gp_addrmap {
	struct gp_block **bucket;  /* mask + 1 chains */
	size_t mask;               /* buckets - 1; buckets is a power of two */
	size_t count;              /* blocks in the map */
};

/* What gp_addrmap_find does with the block it finds. */
enum gp_addrmap_found {
	GP_MAP_KEEP,    /* leaves it in the map */
	GP_MAP_UNLINK,  /* removes it */
};

/* An empty map of `buckets` (a power of two) chains. 0 or -ENOMEM. */
int gp_addrmap_init(struct gp_addrmap *m, size_t buckets);
/* Frees the bucket array (not the blocks). */
void gp_addrmap_fini(struct gp_addrmap *m);
/* Doubles the bucket array; keeps the old one when host memory runs out (chains then
 * lengthen: lookups slow down, nothing fails). */
void gp_addrmap_grow(struct gp_addrmap *m);
/* Blocks reachable from the buckets (a recount of m->count, for checkers). */
size_t gp_addrmap_recount(const struct gp_addrmap *m);

/* Blocks start on 512-byte boundaries: the low 9 bits carry nothing. */
static inline size_t gp_addrmap_slot(const struct gp_addrmap *m, uintptr_t a)
{
	return (size_t)(((uint64_t)a >> 9) * 0x9E3779B97F4A7C15ull >> 40) & m->mask;
}

/* Adds b (not in the map; no other block at b->addr). */
static inline void gp_addrmap_add(struct gp_addrmap *m, struct gp_block *b)
{
	if (++m->count > m->mask + 1)
		gp_addrmap_grow(m);
	size_t k = gp_addrmap_slot(m, b->addr);
	b->hnext = m->bucket[k];
	m->bucket[k] = b;
}

/* The block at exactly `a`, or NULL; with GP_MAP_UNLINK it also leaves the map. */
static inline struct gp_block *gp_addrmap_find(struct gp_addrmap *m, uintptr_t a, enum gp_addrmap_found what)
{
	struct gp_block **link = &m->bucket[gp_addrmap_slot(m, a)];
	for (struct gp_block *b = *link; b; link = &b->hnext, b = b->hnext)
		if (b->addr == a) {
			if (what == GP_MAP_UNLINK) {
				*link = b->hnext;
				m->count--;
			}
			return b;
		}
	return NULL;
}

#endif
