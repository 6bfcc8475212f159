/* The real driver's entry points (libcuda.h): from the libcuda.so.1 the process has loaded,
 * through the real dlsym on its handle, looked for again on each call until it is loaded.
 * Owns the table only; depends on dlsym.h and the log. */
#include "libcuda.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <string.h>

#include "dlsym.h"
#include "log.h"

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

const struct gp_driver *gp_driver_get(void)
{
	if (__builtin_expect(atomic_load_explicit(&found, memory_order_acquire), 1))
		return &drv;
	pthread_mutex_lock(&lock);
	if (!atomic_load_explicit(&found, memory_order_relaxed)) {
		/* by soname: a libcuda.so.1 loaded from any directory (or as libcuda.so) matches */
		void *h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
		if (h) {
			resolve(h);
			atomic_store_explicit(&handle, h, memory_order_relaxed);
			atomic_store_explicit(&found, true, memory_order_release);
			gp_log(GP_LOG_DEBUG, "CUDA driver (libcuda.so.1) found");
		}
	}
	bool ok = atomic_load_explicit(&found, memory_order_relaxed);
	pthread_mutex_unlock(&lock);
	return ok ? &drv : NULL;
}

bool gp_driver_is_handle(void *h)
{
	if (!h)
		return false;
	if (!atomic_load_explicit(&found, memory_order_acquire) && !gp_driver_get())
		return false;
	return h == atomic_load_explicit(&handle, memory_order_relaxed);
}

void *gp_driver_handle(void) { return gp_driver_get() ? atomic_load_explicit(&handle, memory_order_relaxed) : NULL; }

const char *gp_driver_lacks(const struct gp_driver *d)
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

void gp_driver_after_fork(void) { pthread_mutex_init(&lock, NULL); }
