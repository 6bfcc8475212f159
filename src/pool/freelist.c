/* The free lists (freelist.h): per-stream lists in a uthash, insertion with merging, the
 * drain that fences and stream retirement build on, the largest-free-block gauge. No policy
 * (which block serves a request is pool.c's), no fences (fence.c), no backend calls.
 * Seventh in the pool's file order (docs/architecture.md): uses treap.c only, with
 * pool_internal.h. */
#include "freelist.h"

#include <stdlib.h>

struct gp_slist *gp_freelist_find(gp_pool *p, gp_stream s, enum gp_freelist_missing how)
{
	struct gp_slist *sl;
	HASH_FIND(hh, p->streams, &s, sizeof s, sl);
	if (!sl && how == GP_FREELIST_CREATE) {
		sl = calloc(1, sizeof *sl);
		if (!sl)
			return NULL;
		sl->stream = s;
		p->hash_oom = 0;
		HASH_ADD(hh, p->streams, stream, sizeof sl->stream, sl);
		if (p->hash_oom) {
			free(sl);
			return NULL;
		}
	}
	if (sl)
		p->last_sl = sl;
	return sl;
}

void gp_freelist_largest_recount(gp_pool *p)
{
	size_t m = 0;
	for (struct gp_slist *sl = &p->ready; sl; sl = gp_freelist_next(p, sl))
		for (int t = 0; t < 2; t++) {
			struct gp_block *x = gp_treap_max(sl->root[t]);
			if (x && x->size > m)
				m = x->size;
		}
	GP_GAUGE_SET(p->st, largest_free_block, m);
}

static inline void note_free_size(gp_pool *p, size_t size)
{
	if (size > p->st->largest_free_block)
		GP_GAUGE_SET(p->st, largest_free_block, size);
}

/* Free block a absorbs its address neighbour a->next (out of every tree); the merged
 * block is free from fences only as late as the later of the two. */
static inline void absorb_next(gp_pool *p, struct gp_block *a)
{
	struct gp_block *n = a->next;
	a->size += n->size;
	a->next = n->next;
	if (n->next)
		n->next->prev = a;
	if (n->gen > a->gen)
		a->gen = n->gen;
	gp_block_put(p, n);
	GP_COUNT(p->st, merges, 1);
	GP_GAUGE_SUB(p->st, free_blocks, 1);
}

void gp_freelist_insert(gp_pool *p, struct gp_block *b, struct gp_slist *sl)
{
	int t = gp_tree_of(b);
	b->list = sl;
	struct gp_block *n = b->prev;
	if (n && n->state == B_FREE && n->list == sl) {
		gp_treap_erase(&sl->root[t], n);
		absorb_next(p, n);
		b = n;
	}
	n = b->next;
	if (n && n->state == B_FREE && n->list == sl) {
		gp_treap_erase(&sl->root[t], n);
		absorb_next(p, b);
	}
	b->left = b->right = NULL;
	b->idle_since = 0; /* free as it is from now on (vmm.c's decay) */
	gp_treap_insert(&sl->root[t], b);
	note_free_size(p, b->size);
}

void gp_freelist_drain(gp_pool *p, struct gp_slist *sl,
		       void (*put)(gp_pool *, struct gp_slist *, struct gp_block *, uint64_t), uint64_t k)
{
	for (int t = 0; t < 2; t++) {
		struct gp_block *rest = sl->root[t];
		sl->root[t] = NULL;
		while (rest) {
			struct gp_block *b = rest;
			rest = gp_treap_join(b->left, b->right);
			b->left = b->right = NULL;
			put(p, sl, b, k);
		}
	}
}
