/* The real driver's entry points (libcuda.h): from the libcuda.so.1 the process has loaded,
 * through the real dlsym (glibc's, found here once) on its handle, looked for again on each
 * call until it is loaded. Owns the table and the real dlsym; depends on the log only. */
#include "libcuda.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <string.h>

#include "log.h"
#include "port.h"
#include "rank.h"

/* ---- the real dlsym -------------------------------------------------------------------- */

/* The real dlsym; read by the hooks' trampoline (hidden, so no GOT). */
__attribute__((visibility("hidden"))) gp_dlsym_fn gp_dlsym_next;

GP_PORT_EARLY static void *no_dlsym(void *handle, const char *name)
{
	(void)handle, (void)name;
	return NULL;
}

/* glibc 2.34 moved dlsym into libc under a new version; older glibc (and programs built
 * against it) have it at GLIBC_2.2.5 (x86-64) or GLIBC_2.17 (aarch64). */
GP_PORT_EARLY static gp_dlsym_fn next_dlsym(void)
{
	gp_dlsym_fn f = __atomic_load_n(&gp_dlsym_next, __ATOMIC_ACQUIRE);
	if (__builtin_expect(f != NULL, 1))
		return f;
	static const char *const versions[] = {"GLIBC_2.34", "GLIBC_2.2.5", "GLIBC_2.17"};
	void *s = NULL;
	for (size_t i = 0; !s && i < sizeof versions / sizeof versions[0]; i++)
		s = dlvsym(RTLD_NEXT, "dlsym", versions[i]);
	if (s)
		memcpy(&f, &s, sizeof f);
	else
		f = no_dlsym; /* never seen: every glibc has one of them */
	__atomic_store_n(&gp_dlsym_next, f, __ATOMIC_RELEASE);
	return f;
}

void *gp_dlsym_real(void *handle, const char *name) { return next_dlsym()(handle, name); }

GP_PORT_EARLY void gp_dlsym_real_resolve(void) { (void)next_dlsym(); }

/* ---- the driver's table ---------------------------------------------------------------- */

static struct gp_driver drv;            /* written under `lock` until `found` */
static atomic_bool found;
static _Atomic(void *) handle;          /* the loaded libcuda's dlopen handle */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static void resolve(void *h)
{
#define SYM_(name)                                                   \
	do {                                                         \
		void *s_ = gp_dlsym_real(h, #name);                  \
		memcpy(&drv.name, &s_, sizeof s_);                   \
	} while (0);
	GP_DRIVER_HOOKED(SYM_)
	GP_DRIVER_USED(SYM_)
#undef SYM_
}

/* One line at info level: the driver's file and version (cuDriverGetVersion needs no
 * cuInit). */
static void log_found(void *h)
{
	Dl_info info;
	void *m;
	memcpy(&m, &drv.cuMemAlloc_v2, sizeof m);
	const char *path = m && dladdr(m, &info) && info.dli_fname ? info.dli_fname : "libcuda.so.1";
	CUresult (*version)(int *) = NULL;
	void *s = gp_dlsym_real(h, "cuDriverGetVersion");
	memcpy(&version, &s, sizeof s);
	int v = 0;
	if (version && version(&v) == CUDA_SUCCESS && v > 0)
		gp_log(GP_LOG_INFO, "CUDA driver %d.%d, from %s", v / 1000, v % 1000 / 10, path);
	else
		gp_log(GP_LOG_INFO, "CUDA driver of unknown version, from %s", path);
}

const struct gp_driver *gp_libcuda_get(void)
{
	if (__builtin_expect(atomic_load_explicit(&found, memory_order_acquire), 1))
		return &drv;
	gp_mutex_lock(&lock, GP_RANK_LIBCUDA_TABLE);
	if (!atomic_load_explicit(&found, memory_order_relaxed)) {
		/* by soname: a libcuda.so.1 loaded from any directory (or as libcuda.so) matches */
		void *h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
		if (h) {
			resolve(h);
			atomic_store_explicit(&handle, h, memory_order_relaxed);
			atomic_store_explicit(&found, true, memory_order_release);
			log_found(h);
		}
	}
	bool ok = atomic_load_explicit(&found, memory_order_relaxed);
	gp_mutex_unlock(&lock, GP_RANK_LIBCUDA_TABLE);
	return ok ? &drv : NULL;
}

bool gp_libcuda_is_handle(void *h)
{
	if (!h)
		return false;
	if (!atomic_load_explicit(&found, memory_order_acquire) && !gp_libcuda_get())
		return false;
	return h == atomic_load_explicit(&handle, memory_order_relaxed);
}

void *gp_libcuda_handle(void) { return gp_libcuda_get() ? atomic_load_explicit(&handle, memory_order_relaxed) : NULL; }

const char *gp_libcuda_lacks(const struct gp_driver *d)
{
	static const struct {
		size_t off;
		const char *name;
	} needed[] = {
#define NEED(name) {offsetof(struct gp_driver, name), #name}
		NEED(cuMemAlloc_v2), NEED(cuMemFree_v2), NEED(cuMemGetInfo_v2), NEED(cuDeviceGetCount),
		NEED(cuCtxGetCurrent), NEED(cuCtxGetDevice), NEED(cuDevicePrimaryCtxRetain),
		NEED(cuDevicePrimaryCtxRelease_v2), NEED(cuDevicePrimaryCtxGetState), NEED(cuCtxPushCurrent_v2),
		NEED(cuCtxPopCurrent_v2), NEED(cuCtxSynchronize),
#undef NEED
	};
	for (size_t i = 0; i < sizeof needed / sizeof needed[0]; i++) {
		void *fn;
		memcpy(&fn, (const char *)d + needed[i].off, sizeof fn);
		if (!fn)
			return needed[i].name;
	}
	/* a driver that begins captures must say when one ends and whether one runs */
	if ((d->cuStreamBeginCapture_v2 || d->cuStreamBeginCapture) && (!d->cuStreamEndCapture || !d->cuStreamIsCapturing))
		return !d->cuStreamEndCapture ? "cuStreamEndCapture" : "cuStreamIsCapturing";
	return NULL;
}

void gp_libcuda_after_fork(void) { pthread_mutex_init(&lock, NULL); }
