/* The real driver's entry points (libcuda.h): from the libcuda.so.1 the process has loaded,
 * through the real dlsym (the next one after gpupool, found here once) on its handle, looked
 * for again on each call until it is loaded. Owns the table and the real dlsym; depends on
 * the log only. */
#include "libcuda.h"

#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "log.h"
#include "port.h"
#include "rank.h"

/* ---- the real dlsym -------------------------------------------------------------------- */

GP_PORT_EARLY bool gp_dlsym_is_ours(const void *addr)
{
	uintptr_t a = (uintptr_t)addr;
	return a >= (uintptr_t)__ehdr_start && a < (uintptr_t)_end;
}

/* Written once, atomically, by each thread that races to find them (all write the same
 * values), `libc` before `next`: a reader that sees `next` sees `libc`. */
static struct gp_dlsyms dl;

GP_PORT_EARLY static void *no_dlsym(void *handle, const char *name)
{
	(void)handle, (void)name;
	return NULL;
}

GP_PORT_EARLY struct gp_dlsyms gp_dlsyms(void)
{
	gp_dlsym_fn next = __atomic_load_n(&dl.next, __ATOMIC_ACQUIRE);
	if (__builtin_expect(next != NULL, 1))
		return (struct gp_dlsyms){__atomic_load_n(&dl.libc, __ATOMIC_RELAXED), next};
	/* glibc's: glibc 2.34 moved dlsym into libc under a new version; older glibc (and
	 * programs built against it) have it at GLIBC_2.2.5 (x86-64) or GLIBC_2.17 (aarch64).
	 * dlvsym insists on the version, so another interposer's unversioned dlsym is skipped. */
	static const char *const versions[] = {"GLIBC_2.34", "GLIBC_2.2.5", "GLIBC_2.17"};
	void *s = NULL;
	for (size_t i = 0; !s && i < sizeof versions / sizeof versions[0]; i++)
		s = dlvsym(RTLD_NEXT, "dlsym", versions[i]);
	gp_dlsym_fn libc = no_dlsym; /* never seen: every glibc has one of them */
	if (s)
		memcpy(&libc, &s, sizeof libc);
	/* The next one, whoever's: glibc's dlsym asked for "dlsym" without a version, from here
	 * (RTLD_NEXT: after libgpupool.so), finds the first definition after gpupool, versioned
	 * or not. It does not call itself: this call is glibc's, not the program's dlsym. */
	next = libc;
	s = libc(RTLD_NEXT, "dlsym");
	if (s && !gp_dlsym_is_ours(s))
		memcpy(&next, &s, sizeof next);
	__atomic_store_n(&dl.libc, libc, __ATOMIC_RELAXED);
	__atomic_store_n(&dl.next, next, __ATOMIC_RELEASE);
	return (struct gp_dlsyms){libc, next};
}

void *gp_dlsym_real(void *handle, const char *name)
{
	struct gp_dlsyms d = gp_dlsyms();
	void *s = (handle == RTLD_NEXT ? d.libc : d.next)(handle, name);
	/* an interposer that resolves its "real" entry points from the global scope would hand
	 * back gpupool's own exports: the driver's are asked of glibc then */
	if (s && handle != RTLD_NEXT && gp_dlsym_is_ours(s))
		s = d.libc(handle, name);
	return s;
}

/* ---- the driver's table ---------------------------------------------------------------- */

static struct gp_driver drv;            /* written under `lock` until `found` */
static atomic_bool found;
/* This thread is filling `drv`: a look-up that comes back into gpupool's dlsym from the next
 * dlsym (another interposer's) while it does must not wait for `lock`, which it holds. */
static _Thread_local bool resolving;
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
	if (resolving)
		return NULL;
	gp_mutex_lock(&lock, GP_RANK_LIBCUDA_TABLE);
	if (!atomic_load_explicit(&found, memory_order_relaxed)) {
		/* by soname: a libcuda.so.1 loaded from any directory (or as libcuda.so) matches */
		void *h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
		if (h) {
			resolving = true;
			resolve(h);
			resolving = false;
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

int gp_libcuda_device_uuid(int ordinal, unsigned char out[16])
{
	const struct gp_driver *d = gp_libcuda_get();
	CUdevice dev;
	CUuuid u;
	/* cuInit first: the pool of a runtime program is made before the runtime's first call
	 * into the driver; the runtime makes the same call, and a second one does nothing */
	if (!d || !d->cuInit || !d->cuDeviceGet || !d->cuDeviceGetUuid_v2 || d->cuInit(0) != CUDA_SUCCESS ||
	    d->cuDeviceGet(&dev, ordinal) != CUDA_SUCCESS || d->cuDeviceGetUuid_v2(&u, dev) != CUDA_SUCCESS)
		return -ENODEV;
	memcpy(out, u.bytes, 16);
	return 0;
}

int gp_libcuda_device_name(int ordinal, char *buf, size_t cap)
{
	const struct gp_driver *d = gp_libcuda_get();
	CUdevice dev;
	if (!buf || cap < 2 || cap > INT_MAX || !d || !d->cuInit || !d->cuDeviceGet || !d->cuDeviceGetName ||
	    d->cuInit(0) != CUDA_SUCCESS || d->cuDeviceGet(&dev, ordinal) != CUDA_SUCCESS)
		return -ENODEV;
	memset(buf, 0, cap);
	if (d->cuDeviceGetName(buf, (int)cap - 1, dev) != CUDA_SUCCESS) {
		buf[0] = '\0';
		return -ENODEV;
	}
	return 0;
}

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
