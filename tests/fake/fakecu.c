/* A fake CUDA driver (libcuda.so.1) for tests without a GPU: device memory from host memory,
 * devices with primary and created contexts, streams each served in order by a thread of its
 * own (so streams really run concurrently), events, stream capture, IPC handles, call
 * counters and fault injection (fakecu.h). Linked -Bsymbolic-functions, and it never looks its
 * own names up with dlsym: cuGetProcAddress hands out the fake's own entry points, as the real
 * driver does, whatever a preloaded library exports under the same names. */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#pragma GCC visibility push(default)
#include "fakecu.h"
#pragma GCC visibility pop
#include "fakemachine.c" /* the machine file, CUDA_VISIBLE_DEVICES: static functions */
#include "fakepool.c"    /* memory pools: static functions, on the hooks defined below */

#define FC_API __attribute__((visibility("default")))
#define FC_MAXDEV 16
#define FC_ALIGN 512u
#define FC_MAXRULES 64
#define FC_CTX_MAGIC 0x43545821u
#define FC_STREAM_MAGIC 0x5354524du
#define FC_EVENT_MAGIC 0x45564e54u
#define FC_GRAN ((size_t)2 << 20) /* virtual memory granularity: 2 MiB */

/* ---- entry point names: counters, fault rules and cuGetProcAddress ---- */
#define FC_FUNCS(X) \
	X(cuInit) X(cuDriverGetVersion) X(cuDeviceGet) X(cuDeviceGetUuid_v2) X(cuDeviceGetName) X(cuDeviceGetCount) \
	X(cuCtxGetCurrent) \
	X(cuCtxSetCurrent) X(cuCtxPushCurrent_v2) X(cuCtxPopCurrent_v2) X(cuCtxGetDevice) \
	X(cuCtxCreate_v2) X(cuCtxCreate_v4) X(cuCtxDestroy_v2) X(cuCtxSynchronize) \
	X(cuDevicePrimaryCtxRetain) X(cuDevicePrimaryCtxRelease_v2) X(cuDevicePrimaryCtxReset_v2) \
	X(cuDevicePrimaryCtxGetState) X(cuMemAlloc_v2) X(cuMemFree_v2) X(cuMemAllocAsync) \
	X(cuMemAllocAsync_ptsz) X(cuMemFreeAsync) X(cuMemFreeAsync_ptsz) X(cuMemGetInfo_v2) \
	X(cuMemGetAddressRange_v2) X(cuPointerGetAttribute) X(cuIpcGetMemHandle) \
	X(cuMemcpyDtoH_v2) X(cuMemsetD8_v2) X(cuMemsetD8Async) X(cuMemsetD8Async_ptsz) \
	X(cuStreamCreate) X(cuStreamCreateWithPriority) X(cuStreamDestroy_v2) \
	X(cuStreamSynchronize) X(cuStreamSynchronize_ptsz) X(cuStreamWaitEvent) \
	X(cuStreamWaitEvent_ptsz) X(cuEventCreate) X(cuEventRecord) X(cuEventRecord_ptsz) \
	X(cuEventQuery) X(cuEventSynchronize) X(cuEventDestroy_v2) X(cuStreamBeginCapture_v2) \
	X(cuStreamBeginCapture_v2_ptsz) X(cuStreamEndCapture) X(cuStreamEndCapture_ptsz) \
	X(cuStreamIsCapturing) X(cuStreamIsCapturing_ptsz) X(cuThreadExchangeStreamCaptureMode) \
	X(cuGetProcAddress) X(cuGetProcAddress_v2) X(cuGetErrorName) X(gpfakecu_launch_fill) \
	X(cuMemAllocManaged) X(cuMemAllocPitch_v2) X(cuMemCreate) X(cuMemRelease) \
	X(cuMemGetAllocationGranularity) X(cuMemAddressReserve) X(cuMemAddressFree) X(cuMemMap) \
	X(cuMemUnmap) X(cuMemRetainAllocationHandle) X(cuMemExportToShareableHandle) \
	X(cuMemImportFromShareableHandle) X(cuMemMapArrayAsync) X(cuMemMapArrayAsync_ptsz) X(cuMemSetAccess) X(cuMemGetAllocationPropertiesFromHandle) \
	X(cuMemPoolCreate) X(cuMemPoolDestroy) X(cuDeviceGetDefaultMemPool) X(cuDeviceGetMemPool) \
	X(cuDeviceSetMemPool) X(cuMemAllocFromPoolAsync) X(cuMemAllocFromPoolAsync_ptsz) \
	X(cuMemPoolGetAttribute) X(cuMemPoolSetAttribute) X(cuMemPoolTrimTo) \
	X(cuDeviceGetAttribute)

#define FC_ENUM(n) FN_##n,
enum { FC_FUNCS(FC_ENUM) FN_COUNT };
#define FC_NAME(n) #n,
static const char *const fc_names[FN_COUNT] = {FC_FUNCS(FC_NAME)};

/* ---- data ---- */
struct CUctx_st {
	unsigned magic;
	int device;
	bool primary, active; /* active: written under g_lock, read without it (atomic) */
	int refs; /* primary: retains */
};

enum op_kind { OP_FILL, OP_FREE, OP_WAIT };

struct op {
	struct op *next;
	enum op_kind kind;
	char *dst;
	size_t n;
	int value;
	unsigned delay_us;
	struct CUstream_st *wstream; /* OP_WAIT: until wstream has done wseq ops */
	unsigned long long wseq;
};

struct CUstream_st {
	unsigned magic;
	int device;
	unsigned flags;
	bool dead, thread_on;
	struct op *head, *tail;
	unsigned long long issued, done;
	int cap;                     /* 0 none, 1 capturing, 2 invalidated */
	CUstreamCaptureMode cap_mode;
	pthread_t cap_thread;
	pthread_t thread;
	struct CUstream_st *next;
};

struct CUevent_st {
	unsigned magic;
	struct CUstream_st *s;       /* complete when s->done >= seq */
	unsigned long long seq;
};

struct alloc {
	char *base;
	size_t bytes;              /* rounded up to FC_ALIGN: what fills and copies may touch */
	size_t size;               /* as asked: the range the driver reports (cuMemGetAddressRange) */
	struct CUctx_st *ctx;
	bool free_pending;
	struct fp_pool *pool;      /* cuMemAllocFromPoolAsync: base is a chunk of it */
	size_t chunk;              /* pool allocations: bytes of that chunk */
};

/* Virtual memory: physical allocations (cuMemCreate), address reservations and mappings. */
struct fc_handle {
	struct fc_handle *next;
	size_t size;
	int device;
	int maps;                  /* mappings of it: a released handle lives until the last goes */
	int refs;                  /* references: cuMemCreate's and each cuMemRetainAllocationHandle's,
				    * less each cuMemRelease; 0: released */
	int fd;                    /* its memory: a memfd that each mapping maps */
};

struct fc_resv {
	struct fc_resv *next;
	uintptr_t base;
	size_t size;
};

struct fc_map {
	struct fc_map *next;
	uintptr_t va;
	size_t size;
	struct fc_handle *h;
	bool rw;                   /* cuMemSetAccess granted read and write */
	CUmemGenericAllocationHandle hv; /* the handle value it was mapped with */
};

struct rule {
	int fn;             /* FC_ANY: every entry point but the queries (fc_is_query) */
	unsigned long left;
	CUresult err;
	bool every;         /* from the n-th call on, every call (else the n-th only) */
};
#define FC_ANY (-2)

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cond = PTHREAD_COND_INITIALIZER; /* any progress */
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static int g_ndev = 2;                  /* visible devices (CUDA_VISIBLE_DEVICES) */
static int g_phys[FC_MAXDEV];           /* a visible device's physical index */
static size_t g_capacity[FC_MAXDEV];    /* without a machine file; with one, the file's */
static size_t g_used[FC_MAXDEV];
static struct CUctx_st g_primary[FC_MAXDEV];
static struct CUstream_st *g_streams; /* every stream ever made (legacy ones too) */
static struct CUstream_st *g_legacy[FC_MAXDEV];
static struct alloc *g_allocs;
static size_t g_nallocs, g_cap_allocs;
static size_t *g_sizes;
static size_t g_nsizes, g_cap_sizes;
static unsigned long g_calls[FN_COUNT];
static struct rule g_rules[FC_MAXRULES];
static int g_nrules;
static CUresult g_sticky; /* gpfakecu_fault's; atomic access */
static bool g_init;
static struct fc_handle *g_handles;
static bool g_no_vmm;                   /* FAKECU_NO_VMM: devices without virtual memory management */
static struct fc_resv *g_resvs;
static struct fc_map *g_maps;

static _Thread_local struct CUctx_st *t_stack[16];
static _Thread_local int t_depth; /* t_stack[t_depth - 1] is current */
static _Thread_local struct CUstream_st *t_ptds[FC_MAXDEV];
static _Thread_local CUstreamCaptureMode t_cap_mode = CU_STREAM_CAPTURE_MODE_GLOBAL;

static size_t fc_parse_size(const char *s)
{
	char *end;
	unsigned long long v = strtoull(s, &end, 10);
	switch (*end) {
	case 'K': case 'k': v <<= 10; break;
	case 'M': case 'm': v <<= 20; break;
	case 'G': case 'g': v <<= 30; break;
	default: break;
	}
	return (size_t)v;
}

static int fc_fn(const char *name)
{
	for (int i = 0; name && i < FN_COUNT; i++)
		if (!strcmp(fc_names[i], name))
			return i;
	return -1;
}

static CUresult fc_default_err(int fn)
{
	switch (fn) {
	case FN_cuMemAlloc_v2: case FN_cuMemAllocAsync: case FN_cuMemAllocAsync_ptsz:
	case FN_cuMemAllocManaged: case FN_cuMemAllocPitch_v2: case FN_cuMemCreate:
	case FN_cuMemAllocFromPoolAsync: case FN_cuMemAllocFromPoolAsync_ptsz:
		return CUDA_ERROR_OUT_OF_MEMORY;
	default:
		return CUDA_ERROR_UNKNOWN;
	}
}

/* The calls FC_ANY rules and a sticky error leave alone: the error and version queries,
 * the entry-point look-ups, and the fake's own kernel. */
static bool fc_is_query(int fn)
{
	return fn == FN_cuGetErrorName || fn == FN_cuDriverGetVersion || fn == FN_cuGetProcAddress ||
	       fn == FN_cuGetProcAddress_v2 || fn == FN_gpfakecu_launch_fill;
}

static int fc_add_rule(int fn, unsigned long n, CUresult err, bool every)
{
	int rc = 0;
	pthread_mutex_lock(&g_lock);
	if (n == 0) {
		int j = 0;
		for (int i = 0; i < g_nrules; i++)
			if (g_rules[i].fn != fn)
				g_rules[j++] = g_rules[i];
		g_nrules = j;
	} else if (g_nrules < FC_MAXRULES && (fn >= 0 || fn == FC_ANY)) {
		g_rules[g_nrules++] = (struct rule){fn, n, err ? err : fc_default_err(fn), every};
	} else {
		rc = -1;
	}
	pthread_mutex_unlock(&g_lock);
	return rc;
}

static void fc_init(void)
{
	const char *e = getenv("FAKECUDA_DEVICES");
	if (e && *e)
		g_ndev = atoi(e) < 0 ? 0 : atoi(e) > FC_MAXDEV ? FC_MAXDEV : atoi(e);
	size_t cap = (size_t)1 << 30, caps[FM_MAXDEV];
	e = getenv("FAKECUDA_CAPACITY");
	if (e && *e)
		cap = fc_parse_size(e);
	for (int d = 0; d < FM_MAXDEV; d++)
		caps[d] = cap;
	(void)fm_open("fakecu", &g_ndev, caps);
	g_ndev = fm_visible(g_ndev, g_phys);
	for (int d = 0; d < g_ndev; d++)
		g_capacity[d] = caps[g_phys[d]];
	for (int d = 0; d < FC_MAXDEV; d++)
		g_primary[d] = (struct CUctx_st){FC_CTX_MAGIC, d, true, false, 0};
	fp_init(g_ndev);
	e = getenv("FAKECU_NO_VMM");
	g_no_vmm = e && *e && strcmp(e, "0") != 0;
	e = getenv("FAKECU_FAIL");
	if (e && *e) {
		char buf[512];
		snprintf(buf, sizeof buf, "%s", e);
		char *save = NULL;
		for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
			char *c = strchr(tok, ':');
			if (!c) {
				fprintf(stderr, "fakecu: FAKECU_FAIL: ignoring '%s'\n", tok);
				continue;
			}
			*c = '\0';
			char *c2 = strchr(c + 1, ':'), *end;
			int fn = strcmp(tok, "*") == 0 ? FC_ANY : fc_fn(tok);
			unsigned long n = strtoul(c + 1, &end, 10);
			if (fn == -1 || n == 0)
				fprintf(stderr, "fakecu: FAKECU_FAIL: ignoring '%s'\n", tok);
			else
				fc_add_rule(fn, n, c2 ? (CUresult)atoi(c2 + 1) : CUDA_SUCCESS, *end == '+');
		}
	}
}

/* Counts the call and applies the fault rules: the injected error, or CUDA_SUCCESS. */
static CUresult fc_enter(int fn)
{
	pthread_once(&g_once, fc_init);
	__atomic_add_fetch(&g_calls[fn], 1, __ATOMIC_RELAXED);
	CUresult sticky = __atomic_load_n(&g_sticky, __ATOMIC_ACQUIRE);
	if (sticky != CUDA_SUCCESS && !fc_is_query(fn))
		return sticky;
	CUresult err = CUDA_SUCCESS;
	pthread_mutex_lock(&g_lock);
	int j = 0;
	for (int i = 0; i < g_nrules; i++) {
		struct rule *r = &g_rules[i];
		if (r->fn == fn || (r->fn == FC_ANY && !fc_is_query(fn))) {
			if (r->every && r->left <= 1) {
				err = r->err; /* kept: every later call fails too */
			} else if (--r->left == 0) {
				err = r->err;
				continue;
			}
		}
		g_rules[j++] = *r;
	}
	g_nrules = j;
	pthread_mutex_unlock(&g_lock);
	return err;
}

#define ENTER(name)                                            \
	do {                                                   \
		CUresult e_ = fc_enter(FN_##name);             \
		if (e_ != CUDA_SUCCESS)                        \
			return e_;                             \
	} while (0)

static struct CUctx_st *fc_current(void) { return t_depth ? t_stack[t_depth - 1] : NULL; }

/* The current context, usable: NULL when none is current or it was destroyed. */
static struct CUctx_st *fc_ctx(void)
{
	struct CUctx_st *c = fc_current();
	return c && c->magic == FC_CTX_MAGIC && __atomic_load_n(&c->active, __ATOMIC_ACQUIRE) ? c : NULL;
}

static bool fc_mapped_rw(uintptr_t p, size_t n);

/* ---- allocations (g_lock held) ---- */
static struct alloc *fc_find(uintptr_t p, bool exact)
{
	for (size_t i = 0; i < g_nallocs; i++) {
		struct alloc *a = &g_allocs[i];
		if ((uintptr_t)a->base == p || (!exact && p > (uintptr_t)a->base && p < (uintptr_t)a->base + a->bytes))
			return a;
	}
	return NULL;
}

/* Device memory of `device` taken and given back: every path (cuMemAlloc, managed, pitched,
 * cuMemCreate, pool chunks) draws from the one capacity. g_lock held. */
static bool fc_charge(int device, size_t bytes)
{
	if (fm_on() ? !fm_charge(g_phys[device], bytes)
		    : bytes > g_capacity[device] || g_used[device] > g_capacity[device] - bytes)
		return false;
	g_used[device] += bytes;
	return true;
}

static void fc_uncharge(int device, size_t bytes)
{
	fm_uncharge(g_phys[device], bytes);
	g_used[device] -= bytes;
}

/* Appends an allocation record (g_lock held). */
static bool fc_track(struct alloc a)
{
	if (g_nallocs == g_cap_allocs) {
		size_t nc = g_cap_allocs ? 2 * g_cap_allocs : 64;
		struct alloc *na = realloc(g_allocs, nc * sizeof *na);
		if (!na)
			return false;
		g_allocs = na;
		g_cap_allocs = nc;
	}
	g_allocs[g_nallocs++] = a;
	return true;
}

/* A plain allocation (cuMemAlloc, cuMemAllocAsync, managed, pitched) of `size` bytes in
 * context c; `record`: its size joins gpfakecu_alloc_sizes. g_lock held. */
static CUresult fc_alloc(struct CUctx_st *c, size_t size, CUdeviceptr *out, bool record)
{
	if (size > SIZE_MAX - FC_ALIGN)
		return CUDA_ERROR_OUT_OF_MEMORY;
	size_t bytes = (size + FC_ALIGN - 1) & ~(size_t)(FC_ALIGN - 1);
	if (record && g_nsizes == g_cap_sizes) {
		size_t nc = g_cap_sizes ? 2 * g_cap_sizes : 64;
		size_t *ns = realloc(g_sizes, nc * sizeof *ns);
		if (!ns)
			return CUDA_ERROR_OUT_OF_MEMORY;
		g_sizes = ns;
		g_cap_sizes = nc;
	}
	if (!fc_charge(c->device, bytes))
		return CUDA_ERROR_OUT_OF_MEMORY;
	char *m = aligned_alloc(FC_ALIGN, bytes);
	if (!m || !fc_track((struct alloc){m, bytes, size, c, false, NULL, 0})) {
		free(m);
		fc_uncharge(c->device, bytes);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	if (record)
		g_sizes[g_nsizes++] = size;
	*out = (CUdeviceptr)(uintptr_t)m;
	return CUDA_SUCCESS;
}

/* ---- the pool model's hooks (fakepool.h; g_lock held) ---- */
static bool fp_take(int device, size_t bytes) { return fc_charge(device, bytes); }
static void fp_give(int device, size_t bytes) { fc_uncharge(device, bytes); }
static char *fp_mem_get(int device, size_t bytes) { (void)device; return aligned_alloc(FC_ALIGN, bytes); }
static void fp_mem_put(int device, char *mem) { (void)device; free(mem); }

static bool fp_track(struct fp_pool *p, char *mem, size_t bytes, size_t size, size_t chunk)
{
	return fc_track((struct alloc){mem, bytes, size, &g_primary[p->device], false, p, chunk});
}

static void fc_release(struct alloc *a)
{
	struct alloc r = *a;
	*a = g_allocs[--g_nallocs];
	if (r.pool) {
		fp_free(r.pool, r.base, r.bytes, r.chunk);
	} else {
		fc_uncharge(r.ctx->device, r.bytes);
		free(r.base);
	}
}

/* A context's end frees its allocations, but not those of memory pools, which are the
 * device's (cuda_runtime_api.h: a reset "will not destroy memory allocations by
 * cudaMallocAsync() and cudaMallocFromPoolAsync()"). */
static void fc_release_ctx(struct CUctx_st *c)
{
	for (size_t i = g_nallocs; i-- > 0;)
		if (g_allocs[i].ctx == c && !g_allocs[i].pool)
			fc_release(&g_allocs[i]);
}

/* ---- streams (g_lock held) ---- */
static void *fc_worker(void *arg);

static struct CUstream_st *fc_stream_new(int device, unsigned flags)
{
	struct CUstream_st *s = calloc(1, sizeof *s);
	if (!s)
		return NULL;
	s->magic = FC_STREAM_MAGIC;
	s->device = device;
	s->flags = flags;
	s->next = g_streams;
	g_streams = s;
	return s;
}

/* The stream a handle names on the current context's device (ptsz: 0 is the per-thread
 * stream), or NULL. */
static struct CUstream_st *fc_stream(CUstream h, bool ptsz)
{
	struct CUctx_st *c = fc_ctx();
	if (!c)
		return NULL;
	int d = c->device;
	if ((!h && ptsz) || h == CU_STREAM_PER_THREAD) {
		if (!t_ptds[d])
			t_ptds[d] = fc_stream_new(d, 0);
		return t_ptds[d];
	}
	if (!h || h == CU_STREAM_LEGACY) {
		if (!g_legacy[d])
			g_legacy[d] = fc_stream_new(d, 0);
		return g_legacy[d];
	}
	return h->magic == FC_STREAM_MAGIC && !h->dead ? h : NULL;
}

static CUresult fc_enqueue(struct CUstream_st *s, struct op *o)
{
	if (s->cap) { /* recorded into the graph, which the fake never runs */
		free(o);
		return CUDA_SUCCESS;
	}
	if (!s->thread_on) {
		if (pthread_create(&s->thread, NULL, fc_worker, s) != 0) {
			free(o);
			return CUDA_ERROR_OUT_OF_MEMORY;
		}
		pthread_detach(s->thread);
		s->thread_on = true;
	}
	if (s->tail)
		s->tail->next = o;
	else
		s->head = o;
	s->tail = o;
	s->issued++;
	pthread_cond_broadcast(&g_cond);
	return CUDA_SUCCESS;
}

static void *fc_worker(void *arg)
{
	struct CUstream_st *s = arg;
	pthread_mutex_lock(&g_lock);
	for (;;) {
		struct op *o = s->head;
		if (!o || (o->kind == OP_WAIT && o->wstream->done < o->wseq)) {
			pthread_cond_wait(&g_cond, &g_lock);
			continue;
		}
		if (o->kind == OP_FILL) {
			pthread_mutex_unlock(&g_lock);
			if (o->delay_us) {
				struct timespec ts = {(time_t)(o->delay_us / 1000000u), (long)(o->delay_us % 1000000u) * 1000L};
				while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
					;
			}
			memset(o->dst, o->value, o->n);
			pthread_mutex_lock(&g_lock);
		} else if (o->kind == OP_FREE) {
			struct alloc *a = fc_find((uintptr_t)o->dst, true);
			if (a)
				fc_release(a);
		}
		s->head = o->next;
		if (!s->head)
			s->tail = NULL;
		free(o);
		s->done++;
		pthread_cond_broadcast(&g_cond);
	}
	return NULL;
}

static void fc_wait_stream(const struct CUstream_st *s)
{
	unsigned long long upto = s->issued;
	while (s->done < upto)
		pthread_cond_wait(&g_cond, &g_lock);
}

static void fc_wait_device(int device)
{
again:
	for (struct CUstream_st *s = g_streams; s; s = s->next) {
		if (s->device == device && s->done < s->issued) {
			pthread_cond_wait(&g_cond, &g_lock);
			goto again;
		}
	}
}

/* A device-wide call (cuMemAlloc, cuMemFree, cuCtxSynchronize) made while a global-mode
 * capture runs: refused, and the capture is invalidated, unless this thread is relaxed. */
static bool fc_capture_prohibits(void)
{
	if (t_cap_mode == CU_STREAM_CAPTURE_MODE_RELAXED)
		return false;
	bool no = false;
	for (struct CUstream_st *s = g_streams; s; s = s->next) {
		if (s->cap && (s->cap_mode == CU_STREAM_CAPTURE_MODE_GLOBAL ||
			       pthread_equal(s->cap_thread, pthread_self()))) {
			s->cap = 2;
			no = true;
		}
	}
	return no;
}

/* ---- init, devices, contexts ---- */
FC_API CUresult cuInit(unsigned int flags)
{
	ENTER(cuInit);
	g_init = flags == 0;
	return flags ? CUDA_ERROR_INVALID_VALUE : g_ndev ? CUDA_SUCCESS : CUDA_ERROR_NO_DEVICE;
}

FC_API CUresult cuDriverGetVersion(int *v)
{
	ENTER(cuDriverGetVersion);
	if (!v)
		return CUDA_ERROR_INVALID_VALUE;
#ifdef FAKECU_CUDA11
	*v = 11080;
#else
	*v = 13000;
#endif
	return CUDA_SUCCESS;
}

FC_API CUresult cuDeviceGetCount(int *n)
{
	ENTER(cuDeviceGetCount);
	if (!n)
		return CUDA_ERROR_INVALID_VALUE;
	*n = g_ndev;
	return CUDA_SUCCESS;
}

/* The same UUID for a physical device in every process, whatever CUDA_VISIBLE_DEVICES
 * renumbers: "fakegpu" and the physical index + 1 (fm_uuid). */
FC_API CUresult cuDeviceGetUuid_v2(CUuuid *uuid, CUdevice dev)
{
	ENTER(cuDeviceGetUuid_v2);
	if (!uuid)
		return CUDA_ERROR_INVALID_VALUE;
	if (dev < 0 || dev >= g_ndev)
		return CUDA_ERROR_INVALID_DEVICE;
	fm_uuid(g_phys[dev], (unsigned char *)uuid->bytes);
	return CUDA_SUCCESS;
}

/* The fake runtime's name for every device (its cudaDeviceProp.name), truncated to len - 1
 * characters as the real driver truncates. */
FC_API CUresult cuDeviceGetName(char *name, int len, CUdevice dev)
{
	ENTER(cuDeviceGetName);
	if (!name || len <= 0)
		return CUDA_ERROR_INVALID_VALUE;
	if (dev < 0 || dev >= g_ndev)
		return CUDA_ERROR_INVALID_DEVICE;
	snprintf(name, (size_t)len, "%s", "fake GPU");
	return CUDA_SUCCESS;
}

FC_API CUresult cuDeviceGet(CUdevice *d, int ordinal)
{
	ENTER(cuDeviceGet);
	if (!d)
		return CUDA_ERROR_INVALID_VALUE;
	if (ordinal < 0 || ordinal >= g_ndev)
		return CUDA_ERROR_INVALID_DEVICE;
	*d = ordinal;
	return CUDA_SUCCESS;
}

/* The attributes gpupool asks about; any other is 0, as a device without the feature. */
FC_API CUresult cuDeviceGetAttribute(int *v, CUdevice_attribute attr, CUdevice dev)
{
	ENTER(cuDeviceGetAttribute);
	if (!v)
		return CUDA_ERROR_INVALID_VALUE;
	if (dev < 0 || dev >= g_ndev)
		return CUDA_ERROR_INVALID_DEVICE;
	*v = attr == CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED ? !g_no_vmm : 0;
	return CUDA_SUCCESS;
}

FC_API CUresult cuCtxGetCurrent(CUcontext *pctx)
{
	ENTER(cuCtxGetCurrent);
	if (!pctx)
		return CUDA_ERROR_INVALID_VALUE;
	*pctx = fc_current();
	return CUDA_SUCCESS;
}

FC_API CUresult cuCtxSetCurrent(CUcontext ctx)
{
	ENTER(cuCtxSetCurrent);
	if (ctx && ctx->magic != FC_CTX_MAGIC)
		return CUDA_ERROR_INVALID_CONTEXT;
	if (!ctx) {
		if (t_depth)
			t_depth--;
		return CUDA_SUCCESS;
	}
	if (!t_depth)
		t_depth = 1;
	t_stack[t_depth - 1] = ctx;
	return CUDA_SUCCESS;
}

FC_API CUresult cuCtxPushCurrent_v2(CUcontext ctx)
{
	ENTER(cuCtxPushCurrent_v2);
	if (!ctx || ctx->magic != FC_CTX_MAGIC || t_depth == 16)
		return CUDA_ERROR_INVALID_CONTEXT;
	t_stack[t_depth++] = ctx;
	return CUDA_SUCCESS;
}

FC_API CUresult cuCtxPopCurrent_v2(CUcontext *pctx)
{
	ENTER(cuCtxPopCurrent_v2);
	if (!t_depth)
		return CUDA_ERROR_INVALID_CONTEXT;
	struct CUctx_st *c = t_stack[--t_depth];
	if (pctx)
		*pctx = c;
	return CUDA_SUCCESS;
}

FC_API CUresult cuCtxGetDevice(CUdevice *d)
{
	ENTER(cuCtxGetDevice);
	struct CUctx_st *c = fc_ctx();
	if (!d)
		return CUDA_ERROR_INVALID_VALUE;
	if (!c)
		return CUDA_ERROR_INVALID_CONTEXT;
	*d = c->device;
	return CUDA_SUCCESS;
}

static CUresult fc_ctx_create(CUcontext *pctx, CUdevice dev)
{
	if (!pctx)
		return CUDA_ERROR_INVALID_VALUE;
	if (dev < 0 || dev >= g_ndev)
		return CUDA_ERROR_INVALID_DEVICE;
	struct CUctx_st *c = calloc(1, sizeof *c);
	if (!c)
		return CUDA_ERROR_OUT_OF_MEMORY;
	*c = (struct CUctx_st){FC_CTX_MAGIC, dev, false, true, 1};
	if (t_depth == 16)
		t_depth--;
	t_stack[t_depth++] = c; /* a new context is made current */
	*pctx = c;
	return CUDA_SUCCESS;
}

FC_API CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
	ENTER(cuCtxCreate_v2);
	return fc_ctx_create(pctx, dev);
}

FC_API CUresult cuCtxCreate_v4(CUcontext *pctx, CUctxCreateParams *params, unsigned int flags, CUdevice dev)
{
	ENTER(cuCtxCreate_v4);
	return fc_ctx_create(pctx, dev);
}

FC_API CUresult cuCtxDestroy_v2(CUcontext ctx)
{
	ENTER(cuCtxDestroy_v2);
	if (!ctx || ctx->magic != FC_CTX_MAGIC || ctx->primary)
		return CUDA_ERROR_INVALID_CONTEXT;
	pthread_mutex_lock(&g_lock);
	fc_release_ctx(ctx);
	__atomic_store_n(&ctx->active, false, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&g_lock);
	for (int i = 0; i < t_depth; i++)
		if (t_stack[i] == ctx)
			t_stack[i] = NULL;
	while (t_depth && !t_stack[t_depth - 1])
		t_depth--;
	return CUDA_SUCCESS; /* the handle stays (magic kept, inactive): stale uses fail cleanly */
}

FC_API CUresult cuCtxSynchronize(void)
{
	ENTER(cuCtxSynchronize);
	struct CUctx_st *c = fc_ctx();
	if (!c)
		return CUDA_ERROR_INVALID_CONTEXT;
	pthread_mutex_lock(&g_lock);
	CUresult e = CUDA_SUCCESS;
	if (fc_capture_prohibits())
		e = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
	else {
		fc_wait_device(c->device);
		fp_settle(c->device);
	}
	pthread_mutex_unlock(&g_lock);
	return e;
}

FC_API CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
	ENTER(cuDevicePrimaryCtxRetain);
	if (!pctx)
		return CUDA_ERROR_INVALID_VALUE;
	if (dev < 0 || dev >= g_ndev)
		return CUDA_ERROR_INVALID_DEVICE;
	pthread_mutex_lock(&g_lock);
	g_primary[dev].refs++;
	__atomic_store_n(&g_primary[dev].active, true, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&g_lock);
	*pctx = &g_primary[dev];
	return CUDA_SUCCESS;
}

FC_API CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev)
{
	ENTER(cuDevicePrimaryCtxRelease_v2);
	if (dev < 0 || dev >= g_ndev)
		return CUDA_ERROR_INVALID_DEVICE;
	pthread_mutex_lock(&g_lock);
	CUresult e = CUDA_SUCCESS;
	if (g_primary[dev].refs <= 0) {
		e = CUDA_ERROR_INVALID_CONTEXT;
	} else if (--g_primary[dev].refs == 0) {
		fc_release_ctx(&g_primary[dev]); /* the last release destroys it */
		__atomic_store_n(&g_primary[dev].active, false, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&g_lock);
	return e;
}

FC_API CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev)
{
	ENTER(cuDevicePrimaryCtxReset_v2);
	if (dev < 0 || dev >= g_ndev)
		return CUDA_ERROR_INVALID_DEVICE;
	pthread_mutex_lock(&g_lock);
	fc_wait_device(dev);
	fc_release_ctx(&g_primary[dev]);
	fp_reset(dev); /* the device's pools give back what they hold unused; their allocations stay */
	pthread_mutex_unlock(&g_lock);
	return CUDA_SUCCESS;
}

FC_API CUresult cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int *flags, int *active)
{
	ENTER(cuDevicePrimaryCtxGetState);
	if (!flags || !active)
		return CUDA_ERROR_INVALID_VALUE;
	if (dev < 0 || dev >= g_ndev)
		return CUDA_ERROR_INVALID_DEVICE;
	*flags = 0;
	*active = __atomic_load_n(&g_primary[dev].active, __ATOMIC_ACQUIRE);
	return CUDA_SUCCESS;
}

/* ---- memory ---- */
FC_API CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t size)
{
	ENTER(cuMemAlloc_v2);
	struct CUctx_st *c = fc_ctx();
	if (!c)
		return CUDA_ERROR_INVALID_CONTEXT;
	if (!dptr || size == 0)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&g_lock);
	CUresult e = fc_capture_prohibits() ? CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED : fc_alloc(c, size, dptr, true);
	pthread_mutex_unlock(&g_lock);
	return e;
}

FC_API CUresult cuMemFree_v2(CUdeviceptr p)
{
	ENTER(cuMemFree_v2);
	if (!fc_ctx())
		return CUDA_ERROR_INVALID_CONTEXT;
	pthread_mutex_lock(&g_lock);
	CUresult e = CUDA_SUCCESS;
	struct alloc *a = fc_find(p, true);
	if (!a || a->free_pending) {
		e = CUDA_ERROR_INVALID_VALUE;
	} else if (fc_capture_prohibits()) {
		e = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
	} else {
		a->free_pending = true;
		fc_wait_device(a->ctx->device); /* cuMemFree waits for the device's work */
		a = fc_find(p, true);
		if (a)
			fc_release(a);
	}
	pthread_mutex_unlock(&g_lock);
	return e;
}

static CUresult fc_alloc_async(CUdeviceptr *dptr, size_t size, CUstream h, bool ptsz)
{
	if (!dptr || size == 0)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&g_lock);
	struct CUstream_st *s = fc_stream(h, ptsz);
	CUresult e = s ? fc_alloc(&g_primary[s->device], size, dptr, true) : fc_ctx() ? CUDA_ERROR_INVALID_HANDLE
											: CUDA_ERROR_INVALID_CONTEXT;
	pthread_mutex_unlock(&g_lock);
	return e;
}

FC_API CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t size, CUstream h)
{
	ENTER(cuMemAllocAsync);
	return fc_alloc_async(dptr, size, h, false);
}

FC_API CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t size, CUstream h)
{
	ENTER(cuMemAllocAsync_ptsz);
	return fc_alloc_async(dptr, size, h, true);
}

static CUresult fc_free_async(CUdeviceptr p, CUstream h, bool ptsz)
{
	pthread_mutex_lock(&g_lock);
	struct CUstream_st *s = fc_stream(h, ptsz);
	struct alloc *a = fc_find(p, true);
	struct op *o = NULL;
	CUresult e;
	if (!s)
		e = CUDA_ERROR_INVALID_HANDLE;
	else if (!a || a->free_pending)
		e = CUDA_ERROR_INVALID_VALUE;
	else if (!(o = calloc(1, sizeof *o)))
		e = CUDA_ERROR_OUT_OF_MEMORY;
	else {
		o->kind = OP_FREE;
		o->dst = a->base;
		a->free_pending = !s->cap;
		e = fc_enqueue(s, o);
	}
	pthread_mutex_unlock(&g_lock);
	return e;
}

FC_API CUresult cuMemFreeAsync(CUdeviceptr p, CUstream h)
{
	ENTER(cuMemFreeAsync);
	return fc_free_async(p, h, false);
}

FC_API CUresult cuMemFreeAsync_ptsz(CUdeviceptr p, CUstream h)
{
	ENTER(cuMemFreeAsync_ptsz);
	return fc_free_async(p, h, true);
}

FC_API CUresult cuMemGetInfo_v2(size_t *free_bytes, size_t *total)
{
	ENTER(cuMemGetInfo_v2);
	struct CUctx_st *c = fc_ctx();
	if (!c)
		return CUDA_ERROR_INVALID_CONTEXT;
	if (!free_bytes || !total)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&g_lock);
	/* with a machine file: the bytes every live process sharing it holds */
	int d = c->device;
	size_t used = fm_on() ? fm_used(g_phys[d]) : g_used[d];
	*total = fm_on() ? fm_capacity(g_phys[d]) : g_capacity[d];
	*free_bytes = used < *total ? *total - used : 0;
	pthread_mutex_unlock(&g_lock);
	return CUDA_SUCCESS;
}

/* The allocation whose requested range [base, base + size) holds p, or NULL (g_lock held).
 * The real driver answers range and attribute queries this way: for p = cuMemAlloc(1000),
 * p + 1000 is in no allocation (CUDA_ERROR_NOT_FOUND, seen on an H200), even though the
 * allocation's granularity holds it. */
static struct alloc *fc_find_asked(uintptr_t p)
{
	struct alloc *a = fc_find(p, false);
	return a && p - (uintptr_t)a->base < a->size ? a : NULL;
}

FC_API CUresult cuMemGetAddressRange_v2(CUdeviceptr *base, size_t *size, CUdeviceptr p)
{
	ENTER(cuMemGetAddressRange_v2);
	pthread_mutex_lock(&g_lock);
	struct alloc *a = fc_find_asked(p);
	if (a && base)
		*base = (CUdeviceptr)(uintptr_t)a->base;
	if (a && size)
		*size = a->size;
	pthread_mutex_unlock(&g_lock);
	return a ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}

/* Outside every allocation, CUDA_ERROR_INVALID_VALUE (the real driver's answer for the range
 * attributes of memory that is not allocated). */
FC_API CUresult cuPointerGetAttribute(void *data, CUpointer_attribute attr, CUdeviceptr p)
{
	ENTER(cuPointerGetAttribute);
	if (!data)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&g_lock);
	struct alloc *a = fc_find_asked(p);
	CUresult e = a ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
	if (a) {
		if (attr == CU_POINTER_ATTRIBUTE_RANGE_START_ADDR)
			*(CUdeviceptr *)data = (CUdeviceptr)(uintptr_t)a->base;
		else if (attr == CU_POINTER_ATTRIBUTE_RANGE_SIZE)
			*(size_t *)data = a->size;
		else if (attr == CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL)
			*(int *)data = a->ctx->device;
		else
			e = CUDA_ERROR_NOT_SUPPORTED;
	}
	pthread_mutex_unlock(&g_lock);
	return e;
}

/* The handle names the allocation's base: a pointer inside one cannot be exported. */
FC_API CUresult cuIpcGetMemHandle(CUipcMemHandle *h, CUdeviceptr p)
{
	ENTER(cuIpcGetMemHandle);
	if (!h)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&g_lock);
	struct alloc *a = fc_find(p, true);
	if (a) {
		memset(h, 0, sizeof *h);
		memcpy(h->reserved, &a->base, sizeof a->base);
	}
	pthread_mutex_unlock(&g_lock);
	return a ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

static CUresult fc_fill(CUdeviceptr dst, size_t n, int value, unsigned delay_us, CUstream h, bool ptsz, bool sync)
{
	pthread_mutex_lock(&g_lock);
	struct CUstream_st *s = fc_stream(h, ptsz);
	struct alloc *a = fc_find(dst, false);
	struct op *o = NULL;
	CUresult e;
	if (!s)
		e = CUDA_ERROR_INVALID_HANDLE;
	else if ((!a || dst + n > (CUdeviceptr)(uintptr_t)a->base + a->bytes) && !fc_mapped_rw(dst, n))
		e = CUDA_ERROR_INVALID_VALUE;
	else if (!(o = calloc(1, sizeof *o)))
		e = CUDA_ERROR_OUT_OF_MEMORY;
	else {
		*o = (struct op){.kind = OP_FILL, .dst = (char *)(uintptr_t)dst, .n = n, .value = value, .delay_us = delay_us};
		e = fc_enqueue(s, o);
		if (e == CUDA_SUCCESS && sync)
			fc_wait_stream(s);
	}
	pthread_mutex_unlock(&g_lock);
	return e;
}

FC_API int gpfakecu_mapped(CUdeviceptr p, size_t n)
{
	pthread_mutex_lock(&g_lock);
	bool ok = fc_mapped_rw((uintptr_t)p, n);
	pthread_mutex_unlock(&g_lock);
	return ok;
}

FC_API CUresult gpfakecu_launch_fill(CUdeviceptr dst, size_t n, unsigned char value, unsigned delay_us, CUstream s)
{
	ENTER(gpfakecu_launch_fill);
	return fc_fill(dst, n, value, delay_us, s, false, false);
}

FC_API CUresult cuMemsetD8_v2(CUdeviceptr dst, unsigned char uc, size_t n)
{
	ENTER(cuMemsetD8_v2);
	return fc_fill(dst, n, uc, 0, NULL, false, true);
}

FC_API CUresult cuMemsetD8Async(CUdeviceptr dst, unsigned char uc, size_t n, CUstream s)
{
	ENTER(cuMemsetD8Async);
	return fc_fill(dst, n, uc, 0, s, false, false);
}

FC_API CUresult cuMemsetD8Async_ptsz(CUdeviceptr dst, unsigned char uc, size_t n, CUstream s)
{
	ENTER(cuMemsetD8Async_ptsz);
	return fc_fill(dst, n, uc, 0, s, true, false);
}

/* Waits for the device (all its streams), then copies. */
FC_API CUresult cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t n)
{
	ENTER(cuMemcpyDtoH_v2);
	struct CUctx_st *c = fc_ctx();
	if (!c)
		return CUDA_ERROR_INVALID_CONTEXT;
	pthread_mutex_lock(&g_lock);
	fc_wait_device(c->device);
	struct alloc *a = fc_find(src, false);
	CUresult e = (a && src + n <= (CUdeviceptr)(uintptr_t)a->base + a->bytes) || fc_mapped_rw(src, n)
			     ? CUDA_SUCCESS
			     : CUDA_ERROR_INVALID_VALUE;
	if (e == CUDA_SUCCESS)
		memcpy(dst, (const void *)(uintptr_t)src, n);
	pthread_mutex_unlock(&g_lock);
	return e;
}

/* ---- streams and events ---- */
static CUresult fc_stream_create(CUstream *ph, unsigned flags)
{
	struct CUctx_st *c = fc_ctx();
	if (!c)
		return CUDA_ERROR_INVALID_CONTEXT;
	if (!ph || (flags & ~(unsigned)CU_STREAM_NON_BLOCKING))
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&g_lock);
	struct CUstream_st *s = fc_stream_new(c->device, flags);
	pthread_mutex_unlock(&g_lock);
	if (!s)
		return CUDA_ERROR_OUT_OF_MEMORY;
	*ph = s;
	return CUDA_SUCCESS;
}

FC_API CUresult cuStreamCreate(CUstream *ph, unsigned int flags)
{
	ENTER(cuStreamCreate);
	return fc_stream_create(ph, flags);
}

FC_API CUresult cuStreamCreateWithPriority(CUstream *ph, unsigned int flags, int priority)
{
	ENTER(cuStreamCreateWithPriority);
	return fc_stream_create(ph, flags);
}

/* Work still queued runs to the end; the stream object stays (a worker may run on it). */
FC_API CUresult cuStreamDestroy_v2(CUstream h)
{
	ENTER(cuStreamDestroy_v2);
	pthread_mutex_lock(&g_lock);
	CUresult e = CUDA_ERROR_INVALID_HANDLE;
	if (h && h != CU_STREAM_LEGACY && h != CU_STREAM_PER_THREAD && h->magic == FC_STREAM_MAGIC && !h->dead) {
		h->dead = true;
		e = CUDA_SUCCESS;
	}
	pthread_mutex_unlock(&g_lock);
	return e;
}

static CUresult fc_stream_sync(CUstream h, bool ptsz)
{
	pthread_mutex_lock(&g_lock);
	struct CUstream_st *s = fc_stream(h, ptsz);
	if (s) {
		fc_wait_stream(s);
		fp_settle(s->device);
	}
	pthread_mutex_unlock(&g_lock);
	return s ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

FC_API CUresult cuStreamSynchronize(CUstream h)
{
	ENTER(cuStreamSynchronize);
	return fc_stream_sync(h, false);
}

FC_API CUresult cuStreamSynchronize_ptsz(CUstream h)
{
	ENTER(cuStreamSynchronize_ptsz);
	return fc_stream_sync(h, true);
}

FC_API CUresult cuEventCreate(CUevent *ev, unsigned int flags)
{
	ENTER(cuEventCreate);
	if (!ev)
		return CUDA_ERROR_INVALID_VALUE;
	struct CUevent_st *e = calloc(1, sizeof *e);
	if (!e)
		return CUDA_ERROR_OUT_OF_MEMORY;
	e->magic = FC_EVENT_MAGIC;
	*ev = e;
	return CUDA_SUCCESS;
}

static CUresult fc_event_record(CUevent ev, CUstream h, bool ptsz)
{
	if (!ev || ev->magic != FC_EVENT_MAGIC)
		return CUDA_ERROR_INVALID_HANDLE;
	pthread_mutex_lock(&g_lock);
	struct CUstream_st *s = fc_stream(h, ptsz);
	if (s && !s->cap) {
		ev->s = s;
		ev->seq = s->issued;
	}
	pthread_mutex_unlock(&g_lock);
	return s ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

FC_API CUresult cuEventRecord(CUevent ev, CUstream h)
{
	ENTER(cuEventRecord);
	return fc_event_record(ev, h, false);
}

FC_API CUresult cuEventRecord_ptsz(CUevent ev, CUstream h)
{
	ENTER(cuEventRecord_ptsz);
	return fc_event_record(ev, h, true);
}

FC_API CUresult cuEventQuery(CUevent ev)
{
	ENTER(cuEventQuery);
	if (!ev || ev->magic != FC_EVENT_MAGIC)
		return CUDA_ERROR_INVALID_HANDLE;
	pthread_mutex_lock(&g_lock);
	bool done = !ev->s || ev->s->done >= ev->seq;
	pthread_mutex_unlock(&g_lock);
	return done ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

FC_API CUresult cuEventSynchronize(CUevent ev)
{
	ENTER(cuEventSynchronize);
	if (!ev || ev->magic != FC_EVENT_MAGIC)
		return CUDA_ERROR_INVALID_HANDLE;
	pthread_mutex_lock(&g_lock);
	while (ev->s && ev->s->done < ev->seq)
		pthread_cond_wait(&g_cond, &g_lock);
	pthread_mutex_unlock(&g_lock);
	return CUDA_SUCCESS;
}

FC_API CUresult cuEventDestroy_v2(CUevent ev)
{
	ENTER(cuEventDestroy_v2);
	if (!ev || ev->magic != FC_EVENT_MAGIC)
		return CUDA_ERROR_INVALID_HANDLE;
	ev->magic = 0;
	free(ev); /* a wait already queued holds the stream and count, not the event */
	return CUDA_SUCCESS;
}

static CUresult fc_stream_wait_event(CUstream h, CUevent ev, bool ptsz)
{
	if (!ev || ev->magic != FC_EVENT_MAGIC)
		return CUDA_ERROR_INVALID_HANDLE;
	pthread_mutex_lock(&g_lock);
	struct CUstream_st *s = fc_stream(h, ptsz);
	CUresult e = s ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
	if (s && ev->s) {
		struct op *o = calloc(1, sizeof *o);
		if (!o) {
			e = CUDA_ERROR_OUT_OF_MEMORY;
		} else {
			*o = (struct op){.kind = OP_WAIT, .wstream = ev->s, .wseq = ev->seq};
			e = fc_enqueue(s, o);
		}
	}
	pthread_mutex_unlock(&g_lock);
	return e;
}

FC_API CUresult cuStreamWaitEvent(CUstream h, CUevent ev, unsigned int flags)
{
	ENTER(cuStreamWaitEvent);
	return fc_stream_wait_event(h, ev, false);
}

FC_API CUresult cuStreamWaitEvent_ptsz(CUstream h, CUevent ev, unsigned int flags)
{
	ENTER(cuStreamWaitEvent_ptsz);
	return fc_stream_wait_event(h, ev, true);
}

/* ---- capture ---- */
static CUresult fc_begin_capture(CUstream h, CUstreamCaptureMode mode, bool ptsz)
{
	pthread_mutex_lock(&g_lock);
	struct CUstream_st *s = fc_stream(h, ptsz);
	CUresult e = CUDA_SUCCESS;
	if (!s || !h || h == CU_STREAM_LEGACY)
		e = s ? CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED : CUDA_ERROR_INVALID_HANDLE;
	else if (s->cap)
		e = CUDA_ERROR_ILLEGAL_STATE;
	else {
		s->cap = 1;
		s->cap_mode = mode;
		s->cap_thread = pthread_self();
	}
	pthread_mutex_unlock(&g_lock);
	return e;
}

FC_API CUresult cuStreamBeginCapture_v2(CUstream h, CUstreamCaptureMode mode)
{
	ENTER(cuStreamBeginCapture_v2);
	return fc_begin_capture(h, mode, false);
}

FC_API CUresult cuStreamBeginCapture_v2_ptsz(CUstream h, CUstreamCaptureMode mode)
{
	ENTER(cuStreamBeginCapture_v2_ptsz);
	return fc_begin_capture(h, mode, true);
}

static struct CUgraph_st {
	int unused;
} fc_graph;

static CUresult fc_end_capture(CUstream h, CUgraph *g, bool ptsz)
{
	pthread_mutex_lock(&g_lock);
	struct CUstream_st *s = fc_stream(h, ptsz);
	CUresult e = CUDA_SUCCESS;
	if (!s)
		e = CUDA_ERROR_INVALID_HANDLE;
	else if (!s->cap)
		e = CUDA_ERROR_ILLEGAL_STATE;
	else {
		e = s->cap == 2 ? CUDA_ERROR_STREAM_CAPTURE_INVALIDATED : CUDA_SUCCESS;
		s->cap = 0;
		if (g)
			*g = e == CUDA_SUCCESS ? (CUgraph)&fc_graph : NULL;
	}
	pthread_mutex_unlock(&g_lock);
	return e;
}

FC_API CUresult cuStreamEndCapture(CUstream h, CUgraph *g)
{
	ENTER(cuStreamEndCapture);
	return fc_end_capture(h, g, false);
}

FC_API CUresult cuStreamEndCapture_ptsz(CUstream h, CUgraph *g)
{
	ENTER(cuStreamEndCapture_ptsz);
	return fc_end_capture(h, g, true);
}

static CUresult fc_is_capturing(CUstream h, CUstreamCaptureStatus *st, bool ptsz)
{
	if (!st)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&g_lock);
	struct CUstream_st *s = fc_stream(h, ptsz);
	if (s)
		*st = s->cap == 0   ? CU_STREAM_CAPTURE_STATUS_NONE
		      : s->cap == 1 ? CU_STREAM_CAPTURE_STATUS_ACTIVE
				    : CU_STREAM_CAPTURE_STATUS_INVALIDATED;
	pthread_mutex_unlock(&g_lock);
	return s ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

FC_API CUresult cuStreamIsCapturing(CUstream h, CUstreamCaptureStatus *st)
{
	ENTER(cuStreamIsCapturing);
	return fc_is_capturing(h, st, false);
}

FC_API CUresult cuStreamIsCapturing_ptsz(CUstream h, CUstreamCaptureStatus *st)
{
	ENTER(cuStreamIsCapturing_ptsz);
	return fc_is_capturing(h, st, true);
}

FC_API CUresult cuThreadExchangeStreamCaptureMode(CUstreamCaptureMode *mode)
{
	ENTER(cuThreadExchangeStreamCaptureMode);
	if (!mode)
		return CUDA_ERROR_INVALID_VALUE;
	CUstreamCaptureMode old = t_cap_mode;
	t_cap_mode = *mode;
	*mode = old;
	return CUDA_SUCCESS;
}

FC_API CUresult cuGetErrorName(CUresult e, const char **s)
{
	ENTER(cuGetErrorName);
	static char buf[32];
	snprintf(buf, sizeof buf, "CUresult %d", (int)e);
	if (s)
		*s = buf;
	return CUDA_SUCCESS;
}

/* ---- managed and pitched memory: plain allocations of their own sizes ---- */
FC_API CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t size, unsigned int flags)
{
	ENTER(cuMemAllocManaged);
	struct CUctx_st *c = fc_ctx();
	if (!c)
		return CUDA_ERROR_INVALID_CONTEXT;
	if (!dptr || size == 0 || (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST))
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&g_lock);
	CUresult e = fc_alloc(c, size, dptr, false);
	pthread_mutex_unlock(&g_lock);
	return e;
}

/* Rows of WidthInBytes rounded up to FC_ALIGN (the pitch); freed with cuMemFree. */
FC_API CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pitch, size_t width, size_t height,
				   unsigned int elem)
{
	ENTER(cuMemAllocPitch_v2);
	struct CUctx_st *c = fc_ctx();
	if (!c)
		return CUDA_ERROR_INVALID_CONTEXT;
	if (!dptr || !pitch || width == 0 || height == 0 || (elem != 4 && elem != 8 && elem != 16) ||
	    width > SIZE_MAX - FC_ALIGN)
		return CUDA_ERROR_INVALID_VALUE;
	size_t pt = (width + FC_ALIGN - 1) & ~(size_t)(FC_ALIGN - 1);
	if (height > SIZE_MAX / pt)
		return CUDA_ERROR_OUT_OF_MEMORY;
	pthread_mutex_lock(&g_lock);
	CUresult e = fc_alloc(c, pt * height, dptr, false);
	pthread_mutex_unlock(&g_lock);
	if (e == CUDA_SUCCESS)
		*pitch = pt;
	return e;
}

/* ---- virtual memory management ---- */
/* prop names pinned memory on a device of this driver. */
static CUresult fc_prop_check(const CUmemAllocationProp *prop)
{
	if (!prop || prop->type != CU_MEM_ALLOCATION_TYPE_PINNED || prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE)
		return CUDA_ERROR_INVALID_VALUE;
	return prop->location.id < 0 || prop->location.id >= g_ndev ? CUDA_ERROR_INVALID_DEVICE : CUDA_SUCCESS;
}

FC_API CUresult cuMemGetAllocationGranularity(size_t *gran, const CUmemAllocationProp *prop,
					      CUmemAllocationGranularity_flags option)
{
	ENTER(cuMemGetAllocationGranularity);
	if (!gran || (option != CU_MEM_ALLOC_GRANULARITY_MINIMUM && option != CU_MEM_ALLOC_GRANULARITY_RECOMMENDED))
		return CUDA_ERROR_INVALID_VALUE;
	CUresult e = fc_prop_check(prop);
	if (e == CUDA_SUCCESS)
		*gran = FC_GRAN;
	return e;
}

/* The handle of a physical allocation, or NULL (g_lock held): handles are compared, never
 * dereferenced, before they are found. The handle value is the allocation's address, or
 * that plus 1 for a handle imported from a shareable one (another value for the same
 * memory, as an importer gets). */
static struct fc_handle *fc_handle_find(CUmemGenericAllocationHandle handle)
{
	for (struct fc_handle *h = g_handles; h; h = h->next)
		if ((uintptr_t)h == handle || (uintptr_t)h + 1 == handle)
			return h;
	return NULL;
}

/* The physical memory goes back to the device when every reference is released and every
 * mapping unmapped. */
static void fc_handle_drop(struct fc_handle *h)
{
	if (h->refs || h->maps)
		return;
	for (struct fc_handle **pp = &g_handles; *pp; pp = &(*pp)->next)
		if (*pp == h) {
			*pp = h->next;
			break;
		}
	fc_uncharge(h->device, h->size);
	close(h->fd);
	free(h);
}

/* [p, p + n) lies in mappings end to end that the device may read and write (g_lock held):
 * memory a kernel (a fill) or a copy may touch, as a cuMemAlloc'd range is. */
static bool fc_mapped_rw(uintptr_t p, size_t n)
{
	uintptr_t at = p;
	while (at < p + n) {
		const struct fc_map *m = g_maps;
		while (m && !(at >= m->va && at - m->va < m->size))
			m = m->next;
		if (!m || !m->rw)
			return false;
		at = m->va + m->size;
	}
	return n > 0;
}

FC_API CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size, const CUmemAllocationProp *prop,
			    unsigned long long flags)
{
	ENTER(cuMemCreate);
	if (!handle || size == 0 || size % FC_GRAN || flags)
		return CUDA_ERROR_INVALID_VALUE;
	CUresult e = fc_prop_check(prop);
	if (e != CUDA_SUCCESS)
		return e;
	if (g_no_vmm)
		return CUDA_ERROR_NOT_SUPPORTED;
	/* the memory: a file of the size, backed by host memory only where it is touched */
	struct fc_handle *h = calloc(1, sizeof *h);
	int fd = h ? memfd_create("fakecu-chunk", MFD_CLOEXEC) : -1;
	if (fd < 0 || ftruncate(fd, (off_t)size) != 0) {
		if (fd >= 0)
			close(fd);
		free(h);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	pthread_mutex_lock(&g_lock);
	if (fc_charge(prop->location.id, size)) {
		*h = (struct fc_handle){g_handles, size, prop->location.id, 0, 1, fd};
		g_handles = h;
		*handle = (CUmemGenericAllocationHandle)(uintptr_t)h;
	} else {
		close(fd);
		free(h);
		e = CUDA_ERROR_OUT_OF_MEMORY;
	}
	pthread_mutex_unlock(&g_lock);
	return e;
}

FC_API CUresult cuMemRelease(CUmemGenericAllocationHandle handle)
{
	ENTER(cuMemRelease);
	pthread_mutex_lock(&g_lock);
	struct fc_handle *h = fc_handle_find(handle);
	CUresult e = h && h->refs ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
	if (e == CUDA_SUCCESS) {
		h->refs--;
		fc_handle_drop(h);
	}
	pthread_mutex_unlock(&g_lock);
	return e;
}

FC_API CUresult cuMemGetAllocationPropertiesFromHandle(CUmemAllocationProp *prop, CUmemGenericAllocationHandle handle)
{
	ENTER(cuMemGetAllocationPropertiesFromHandle);
	if (!prop)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&g_lock);
	struct fc_handle *h = fc_handle_find(handle);
	if (h && h->refs) {
		memset(prop, 0, sizeof *prop);
		prop->type = CU_MEM_ALLOCATION_TYPE_PINNED;
		prop->location.type = CU_MEM_LOCATION_TYPE_DEVICE;
		prop->location.id = h->device;
	}
	pthread_mutex_unlock(&g_lock);
	return h && h->refs ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* An address range of the process's own, inaccessible (PROT_NONE, no memory behind it), so
 * that reserved addresses never meet a host or fake allocation. Not counted as memory. */
FC_API CUresult cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t alignment, CUdeviceptr addr,
				    unsigned long long flags)
{
	ENTER(cuMemAddressReserve);
	(void)addr; /* a hint, which the driver may ignore */
	if (!ptr || size == 0 || size % FC_GRAN || flags || (alignment & (alignment - 1)))
		return CUDA_ERROR_INVALID_VALUE;
	size_t al = alignment > FC_GRAN ? alignment : FC_GRAN;
	if (size > SIZE_MAX - al)
		return CUDA_ERROR_OUT_OF_MEMORY;
	struct fc_resv *r = malloc(sizeof *r);
	void *m = r ? mmap(NULL, size + al, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0) : MAP_FAILED;
	if (m == MAP_FAILED) {
		free(r);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	uintptr_t b = ((uintptr_t)m + al - 1) & ~(uintptr_t)(al - 1);
	if (b > (uintptr_t)m)
		munmap(m, b - (uintptr_t)m);
	if ((uintptr_t)m + size + al > b + size)
		munmap((void *)(b + size), (uintptr_t)m + size + al - (b + size));
	pthread_mutex_lock(&g_lock);
	*r = (struct fc_resv){g_resvs, b, size};
	g_resvs = r;
	pthread_mutex_unlock(&g_lock);
	*ptr = (CUdeviceptr)b;
	return CUDA_SUCCESS;
}

/* A whole reservation, with nothing mapped in it (the fake refuses to free mapped ranges). */
FC_API CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size)
{
	ENTER(cuMemAddressFree);
	pthread_mutex_lock(&g_lock);
	struct fc_resv **rp = &g_resvs;
	while (*rp && ((*rp)->base != ptr || (*rp)->size != size))
		rp = &(*rp)->next;
	struct fc_resv *r = *rp;
	for (struct fc_map *m = g_maps; r && m; m = m->next)
		if (m->va >= r->base && m->va < r->base + r->size)
			r = NULL;
	if (r) {
		*rp = r->next;
		munmap((void *)r->base, r->size);
		free(r);
	}
	pthread_mutex_unlock(&g_lock);
	return r ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

FC_API CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
			 unsigned long long flags)
{
	ENTER(cuMemMap);
	if (flags || offset || size == 0 || size % FC_GRAN || ptr % FC_GRAN || ptr > UINTPTR_MAX - size)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&g_lock);
	struct fc_handle *h = fc_handle_find(handle);
	const struct fc_resv *r = g_resvs;
	while (r && !(ptr >= r->base && ptr - r->base <= r->size && size <= r->base + r->size - ptr))
		r = r->next;
	bool ok = h && h->refs && size <= h->size && r;
	/* a handle is mapped whole: the real driver refuses part of one (CUDA_ERROR_NOT_SUPPORTED,
	 * 801, on an H100 with driver 580) */
	for (const struct fc_map *m = g_maps; ok && m; m = m->next)
		ok = m->va >= ptr + size || ptr >= m->va + m->size;
	bool part = ok && size != h->size;
	struct fc_map *m = ok && !part ? malloc(sizeof *m) : NULL;
	/* the handle's memory at the address, inaccessible until cuMemSetAccess */
	if (m && mmap((void *)ptr, size, PROT_NONE, MAP_SHARED | MAP_FIXED, h->fd, 0) == MAP_FAILED) {
		free(m);
		m = NULL;
	}
	CUresult e = !ok ? CUDA_ERROR_INVALID_VALUE : part ? CUDA_ERROR_NOT_SUPPORTED : !m ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_SUCCESS;
	if (m) {
		*m = (struct fc_map){g_maps, ptr, size, h, false, handle};
		g_maps = m;
		h->maps++;
	}
	pthread_mutex_unlock(&g_lock);
	return e;
}

/* Unmaps every mapping in [ptr, ptr + size), which must hold whole mappings only. */
FC_API CUresult cuMemUnmap(CUdeviceptr ptr, size_t size)
{
	ENTER(cuMemUnmap);
	if (size == 0 || ptr > UINTPTR_MAX - size)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&g_lock);
	bool ok = false;
	for (const struct fc_map *m = g_maps; m; m = m->next) {
		bool in = m->va >= ptr && m->va + m->size <= ptr + size;
		bool overlaps = m->va < ptr + size && ptr < m->va + m->size;
		if (overlaps && !in) {
			ok = false;
			break;
		}
		ok |= in;
	}
	for (struct fc_map **mp = &g_maps; ok && *mp;) {
		struct fc_map *m = *mp;
		if (m->va >= ptr && m->va + m->size <= ptr + size) {
			*mp = m->next;
			/* back to reserved addresses: no memory, no access */
			(void)mmap((void *)m->va, m->size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
			m->h->maps--;
			fc_handle_drop(m->h);
			free(m);
		} else {
			mp = &m->next;
		}
	}
	pthread_mutex_unlock(&g_lock);
	return ok ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* The handle of the allocation mapped at `addr` (anywhere in a mapping), as the real driver:
 * the handle value the memory was mapped with, one reference more (a cuMemRelease each). */
FC_API CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *handle, void *addr)
{
	ENTER(cuMemRetainAllocationHandle);
	if (!handle)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&g_lock);
	const struct fc_map *m = g_maps;
	while (m && !((uintptr_t)addr >= m->va && (uintptr_t)addr - m->va < m->size))
		m = m->next;
	if (m) {
		m->h->refs++;
		*handle = m->hv;
	}
	pthread_mutex_unlock(&g_lock);
	return m ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* Shareable handles (CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR only): a number standing for a
 * descriptor, 1000 + its slot; importing one in the same process (the fake has no processes
 * to pass it to) hands out another handle value for the same memory, one reference more. */
#define FC_SHARED 64
static struct fc_handle *g_shared[FC_SHARED]; /* under g_lock */

FC_API CUresult cuMemExportToShareableHandle(void *shareable, CUmemGenericAllocationHandle handle,
					     CUmemAllocationHandleType type, unsigned long long flags)
{
	ENTER(cuMemExportToShareableHandle);
	if (!shareable || flags || type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&g_lock);
	struct fc_handle *h = fc_handle_find(handle);
	int slot = -1;
	for (int i = 0; h && h->refs && slot < 0 && i < FC_SHARED; i++)
		if (!g_shared[i])
			slot = i;
	if (slot >= 0) {
		g_shared[slot] = h;
		*(int *)shareable = 1000 + slot;
	}
	pthread_mutex_unlock(&g_lock);
	return slot >= 0 ? CUDA_SUCCESS : h && h->refs ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_ERROR_INVALID_VALUE;
}

FC_API CUresult cuMemImportFromShareableHandle(CUmemGenericAllocationHandle *handle, void *os, CUmemAllocationHandleType type)
{
	ENTER(cuMemImportFromShareableHandle);
	intptr_t fd = (intptr_t)os;
	if (!handle || type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR || fd < 1000 || fd >= 1000 + FC_SHARED)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&g_lock);
	struct fc_handle *h = g_shared[fd - 1000];
	bool live = false;
	for (struct fc_handle *x = g_handles; h && x; x = x->next)
		live |= x == h;
	if (live) {
		h->refs++;
		*handle = (CUmemGenericAllocationHandle)((uintptr_t)h + 1);
	}
	pthread_mutex_unlock(&g_lock);
	return live ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* Sparse arrays: the fake has none, but keeps what the driver does with the memory: a MAP of
 * a handle into an array's place holds it (as a mapping) until an UNMAP of that array and
 * place, which names no handle. Arrays are taken as given, never looked at. */
#define FC_ARRAY_MAPS 64
static struct {
	uintptr_t array;
	unsigned level, layer, x, y, z;
	struct fc_handle *h;
} g_array_maps[FC_ARRAY_MAPS]; /* under g_lock; h NULL: free */

static CUresult fc_map_array(CUarrayMapInfo *list, unsigned count)
{
	if (!list || !count)
		return CUDA_ERROR_INVALID_VALUE;
	CUresult e = CUDA_SUCCESS;
	pthread_mutex_lock(&g_lock);
	for (unsigned i = 0; i < count && e == CUDA_SUCCESS; i++) {
		const CUarrayMapInfo *m = &list[i];
		uintptr_t arr = (uintptr_t)m->resource.array;
		unsigned lv = m->subresource.sparseLevel.level, ly = m->subresource.sparseLevel.layer;
		unsigned x = m->subresource.sparseLevel.offsetX, y = m->subresource.sparseLevel.offsetY;
		unsigned z = m->subresource.sparseLevel.offsetZ;
		int at = -1;
		for (int k = 0; at < 0 && k < FC_ARRAY_MAPS; k++)
			if (g_array_maps[k].h && g_array_maps[k].array == arr && g_array_maps[k].level == lv &&
			    g_array_maps[k].layer == ly && g_array_maps[k].x == x && g_array_maps[k].y == y && g_array_maps[k].z == z)
				at = k;
		if (m->memOperationType == CU_MEM_OPERATION_TYPE_UNMAP) {
			if (at < 0) {
				e = CUDA_ERROR_INVALID_VALUE;
				continue;
			}
			struct fc_handle *h = g_array_maps[at].h;
			g_array_maps[at].h = NULL;
			h->maps--;
			fc_handle_drop(h);
			continue;
		}
		struct fc_handle *h = m->memHandleType == CU_MEM_HANDLE_TYPE_GENERIC ? fc_handle_find(m->memHandle.memHandle) : NULL;
		for (int k = 0; at < 0 && k < FC_ARRAY_MAPS; k++)
			if (!g_array_maps[k].h)
				at = k;
		if (m->memOperationType != CU_MEM_OPERATION_TYPE_MAP || !h || !h->refs || at < 0 || g_array_maps[at].h) {
			e = CUDA_ERROR_INVALID_VALUE;
			continue;
		}
		g_array_maps[at].array = arr;
		g_array_maps[at].level = lv, g_array_maps[at].layer = ly;
		g_array_maps[at].x = x, g_array_maps[at].y = y, g_array_maps[at].z = z;
		g_array_maps[at].h = h;
		h->maps++;
	}
	pthread_mutex_unlock(&g_lock);
	return e;
}

FC_API CUresult cuMemMapArrayAsync(CUarrayMapInfo *list, unsigned int count, CUstream s)
{
	ENTER(cuMemMapArrayAsync);
	(void)s;
	return fc_map_array(list, count);
}

FC_API CUresult cuMemMapArrayAsync_ptsz(CUarrayMapInfo *list, unsigned int count, CUstream s)
{
	ENTER(cuMemMapArrayAsync_ptsz);
	(void)s;
	return fc_map_array(list, count);
}

/* The range must be covered by mappings end to end; the fake grants nothing more than it
 * checks (mapped memory is not host-accessible here). */
FC_API CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc, size_t count)
{
	ENTER(cuMemSetAccess);
	if (!desc || count == 0 || size == 0 || ptr > UINTPTR_MAX - size)
		return CUDA_ERROR_INVALID_VALUE;
	for (size_t i = 0; i < count; i++) {
		if (desc[i].location.type != CU_MEM_LOCATION_TYPE_DEVICE || (unsigned)desc[i].flags > CU_MEM_ACCESS_FLAGS_PROT_READWRITE)
			return CUDA_ERROR_INVALID_VALUE;
		if (desc[i].location.id < 0 || desc[i].location.id >= g_ndev)
			return CUDA_ERROR_INVALID_DEVICE;
	}
	pthread_mutex_lock(&g_lock);
	uintptr_t at = ptr;
	for (bool found = true; at < ptr + size && found;) {
		found = false;
		for (const struct fc_map *m = g_maps; m && !found; m = m->next)
			if (m->va == at) {
				at += m->size;
				found = true;
			}
	}
	bool ok = at == ptr + size;
	/* the last descriptor for a device wins; READ or READWRITE grants what it says */
	int prot = PROT_NONE;
	for (size_t i = 0; i < count; i++)
		prot = desc[i].flags == CU_MEM_ACCESS_FLAGS_PROT_READWRITE ? PROT_READ | PROT_WRITE
		       : desc[i].flags == CU_MEM_ACCESS_FLAGS_PROT_READ    ? PROT_READ
									   : PROT_NONE;
	if (ok && mprotect((void *)ptr, size, prot) != 0)
		ok = false;
	for (struct fc_map *m = g_maps; ok && m; m = m->next)
		if (m->va >= ptr && m->va < ptr + size)
			m->rw = prot == (PROT_READ | PROT_WRITE);
	pthread_mutex_unlock(&g_lock);
	return ok ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* ---- memory pools (the model: fakepool.c) ---- */
_Static_assert(CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES == (int)FP_REUSE_FOLLOW_EVENT_DEPENDENCIES &&
		       CU_MEMPOOL_ATTR_USED_MEM_HIGH == (int)FP_USED_MEM_HIGH,
	       "the driver numbers pool attributes as fakepool.h does");

static CUresult fc_pool_err(enum fp_err e)
{
	static const CUresult map[] = {CUDA_SUCCESS, CUDA_ERROR_INVALID_VALUE, CUDA_ERROR_INVALID_DEVICE,
				       CUDA_ERROR_OUT_OF_MEMORY};
	return map[e];
}

FC_API CUresult cuMemPoolCreate(CUmemoryPool *pool, const CUmemPoolProps *props)
{
	ENTER(cuMemPoolCreate);
	if (!pool || !props || props->allocType != CU_MEM_ALLOCATION_TYPE_PINNED ||
	    props->location.type != CU_MEM_LOCATION_TYPE_DEVICE)
		return CUDA_ERROR_INVALID_VALUE;
	struct fp_pool *p = NULL;
	pthread_mutex_lock(&g_lock);
	enum fp_err e = fp_create(props->location.id, &p);
	pthread_mutex_unlock(&g_lock);
	if (e == FP_OK)
		*pool = (CUmemoryPool)p;
	return fc_pool_err(e);
}

/* As the driver: returns at once (fp_destroy). */
FC_API CUresult cuMemPoolDestroy(CUmemoryPool pool)
{
	ENTER(cuMemPoolDestroy);
	FP_RETURN(&g_lock, fc_pool_err, fp_destroy(pool));
}

static CUresult fc_device_pool(CUmemoryPool *pool, CUdevice dev, bool current)
{
	if (!pool)
		return CUDA_ERROR_INVALID_VALUE;
	struct fp_pool *p = NULL;
	pthread_mutex_lock(&g_lock);
	enum fp_err e = fp_device_pool(dev, current, &p);
	pthread_mutex_unlock(&g_lock);
	if (e == FP_OK)
		*pool = (CUmemoryPool)p;
	return fc_pool_err(e);
}

FC_API CUresult cuDeviceGetDefaultMemPool(CUmemoryPool *pool, CUdevice dev)
{
	ENTER(cuDeviceGetDefaultMemPool);
	return fc_device_pool(pool, dev, false);
}

FC_API CUresult cuDeviceGetMemPool(CUmemoryPool *pool, CUdevice dev)
{
	ENTER(cuDeviceGetMemPool);
	return fc_device_pool(pool, dev, true);
}

FC_API CUresult cuDeviceSetMemPool(CUdevice dev, CUmemoryPool pool)
{
	ENTER(cuDeviceSetMemPool);
	FP_RETURN(&g_lock, fc_pool_err, fp_set_device_pool(dev, pool));
}

static CUresult fc_alloc_from_pool(CUdeviceptr *dptr, size_t size, CUmemoryPool pool, CUstream h, bool ptsz)
{
	if (!dptr || size == 0)
		return CUDA_ERROR_INVALID_VALUE;
	char *m = NULL;
	pthread_mutex_lock(&g_lock);
	CUresult e = !fc_stream(h, ptsz) ? (fc_ctx() ? CUDA_ERROR_INVALID_HANDLE : CUDA_ERROR_INVALID_CONTEXT)
					 : fc_pool_err(fp_alloc(pool, size, &m));
	pthread_mutex_unlock(&g_lock);
	if (e == CUDA_SUCCESS)
		*dptr = (CUdeviceptr)(uintptr_t)m;
	return e;
}

FC_API CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t size, CUmemoryPool pool, CUstream h)
{
	ENTER(cuMemAllocFromPoolAsync);
	return fc_alloc_from_pool(dptr, size, pool, h, false);
}

FC_API CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t size, CUmemoryPool pool, CUstream h)
{
	ENTER(cuMemAllocFromPoolAsync_ptsz);
	return fc_alloc_from_pool(dptr, size, pool, h, true);
}

FC_API CUresult cuMemPoolGetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value)
{
	ENTER(cuMemPoolGetAttribute);
	FP_RETURN(&g_lock, fc_pool_err, fp_get(pool, (enum fp_attr)attr, value));
}

FC_API CUresult cuMemPoolSetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value)
{
	ENTER(cuMemPoolSetAttribute);
	FP_RETURN(&g_lock, fc_pool_err, fp_set(pool, (enum fp_attr)attr, value));
}

FC_API CUresult cuMemPoolTrimTo(CUmemoryPool pool, size_t keep)
{
	ENTER(cuMemPoolTrimTo);
	FP_RETURN(&g_lock, fc_pool_err, fp_trim_to(pool, keep));
}

/* ---- cuGetProcAddress: the fake's own entry points, from a table, never dlsym ---- */
#define FC_ROW(n) {#n, (void (*)(void))n},
static const struct {
	const char *name;
	void (*fn)(void);
} fc_table[] = {FC_FUNCS(FC_ROW)};

static void (*fc_lookup(const char *name))(void)
{
#ifdef FAKECU_CUDA11
	/* what a CUDA 11.8 driver does not have (cuda11/libcuda.map leaves them unexported) */
	if (!strcmp(name, "cuGetProcAddress_v2") || !strcmp(name, "cuCtxCreate_v4"))
		return NULL;
#endif
	for (size_t i = 0; i < sizeof fc_table / sizeof fc_table[0]; i++)
		if (!strcmp(fc_table[i].name, name))
			return fc_table[i].fn;
	return NULL;
}

/* FAKECU_PROCADDR_INTERNAL=1: cuGetProcAddress hands out internal entry points for these,
 * at other addresses than the exported symbols (as a driver may: tracing layers, thunks). */
static CUresult in_MemAlloc(CUdeviceptr *p, size_t n) { return cuMemAlloc_v2(p, n); }
static CUresult in_MemFree(CUdeviceptr p) { return cuMemFree_v2(p); }
static CUresult in_MemAllocAsync(CUdeviceptr *p, size_t n, CUstream s) { return cuMemAllocAsync(p, n, s); }
static CUresult in_MemAllocAsync_ptsz(CUdeviceptr *p, size_t n, CUstream s) { return cuMemAllocAsync_ptsz(p, n, s); }
static CUresult in_MemFreeAsync(CUdeviceptr p, CUstream s) { return cuMemFreeAsync(p, s); }
static CUresult in_GetProcAddress(const char *sym, void **pfn, int version, cuuint64_t flags)
{
	return cuGetProcAddress(sym, pfn, version, flags);
}

static void (*fc_internal(const char *name))(void)
{
	static const struct {
		const char *name;
		void (*fn)(void);
	} t[] = {
		{"cuMemAlloc_v2", (void (*)(void))in_MemAlloc},
		{"cuMemFree_v2", (void (*)(void))in_MemFree},
		{"cuMemAllocAsync", (void (*)(void))in_MemAllocAsync},
		{"cuMemAllocAsync_ptsz", (void (*)(void))in_MemAllocAsync_ptsz},
		{"cuMemFreeAsync", (void (*)(void))in_MemFreeAsync},
		{"cuGetProcAddress", (void (*)(void))in_GetProcAddress},
	};
	const char *e = getenv("FAKECU_PROCADDR_INTERNAL");
	for (size_t i = 0; e && *e == '1' && i < sizeof t / sizeof t[0]; i++)
		if (!strcmp(t[i].name, name))
			return t[i].fn;
	return NULL;
}

/* The CUDA version (1000 * major + 10 * minor) that introduced `name`, for the fake's names
 * newer than CUDA 3.0 (cuda.h); the others are older. */
static int fc_since(const char *name)
{
	static const struct {
		const char *name;
		int since;
	} t[] = {
		{"cuStreamBeginCapture_v2", 10010}, {"cuStreamBeginCapture_v2_ptsz", 10010},
		{"cuStreamEndCapture", 10000}, {"cuStreamEndCapture_ptsz", 10000},
		{"cuStreamIsCapturing", 10000}, {"cuStreamIsCapturing_ptsz", 10000},
		{"cuThreadExchangeStreamCaptureMode", 10010},
		{"cuMemCreate", 10020}, {"cuMemRelease", 10020}, {"cuMemMap", 10020}, {"cuMemUnmap", 10020},
		{"cuMemAddressReserve", 10020}, {"cuMemAddressFree", 10020}, {"cuMemSetAccess", 10020},
		{"cuMemGetAllocationGranularity", 10020}, {"cuMemGetAllocationPropertiesFromHandle", 10020},
		{"cuDevicePrimaryCtxRelease_v2", 11000}, {"cuDevicePrimaryCtxReset_v2", 11000},
		{"cuMemAllocAsync", 11020}, {"cuMemAllocAsync_ptsz", 11020}, {"cuMemFreeAsync", 11020},
		{"cuMemFreeAsync_ptsz", 11020}, {"cuMemPoolCreate", 11020}, {"cuMemPoolDestroy", 11020},
		{"cuDeviceGetDefaultMemPool", 11020}, {"cuDeviceGetMemPool", 11020}, {"cuDeviceSetMemPool", 11020},
		{"cuMemAllocFromPoolAsync", 11020}, {"cuMemAllocFromPoolAsync_ptsz", 11020},
		{"cuMemPoolGetAttribute", 11020}, {"cuMemPoolSetAttribute", 11020}, {"cuMemPoolTrimTo", 11020},
		{"cuGetProcAddress", 11030}, {"cuDeviceGetUuid_v2", 11040}, {"cuGetProcAddress_v2", 12000},
		{"cuCtxCreate_v4", 12050},
	};
	for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
		if (!strcmp(t[i].name, name))
			return t[i].since;
	return 3000;
}

/* Both versions, as the real driver: a version past the driver's own is
 * CUDA_ERROR_INVALID_VALUE (a CUDA 11 driver did not check); then the per-thread variants
 * first when asked for, then the _v2, then the name, each only where the version asked for
 * has it. A name found only past that version is CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT
 * (the fake lacks the old versions of the _v2 names: asked for cuMemAlloc at 3.1, the real
 * driver gives its 32-bit cuMemAlloc, the fake nothing); one not found at all
 * CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND; both CUDA_ERROR_NOT_FOUND with a NULL entry point. */
static CUresult fc_get_proc(const char *symbol, void **pfn, int version, cuuint64_t flags,
			    CUdriverProcAddressQueryResult *status)
{
	if (!symbol || !pfn)
		return CUDA_ERROR_INVALID_VALUE;
#ifndef FAKECU_CUDA11
	if (version > 13000)
		return CUDA_ERROR_INVALID_VALUE;
#endif
	static const char *const ptsz_suffixes[] = {"_v2_ptsz", "_ptsz", "_v2_ptds", "_ptds"};
	static const char *const suffixes[] = {"_v2", ""};
	void (*fn)(void) = NULL;
	bool too_new = false;
	char name[128];
	for (size_t i = 0; !fn && i < 6; i++) {
		if (i < 4 && !(flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM))
			continue;
		snprintf(name, sizeof name, "%s%s", symbol, i < 4 ? ptsz_suffixes[i] : suffixes[i - 4]);
		fn = fc_lookup(name);
		if (fn && fc_since(name) > version) {
			fn = NULL;
			too_new = true;
		}
	}
	if (fn && fc_internal(name))
		fn = fc_internal(name);
	memcpy(pfn, &fn, sizeof fn);
	if (status)
		*status = fn	    ? CU_GET_PROC_ADDRESS_SUCCESS
			  : too_new ? CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT
				    : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
	return fn ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}

FC_API CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version, cuuint64_t flags,
				    CUdriverProcAddressQueryResult *status)
{
	ENTER(cuGetProcAddress_v2);
	return fc_get_proc(symbol, pfn, version, flags, status);
}

FC_API CUresult cuGetProcAddress(const char *symbol, void **pfn, int version, cuuint64_t flags)
{
	ENTER(cuGetProcAddress);
	return fc_get_proc(symbol, pfn, version, flags, NULL);
}

/* ---- control API ---- */
FC_API unsigned long gpfakecu_calls(const char *name)
{
	int fn = fc_fn(name);
	return fn < 0 ? 0 : __atomic_load_n(&g_calls[fn], __ATOMIC_RELAXED);
}

static int fc_fail(const char *name, unsigned long n, CUresult err, bool every)
{
	pthread_once(&g_once, fc_init);
	int fn = name && strcmp(name, "*") == 0 ? FC_ANY : fc_fn(name);
	return fn == -1 ? -1 : fc_add_rule(fn, n, err, every);
}

FC_API int gpfakecu_fail_nth(const char *name, unsigned long n, CUresult err)
{
	return fc_fail(name, n, err, false);
}

FC_API int gpfakecu_fail_from(const char *name, unsigned long n, CUresult err)
{
	return fc_fail(name, n, err, true);
}

FC_API void gpfakecu_fault(CUresult err)
{
	pthread_once(&g_once, fc_init);
	__atomic_store_n(&g_sticky, err, __ATOMIC_RELEASE);
}

FC_API size_t gpfakecu_alloc_sizes(size_t *out, size_t cap)
{
	pthread_mutex_lock(&g_lock);
	for (size_t i = 0; i < g_nsizes && i < cap; i++)
		out[i] = g_sizes[i];
	size_t n = g_nsizes;
	pthread_mutex_unlock(&g_lock);
	return n;
}

FC_API unsigned long gpfakecu_allocations(int device)
{
	unsigned long n = 0;
	pthread_mutex_lock(&g_lock);
	for (size_t i = 0; i < g_nallocs; i++)
		n += device < 0 || g_allocs[i].ctx->device == device;
	pthread_mutex_unlock(&g_lock);
	return n;
}

FC_API size_t gpfakecu_used(int device)
{
	pthread_mutex_lock(&g_lock);
	size_t n = device >= 0 && device < FC_MAXDEV ? g_used[device] : 0;
	pthread_mutex_unlock(&g_lock);
	return n;
}
