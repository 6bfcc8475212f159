/* The registry's initialisation (registry.h): the configuration parsed once, the runtime
 * or the driver found and settled, the backend the pools get. Owns R, the registry the
 * hooks read; must not depend on the hook bodies or the PyTorch entry points. No CUDA call
 * in a constructor or at exit. */
#include "registry.h"
#include "registry_internal.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "backend_cuda.h"
#include "backend_driver.h"
#include "backend_guard.h"
#include "backend_vmm.h"
#include "budget.h"
#include "capture.h"
#include "group_budget.h"
#include "libcuda.h"
#include "log.h"
#include "rank.h"
#include "statpage.h"

static pthread_once_t once = PTHREAD_ONCE_INIT;
static struct gp_registry R;        /* complete once have_runtime */
static struct gp_registry R_absent; /* what the hooks get while the process has no runtime */
static atomic_bool have_runtime;    /* R.rt and what depends on it are set: R is final */
static atomic_bool have_driver;     /* R was settled over the driver, with no runtime (yet) */
static pthread_mutex_t runtime_lock = PTHREAD_MUTEX_INITIALIZER; /* finding the runtime */
static struct gp_backend backend; /* over R.rt, set with it (or over the driver) */
static struct gp_backend guarded; /* `backend` as the pools get it (backend_guard.h), set with it */

struct gp_registry *gp_registry_self(void) { return &R; }

const struct gp_backend *gp_registry_backend(void) { return &guarded; }

static const char *env_get(const char *name) { return getenv(name); }

/* The group's view of a device (group_budget.h): its size from the page (the device's
 * figure, recorded with its pool) or else the backend, and its UUID from the page (the
 * driver's, or the runtime's where the driver is not loaded where gpupool can see it), else
 * the driver's. */
static int group_facts(int device, unsigned char uuid[16], size_t *total, bool need_total)
{
	const struct gpupool_device_stats *st = device < R.ndev ? gp_registry_slot(&R, device) : NULL;
	size_t t = st ? (size_t)__atomic_load_n(&st->device_total_bytes, __ATOMIC_RELAXED) : 0, f;
	/* a backend call as a segment's, with the same locks held */
	if (need_total && !t && guarded.mem_info(guarded.ctx, device, &f, &t) != 0)
		t = 0;
	*total = t;
	if (st && gp_statpage_uuid_known(st)) {
		memcpy(uuid, st->uuid, GPUPOOL_UUID_LEN);
		return 0;
	}
	return gp_libcuda_device_uuid(device, uuid) == 0 ? 0 : -EAGAIN;
}

static void init_once(void)
{
	/* bad knobs are logged against a budget of their own (log.h) */
	enum gp_log_kind kind = gp_log_kind_set(GP_LOG_CONFIG);
	int rc = gp_config_parse(&R.cfg, env_get);
	gp_log_kind_set(kind);
	gp_log_set_level(R.cfg.log_level);
	gp_config_log_notes(&R.cfg); /* what was taken from a scheduler's variables, at info level */
	gp_group_budget_install(&R.cfg, group_facts);
	/* strict mode with a bad value, or a cap that cannot be applied as asked: refused, every
	 * path (the pools' by the routing decision, the unpooled ones by the budget) */
	R.refuse = !R.cfg.disable && (rc != 0 || R.cfg.cap_refused);
	if (R.refuse)
		gp_budget_close(-1);
	R.captures = gp_capture_counter();
	atomic_init(&R.sync_key, R.cfg.legacy_stream ? (gp_stream)0 : GP_NO_STREAM);
	R.off = true; /* until a runtime is found (use_runtime) */
	R.drv_off = true; /* until a runtime or the driver is found */
	if (R.refuse)
		gp_log(GP_LOG_ERROR, "%s %s%s: every allocation fails (cudaErrorInvalidValue, CUDA_ERROR_INVALID_VALUE) "
				     "until it is fixed",
		       R.cfg.bad_vars, strchr(R.cfg.bad_vars, ',') ? "have bad values" : "has a bad value",
		       rc != 0 ? " and strict mode is on" : ", and a cap that cannot be applied as asked is not dropped");
	/* what the hooks see while the process has no runtime: no table, off */
	R_absent = R;
	gp_registry_lifecycle_init();
}

/* A cap is set (a limit, a scheduler's limit, a group): one that an API gpupool cannot
 * serve does not apply, which is said, not left to be found when the GPU is full. */
static bool capped(const struct gp_config *c)
{
	bool any = c->limit_bytes || c->limit_percent || c->group[0];
	for (int d = 0; d < GP_CONFIG_MAX_DEVICES && !any; d++)
		any = c->limit_device[d] != 0;
	return any;
}

/* CUDA lacks `lacks`: gpupool is off for that API, and the caps set cannot be applied to
 * it (a runtime's allocations need not reach the driver layer): every allocation is refused
 * rather than run without them. */
static void say_off(const char *api, const char *lacks, const char *what)
{
	if (capped(&R.cfg)) {
		R.refuse = true; /* a cap that cannot be applied as asked is not dropped */
		gp_budget_close(-1);
		gp_log(GP_LOG_ERROR, "the CUDA %s lacks %s, which the pool needs, so the caps set (limit, group) cannot "
				     "be applied: every allocation fails (cudaErrorInvalidValue, CUDA_ERROR_INVALID_VALUE); "
				     "every other %s goes to it unchanged",
		       api, lacks, what);
	} else {
		gp_log(GP_LOG_WARN, "the CUDA %s lacks %s, which the pool needs; gpupool is off: every %s goes to it "
				    "unchanged",
		       api, lacks, what);
	}
}

/* The runtime is found: R gets it and what depends on it. Once, under runtime_lock. */
static void use_runtime(const struct gp_runtime *rt)
{
	R.rt = rt;
	/* settled over the driver before: the pools exist, with the driver's backend, and
	 * stay as they are; the runtime's calls join them */
	bool over_driver = atomic_load_explicit(&have_driver, memory_order_relaxed);
	if (!over_driver) {
		gp_cuda_backend_init(&backend, rt);
		gp_vmm_backend_add(&backend); /* the driver the runtime loads */
		gp_backend_guard_init(&guarded, &backend);
	}
	const char *lacks = gp_runtime_lacks(rt);
	R.off = R.cfg.disable || lacks || (over_driver && R.drv_off);
	if (lacks && !R.cfg.disable)
		say_off("runtime", lacks, "call");
	if (!over_driver)
		R.drv_off = R.off;
	if (!R.off)
		gp_log(GP_LOG_INFO, "layers: the CUDA runtime (%s backend)%s", over_driver ? "driver" : "runtime",
		       R.drv_off ? "" : " and the driver API (libcuda.so.1, when the process loads it)");
	if (R.off || over_driver)
		return;
	if (!rt->variant[GP_RT_PLAIN].MallocAsync)
		gp_log(GP_LOG_INFO, "the CUDA runtime has no cudaMallocAsync: gpupool pools cudaMalloc only");
	int n = 0;
	if (rt->GetDeviceCount(&n) != cudaSuccess || n <= 0)
		n = 1;
	/* cudaGetDeviceCount may fail before a driver is found; clear what it left */
	(void)rt->GetLastError();
	R.ndev = n > GPUPOOL_MAX_DEVICES ? GPUPOOL_MAX_DEVICES : n;
	if (n > GPUPOOL_MAX_DEVICES)
		gp_log(GP_LOG_WARN, "%d devices: gpupool pools the first %d and passes the rest through", n,
		       GPUPOOL_MAX_DEVICES);
}

/* The driver, with no runtime in the process: R gets the driver's backend and device count.
 * Once, under runtime_lock. */
static void use_driver(const struct gp_driver *d)
{
	const char *lacks = gp_libcuda_lacks(d);
	R.drv_off = R.cfg.disable || lacks;
	if (lacks && !R.cfg.disable)
		say_off("driver", lacks, "driver call");
	if (R.drv_off)
		return;
	gp_driver_backend_init(&backend, d);
	gp_vmm_backend_add(&backend);
	gp_backend_guard_init(&guarded, &backend);
	int n = 0;
	if (d->cuDeviceGetCount((int *)&n) != CUDA_SUCCESS || n <= 0)
		n = 1;
	R.ndev = n > GPUPOOL_MAX_DEVICES ? GPUPOOL_MAX_DEVICES : n;
	gp_log(GP_LOG_INFO, "layers: the driver API (libcuda.so.1; no CUDA runtime loaded, the pool's segments come "
			    "from cuMemAlloc)");
}

/* Settles the registry for the driver layer: over the runtime when the process has one,
 * else over the driver. True once either is found. */
static bool driver_settle(void)
{
	gp_mutex_lock(&runtime_lock, GP_RANK_REGISTRY_INIT);
	bool ok = atomic_load_explicit(&have_runtime, memory_order_relaxed) ||
		  atomic_load_explicit(&have_driver, memory_order_relaxed);
	if (!ok) {
		const struct gp_runtime *rt = gp_runtime_get();
		const struct gp_driver *d = rt ? NULL : gp_libcuda_get();
		if (rt) {
			use_runtime(rt);
			atomic_store_explicit(&have_runtime, true, memory_order_release);
			ok = true;
		} else if (d) {
			use_driver(d);
			atomic_store_explicit(&have_driver, true, memory_order_release);
			ok = true;
		}
	}
	gp_mutex_unlock(&runtime_lock, GP_RANK_REGISTRY_INIT);
	return ok;
}

const struct gp_registry *gp_registry_get_driver(void)
{
	pthread_once(&once, init_once);
	if (__builtin_expect(atomic_load_explicit(&have_runtime, memory_order_acquire) ||
				     atomic_load_explicit(&have_driver, memory_order_acquire),
			     1))
		return &R;
	return driver_settle() ? &R : &R_absent;
}

/* Looks for the runtime again (a call while the process had none): true once found. */
static bool runtime_settle(void)
{
	gp_mutex_lock(&runtime_lock, GP_RANK_REGISTRY_INIT);
	bool ok = atomic_load_explicit(&have_runtime, memory_order_relaxed);
	if (!ok) {
		const struct gp_runtime *rt = gp_runtime_get();
		if (rt) {
			use_runtime(rt);
			atomic_store_explicit(&have_runtime, true, memory_order_release);
			ok = true;
		}
	}
	gp_mutex_unlock(&runtime_lock, GP_RANK_REGISTRY_INIT);
	return ok;
}

const struct gp_registry *gp_registry_get(void)
{
	/* have_runtime is set (release) only by runtime_settle, which runs after init_once has
	 * returned: reading it true (acquire) shows R final, so the once-check is skipped (a
	 * call into the C library on every hooked call). A forked child keeps it and R. */
	if (__builtin_expect(atomic_load_explicit(&have_runtime, memory_order_acquire), 1))
		return &R;
	pthread_once(&once, init_once);
	return runtime_settle() ? &R : &R_absent;
}

void gp_registry_init_after_fork(void) { pthread_mutex_init(&runtime_lock, NULL); }
