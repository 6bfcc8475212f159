/* The address map's slow paths (addrmap.h): setup, growth, recount. Last of the pool's
 * files with pool state (docs/architecture.md): depends on block.h only. */
#include "addrmap.h"

#include <errno.h>
#include <stdlib.h>

int gp_addrmap_init(struct gp_addrmap *m, size_t buckets)
{
	m->bucket = calloc(buckets, sizeof *m->bucket);
	if (!m->bucket)
		return -ENOMEM;
	m->mask = buckets - 1;
	m->count = 0;
	return 0;
}

void gp_addrmap_fini(struct gp_addrmap *m)
{
	free(m->bucket);
	m->bucket = NULL;
}

void gp_addrmap_grow(struct gp_addrmap *m)
{
	size_t n = (m->mask + 1) * 2;
	struct gp_block **nb = calloc(n, sizeof *nb);
	if (!nb)
		return;
	size_t old = m->mask + 1;
	struct gp_block **ob = m->bucket;
	m->bucket = nb;
	m->mask = n - 1;
	for (size_t i = 0; i < old; i++)
		for (struct gp_block *b = ob[i], *nx; b; b = nx) {
			nx = b->hnext;
			size_t k = gp_addrmap_slot(m, b->addr);
			b->hnext = nb[k];
			nb[k] = b;
		}
	free(ob);
}

size_t gp_addrmap_recount(const struct gp_addrmap *m)
{
	size_t n = 0;
	for (size_t i = 0; i <= m->mask; i++)
		for (const struct gp_block *b = m->bucket[i]; b; b = b->hnext)
			n++;
	return n;
}
