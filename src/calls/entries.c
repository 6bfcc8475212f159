/* Look-ups in the table of gpupool's driver entry points (entries.h): by name, by the real
 * entry point's address, and in place of a driver's answer to a look-up by base name and
 * version. Owns no state; depends on libcuda.h only. */
#include "entries.h"

#include <stdio.h>
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

/* gpupool's entry point for `symbol` as the driver resolves it for `version` and the stream
 * variant, or NULL when it is not an interposed one. The versions at which each name gained
 * its _v2 (cuda.h). */
static void *by_version(const struct gp_entries *t, const struct gp_driver *d, const char *symbol, int version,
			bool per_thread)
{
	static const struct {
		const char *name;
		int v2_since;
	} versioned[] = {
		{"cuMemAlloc", 3020},      {"cuMemFree", 3020},     {"cuMemGetInfo", 3020},
		{"cuMemGetAddressRange", 3020}, {"cuStreamDestroy", 4000}, {"cuCtxDestroy", 4000},
		{"cuStreamBeginCapture", 10010}, {"cuDevicePrimaryCtxReset", 11000}, {"cuGetProcAddress", 12000},
		{"cuMemAllocPitch", 3020},
	};
	char name[96];
	const char *v2 = "";
	for (size_t i = 0; i < sizeof versioned / sizeof versioned[0]; i++)
		if (!strcmp(symbol, versioned[i].name) && version >= versioned[i].v2_since)
			v2 = "_v2";
	void *p = NULL;
	if (per_thread && (size_t)snprintf(name, sizeof name, "%s%s_ptsz", symbol, v2) < sizeof name)
		p = gp_entries_by_name(t, d, name);
	if (!p && (size_t)snprintf(name, sizeof name, "%s%s", symbol, v2) < sizeof name)
		p = gp_entries_by_name(t, d, name);
	/* a driver without the _v2 (a CUDA 11 driver has no cuGetProcAddress_v2) gave its one
	 * version */
	if (!p && *v2 && (size_t)snprintf(name, sizeof name, "%s", symbol) < sizeof name)
		p = gp_entries_by_name(t, d, name);
	return p;
}

void *gp_entries_for_answer(const struct gp_entries *t, const struct gp_driver *d, const char *symbol,
			    const void *answer, int version, bool per_thread)
{
	if (!d || !answer || !symbol)
		return NULL;
	void *p = gp_entries_for_real(t, d, answer);
	return p ? p : by_version(t, d, symbol, version, per_thread);
}
