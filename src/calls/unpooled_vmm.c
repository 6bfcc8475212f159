/* Physical memory of the driver's virtual memory API (unpooled.h, "virtual memory"): each
 * cuMemCreate allocation counted until it is really gone, which is when its last handle
 * reference is released and its last mapping unmapped, whichever comes last. Two uthash
 * tables (live handles, mappings by address) under one mutex, a leaf never held across a CUDA
 * call. Depends on unpooled.c for the budget's give and the page; must not depend on the
 * hook bodies. */
#define HASH_NONFATAL_OOM 1
#include "unpooled.h"

#include <pthread.h>
#include <stdlib.h>

#include "log.h"
#include "rank.h"

static int table_oom;
#define uthash_nonfatal_oom(e) (table_oom = 1)
#include <uthash.h>

/* One physical allocation. It is gone, and its bytes go back, once refs, maps and busy are
 * all zero: no handle reference left (cuMemCreate and each cuMemRetainAllocationHandle add
 * one, each cuMemRelease takes one), no mapping, and no call on it in flight. */
struct gp_vmm_alloc {
	struct gp_unpooled_rec rec; /* key: the handle (the same value every retain hands out) */
	unsigned refs, maps, busy;
	bool in_handles;            /* in `handles`: refs > 0 */
	bool exported;              /* gp_unpooled_vmm_pin_end of a call that succeeded: held where
				     * gpupool cannot follow (an importer, a sparse array), so never
				     * gone while the process lives */
	struct gp_vmm_alloc *next_pinned; /* `pinned`'s link, once exported */
	UT_hash_handle hh;
};

/* One mapping of an allocation (cuMemMap), by its address. */
struct gp_vmm_map {
	uintptr_t va;
	size_t size;
	struct gp_vmm_alloc *a;
	bool in_table;              /* in `maps` (an unmap in flight may hold it out) */
	bool unmapping;             /* an unmap of it is in flight */
	struct gp_vmm_map *next_op; /* the unmap's own list */
	UT_hash_handle hh;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct gp_vmm_alloc *handles; /* under lock */
static struct gp_vmm_map *maps;      /* under lock */
static struct gp_vmm_alloc *pinned;  /* under lock: the exported ones, kept for the process's life */

static void table_lock(void) { gp_mutex_lock(&lock, GP_RANK_UNPOOLED); }
static void table_unlock(void) { gp_mutex_unlock(&lock, GP_RANK_UNPOOLED); }

/* Under the lock: true when `a` is gone now (the caller gives its bytes back and frees it,
 * after the unlock: gone_give). */
static bool gone(const struct gp_vmm_alloc *a) { return !a->refs && !a->maps && !a->busy && !a->exported; }

static void gone_give(struct gp_vmm_alloc *a)
{
	gp_unpooled_freed(&a->rec, NULL);
	free(a);
}

static struct gp_vmm_alloc *handle_find(uint64_t handle)
{
	struct gp_vmm_alloc *a = NULL;
	HASH_FIND(hh, handles, &handle, sizeof handle, a);
	return a;
}

/* Into `handles`; false when the table could not grow (no host memory). */
static bool handle_add(struct gp_vmm_alloc *a)
{
	table_oom = 0;
	HASH_ADD(hh, handles, rec.key, sizeof a->rec.key, a);
	a->in_handles = !table_oom;
	return a->in_handles;
}

static void handle_del(struct gp_vmm_alloc *a)
{
	if (a->in_handles)
		HASH_DEL(handles, a);
	a->in_handles = false;
}

bool gp_unpooled_vmm_created(const struct gp_unpooled_rec *rec)
{
	struct gp_vmm_alloc *a = calloc(1, sizeof *a);
	bool ok = a != NULL;
	struct gp_vmm_alloc *old = NULL;
	if (a) {
		a->rec = *rec;
		a->refs = 1;
		table_lock();
		/* a handle value still recorded: released behind gpupool's back (not through a hook) */
		old = handle_find(rec->key);
		if (old) {
			handle_del(old);
			old->refs = 0;
			if (!gone(old))
				old = NULL; /* still mapped: it goes with its last unmap */
		}
		ok = handle_add(a);
		table_unlock();
	}
	if (old) {
		gp_log(GP_LOG_WARN, "device %d: handle 0x%llx recorded twice (released outside gpupool's view?); counting "
				    "the new one", old->rec.dev, (unsigned long long)old->rec.key);
		gone_give(old);
	}
	if (!ok) {
		gp_log(GP_LOG_WARN, "out of host memory recording a cuMemCreate handle: its %zu bytes are not counted",
		       rec->bytes);
		gp_budget_give(rec->dev, rec->bytes, rec->kind);
		free(a);
	}
	return ok;
}

struct gp_vmm_alloc *gp_unpooled_vmm_release_begin(uint64_t handle)
{
	table_lock();
	struct gp_vmm_alloc *a = handle_find(handle);
	if (a) {
		/* the handle value leaves the table with its last reference: the driver may hand
		 * it out again the moment it is released */
		if (--a->refs == 0)
			handle_del(a);
		a->busy++;
	}
	table_unlock();
	return a;
}

void gp_unpooled_vmm_release_end(struct gp_vmm_alloc *a, bool ok)
{
	if (!a)
		return;
	table_lock();
	a->busy--;
	if (!ok && a->refs++ == 0 && !handle_find(a->rec.key) && !handle_add(a))
		a->refs = 0; /* no host memory to keep the reference: counted until its mappings go */
	bool g = gone(a);
	table_unlock();
	if (g)
		gone_give(a);
}

struct gp_vmm_map *gp_unpooled_vmm_map_begin(uint64_t handle, bool *ours)
{
	*ours = false;
	struct gp_vmm_map *m = calloc(1, sizeof *m);
	table_lock();
	struct gp_vmm_alloc *a = handle_find(handle);
	if (a) {
		*ours = true;
		if (m) { /* pinned: a release racing with this map cannot give it back meanwhile */
			m->a = a;
			a->busy++;
		}
	}
	table_unlock();
	if (!a || !m) {
		free(m);
		return NULL; /* not gpupool's; or *ours with no host memory for the record */
	}
	return m;
}

void gp_unpooled_vmm_map_end(struct gp_vmm_map *m, uintptr_t va, size_t size, bool ok)
{
	if (!m)
		return;
	struct gp_vmm_alloc *a = m->a;
	struct gp_vmm_map *old = NULL;
	table_lock();
	a->busy--;
	if (ok) {
		a->maps++;
		m->va = va;
		m->size = size;
		/* an old record of the same address: its unmap is still in flight (the driver
		 * has unmapped it, or this map would have failed); it leaves the table to it */
		HASH_FIND(hh, maps, &va, sizeof va, old);
		if (old) {
			HASH_DEL(maps, old);
			old->in_table = false;
		}
		table_oom = 0;
		HASH_ADD(hh, maps, va, sizeof m->va, m);
		/* no host memory for the table: the mapping stays counted until the process ends */
		m->in_table = !table_oom;
		if (old && !old->unmapping)
			old->a->maps--; /* unmapped behind gpupool's back: the record goes */
		else
			old = NULL;     /* the unmap in flight frees it */
	}
	bool g = gone(a);
	struct gp_vmm_alloc *og = old && gone(old->a) ? old->a : NULL;
	table_unlock();
	if (!ok)
		free(m);
	if (g)
		gone_give(a);
	if (old)
		free(old);
	if (og)
		gone_give(og);
}

/* The record of the mapping holding `addr`, or NULL (under the lock). */
static struct gp_vmm_map *map_at(uintptr_t addr)
{
	struct gp_vmm_map *m = NULL, *tmp;
	HASH_FIND(hh, maps, &addr, sizeof addr, m);
	if (m)
		return m;
	HASH_ITER(hh, maps, m, tmp)
		if (addr >= m->va && addr - m->va < m->size)
			return m;
	return NULL;
}

struct gp_vmm_map *gp_unpooled_vmm_unmap_begin(uintptr_t va, size_t size)
{
	struct gp_vmm_map *list = NULL, *m, *tmp;
	table_lock();
	if (HASH_COUNT(maps)) {
		/* the common case, one whole mapping, found by its address; else every mapping in
		 * the range (cuMemUnmap takes whole mappings only) */
		HASH_FIND(hh, maps, &va, sizeof va, m);
		if (m && m->size == size) {
			if (!m->unmapping) {
				m->unmapping = true;
				m->a->busy++;
				m->next_op = NULL;
				list = m;
			}
		} else {
			HASH_ITER(hh, maps, m, tmp) {
				if (m->unmapping || m->va < va || m->va - va >= size || m->size > size - (m->va - va))
					continue;
				m->unmapping = true;
				m->a->busy++;
				m->next_op = list;
				list = m;
			}
		}
	}
	table_unlock();
	return list;
}

void gp_unpooled_vmm_unmap_end(struct gp_vmm_map *list, bool ok)
{
	struct gp_vmm_alloc *gone_list[16];
	while (list) {
		/* in batches: the allocations gone are given back with the lock dropped */
		unsigned n = 0;
		struct gp_vmm_map *done = NULL;
		table_lock();
		while (list && n < sizeof gone_list / sizeof gone_list[0]) {
			struct gp_vmm_map *m = list;
			list = m->next_op;
			struct gp_vmm_alloc *a = m->a;
			a->busy--;
			m->unmapping = false;
			if (ok) {
				a->maps--;
				if (m->in_table)
					HASH_DEL(maps, m);
				m->next_op = done;
				done = m;
			}
			if (gone(a))
				gone_list[n++] = a;
		}
		table_unlock();
		while (done) {
			struct gp_vmm_map *m = done;
			done = m->next_op;
			free(m);
		}
		for (unsigned i = 0; i < n; i++)
			gone_give(gone_list[i]);
	}
}

struct gp_vmm_alloc *gp_unpooled_vmm_retain_begin(uintptr_t addr)
{
	table_lock();
	struct gp_vmm_map *m = map_at(addr);
	struct gp_vmm_alloc *a = m ? m->a : NULL;
	if (a)
		a->busy++; /* an unmap racing with the retain cannot give it back meanwhile */
	table_unlock();
	return a;
}

void gp_unpooled_vmm_retain_end(struct gp_vmm_alloc *a, uint64_t handle, bool ok)
{
	if (!a)
		return;
	table_lock();
	a->busy--;
	/* the driver hands out the handle used to map the memory: one reference more of it */
	if (ok && handle == a->rec.key && a->refs++ == 0 && !handle_find(handle) && !handle_add(a))
		a->refs = 0;
	bool g = gone(a);
	table_unlock();
	if (g)
		gone_give(a);
}

struct gp_vmm_alloc *gp_unpooled_vmm_pin_begin(uint64_t handle)
{
	table_lock();
	struct gp_vmm_alloc *a = handle_find(handle);
	if (a)
		a->busy++; /* a release and unmap racing with the call cannot give it back meanwhile */
	table_unlock();
	return a;
}

void gp_unpooled_vmm_pin_end(struct gp_vmm_alloc *a, bool ok)
{
	if (!a)
		return;
	table_lock();
	a->busy--;
	if (ok && !a->exported) {
		a->exported = true;
		a->next_pinned = pinned;
		pinned = a;
	}
	bool g = gone(a);
	table_unlock();
	if (g)
		gone_give(a);
}

void gp_unpooled_vmm_after_fork(void)
{
	/* the parent's records: left allocated (a thread that is not here may have held the
	 * lock while changing them), forgotten */
	pthread_mutex_init(&lock, NULL);
	handles = NULL;
	maps = NULL;
	pinned = NULL;
}
