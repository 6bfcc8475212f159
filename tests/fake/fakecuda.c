/* A fake CUDA runtime (libcudart.so.13) for tests without a GPU: device memory from host memory,
 * devices, streams served in stream order by worker threads, events, stream capture and graphs,
 * IPC handles, the per-thread last error, call counters and fault injection (fakecuda.h).
 * Exported names are the CUDA runtime's own plus gpfake_*; nothing inside calls an exported name,
 * so a library preloaded in front of this one never sees the fake's internal work. */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <cuda.h>
#include <dlfcn.h>

#pragma GCC visibility push(default)
#include "fakecuda.h"
#pragma GCC visibility pop
#include "fakemachine.c" /* the machine file, CUDA_VISIBLE_DEVICES: static functions */
#include "fakepool.c"    /* memory pools: static functions, on the hooks defined below */

#define FK_API __attribute__((visibility("default")))
#define FK_MAXDEV 16
#define FK_ALIGN 512u
#define FK_NWORKERS 8
#define FK_MAXRULES 64
#define FK_STREAM_MAGIC 0x5354524du
#define FK_EVENT_MAGIC 0x45564e54u
#define FK_GRAPH_MAGIC 0x47525048u
#define FK_EXEC_MAGIC 0x45584543u
#define FK_IPC_MAGIC 0x46414b49u

/* ---- entry point names, for counters and fault rules ---- */
#define FK_FUNCS(X) \
	X(cudaMalloc) X(cudaFree) X(cudaMallocAsync) X(cudaMallocAsync_ptsz) X(cudaFreeAsync) \
	X(cudaFreeAsync_ptsz) X(cudaMemcpy) X(cudaMemcpy_ptds) X(cudaMemcpyAsync) \
	X(cudaMemcpyAsync_ptsz) X(cudaMemset) X(cudaMemset_ptds) X(cudaMemsetAsync) \
	X(cudaMemsetAsync_ptsz) X(cudaSetDevice) X(cudaGetDevice) X(cudaGetDeviceCount) \
	X(cudaMemGetInfo) X(cudaDeviceSynchronize) X(cudaDeviceReset) X(cudaStreamCreate) \
	X(cudaStreamCreateWithFlags) X(cudaStreamCreateWithPriority) X(cudaStreamDestroy) X(cudaStreamSynchronize) \
	X(cudaStreamSynchronize_ptsz) X(cudaStreamQuery) X(cudaStreamQuery_ptsz) \
	X(cudaStreamGetId) X(cudaStreamGetId_ptsz) X(cudaStreamGetDevice) \
	X(cudaStreamGetDevice_ptsz) X(cudaStreamGetFlags) X(cudaStreamGetFlags_ptsz) \
	X(cudaStreamWaitEvent) X(cudaStreamWaitEvent_ptsz) X(cudaEventCreate) \
	X(cudaEventCreateWithFlags) X(cudaEventRecord) X(cudaEventRecord_ptsz) X(cudaEventQuery) \
	X(cudaEventSynchronize) X(cudaEventDestroy) X(cudaEventElapsedTime) \
	X(cudaStreamBeginCapture) X(cudaStreamBeginCapture_ptsz) X(cudaStreamEndCapture) \
	X(cudaStreamEndCapture_ptsz) X(cudaStreamIsCapturing) X(cudaStreamIsCapturing_ptsz) \
	X(cudaThreadExchangeStreamCaptureMode) \
	X(cudaGraphInstantiate) X(cudaGraphLaunch) X(cudaGraphLaunch_ptsz) X(cudaGraphDestroy) \
	X(cudaGraphExecDestroy) X(cudaIpcGetMemHandle) X(cudaIpcOpenMemHandle) \
	X(cudaIpcCloseMemHandle) X(cudaPointerGetAttributes) X(cudaGetErrorString) \
	X(cudaGetErrorName) X(cudaGetLastError) X(cudaPeekAtLastError) X(cudaRuntimeGetVersion) \
	X(cudaDriverGetVersion) X(gpfake_launch_fill) \
	X(cudaMallocManaged) X(cudaMallocPitch) X(cudaMalloc3D) X(cudaMemPoolCreate) \
	X(cudaMemPoolDestroy) X(cudaDeviceGetDefaultMemPool) X(cudaDeviceGetMemPool) \
	X(cudaDeviceSetMemPool) X(cudaMallocFromPoolAsync) X(cudaMallocFromPoolAsync_ptsz) \
	X(cudaMemPoolGetAttribute) X(cudaMemPoolSetAttribute) X(cudaMemPoolTrimTo) \
	X(cudaGetDeviceProperties) X(cudaGetDeviceProperties_v2) X(cudaDeviceGetAttribute) \
	X(cudaGetDriverEntryPoint) X(cudaGetDriverEntryPoint_ptsz) X(cudaGetDriverEntryPointByVersion) \
	X(cudaGetDriverEntryPointByVersion_ptsz)

#define FK_ENUM(n) FN_##n,
enum { FK_FUNCS(FK_ENUM) FN_COUNT };
#define FK_NAME(n) #n,
static const char *const fk_names[FN_COUNT] = { FK_FUNCS(FK_NAME) };

/* ---- data ---- */
enum op_kind { OP_COPY, OP_SET, OP_FILL, OP_FREE, OP_RECORD, OP_WAIT, OP_NOP };

/* One unit of stream work. Owned by its stream queue, a capture, a graph or an exec. */
struct op {
	struct op *next;
	unsigned long long seq;     /* global issue order, set when queued */
	enum op_kind kind;
	bool running, skip;
	bool pinned;                /* fk_pin ran: once per op, even when a fork restarts it */
	bool dst_dev, src_dev;      /* the pointer must be device memory */
	void *dst;
	const void *src;
	size_t n;
	int value;
	unsigned delay_us;
	struct CUevent_st *ev;      /* OP_RECORD: holds a reference */
	struct CUstream_st *wstream; /* OP_WAIT: wait until wstream completed wseq */
	unsigned long long wseq;
	struct alloc *pin_dst, *pin_src;
};

struct CUstream_st {
	unsigned magic;
	int device;
	unsigned flags;
	bool legacy, dead;
	unsigned long long id;
	struct op *head, *tail;           /* pending work, in issue order */
	int cap_state;                    /* 0 none, 1 active, 2 invalidated */
	enum cudaStreamCaptureMode cap_mode;
	pthread_t cap_thread;
	struct op *cap_head, *cap_tail;
	struct CUstream_st *next;
};

struct CUevent_st {
	unsigned magic;
	unsigned flags;
	bool dead;
	int refs;                         /* handle + record ops that name it */
	int device;                       /* current when it was made: a reset destroys it */
	struct CUevent_st *lprev, *lnext; /* g_events, while the handle is valid */
	struct CUstream_st *rec_stream;   /* last record: complete when rec_stream passed rec_seq */
	unsigned long long rec_seq;
	bool timed;
	struct timespec t;
};

struct CUgraph_st {
	unsigned magic;
	struct op *head, *tail;
};

struct CUgraphExec_st {
	unsigned magic;
	struct op *head, *tail;
};

struct alloc {
	char *base;
	size_t bytes;                     /* rounded to FK_ALIGN */
	int device;
	bool free_pending;                /* cudaFree in progress or cudaFreeAsync queued */
	int busy;                         /* stream work touching it right now */
	int ipc_open;
	unsigned long long id;
	struct fp_pool *pool;             /* cudaMallocFromPoolAsync: base is a chunk of it */
	size_t chunk;                     /* pool allocations: bytes of that chunk */
};

struct fk_rule {
	int fn;             /* FK_ANY: every entry point but the error and version queries */
	unsigned long left;
	cudaError_t err;
	bool every;         /* from the n-th call on, every call (else the n-th only) */
};
#define FK_ANY (-2)

struct fk_ipc {
	uint32_t magic;
	int32_t pid;
	uint64_t base;
	uint64_t id;
};

/* Everything below is guarded by g_lock unless noted. */
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_work = PTHREAD_COND_INITIALIZER;  /* workers: new or unblocked work */
static pthread_cond_t g_done = PTHREAD_COND_INITIALIZER;  /* waiters: some work completed */
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static pthread_key_t g_pts_key;
static bool g_pts_key_ok;

static int g_ndev = 2;                    /* visible devices (CUDA_VISIBLE_DEVICES) */
static int g_phys[FK_MAXDEV];             /* a visible device's physical index */
static size_t g_capacity[FK_MAXDEV];      /* without a machine file; with one, the file's */
static size_t g_used[FK_MAXDEV];
static struct CUstream_st *g_legacy[FK_MAXDEV];
static struct CUstream_st *g_streams;     /* live streams (and dead ones with work left) */
static struct CUstream_st *g_graveyard;   /* destroyed and drained: kept so stale refs stay valid */
static struct CUevent_st *g_events;       /* events whose handles are valid */
static unsigned g_reset_delay_us;         /* FAKECUDA_RESET_DELAY_US */
static unsigned long long g_seq;
static unsigned long long g_next_id = 1;
static struct alloc **g_allocs;           /* sorted by base */
static size_t g_nallocs, g_allocs_cap;
static unsigned long g_faults;
static pthread_t g_workers[FK_NWORKERS];
static int g_nworkers;
static bool g_stop;
static bool g_shutdown;                   /* atomic access */

static pthread_mutex_t g_ctl = PTHREAD_MUTEX_INITIALIZER; /* guards g_rules */
static unsigned long g_calls[FN_COUNT];                   /* atomic access */
static struct fk_rule g_rules[FK_MAXRULES];
static int g_nrules;                                      /* atomic read outside g_ctl */

static _Thread_local int t_device;
static _Thread_local cudaError_t t_last_error;
/* gpfake_fault: a sticky error, as a kernel fault leaves one: every call but the error and
 * version queries fails with it, and cudaGetLastError returns it without clearing it */
static cudaError_t g_sticky; /* atomic access */
/* this thread's capture interaction mode (cudaThreadExchangeStreamCaptureMode) */
static _Thread_local enum cudaStreamCaptureMode t_cap_mode = cudaStreamCaptureModeGlobal;

/* ---- errors ---- */
#define FK_ERRORS(X) \
	X(cudaSuccess, "no error") \
	X(cudaErrorInvalidValue, "invalid argument") \
	X(cudaErrorMemoryAllocation, "out of memory") \
	X(cudaErrorInitializationError, "initialization error") \
	X(cudaErrorInsufficientDriver, "CUDA driver version is insufficient for CUDA runtime version") \
	X(cudaErrorDevicesUnavailable, "CUDA-capable device(s) is/are busy or unavailable") \
	X(cudaErrorCudartUnloading, "driver shutting down") \
	X(cudaErrorInvalidMemcpyDirection, "invalid copy direction for memcpy") \
	X(cudaErrorNoDevice, "no CUDA-capable device is detected") \
	X(cudaErrorInvalidDevice, "invalid device ordinal") \
	X(cudaErrorInvalidResourceHandle, "invalid resource handle") \
	X(cudaErrorIllegalState, "the operation cannot be performed in the present state") \
	X(cudaErrorNotReady, "device not ready") \
	X(cudaErrorIllegalAddress, "an illegal memory access was encountered") \
	X(cudaErrorLaunchFailure, "unspecified launch failure") \
	X(cudaErrorNotSupported, "operation not supported") \
	X(cudaErrorStreamCaptureUnsupported, "operation not permitted when stream is capturing") \
	X(cudaErrorStreamCaptureInvalidated, "operation failed due to a previous error during capture") \
	X(cudaErrorStreamCaptureImplicit, \
	  "operation would make the legacy stream depend on a capturing blocking stream") \
	X(cudaErrorStreamCaptureWrongThread, \
	  "attempt to terminate a thread-local capture sequence from another thread") \
	X(cudaErrorUnknown, "unknown error")

struct fk_errinfo {
	cudaError_t code;
	const char *name, *text;
};
#define FK_ERRROW(c, s) { c, #c, s },
static const struct fk_errinfo fk_errs[] = { FK_ERRORS(FK_ERRROW) };

static const struct fk_errinfo *fk_errinfo(cudaError_t e)
{
	for (size_t i = 0; i < sizeof fk_errs / sizeof fk_errs[0]; i++)
		if (fk_errs[i].code == e)
			return &fk_errs[i];
	return NULL;
}

/* Every error a call returns becomes the thread's last error, as in CUDA (not NotReady). */
static cudaError_t fk_ret(cudaError_t e)
{
	if (e != cudaSuccess && e != cudaErrorNotReady)
		t_last_error = e;
	return e;
}

/* ---- init, environment ---- */
static size_t fk_parse_size(const char *s, bool *ok)
{
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	*ok = errno == 0 && end != s;
	unsigned shift = 0;
	switch (*end) {
	case 'k': case 'K': shift = 10; end++; break;
	case 'm': case 'M': shift = 20; end++; break;
	case 'g': case 'G': shift = 30; end++; break;
	case 't': case 'T': shift = 40; end++; break;
	default: break;
	}
	if (shift && (end[0] == 'i' || end[0] == 'I') && (end[1] == 'B' || end[1] == 'b'))
		end += 2;
	else if (shift && (end[0] == 'B' || end[0] == 'b'))
		end++;
	if (*end != '\0' || (shift && v > (~0ull >> shift)))
		*ok = false;
	return (size_t)(v << shift);
}

static int fk_fn_index(const char *name)
{
	if (!name)
		return -1;
	for (int i = 0; i < FN_COUNT; i++)
		if (strcmp(fk_names[i], name) == 0)
			return i;
	return -1;
}

/* The calls FK_ANY rules and a sticky error leave alone: the error and version queries. */
static bool fk_is_query(int fn)
{
	return fn == FN_cudaGetErrorString || fn == FN_cudaGetErrorName || fn == FN_cudaGetLastError ||
	       fn == FN_cudaPeekAtLastError || fn == FN_cudaRuntimeGetVersion || fn == FN_cudaDriverGetVersion;
}

static int fk_add_rule(int fn, unsigned long n, cudaError_t err, bool every)
{
	int rc = 0;
	pthread_mutex_lock(&g_ctl);
	if (n == 0) {
		int j = 0;
		for (int i = 0; i < g_nrules; i++)
			if (g_rules[i].fn != fn)
				g_rules[j++] = g_rules[i];
		__atomic_store_n(&g_nrules, j, __ATOMIC_RELEASE);
	} else if (g_nrules < FK_MAXRULES && (fn >= 0 || fn == FK_ANY)) {
		g_rules[g_nrules] = (struct fk_rule){ fn, n, err, every };
		__atomic_store_n(&g_nrules, g_nrules + 1, __ATOMIC_RELEASE);
	} else {
		rc = -1;
	}
	pthread_mutex_unlock(&g_ctl);
	return rc;
}

static cudaError_t fk_default_fail(int fn)
{
	switch (fn) {
	case FN_cudaMalloc: case FN_cudaMallocAsync: case FN_cudaMallocAsync_ptsz:
	case FN_cudaMallocManaged: case FN_cudaMallocPitch: case FN_cudaMalloc3D:
	case FN_cudaMallocFromPoolAsync: case FN_cudaMallocFromPoolAsync_ptsz:
		return cudaErrorMemoryAllocation;
	default:
		return cudaErrorUnknown;
	}
}

/* FAKECUDA_FAIL=name:n[+][:err][,...]  err: a number or a cudaError name; "+": the n-th call
 * and every later one; name "*": every entry point but the error and version queries. */
static void fk_parse_fail(const char *spec)
{
	char buf[1024];
	snprintf(buf, sizeof buf, "%s", spec);
	char *save = NULL;
	for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		char *c1 = strchr(tok, ':');
		int fn = -1;
		unsigned long n = 0;
		cudaError_t err = cudaSuccess;
		bool ok = false, every = false;
		if (c1) {
			*c1 = '\0';
			fn = strcmp(tok, "*") == 0 ? FK_ANY : fk_fn_index(tok);
			char *end;
			n = strtoul(c1 + 1, &end, 10);
			ok = fn != -1 && end != c1 + 1 && n > 0;
			if (ok && *end == '+') {
				every = true;
				end++;
			}
			if (ok && *end == ':') {
				char *es = end + 1;
				long v = strtol(es, &end, 10);
				if (end != es && *end == '\0') {
					err = (cudaError_t)v;
				} else {
					ok = false;
					for (size_t i = 0; i < sizeof fk_errs / sizeof fk_errs[0]; i++)
						if (strcmp(fk_errs[i].name, es) == 0) {
							err = fk_errs[i].code;
							ok = true;
						}
				}
			} else if (ok && *end != '\0') {
				ok = false;
			}
		}
		if (!ok) {
			fprintf(stderr, "fakecuda: FAKECUDA_FAIL: ignoring '%s' (expected name:n[:err])\n",
			        tok);
			continue;
		}
		if (err == cudaSuccess)
			err = fk_default_fail(fn);
		fk_add_rule(fn, n, err, every);
	}
}

static struct CUstream_st *fk_stream_new(int device, unsigned flags, bool legacy)
{
	struct CUstream_st *s = calloc(1, sizeof *s);
	if (!s)
		return NULL;
	s->magic = FK_STREAM_MAGIC;
	s->device = device;
	s->flags = flags;
	s->legacy = legacy;
	s->id = g_next_id++;
	s->next = g_streams;
	g_streams = s;
	return s;
}

static void fk_pts_release(void *arg);
static void fk_atfork_prepare(void);
static void fk_atfork_parent(void);
static void fk_atfork_child(void);

static void fk_init(void)
{
	const char *e = getenv("FAKECUDA_DEVICES");
	if (e && *e) {
		char *end;
		long v = strtol(e, &end, 10);
		if (*end == '\0' && v >= 0 && v <= FK_MAXDEV)
			g_ndev = (int)v;
		else
			fprintf(stderr, "fakecuda: FAKECUDA_DEVICES='%s' not in 0..%d, using 2\n", e,
			        FK_MAXDEV);
	}
	size_t cap = (size_t)1 << 30;
	e = getenv("FAKECUDA_CAPACITY");
	if (e && *e) {
		bool ok;
		size_t v = fk_parse_size(e, &ok);
		if (ok)
			cap = v;
		else
			fprintf(stderr, "fakecuda: FAKECUDA_CAPACITY='%s' is not a size, using 1G\n", e);
	}
	size_t caps[FM_MAXDEV];
	for (int d = 0; d < FM_MAXDEV; d++)
		caps[d] = cap;
#ifndef FK_ON_DRIVER
	/* on the driver, the driver counts the memory this runtime takes from it (and
	 * cudaMemGetInfo asks it) */
	(void)fm_open("fakecuda", &g_ndev, caps);
#endif
	g_ndev = fm_visible(g_ndev, g_phys);
	pthread_mutex_lock(&g_lock);
	for (int d = 0; d < FK_MAXDEV; d++)
		g_capacity[d] = d < g_ndev ? caps[g_phys[d]] : cap;
	fp_init(g_ndev);
	for (int d = 0; d < g_ndev; d++)
		g_legacy[d] = fk_stream_new(d, 0, true);
	pthread_mutex_unlock(&g_lock);
	g_pts_key_ok = pthread_key_create(&g_pts_key, fk_pts_release) == 0;
	pthread_atfork(fk_atfork_prepare, fk_atfork_parent, fk_atfork_child);
	e = getenv("FAKECUDA_FAIL");
	if (e && *e)
		fk_parse_fail(e);
	e = getenv("FAKECUDA_RESET_DELAY_US");
	if (e && *e)
		g_reset_delay_us = (unsigned)strtoul(e, NULL, 10);
}

/* Count the call, then apply fault rules. Returns the injected error or cudaSuccess. */
static cudaError_t fk_enter(int fn)
{
	pthread_once(&g_once, fk_init);
	__atomic_add_fetch(&g_calls[fn], 1, __ATOMIC_RELAXED);
	if (__atomic_load_n(&g_shutdown, __ATOMIC_ACQUIRE))
		return cudaErrorCudartUnloading;
	cudaError_t sticky = __atomic_load_n(&g_sticky, __ATOMIC_ACQUIRE);
	if (sticky != cudaSuccess && !fk_is_query(fn))
		return sticky;
	if (__atomic_load_n(&g_nrules, __ATOMIC_ACQUIRE) == 0)
		return cudaSuccess;
	cudaError_t err = cudaSuccess;
	pthread_mutex_lock(&g_ctl);
	int j = 0;
	for (int i = 0; i < g_nrules; i++) {
		struct fk_rule r = g_rules[i];
		if (r.fn == fn || (r.fn == FK_ANY && !fk_is_query(fn))) {
			if (r.every && r.left <= 1) {
				err = r.err; /* kept: every later call fails too */
			} else if (--r.left == 0) {
				err = r.err;
				continue;
			}
		}
		g_rules[j++] = r;
	}
	__atomic_store_n(&g_nrules, j, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&g_ctl);
	return err;
}

#define ENTER(name) \
	do { \
		cudaError_t e_ = fk_enter(FN_##name); \
		if (e_ != cudaSuccess) \
			return fk_ret(e_); \
	} while (0)

/* ---- the driver, as libcudart finds it ----
 * libcuda.so.1 loaded with dlopen, and its cuGetProcAddress_v2 (cuGetProcAddress on a CUDA 11
 * driver) found with dlsym on its handle: every other driver entry point is asked of it. A
 * preloaded libgpupool.so answers that dlsym from this library (libcudart.so.13) with the
 * driver's own, and from a program this source is compiled into (the static runtime, as
 * plain nvcc links it) with gpupool's. Found once; NULL where there is no driver. */
typedef CUresult (*fk_gpa_v2_fn)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *);
typedef CUresult (*fk_gpa_v1_fn)(const char *, void **, int, cuuint64_t);
static struct {
	fk_gpa_v2_fn v2;
	fk_gpa_v1_fn v1;
} g_gpa;
static pthread_once_t g_gpa_once = PTHREAD_ONCE_INIT;

static void fk_gpa_find(void)
{
	void *h = dlopen("libcuda.so.1", RTLD_NOW);
	void *s = h ? dlsym(h, "cuGetProcAddress_v2") : NULL;
	memcpy(&g_gpa.v2, &s, sizeof s);
	s = h ? dlsym(h, "cuGetProcAddress") : NULL;
	memcpy(&g_gpa.v1, &s, sizeof s);
}

/* The driver's cuGetProcAddress_v2, or its cuGetProcAddress behind the same signature (the
 * status made from its code); false when there is no driver. */
static bool fk_gpa(const char *symbol, void **fn, int version, cuuint64_t flags, CUdriverProcAddressQueryResult *st,
		   CUresult *e)
{
	pthread_once(&g_gpa_once, fk_gpa_find);
	if (g_gpa.v2) {
		*e = g_gpa.v2(symbol, fn, version, flags, st);
	} else if (g_gpa.v1) {
		*e = g_gpa.v1(symbol, fn, version, flags);
		*st = *e == CUDA_SUCCESS ? CU_GET_PROC_ADDRESS_SUCCESS : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
	} else {
		return false;
	}
	return true;
}

/* ---- device memory: host memory, or (FK_ON_DRIVER) the driver's ---- */
#ifdef FK_ON_DRIVER
/* Built on top of the fake driver (ondriver/): like the real runtime, the memory comes from
 * libcuda.so.1's cuMemAlloc, found through cuGetProcAddress_v2 on the handle of a dlopen,
 * in the device's primary context made current on the calling thread. g_lock held. */
static struct {
	bool tried, ok;
	CUresult (*MemAlloc)(CUdeviceptr *, size_t);
	CUresult (*MemFree)(CUdeviceptr);
	CUresult (*CtxSetCurrent)(CUcontext);
	CUresult (*PrimaryRetain)(CUcontext *, CUdevice);
	CUresult (*MemGetInfo)(size_t *, size_t *);
	int (*Mapped)(CUdeviceptr, size_t); /* the fake driver's gpfakecu_mapped, when it has it */
	CUcontext primary[FK_MAXDEV];
} g_drv;

static bool fk_driver(int device)
{
	if (!g_drv.tried) {
		g_drv.tried = true;
		pthread_once(&g_gpa_once, fk_gpa_find);
		fk_gpa_v2_fn get = g_gpa.v2;
		CUresult (*init)(unsigned) = NULL;
		CUdriverProcAddressQueryResult st;
		g_drv.ok = get && get("cuInit", (void **)&init, 13000, 0, &st) == CUDA_SUCCESS &&
		           get("cuMemAlloc", (void **)&g_drv.MemAlloc, 13000, 0, &st) == CUDA_SUCCESS &&
		           get("cuMemFree", (void **)&g_drv.MemFree, 13000, 0, &st) == CUDA_SUCCESS &&
		           get("cuCtxSetCurrent", (void **)&g_drv.CtxSetCurrent, 13000, 0, &st) == CUDA_SUCCESS &&
		           get("cuDevicePrimaryCtxRetain", (void **)&g_drv.PrimaryRetain, 13000, 0, &st) ==
		                   CUDA_SUCCESS &&
		           get("cuMemGetInfo", (void **)&g_drv.MemGetInfo, 13000, 0, &st) == CUDA_SUCCESS &&
		           init(0) == CUDA_SUCCESS;
		if (!g_drv.ok)
			fprintf(stderr, "fakecuda: no usable fake driver (libcuda.so.1) under this runtime\n");
		/* the fake driver's own export, not an entry point of the driver's API: by name */
		void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
		void *m = h ? dlsym(h, "gpfakecu_mapped") : NULL;
		memcpy(&g_drv.Mapped, &m, sizeof m);
	}
	if (!g_drv.ok)
		return false;
	if (!g_drv.primary[device] && g_drv.PrimaryRetain(&g_drv.primary[device], device) != CUDA_SUCCESS)
		return false;
	return g_drv.CtxSetCurrent(g_drv.primary[device]) == CUDA_SUCCESS;
}

static char *fk_mem_get(int device, size_t bytes)
{
	CUdeviceptr p = 0;
	if (!fk_driver(device) || g_drv.MemAlloc(&p, bytes) != CUDA_SUCCESS)
		return NULL;
	return (char *)(uintptr_t)p;
}

static void fk_mem_put(int device, char *mem)
{
	if (fk_driver(device))
		(void)g_drv.MemFree((CUdeviceptr)(uintptr_t)mem);
}

/* What the driver says of the device's memory (all processes of a machine file included). */
static bool fk_driver_info(int device, size_t *free_bytes, size_t *total)
{
	return fk_driver(device) && g_drv.MemGetInfo(free_bytes, total) == CUDA_SUCCESS;
}
#else
static char *fk_mem_get(int device, size_t bytes)
{
	(void)device;
	return aligned_alloc(FK_ALIGN, bytes);
}

static void fk_mem_put(int device, char *mem)
{
	(void)device;
	free(mem);
}
#endif

/* ---- allocations (g_lock held) ---- */
static size_t fk_alloc_slot(const void *p)
{
	size_t lo = 0, hi = g_nallocs;      /* first index with base > p */
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if ((uintptr_t)g_allocs[mid]->base <= (uintptr_t)p)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static struct alloc *fk_alloc_containing(const void *p)
{
	size_t i = fk_alloc_slot(p);
	if (i == 0)
		return NULL;
	struct alloc *a = g_allocs[i - 1];
	return (uintptr_t)p < (uintptr_t)a->base + a->bytes ? a : NULL;
}

static struct alloc *fk_alloc_exact(const void *p)
{
	struct alloc *a = fk_alloc_containing(p);
	return a && a->base == p ? a : NULL;
}

static bool fk_range_ok(const void *p, size_t n)
{
	struct alloc *a = fk_alloc_containing(p);
	if (a && n <= a->bytes - (size_t)((const char *)p - a->base))
		return true;
#ifdef FK_ON_DRIVER
	/* like the real runtime, any device memory the driver has: the driver's virtual memory
	 * (cuMemMap) too, which this runtime never allocated */
	return g_drv.ok && g_drv.Mapped && g_drv.Mapped((CUdeviceptr)(uintptr_t)p, n);
#else
	return false;
#endif
}

/* Capacity of `device`: the machine's, shared with other processes, or this process's. */
static size_t fk_capacity(int device)
{
	return fm_on() && device < g_ndev ? fm_capacity(g_phys[device]) : g_capacity[device];
}

/* Bytes of `device` not held by live allocations, of every process sharing the machine
 * (g_lock held). */
static size_t fk_free_bytes(int device)
{
	size_t cap = fk_capacity(device);
	size_t used = fm_on() && device < g_ndev ? fm_used(g_phys[device]) : g_used[device];
	return used < cap ? cap - used : 0;
}

/* Device memory of `device` taken and given back: every path (cudaMalloc, managed, pitched,
 * pool chunks) draws from the one capacity. g_lock held. */
static bool fk_charge(int device, size_t bytes)
{
	if (fm_on() ? !fm_charge(g_phys[device], bytes)
	            : bytes > g_capacity[device] || g_used[device] > g_capacity[device] - bytes)
		return false;
	g_used[device] += bytes;
	return true;
}

static void fk_uncharge(int device, size_t bytes)
{
	fm_uncharge(g_phys[device], bytes);
	g_used[device] -= bytes;
}

/* Records a new allocation of `bytes` at mem (g_lock held); false when out of host memory. */
static bool fk_alloc_insert(int device, char *mem, size_t bytes, struct fp_pool *pool,
                            size_t chunk)
{
	if (g_nallocs == g_allocs_cap) {
		size_t nc = g_allocs_cap ? g_allocs_cap * 2 : 64;
		struct alloc **na = realloc(g_allocs, nc * sizeof *na);
		if (!na)
			return false;
		g_allocs = na;
		g_allocs_cap = nc;
	}
	struct alloc *a = calloc(1, sizeof *a);
	if (!a)
		return false;
	a->base = mem;
	a->bytes = bytes;
	a->device = device;
	a->id = g_next_id++;
	a->pool = pool;
	a->chunk = chunk;
	size_t i = fk_alloc_slot(mem);
	memmove(&g_allocs[i + 1], &g_allocs[i], (g_nallocs - i) * sizeof *g_allocs);
	g_allocs[i] = a;
	g_nallocs++;
	return true;
}

static cudaError_t fk_alloc_new(int device, size_t size, void **out)
{
	if (size > SIZE_MAX - FK_ALIGN)
		return cudaErrorMemoryAllocation;
	size_t bytes = (size + FK_ALIGN - 1) & ~(size_t)(FK_ALIGN - 1);
	if (!fk_charge(device, bytes))
		return cudaErrorMemoryAllocation;
	/* like cudaMalloc, the contents are unspecified: not touching them keeps large
	 * allocations (fresh mmap'd pages) free of page faults until used */
	char *mem = fk_mem_get(device, bytes);
	if (!mem || !fk_alloc_insert(device, mem, bytes, NULL, 0)) {
		if (mem)
			fk_mem_put(device, mem);
		fk_uncharge(device, bytes);
		return cudaErrorMemoryAllocation;
	}
	*out = mem;
	return cudaSuccess;
}

/* ---- the pool model's hooks (fakepool.h; g_lock held) ---- */
static bool fp_take(int device, size_t bytes) { return fk_charge(device, bytes); }
static void fp_give(int device, size_t bytes) { fk_uncharge(device, bytes); }
static char *fp_mem_get(int device, size_t bytes) { return fk_mem_get(device, bytes); }
static void fp_mem_put(int device, char *mem) { fk_mem_put(device, mem); }

static bool fp_track(struct fp_pool *p, char *mem, size_t bytes, size_t size, size_t chunk)
{
	(void)size;
	return fk_alloc_insert(p->device, mem, bytes, p, chunk);
}

static void fk_alloc_release(struct alloc *a)
{
	size_t i = fk_alloc_slot(a->base) - 1;
	memmove(&g_allocs[i], &g_allocs[i + 1], (g_nallocs - i - 1) * sizeof *g_allocs);
	g_nallocs--;
	if (a->pool) {
		fp_free(a->pool, a->base, a->bytes, a->chunk);
	} else {
		fk_uncharge(a->device, a->bytes);
		fk_mem_put(a->device, a->base);
	}
	free(a);
}

/* ---- streams, events, ops (g_lock held) ---- */
struct fk_pts {
	struct CUstream_st *s[FK_MAXDEV];
};

static struct CUstream_st *fk_per_thread(int device)
{
	if (!g_pts_key_ok)
		return NULL;
	struct fk_pts *p = pthread_getspecific(g_pts_key);
	if (!p) {
		p = calloc(1, sizeof *p);
		if (!p || pthread_setspecific(g_pts_key, p) != 0) {
			free(p);
			return NULL;
		}
	}
	if (!p->s[device])
		p->s[device] = fk_stream_new(device, 0, false);
	return p->s[device];
}

/* Map a handle to a stream. ptsz: handle 0 names the per-thread stream. NULL if invalid. */
static struct CUstream_st *fk_stream(cudaStream_t h, bool ptsz)
{
	int d = t_device;
	if (d >= g_ndev)
		return NULL;
	if (h == NULL)
		return ptsz ? fk_per_thread(d) : g_legacy[d];
	if (h == cudaStreamLegacy)
		return g_legacy[d];
	if (h == cudaStreamPerThread)
		return fk_per_thread(d);
	if (h->magic != FK_STREAM_MAGIC || h->dead)
		return NULL;
	return h;
}

static void fk_event_kill(struct CUevent_st *ev);

static void fk_event_unref(struct CUevent_st *ev)
{
	if (--ev->refs == 0) {
		ev->magic = 0;
		free(ev);
	}
}

static void fk_op_free(struct op *o)
{
	if (o->ev)
		fk_event_unref(o->ev);
	free(o);
}

static void fk_ops_free(struct op *o)
{
	while (o) {
		struct op *n = o->next;
		fk_op_free(o);
		o = n;
	}
}

static struct op *fk_op_clone(const struct op *o)
{
	struct op *c = malloc(sizeof *c);
	if (!c)
		return NULL;
	*c = *o;
	c->next = NULL;
	c->running = c->skip = false;
	c->pin_dst = c->pin_src = NULL;
	if (c->ev)
		c->ev->refs++;
	return c;
}

/* Move a destroyed stream whose queue drained out of the scheduler's list. */
static void fk_stream_retire(struct CUstream_st *s)
{
	if (!s->dead || s->head)
		return;
	for (struct CUstream_st **pp = &g_streams; *pp; pp = &(*pp)->next) {
		if (*pp == s) {
			*pp = s->next;
			s->next = g_graveyard;
			g_graveyard = s;
			return;
		}
	}
}

static bool fk_stream_done_upto(const struct CUstream_st *s, unsigned long long seq)
{
	return !s->head || s->head->seq > seq;
}

static bool fk_event_done(const struct CUevent_st *ev)
{
	return !ev->rec_stream || fk_stream_done_upto(ev->rec_stream, ev->rec_seq);
}

/* A blocking stream on `device` is capturing: the legacy stream may not be used. With
 * `invalidate`, using it anyway: every such capture is invalidated. */
static bool fk_legacy_conflict(int device, bool invalidate)
{
	bool any = false;
	for (struct CUstream_st *t = g_streams; t; t = t->next)
		if (t->device == device && t->cap_state && !(t->flags & cudaStreamNonBlocking)) {
			any = true;
			if (invalidate)
				t->cap_state = 2;
		}
	return any;
}

/* An unsafe call (device-wide sync, cudaMalloc, cudaFree) from this thread is prohibited
 * while a global-mode capture runs anywhere, or a thread-local one in this thread. Such a call
 * invalidates the captures that prohibit it. */
static bool fk_capture_prohibits(void)
{
	bool prohibited = false;
	if (t_cap_mode == cudaStreamCaptureModeRelaxed)
		return false; /* this thread opted out: nothing is prohibited */
	for (struct CUstream_st *t = g_streams; t; t = t->next) {
		if (!t->cap_state)
			continue;
		bool mine = pthread_equal(t->cap_thread, pthread_self());
		if (t_cap_mode == cudaStreamCaptureModeThreadLocal && !mine)
			continue; /* thread-local interaction: only this thread's captures count */
		if (t->cap_mode == cudaStreamCaptureModeGlobal ||
		    (t->cap_mode == cudaStreamCaptureModeThreadLocal && mine)) {
			t->cap_state = 2;
			prohibited = true;
		}
	}
	return prohibited;
}

static void fk_start_workers(void);

/* Appends `o` to the singly linked op list head..tail. */
static void fk_append(struct op **head, struct op **tail, struct op *o)
{
	if (*tail)
		(*tail)->next = o;
	else
		*head = o;
	*tail = o;
}

/* Drops what a capture recorded on `s` and ends it (g_lock held). */
static void fk_capture_discard(struct CUstream_st *s)
{
	fk_ops_free(s->cap_head);
	s->cap_head = s->cap_tail = NULL;
	s->cap_state = 0;
}

/* Queue `o` on `s` (or record it into s's capture). Takes ownership of `o` in every case. */
static cudaError_t fk_enqueue(struct CUstream_st *s, struct op *o)
{
	if (s->cap_state) {
		fk_append(&s->cap_head, &s->cap_tail, o);
		return cudaSuccess;
	}
	if (s->legacy && fk_legacy_conflict(s->device, true)) {
		fk_op_free(o);
		return cudaErrorStreamCaptureImplicit;
	}
	o->seq = ++g_seq;
	fk_append(&s->head, &s->tail, o);
	if (o->kind == OP_RECORD) {
		o->ev->rec_stream = s;
		o->ev->rec_seq = o->seq;
	}
	fk_start_workers();
	pthread_cond_broadcast(&g_work);
	return cudaSuccess;
}

static struct op *fk_op(enum op_kind kind)
{
	struct op *o = calloc(1, sizeof *o);
	if (o)
		o->kind = kind;
	return o;
}

/* Wait (g_lock held) until every op issued so far on `device` has completed. */
static void fk_wait_device(int device)
{
	unsigned long long seq = g_seq;
again:
	for (struct CUstream_st *t = g_streams; t; t = t->next) {
		if (t->device == device && !fk_stream_done_upto(t, seq)) {
			pthread_cond_wait(&g_done, &g_lock);
			goto again;
		}
	}
}

static void fk_wait_stream(struct CUstream_st *s, unsigned long long seq)
{
	while (!fk_stream_done_upto(s, seq))
		pthread_cond_wait(&g_done, &g_lock);
}

/* ---- workers ---- */
/* The legacy stream waits for earlier work of the device's blocking streams, and blocking
 * streams wait for earlier legacy work (CUDA's implicit legacy-stream synchronisation). */
static bool fk_runnable(const struct CUstream_st *s, const struct op *h)
{
	if (!(s->flags & cudaStreamNonBlocking)) {
		for (const struct CUstream_st *t = g_streams; t; t = t->next) {
			if (t == s || t->device != s->device || !t->head ||
			    (t->flags & cudaStreamNonBlocking))
				continue;
			if ((s->legacy || t->legacy) && t->head->seq < h->seq)
				return false;
		}
	}
	if (h->kind == OP_WAIT && h->wstream && !fk_stream_done_upto(h->wstream, h->wseq))
		return false;
	if (h->kind == OP_FREE) {
		const struct alloc *a = fk_alloc_exact(h->dst);
		if (a && a->busy)
			return false;
	}
	return true;
}

static struct op *fk_pick(struct CUstream_st **out)
{
	for (struct CUstream_st *s = g_streams; s; s = s->next) {
		struct op *h = s->head;
		if (h && !h->running && fk_runnable(s, h)) {
			*out = s;
			return h;
		}
	}
	return NULL;
}

/* Pin the memory `o` touches; mark it skipped (a fault) when that memory is gone. */
static void fk_pin(struct op *o)
{
	if (o->pinned || (o->kind != OP_COPY && o->kind != OP_SET && o->kind != OP_FILL))
		return;
	o->pinned = true;
	if (o->n == 0)
		return;
	struct alloc *d = fk_alloc_containing(o->dst);
	struct alloc *s = o->kind == OP_COPY ? fk_alloc_containing(o->src) : NULL;
	if ((o->dst_dev && !fk_range_ok(o->dst, o->n)) ||
	    (o->src_dev && !fk_range_ok(o->src, o->n))) {
		o->skip = true;
		g_faults++;
		return;
	}
	if (d) {
		d->busy++;
		o->pin_dst = d;
	}
	if (s) {
		s->busy++;
		o->pin_src = s;
	}
}

static void fk_run(struct op *o)
{
	if (o->skip)
		return;
	switch (o->kind) {
	case OP_COPY:
		memmove(o->dst, o->src, o->n);
		break;
	case OP_SET:
		memset(o->dst, o->value, o->n);
		break;
	case OP_FILL:
		if (o->delay_us) {
			struct timespec ts = { (time_t)(o->delay_us / 1000000u),
			                       (long)(o->delay_us % 1000000u) * 1000L };
			while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
				;
		}
		memset(o->dst, o->value, o->n);
		break;
	default:
		break;
	}
}

/* Completion of the head op of `s` (g_lock held). */
static void fk_complete(struct CUstream_st *s, struct op *o)
{
	if (o->pin_dst)
		o->pin_dst->busy--;
	if (o->pin_src)
		o->pin_src->busy--;
	if (o->kind == OP_FREE) {
		struct alloc *a = fk_alloc_exact(o->dst);
		if (a)
			fk_alloc_release(a);
	} else if (o->kind == OP_RECORD && o->ev->rec_seq <= o->seq) {
		clock_gettime(CLOCK_MONOTONIC, &o->ev->t);
		o->ev->timed = true;
	}
	s->head = o->next;
	if (!s->head)
		s->tail = NULL;
	fk_op_free(o);
	fk_stream_retire(s);
	pthread_cond_broadcast(&g_done);
	pthread_cond_broadcast(&g_work);
}

static void *fk_worker(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&g_lock);
	while (!g_stop) {
		struct CUstream_st *s;
		struct op *o = fk_pick(&s);
		if (!o) {
			pthread_cond_wait(&g_work, &g_lock);
			continue;
		}
		o->running = true;
		fk_pin(o);
		if (o->kind == OP_COPY || o->kind == OP_SET || o->kind == OP_FILL) {
			pthread_mutex_unlock(&g_lock);
			fk_run(o);
			pthread_mutex_lock(&g_lock);
		}
		fk_complete(s, o);
	}
	pthread_mutex_unlock(&g_lock);
	return NULL;
}

static void fk_start_workers(void)
{
	if (g_nworkers || g_stop)
		return;
	for (int i = 0; i < FK_NWORKERS; i++)
		if (pthread_create(&g_workers[g_nworkers], NULL, fk_worker, NULL) == 0)
			g_nworkers++;
}

FK_API int gpfake_workers(void)
{
	pthread_mutex_lock(&g_lock);
	int n = g_nworkers;
	pthread_mutex_unlock(&g_lock);
	return n;
}

/* ---- process lifetime ---- */
static void fk_pts_release(void *arg)
{
	struct fk_pts *p = arg;
	pthread_mutex_lock(&g_lock);
	/* After fk_fini the streams are gone; a thread outliving exit() only frees its slot. */
	bool alive = !__atomic_load_n(&g_shutdown, __ATOMIC_ACQUIRE);
	for (int d = 0; d < FK_MAXDEV && alive; d++) {
		if (p->s[d]) {
			p->s[d]->dead = true;
			fk_stream_retire(p->s[d]);
		}
	}
	pthread_mutex_unlock(&g_lock);
	free(p);
}

static void fk_atfork_prepare(void)
{
	pthread_mutex_lock(&g_ctl);
	pthread_mutex_lock(&g_lock);
}

static void fk_atfork_parent(void)
{
	pthread_mutex_unlock(&g_lock);
	pthread_mutex_unlock(&g_ctl);
}

static void fk_atfork_child(void)
{
	/* Worker threads do not exist in the child; queued work runs on fresh ones. An op a
	 * worker was running is run again from the start, keeping the pins it already holds. */
	g_nworkers = 0;
	for (struct CUstream_st *s = g_streams; s; s = s->next)
		for (struct op *o = s->head; o; o = o->next)
			o->running = false;
	/* the parent's waiters are counted in the condition variables but do not exist here:
	 * a broadcast could go to them and wake nobody */
	pthread_cond_init(&g_work, NULL);
	pthread_cond_init(&g_done, NULL);
	pthread_mutex_unlock(&g_lock);
	pthread_mutex_unlock(&g_ctl);
}

/* Frees every stream of `list` with its queued and captured ops (events are freed by
 * their last reference, and touch no stream). */
static void fk_free_streams(struct CUstream_st **list)
{
	while (*list) {
		struct CUstream_st *s = *list;
		*list = s->next;
		fk_ops_free(s->head);
		fk_ops_free(s->cap_head);
		s->magic = 0;
		free(s);
	}
}

/* At exit: stop the workers (work still queued is dropped), then free everything. Later calls
 * answer cudaErrorCudartUnloading, as the real runtime does once it is torn down. */
__attribute__((destructor)) static void fk_fini(void)
{
	pthread_mutex_lock(&g_lock);
	__atomic_store_n(&g_shutdown, true, __ATOMIC_RELEASE);
	g_stop = true;
	pthread_cond_broadcast(&g_work);
	int n = g_nworkers;
	g_nworkers = 0;
	pthread_mutex_unlock(&g_lock);
	for (int i = 0; i < n; i++)
		pthread_join(g_workers[i], NULL);
	pthread_mutex_lock(&g_lock);
	fk_free_streams(&g_streams);
	fk_free_streams(&g_graveyard);
	for (int d = 0; d < FK_MAXDEV; d++)
		g_legacy[d] = NULL;
	while (g_nallocs)
		fk_alloc_release(g_allocs[g_nallocs - 1]);
	fp_fini();
	free(g_allocs);
	g_allocs = NULL;
	g_allocs_cap = 0;
	pthread_mutex_unlock(&g_lock);
}

/* ---- memory ---- */
static cudaError_t fk_malloc_on(int device, void **devPtr, size_t size)
{
	if (!devPtr)
		return cudaErrorInvalidValue;
	if (size == 0) {
		*devPtr = NULL;
		return cudaSuccess;
	}
	return fk_alloc_new(device, size, devPtr);
}

FK_API cudaError_t cudaMalloc(void **devPtr, size_t size)
{
	ENTER(cudaMalloc);
	if (t_device >= g_ndev)
		return fk_ret(cudaErrorNoDevice);
	pthread_mutex_lock(&g_lock);
	cudaError_t e = devPtr && fk_capture_prohibits() ? cudaErrorStreamCaptureUnsupported
	                                                 : fk_malloc_on(t_device, devPtr, size);
	pthread_mutex_unlock(&g_lock);
	return fk_ret(e);
}

FK_API cudaError_t cudaFree(void *devPtr)
{
	ENTER(cudaFree);
	if (!devPtr) {
#ifdef FK_ON_DRIVER
		/* as libcudart: the device's primary context made current (the idiom that
		 * initialises the context before driver calls) */
		pthread_mutex_lock(&g_lock);
		if (t_device < g_ndev)
			(void)fk_driver(t_device);
		pthread_mutex_unlock(&g_lock);
#endif
		return cudaSuccess;
	}
	pthread_mutex_lock(&g_lock);
	cudaError_t e = cudaSuccess;
	struct alloc *a = fk_alloc_exact(devPtr);
	if (!a || a->free_pending) {
		e = cudaErrorInvalidValue;
	} else if (fk_capture_prohibits()) {
		e = cudaErrorStreamCaptureUnsupported;
	} else {
		/* cudaFree is a device-wide fence: all work issued before it completes first. */
		a->free_pending = true;
		fk_wait_device(a->device);
		a = fk_alloc_exact(devPtr);
		if (a)
			fk_alloc_release(a);
	}
	pthread_mutex_unlock(&g_lock);
	return fk_ret(e);
}

static cudaError_t fk_malloc_async(void **devPtr, size_t size, cudaStream_t h, bool ptsz)
{
	pthread_mutex_lock(&g_lock);
	cudaError_t e;
	struct CUstream_st *s = g_ndev ? fk_stream(h, ptsz) : NULL;
	if (!g_ndev)
		e = cudaErrorNoDevice; /* the runtime cannot start: no stream is looked at */
	else if (!s)
		e = cudaErrorInvalidResourceHandle;
	else
		e = fk_malloc_on(s->device, devPtr, size);
	pthread_mutex_unlock(&g_lock);
	return fk_ret(e);
}

FK_API cudaError_t cudaMallocAsync(void **devPtr, size_t size, cudaStream_t hStream)
{
	ENTER(cudaMallocAsync);
	return fk_malloc_async(devPtr, size, hStream, false);
}

FK_API cudaError_t cudaMallocAsync_ptsz(void **devPtr, size_t size, cudaStream_t hStream)
{
	ENTER(cudaMallocAsync_ptsz);
	return fk_malloc_async(devPtr, size, hStream, true);
}

/* The memory is released when the stream reaches the free. */
static cudaError_t fk_free_async(void *p, cudaStream_t h, bool ptsz)
{
	if (!p)
		return cudaSuccess;
	pthread_mutex_lock(&g_lock);
	cudaError_t e;
	struct CUstream_st *s = fk_stream(h, ptsz);
	struct alloc *a = fk_alloc_exact(p);
	struct op *o = NULL;
	if (!s)
		e = cudaErrorInvalidResourceHandle;
	else if (!a || a->free_pending)
		e = cudaErrorInvalidValue;
	else if (!(o = fk_op(OP_FREE)))
		e = cudaErrorMemoryAllocation;
	else {
		o->dst = p;
		e = fk_enqueue(s, o);
		if (e == cudaSuccess)
			a->free_pending = true;
	}
	pthread_mutex_unlock(&g_lock);
	return fk_ret(e);
}

FK_API cudaError_t cudaFreeAsync(void *devPtr, cudaStream_t hStream)
{
	ENTER(cudaFreeAsync);
	return fk_free_async(devPtr, hStream, false);
}

FK_API cudaError_t cudaFreeAsync_ptsz(void *devPtr, cudaStream_t hStream)
{
	ENTER(cudaFreeAsync_ptsz);
	return fk_free_async(devPtr, hStream, true);
}

/* ---- managed, pitched and 3D memory: plain allocations of their own sizes ---- */
FK_API cudaError_t cudaMallocManaged(void **devPtr, size_t size, unsigned int flags)
{
	ENTER(cudaMallocManaged);
	if (!devPtr || size == 0 || (flags != cudaMemAttachGlobal && flags != cudaMemAttachHost))
		return fk_ret(cudaErrorInvalidValue);
	if (t_device >= g_ndev)
		return fk_ret(cudaErrorNoDevice);
	pthread_mutex_lock(&g_lock);
	cudaError_t e = fk_alloc_new(t_device, size, devPtr);
	pthread_mutex_unlock(&g_lock);
	return fk_ret(e);
}

/* Rows of `width` bytes rounded up to FK_ALIGN (the pitch), `height` of them; an empty
 * extent gives NULL, as cudaMalloc(0) does. */
static cudaError_t fk_malloc_pitched(void **devPtr, size_t *pitch, size_t width, size_t rows)
{
	if (!devPtr || !pitch || width > SIZE_MAX - FK_ALIGN)
		return cudaErrorInvalidValue;
	if (t_device >= g_ndev)
		return cudaErrorNoDevice;
	size_t pt = (width + FK_ALIGN - 1) & ~(size_t)(FK_ALIGN - 1);
	*pitch = pt;
	if (pt == 0 || rows == 0) {
		*devPtr = NULL;
		return cudaSuccess;
	}
	if (rows > SIZE_MAX / pt)
		return cudaErrorMemoryAllocation;
	pthread_mutex_lock(&g_lock);
	cudaError_t e = fk_alloc_new(t_device, pt * rows, devPtr);
	pthread_mutex_unlock(&g_lock);
	return e;
}

FK_API cudaError_t cudaMallocPitch(void **devPtr, size_t *pitch, size_t width, size_t height)
{
	ENTER(cudaMallocPitch);
	return fk_ret(fk_malloc_pitched(devPtr, pitch, width, height));
}

FK_API cudaError_t cudaMalloc3D(struct cudaPitchedPtr *p, struct cudaExtent extent)
{
	ENTER(cudaMalloc3D);
	if (!p)
		return fk_ret(cudaErrorInvalidValue);
	if (extent.depth && extent.height > SIZE_MAX / extent.depth)
		return fk_ret(cudaErrorMemoryAllocation);
	void *ptr = NULL;
	size_t pitch = 0;
	cudaError_t e = fk_malloc_pitched(&ptr, &pitch, extent.width, extent.height * extent.depth);
	if (e == cudaSuccess)
		*p = (struct cudaPitchedPtr){ .ptr = ptr, .pitch = pitch, .xsize = extent.width, .ysize = extent.height };
	return fk_ret(e);
}

/* ---- memory pools (the model: fakepool.c) ---- */
_Static_assert(cudaMemPoolReuseFollowEventDependencies == (int)FP_REUSE_FOLLOW_EVENT_DEPENDENCIES &&
                       cudaMemPoolAttrUsedMemHigh == (int)FP_USED_MEM_HIGH,
               "the runtime numbers pool attributes as fakepool.h does");

static cudaError_t fk_pool_err(enum fp_err e)
{
	static const cudaError_t map[] = { cudaSuccess, cudaErrorInvalidValue, cudaErrorInvalidDevice,
	                                   cudaErrorMemoryAllocation };
	return fk_ret(map[e]);
}

FK_API cudaError_t cudaMemPoolCreate(cudaMemPool_t *memPool, const struct cudaMemPoolProps *props)
{
	ENTER(cudaMemPoolCreate);
	if (!memPool || !props || props->allocType != cudaMemAllocationTypePinned ||
	    props->location.type != cudaMemLocationTypeDevice)
		return fk_ret(cudaErrorInvalidValue);
	struct fp_pool *p = NULL;
	pthread_mutex_lock(&g_lock);
	enum fp_err e = fp_create(props->location.id, &p);
	pthread_mutex_unlock(&g_lock);
	if (e == FP_OK)
		*memPool = (cudaMemPool_t)p;
	return fk_pool_err(e);
}

/* Returns at once (fp_destroy). */
FK_API cudaError_t cudaMemPoolDestroy(cudaMemPool_t memPool)
{
	ENTER(cudaMemPoolDestroy);
	FP_RETURN(&g_lock, fk_pool_err, fp_destroy(memPool));
}

static cudaError_t fk_device_pool(cudaMemPool_t *memPool, int device, bool current)
{
	if (!memPool)
		return fk_ret(cudaErrorInvalidValue);
	struct fp_pool *p = NULL;
	pthread_mutex_lock(&g_lock);
	enum fp_err e = fp_device_pool(device, current, &p);
	pthread_mutex_unlock(&g_lock);
	if (e == FP_OK)
		*memPool = (cudaMemPool_t)p;
	return fk_pool_err(e);
}

FK_API cudaError_t cudaDeviceGetDefaultMemPool(cudaMemPool_t *memPool, int device)
{
	ENTER(cudaDeviceGetDefaultMemPool);
	return fk_device_pool(memPool, device, false);
}

FK_API cudaError_t cudaDeviceGetMemPool(cudaMemPool_t *memPool, int device)
{
	ENTER(cudaDeviceGetMemPool);
	return fk_device_pool(memPool, device, true);
}

FK_API cudaError_t cudaDeviceSetMemPool(int device, cudaMemPool_t memPool)
{
	ENTER(cudaDeviceSetMemPool);
	FP_RETURN(&g_lock, fk_pool_err, fp_set_device_pool(device, memPool));
}

static cudaError_t fk_malloc_from_pool(void **ptr, size_t size, cudaMemPool_t pool, cudaStream_t h,
                                       bool ptsz)
{
	if (!ptr || size == 0)
		return fk_ret(cudaErrorInvalidValue);
	char *m = NULL;
	pthread_mutex_lock(&g_lock);
	cudaError_t e = !fk_stream(h, ptsz) ? fk_ret(cudaErrorInvalidResourceHandle)
	                                    : fk_pool_err(fp_alloc(pool, size, &m));
	pthread_mutex_unlock(&g_lock);
	if (e == cudaSuccess)
		*ptr = m;
	return e;
}

FK_API cudaError_t cudaMallocFromPoolAsync(void **ptr, size_t size, cudaMemPool_t memPool,
                                           cudaStream_t stream)
{
	ENTER(cudaMallocFromPoolAsync);
	return fk_malloc_from_pool(ptr, size, memPool, stream, false);
}

FK_API cudaError_t cudaMallocFromPoolAsync_ptsz(void **ptr, size_t size, cudaMemPool_t memPool,
                                                cudaStream_t stream)
{
	ENTER(cudaMallocFromPoolAsync_ptsz);
	return fk_malloc_from_pool(ptr, size, memPool, stream, true);
}

FK_API cudaError_t cudaMemPoolGetAttribute(cudaMemPool_t memPool, enum cudaMemPoolAttr attr,
                                           void *value)
{
	ENTER(cudaMemPoolGetAttribute);
	FP_RETURN(&g_lock, fk_pool_err, fp_get(memPool, (enum fp_attr)attr, value));
}

FK_API cudaError_t cudaMemPoolSetAttribute(cudaMemPool_t memPool, enum cudaMemPoolAttr attr,
                                           void *value)
{
	ENTER(cudaMemPoolSetAttribute);
	FP_RETURN(&g_lock, fk_pool_err, fp_set(memPool, (enum fp_attr)attr, value));
}

FK_API cudaError_t cudaMemPoolTrimTo(cudaMemPool_t memPool, size_t minBytesToKeep)
{
	ENTER(cudaMemPoolTrimTo);
	FP_RETURN(&g_lock, fk_pool_err, fp_trim_to(memPool, minBytesToKeep));
}

/* Is `p` (n bytes) acceptable as the device side of a copy? Sets *dev when it is device memory. */
static bool fk_side_ok(const void *p, size_t n, bool must_be_dev, bool *dev)
{
	if (must_be_dev) {
		*dev = true;
		return fk_range_ok(p, n);
	}
	*dev = false;
	return true;
}

/* Queue a copy/memset/fill on `s` (g_lock held); *seq gets its issue number. */
static cudaError_t fk_issue(struct CUstream_st *s, enum op_kind kind, void *dst, const void *src,
                            size_t n, int value, unsigned delay_us, enum cudaMemcpyKind mk,
                            unsigned long long *seq)
{
	struct op *o;
	bool dd = false, sd = false;
	if (kind == OP_COPY) {
		if ((unsigned)mk > cudaMemcpyDefault)
			return cudaErrorInvalidMemcpyDirection;
		if (n == 0) {
			*seq = 0;
			return cudaSuccess;
		}
		if (!dst || !src)
			return cudaErrorInvalidValue;
		bool ddev = mk == cudaMemcpyHostToDevice || mk == cudaMemcpyDeviceToDevice ||
		            (mk == cudaMemcpyDefault && fk_alloc_containing(dst));
		bool sdev = mk == cudaMemcpyDeviceToHost || mk == cudaMemcpyDeviceToDevice ||
		            (mk == cudaMemcpyDefault && fk_alloc_containing(src));
		if (!fk_side_ok(dst, n, ddev, &dd) || !fk_side_ok(src, n, sdev, &sd))
			return cudaErrorInvalidValue;
	} else {
		if (n == 0) {
			*seq = 0;
			return cudaSuccess;
		}
		if (!fk_range_ok(dst, n))
			return cudaErrorInvalidValue;
		dd = true;
	}
	if (!(o = fk_op(kind)))
		return cudaErrorMemoryAllocation;
	o->dst = dst;
	o->src = src;
	o->n = n;
	o->value = value;
	o->delay_us = delay_us;
	o->dst_dev = dd;
	o->src_dev = sd;
	cudaError_t e = fk_enqueue(s, o);
	*seq = s->cap_state ? 0 : g_seq;
	return e;
}

static cudaError_t fk_issue_on(cudaStream_t h, bool ptsz, bool sync, enum op_kind kind,
                               void *dst, const void *src, size_t n, int value,
                               unsigned delay_us, enum cudaMemcpyKind mk)
{
	pthread_mutex_lock(&g_lock);
	cudaError_t e;
	struct CUstream_st *s = fk_stream(h, ptsz);
	unsigned long long seq = 0;
	if (!s)
		e = cudaErrorInvalidResourceHandle;
	else if (sync && s->cap_state)
		e = cudaErrorStreamCaptureUnsupported;
	else
		e = fk_issue(s, kind, dst, src, n, value, delay_us, mk, &seq);
	if (e == cudaSuccess && sync && seq)
		fk_wait_stream(s, seq);
	pthread_mutex_unlock(&g_lock);
	return fk_ret(e);
}

FK_API cudaError_t cudaMemcpy(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind)
{
	ENTER(cudaMemcpy);
	return fk_issue_on(NULL, false, true, OP_COPY, dst, src, count, 0, 0, kind);
}

FK_API cudaError_t cudaMemcpy_ptds(void *dst, const void *src, size_t count,
                                   enum cudaMemcpyKind kind)
{
	ENTER(cudaMemcpy_ptds);
	return fk_issue_on(NULL, true, true, OP_COPY, dst, src, count, 0, 0, kind);
}

FK_API cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t count,
                                   enum cudaMemcpyKind kind, cudaStream_t stream)
{
	ENTER(cudaMemcpyAsync);
	return fk_issue_on(stream, false, false, OP_COPY, dst, src, count, 0, 0, kind);
}

FK_API cudaError_t cudaMemcpyAsync_ptsz(void *dst, const void *src, size_t count,
                                        enum cudaMemcpyKind kind, cudaStream_t stream)
{
	ENTER(cudaMemcpyAsync_ptsz);
	return fk_issue_on(stream, true, false, OP_COPY, dst, src, count, 0, 0, kind);
}

FK_API cudaError_t cudaMemset(void *devPtr, int value, size_t count)
{
	ENTER(cudaMemset);
	return fk_issue_on(NULL, false, true, OP_SET, devPtr, NULL, count, value, 0,
	                   cudaMemcpyDefault);
}

FK_API cudaError_t cudaMemset_ptds(void *devPtr, int value, size_t count)
{
	ENTER(cudaMemset_ptds);
	return fk_issue_on(NULL, true, true, OP_SET, devPtr, NULL, count, value, 0,
	                   cudaMemcpyDefault);
}

FK_API cudaError_t cudaMemsetAsync(void *devPtr, int value, size_t count, cudaStream_t stream)
{
	ENTER(cudaMemsetAsync);
	return fk_issue_on(stream, false, false, OP_SET, devPtr, NULL, count, value, 0,
	                   cudaMemcpyDefault);
}

FK_API cudaError_t cudaMemsetAsync_ptsz(void *devPtr, int value, size_t count,
                                        cudaStream_t stream)
{
	ENTER(cudaMemsetAsync_ptsz);
	return fk_issue_on(stream, true, false, OP_SET, devPtr, NULL, count, value, 0,
	                   cudaMemcpyDefault);
}

FK_API cudaError_t gpfake_launch_fill(void *dst, size_t n, unsigned char value, unsigned delay_us,
                                      cudaStream_t s)
{
	ENTER(gpfake_launch_fill);
	return fk_issue_on(s, false, false, OP_FILL, dst, NULL, n, value, delay_us,
	                   cudaMemcpyDefault);
}

/* ---- devices ---- */
FK_API cudaError_t cudaSetDevice(int device)
{
	ENTER(cudaSetDevice);
	if (g_ndev == 0)
		return fk_ret(cudaErrorNoDevice);
	if (device < 0 || device >= g_ndev)
		return fk_ret(cudaErrorInvalidDevice);
	t_device = device;
	return cudaSuccess;
}

FK_API cudaError_t cudaGetDevice(int *device)
{
	ENTER(cudaGetDevice);
	if (!device)
		return fk_ret(cudaErrorInvalidValue);
	if (g_ndev == 0)
		return fk_ret(cudaErrorNoDevice);
	*device = t_device;
	return cudaSuccess;
}

FK_API cudaError_t cudaGetDeviceCount(int *count)
{
	ENTER(cudaGetDeviceCount);
	if (!count)
		return fk_ret(cudaErrorInvalidValue);
	if (g_ndev == 0) {
		*count = 0;
		return fk_ret(cudaErrorNoDevice);
	}
	*count = g_ndev;
	return cudaSuccess;
}

/* Name, UUID (the physical device's, the same in every process) and total memory; every
 * other property is zero. */
static cudaError_t fk_device_properties(struct cudaDeviceProp *prop, int device)
{
	if (!prop)
		return fk_ret(cudaErrorInvalidValue);
	if (device < 0 || device >= g_ndev)
		return fk_ret(cudaErrorInvalidDevice);
	memset(prop, 0, sizeof *prop);
	snprintf(prop->name, sizeof prop->name, "fake GPU");
	fm_uuid(g_phys[device], (unsigned char *)prop->uuid.bytes);
	pthread_mutex_lock(&g_lock);
	prop->totalGlobalMem = fk_capacity(device);
	pthread_mutex_unlock(&g_lock);
	return cudaSuccess;
}

FK_API cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *prop, int device)
{
	ENTER(cudaGetDeviceProperties);
	return fk_device_properties(prop, device);
}

FK_API cudaError_t cudaGetDeviceProperties_v2(struct cudaDeviceProp *prop, int device)
{
	ENTER(cudaGetDeviceProperties_v2);
	return fk_device_properties(prop, device);
}

/* What the fake has (memory pools, managed memory) answers 1; every other attribute 0. */
FK_API cudaError_t cudaDeviceGetAttribute(int *value, enum cudaDeviceAttr attr, int device)
{
	ENTER(cudaDeviceGetAttribute);
	if (!value)
		return fk_ret(cudaErrorInvalidValue);
	if (device < 0 || device >= g_ndev)
		return fk_ret(cudaErrorInvalidDevice);
	*value = attr == cudaDevAttrMemoryPoolsSupported || attr == cudaDevAttrManagedMemory;
	return cudaSuccess;
}

FK_API cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total)
{
	ENTER(cudaMemGetInfo);
	if (!free_bytes || !total)
		return fk_ret(cudaErrorInvalidValue);
	if (t_device >= g_ndev)
		return fk_ret(cudaErrorNoDevice);
	pthread_mutex_lock(&g_lock);
	*total = fk_capacity(t_device);
	*free_bytes = fk_free_bytes(t_device);
#ifdef FK_ON_DRIVER
	/* the runtime's own capacity (gpfake_set_capacity) within what the driver has */
	size_t df, dt;
	if (fk_driver_info(t_device, &df, &dt)) {
		*total = dt < *total ? dt : *total;
		*free_bytes = df < *free_bytes ? df : *free_bytes;
	}
#endif
	pthread_mutex_unlock(&g_lock);
	return cudaSuccess;
}

FK_API cudaError_t cudaDeviceSynchronize(void)
{
	ENTER(cudaDeviceSynchronize);
	if (t_device >= g_ndev)
		return fk_ret(cudaErrorNoDevice);
	pthread_mutex_lock(&g_lock);
	cudaError_t e = cudaSuccess;
	if (fk_capture_prohibits()) {
		e = cudaErrorStreamCaptureUnsupported;
	} else {
		fk_wait_device(t_device);
		fp_settle(t_device);
	}
	pthread_mutex_unlock(&g_lock);
	return fk_ret(e);
}

/* Waits for the device, then frees every allocation and destroys every event of the
 * current device, as the real reset does (a handle used after it is invalid). Streams and
 * graphs survive (the real reset destroys them too). FAKECUDA_RESET_DELAY_US: sleeps that
 * long first, so that other threads' calls race with the reset. */
FK_API cudaError_t cudaDeviceReset(void)
{
	ENTER(cudaDeviceReset);
	if (t_device >= g_ndev)
		return fk_ret(cudaErrorNoDevice);
	if (g_reset_delay_us) {
		struct timespec ts = {(time_t)(g_reset_delay_us / 1000000), (long)(g_reset_delay_us % 1000000) * 1000};
		while (nanosleep(&ts, &ts) != 0)
			;
	}
	pthread_mutex_lock(&g_lock);
	fk_wait_device(t_device);
	/* cudaMallocAsync's and cudaMallocFromPoolAsync's memory survives it (cuda_runtime_api.h:
	 * "cudaDeviceReset() will not destroy memory allocations by cudaMallocAsync() and
	 * cudaMallocFromPoolAsync()"); the pools give back only what they hold unused */
	for (size_t i = g_nallocs; i-- > 0;)
		if (g_allocs[i]->device == t_device && !g_allocs[i]->busy && !g_allocs[i]->pool)
			fk_alloc_release(g_allocs[i]);
	fp_reset(t_device);
	for (struct CUevent_st *ev = g_events, *next; ev; ev = next) {
		next = ev->lnext;
		if (ev->device == t_device)
			fk_event_kill(ev);
	}
	pthread_mutex_unlock(&g_lock);
	return cudaSuccess;
}

/* ---- streams ---- */
static cudaError_t fk_stream_create(cudaStream_t *p, unsigned flags)
{
	if (!p || (flags & ~(unsigned)cudaStreamNonBlocking))
		return fk_ret(cudaErrorInvalidValue);
	if (t_device >= g_ndev)
		return fk_ret(cudaErrorNoDevice);
	pthread_mutex_lock(&g_lock);
	struct CUstream_st *s = fk_stream_new(t_device, flags, false);
	pthread_mutex_unlock(&g_lock);
	if (!s)
		return fk_ret(cudaErrorMemoryAllocation);
	*p = s;
	return cudaSuccess;
}

FK_API cudaError_t cudaStreamCreate(cudaStream_t *pStream)
{
	ENTER(cudaStreamCreate);
	return fk_stream_create(pStream, 0);
}

FK_API cudaError_t cudaStreamCreateWithFlags(cudaStream_t *pStream, unsigned int flags)
{
	ENTER(cudaStreamCreateWithFlags);
	return fk_stream_create(pStream, flags);
}

/* Priorities are accepted and ignored (the fake runs every ready stream alike). */
FK_API cudaError_t cudaStreamCreateWithPriority(cudaStream_t *pStream, unsigned int flags, int priority)
{
	ENTER(cudaStreamCreateWithPriority);
	(void)priority;
	return fk_stream_create(pStream, flags);
}

/* Returns at once; work already queued still runs (as in CUDA). */
FK_API cudaError_t cudaStreamDestroy(cudaStream_t stream)
{
	ENTER(cudaStreamDestroy);
	if (stream == NULL || stream == cudaStreamLegacy || stream == cudaStreamPerThread)
		return fk_ret(cudaErrorInvalidResourceHandle);
	pthread_mutex_lock(&g_lock);
	cudaError_t e = cudaSuccess;
	struct CUstream_st *s = fk_stream(stream, false);
	if (!s) {
		e = cudaErrorInvalidResourceHandle;
	} else {
		fk_capture_discard(s);
		s->dead = true;
		fk_stream_retire(s);
	}
	pthread_mutex_unlock(&g_lock);
	return fk_ret(e);
}

static cudaError_t fk_stream_sync(cudaStream_t h, bool ptsz)
{
	pthread_mutex_lock(&g_lock);
	cudaError_t e = cudaSuccess;
	struct CUstream_st *s = fk_stream(h, ptsz);
	if (!s) {
		e = cudaErrorInvalidResourceHandle;
	} else if (s->cap_state) {
		s->cap_state = 2;
		e = cudaErrorStreamCaptureUnsupported;
	} else if (s->legacy) {
		/* A marker on the legacy stream waits for the device's earlier blocking work too. */
		struct op *o = fk_op(OP_NOP);
		if (!o)
			e = cudaErrorMemoryAllocation;
		else if ((e = fk_enqueue(s, o)) == cudaSuccess)
			fk_wait_stream(s, g_seq);
	} else {
		fk_wait_stream(s, g_seq);
	}
	if (e == cudaSuccess)
		fp_settle(s->device);
	pthread_mutex_unlock(&g_lock);
	return fk_ret(e);
}

FK_API cudaError_t cudaStreamSynchronize(cudaStream_t stream)
{
	ENTER(cudaStreamSynchronize);
	return fk_stream_sync(stream, false);
}

FK_API cudaError_t cudaStreamSynchronize_ptsz(cudaStream_t stream)
{
	ENTER(cudaStreamSynchronize_ptsz);
	return fk_stream_sync(stream, true);
}

static cudaError_t fk_stream_query(cudaStream_t h, bool ptsz)
{
	pthread_mutex_lock(&g_lock);
	cudaError_t e = cudaSuccess;
	struct CUstream_st *s = fk_stream(h, ptsz);
	if (!s) {
		e = cudaErrorInvalidResourceHandle;
	} else if (s->cap_state) {
		s->cap_state = 2;
		e = cudaErrorStreamCaptureUnsupported;
	} else if (s->head) {
		e = cudaErrorNotReady;
	} else if (s->legacy) {
		for (struct CUstream_st *t = g_streams; t; t = t->next)
			if (t->device == s->device && t->head && !(t->flags & cudaStreamNonBlocking))
				e = cudaErrorNotReady;
	}
	pthread_mutex_unlock(&g_lock);
	return fk_ret(e);
}

FK_API cudaError_t cudaStreamQuery(cudaStream_t stream)
{
	ENTER(cudaStreamQuery);
	return fk_stream_query(stream, false);
}

FK_API cudaError_t cudaStreamQuery_ptsz(cudaStream_t stream)
{
	ENTER(cudaStreamQuery_ptsz);
	return fk_stream_query(stream, true);
}

enum fk_sattr { SA_ID, SA_DEVICE, SA_FLAGS };

static cudaError_t fk_stream_get(cudaStream_t h, bool ptsz, enum fk_sattr what, void *out)
{
	if (!out)
		return fk_ret(cudaErrorInvalidValue);
	pthread_mutex_lock(&g_lock);
	cudaError_t e = cudaSuccess;
	struct CUstream_st *s = fk_stream(h, ptsz);
	if (!s)
		e = cudaErrorInvalidResourceHandle;
	else if (what == SA_ID)
		*(unsigned long long *)out = s->id;
	else if (what == SA_DEVICE)
		*(int *)out = s->device;
	else
		*(unsigned *)out = s->flags;
	pthread_mutex_unlock(&g_lock);
	return fk_ret(e);
}

FK_API cudaError_t cudaStreamGetId(cudaStream_t hStream, unsigned long long *streamId)
{
	ENTER(cudaStreamGetId);
	return fk_stream_get(hStream, false, SA_ID, streamId);
}

FK_API cudaError_t cudaStreamGetId_ptsz(cudaStream_t hStream, unsigned long long *streamId)
{
	ENTER(cudaStreamGetId_ptsz);
	return fk_stream_get(hStream, true, SA_ID, streamId);
}

FK_API cudaError_t cudaStreamGetDevice(cudaStream_t hStream, int *device)
{
	ENTER(cudaStreamGetDevice);
	return fk_stream_get(hStream, false, SA_DEVICE, device);
}

FK_API cudaError_t cudaStreamGetDevice_ptsz(cudaStream_t hStream, int *device)
{
	ENTER(cudaStreamGetDevice_ptsz);
	return fk_stream_get(hStream, true, SA_DEVICE, device);
}

FK_API cudaError_t cudaStreamGetFlags(cudaStream_t hStream, unsigned int *flags)
{
	ENTER(cudaStreamGetFlags);
	return fk_stream_get(hStream, false, SA_FLAGS, flags);
}

FK_API cudaError_t cudaStreamGetFlags_ptsz(cudaStream_t hStream, unsigned int *flags)
{
	ENTER(cudaStreamGetFlags_ptsz);
	return fk_stream_get(hStream, true, SA_FLAGS, flags);
}

static struct CUevent_st *fk_event(cudaEvent_t ev)
{
	return ev && ev->magic == FK_EVENT_MAGIC && !ev->dead ? ev : NULL;
}

/* The stream's later work waits until the event's latest record (at call time) completed. */
static cudaError_t fk_stream_wait_event(cudaStream_t h, bool ptsz, cudaEvent_t event,
                                        unsigned flags)
{
	pthread_mutex_lock(&g_lock);
	cudaError_t e = cudaSuccess;
	struct CUstream_st *s = fk_stream(h, ptsz);
	struct CUevent_st *ev = fk_event(event);
	if (!s || !ev) {
		e = cudaErrorInvalidResourceHandle;
	} else if (flags & ~1u) {
		e = cudaErrorInvalidValue;
	} else if (!fk_event_done(ev)) {
		struct op *o = fk_op(OP_WAIT);
		if (!o) {
			e = cudaErrorMemoryAllocation;
		} else {
			o->wstream = ev->rec_stream;
			o->wseq = ev->rec_seq;
			e = fk_enqueue(s, o);
		}
	}
	pthread_mutex_unlock(&g_lock);
	return fk_ret(e);
}

FK_API cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int flags)
{
	ENTER(cudaStreamWaitEvent);
	return fk_stream_wait_event(stream, false, event, flags);
}

FK_API cudaError_t cudaStreamWaitEvent_ptsz(cudaStream_t stream, cudaEvent_t event,
                                            unsigned int flags)
{
	ENTER(cudaStreamWaitEvent_ptsz);
	return fk_stream_wait_event(stream, true, event, flags);
}

/* ---- events ---- */
static cudaError_t fk_event_create(cudaEvent_t *p, unsigned flags)
{
	if (!p || (flags & ~0xfu))
		return fk_ret(cudaErrorInvalidValue);
	struct CUevent_st *ev = calloc(1, sizeof *ev);
	if (!ev)
		return fk_ret(cudaErrorMemoryAllocation);
	ev->magic = FK_EVENT_MAGIC;
	ev->flags = flags;
	ev->refs = 1;
	ev->device = t_device;
	pthread_mutex_lock(&g_lock);
	ev->lnext = g_events;
	if (g_events)
		g_events->lprev = ev;
	g_events = ev;
	pthread_mutex_unlock(&g_lock);
	*p = ev;
	return cudaSuccess;
}

/* The handle of ev is no longer valid (destroyed, or its device reset): the memory goes with
 * its last reference, so a later use of the handle is a use after free (ASan reports it, as
 * the real runtime may crash on it). g_lock held. */
static void fk_event_kill(struct CUevent_st *ev)
{
	ev->dead = true;
	if (ev->lprev)
		ev->lprev->lnext = ev->lnext;
	else
		g_events = ev->lnext;
	if (ev->lnext)
		ev->lnext->lprev = ev->lprev;
	fk_event_unref(ev);
}

FK_API cudaError_t cudaEventCreate(cudaEvent_t *event)
{
	ENTER(cudaEventCreate);
	return fk_event_create(event, 0);
}

FK_API cudaError_t cudaEventCreateWithFlags(cudaEvent_t *event, unsigned int flags)
{
	ENTER(cudaEventCreateWithFlags);
	return fk_event_create(event, flags);
}

static cudaError_t fk_event_record(cudaEvent_t event, cudaStream_t h, bool ptsz)
{
	pthread_mutex_lock(&g_lock);
	cudaError_t e;
	struct CUstream_st *s = fk_stream(h, ptsz);
	struct CUevent_st *ev = fk_event(event);
	struct op *o;
	if (!s || !ev) {
		e = cudaErrorInvalidResourceHandle;
	} else if (!(o = fk_op(OP_RECORD))) {
		e = cudaErrorMemoryAllocation;
	} else {
		o->ev = ev;
		ev->refs++;
		e = fk_enqueue(s, o);
	}
	pthread_mutex_unlock(&g_lock);
	return fk_ret(e);
}

FK_API cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream)
{
	ENTER(cudaEventRecord);
	return fk_event_record(event, stream, false);
}

FK_API cudaError_t cudaEventRecord_ptsz(cudaEvent_t event, cudaStream_t stream)
{
	ENTER(cudaEventRecord_ptsz);
	return fk_event_record(event, stream, true);
}

FK_API cudaError_t cudaEventQuery(cudaEvent_t event)
{
	ENTER(cudaEventQuery);
	pthread_mutex_lock(&g_lock);
	struct CUevent_st *ev = fk_event(event);
	cudaError_t e = !ev ? cudaErrorInvalidResourceHandle
	                    : fk_event_done(ev) ? cudaSuccess : cudaErrorNotReady;
	pthread_mutex_unlock(&g_lock);
	return fk_ret(e);
}

FK_API cudaError_t cudaEventSynchronize(cudaEvent_t event)
{
	ENTER(cudaEventSynchronize);
	pthread_mutex_lock(&g_lock);
	cudaError_t e = cudaSuccess;
	struct CUevent_st *ev = fk_event(event);
	if (!ev)
		e = cudaErrorInvalidResourceHandle;
	else if (ev->rec_stream)
		fk_wait_stream(ev->rec_stream, ev->rec_seq);
	pthread_mutex_unlock(&g_lock);
	return fk_ret(e);
}

/* Returns at once; a record still queued keeps the event alive until it ran. */
FK_API cudaError_t cudaEventDestroy(cudaEvent_t event)
{
	ENTER(cudaEventDestroy);
	pthread_mutex_lock(&g_lock);
	cudaError_t e = cudaSuccess;
	struct CUevent_st *ev = fk_event(event);
	if (!ev)
		e = cudaErrorInvalidResourceHandle;
	else
		fk_event_kill(ev);
	pthread_mutex_unlock(&g_lock);
	return fk_ret(e);
}

FK_API cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end)
{
	ENTER(cudaEventElapsedTime);
	if (!ms)
		return fk_ret(cudaErrorInvalidValue);
	pthread_mutex_lock(&g_lock);
	cudaError_t e = cudaSuccess;
	struct CUevent_st *a = fk_event(start), *b = fk_event(end);
	if (!a || !b || (a->flags & cudaEventDisableTiming) || (b->flags & cudaEventDisableTiming) ||
	    !a->rec_stream || !b->rec_stream)
		e = cudaErrorInvalidResourceHandle;
	else if (!fk_event_done(a) || !fk_event_done(b))
		e = cudaErrorNotReady;
	else
		*ms = (float)((double)(b->t.tv_sec - a->t.tv_sec) * 1e3 +
		              (double)(b->t.tv_nsec - a->t.tv_nsec) / 1e6);
	pthread_mutex_unlock(&g_lock);
	return fk_ret(e);
}

/* ---- stream capture and graphs ---- */
static cudaError_t fk_begin_capture(cudaStream_t h, bool ptsz, enum cudaStreamCaptureMode mode)
{
	pthread_mutex_lock(&g_lock);
	cudaError_t e = cudaSuccess;
	struct CUstream_st *s = fk_stream(h, ptsz);
	if (!s)
		e = cudaErrorInvalidResourceHandle;
	else if ((unsigned)mode > cudaStreamCaptureModeRelaxed)
		e = cudaErrorInvalidValue;
	else if (s->legacy)
		e = cudaErrorStreamCaptureUnsupported;
	else if (s->cap_state)
		e = cudaErrorIllegalState;
	else {
		s->cap_state = 1;
		s->cap_mode = mode;
		s->cap_thread = pthread_self();
	}
	pthread_mutex_unlock(&g_lock);
	return fk_ret(e);
}

FK_API cudaError_t cudaStreamBeginCapture(cudaStream_t stream, enum cudaStreamCaptureMode mode)
{
	ENTER(cudaStreamBeginCapture);
	return fk_begin_capture(stream, false, mode);
}

FK_API cudaError_t cudaStreamBeginCapture_ptsz(cudaStream_t stream,
                                               enum cudaStreamCaptureMode mode)
{
	ENTER(cudaStreamBeginCapture_ptsz);
	return fk_begin_capture(stream, true, mode);
}

static cudaError_t fk_end_capture(cudaStream_t h, bool ptsz, cudaGraph_t *pGraph)
{
	if (!pGraph)
		return fk_ret(cudaErrorInvalidValue);
	pthread_mutex_lock(&g_lock);
	cudaError_t e = cudaSuccess;
	struct CUstream_st *s = fk_stream(h, ptsz);
	if (!s) {
		e = cudaErrorInvalidResourceHandle;
	} else if (!s->cap_state) {
		e = cudaErrorIllegalState;
	} else if (s->cap_mode != cudaStreamCaptureModeRelaxed &&
	           !pthread_equal(s->cap_thread, pthread_self())) {
		e = cudaErrorStreamCaptureWrongThread;
	} else {
		struct CUgraph_st *g = NULL;
		if (s->cap_state == 2) {
			e = cudaErrorStreamCaptureInvalidated;
		} else if (!(g = calloc(1, sizeof *g))) {
			e = cudaErrorMemoryAllocation;
		} else {
			g->magic = FK_GRAPH_MAGIC;
			g->head = s->cap_head;
			g->tail = s->cap_tail;
			s->cap_head = s->cap_tail = NULL;
		}
		fk_capture_discard(s); /* what the graph did not take */
		*pGraph = g;
	}
	pthread_mutex_unlock(&g_lock);
	return fk_ret(e);
}

FK_API cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t *pGraph)
{
	ENTER(cudaStreamEndCapture);
	return fk_end_capture(stream, false, pGraph);
}

FK_API cudaError_t cudaStreamEndCapture_ptsz(cudaStream_t stream, cudaGraph_t *pGraph)
{
	ENTER(cudaStreamEndCapture_ptsz);
	return fk_end_capture(stream, true, pGraph);
}

static cudaError_t fk_is_capturing(cudaStream_t h, bool ptsz, enum cudaStreamCaptureStatus *st)
{
	if (!st)
		return fk_ret(cudaErrorInvalidValue);
	pthread_mutex_lock(&g_lock);
	cudaError_t e = cudaSuccess;
	struct CUstream_st *s = fk_stream(h, ptsz);
	if (!s)
		e = cudaErrorInvalidResourceHandle;
	else if (s->legacy && fk_legacy_conflict(s->device, false))
		e = cudaErrorStreamCaptureImplicit;   /* the capture is not invalidated */
	else
		*st = s->cap_state == 0   ? cudaStreamCaptureStatusNone
		      : s->cap_state == 1 ? cudaStreamCaptureStatusActive
		                          : cudaStreamCaptureStatusInvalidated;
	pthread_mutex_unlock(&g_lock);
	return fk_ret(e);
}

FK_API cudaError_t cudaThreadExchangeStreamCaptureMode(enum cudaStreamCaptureMode *mode)
{
	ENTER(cudaThreadExchangeStreamCaptureMode);
	if (!mode || (unsigned)*mode > cudaStreamCaptureModeRelaxed)
		return fk_ret(cudaErrorInvalidValue);
	enum cudaStreamCaptureMode old = t_cap_mode;
	t_cap_mode = *mode;
	*mode = old;
	return cudaSuccess;
}

FK_API cudaError_t cudaStreamIsCapturing(cudaStream_t stream,
                                         enum cudaStreamCaptureStatus *pCaptureStatus)
{
	ENTER(cudaStreamIsCapturing);
	return fk_is_capturing(stream, false, pCaptureStatus);
}

FK_API cudaError_t cudaStreamIsCapturing_ptsz(cudaStream_t stream,
                                              enum cudaStreamCaptureStatus *pCaptureStatus)
{
	ENTER(cudaStreamIsCapturing_ptsz);
	return fk_is_capturing(stream, true, pCaptureStatus);
}

FK_API cudaError_t cudaGraphInstantiate(cudaGraphExec_t *pGraphExec, cudaGraph_t graph,
                                        unsigned long long flags)
{
	ENTER(cudaGraphInstantiate);
	if (!pGraphExec || !graph || graph->magic != FK_GRAPH_MAGIC)
		return fk_ret(cudaErrorInvalidValue);
	pthread_mutex_lock(&g_lock);
	cudaError_t e = cudaSuccess;
	struct CUgraphExec_st *x = calloc(1, sizeof *x);
	if (!x) {
		e = cudaErrorMemoryAllocation;
	} else {
		x->magic = FK_EXEC_MAGIC;
		for (const struct op *o = graph->head; o; o = o->next) {
			struct op *c = fk_op_clone(o);
			if (!c) {
				e = cudaErrorMemoryAllocation;
				fk_ops_free(x->head);
				free(x);
				break;
			}
			fk_append(&x->head, &x->tail, c);
		}
	}
	if (e == cudaSuccess)
		*pGraphExec = x;
	pthread_mutex_unlock(&g_lock);
	return fk_ret(e);
}

/* Replays the captured work on `h`, in capture order. */
static cudaError_t fk_graph_launch(cudaGraphExec_t x, cudaStream_t h, bool ptsz)
{
	if (!x || x->magic != FK_EXEC_MAGIC)
		return fk_ret(cudaErrorInvalidValue);
	pthread_mutex_lock(&g_lock);
	cudaError_t e = cudaSuccess;
	struct CUstream_st *s = fk_stream(h, ptsz);
	if (!s)
		e = cudaErrorInvalidResourceHandle;
	for (const struct op *o = x->head; s && o && e == cudaSuccess; o = o->next) {
		struct op *c = fk_op_clone(o);
		e = c ? fk_enqueue(s, c) : cudaErrorMemoryAllocation;
	}
	pthread_mutex_unlock(&g_lock);
	return fk_ret(e);
}

FK_API cudaError_t cudaGraphLaunch(cudaGraphExec_t graphExec, cudaStream_t stream)
{
	ENTER(cudaGraphLaunch);
	return fk_graph_launch(graphExec, stream, false);
}

FK_API cudaError_t cudaGraphLaunch_ptsz(cudaGraphExec_t graphExec, cudaStream_t stream)
{
	ENTER(cudaGraphLaunch_ptsz);
	return fk_graph_launch(graphExec, stream, true);
}

FK_API cudaError_t cudaGraphDestroy(cudaGraph_t graph)
{
	ENTER(cudaGraphDestroy);
	if (!graph || graph->magic != FK_GRAPH_MAGIC)
		return fk_ret(cudaErrorInvalidValue);
	pthread_mutex_lock(&g_lock);
	fk_ops_free(graph->head);
	graph->magic = 0;
	free(graph);
	pthread_mutex_unlock(&g_lock);
	return cudaSuccess;
}

FK_API cudaError_t cudaGraphExecDestroy(cudaGraphExec_t graphExec)
{
	ENTER(cudaGraphExecDestroy);
	if (!graphExec || graphExec->magic != FK_EXEC_MAGIC)
		return fk_ret(cudaErrorInvalidValue);
	pthread_mutex_lock(&g_lock);
	fk_ops_free(graphExec->head);
	graphExec->magic = 0;
	free(graphExec);
	pthread_mutex_unlock(&g_lock);
	return cudaSuccess;
}

/* ---- IPC, pointer attributes ---- */
/* Like CUDA, a pointer inside an allocation yields a handle of the whole allocation: opening
 * it gives the allocation's base, not the pointer passed here. */
FK_API cudaError_t cudaIpcGetMemHandle(cudaIpcMemHandle_t *handle, void *devPtr)
{
	ENTER(cudaIpcGetMemHandle);
	if (!handle)
		return fk_ret(cudaErrorInvalidValue);
	pthread_mutex_lock(&g_lock);
	cudaError_t e = cudaSuccess;
	struct alloc *a = fk_alloc_containing(devPtr);
	if (!a || a->free_pending) {
		e = cudaErrorInvalidValue;
	} else {
		struct fk_ipc h = { FK_IPC_MAGIC, (int32_t)getpid(), (uintptr_t)a->base, a->id };
		memset(handle, 0, sizeof *handle);
		memcpy(handle->reserved, &h, sizeof h);
	}
	pthread_mutex_unlock(&g_lock);
	return fk_ret(e);
}

/* Same process only: the handle's allocation is returned as is. Another process's handle
 * answers cudaErrorNotSupported (the fake has no shared device memory). */
FK_API cudaError_t cudaIpcOpenMemHandle(void **devPtr, cudaIpcMemHandle_t handle,
                                        unsigned int flags)
{
	ENTER(cudaIpcOpenMemHandle);
	if (!devPtr)
		return fk_ret(cudaErrorInvalidValue);
	struct fk_ipc h;
	memcpy(&h, handle.reserved, sizeof h);
	if (h.magic != FK_IPC_MAGIC)
		return fk_ret(cudaErrorInvalidValue);
	if (h.pid != (int32_t)getpid())
		return fk_ret(cudaErrorNotSupported);
	pthread_mutex_lock(&g_lock);
	cudaError_t e = cudaSuccess;
	struct alloc *a = fk_alloc_exact((void *)(uintptr_t)h.base);
	if (!a || a->id != h.id) {
		e = cudaErrorInvalidValue;
	} else {
		a->ipc_open++;
		*devPtr = a->base;
	}
	pthread_mutex_unlock(&g_lock);
	return fk_ret(e);
}

FK_API cudaError_t cudaIpcCloseMemHandle(void *devPtr)
{
	ENTER(cudaIpcCloseMemHandle);
	pthread_mutex_lock(&g_lock);
	cudaError_t e = cudaSuccess;
	struct alloc *a = fk_alloc_exact(devPtr);
	if (!a || a->ipc_open == 0)
		e = cudaErrorInvalidValue;
	else
		a->ipc_open--;
	pthread_mutex_unlock(&g_lock);
	return fk_ret(e);
}

/* Host or unknown memory answers cudaSuccess with type cudaMemoryTypeUnregistered, device -2. */
FK_API cudaError_t cudaPointerGetAttributes(struct cudaPointerAttributes *attributes,
                                            const void *ptr)
{
	ENTER(cudaPointerGetAttributes);
	if (!attributes)
		return fk_ret(cudaErrorInvalidValue);
	pthread_mutex_lock(&g_lock);
	struct alloc *a = fk_alloc_containing(ptr);
	memset(attributes, 0, sizeof *attributes);
	if (a) {
		attributes->type = cudaMemoryTypeDevice;
		attributes->device = a->device;
		attributes->devicePointer = (void *)(uintptr_t)ptr;
	} else {
		attributes->type = cudaMemoryTypeUnregistered;
		attributes->device = -2;
	}
	pthread_mutex_unlock(&g_lock);
	return cudaSuccess;
}

/* ---- errors, versions ---- */
FK_API const char *cudaGetErrorString(cudaError_t error)
{
	fk_enter(FN_cudaGetErrorString);
	const struct fk_errinfo *i = fk_errinfo(error);
	return i ? i->text : "unrecognized error code";
}

FK_API const char *cudaGetErrorName(cudaError_t error)
{
	fk_enter(FN_cudaGetErrorName);
	const struct fk_errinfo *i = fk_errinfo(error);
	return i ? i->name : "unrecognized error code";
}

FK_API cudaError_t cudaGetLastError(void)
{
	ENTER(cudaGetLastError);
	cudaError_t sticky = __atomic_load_n(&g_sticky, __ATOMIC_ACQUIRE);
	if (sticky != cudaSuccess)
		return sticky; /* never cleared: the context is corrupt */
	cudaError_t e = t_last_error;
	t_last_error = cudaSuccess;
	return e;
}

FK_API cudaError_t cudaPeekAtLastError(void)
{
	ENTER(cudaPeekAtLastError);
	cudaError_t sticky = __atomic_load_n(&g_sticky, __ATOMIC_ACQUIRE);
	return sticky != cudaSuccess ? sticky : t_last_error;
}

FK_API cudaError_t cudaRuntimeGetVersion(int *runtimeVersion)
{
	ENTER(cudaRuntimeGetVersion);
	if (!runtimeVersion)
		return fk_ret(cudaErrorInvalidValue);
	*runtimeVersion = 13000;
	return cudaSuccess;
}

FK_API cudaError_t cudaDriverGetVersion(int *driverVersion)
{
	ENTER(cudaDriverGetVersion);
	if (!driverVersion)
		return fk_ret(cudaErrorInvalidValue);
	*driverVersion = 13000;
	return cudaSuccess;
}

/* ---- the driver's entry points ----
 * As libcudart: asked of the driver's cuGetProcAddress (fk_gpa) at the version given (13000,
 * the runtime's own, for cudaGetDriverEntryPoint), with the flags' stream variant (the
 * default: the legacy stream's, the per-thread one's for the _ptsz entry points). A name the
 * driver does not have, or has only past that version, is cudaSuccess with a NULL entry
 * point and the status saying which; a version past the driver's is the driver's
 * CUDA_ERROR_INVALID_VALUE, cudaErrorInvalidValue. No driver: cudaErrorInsufficientDriver. */
static cudaError_t fk_entry_point(const char *symbol, void **fn, int version, unsigned long long flags,
				  enum cudaDriverEntryPointQueryResult *status, bool ptsz)
{
	if (!symbol || !fn || flags > cudaEnablePerThreadDefaultStream)
		return fk_ret(cudaErrorInvalidValue);
	cuuint64_t f = flags != cudaEnableDefault ? flags
		       : ptsz			 ? CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM
						 : CU_GET_PROC_ADDRESS_LEGACY_STREAM;
	void *p = NULL;
	CUdriverProcAddressQueryResult st = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
	CUresult e;
	if (!fk_gpa(symbol, &p, version, f, &st, &e))
		return fk_ret(cudaErrorInsufficientDriver);
	if (e != CUDA_SUCCESS && e != CUDA_ERROR_NOT_FOUND)
		return fk_ret(e == CUDA_ERROR_INVALID_VALUE ? cudaErrorInvalidValue : cudaErrorNotSupported);
	*fn = e == CUDA_SUCCESS ? p : NULL;
	if (status)
		*status = e == CUDA_SUCCESS ? cudaDriverEntryPointSuccess
			  : st == CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT ? cudaDriverEntryPointVersionNotSufficent
									     : cudaDriverEntryPointSymbolNotFound;
	return cudaSuccess;
}

FK_API cudaError_t cudaGetDriverEntryPoint(const char *symbol, void **funcPtr, unsigned long long flags,
					   enum cudaDriverEntryPointQueryResult *driverStatus)
{
	ENTER(cudaGetDriverEntryPoint);
	return fk_entry_point(symbol, funcPtr, 13000, flags, driverStatus, false);
}

FK_API cudaError_t cudaGetDriverEntryPoint_ptsz(const char *symbol, void **funcPtr, unsigned long long flags,
						enum cudaDriverEntryPointQueryResult *driverStatus)
{
	ENTER(cudaGetDriverEntryPoint_ptsz);
	return fk_entry_point(symbol, funcPtr, 13000, flags, driverStatus, true);
}

FK_API cudaError_t cudaGetDriverEntryPointByVersion(const char *symbol, void **funcPtr, unsigned int cudaVersion,
						    unsigned long long flags,
						    enum cudaDriverEntryPointQueryResult *driverStatus)
{
	ENTER(cudaGetDriverEntryPointByVersion);
	return fk_entry_point(symbol, funcPtr, cudaVersion > INT32_MAX ? INT32_MAX : (int)cudaVersion, flags,
			      driverStatus, false);
}

FK_API cudaError_t cudaGetDriverEntryPointByVersion_ptsz(const char *symbol, void **funcPtr, unsigned int cudaVersion,
							 unsigned long long flags,
							 enum cudaDriverEntryPointQueryResult *driverStatus)
{
	ENTER(cudaGetDriverEntryPointByVersion_ptsz);
	return fk_entry_point(symbol, funcPtr, cudaVersion > INT32_MAX ? INT32_MAX : (int)cudaVersion, flags,
			      driverStatus, true);
}

/* ---- control API ---- */
FK_API unsigned long gpfake_calls(const char *name)
{
	int fn = fk_fn_index(name);
	return fn < 0 ? 0 : __atomic_load_n(&g_calls[fn], __ATOMIC_RELAXED);
}

FK_API void gpfake_reset_counters(void)
{
	for (int i = 0; i < FN_COUNT; i++)
		__atomic_store_n(&g_calls[i], 0, __ATOMIC_RELAXED);
}

static int fk_fail(const char *name, unsigned long n, cudaError_t err, bool every)
{
	pthread_once(&g_once, fk_init);
	int fn = name && strcmp(name, "*") == 0 ? FK_ANY : fk_fn_index(name);
	if (fn == -1)
		return -1;
	return fk_add_rule(fn, n, err == cudaSuccess ? fk_default_fail(fn) : err, every);
}

FK_API int gpfake_fail_nth(const char *name, unsigned long n, cudaError_t err)
{
	return fk_fail(name, n, err, false);
}

FK_API int gpfake_fail_from(const char *name, unsigned long n, cudaError_t err)
{
	return fk_fail(name, n, err, true);
}

FK_API void gpfake_fault(cudaError_t err)
{
	pthread_once(&g_once, fk_init);
	__atomic_store_n(&g_sticky, err, __ATOMIC_RELEASE);
}

FK_API void gpfake_fail_clear(void)
{
	pthread_once(&g_once, fk_init);
	pthread_mutex_lock(&g_ctl);
	__atomic_store_n(&g_nrules, 0, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&g_ctl);
}

FK_API void gpfake_set_capacity(int device, size_t bytes)
{
	pthread_once(&g_once, fk_init);
	if (device < 0 || device >= FK_MAXDEV)
		return;
	pthread_mutex_lock(&g_lock);
	g_capacity[device] = bytes;
	if (fm_on() && device < g_ndev)
		fm_set_capacity(g_phys[device], bytes);
	pthread_mutex_unlock(&g_lock);
}

FK_API size_t gpfake_capacity(int device)
{
	pthread_once(&g_once, fk_init);
	if (device < 0 || device >= FK_MAXDEV)
		return 0;
	pthread_mutex_lock(&g_lock);
	size_t v = fk_capacity(device);
	pthread_mutex_unlock(&g_lock);
	return v;
}

FK_API size_t gpfake_used(int device)
{
	pthread_once(&g_once, fk_init);
	if (device < 0 || device >= FK_MAXDEV)
		return 0;
	pthread_mutex_lock(&g_lock);
	size_t v = g_used[device];
	pthread_mutex_unlock(&g_lock);
	return v;
}

FK_API unsigned long gpfake_allocations(int device)
{
	pthread_once(&g_once, fk_init);
	pthread_mutex_lock(&g_lock);
	unsigned long n = 0;
	for (size_t i = 0; i < g_nallocs; i++)
		if (device < 0 || g_allocs[i]->device == device)
			n++;
	pthread_mutex_unlock(&g_lock);
	return n;
}

FK_API unsigned long gpfake_faults(void)
{
	pthread_once(&g_once, fk_init);
	pthread_mutex_lock(&g_lock);
	unsigned long n = g_faults;
	pthread_mutex_unlock(&g_lock);
	return n;
}
