/* The CUDA runtime's entry points, resolved once (runtime.h): from the libcudart the
 * process already loaded, through dlsym(RTLD_NEXT), else the loaded copy found by
 * dl_iterate_phdr (never a second copy). Owns the table only; depends on the log alone. */
#include "runtime.h"

#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "log.h"

static struct gp_runtime rt;
static const struct gp_runtime *rt_ok;
static pthread_once_t rt_once = PTHREAD_ONCE_INIT;

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

static void resolve(void)
{
	void *handle = NULL;
	struct find_ctx f = {{0}};
	if (!dlsym(RTLD_NEXT, "cudaMalloc")) {
		dl_iterate_phdr(find_cudart, &f);
		if (f.path[0])
			handle = dlopen(f.path, RTLD_LAZY | RTLD_NOLOAD);
		if (!handle) {
			gp_log(GP_LOG_WARN, "no CUDA runtime (libcudart) is loaded in this process; passing calls through");
			return;
		}
		gp_log(GP_LOG_INFO, "CUDA runtime found at %s", f.path);
	}
#define SYM(field, name, required)                                                     \
	do {                                                                           \
		void *s_ = handle ? dlsym(handle, name) : dlsym(RTLD_NEXT, name);      \
		if (!s_ && required) {                                                 \
			gp_log(GP_LOG_WARN, "the CUDA runtime lacks %s; gpupool is off", name); \
			return;                                                        \
		}                                                                      \
		memcpy(&rt.field, &s_, sizeof s_);                                     \
	} while (0)
	/* both variants of an entry point that takes a stream: `name` and name_ptsz, which is
	 * optional; where the runtime lacks it, the plain one serves in its slot */
#define STREAMED(field, name, required)                                               \
	do {                                                                          \
		SYM(variant[GP_RT_PLAIN].field, name, required);                      \
		SYM(variant[GP_RT_PTSZ].field, name "_ptsz", 0);                      \
		if (!rt.variant[GP_RT_PTSZ].field)                                    \
			rt.variant[GP_RT_PTSZ].field = rt.variant[GP_RT_PLAIN].field; \
	} while (0)
	SYM(Malloc, "cudaMalloc", 1);
	SYM(Free, "cudaFree", 1);
	STREAMED(MallocAsync, "cudaMallocAsync", 1);
	STREAMED(FreeAsync, "cudaFreeAsync", 1);
	SYM(GetDevice, "cudaGetDevice", 1);
	SYM(SetDevice, "cudaSetDevice", 1);
	SYM(GetDeviceCount, "cudaGetDeviceCount", 1);
	SYM(DeviceSynchronize, "cudaDeviceSynchronize", 1);
	SYM(GetLastError, "cudaGetLastError", 1);
	SYM(PeekAtLastError, "cudaPeekAtLastError", 1);
	SYM(MemGetInfo, "cudaMemGetInfo", 1);
	SYM(EventCreateWithFlags, "cudaEventCreateWithFlags", 1);
	STREAMED(EventRecord, "cudaEventRecord", 1);
	SYM(EventDestroy, "cudaEventDestroy", 1);
	STREAMED(StreamWaitEvent, "cudaStreamWaitEvent", 1);
	STREAMED(StreamIsCapturing, "cudaStreamIsCapturing", 1);
	STREAMED(StreamBeginCapture, "cudaStreamBeginCapture", 1);
	STREAMED(StreamEndCapture, "cudaStreamEndCapture", 1);
	SYM(StreamDestroy, "cudaStreamDestroy", 1);
	SYM(ThreadExchangeStreamCaptureMode, "cudaThreadExchangeStreamCaptureMode", 0);
	SYM(IpcGetMemHandle, "cudaIpcGetMemHandle", 0);
	SYM(DeviceReset, "cudaDeviceReset", 0);
#undef STREAMED
#undef SYM
	rt_ok = &rt;
}

const struct gp_runtime *gp_runtime_get(void)
{
	pthread_once(&rt_once, resolve);
	return rt_ok;
}
