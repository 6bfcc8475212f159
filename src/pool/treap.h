/* A treap of blocks keyed by (size, addr): the size-ordered free trees best fit searches.
 * Max-heap on gp_block.prio (random, set by whoever makes the block), in-order by
 * ascending size, ties by ascending address. Links through gp_block.left/right only.
 * Depends on block.h only; not thread-safe (the caller holds the pool lock). */
#ifndef GP_TREAP_H
#define GP_TREAP_H

#include "block.h"

/* The treap's order: a before b. */
static inline int gp_treap_less(const struct gp_block *a, const struct gp_block *b)
{
	return a->size < b->size || (a->size == b->size && a->addr < b->addr);
}

/* Inserts n (its key and prio set, not in any treap) under *root. */
void gp_treap_insert(struct gp_block **root, struct gp_block *n);
/* Removes n, which must be in the treap under *root. n's own links are left stale. */
void gp_treap_erase(struct gp_block **root, struct gp_block *n);
/* One treap of every block of a and of b, where every key in a is less than every key in
 * b. */
struct gp_block *gp_treap_join(struct gp_block *a, struct gp_block *b);

/* The least block with size >= size (ties: lowest address), or NULL. */
static inline struct gp_block *gp_treap_lower_bound(struct gp_block *t, size_t size)
{
	struct gp_block *best = NULL;
	while (t) {
		if (t->size >= size) {
			best = t;
			t = t->left;
		} else {
			t = t->right;
		}
	}
	return best;
}

/* The greatest block, or NULL for an empty treap. */
static inline struct gp_block *gp_treap_max(struct gp_block *t)
{
	if (t)
		while (t->right)
			t = t->right;
	return t;
}

#endif
