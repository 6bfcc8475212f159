/* The fakes' model of CUDA's stream-ordered memory pools, one for the fake runtime and the fake
 * driver: default, current and made pools of each device, chunks reserved from the device's
 * capacity, the release threshold, trimming, attributes, a pool destroyed with live
 * allocations. Static functions: fakepool.c is included by each fake, after this header. It
 * speaks neither API: each fake checks its own arguments, maps fp_err to its error codes and
 * hands out a struct fp_pool * as its pool handle (never dereferenced as anything else). */
#ifndef GPFAKE_FAKEPOOL_H
#define GPFAKE_FAKEPOOL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define FP_MAXDEV 16
#define FP_CHUNK ((size_t)2 << 20) /* a pool reserves device memory in chunks of this size */
#define FP_ALIGN 512u              /* what an allocation counts as used, as the fakes round */
/* a fake may leave some of them unused (only the runtime frees its pools at exit) */
#define FP_FN static __attribute__((unused))

enum fp_err { FP_OK, FP_EVALUE, FP_EDEVICE, FP_ENOMEM };

/* The body of an entry point: `call` (of an fp_ function) under the fake's `lock`, its fp_err
 * returned as the fake's error by `map`. */
#define FP_RETURN(lock, map, call)                \
	do {                                      \
		pthread_mutex_lock(lock);         \
		enum fp_err fp_e_ = (call);       \
		pthread_mutex_unlock(lock);       \
		return map(fp_e_);                \
	} while (0)

/* Numbered as both APIs number them (CU_MEMPOOL_ATTR_*, cudaMemPool*); reuse ones are int,
 * the others 64-bit. */
enum fp_attr {
	FP_REUSE_FOLLOW_EVENT_DEPENDENCIES = 1,
	FP_REUSE_ALLOW_OPPORTUNISTIC,
	FP_REUSE_ALLOW_INTERNAL_DEPENDENCIES,
	FP_RELEASE_THRESHOLD,
	FP_RESERVED_MEM_CURRENT,
	FP_RESERVED_MEM_HIGH,
	FP_USED_MEM_CURRENT,
	FP_USED_MEM_HIGH,
};

/* A chunk of device memory a pool holds reserved (counted against the capacity). */
struct fp_chunk {
	struct fp_chunk *next;
	char *mem;
	size_t bytes;
};

/* A memory pool: it reserves device memory in chunks (one per allocation, FP_CHUNK
 * granularity), keeps freed chunks for reuse, gives back what exceeds the release threshold
 * at the next synchronize of its device, and down to the size asked on a trim. reserved
 * counts against the device's capacity; used is what live allocations hold. */
struct fp_pool {
	unsigned magic;
	int device;
	bool dflt, dead;           /* dead: destroyed, freed once its last allocation is */
	uint64_t threshold;
	size_t reserved, reserved_high, used, used_high;
	int reuse[3];              /* the reuse attributes: kept, not acted on */
	struct fp_chunk *free;     /* reserved chunks no allocation holds */
	struct fp_pool *next;
};

/* What the including fake defines, called with its lock held: take and give back `bytes` of
 * a device's capacity; get (FP_ALIGN-aligned, NULL when out of memory) and put back the memory
 * of a chunk; record a pool allocation of `size` bytes asked (`bytes` rounded) at mem, the
 * whole of a chunk of `chunk` bytes, that the fake frees later with fp_free (false when out
 * of host memory). */
static bool fp_take(int device, size_t bytes);
static void fp_give(int device, size_t bytes);
static char *fp_mem_get(int device, size_t bytes);
static void fp_mem_put(int device, char *mem);
static bool fp_track(struct fp_pool *p, char *mem, size_t bytes, size_t size, size_t chunk);

/* Everything below is called with the fake's lock held. `handle` is a pool handle the program
 * passed: any value, checked against the live pools. */

/* The default pools of every device; ndev of them are visible. Call once, before the rest. */
FP_FN void fp_init(int ndev);
/* The live pool `handle` names (a visible device's default pool, or one made and not
 * destroyed), or NULL. */
FP_FN struct fp_pool *fp_find(const void *handle);
/* A new pool on `device`: FP_EDEVICE, FP_ENOMEM. */
FP_FN enum fp_err fp_create(int device, struct fp_pool **out);
/* Returns at once; what live allocations hold goes when they are freed. A device whose
 * current pool this was goes back to its default pool. Not a default pool: FP_EVALUE. */
FP_FN enum fp_err fp_destroy(const void *handle);
/* The default pool of `device`, or (current) the one it allocates from. */
FP_FN enum fp_err fp_device_pool(int device, bool current, struct fp_pool **out);
FP_FN enum fp_err fp_set_device_pool(int device, const void *handle);
/* A freed chunk of the pool that fits (the smallest), or a new one; when the device is full,
 * the pool first gives back what it keeps unused, as CUDA does before failing. */
FP_FN enum fp_err fp_alloc(const void *handle, size_t size, char **out);
/* A pool allocation the fake recorded with fp_track, its record gone: back to its pool. */
FP_FN void fp_free(struct fp_pool *p, char *mem, size_t bytes, size_t chunk);
FP_FN enum fp_err fp_get(const void *handle, enum fp_attr attr, void *value);
/* The high-water marks may only be set to 0, which resets them to the current value. */
FP_FN enum fp_err fp_set(const void *handle, enum fp_attr attr, const void *value);
FP_FN enum fp_err fp_trim_to(const void *handle, size_t keep);
/* The release threshold of `device`'s pools, applied when it synchronizes. */
FP_FN void fp_settle(int device);
/* A reset: what `device`'s pools hold unused goes; their allocations survive it, as CUDA's
 * do (cuda_runtime_api.h), and a destroyed pool goes with its last one. */
FP_FN void fp_reset(int device);
/* At exit, with no allocation left: every pool's memory goes. */
FP_FN void fp_fini(void);

#endif
