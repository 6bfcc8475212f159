/* Device resets and the pools they kill (registry_internal.h): the reset gate each device's
 * pools' backend calls pass, a backend of each pool's own that a reset can stop, the kill, and
 * the killed pools parked and freed once no thread can be inside them (readers' epochs, the
 * fence thread's sentinel). Must not depend on the hook bodies or the PyTorch entry points. */
#include "registry.h"
#include "registry_internal.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#include "budget.h"
#include "fence_thread.h"
#include "log.h"
#include "port.h"
#include "rank.h"
#include "stats.h"

/* The registry, writable (init.c owns it). */
#define R (gp_registry_self())

/* Pools a successful reset killed (unpublished under the gate), a stack through their
 * backends, until the registry retires them under its lock (abandon, gauges to zero, park):
 * by the reset's end, or by the next pool creation for the device, whichever comes first
 * (another reset of the device may kill the next pool in between). */
struct pool_be;
static _Atomic(struct pool_be *) killed[GPUPOOL_MAX_DEVICES];

/* ---- the reset gate and each pool's backend ---------------------------------------------
 * A reset (cudaDeviceReset, cuDevicePrimaryCtxReset, cuCtxDestroy of a primary context)
 * destroys every allocation, stream and event of the device when it succeeds, and nothing
 * when it is refused. The registry acts on what the call did, not on what was asked: the
 * device's pool is dropped only after a reset that succeeded. Meanwhile the pools' backend
 * calls on the device (segments, fences, markers: whatever makes or uses device objects) wait
 * at the gate, a reader-writer lock the reset holds for writing around the call: so no
 * segment is grown, no event made and none used while the device is being reset, and every
 * segment a pool holds is either from before the reset (dead if it succeeded) or from after
 * it. The pool the device had when the reset took the gate is then killed, still inside the
 * gate: its backend answers without calling the device from then on (no segment grown, none
 * freed, fences done: nothing of it is on the device), and it is unpublished, so the next
 * allocation makes a new pool. A thread that was already inside the killed pool may still
 * get a cached block of it: gp_registry_alloc sees the kill, gives the block back and takes
 * one from the new pool. So the damage ends with the reset, as natively (CUDA leaves calls
 * made on a device during its reset to the caller).
 *
 * No deadlock: the writer holds no other lock while it waits for the gate, and takes none of
 * the pools' (readers wait at the gate with a pool lock held); a reader inside a slow CUDA
 * call (a cudaMalloc, a fence behind a long kernel) only makes the reset wait for it; the
 * lock prefers writers, so a stream of fences cannot starve a reset; a pool is created
 * (under the registry lock) without a gated call. A reset nested in a reset on the same thread (a runtime
 * that resets through gpupool's driver entry points) passes through the outer one's gate. */
static pthread_rwlock_t gate[GPUPOOL_MAX_DEVICES]; /* gates_init, before any hook uses them */
static bool membarrier_ok; /* the reclaimer's fence works (gp_registry_lifecycle_init) */
static _Thread_local unsigned resetting; /* this thread's resets in progress (nested: one gate) */
static _Thread_local gp_pool *reset_pool; /* the device's pool when this thread's reset began */

static void gates_init(void)
{
	pthread_rwlockattr_t a;
	pthread_rwlockattr_init(&a);
	pthread_rwlockattr_setkind_np(&a, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
	for (int d = 0; d < GPUPOOL_MAX_DEVICES; d++)
		pthread_rwlock_init(&gate[d], &a);
	pthread_rwlockattr_destroy(&a);
}

void gp_registry_lifecycle_init(void)
{
	gates_init();
	membarrier_ok = gp_port_membarrier_init() == 0;
}

/* A pool's own backend: the registry's (guarded) one behind the gate, dead once a reset of
 * its device succeeded. The pool holds &be; be.ctx is the struct. */
struct pool_be {
	struct gp_backend be;
	const struct gp_backend *in;
	atomic_bool dead;
	gp_pool *pool;
	struct pool_be *next;   /* killed[], then the parked list */
	_Atomic uint64_t epoch; /* the registry epoch its kill began (reclaim); UINT64_MAX until
				 * it is set */
	struct gpupool_device_stats sink; /* where it counts once retired (its own: no two pools
					   * write one slot) */
};

static struct pool_be *be_of(const gp_pool *p)
{
	return (struct pool_be *)(uintptr_t)gp_pool_backend(p);
}

static bool gate_enter(struct pool_be *b, int device)
{
	if (atomic_load_explicit(&b->dead, memory_order_acquire) || device < 0 || device >= GPUPOOL_MAX_DEVICES)
		return false;
	gp_rank_take(GP_RANK_RESET_GATE);
	pthread_rwlock_rdlock(&gate[device]);
	if (!atomic_load_explicit(&b->dead, memory_order_acquire))
		return true;
	pthread_rwlock_unlock(&gate[device]); /* killed while this call waited */
	gp_rank_give(GP_RANK_RESET_GATE);
	return false;
}

static void gate_leave(int device)
{
	pthread_rwlock_unlock(&gate[device]);
	gp_rank_give(GP_RANK_RESET_GATE);
}

#define IN(b) ((b)->in)

static int pb_segment_alloc(void *ctx, int device, size_t size, uintptr_t *addr)
{
	struct pool_be *b = ctx;
	if (!gate_enter(b, device))
		return -ENOMEM; /* a killed pool grows no more */
	int rc = IN(b)->segment_alloc(IN(b)->ctx, device, size, addr);
	gate_leave(device);
	return rc;
}

static int pb_segment_free(void *ctx, int device, uintptr_t addr, size_t size)
{
	struct pool_be *b = ctx;
	if (!gate_enter(b, device))
		return 0; /* the reset freed it: freeing it again could free another owner's memory */
	int rc = IN(b)->segment_free(IN(b)->ctx, device, addr, size);
	gate_leave(device);
	return rc;
}

static int pb_device_sync(void *ctx, int device)
{
	struct pool_be *b = ctx;
	if (!gate_enter(b, device))
		return 0; /* the reset ended all of the pool's work */
	int rc = IN(b)->device_sync(IN(b)->ctx, device);
	gate_leave(device);
	return rc;
}

static int pb_stream_wait(void *ctx, int device, gp_stream from, gp_stream to)
{
	struct pool_be *b = ctx;
	if (!gate_enter(b, device))
		return -EAGAIN;
	int rc = IN(b)->stream_wait(IN(b)->ctx, device, from, to);
	gate_leave(device);
	return rc;
}

static int pb_mem_info(void *ctx, int device, size_t *free_bytes, size_t *total_bytes)
{
	struct pool_be *b = ctx; /* no device object: not gated */
	return IN(b)->mem_info(IN(b)->ctx, device, free_bytes, total_bytes);
}

static int pb_fence_mark(void *ctx, int device, uint64_t *token)
{
	struct pool_be *b = ctx;
	if (!gate_enter(b, device))
		return -ENOTSUP; /* the pool fences with device_sync, which is done */
	int rc = IN(b)->fence_mark(IN(b)->ctx, device, token);
	gate_leave(device);
	return rc;
}

static int pb_fence_query(void *ctx, int device, uint64_t token)
{
	struct pool_be *b = ctx;
	if (!gate_enter(b, device))
		return 0; /* its events died with the reset, and the work they marked */
	int rc = IN(b)->fence_query(IN(b)->ctx, device, token);
	gate_leave(device);
	return rc;
}

static int pb_fence_wait(void *ctx, int device, uint64_t token)
{
	struct pool_be *b = ctx;
	if (!gate_enter(b, device))
		return 0;
	int rc = IN(b)->fence_wait(IN(b)->ctx, device, token);
	gate_leave(device);
	return rc;
}

static void pb_fence_drop(void *ctx, int device, uint64_t token)
{
	struct pool_be *b = ctx;
	if (!gate_enter(b, device)) {
		/* a killed pool's markers are orphans (gp_cuda_device_reset_done): dropping one
		 * frees host memory only */
		IN(b)->fence_drop(IN(b)->ctx, device, token);
		return;
	}
	IN(b)->fence_drop(IN(b)->ctx, device, token);
	gate_leave(device);
}

static uint64_t pb_now_ns(void *ctx)
{
	struct pool_be *b = ctx;
	return IN(b)->now_ns(IN(b)->ctx);
}

/* Virtual memory. Memory from cuMemCreate outlives a reset (its context's allocations die
 * with it, not this): a killed pool's chunks and reservations are still the process's, still
 * counted (GP_BUDGET_CHUNKS: gp_budget_pool_gone leaves them), and given back through the
 * budget, without the gate (the reset ended the work that used them), as the killed pool is
 * retired (gp_pool_drop_vmm), before the reset returns. */
static int pb_vmm_granularity(void *ctx, int device, size_t *bytes)
{
	struct pool_be *b = ctx; /* no device object: not gated */
	return IN(b)->vmm_granularity(IN(b)->ctx, device, bytes);
}

static int pb_vmm_reserve(void *ctx, int device, size_t size, uintptr_t *addr)
{
	struct pool_be *b = ctx;
	if (!gate_enter(b, device))
		return -ENOMEM; /* a killed pool grows no more */
	int rc = IN(b)->vmm_reserve(IN(b)->ctx, device, size, addr);
	gate_leave(device);
	return rc;
}

static int pb_vmm_unreserve(void *ctx, int device, uintptr_t addr, size_t size)
{
	struct pool_be *b = ctx;
	if (!gate_enter(b, device))
		return IN(b)->vmm_unreserve(IN(b)->ctx, device, addr, size);
	int rc = IN(b)->vmm_unreserve(IN(b)->ctx, device, addr, size);
	gate_leave(device);
	return rc;
}

static int pb_vmm_map(void *ctx, int device, uintptr_t addr, size_t size, size_t *mapped)
{
	struct pool_be *b = ctx;
	*mapped = 0;
	if (!gate_enter(b, device))
		return -ENOMEM;
	int rc = IN(b)->vmm_map(IN(b)->ctx, device, addr, size, mapped);
	gate_leave(device);
	return rc;
}

static int pb_vmm_unmap(void *ctx, int device, uintptr_t addr, size_t size, bool sync, size_t *unmapped)
{
	struct pool_be *b = ctx;
	if (!gate_enter(b, device)) /* the reset ended the work that used it: no wait */
		return IN(b)->vmm_unmap(IN(b)->ctx, device, addr, size, false, unmapped);
	int rc = IN(b)->vmm_unmap(IN(b)->ctx, device, addr, size, sync, unmapped);
	gate_leave(device);
	return rc;
}

static const struct gp_backend pool_be_calls = {
	.segment_alloc = pb_segment_alloc,
	.segment_free = pb_segment_free,
	.device_sync = pb_device_sync,
	.stream_wait = pb_stream_wait,
	.mem_info = pb_mem_info,
	.fence_mark = pb_fence_mark,
	.fence_query = pb_fence_query,
	.fence_wait = pb_fence_wait,
	.fence_drop = pb_fence_drop,
	.now_ns = pb_now_ns,
	.vmm_granularity = pb_vmm_granularity,
	.vmm_reserve = pb_vmm_reserve,
	.vmm_unreserve = pb_vmm_unreserve,
	.vmm_map = pb_vmm_map,
	.vmm_unmap = pb_vmm_unmap,
};

const struct gp_backend *gp_registry_pool_backend_new(void)
{
	/* its segments pass the device's budget (budget.h) inside the gate */
	const struct gp_backend *in = gp_budget_backend(gp_registry_backend());
	struct pool_be *b = calloc(1, sizeof *b);
	if (!b)
		return NULL;
	b->in = in;
	b->be = gp_backend_wrap(in, b, &pool_be_calls);
	return &b->be;
}

void gp_registry_pool_backend_bind(const struct gp_backend *be, gp_pool *p)
{
	((struct pool_be *)(uintptr_t)be)->pool = p;
}

void gp_registry_pool_backend_free(const struct gp_backend *be)
{
	free((void *)(uintptr_t)be);
}

/* After an allocation that saw the registry epoch move since its reader began (a reset
 * killed some pool, maybe p, during the call; registry.h): a block of a killed pool is given
 * back (the pool is dead, the block with it) and taken again from the device's pool, made
 * anew. Twice at most: a thread resetting the device in a loop gets its allocations served,
 * or failed as a racing native one could be. Only after a reset. */
int gp_registry_alloc_again(gp_pool *p, int dev, size_t size, gp_stream key, uintptr_t *a, int rc)
{
	for (int tries = 0; tries < 3; tries++) {
		if (!atomic_load(&be_of(p)->dead))
			return rc; /* a reset killed another pool: not this one, or not yet */
		if (rc == 0)
			(void)gp_pool_free(p, *a, key);
		if (tries == 2 || !(p = gp_registry_pool(R, dev)))
			break;
		rc = gp_pool_alloc(p, size, key, a);
	}
	return -ENOMEM;
}

/* ---- parked pools, freed once no thread can be inside them ------------------------------
 * A pool a reset killed may still be in use: by a thread that loaded it before it was
 * unpublished (inside an allocation, a free, a lookup), or by the fence thread. It is parked
 * and freed once neither can be inside it:
 *  - every hook body that touches the pools is a reader (GP_REGISTRY_READER, registry.h): on
 *    entry it publishes the registry epoch it saw in a record of its thread's own, and clears
 *    it on exit. A pool killed at epoch e (unpublished, then the epoch raised to e) can be
 *    held only by a reader that published an epoch below e. The reader costs two stores to a
 *    line of its own and no fence instruction: the reclaimer runs membarrier
 *    (PRIVATE_EXPEDITED) before it reads the records, which orders every running thread's
 *    earlier stores against it (liburcu's scheme). Where the kernel refuses membarrier (older
 *    than 4.14, a seccomp filter, valgrind), parked pools are kept, as they all were before:
 *    the readers' path stays without a fence;
 *  - the fence thread is no reader: fence_thread.c loads each pool of the array it is given
 *    and calls into it, one at a time. Its array has one slot past the devices for a
 *    sentinel pool (a backend of host addresses, never dereferenced) that the registry gives
 *    one pending free, and wakes the thread, whenever it parks a pool. When the thread fences
 *    the sentinel it is inside no other pool and loads every slot afresh afterwards: every
 *    pool killed before that moment is out of its reach (fence_passed).
 * Reclamation runs under the registry lock whenever a pool is parked; what it cannot free yet waits
 * for the next time. A process whose readers could not all be recorded (host memory), whose
 * fence thread is not running with fence policy "thread", or without membarrier keeps its
 * parked pools. */
static struct pool_be *parked_head;    /* under the registry lock */
static atomic_bool parked_any;         /* parked_head is not empty: read without the lock */
static struct pool_be *parent_parked;  /* a forked child's: the parent's, left alone */

_Atomic uint64_t gp_registry_epoch = 1;
GP_REGISTRY_READER_TLS struct gp_registry_reader gp_registry_reader;

struct reader_rec {
	_Atomic uint64_t active; /* 0: outside; else the epoch its thread saw on entry */
	atomic_bool used;        /* claimed by a live thread */
	struct reader_rec *next; /* every record ever made: reused, never freed */
};
static _Atomic(struct reader_rec *) readers;
static pthread_key_t reader_key;
static bool reader_key_ok;
static pthread_once_t reader_once = PTHREAD_ONCE_INIT;
static atomic_bool reclaim_off; /* a reader the reclaimer cannot see exists */
static _Thread_local _Atomic uint64_t reader_unrecorded;

/* A thread that ends gives its record back (a later call of its, from another destructor,
 * records it again). */
static void reader_gone(void *v)
{
	struct reader_rec *x = v;
	atomic_store(&x->active, 0);
	atomic_store(&x->used, false);
	gp_registry_reader.rec = NULL;
}


static void reader_key_make(void) { reader_key_ok = pthread_key_create(&reader_key, reader_gone) == 0; }

_Atomic uint64_t *gp_registry_reader_record(void)
{
	pthread_once(&reader_once, reader_key_make);
	struct reader_rec *x;
	for (x = atomic_load(&readers); x; x = x->next) {
		bool no = false;
		if (atomic_compare_exchange_strong(&x->used, &no, true))
			break;
	}
	if (!x) {
		x = aligned_alloc(64, 64); /* a cache line of its own */
		if (!x) {
			atomic_store(&reclaim_off, true);
			gp_log(GP_LOG_WARN, "out of host memory recording a thread: pools abandoned by a device reset are "
					    "kept from now on");
			return gp_registry_reader.rec = &reader_unrecorded;
		}
		atomic_init(&x->active, 0);
		atomic_init(&x->used, true);
		x->next = atomic_load(&readers);
		while (!atomic_compare_exchange_weak(&readers, &x->next, x))
			;
	}
	if (reader_key_ok)
		(void)pthread_setspecific(reader_key, x); /* without it the record stays claimed */
	return gp_registry_reader.rec = &x->active;
}

/* The sentinel (above): its backend's device_sync is the fence thread's pass. */
static gp_pool *sentinel;              /* under the registry lock; R->pools[R->ndev] once made */
static gp_pool *parent_sentinel;       /* a forked child's: the parent's, left alone */
static struct gpupool_device_stats sentinel_st;
static uintptr_t sentinel_next = (uintptr_t)1 << 47; /* its segments' addresses, under its lock */
static _Atomic uint64_t fence_passed;  /* the epoch when the fence thread last fenced it */
static _Thread_local bool arming;      /* the registry's own calls into it */

static int sb_segment_alloc(void *ctx, int device, size_t size, uintptr_t *addr)
{
	(void)ctx, (void)device;
	*addr = sentinel_next;
	sentinel_next += size;
	return 0;
}

static int sb_segment_free(void *ctx, int device, uintptr_t addr, size_t size)
{
	(void)ctx, (void)device, (void)addr, (void)size;
	return 0;
}

static int sb_device_sync(void *ctx, int device)
{
	(void)ctx, (void)device;
	if (!arming) /* the fence thread, inside no other pool */
		atomic_store(&fence_passed, atomic_load(&gp_registry_epoch));
	return 0;
}

static int sb_stream_wait(void *ctx, int device, gp_stream from, gp_stream to)
{
	(void)ctx, (void)device, (void)from, (void)to;
	return -EAGAIN;
}

static int sb_mem_info(void *ctx, int device, size_t *free_bytes, size_t *total_bytes)
{
	(void)ctx, (void)device;
	*free_bytes = *total_bytes = (size_t)1 << 30;
	return 0;
}

static const struct gp_backend sentinel_be = {
	.segment_alloc = sb_segment_alloc,
	.segment_free = sb_segment_free,
	.device_sync = sb_device_sync,
	.stream_wait = sb_stream_wait,
	.mem_info = sb_mem_info,
};

/* Asks the fence thread for a pass (under the registry lock): one pending free in the sentinel,
 * and a wake-up. */
static void fence_thread_pass(void)
{
	if (!sentinel) {
		struct gp_pool_params prm;
		gp_pool_params_default(&prm);
		prm.fence_marker = false;
		if (gp_pool_create(&sentinel, 0, &prm, &sentinel_be, &sentinel_st) != 0) {
			sentinel = NULL;
			return;
		}
		atomic_store(&R->pools[R->ndev], sentinel);
	}
	if (!gp_pool_has_pending(sentinel)) {
		uintptr_t a;
		arming = true;
		if (gp_pool_alloc(sentinel, 1, GP_NO_STREAM, &a) == 0)
			(void)gp_pool_free(sentinel, a, GP_NO_STREAM);
		arming = false;
	}
	gp_fence_thread_wake();
}

/* Frees the parked pools no thread can be inside (under the registry lock). */
static void reclaim(void)
{
	if (!parked_head || !membarrier_ok || atomic_load(&reclaim_off) || gp_port_membarrier() != 0) {
		if (!membarrier_ok || atomic_load(&reclaim_off))
			atomic_store(&parked_any, false); /* parked for good: nothing for the fence thread */
		return;
	}
	uint64_t oldest = UINT64_MAX; /* the oldest epoch a reader inside the pools saw */
	for (struct reader_rec *x = atomic_load(&readers); x; x = x->next) {
		uint64_t a = atomic_load_explicit(&x->active, memory_order_acquire);
		if (a && a < oldest)
			oldest = a;
	}
	uint64_t passed = R->cfg.fence == GP_FENCE_THREAD ? atomic_load(&fence_passed) : UINT64_MAX;
	for (struct pool_be **pp = &parked_head; *pp;) {
		struct pool_be *b = *pp;
		uint64_t e = atomic_load(&b->epoch);
		if (e > oldest || e > passed) {
			pp = &b->next;
			continue;
		}
		*pp = b->next;
		/* its backend is dead: its segments (the reset freed them) are not freed again, and
		 * its markers are orphans, dropped without a CUDA call */
		gp_pool_destroy(b->pool);
		free(b);
	}
	atomic_store(&parked_any, parked_head != NULL);
}

/* (registry_internal.h) Each killed pool counts into a sink of its own from now on, the
 * slot's gauges go to zero, and each is parked until no thread can be inside it. Lock order:
 * the registry lock, then the pool's own lock (in abandon). */
void gp_registry_retire_killed(int dev)
{
	struct pool_be *b = atomic_exchange(&killed[dev], NULL);
	if (!b)
		return;
	while (b) {
		struct pool_be *next = b->next;
		gp_pool_abandon(b->pool, &b->sink);
		/* its chunks go back now, whatever keeps the pool itself parked (a thread inside
		 * it, the fence thread busy elsewhere, no membarrier) */
		(void)gp_pool_drop_vmm(b->pool);
		b->next = parked_head;
		parked_head = b;
		atomic_store(&parked_any, true);
		b = next;
	}
	struct gpupool_device_stats *st = gp_registry_slot(R, dev);
	gp_stats_begin(st);
#define ZERO_(name, unit, help) GP_STAT_SET(st, name, 0);
	GPUPOOL_GAUGES(ZERO_)
#undef ZERO_
	gp_stats_end(st);
	reclaim();
	if (parked_head && R->cfg.fence == GP_FENCE_THREAD)
		fence_thread_pass();
}

/* (registry_internal.h) On the fence thread, after each of its actions: once it has fenced the
 * sentinel, it is inside none of the parked pools, which can then be freed (their chunks go
 * back to the device and the budget) without waiting for the next reset. */
void gp_registry_reclaim_parked(void)
{
	if (!atomic_load_explicit(&parked_any, memory_order_relaxed))
		return;
	gp_registry_lock();
	reclaim();
	gp_registry_unlock();
}

void gp_registry_reset_begin(int dev)
{
	if (dev < 0 || dev >= GPUPOOL_MAX_DEVICES || resetting++)
		return;
	gp_rank_take(GP_RANK_RESET_GATE);
	pthread_rwlock_wrlock(&gate[dev]);
	/* every segment of this pool is from before now: its growth waits at the gate */
	reset_pool = atomic_load(&R->pools[dev]);
}

void gp_registry_reset_end(int dev, bool done)
{
	if (dev < 0 || dev >= GPUPOOL_MAX_DEVICES || --resetting)
		return;
	gp_pool *p = done ? reset_pool : NULL;
	reset_pool = NULL;
	if (p) {
		/* The reset destroyed every segment of p. A pool made during the reset (there was
		 * none when it began) has nothing from before it and stays. Killed, unpublished,
		 * then the epoch raised (gp_registry_alloc and reclaim rely on that order). */
		struct pool_be *b = be_of(p);
		atomic_store(&b->dead, true);
		/* on the killed list before it leaves the registry: a thread that finds the device
		 * without a pool makes one only after retiring the killed ones, which zeroes the
		 * slot its new pool writes to (else the retirement could zero the new pool's
		 * figures); freed by no reclaim until its epoch is set, below */
		atomic_store(&b->epoch, UINT64_MAX);
		b->next = atomic_load(&killed[dev]);
		while (!atomic_compare_exchange_weak(&killed[dev], &b->next, b))
			;
		atomic_store(&R->pools[dev], NULL);
		/* readers that saw an epoch below this one may hold p (reclaim) */
		atomic_store(&b->epoch, atomic_fetch_add(&gp_registry_epoch, 1) + 1);
	}
	pthread_rwlock_unlock(&gate[dev]);
	gp_rank_give(GP_RANK_RESET_GATE);
	gp_registry_lock();
	gp_registry_retire_killed(dev);
	gp_registry_unlock();
	/* Natively the reset returns with the device's memory free. The killed pool's
	 * virtual-memory chunks outlive it and still count (GP_BUDGET_CHUNKS): retiring it gave
	 * them back (gp_pool_drop_vmm); this waits, 1 s at most, only for one a thread inside
	 * the pool was mapping at that moment. */
	for (int i = 0; i < 10000 && atomic_load(&parked_any) && gp_budget_held(dev, GP_BUDGET_CHUNKS); i++) {
		usleep(100);
		gp_registry_reclaim_parked();
	}
}

void gp_registry_lifecycle_after_fork(void)
{
	/* the parent's killed and parked pools and its sentinel may be locked by threads that are
	 * not here: left alone, still referenced (abandoned on purpose, not leaked) */
	for (int d = 0; d < GPUPOOL_MAX_DEVICES; d++) {
		for (struct pool_be *b = atomic_exchange(&killed[d], NULL), *next; b; b = next) {
			next = b->next;
			b->next = parent_parked;
			parent_parked = b;
		}
	}
	while (parked_head) {
		struct pool_be *b = parked_head;
		parked_head = b->next;
		b->next = parent_parked;
		parent_parked = b;
	}
	if (sentinel)
		parent_sentinel = sentinel;
	sentinel = NULL;
	/* only this thread is here, and it is inside no reader */
	for (struct reader_rec *x = atomic_load(&readers); x; x = x->next) {
		atomic_store(&x->active, 0);
		if (&x->active != gp_registry_reader.rec)
			atomic_store(&x->used, false);
	}
	gates_init(); /* maybe held by a thread that is not here */
	resetting = 0;
}
