/* The hooks' bodies: each interposed call served from the registry's pools, or passed
 * through to the runtime, and answered in cudaError_t. Owns no state of its own; must not
 * depend on the fence thread's or the exit report's internals, nor initialise anything
 * itself (the registry does, on the first call). */
#include "runtime_calls.h"

#include <errno.h>
#include <limits.h>
#include <stdatomic.h>
#include <string.h>

#include "backend_cuda.h"
#include "capture.h"
#include "fence_thread.h"
#include "group_budget.h"
#include "last_error.h"
#include "ladder.h"
#include "log.h"
#include "pool.h"
#include "proc.h"
#include "backend_guard.h"
#include "entries.h"
#include "libcuda.h"
#include "reclaim.h"
#include "registry.h"
#include "route.h"
#include "runtime.h"
#include "statpage.h"
#include "streamkey.h"
#include "trace.h"
#include "unpooled.h"
#include "waitq.h"

/* How long gpupool_stats waits for a device's counters to settle (ns). The pool keeps them
 * mid-update across its own runtime calls (a segment's cudaMalloc, or a cudaFree that waits
 * for the device's work to finish), so a snapshot may have to wait as long as those. */
#define GP_CALLS_STATS_PATIENCE_NS (5 * GP_NS_PER_S)

/* The current device, or -1 when it is beyond the pooled ones. One device: no call.
 * Several: the runtime is asked on every allocation, never cached per thread. A cache kept
 * right by an interposed cudaSetDevice would go stale behind the driver's back: the driver
 * API (cuCtxSetCurrent, cuCtxPushCurrent/PopCurrent, cuDevicePrimaryCtxRetain + SetCurrent)
 * and a statically linked runtime change the thread's context, hence its device, without
 * any call gpupool sees. */
static inline int current_device(const struct gp_registry *r)
{
	if (r->ndev == 1)
		return 0;
	int d = 0;
	if (r->rt->GetDevice(&d) != cudaSuccess)
		return -1;
	return d < r->ndev ? d : -1;
}

/* With several devices: the device this thread last allocated from, where its frees look
 * first. A hint only, so staleness cannot make a free wrong: a free finds its block by
 * address in whichever pool holds it (a device address belongs to one device), trying the
 * others when the hint's pool does not; a wrong hint costs one lookup more. Frees need no
 * current device but to count a pass-through. Always in [0, ndev). */
static _Thread_local int free_hint;

/* The runtime's entry points of the variant of `call` (stream 0 names the per-thread
 * default stream in the _ptsz one). */
static inline const struct gp_runtime_streamed *variant(const struct gp_runtime *rt, enum gp_call call)
{
	return &rt->variant[call == GP_CALL_ASYNC_PTSZ ? GP_RT_PTSZ : GP_RT_PLAIN];
}

/* The answer to a call whose entry point the process's runtime does not have: with no
 * runtime at all, cudaErrorInsufficientDriver, what libcudart itself answers where no driver
 * is installed (programs take it for "no CUDA here"); with a runtime that lacks the entry
 * point (an older or stripped libcudart), cudaErrorNotSupported. gpupool never serves a call
 * the runtime under it could not. */
static inline cudaError_t absent(const struct gp_registry *r)
{
	return r->rt ? cudaErrorNotSupported : cudaErrorInsufficientDriver;
}

/* The runtime's entry point `field` (r->rt->field), or NULL without a runtime. */
#define RT_FN(r, field) ((r)->rt ? (r)->rt->field : NULL)

static cudaError_t real_malloc(const struct gp_registry *r, void **ptr, size_t size, cudaStream_t s,
			       enum gp_call call)
{
	if (call == GP_CALL_SYNC) {
		cudaError_t (*fn)(void **, size_t) = RT_FN(r, Malloc);
		return fn ? fn(ptr, size) : absent(r);
	}
	cudaError_t (*fn)(void **, size_t, cudaStream_t) = r->rt ? variant(r->rt, call)->MallocAsync : NULL;
	return fn ? fn(ptr, size, s) : absent(r);
}

static cudaError_t real_free(const struct gp_registry *r, void *ptr, cudaStream_t s, enum gp_call call)
{
	if (call == GP_CALL_SYNC) {
		cudaError_t (*fn)(void *) = RT_FN(r, Free);
		return fn ? fn(ptr) : absent(r);
	}
	cudaError_t (*fn)(void *, cudaStream_t) = r->rt ? variant(r->rt, call)->FreeAsync : NULL;
	return fn ? fn(ptr, s) : absent(r);
}

/* Is `s` capturing? cudaSuccess and *yes, or the runtime's error for the stream (an invalid
 * handle), which is left as the last error, as the native call would. Asks the runtime:
 * call it only where capture_possible. */
static __attribute__((noinline)) cudaError_t capturing(const struct gp_registry *r, cudaStream_t s,
						       enum gp_call call, bool *yes)
{
	cudaError_t (*is_capturing)(cudaStream_t, enum cudaStreamCaptureStatus *) =
		variant(r->rt, call)->StreamIsCapturing;
	enum cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
	/* the pool runs only where a variant that begins captures has it (gp_runtime_lacks);
	 * without it, the stream counts as capturing and the call passes through */
	cudaError_t e = is_capturing ? is_capturing(s, &cs) : cudaSuccess;
	*yes = !is_capturing || (e == cudaSuccess && cs != cudaStreamCaptureStatusNone);
	return e;
}

/* May a call on a stream be inside a capture? Only a stream-ordered call while some capture
 * is in progress (one relaxed load): else no stream is capturing and none is asked about. */
static inline bool capture_possible(const struct gp_registry *r, enum gp_call call)
{
	return call != GP_CALL_SYNC &&
	       __builtin_expect(atomic_load_explicit(r->captures, memory_order_relaxed) != 0, 0);
}

/* Exit has begun: the runtime is going away, and a block the pool hands out now would be
 * unusable where the runtime already answers cudaErrorCudartUnloading. */
static inline bool exiting(const struct gp_registry *r)
{
	return atomic_load_explicit(&r->exiting, memory_order_relaxed);
}

/* An allocation the pool could not serve: the runtime's last error set as a failed
 * cudaMalloc leaves it, and the message logged; or the device's own error (the pool gave up
 * on one: ladder.h), which is the answer: the runtime's, with its last error as cudaMalloc
 * left it, or the driver's (the pools over the driver), left as the last error where the
 * runtime has a call that leaves it. Out of line: the hot path keeps no message buffer in
 * its frame. */
static __attribute__((noinline, cold)) cudaError_t alloc_failed(const struct gp_registry *r, int dev, size_t size,
								 int rc)
{
	if (rc == -EIO) {
		bool drv;
		cudaError_t e = (cudaError_t)gp_ladder_device_error(&drv);
		if (drv)
			gp_last_error_set(r->rt, e);
		return e;
	}
	char msg[256];
	gp_registry_oom_message(msg, sizeof msg, dev, size);
	gp_last_error_set(r->rt, cudaErrorMemoryAllocation);
	gp_registry_oom_log(dev, msg);
	return cudaErrorMemoryAllocation;
}

/* A runtime allocation as the routing decision (route.h) asks about it. */
struct rt_call {
	const struct gp_registry *r;
	cudaStream_t s;
	enum gp_call call;
};

static inline int rt_capturing(const void *c_)
{
	const struct rt_call *c = c_;
	if (!capture_possible(c->r, c->call))
		return 0;
	bool cap;
	if (capturing(c->r, c->s, c->call, &cap) != cudaSuccess)
		return -1;
	return cap;
}

static inline int rt_device(const void *c_, bool *served)
{
	const struct rt_call *c = c_;
	*served = true; /* the runtime's calls run in the device's primary context */
	return current_device(c->r);
}

static inline void *rt_pool(const void *c_, int dev)
{
	const struct rt_call *c = c_;
	return gp_ladder_pool(c->r, dev);
}

static const struct gp_route_ask rt_ask = {rt_capturing, rt_device, rt_pool};

/* ---- memory gpupool does not pool, counted against the limit (unpooled.h) ---------------
 * As the driver layer's (driver_calls.c): the budget's take before the real call (past the
 * limit: cudaErrorMemoryAllocation, left as the last error, no call), the real call marked as
 * gpupool's (backend_guard.h: a runtime that reaches the driver through gpupool's entry
 * points is not counted twice), the reclaim step where the device itself is full, and the
 * record its free finds. */

/* The layer is off, and a cap is set that it cannot apply (init.c): every allocation of
 * memory gpupool would count is refused, as a bad cap's is. */
static inline bool off_refused(const struct gp_registry *r) { return __builtin_expect(r->off && r->refuse, 0); }

static __attribute__((noinline, cold)) cudaError_t refused(const struct gp_registry *r, const char *what, int dev,
							 size_t size)
{
	if (r->refuse) { /* strict mode, or a cap that cannot be applied: said at the start */
		gp_last_error_set(r->rt, cudaErrorInvalidValue);
		return cudaErrorInvalidValue;
	}
	if (gp_budget_closed(dev)) { /* a percentage limit of a device whose size is unknown */
		gp_log(GP_LOG_WARN, "device %d: %s of %zu bytes refused: its limit cannot be resolved (the error above); "
				    "returning cudaErrorMemoryAllocation",
		       dev, what, size);
		gp_last_error_set(r->rt, cudaErrorMemoryAllocation);
		return cudaErrorMemoryAllocation;
	}
	gp_registry_limit_refused_log(dev, what, size, "cudaErrorMemoryAllocation");
	gp_last_error_set(r->rt, cudaErrorMemoryAllocation);
	return cudaErrorMemoryAllocation;
}

/* The device an unpooled runtime allocation counts against, or -1: nothing counted. Exit
 * having begun changes nothing here: the caps hold until the process ends. */
static inline int counted_device(const struct gp_registry *r)
{
	return r->off || gp_backend_guard_inside() ? -1 : current_device(r);
}

/* After a real call that failed with out of memory and a reclaim that freed memory: the
 * retry's success leaves no stale error behind (DESIGN contract 5). */
static inline void retried(const struct gp_registry *r, cudaError_t e)
{
	if (e == cudaSuccess)
		(void)r->rt->GetLastError();
}

static int rt_pool_attr(const void *api, uintptr_t pool, enum cudaMemPoolAttr attr, uint64_t *bytes)
{
	const struct gp_runtime *rt = api;
	uint64_t v = 0; /* cuuint64_t, as the runtime writes it */
	cudaError_t e = rt->MemPoolGetAttribute ? rt->MemPoolGetAttribute((cudaMemPool_t)pool, attr, &v)
						: cudaErrorNotSupported;
	*bytes = v;
	return (int)e;
}

static int rt_pool_reserved(const void *api, uintptr_t pool, uint64_t *bytes)
{
	return rt_pool_attr(api, pool, cudaMemPoolAttrReservedMemCurrent, bytes);
}

static int rt_pool_trim(const void *api, uintptr_t pool, size_t keep)
{
	const struct gp_runtime *rt = api;
	return rt->MemPoolTrimTo ? (int)rt->MemPoolTrimTo((cudaMemPool_t)pool, keep) : (int)cudaErrorNotSupported;
}

static inline struct gp_mempool_ops rt_pool_ops(const struct gp_runtime *rt)
{
	return (struct gp_mempool_ops){rt, rt_pool_reserved, rt_pool_trim};
}

/* An allocation from a pool the program made (`pool`, cudaMallocFromPoolAsync), or from the
 * device's current pool the program set (pool 0 given: cudaMallocAsync), counted by the
 * pool's reserved bytes. */
static cudaError_t mempool_alloc(const struct gp_registry *r, void **ptr, size_t size, uintptr_t pool,
				 bool from_pool, cudaStream_t s, enum gp_call call, int dev)
{
	const struct gp_mempool_ops ops = rt_pool_ops(r->rt);
	struct gp_mempool_take taken;
	if (gp_unpooled_mempool_begin(dev, pool, size, &ops, &taken) != 0)
		return refused(r, from_pool ? "cudaMallocFromPoolAsync" : "cudaMallocAsync (the program's pool)", dev,
			       size);
	cudaError_t e;
	gp_backend_guard_enter();
	/* the device's current pool named (cudaMallocAsync would take it from the stream's
	 * device): the pool counted is the pool allocated from */
	cudaError_t (*from)(void **, size_t, cudaMemPool_t, cudaStream_t) = variant(r->rt, call)->MallocFromPoolAsync;
	for (int tries = 0;; tries++) {
		if (from)
			e = from(ptr, size, (cudaMemPool_t)pool, s);
		else
			e = real_malloc(r, ptr, size, s, call);
		if (e != cudaErrorMemoryAllocation || tries || !gp_reclaim_before_oom(dev, size))
			break;
	}
	gp_backend_guard_leave();
	gp_unpooled_mempool_end(dev, pool, size, &taken, e == cudaSuccess ? (uintptr_t)*ptr : 0, &ops);
	return e;
}

/* One managed or pitched allocation: `call` makes it (and is made again after a reclaim);
 * *bytes is what it holds once made (a pitched one: pitch x rows, known after the call). */
struct rt_unpooled {
	void *arg;
	cudaError_t (*call)(const struct gp_runtime *rt, void *arg);
	size_t (*bytes)(void *arg); /* after success */
	void *(*ptr)(void *arg);
};

static cudaError_t unpooled_alloc(const struct gp_registry *r, int dev, size_t guess, enum gp_budget_kind kind,
				  const char *what, const struct rt_unpooled *u)
{
	int rc = gp_unpooled_take(dev, guess, kind);
	if (rc && rc != -ERANGE)
		return refused(r, what, dev, guess);
	gp_backend_guard_enter();
	cudaError_t e = u->call(r->rt, u->arg);
	if (rc) { /* no device has it: the runtime's own answer, uncounted */
		gp_backend_guard_leave();
		return e;
	}
	if (e == cudaErrorMemoryAllocation && gp_reclaim_before_oom(dev, guess)) {
		e = u->call(r->rt, u->arg);
		retried(r, e);
	}
	gp_backend_guard_leave();
	size_t bytes = e == cudaSuccess ? u->bytes(u->arg) : guess;
	if (bytes > guess)
		gp_budget_charge(dev, bytes - guess, kind);
	else if (bytes < guess)
		gp_budget_give(dev, guess - bytes, kind);
	if (e == cudaSuccess) {
		struct gp_unpooled_rec rec = {(uint64_t)(uintptr_t)u->ptr(u->arg), dev, kind, bytes, 0, NULL};
		if (!gp_unpooled_ptr_add(&rec))
			return e; /* not counted (logged) */
	}
	gp_unpooled_taken(dev, bytes, kind, e == cudaSuccess);
	return e;
}

struct managed_args {
	void **ptr;
	size_t size;
	unsigned flags;
};

static cudaError_t managed_call(const struct gp_runtime *rt, void *arg)
{
	struct managed_args *a = arg;
	return rt->MallocManaged(a->ptr, a->size, a->flags);
}

static size_t managed_bytes(void *arg) { return ((struct managed_args *)arg)->size; }
static void *managed_ptr(void *arg) { return *((struct managed_args *)arg)->ptr; }

cudaError_t gp_calls_malloc_managed(void **ptr, size_t size, unsigned flags)
{
	GP_REGISTRY_READER;
	const struct gp_registry *r = gp_registry_get();
	cudaError_t (*fn)(void **, size_t, unsigned) = RT_FN(r, MallocManaged);
	if (!fn)
		return absent(r);
	if (off_refused(r))
		return refused(r, "cudaMallocManaged", 0, size);
	int dev = !ptr || !size ? -1 : counted_device(r);
	if (dev < 0)
		return fn(ptr, size, flags);
	struct managed_args a = {ptr, size, flags};
	const struct rt_unpooled u = {&a, managed_call, managed_bytes, managed_ptr};
	return unpooled_alloc(r, dev, size, GP_BUDGET_MANAGED, "cudaMallocManaged", &u);
}

/* Pitched: rows of the width rounded to 512 bytes are taken first (the pitch is at least the
 * width, a multiple of the device's pitch alignment), pitch x rows counted once known. */
static bool pitch_guess(size_t width, size_t rows, size_t *guess)
{
	return width && rows && width <= SIZE_MAX - 511 && !__builtin_mul_overflow((width + 511) / 512 * 512, rows, guess);
}

struct pitch_args {
	void **ptr;
	size_t *pitch;
	size_t width, height;
};

static cudaError_t pitch_call(const struct gp_runtime *rt, void *arg)
{
	struct pitch_args *a = arg;
	return rt->MallocPitch(a->ptr, a->pitch, a->width, a->height);
}

static size_t pitch_bytes(void *arg)
{
	struct pitch_args *a = arg;
	size_t n;
	return __builtin_mul_overflow(*a->pitch, a->height, &n) ? SIZE_MAX : n;
}

static void *pitch_ptr(void *arg) { return *((struct pitch_args *)arg)->ptr; }

cudaError_t gp_calls_malloc_pitch(void **ptr, size_t *pitch, size_t width, size_t height)
{
	GP_REGISTRY_READER;
	const struct gp_registry *r = gp_registry_get();
	cudaError_t (*fn)(void **, size_t *, size_t, size_t) = RT_FN(r, MallocPitch);
	if (!fn)
		return absent(r);
	size_t guess = 0;
	if (off_refused(r))
		return refused(r, "cudaMallocPitch", 0, width);
	int dev = !ptr || !pitch || !pitch_guess(width, height, &guess) ? -1 : counted_device(r);
	if (dev < 0)
		return fn(ptr, pitch, width, height); /* the runtime's own answer */
	struct pitch_args a = {ptr, pitch, width, height};
	const struct rt_unpooled u = {&a, pitch_call, pitch_bytes, pitch_ptr};
	return unpooled_alloc(r, dev, guess, GP_BUDGET_PITCHED, "cudaMallocPitch", &u);
}

struct m3d_args {
	struct cudaPitchedPtr *out;
	struct cudaExtent ext;
};

static cudaError_t m3d_call(const struct gp_runtime *rt, void *arg)
{
	struct m3d_args *a = arg;
	return rt->Malloc3D(a->out, a->ext);
}

static size_t m3d_bytes(void *arg)
{
	struct m3d_args *a = arg;
	size_t n;
	return __builtin_mul_overflow(a->out->pitch, a->ext.height, &n) || __builtin_mul_overflow(n, a->ext.depth, &n)
		       ? SIZE_MAX
		       : n;
}

static void *m3d_ptr(void *arg) { return ((struct m3d_args *)arg)->out->ptr; }

cudaError_t gp_calls_malloc_3d(struct cudaPitchedPtr *out, struct cudaExtent extent)
{
	GP_REGISTRY_READER;
	const struct gp_registry *r = gp_registry_get();
	cudaError_t (*fn)(struct cudaPitchedPtr *, struct cudaExtent) = RT_FN(r, Malloc3D);
	if (!fn)
		return absent(r);
	size_t rows, guess = 0;
	if (off_refused(r))
		return refused(r, "cudaMalloc3D", 0, extent.width);
	int dev = !out || __builtin_mul_overflow(extent.height, extent.depth, &rows) ||
				  !pitch_guess(extent.width, rows, &guess)
			  ? -1
			  : counted_device(r);
	if (dev < 0)
		return fn(out, extent);
	struct m3d_args a = {out, extent};
	const struct rt_unpooled u = {&a, m3d_call, m3d_bytes, m3d_ptr};
	return unpooled_alloc(r, dev, guess, GP_BUDGET_PITCHED, "cudaMalloc3D", &u);
}

cudaError_t gp_calls_malloc_from_pool(void **ptr, size_t size, cudaMemPool_t pool, cudaStream_t s, bool ptsz)
{
	GP_REGISTRY_READER;
	const struct gp_registry *r = gp_registry_get();
	enum gp_call call = ptsz ? GP_CALL_ASYNC_PTSZ : GP_CALL_ASYNC;
	cudaError_t (*fn)(void **, size_t, cudaMemPool_t, cudaStream_t) =
		r->rt ? variant(r->rt, call)->MallocFromPoolAsync : NULL;
	if (!fn)
		return absent(r);
	if (off_refused(r))
		return refused(r, "cudaMallocFromPoolAsync", 0, size);
	if (r->off || gp_backend_guard_inside() || !ptr || !size || !pool)
		return fn(ptr, size, pool, s); /* the runtime's own answer */
	/* a pool made through gpupool knows its device; another (a device's default pool, one
	 * made before gpupool was loaded) is counted against the current device from now on */
	int dev = gp_unpooled_pool_device((uintptr_t)pool);
	if (dev < 0) {
		dev = current_device(r);
		if (dev < 0)
			return fn(ptr, size, pool, s);
		gp_unpooled_pool_made((uintptr_t)pool, dev);
	}
	return mempool_alloc(r, ptr, size, (uintptr_t)pool, true, s, call, dev);
}

cudaError_t gp_calls_mem_pool_create(cudaMemPool_t *pool, const struct cudaMemPoolProps *props)
{
	const struct gp_registry *r = gp_registry_get();
	cudaError_t (*fn)(cudaMemPool_t *, const struct cudaMemPoolProps *) = RT_FN(r, MemPoolCreate);
	if (!fn)
		return absent(r);
	gp_backend_guard_enter(); /* the runtime's cuMemPoolCreate is this one */
	cudaError_t e = fn(pool, props);
	gp_backend_guard_leave();
	if (e == cudaSuccess && !r->off && props && props->location.type == cudaMemLocationTypeDevice &&
	    props->location.id >= 0 && props->location.id < r->ndev)
		gp_unpooled_pool_made((uintptr_t)*pool, props->location.id);
	return e;
}

cudaError_t gp_calls_mem_pool_destroy(cudaMemPool_t pool)
{
	const struct gp_registry *r = gp_registry_get();
	cudaError_t (*fn)(cudaMemPool_t) = RT_FN(r, MemPoolDestroy);
	if (!fn)
		return absent(r);
	cudaError_t e = fn(pool);
	if (e == cudaSuccess)
		gp_unpooled_pool_destroyed((uintptr_t)pool);
	return e;
}

cudaError_t gp_calls_device_set_mem_pool(int dev, cudaMemPool_t pool)
{
	const struct gp_registry *r = gp_registry_get();
	cudaError_t (*fn)(int, cudaMemPool_t) = RT_FN(r, DeviceSetMemPool);
	if (!fn)
		return absent(r);
	cudaError_t e = fn(dev, pool);
	if (e == cudaSuccess)
		gp_unpooled_device_pool_set(dev, (uintptr_t)pool);
	return e;
}

/* A free of memory the pools do not hold: its record (managed, pitched, a program pool's)
 * counted back once the runtime freed it. */
static cudaError_t unpooled_free(const struct gp_registry *r, void *ptr, cudaStream_t s, enum gp_call call)
{
	struct gp_unpooled_rec rec;
	/* from exit on, nothing more is counted, nor asked of the program's pools */
	if (exiting(r) || !gp_unpooled_ptr_remove((uintptr_t)ptr, &rec))
		return real_free(r, ptr, s, call);
	gp_backend_guard_enter();
	cudaError_t e = real_free(r, ptr, s, call);
	gp_backend_guard_leave();
	if (e == cudaSuccess) {
		const struct gp_mempool_ops ops = rt_pool_ops(r->rt);
		gp_unpooled_freed(&rec, &ops);
	} else {
		gp_unpooled_ptr_put(&rec);
	}
	return e;
}

/* Exit has begun: the pools serve nothing more (the runtime is being torn down), but what
 * the program still allocates, from an exit handler or a thread that runs on, counts against
 * its device's caps until the process ends (a free from now on gives nothing back). */
static __attribute__((noinline, cold)) cudaError_t late_malloc(const struct gp_registry *r, void **ptr, size_t size,
								cudaStream_t s, enum gp_call call)
{
	int dev = ptr && size ? counted_device(r) : -1;
	int rc = dev < 0 ? -ERANGE : gp_unpooled_take(dev, size, GP_BUDGET_LATE);
	if (rc == -ERANGE)
		return real_malloc(r, ptr, size, s, call); /* nothing to count: the runtime's own answer */
	if (rc)
		return refused(r, call == GP_CALL_SYNC ? "cudaMalloc" : "cudaMallocAsync", dev, size);
	cudaError_t e = real_malloc(r, ptr, size, s, call);
	gp_unpooled_taken(dev, size, GP_BUDGET_LATE, e == cudaSuccess);
	return e;
}

cudaError_t gp_calls_malloc(void **ptr, size_t size, cudaStream_t s, enum gp_call call)
{
	GP_REGISTRY_READER;
	const struct gp_registry *r = gp_registry_get();
	if (__builtin_expect(exiting(r), 0) && !r->off)
		return late_malloc(r, ptr, size, s, call);
	bool off = r->off;
	const struct gp_route_facts f = {
		.off = off && !r->refuse, /* off with a cap set that it cannot apply: refused */
		.has_entry = off || call == GP_CALL_SYNC || variant(r->rt, call)->MallocAsync,
		.refuse = r->refuse,
		.args_ok = ptr && size,
	};
	const struct rt_call c = {r, s, call};
	int dev;
	void *pool;
	switch (gp_route_alloc(&f, &rt_ask, &c, &dev, &pool)) {
	case GP_ROUTE_POOL:
		break;
	case GP_ROUTE_PASS:
		return real_malloc(r, ptr, size, s, call);
	case GP_ROUTE_UNPOOLED: {
		cudaError_t e = real_malloc(r, ptr, size, s, call);
		gp_registry_count_passthrough(dev, true);
		return e;
	}
	case GP_ROUTE_ABSENT:
		return absent(r); /* a runtime without the stream-ordered allocator */
	case GP_ROUTE_REFUSE: /* left as the last error, as a failing cudaMalloc leaves its own */
		gp_last_error_set(r->rt, cudaErrorInvalidValue);
		return cudaErrorInvalidValue;
	}
	if (call != GP_CALL_SYNC && __builtin_expect(gp_unpooled_device_pool(dev) != 0, 0))
		return mempool_alloc(r, ptr, size, gp_unpooled_device_pool(dev), false, s, call, dev);
	gp_pool *p = pool;
	if (r->ndev > 1 && free_hint != dev)
		free_hint = dev;
	bool sync = call == GP_CALL_SYNC;
	gp_stream key = sync ? atomic_load_explicit(&r->sync_key, memory_order_relaxed)
			     : gp_cuda_stream_key(s, call == GP_CALL_ASYNC_PTSZ);
	if (!sync && __builtin_expect(gp_streamkey_tag(key) == GP_STREAMKEY_PTDS, 0))
		gp_registry_stream_seen(r, "used the per-thread default stream");
	uintptr_t a = 0;
	int rc = gp_ladder_alloc(p, dev, size, key, sync ? GP_TRACE_MALLOC : GP_TRACE_MALLOC_ASYNC, sync ? 0 : s, &a,
				 true);
	if (__builtin_expect(rc != 0, 0))
		return alloc_failed(r, dev, size, rc);
	*ptr = (void *)a;
	return cudaSuccess;
}

/* A cudaFreeAsync inside a stream capture: a free captured into a graph happens when the
 * graph runs, maybe never, so a pooled block cannot be reused by anyone until then and stays
 * allocated. True when `ptr` is a pooled block (kept, logged); false: not gpupool's. */
static __attribute__((noinline, cold)) bool captured_free_kept(const struct gp_registry *r, void *ptr)
{
	for (int d = 0; d < r->ndev; d++) {
		gp_pool *q = atomic_load(&r->pools[d]);
		struct gp_block_info bi;
		if (q && gp_pool_lookup(q, (uintptr_t)ptr, &bi) == 0) {
			gp_log(GP_LOG_WARN, "cudaFreeAsync(%p) inside a stream capture: gpupool keeps the block "
					    "allocated (free it with cudaFree after the capture to reuse it)", ptr);
			return true;
		}
	}
	return false;
}

cudaError_t gp_calls_free(void *ptr, cudaStream_t s, enum gp_call call)
{
	GP_REGISTRY_READER;
	const struct gp_registry *r = gp_registry_get();
	if (r->off || !ptr)
		return real_free(r, ptr, s, call); /* cudaFree(0) initialises the context */
	if (call != GP_CALL_SYNC && !variant(r->rt, call)->FreeAsync)
		return absent(r); /* a runtime without the stream-ordered allocator */
	uint64_t t0 = r->tracing ? gp_trace_now_ns() : 0;
	int first = r->ndev == 1 ? 0 : free_hint;
	gp_stream key = call == GP_CALL_SYNC ? atomic_load_explicit(&r->sync_key, memory_order_relaxed)
					     : gp_cuda_stream_key(s, call == GP_CALL_ASYNC_PTSZ);
	if (call != GP_CALL_SYNC && __builtin_expect(gp_streamkey_tag(key) == GP_STREAMKEY_PTDS, 0))
		gp_registry_stream_seen(r, "used the per-thread default stream");
	int rc = -ENOENT, owner = -1;
	gp_pool *p = atomic_load_explicit(&r->pools[first], memory_order_acquire);
	if (p && capture_possible(r, call)) {
		bool cap;
		cudaError_t ce = capturing(r, s, call, &cap);
		if (ce != cudaSuccess)
			return ce; /* an invalid stream: the native call fails the same way */
		if (cap && captured_free_kept(r, ptr))
			return cudaSuccess;
	}
	if (p) {
		rc = gp_pool_free(p, (uintptr_t)ptr, key);
		owner = first;
	}
	for (int d = 0; rc == -ENOENT && d < r->ndev; d++) {
		gp_pool *q = d == first ? NULL : atomic_load_explicit(&r->pools[d], memory_order_acquire);
		if (q) {
			rc = gp_pool_free(q, (uintptr_t)ptr, key);
			owner = d;
		}
	}
	cudaError_t e = cudaSuccess;
	if (rc == 0)
		gp_waitq_note_free(owner); /* while others wait, what is freed goes to them */
	if (rc == -ENOENT) {
		int dev = current_device(r);
		e = unpooled_free(r, ptr, s, call);
		gp_registry_count_passthrough(dev, false);
	} else if (rc == -EALREADY) {
		gp_log(GP_LOG_WARN, "%s(%p): not a live allocation (double free, or a pointer inside a block); "
				    "ignored, returning cudaErrorInvalidValue",
		       call == GP_CALL_SYNC ? "cudaFree" : "cudaFreeAsync", ptr);
		e = cudaErrorInvalidValue;
		gp_last_error_set(r->rt, e);
	} else if (key == GP_NO_STREAM) {
		gp_fence_thread_wake();
	}
	if (r->tracing && rc != -ENOENT)
		gp_registry_trace(call == GP_CALL_SYNC ? GP_TRACE_FREE : GP_TRACE_FREE_ASYNC, owner,
				  call == GP_CALL_SYNC ? 0 : s, 0, ptr, t0, e);
	return e;
}

cudaError_t gp_calls_mem_get_info(size_t *free_bytes, size_t *total_bytes)
{
	GP_REGISTRY_READER;
	const struct gp_registry *r = gp_registry_get();
	if (r->off || exiting(r)) {
		cudaError_t (*fn)(size_t *, size_t *) = RT_FN(r, MemGetInfo);
		return fn ? fn(free_bytes, total_bytes) : absent(r);
	}
	if (!free_bytes || !total_bytes)
		return r->rt->MemGetInfo(free_bytes, total_bytes);
	int dev = current_device(r);
	gp_pool *p = dev >= 0 ? atomic_load(&r->pools[dev]) : NULL;
	if (p) {
		size_t f, t;
		if (gp_pool_mem_info(p, &f, &t) == 0) {
			const struct gpupool_device_stats *st = gp_registry_slot(r, dev);
			gp_group_budget_clamp(dev, st ? (size_t)__atomic_load_n(&st->cached_bytes, __ATOMIC_RELAXED) : 0, &f, &t);
			*free_bytes = f;
			*total_bytes = t;
			return cudaSuccess;
		}
		return r->rt->MemGetInfo(free_bytes, total_bytes);
	}
	cudaError_t e = r->rt->MemGetInfo(free_bytes, total_bytes);
	size_t lim = e == cudaSuccess ? gp_config_device_limit(&r->cfg, dev, *total_bytes) : 0;
	if (lim) {
		/* no pool yet: the limit is all this process will get */
		if (lim < *total_bytes)
			*total_bytes = lim;
		if (*free_bytes > *total_bytes)
			*free_bytes = *total_bytes;
	}
	return e;
}

cudaError_t gp_calls_ipc_get_mem_handle(cudaIpcMemHandle_t *handle, void *ptr)
{
	GP_REGISTRY_READER;
	const struct gp_registry *r = gp_registry_get();
	cudaError_t (*fn)(cudaIpcMemHandle_t *, void *) = RT_FN(r, IpcGetMemHandle);
	if (!fn)
		return absent(r);
	if (r->off || !ptr)
		return fn(handle, ptr);
	for (int d = 0; d < r->ndev; d++) {
		gp_pool *p = atomic_load(&r->pools[d]);
		struct gp_block_info bi;
		if (!p)
			continue;
		if (gp_pool_lookup(p, (uintptr_t)ptr, &bi) != 0) {
			if (!gp_pool_owns(p, (uintptr_t)ptr))
				continue;
			/* inside a segment, in no live block (freed): nothing to export, as natively;
			 * the runtime would export the whole segment */
			gp_last_error_set(r->rt, cudaErrorInvalidValue);
			return cudaErrorInvalidValue;
		}
		if (bi.vmm) {
			/* the runtime refuses memory of the driver's virtual memory API too: the same
			 * answer, said */
			gp_log(GP_LOG_ERROR,
			       "cudaIpcGetMemHandle(%p): a %zu-byte pooled block of virtual memory (GPUPOOL_CONF segments:%s) "
			       "cannot be exported with an IPC handle; refusing with cudaErrorInvalidValue. With segments:auto "
			       "a cudaMalloc of at least medium_max (now %zu bytes) gets a whole segment that can be; with "
			       "segments:whole every large one does",
			       ptr, (size_t)bi.size, gp_config_segments_name(r->cfg.segments), r->cfg.medium_max);
			gp_last_error_set(r->rt, cudaErrorInvalidValue);
			return cudaErrorInvalidValue;
		}
		if (bi.addr == (uintptr_t)ptr && bi.addr == bi.segment && bi.size == bi.segment_size)
			return r->rt->IpcGetMemHandle(handle, ptr); /* the block is its whole segment */
		/* the handle would name the whole segment: the other process would map other
		 * bytes at the address it gets */
		gp_log(GP_LOG_ERROR,
		       "cudaIpcGetMemHandle(%p): a %zu-byte pooled block at offset %zu of a %zu-byte segment cannot be "
		       "exported (the handle would share the whole segment); refusing with cudaErrorInvalidValue. "
		       "An allocation of at least GPUPOOL_CONF medium_max (now %zu bytes) that the pool grows for is a "
		       "whole segment: lower it (e.g. medium_max:1M) for smaller ones, or run with GPUPOOL_DISABLE=1",
		       ptr, (size_t)bi.size, (size_t)((uintptr_t)ptr - bi.segment), (size_t)bi.segment_size,
		       r->cfg.medium_max);
		gp_last_error_set(r->rt, cudaErrorInvalidValue);
		return cudaErrorInvalidValue;
	}
	return r->rt->IpcGetMemHandle(handle, ptr);
}

cudaError_t gp_calls_begin_capture(cudaStream_t s, enum cudaStreamCaptureMode mode, bool ptsz)
{
	const struct gp_registry *r = gp_registry_get();
	cudaError_t (*begin)(cudaStream_t, enum cudaStreamCaptureMode) =
		r->rt ? r->rt->variant[ptsz ? GP_RT_PTSZ : GP_RT_PLAIN].StreamBeginCapture : NULL;
	if (!begin)
		return absent(r);
	if (r->off)
		return begin(s, mode);
	gp_capture_begin();
	cudaError_t e = begin(s, mode);
	if (e != cudaSuccess)
		gp_capture_end();
	return e;
}

cudaError_t gp_calls_end_capture(cudaStream_t s, cudaGraph_t *graph, bool ptsz)
{
	const struct gp_registry *r = gp_registry_get();
	const struct gp_runtime_streamed *v = r->rt ? &r->rt->variant[ptsz ? GP_RT_PTSZ : GP_RT_PLAIN] : NULL;
	if (!v || !v->StreamEndCapture)
		return absent(r);
	if (r->off)
		return v->StreamEndCapture(s, graph);
	/* (the pool runs only where a variant that ends captures can say whether one runs) */
	enum cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
	cudaError_t q = v->StreamIsCapturing ? v->StreamIsCapturing(s, &cs) : cudaErrorNotSupported;
	cudaError_t e = v->StreamEndCapture(s, graph);
	/* the capture is over whatever EndCapture says, if it was one */
	if (q != cudaSuccess || cs != cudaStreamCaptureStatusNone)
		gp_capture_end();
	return e;
}

cudaError_t gp_calls_stream_destroy(cudaStream_t s)
{
	GP_REGISTRY_READER;
	const struct gp_registry *r = gp_registry_get();
	cudaError_t (*fn)(cudaStream_t) = RT_FN(r, StreamDestroy);
	if (!fn)
		return absent(r);
	if (!r->off && s && s != cudaStreamLegacy && s != cudaStreamPerThread) {
		gp_stream key = gp_cuda_stream_key(s, false);
		for (int d = 0; d < r->ndev; d++) {
			gp_pool *p = atomic_load(&r->pools[d]);
			if (p)
				gp_pool_stream_retire(p, key);
		}
		if (r->cfg.fence_marker)
			gp_cuda_stream_destroying(r->rt, s);
		gp_fence_thread_wake();
	}
	return fn(s);
}

cudaError_t gp_calls_stream_create(cudaStream_t *s, unsigned flags, int priority, enum gp_stream_create how)
{
	GP_REGISTRY_READER;
	const struct gp_registry *r = gp_registry_get();
	cudaError_t e;
	if (how == GP_STREAM_CREATE) {
		cudaError_t (*fn)(cudaStream_t *) = RT_FN(r, StreamCreate);
		e = fn ? fn(s) : absent(r);
	} else if (how == GP_STREAM_CREATE_FLAGS) {
		cudaError_t (*fn)(cudaStream_t *, unsigned) = RT_FN(r, StreamCreateWithFlags);
		e = fn ? fn(s, flags) : absent(r);
	} else {
		cudaError_t (*fn)(cudaStream_t *, unsigned, int) = RT_FN(r, StreamCreateWithPriority);
		e = fn ? fn(s, flags, priority) : absent(r);
	}
	/* a non-blocking stream is not covered by the legacy stream: markers record on it too */
	if (e == cudaSuccess && !r->off && r->cfg.fence_marker && how != GP_STREAM_CREATE)
		gp_cuda_stream_created(r->rt, *s, flags);
	if (e == cudaSuccess && !r->off)
		gp_registry_stream_seen(r, "created a stream");
	return e;
}

/* ---- the driver's entry points as the runtime hands them out ----------------------------
 * A dynamic runtime holds the real driver: gpupool's dlsym gives libcudart the driver's own
 * cuGetProcAddress (hooks/dlsym.c), so that the pools' segments, which the runtime layer
 * takes with the runtime's cudaMalloc, never come back through the driver layer. What the
 * runtime hands the program through cudaGetDriverEntryPoint(ByVersion) is therefore the
 * driver's own entry point, past gpupool (PyTorch's driver table and expandable segments,
 * TransformerEngine, NCCL take cuMemCreate & co. this way). The runtime is asked; where its
 * answer succeeded with an entry point that stands for a name the driver layer interposes,
 * the program gets gpupool's entry point for exactly that one (entries.h), with the
 * runtime's code and status unchanged. Every other answer, a failed one included, is the
 * runtime's as it is. */
cudaError_t gp_calls_get_driver_entry_point(const char *symbol, void **fn, unsigned version, bool by_version,
					    unsigned long long flags, enum cudaDriverEntryPointQueryResult *status,
					    bool ptsz, const struct gp_entries *t)
{
	const struct gp_registry *r = gp_registry_get();
	enum gp_runtime_variant v = ptsz ? GP_RT_PTSZ : GP_RT_PLAIN;
	cudaError_t e;
	int asked = 0; /* the version the runtime asked the driver for: 0 when unknown */
	/* cudaGetDriverEntryPoint asks the driver for the runtime's own version (CUDART_VERSION) */
	if (!by_version && r->rt && (!r->rt->RuntimeGetVersion || r->rt->RuntimeGetVersion(&asked) != cudaSuccess))
		asked = 0; /* unknown: matched by address only */
	/* a CUDA 11 runtime's entry point has no driverStatus, nor has its caller */
	if (!by_version && asked > 0 && asked < 12000)
		status = NULL;
	if (by_version) {
		cudaError_t (*get)(const char *, void **, unsigned, unsigned long long,
				   enum cudaDriverEntryPointQueryResult *) = RT_FN(r, GetDriverEntryPointByVersion[v]);
		if (!get)
			return absent(r);
		e = get(symbol, fn, version, flags, status);
		asked = version > INT_MAX ? INT_MAX : (int)version;
	} else {
		cudaError_t (*get)(const char *, void **, unsigned long long, enum cudaDriverEntryPointQueryResult *) =
			RT_FN(r, GetDriverEntryPoint[v]);
		if (!get)
			return absent(r);
		e = get(symbol, fn, flags, status);
	}
	if (e != cudaSuccess || !fn || !*fn || !symbol || (status && *status != cudaDriverEntryPointSuccess) ||
	    r->drv_off)
		return e;
	/* the per-thread variants: asked for, or the default of the _ptsz entry point */
	bool per_thread = (flags & cudaEnablePerThreadDefaultStream) ||
			  (ptsz && !(flags & (cudaEnableLegacyStream | cudaEnablePerThreadDefaultStream)));
	void *ours = gp_entries_for_answer(t, gp_libcuda_get(), symbol, *fn, asked, per_thread);
	if (ours)
		*fn = ours;
	return e;
}

cudaError_t gp_calls_device_reset(void)
{
	const struct gp_registry *r = gp_registry_get();
	cudaError_t (*fn)(void) = RT_FN(r, DeviceReset);
	if (!fn)
		return absent(r);
	int dev = r->off ? -1 : current_device(r);
	if (dev < 0)
		return fn();
	/* act on what the runtime did: the pool goes only when the reset succeeded */
	gp_registry_reset_begin(dev);
	gp_cuda_device_reset_begin(r->rt, dev);
	cudaError_t e = fn();
	if (e == cudaSuccess) {
		/* inside the reset gate (driver_calls.c's reset_end says why) */
		gp_budget_pool_gone(dev);
		gp_unpooled_device_reset(dev);
		gp_cuda_device_reset_done(dev);
	}
	gp_registry_reset_end(dev, e == cudaSuccess);
	if (e == cudaSuccess)
		gp_unpooled_refresh(dev); /* what survives a reset, in the slot the retirement zeroed */
	return e;
}

/* ---- public API ------------------------------------------------------------------------ */

long long gp_calls_release(int device)
{
	GP_REGISTRY_READER;
	/* the pools serve both layers: on while either layer is */
	const struct gp_registry *r = gp_registry_get_driver();
	if (r->off && r->drv_off)
		return -ENOSYS;
	if (device < -1 || device >= r->ndev)
		return -ENODEV;
	return gp_registry_release(device);
}

int gp_calls_trace_flush(char *path, size_t len)
{
	const struct gp_registry *r = gp_registry_get();
	if (r->off)
		return -ENOSYS;
	if (!r->tracing)
		return -ENOENT;
	int rc = gp_trace_flush();
	if (rc == 0 && path && len) {
		size_t n = strlen(r->cfg.trace);
		if (n >= len)
			return -ERANGE;
		memcpy(path, r->cfg.trace, n + 1);
	}
	return rc;
}

int gp_calls_stats(int device, struct gpupool_device_stats *out)
{
	GP_REGISTRY_READER;
	const struct gp_registry *r = gp_registry_get_driver();
	if (r->off && r->drv_off)
		return -ENOSYS;
	if (device < 0 || device >= r->ndev || !atomic_load(&r->pools[device]))
		return -ENODEV;
	uint64_t deadline = gp_clock_ns(CLOCK_MONOTONIC) + GP_CALLS_STATS_PATIENCE_NS;
	return gp_statpage_snapshot_until(gp_registry_slot(r, device), out, deadline) ? 0 : -EAGAIN;
}
