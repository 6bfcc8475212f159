/* The CUDA runtime's entry points (runtime.h): from the libcudart the process loaded,
 * through dlsym(RTLD_NEXT), else the loaded copy found by dl_iterate_phdr (never a second
 * copy), looked for again on each call until one is found. Owns the table only; depends on
 * the log alone. */
#include "runtime.h"

#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "last_error.h"
#include "log.h"
#include "rank.h"

static struct gp_runtime rt;           /* written under `lock` until `found` */
static atomic_bool found;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static bool absent_logged;             /* under `lock` */

struct find_ctx {
	char path[512];
};

static int find_cudart(struct dl_phdr_info *info, size_t size, void *data)
{
	struct find_ctx *f = data;
	(void)size;
	const char *name = info->dlpi_name;
	if (!name || !*name)
		return 0;
	const char *base = strrchr(name, '/');
	base = base ? base + 1 : name;
	if (strncmp(base, "libcudart.so", 12) != 0)
		return 0;
	snprintf(f->path, sizeof f->path, "%s", name);
	return 1;
}

/* One line at info level: the runtime's file and version. */
static void log_found(cudaError_t (*version)(int *))
{
	Dl_info info;
	void *m;
	memcpy(&m, &rt.Malloc, sizeof m);
	const char *path = m && dladdr(m, &info) && info.dli_fname ? info.dli_fname : "an unknown file";
	int v = 0;
	if (version && version(&v) == cudaSuccess && v > 0)
		gp_log(GP_LOG_INFO, "CUDA runtime %d.%d, from %s", v / 1000, v % 1000 / 10, path);
	else
		gp_log(GP_LOG_INFO, "CUDA runtime of unknown version, from %s", path);
}

/* Fills `rt` from the loaded libcudart: true, or false when none is loaded. */
static bool resolve(void)
{
	void *handle = NULL;
	struct find_ctx f = {{0}};
	if (!dlsym(RTLD_NEXT, "cudaMalloc")) {
		/* not in the global scope: loaded RTLD_LOCAL, or not at all */
		dl_iterate_phdr(find_cudart, &f);
		if (f.path[0])
			handle = dlopen(f.path, RTLD_LAZY | RTLD_NOLOAD);
		if (!handle) {
			if (!absent_logged)
				gp_log(GP_LOG_INFO, "no CUDA runtime (libcudart) is loaded in this process (yet): "
						    "CUDA calls answer cudaErrorInsufficientDriver until one is");
			absent_logged = true;
			return false;
		}
	}
#define SYM_INTO(var, name)                                                         \
	do {                                                                        \
		void *s_ = handle ? dlsym(handle, name) : dlsym(RTLD_NEXT, name);   \
		memcpy(&(var), &s_, sizeof s_);                                     \
	} while (0)
#define SYM(field, name) SYM_INTO(rt.field, name)
	/* both variants of an entry point that takes a stream: `name` and name_ptsz; where
	 * the runtime lacks the latter, the plain one serves in its slot */
#define STREAMED(field, name)                                                         \
	do {                                                                          \
		SYM(variant[GP_RT_PLAIN].field, name);                                \
		SYM(variant[GP_RT_PTSZ].field, name "_ptsz");                         \
		if (!rt.variant[GP_RT_PTSZ].field)                                    \
			rt.variant[GP_RT_PTSZ].field = rt.variant[GP_RT_PLAIN].field; \
	} while (0)
	SYM(Malloc, "cudaMalloc");
	SYM(Free, "cudaFree");
	STREAMED(MallocAsync, "cudaMallocAsync");
	STREAMED(FreeAsync, "cudaFreeAsync");
	SYM(GetDevice, "cudaGetDevice");
	SYM(SetDevice, "cudaSetDevice");
	SYM(GetDeviceCount, "cudaGetDeviceCount");
	SYM(DeviceSynchronize, "cudaDeviceSynchronize");
	SYM(GetLastError, "cudaGetLastError");
	SYM(PeekAtLastError, "cudaPeekAtLastError");
	SYM(MemGetInfo, "cudaMemGetInfo");
	SYM(EventCreateWithFlags, "cudaEventCreateWithFlags");
	STREAMED(EventRecord, "cudaEventRecord");
	SYM(EventDestroy, "cudaEventDestroy");
	SYM(EventQuery, "cudaEventQuery");
	SYM(EventSynchronize, "cudaEventSynchronize");
	STREAMED(StreamWaitEvent, "cudaStreamWaitEvent");
	STREAMED(StreamIsCapturing, "cudaStreamIsCapturing");
	STREAMED(StreamBeginCapture, "cudaStreamBeginCapture");
	STREAMED(StreamEndCapture, "cudaStreamEndCapture");
	SYM(StreamDestroy, "cudaStreamDestroy");
	SYM(StreamCreate, "cudaStreamCreate");
	SYM(StreamCreateWithFlags, "cudaStreamCreateWithFlags");
	SYM(StreamCreateWithPriority, "cudaStreamCreateWithPriority");
	SYM(ThreadExchangeStreamCaptureMode, "cudaThreadExchangeStreamCaptureMode");
	SYM(IpcGetMemHandle, "cudaIpcGetMemHandle");
	SYM(DeviceReset, "cudaDeviceReset");
	SYM(MallocManaged, "cudaMallocManaged");
	SYM(MallocPitch, "cudaMallocPitch");
	SYM(Malloc3D, "cudaMalloc3D");
	STREAMED(MallocFromPoolAsync, "cudaMallocFromPoolAsync");
	SYM(MemPoolCreate, "cudaMemPoolCreate");
	SYM(MemPoolDestroy, "cudaMemPoolDestroy");
	SYM(DeviceSetMemPool, "cudaDeviceSetMemPool");
	SYM(MemPoolGetAttribute, "cudaMemPoolGetAttribute");
	SYM(MemPoolTrimTo, "cudaMemPoolTrimTo");
	SYM(GetDeviceProperties, "cudaGetDeviceProperties");
	SYM(GetDriverEntryPoint[GP_RT_PLAIN], "cudaGetDriverEntryPoint");
	SYM(GetDriverEntryPoint[GP_RT_PTSZ], "cudaGetDriverEntryPoint_ptsz");
	SYM(GetDriverEntryPointByVersion[GP_RT_PLAIN], "cudaGetDriverEntryPointByVersion");
	SYM(GetDriverEntryPointByVersion[GP_RT_PTSZ], "cudaGetDriverEntryPointByVersion_ptsz");
	/* what GPUPOOL_LOG=info names: the file the runtime was loaded from and its version
	 * (cudaRuntimeGetVersion needs no device and makes no context) */
	SYM(RuntimeGetVersion, "cudaRuntimeGetVersion");
#undef STREAMED
#undef SYM
	log_found(rt.RuntimeGetVersion);
	return true;
}

const struct gp_runtime *gp_runtime_get(void)
{
	if (__builtin_expect(atomic_load_explicit(&found, memory_order_acquire), 1))
		return &rt;
	gp_mutex_lock(&lock, GP_RANK_RUNTIME_TABLE);
	if (!atomic_load_explicit(&found, memory_order_relaxed) && resolve())
		atomic_store_explicit(&found, true, memory_order_release);
	bool ok = atomic_load_explicit(&found, memory_order_relaxed);
	gp_mutex_unlock(&lock, GP_RANK_RUNTIME_TABLE);
	return ok ? &rt : NULL;
}

void gp_runtime_after_fork(void) { pthread_mutex_init(&lock, NULL); }

const char *gp_runtime_lacks(const struct gp_runtime *r)
{
	static const struct {
		size_t off;
		const char *name;
	} needed[] = {
#define NEED(field, name) {offsetof(struct gp_runtime, field), name}
		NEED(Malloc, "cudaMalloc"),
		NEED(Free, "cudaFree"),
		NEED(GetDevice, "cudaGetDevice"),
		NEED(SetDevice, "cudaSetDevice"),
		NEED(GetDeviceCount, "cudaGetDeviceCount"),
		NEED(DeviceSynchronize, "cudaDeviceSynchronize"),
		NEED(GetLastError, "cudaGetLastError"),
		NEED(PeekAtLastError, "cudaPeekAtLastError"),
		NEED(MemGetInfo, "cudaMemGetInfo"),
#undef NEED
	};
	for (size_t i = 0; i < sizeof needed / sizeof needed[0]; i++) {
		void *fn;
		memcpy(&fn, (const char *)r + needed[i].off, sizeof fn);
		if (!fn)
			return needed[i].name;
	}
	for (int v = GP_RT_PLAIN; v <= GP_RT_PTSZ; v++) {
		const struct gp_runtime_streamed *s = &r->variant[v];
		if (!s->StreamBeginCapture)
			continue;
		if (!s->StreamEndCapture)
			return v == GP_RT_PLAIN ? "cudaStreamEndCapture" : "cudaStreamEndCapture_ptsz";
		if (!s->StreamIsCapturing)
			return v == GP_RT_PLAIN ? "cudaStreamIsCapturing" : "cudaStreamIsCapturing_ptsz";
	}
	return NULL;
}

int gp_runtime_device_uuid(const struct gp_runtime *r, int device, unsigned char out[16], char *name,
			   size_t name_cap)
{
	if (!r || !r->GetDeviceProperties)
		return -ENOSYS;
	/* room for a newer runtime's larger struct: the uuid stays near the front */
	union {
		struct cudaDeviceProp p;
		char room[16384];
	} *u = calloc(1, sizeof *u);
	if (!u)
		return -ENOMEM;
	cudaError_t before = r->PeekAtLastError ? r->PeekAtLastError() : cudaSuccess;
	cudaError_t e = r->GetDeviceProperties(&u->p, device);
	if (e == cudaSuccess) {
		memcpy(out, u->p.uuid.bytes, 16);
		if (name && name_cap)
			snprintf(name, name_cap, "%.*s", (int)sizeof u->p.name, u->p.name);
	} else {
		gp_last_error_restore(r, before);
	}
	free(u);
	return e == cudaSuccess ? 0 : -EIO;
}
