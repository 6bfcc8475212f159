/* The free lists: the ready list (blocks anyone may reuse) and one list per stream
 * (blocks freed on that stream), each two size-class treaps. Inserting merges a block
 * with its free neighbours of the same list; the largest-free-block gauge follows.
 * Depends on pool_internal.h and treap.h; knows nothing of fences or segments' lifetime. */
#ifndef GP_FREELIST_H
#define GP_FREELIST_H

#include "pool_internal.h"
#include "treap.h"

/* What gp_freelist_get does when the stream has no list yet. */
enum gp_freelist_missing {
	GP_FREELIST_EXISTING, /* answers NULL */
	GP_FREELIST_CREATE,   /* makes one (NULL only when host memory runs out) */
};

/* The uthash lookup (and creation) behind gp_freelist_get. */
struct gp_slist *gp_freelist_find(gp_pool *p, gp_stream s, enum gp_freelist_missing how);

/* The free lists of stream s (the ready list for GP_NO_STREAM). The last stream looked
 * up is cached. */
static inline struct gp_slist *gp_freelist_get(gp_pool *p, gp_stream s, enum gp_freelist_missing how)
{
	if (s == GP_NO_STREAM)
		return &p->ready;
	if (__builtin_expect(p->last_sl && p->last_sl->stream == s, 1))
		return p->last_sl;
	return gp_freelist_find(p, s, how);
}

/* Every free list of the pool, the ready list first:
 * for (sl = &p->ready; sl; sl = gp_freelist_next(p, sl)) */
static inline struct gp_slist *gp_freelist_next(const gp_pool *p, const struct gp_slist *sl)
{
	return sl == &p->ready ? p->streams : sl->hh.next;
}

/* Takes free block b out of its tree in sl (the caller then owns it). */
static inline void gp_freelist_take(struct gp_slist *sl, struct gp_block *b)
{
	gp_treap_erase(&sl->root[gp_tree_of(b)], b);
	b->left = b->right = NULL;
}

/* Puts a free block into `sl`, merging with free neighbours of the same list. The
 * block's state must already be B_FREE and it must not be in any tree. */
void gp_freelist_insert(gp_pool *p, struct gp_block *b, struct gp_slist *sl);

/* Empties sl's trees, handing each block (out of every tree) to `put`, which may insert
 * it into sl again; `k` is passed through. */
void gp_freelist_drain(gp_pool *p, struct gp_slist *sl,
		       void (*put)(gp_pool *, struct gp_slist *, struct gp_block *, uint64_t), uint64_t k);

/* Sets the largest_free_block gauge from the trees (after blocks left them). */
void gp_freelist_largest_recount(gp_pool *p);

#endif
