/* Look-ups in the table of gpupool's driver entry points (entries.h). Owns no state; depends
 * on libcuda.h only. */
#include "entries.h"

#include <string.h>

static void *ours(const struct gp_entry *e)
{
	void *p;
	memcpy(&p, &e->ours, sizeof p);
	return p;
}

static void *real(const struct gp_driver *d, const struct gp_entry *e)
{
	void *p;
	memcpy(&p, (const char *)d + e->real_off, sizeof p);
	return p;
}

void *gp_entries_by_name(const struct gp_entries *t, const struct gp_driver *d, const char *name)
{
	for (size_t i = 0; i < t->n; i++)
		if (strcmp(t->rows[i].name, name) == 0)
			return !d || real(d, &t->rows[i]) ? ours(&t->rows[i]) : NULL;
	return NULL;
}

void *gp_entries_for_real(const struct gp_entries *t, const struct gp_driver *d, const void *r)
{
	if (!d || !r)
		return NULL;
	for (size_t i = 0; i < t->n; i++)
		if (real(d, &t->rows[i]) == r)
			return ours(&t->rows[i]);
	return NULL;
}
