/* Memory the process holds outside the pools, counted against the same limit (budget.h):
 * what each unpooled allocation is (the physical allocations of the virtual memory API and
 * their mappings: unpooled_vmm.c; a table of pointers from managed, pitched and program-pool
 * allocations, one of the memory pools the program made),
 * the steps each hook takes around its real call, and the page's unpooled_* figures. One
 * mutex over the tables, never held across a CUDA call or another lock. Depends on the
 * budget and the registry; knows CUDA's handles only as integers; must not depend on the
 * hook bodies. */
#ifndef GP_UNPOOLED_H
#define GP_UNPOOLED_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "budget.h"
#include "gpupool/stats.h"

/* ---- around one allocation --------------------------------------------------------------
 * gp_unpooled_take before the real call (0, or -ENOMEM: refused at the limit, or by the
 * wait queue's gate when the wait for an earlier waiter ended without the memory, the
 * refusal counted; the caller answers out of memory; or -ERANGE: more bytes than a figure
 * can count on a device nothing caps, which no device has: the caller passes the call to
 * CUDA for its own answer, uncounted), gp_unpooled_taken after it: `ok` counts the
 * allocation, else the bytes go back. */
int gp_unpooled_take(int dev, size_t bytes, enum gp_budget_kind kind);
void gp_unpooled_taken(int dev, size_t bytes, enum gp_budget_kind kind, bool ok);

/* ---- records -----------------------------------------------------------------------------*/
struct gp_mempool; /* unpooled.c's record of a memory pool the program made */
struct gp_unpooled_rec {
	uint64_t key;          /* the handle (cuMemCreate) or the address */
	int dev;
	enum gp_budget_kind kind;
	size_t bytes;          /* counted bytes (GP_BUDGET_MEMPOOL: the bytes asked, not counted) */
	uintptr_t pool;        /* GP_BUDGET_MEMPOOL: the program's pool it came from */
	struct gp_mempool *owner; /* GP_BUDGET_MEMPOOL: that pool's record, held while the
				   * allocation is recorded (NULL: a pool gpupool did not know) */
};

/* ---- virtual memory (unpooled_vmm.c) ------------------------------------------------------
 * Physical memory from cuMemCreate stays on the device while any handle reference to it is
 * unreleased or any mapping of it is left (cuMemMap keeps it alive past cuMemRelease): it is
 * counted until the last of both goes. Each hook pins the allocation it acts on before its
 * real call (so that a race between the program's threads cannot give it back early) and
 * says after it whether the call succeeded; the bytes go back only after the call that made
 * the memory really gone succeeded. Allocations of other processes (imported handles) and
 * handles gpupool did not see created are not followed; an exported one is counted until the
 * process ends. */
struct gp_vmm_alloc;
struct gp_vmm_map;

/* A cuMemCreate handle, counted by gp_unpooled_take: recorded with one reference (false: no
 * host memory for the record; the bytes were given back and it is not counted). */
bool gp_unpooled_vmm_created(const struct gp_unpooled_rec *rec);
/* Around cuMemRelease(handle): begin answers the allocation (NULL: not one of gpupool's),
 * end is told whether the release succeeded. */
struct gp_vmm_alloc *gp_unpooled_vmm_release_begin(uint64_t handle);
void gp_unpooled_vmm_release_end(struct gp_vmm_alloc *a, bool ok);
/* Around cuMemMap(va, size, .., handle): begin answers the mapping's record, or NULL with
 * *ours false (not gpupool's handle: pass it through) or *ours true (no host memory for the
 * record: the caller refuses the map, CUDA_ERROR_OUT_OF_MEMORY, rather than leave it
 * uncounted); end records it where the map succeeded. */
struct gp_vmm_map *gp_unpooled_vmm_map_begin(uint64_t handle, bool *ours);
void gp_unpooled_vmm_map_end(struct gp_vmm_map *m, uintptr_t va, size_t size, bool ok);
/* Around cuMemUnmap(va, size): the records of the mappings in the range (NULL: none). */
struct gp_vmm_map *gp_unpooled_vmm_unmap_begin(uintptr_t va, size_t size);
void gp_unpooled_vmm_unmap_end(struct gp_vmm_map *list, bool ok);
/* Around cuMemRetainAllocationHandle(&handle, addr): a reference more where it succeeded. */
struct gp_vmm_alloc *gp_unpooled_vmm_retain_begin(uintptr_t addr);
void gp_unpooled_vmm_retain_end(struct gp_vmm_alloc *a, uint64_t handle, bool ok);
/* Around a call that gives `handle`'s memory a holder gpupool cannot follow: an export
 * (cuMemExportToShareableHandle: any importer, another process or this one, whose imported
 * handle is another value, may map it the moment the export returns) or a sparse array's
 * mapping (cuMemMapArrayAsync, undone by array and place, not by handle). begin holds the
 * allocation for the call (NULL: not gpupool's); end, where the call succeeded, keeps it
 * counted until the process ends; where it failed (nothing exported or mapped), it is
 * counted as before. */
struct gp_vmm_alloc *gp_unpooled_vmm_pin_begin(uint64_t handle);
void gp_unpooled_vmm_pin_end(struct gp_vmm_alloc *a, bool ok);
/* In a forked child: no records. */
void gp_unpooled_vmm_after_fork(void);

/* The same for addresses (managed, pitched, program-pool allocations). lookups are one
 * relaxed load while no address is recorded. */
bool gp_unpooled_ptr_add(const struct gp_unpooled_rec *rec);
bool gp_unpooled_ptr_remove(uintptr_t ptr, struct gp_unpooled_rec *rec);
void gp_unpooled_ptr_put(const struct gp_unpooled_rec *rec);

/* After the real free of a record's memory succeeded: its bytes go back and the free is
 * counted (a program-pool allocation: its pool's reserved bytes are read again, `ops`). */
struct gp_mempool_ops;
void gp_unpooled_freed(const struct gp_unpooled_rec *rec, const struct gp_mempool_ops *ops);

/* ---- memory pools the program made ------------------------------------------------------
 * Their reserved bytes (CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT) are what counts: read after each
 * allocation and free from them. The API's calls, for either API: */
struct gp_mempool_ops {
	const void *api;
	/* the pool's reserved bytes: 0, or nonzero (the API's error) */
	int (*reserved)(const void *api, uintptr_t pool, uint64_t *bytes);
	/* releases unused reserved memory down to `keep` bytes (cuMemPoolTrimTo) */
	int (*trim)(const void *api, uintptr_t pool, size_t keep);
};

/* Reads the reserved bytes of the program's live pools on `dev` again (each with the calls of
 * the API that last read it): a synchronize past a pool's release threshold, or a reset,
 * gives memory back without a call gpupool sees. True when what they count went down. Not
 * inside a reset's gate (it writes the page). */
bool gp_unpooled_mempools_sync(int dev);

/* A pool the program made (cuMemPoolCreate, cudaMemPoolCreate) on `dev`. */
void gp_unpooled_pool_made(uintptr_t pool, int dev);
/* Its device, or -1 when it is not one the program made through gpupool. */
int gp_unpooled_pool_device(uintptr_t pool);
/* It is destroyed: what it counted goes back, at once where no allocation from it is live;
 * else the driver keeps its memory until the last of them is freed, and it stays counted
 * until then (its reserved bytes as last read). */
void gp_unpooled_pool_destroyed(uintptr_t pool);
/* The program set `pool` as `dev`'s current pool (cuDeviceSetMemPool, cudaDeviceSetMemPool):
 * kept when it is one the program made, else (the default pool back) cleared. */
void gp_unpooled_device_pool_set(int dev, uintptr_t pool);
/* The program's pool current on `dev`, or 0: stream-ordered allocations go to it. One
 * relaxed load, inline: every cudaMallocAsync asks. */
extern _Atomic uintptr_t gp_unpooled_dev_pool[GPUPOOL_MAX_DEVICES];
static inline uintptr_t gp_unpooled_device_pool(int dev)
{
	return (unsigned)dev < GPUPOOL_MAX_DEVICES ? atomic_load_explicit(&gp_unpooled_dev_pool[dev], memory_order_relaxed)
						   : 0;
}

/* Before an allocation of `size` bytes from `pool` (on `dev`): the most it may grow the pool
 * (`size` rounded up to the 2 MiB granule) is taken from the budget; past the limit the
 * device's cached segments go back, then the program's pool is trimmed (its unused memory
 * goes back to the device), and the take is tried again. 0 and *t (what was taken, and the
 * pool's record held for the call: give it to gp_unpooled_mempool_end), or -ENOMEM (the
 * refusal counted; nothing to give). */
struct gp_mempool_take {
	size_t bytes;             /* taken from the budget */
	struct gp_mempool *held;  /* the pool's record, held for the call (NULL: none) */
};
int gp_unpooled_mempool_begin(int dev, uintptr_t pool, size_t size, const struct gp_mempool_ops *ops,
			      struct gp_mempool_take *t);
/* After it: the bytes taken go back, the pool's reserved bytes are read again and counted,
 * and a successful allocation (ptr != 0) is recorded for its free, holding its pool's record
 * until then. */
void gp_unpooled_mempool_end(int dev, uintptr_t pool, size_t size, const struct gp_mempool_take *t, uintptr_t ptr,
			     const struct gp_mempool_ops *ops);

/* A device reset destroyed the device's managed and pitched allocations: their records go
 * and their bytes back (inside the reset gate: the page is written by gp_unpooled_refresh,
 * after it). */
void gp_unpooled_device_reset(int dev);

/* The page's unpooled figures of `dev` written again from the budget: after a device reset
 * (its retirement of the killed pool zeroes the slot's gauges). Makes the device's pool anew
 * only where unpooled memory survived the reset. Call with no lock held. */
void gp_unpooled_refresh(int dev);

/* In a forked child: no records (the parent's memory is not the child's), the lock free. */
void gp_unpooled_after_fork(void);

#endif
