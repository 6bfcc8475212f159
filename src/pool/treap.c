/* The treap keyed by (size, addr) (treap.h): insert, erase, join. Top-down and without
 * recursion or allocation. Near the end of the pool's file order (docs/architecture.md):
 * depends on block.h only. */
#include "treap.h"

void gp_treap_insert(struct gp_block **link, struct gp_block *n)
{
	while (*link && (*link)->prio >= n->prio)
		link = gp_treap_less(n, *link) ? &(*link)->left : &(*link)->right;
	/* split the subtree at *link around n's key */
	struct gp_block *t = *link, **l = &n->left, **r = &n->right;
	while (t) {
		if (gp_treap_less(t, n)) {
			*l = t;
			l = &t->right;
			t = t->right;
		} else {
			*r = t;
			r = &t->left;
			t = t->left;
		}
	}
	*l = *r = NULL;
	*link = n;
}

struct gp_block *gp_treap_join(struct gp_block *a, struct gp_block *b)
{
	struct gp_block *root = NULL, **link = &root;
	while (a && b) {
		if (a->prio >= b->prio) {
			*link = a;
			link = &a->right;
			a = a->right;
		} else {
			*link = b;
			link = &b->left;
			b = b->left;
		}
	}
	*link = a ? a : b;
	return root;
}

void gp_treap_erase(struct gp_block **link, struct gp_block *n)
{
	while (*link != n) {
		GP_ASSERT(*link);
		link = gp_treap_less(n, *link) ? &(*link)->left : &(*link)->right;
	}
	*link = gp_treap_join(n->left, n->right);
}
