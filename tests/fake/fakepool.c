/* The fakes' memory pools (fakepool.h): the pools of each device, their chunks and
 * attributes. Included by fakecuda.c and fakecu.c (so each fake, and each program that
 * compiles one of them itself, gets its own static copy, no build change); guarded by the
 * including fake's lock. Depends on nothing of the fakes but the hooks fakepool.h names. */
#include "fakepool.h"

#include <stdlib.h>
#include <string.h>

#define FP_MAGIC 0x504f4f4cu /* "POOL" */

static struct {
	struct fp_pool dflt[FP_MAXDEV];
	struct fp_pool *cur[FP_MAXDEV]; /* set as current; NULL: the default */
	struct fp_pool *made;           /* pools the program made (dead ones too) */
	int ndev;
} g_fp;

FP_FN void fp_init(int ndev)
{
	g_fp.ndev = ndev;
	for (int d = 0; d < FP_MAXDEV; d++)
		g_fp.dflt[d] = (struct fp_pool){ .magic = FP_MAGIC, .device = d, .dflt = true };
}

FP_FN struct fp_pool *fp_find(const void *handle)
{
	for (int d = 0; d < g_fp.ndev; d++)
		if (handle == &g_fp.dflt[d])
			return &g_fp.dflt[d];
	for (struct fp_pool *q = g_fp.made; q; q = q->next)
		if (handle == q && !q->dead)
			return q;
	return NULL;
}

/* Gives reserved chunks nobody holds back to the device until at most `keep` bytes stay. */
static void fp_trim(struct fp_pool *p, size_t keep)
{
	while (p->free && p->reserved > keep) {
		struct fp_chunk *c = p->free;
		p->free = c->next;
		p->reserved -= c->bytes;
		fp_give(p->device, c->bytes);
		fp_mem_put(p->device, c->mem);
		free(c);
	}
}

/* A destroyed pool goes once its last allocation is freed. */
static void fp_reap(struct fp_pool *p)
{
	if (!p->dead || p->used)
		return;
	fp_trim(p, 0);
	for (struct fp_pool **pp = &g_fp.made; *pp; pp = &(*pp)->next)
		if (*pp == p) {
			*pp = p->next;
			p->magic = 0;
			free(p);
			return;
		}
}

FP_FN enum fp_err fp_create(int device, struct fp_pool **out)
{
	if (device < 0 || device >= g_fp.ndev)
		return FP_EDEVICE;
	struct fp_pool *p = calloc(1, sizeof *p);
	if (!p)
		return FP_ENOMEM;
	p->magic = FP_MAGIC;
	p->device = device;
	p->next = g_fp.made;
	g_fp.made = p;
	*out = p;
	return FP_OK;
}

FP_FN enum fp_err fp_destroy(const void *handle)
{
	struct fp_pool *p = fp_find(handle);
	if (!p || p->dflt)
		return FP_EVALUE;
	if (g_fp.cur[p->device] == p)
		g_fp.cur[p->device] = NULL;
	p->dead = true;
	fp_trim(p, 0);
	fp_reap(p);
	return FP_OK;
}

FP_FN enum fp_err fp_device_pool(int device, bool current, struct fp_pool **out)
{
	if (device < 0 || device >= g_fp.ndev)
		return FP_EDEVICE;
	*out = current && g_fp.cur[device] ? g_fp.cur[device] : &g_fp.dflt[device];
	return FP_OK;
}

FP_FN enum fp_err fp_set_device_pool(int device, const void *handle)
{
	if (device < 0 || device >= g_fp.ndev)
		return FP_EDEVICE;
	struct fp_pool *p = fp_find(handle);
	if (!p)
		return FP_EVALUE;
	if (p->device != device)
		return FP_EDEVICE;
	g_fp.cur[device] = p->dflt ? NULL : p;
	return FP_OK;
}

FP_FN enum fp_err fp_alloc(const void *handle, size_t size, char **out)
{
	struct fp_pool *p = fp_find(handle);
	if (!p)
		return FP_EVALUE;
	if (size > SIZE_MAX - FP_CHUNK)
		return FP_ENOMEM;
	size_t bytes = (size + FP_ALIGN - 1) & ~(size_t)(FP_ALIGN - 1);
	size_t want = (size + FP_CHUNK - 1) & ~(FP_CHUNK - 1);
	struct fp_chunk **best = NULL;
	for (struct fp_chunk **cc = &p->free; *cc; cc = &(*cc)->next)
		if ((*cc)->bytes >= want && (!best || (*cc)->bytes < (*best)->bytes))
			best = cc;
	struct fp_chunk *c;
	if (best) {
		c = *best;
		*best = c->next;
	} else {
		if (!fp_take(p->device, want)) {
			fp_trim(p, 0);
			if (!fp_take(p->device, want))
				return FP_ENOMEM;
		}
		c = malloc(sizeof *c);
		char *m = c ? fp_mem_get(p->device, want) : NULL;
		if (!m) {
			free(c);
			fp_give(p->device, want);
			return FP_ENOMEM;
		}
		*c = (struct fp_chunk){ NULL, m, want };
		p->reserved += want;
		if (p->reserved > p->reserved_high)
			p->reserved_high = p->reserved;
	}
	if (!fp_track(p, c->mem, bytes, size, c->bytes)) {
		c->next = p->free;
		p->free = c;
		return FP_ENOMEM;
	}
	*out = c->mem;
	free(c); /* the fake's record now stands for the chunk */
	p->used += bytes;
	if (p->used > p->used_high)
		p->used_high = p->used;
	return FP_OK;
}

FP_FN void fp_free(struct fp_pool *p, char *mem, size_t bytes, size_t chunk)
{
	struct fp_chunk *c = malloc(sizeof *c);
	p->used -= bytes;
	if (c) { /* back to its pool, still reserved */
		*c = (struct fp_chunk){ p->free, mem, chunk };
		p->free = c;
	} else { /* no memory for the record: the chunk goes back to the device */
		p->reserved -= chunk;
		fp_give(p->device, chunk);
		fp_mem_put(p->device, mem);
	}
	fp_reap(p);
}

FP_FN enum fp_err fp_get(const void *handle, enum fp_attr attr, void *value)
{
	struct fp_pool *p = value ? fp_find(handle) : NULL;
	uint64_t *v = value;
	if (!p)
		return FP_EVALUE;
	if (attr >= FP_REUSE_FOLLOW_EVENT_DEPENDENCIES && attr <= FP_REUSE_ALLOW_INTERNAL_DEPENDENCIES)
		*(int *)value = p->reuse[attr - FP_REUSE_FOLLOW_EVENT_DEPENDENCIES];
	else if (attr == FP_RELEASE_THRESHOLD)
		*v = p->threshold;
	else if (attr == FP_RESERVED_MEM_CURRENT)
		*v = p->reserved;
	else if (attr == FP_RESERVED_MEM_HIGH)
		*v = p->reserved_high;
	else if (attr == FP_USED_MEM_CURRENT)
		*v = p->used;
	else if (attr == FP_USED_MEM_HIGH)
		*v = p->used_high;
	else
		return FP_EVALUE;
	return FP_OK;
}

FP_FN enum fp_err fp_set(const void *handle, enum fp_attr attr, const void *value)
{
	struct fp_pool *p = value ? fp_find(handle) : NULL;
	uint64_t v = 0;
	if (!p)
		return FP_EVALUE;
	if (attr == FP_RELEASE_THRESHOLD || attr == FP_RESERVED_MEM_HIGH || attr == FP_USED_MEM_HIGH)
		memcpy(&v, value, sizeof v); /* these three are 64-bit */
	if (attr >= FP_REUSE_FOLLOW_EVENT_DEPENDENCIES && attr <= FP_REUSE_ALLOW_INTERNAL_DEPENDENCIES)
		p->reuse[attr - FP_REUSE_FOLLOW_EVENT_DEPENDENCIES] = *(const int *)value != 0;
	else if (attr == FP_RELEASE_THRESHOLD)
		p->threshold = v;
	else if (attr == FP_RESERVED_MEM_HIGH && v == 0)
		p->reserved_high = p->reserved;
	else if (attr == FP_USED_MEM_HIGH && v == 0)
		p->used_high = p->used;
	else
		return FP_EVALUE;
	return FP_OK;
}

FP_FN enum fp_err fp_trim_to(const void *handle, size_t keep)
{
	struct fp_pool *p = fp_find(handle);
	if (!p)
		return FP_EVALUE;
	fp_trim(p, keep);
	return FP_OK;
}

FP_FN void fp_settle(int device)
{
	struct fp_pool *p = &g_fp.dflt[device];
	if (p->threshold < p->reserved)
		fp_trim(p, (size_t)p->threshold);
	for (p = g_fp.made; p; p = p->next)
		if (p->device == device && p->threshold < p->reserved)
			fp_trim(p, (size_t)p->threshold);
}

FP_FN void fp_reset(int device)
{
	fp_trim(&g_fp.dflt[device], 0);
	for (struct fp_pool *p = g_fp.made, *next; p; p = next) {
		next = p->next; /* a destroyed pool may go here */
		if (p->device == device) {
			fp_trim(p, 0);
			fp_reap(p);
		}
	}
}

FP_FN void fp_fini(void)
{
	for (int d = 0; d < FP_MAXDEV; d++)
		fp_trim(&g_fp.dflt[d], 0);
	while (g_fp.made) {
		struct fp_pool *p = g_fp.made;
		g_fp.made = p->next;
		fp_trim(p, 0);
		free(p);
	}
}
