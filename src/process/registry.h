/* The registry: lazy initialisation (init.c: the config, the runtime or the driver, the device
 * count) and one pool per device with its statistics-page slot, the page, release requests
 * from it, the trace switch (pools.c), and device resets (lifecycle.c). Starts the fence
 * thread and arms the exit report; must not depend on sharing or the call bodies (the
 * layers above it). */
#ifndef GP_REGISTRY_H
#define GP_REGISTRY_H

#include <cuda_runtime_api.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "gpupool/stats.h"
#include "pool.h"
#include "runtime.h"

/* What the hooks read on every call. Set by the initialisation, except pools and slots
 * (as each device is first used, and cleared by a fork or a device reset), tracing (with
 * the first pool) and exiting (set by the exit handler, before the report: from then on
 * the pools serve nothing, and the hooks pass allocations through, still counted against
 * the caps; a relaxed load per call). Written by the registry (init.c, pools.c) only. */
struct gp_registry {
	const struct gp_runtime *rt; /* NULL: no runtime in the process (yet) */
	struct gp_config cfg;
	bool off;                    /* no pool: disabled, no runtime, or the runtime lacks an entry
				      * point the pool needs (gp_runtime_lacks); every call goes to
				      * the runtime's own entry point */
	bool refuse;                 /* strict mode with a bad knob, or a cap that cannot be applied
				      * as asked (a bad value; a layer off, CUDA lacking what the
				      * pool needs): every allocation fails, off or not; never with
				      * GPUPOOL_DISABLE */
	int ndev;
	const atomic_int *captures;  /* stream captures in progress (capture.h) */
	atomic_bool exiting;         /* exit has begun: the runtime is being torn down */
	bool tracing;
	bool drv_off;                /* the driver hooks serve nothing (driver_calls.c): disabled, no
				      * runtime nor driver, or one that lacks what the pool needs */
	/* The pool stream key of cudaMalloc and cudaFree (and cuMemAlloc, cuMemFree): GP_NO_STREAM,
	 * a free waits for a fence; or, with legacy_stream:1 until the program makes a stream
	 * (gp_registry_stream_made), the legacy stream's key 0: stream-ordered on it. */
	_Atomic gp_stream sync_key;
	/* pools[d] for d < ndev; pools[ndev] is the fence thread's sentinel (pools.c), which no
	 * one else uses. Dereference one only inside GP_REGISTRY_READER. */
	_Atomic(gp_pool *) pools[GPUPOOL_MAX_DEVICES + 1];
	struct gpupool_device_stats *slots[GPUPOOL_MAX_DEVICES]; /* each pool's page slot, set with it */
};

/* The page slot of `dev`'s pool (NULL before its first pool): set before the pool is
 * published and again with each new pool after a reset, so read with an acquire load, also
 * by threads that are no hook (the release thread). */
static inline struct gpupool_device_stats *gp_registry_slot(const struct gp_registry *r, int dev)
{
	return __atomic_load_n(&r->slots[dev], __ATOMIC_ACQUIRE);
}

/* The registry, initialised by the first call in the process (pthread_once), never NULL;
 * r->off says whether gpupool serves anything. While the process has no CUDA runtime, each
 * call looks for one again (gp_runtime_get) and gets a registry with rt NULL and off; once
 * one is found, the registry is final and a call costs one load (no once-check). A child forked while
 * another thread was initialising initialises again (glibc's pthread_once). */
const struct gp_registry *gp_registry_get(void);

/* The registry as the driver hooks (driver_calls.c) see it: like gp_registry_get, but settled
 * over the driver (libcuda.h) when the process has no CUDA runtime, with the pools' backend
 * over the driver (backend_driver.h); r->drv_off says whether the driver layer serves
 * anything. A runtime loaded later joins the same pools (the backend stays the driver's).
 * The driver layer reads cfg, refuse, ndev, captures, exiting, drv_off and the pools only. */
const struct gp_registry *gp_registry_get_driver(void);

/* A reader of the pools: a hook body that loads pools from the registry and calls into
 * them declares GP_REGISTRY_READER before its first load; the pools it may have loaded stay
 * allocated until it returns (a pool a device reset killed is freed once no reader that
 * began before the kill is inside, pools.c). Nests (an inner reader leaves the outer one's
 * record alone). Costs a few loads and two stores to the thread's own record, no fence
 * instruction. Any thread, any time. */
struct gp_registry_reader {
	_Atomic uint64_t *rec; /* this thread's record: 0 outside, else the registry epoch it saw
				* when its outermost reader began; NULL until recorded */
};
/* initial-exec: one instruction to reach it on every hook (the library is preloaded, or
 * loaded into the surplus of static TLS glibc keeps for that) */
#define GP_REGISTRY_READER_TLS _Thread_local __attribute__((tls_model("initial-exec")))
extern GP_REGISTRY_READER_TLS struct gp_registry_reader gp_registry_reader;
extern _Atomic uint64_t gp_registry_epoch;
_Atomic uint64_t *gp_registry_reader_record(void);

/* Returns the record's value before: 0 when this is the outermost reader. */
static inline uint64_t gp_registry_read_begin(void)
{
	_Atomic uint64_t *rec = gp_registry_reader.rec;
	if (__builtin_expect(!rec, 0))
		rec = gp_registry_reader_record();
	uint64_t was = atomic_load_explicit(rec, memory_order_relaxed);
	if (!was) {
		atomic_store_explicit(rec, atomic_load_explicit(&gp_registry_epoch, memory_order_acquire),
				      memory_order_relaxed);
		/* the record before any load of a pool: against the reclaimer's membarrier, a
		 * compiler barrier is enough */
		atomic_signal_fence(memory_order_seq_cst);
	}
	return was;
}

static inline void gp_registry_read_end(const uint64_t *was)
{
	if (!*was)
		atomic_store_explicit(gp_registry_reader.rec, 0, memory_order_release);
}

#define GP_REGISTRY_READER                                                                   \
	__attribute__((cleanup(gp_registry_read_end))) const uint64_t gp_registry_reader_ = \
		gp_registry_read_begin();                                                    \
	(void)gp_registry_reader_

/* The pool of `dev` (0 <= dev < ndev), created on first use; NULL (logged) when it cannot
 * be created. The first pool opens the page and the trace, arms the exit report and starts
 * the fence thread (fence policy "thread"). */
gp_pool *gp_registry_pool_create(int dev);
static inline gp_pool *gp_registry_pool(const struct gp_registry *r, int dev)
{
	gp_pool *p = atomic_load_explicit(&r->pools[dev], memory_order_acquire);
	return p ? p : gp_registry_pool_create(dev);
}

/* One allocation of `size` bytes from `p`, the pool of `dev` (gp_registry_pool, loaded
 * inside the caller's GP_REGISTRY_READER), on stream key `key` (answering a pending release
 * request first), traced as `op` on `s`: the process's part of the allocation ladder
 * (calls/ladder.h has the whole of it). 0, or -ENOMEM (not counted: the ladder counts an out
 * of memory once it gives up). */
int gp_registry_alloc_once(gp_pool *p, int dev, size_t size, gp_stream key, int op, cudaStream_t s, uintptr_t *a);
/* When a reset of `dev` killed `p` during gp_registry_alloc_once (the epoch moved), its block
 * (if any: rc 0) is given back and the allocation is served by the device's new pool. */
int gp_registry_alloc_again(gp_pool *p, int dev, size_t size, gp_stream key, uintptr_t *a, int rc);
/* The pool asked once more, after a later rung of the ladder found memory: a trace row of
 * its own while tracing. Out of line. */
int gp_registry_alloc_retry(gp_pool *p, int dev, size_t size, gp_stream key, int op, cudaStream_t s, uintptr_t *a);

/* The out-of-memory message of a failed `size`-byte allocation on `dev` (whose pool exists),
 * with the device's figures, into buf (cap bytes, NUL-terminated). Waits at most
 * GP_STATPAGE_PATIENCE_NS for the counters to settle. */
void gp_registry_oom_message(char *buf, size_t cap, int dev, size_t size);

/* Logs an allocation on `dev` that failed where the program may handle it (an out of memory,
 * or the limit refusing memory held outside the pools): the first one of each device in this
 * process as a warning, which says where the others go; the others at info (GPUPOOL_LOG=info:
 * each with its figures), so that a program that probes its way up prints one line a device.
 * The exit report counts them all (OOMs, unpooled calls refused at the limit). msg is the
 * line (gp_registry_oom_message's). Thread-safe; no lock. */
void gp_registry_oom_log(int dev, const char *msg);
/* gp_registry_oom_log of the limit refusing `size` bytes of memory held outside the pools
 * (`what`: "cuMemCreate", "managed memory", ...) on `dev`, with the limit and what is held,
 * or of the group's budget with the group's figures where the limit does not explain it, and
 * the error the call returns (`returning`: "cudaErrorMemoryAllocation"); or, where the
 * calling thread's last take was refused by the wait queue's gate (gp_budget_refused_last),
 * that an earlier waiter on the GPU needs the memory. */
void gp_registry_limit_refused_log(int dev, const char *what, size_t size, const char *returning);

/* One trace row for a call that began at t0 (gp_trace_now_ns). Only while r->tracing. */
void gp_registry_trace(int op, int dev, cudaStream_t s, size_t size, void *ptr, uint64_t t0, cudaError_t e);

/* The program made a stream (any kind, through either layer) or used the per-thread default
 * stream: from now on cudaFree'd blocks wait for fences (legacy_stream:1 no longer holds;
 * warns once). Cheap when legacy_stream is off. */
void gp_registry_stream_made(const char *how);
static inline void gp_registry_stream_seen(const struct gp_registry *r, const char *how)
{
	if (__builtin_expect(atomic_load_explicit(&r->sync_key, memory_order_relaxed) != GP_NO_STREAM, 0))
		gp_registry_stream_made(how);
}

/* Counts a call passed through to the runtime in the page slot of `dev` (-1: none). */
void gp_registry_count_passthrough(int dev, bool alloc);

/* What the driver layer counts in the page slot of `dev` (no slot, no count). */
enum gp_driver_count { GP_DRIVER_ALLOC, GP_DRIVER_FREE, GP_DRIVER_PASSTHROUGH };
void gp_registry_count_driver(int dev, enum gp_driver_count what);

/* Fences and releases the cached segments of every pool (only < 0) or of device `only`:
 * the answer to a release request or gpupool_release(). Bytes released. */
long long gp_registry_release(int only);

/* Around a call that destroys every allocation of `dev` when it succeeds: cudaDeviceReset,
 * cuDevicePrimaryCtxReset, cuCtxDestroy of the device's primary context. begin holds the
 * device's pools' backend calls (the reset gate, pools.c) until end; the caller makes the
 * call in between, and, when it succeeded, forgets what its layer kept of the device. end
 * acts on what the call did: `done` (it succeeded) kills the pool the device had when begin
 * ran (it leaves the registry: the next allocation creates a new one; its slot's gauges go
 * to zero; it is parked, and freed once no thread can be inside it), else the pool stays as
 * it was. Call with no lock
 * held. A reset inside a reset on the same thread is the outer one's. */
void gp_registry_reset_begin(int dev);
void gp_registry_reset_end(int dev, bool done);

#endif
