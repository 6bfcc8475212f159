/* Every allocation path of the driver counts against the limit (limit:64M, one fake device,
 * no CUDA runtime): physical memory from cuMemCreate until its last cuMemRelease and cuMemUnmap
 * (e2e_drv_vmm.c has the patterns of mapped memory), cuMemAllocManaged,
 * cuMemAllocPitch (pitch x rows), pools the program made (cuMemPoolCreate +
 * cuMemAllocFromPoolAsync and its _ptsz twin, cuDeviceSetMemPool + cuMemAllocAsync), each
 * shown in the page while held, refused past the limit with CUDA_ERROR_OUT_OF_MEMORY before the
 * driver is called, and sharing the limit with the pool; cuMemGetInfo leaves them out of free.
 * cuMemAddressReserve is the driver's own, not interposed; cuMemSetAccess and cuMemAddressFree
 * are gpupool's (they refuse the pools' own ranges: e2e_drv_vmmcap.c, "range") and pass the
 * program's ranges to the driver. "procaddr": every entry point
 * through cuGetProcAddress_v2; "dlsym": through dlsym on libcuda's handle. "threads": threads
 * take and give virtual, managed and pooled memory at once: the limit holds at every moment,
 * every refusal is CUDA_ERROR_OUT_OF_MEMORY, and the figures come back to zero. "reset": a
 * reset of the primary context gives back the pool's segments and the managed memory it
 * destroyed; cuMemCreate's memory survives it and stays counted and shown. "destroy-live":
 * cuMemPoolDestroy of a pool whose allocation is still live returns at once and the driver
 * keeps the memory (cuda.h): it stays counted, so a new pool cannot take the limit again,
 * until the last allocation from the destroyed pool is freed, a device reset between
 * (which such memory survives) included. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "e2e_drv.h"

#define MB ((size_t)1 << 20)

struct paths {
	CUresult (*MemCreate)(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *, unsigned long long);
	CUresult (*MemRelease)(CUmemGenericAllocationHandle);
	CUresult (*AddressReserve)(CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long);
	CUresult (*AddressFree)(CUdeviceptr, size_t);
	CUresult (*Map)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long);
	CUresult (*Unmap)(CUdeviceptr, size_t);
	CUresult (*SetAccess)(CUdeviceptr, size_t, const CUmemAccessDesc *, size_t);
	CUresult (*AllocManaged)(CUdeviceptr *, size_t, unsigned);
	CUresult (*AllocPitch)(CUdeviceptr *, size_t *, size_t, size_t, unsigned);
	CUresult (*PoolCreate)(CUmemoryPool *, const CUmemPoolProps *);
	CUresult (*PoolDestroy)(CUmemoryPool);
	CUresult (*PoolSetAttribute)(CUmemoryPool, CUmemPool_attribute, void *);
	CUresult (*PoolGetAttribute)(CUmemoryPool, CUmemPool_attribute, void *);
	CUresult (*SetMemPool)(CUdevice, CUmemoryPool);
	CUresult (*AllocFromPool)(CUdeviceptr *, size_t, CUmemoryPool, CUstream);
	CUresult (*AllocFromPool_ptsz)(CUdeviceptr *, size_t, CUmemoryPool, CUstream);
};

/* X(field, name as cuGetProcAddress is asked, exported name, interposed by gpupool) */
#define PATHS(X)                                                                                  \
	X(MemCreate, "cuMemCreate", "cuMemCreate", 1)                                             \
	X(MemRelease, "cuMemRelease", "cuMemRelease", 1)                                          \
	X(AddressReserve, "cuMemAddressReserve", "cuMemAddressReserve", 0)                        \
	X(AddressFree, "cuMemAddressFree", "cuMemAddressFree", 1)                                 \
	X(Map, "cuMemMap", "cuMemMap", 1)                                                         \
	X(Unmap, "cuMemUnmap", "cuMemUnmap", 1)                                                   \
	X(SetAccess, "cuMemSetAccess", "cuMemSetAccess", 1)                                       \
	X(AllocManaged, "cuMemAllocManaged", "cuMemAllocManaged", 1)                              \
	X(AllocPitch, "cuMemAllocPitch", "cuMemAllocPitch_v2", 1)                                 \
	X(PoolCreate, "cuMemPoolCreate", "cuMemPoolCreate", 1)                                    \
	X(PoolDestroy, "cuMemPoolDestroy", "cuMemPoolDestroy", 1)                                 \
	X(PoolSetAttribute, "cuMemPoolSetAttribute", "cuMemPoolSetAttribute", 0)                  \
	X(PoolGetAttribute, "cuMemPoolGetAttribute", "cuMemPoolGetAttribute", 0)                  \
	X(SetMemPool, "cuDeviceSetMemPool", "cuDeviceSetMemPool", 1)                              \
	X(AllocFromPool, "cuMemAllocFromPoolAsync", "cuMemAllocFromPoolAsync", 1)                 \
	X(AllocFromPool_ptsz, "cuMemAllocFromPoolAsync", "cuMemAllocFromPoolAsync_ptsz", 1)

/* Is `fn` gpupool's (in libgpupool.so) or the driver's? */
static int is_ours(void *fn)
{
	Dl_info info;
	CHECK(dladdr(fn, &info) && info.dli_fname);
	return strstr(info.dli_fname, "libgpupool") != NULL;
}

static void load(struct paths *p, const struct e2e_drv *d, int procaddr)
{
	CUresult (*get)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *) = NULL;
	E2E_FN(get, dlsym(d->handle, "cuGetProcAddress_v2"));
	CUdriverProcAddressQueryResult st;
	void *fn;
#define LOAD_(field, base, full, ours)                                                              \
	fn = NULL;                                                                                  \
	if (procaddr)                                                                               \
		CU(get(base, &fn, 13000,                                                            \
		       strstr(full, "_ptsz") ? CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM : 0, &st)); \
	else                                                                                        \
		fn = dlsym(d->handle, full);                                                        \
	CHECK(fn != NULL);                                                                          \
	if (is_ours(fn) != (ours)) {                                                                \
		fprintf(stderr, "%s: %s\n", full, (ours) ? "not gpupool's" : "interposed, but need not be"); \
		exit(1);                                                                            \
	}                                                                                           \
	E2E_FN(p->field, fn);
	PATHS(LOAD_)
#undef LOAD_
}

static struct gpupool_device_stats stats(void) { return e2e_stats(0); }

/* Refused at the limit: CUDA_ERROR_OUT_OF_MEMORY, the driver not called, the refusal counted. */
#define REFUSED(call, fake_name)                                                              \
	do {                                                                                  \
		unsigned long n_ = d.calls(fake_name);                                        \
		uint64_t r_ = stats().unpooled_refusals;                                      \
		CUE(call, CUDA_ERROR_OUT_OF_MEMORY);                                          \
		CHECK(d.calls(fake_name) == n_);                                              \
		CHECK(stats().unpooled_refusals == r_ + 1);                                   \
	} while (0)

#define THREADS 8
#define ROUNDS 300
static struct e2e_drv d;
static struct paths f;
static _Atomic unsigned long done_ok, refused;

static void *worker(void *arg)
{
	unsigned i = (unsigned)(uintptr_t)arg;
	CU(d.CtxSetCurrent(d.primary[0]));
	CUmemAllocationProp prop;
	memset(&prop, 0, sizeof prop);
	prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	for (int r = 0; r < ROUNDS; r++) {
		CUmemGenericAllocationHandle h;
		CUdeviceptr p = 0;
		CUresult e;
		switch ((i + (unsigned)r) % 3) {
		case 0:
			e = f.MemCreate(&h, 16 * MB, &prop, 0);
			break;
		case 1:
			e = f.AllocManaged(&p, 12 * MB, CU_MEM_ATTACH_GLOBAL);
			break;
		default:
			e = d.MemAlloc(&p, 12 * MB);
			break;
		}
		if (e == CUDA_ERROR_OUT_OF_MEMORY) {
			atomic_fetch_add(&refused, 1);
			continue;
		}
		CU(e);
		atomic_fetch_add(&done_ok, 1);
		/* held: the page never shows more than the limit (pooled and not) */
		struct gpupool_device_stats st = e2e_stats(0);
		CHECK(st.reserved_bytes + st.unpooled_bytes <= 64 * MB);
		if ((i + (unsigned)r) % 3 == 0)
			CU(f.MemRelease(h));
		else
			CU(d.MemFree(p));
	}
	return NULL;
}

static int threads(void)
{
	e2e_run_threads(THREADS, worker);
	struct gpupool_device_stats st = e2e_stats(0);
	CHECK(atomic_load(&done_ok) + atomic_load(&refused) == THREADS * ROUNDS);
	CHECK(st.unpooled_bytes == 0 && st.unpooled_vmm_bytes == 0 && st.unpooled_managed_bytes == 0);
	CHECK(st.unpooled_allocs == st.unpooled_frees);
	CHECK(st.unpooled_bytes_peak <= 64 * MB && st.reserved_bytes_peak <= 64 * MB);
	/* everything held at the end is the pool's cache: all of it can be taken again */
	CUmemAllocationProp prop;
	memset(&prop, 0, sizeof prop);
	prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	CUmemGenericAllocationHandle h;
	CU(f.MemCreate(&h, 64 * MB, &prop, 0)); /* after the cache went back */
	CU(f.MemRelease(h));
	return 0;
}

static int reset(void)
{
	CUmemAllocationProp prop;
	memset(&prop, 0, sizeof prop);
	prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	CUmemGenericAllocationHandle h, hx;
	CUdeviceptr a = 0, m = 0;
	CU(f.MemCreate(&h, 16 * MB, &prop, 0));
	CU(f.AllocManaged(&m, 8 * MB, CU_MEM_ATTACH_GLOBAL));
	CU(d.MemAlloc(&a, 30 * MB));
	CUE(f.MemCreate(&hx, 16 * MB, &prop, 0), CUDA_ERROR_OUT_OF_MEMORY); /* 16 + 8 + 30 + 16 */
	CU(d.PrimaryReset(0));
	CU(d.PrimaryRetain(&d.primary[0], 0));
	CU(d.CtxSetCurrent(d.primary[0]));
	struct gpupool_device_stats st = e2e_stats(0);
	CHECK(st.reserved_bytes == 0 && st.unpooled_managed_bytes == 0);
	CHECK(st.unpooled_vmm_bytes == 16 * MB && st.unpooled_bytes == 16 * MB);
	CU(f.MemCreate(&hx, 48 * MB, &prop, 0)); /* 16 + 48: the rest came back */
	CU(f.MemRelease(hx));
	CU(f.MemRelease(h));
	st = e2e_stats(0);
	CHECK(st.unpooled_bytes == 0 && st.unpooled_vmm_bytes == 0);
	return 0;
}

static int destroy_live(void)
{
	size_t (*used)(int) = NULL;
	E2E_FN(used, dlsym(d.handle, "gpfakecu_used"));
	CUmemPoolProps props;
	memset(&props, 0, sizeof props);
	props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
	props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	props.location.id = 0;
	for (int round = 0; round < 3; round++) {
		CUmemoryPool pool, other;
		CUdeviceptr p = 0, x = 0;
		CU(f.PoolCreate(&pool, &props));
		CU(f.AllocFromPool(&p, 48 * MB, pool, 0));
		CU(d.StreamSynchronize(0));
		CU(f.PoolDestroy(pool)); /* p is still live: the driver keeps the pool's memory */
		struct gpupool_device_stats st = stats();
		CHECK(st.unpooled_mempool_bytes == 48 * MB && st.unpooled_bytes == 48 * MB);
		size_t fr = 0, tot = 0;
		CU(d.MemGetInfo(&fr, &tot));
		CHECK(tot == 64 * MB && fr == 16 * MB);
		CU(f.PoolCreate(&other, &props));
		REFUSED(f.AllocFromPool(&x, 48 * MB, other, 0), "cuMemAllocFromPoolAsync"); /* 48 + 48 */
		CU(f.PoolDestroy(other));
		CU(d.MemFree(p)); /* the last allocation of the destroyed pool: its memory goes */
		st = stats();
		CHECK(st.unpooled_mempool_bytes == 0 && st.unpooled_bytes == 0 && used(0) == 0);
	}
	/* two allocations, freed the stream-ordered way: counted until the later free */
	CUmemoryPool pool;
	CUdeviceptr p1 = 0, p2 = 0;
	CU(f.PoolCreate(&pool, &props));
	CU(f.AllocFromPool(&p1, 16 * MB, pool, 0));
	CU(f.AllocFromPool_ptsz(&p2, 16 * MB, pool, 0));
	CU(d.StreamSynchronize(0));
	CU(f.PoolDestroy(pool));
	CU(d.MemFreeAsync(p1, 0));
	CU(d.StreamSynchronize(0));
	CHECK(stats().unpooled_mempool_bytes == 32 * MB);
	CU(d.MemFreeAsync(p2, 0));
	CU(d.StreamSynchronize(0));
	struct gpupool_device_stats st = stats();
	CHECK(st.unpooled_mempool_bytes == 0 && st.unpooled_bytes == 0 && st.unpooled_allocs == st.unpooled_frees);
	/* a reset with an allocation still live, its pool destroyed before it or after: the
	 * allocation survives the reset, as a memory pool's do (cuda_runtime_api.h), and stays
	 * counted until it is freed */
	for (int round = 0; round < 4; round++) {
		bool destroy_first = round % 2 == 0;
		CUdeviceptr q = 0, r = 0, x = 0;
		CU(f.PoolCreate(&pool, &props));
		CU(f.AllocFromPool(&q, 40 * MB, pool, 0));
		CU(d.StreamSynchronize(0));
		if (destroy_first)
			CU(f.PoolDestroy(pool));
		CU(d.PrimaryReset(0));
		CU(d.CtxSetCurrent(d.primary[0]));
		CHECK(used(0) == 40 * MB);
		CU(d.MemAlloc(&r, 16 * MB)); /* 40 + 16 fit the cap (and make the device's new pool) */
		CHECK(d.MemAlloc(&x, 16 * MB) == CUDA_ERROR_OUT_OF_MEMORY); /* 40 + 16 + 16 do not */
		st = stats();
		CHECK(st.unpooled_mempool_bytes == 40 * MB);
		CU(d.MemFree(q)); /* after the reset, as the program may */
		if (!destroy_first)
			CU(f.PoolDestroy(pool));
		st = stats();
		CHECK(st.unpooled_mempool_bytes == 0 && st.unpooled_bytes == 0);
		CU(d.MemFree(r));
	}
	/* a pool that gives its memory back at a synchronize (release threshold 0, the default),
	 * with no call gpupool sees: its figure is read again before a refusal at the cap (before:
	 * 40 MiB counted that the device no longer held, and 48 MiB refused) */
	for (int round = 0; round < 2; round++) {
		CUdeviceptr q = 0, r = 0;
		CU(f.PoolCreate(&pool, &props));
		CU(f.AllocFromPool(&q, 40 * MB, pool, 0));
		CU(d.MemFreeAsync(q, 0));
		CU(d.StreamSynchronize(0)); /* the pool gives its 40 MiB back */
		CU(round ? d.MemAlloc(&r, 48 * MB) : f.AllocManaged(&r, 48 * MB, CU_MEM_ATTACH_GLOBAL));
		CU(d.MemFree(r));
		CU(f.PoolDestroy(pool));
		CHECK(stats().unpooled_mempool_bytes == 0);
	}
	/* the same behind 80 other pools of the device (each read once), all read again */
	CUmemoryPool many[80];
	for (int i = 0; i < 80; i++) {
		CUdeviceptr z = 0;
		CU(f.PoolCreate(&many[i], &props));
		CHECK(f.AllocFromPool(&z, 1024 * MB, many[i], 0) == CUDA_ERROR_OUT_OF_MEMORY); /* refused: read */
	}
	CUdeviceptr q = 0, r = 0;
	CU(f.PoolCreate(&pool, &props));
	CU(f.AllocFromPool(&q, 40 * MB, pool, 0));
	CU(d.MemFreeAsync(q, 0));
	CU(d.StreamSynchronize(0));
	CU(d.MemAlloc(&r, 48 * MB));
	CU(d.MemFree(r));
	CU(f.PoolDestroy(pool));
	for (int i = 0; i < 80; i++)
		CU(f.PoolDestroy(many[i]));
	CHECK(stats().unpooled_mempool_bytes == 0);
	return 0;
}

int main(int argc, char **argv)
{
	e2e_shm_dir();
	CHECK(argc > 1);
	e2e_drv_load(&d, strcmp(argv[1], "dlsym") != 0);
	load(&f, &d, strcmp(argv[1], "dlsym") != 0);
	if (!strcmp(argv[1], "threads"))
		return threads();
	if (!strcmp(argv[1], "reset"))
		return reset();
	if (!strcmp(argv[1], "destroy-live"))
		return destroy_live();
	struct gpupool_device_stats st;

	/* virtual memory: physical memory counts from creation to release; mapping passes */
	CUmemAllocationProp prop;
	memset(&prop, 0, sizeof prop);
	prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	prop.location.id = 0;
	CUmemGenericAllocationHandle h1, h2, hx;
	CU(f.MemCreate(&h1, 16 * MB, &prop, 0));
	st = stats();
	CHECK(st.unpooled_vmm_bytes == 16 * MB && st.unpooled_bytes == 16 * MB && st.unpooled_allocs == 1);
	CHECK(st.limit_bytes == 64 * MB);
	CUdeviceptr va;
	CU(f.AddressReserve(&va, 16 * MB, 0, 0, 0));
	CU(f.Map(va, 16 * MB, 0, h1, 0));
	CUmemAccessDesc acc = {{CU_MEM_LOCATION_TYPE_DEVICE, 0}, CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
	CU(f.SetAccess(va, 16 * MB, &acc, 1));
	REFUSED(f.MemCreate(&hx, 50 * MB, &prop, 0), "cuMemCreate"); /* 16 + 50 > 64 */
	CU(f.MemCreate(&h2, 48 * MB, &prop, 0));                     /* exactly the limit */
	REFUSED(f.MemCreate(&hx, 2 * MB, &prop, 0), "cuMemCreate");
	/* the pool gets nothing either: its segment would pass the limit */
	CUdeviceptr a = 0, b = 0, x = 0;
	CUE(d.MemAlloc(&a, 2 * MB), CUDA_ERROR_OUT_OF_MEMORY);
	size_t fr = 1, tot = 0;
	CU(d.MemGetInfo(&fr, &tot));
	CHECK(tot == 64 * MB && fr == 0);
	CU(f.MemRelease(h2));
	CU(f.Unmap(va, 16 * MB));
	CU(f.AddressFree(va, 16 * MB));
	CU(f.MemRelease(h1));
	st = stats();
	CHECK(st.unpooled_vmm_bytes == 0 && st.unpooled_bytes == 0 && st.unpooled_vmm_bytes_peak == 64 * MB);
	CHECK(st.unpooled_frees == 2 && st.unpooled_refusals == 2);
	CUE(f.MemRelease(h1), CUDA_ERROR_INVALID_VALUE); /* the driver's answer; nothing given back twice */
	CHECK(stats().unpooled_frees == 2);

	/* the pool and unpooled memory share the limit */
	CU(d.MemAlloc(&a, 40 * MB)); /* a segment of exactly 40 MiB */
	REFUSED(f.MemCreate(&hx, 30 * MB, &prop, 0), "cuMemCreate");
	CU(f.MemCreate(&h1, 20 * MB, &prop, 0));
	CU(d.MemGetInfo(&fr, &tot));
	CHECK(tot == 64 * MB && fr == 4 * MB);
	CUE(d.MemAlloc(&b, 8 * MB), CUDA_ERROR_OUT_OF_MEMORY);
	CU(f.MemRelease(h1));

	/* managed and pitched, against the current context's device */
	CUdeviceptr m = 0, pt = 0;
	CU(f.AllocManaged(&m, 10 * MB, CU_MEM_ATTACH_GLOBAL));
	size_t pitch = 0;
	CU(f.AllocPitch(&pt, &pitch, 1000, 1000, 4));
	CHECK(pitch == 1024);
	st = stats();
	CHECK(st.unpooled_managed_bytes == 10 * MB && st.unpooled_pitched_bytes == 1024000);
	CHECK(st.unpooled_bytes == 10 * MB + 1024000);
	REFUSED(f.AllocManaged(&x, 14 * MB, CU_MEM_ATTACH_GLOBAL), "cuMemAllocManaged");
	REFUSED(f.AllocPitch(&x, &pitch, 14 * MB, 1, 4), "cuMemAllocPitch_v2");
	CU(d.MemFree(m));
	CU(d.MemFree(pt));
	st = stats();
	CHECK(st.unpooled_managed_bytes == 0 && st.unpooled_pitched_bytes == 0 && st.unpooled_bytes == 0);

	/* a pool the program made: its reserved bytes (2 MiB chunks in the fake) */
	CUmemPoolProps props;
	memset(&props, 0, sizeof props);
	props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
	props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	props.location.id = 0;
	CUmemoryPool pool;
	CU(f.PoolCreate(&pool, &props));
	cuuint64_t keep = UINT64_MAX, res = 0;
	CU(f.PoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &keep));
	uint64_t driver_allocs = stats().driver_allocs;
	CUdeviceptr q1 = 0, q2 = 0, q3 = 0;
	CU(f.AllocFromPool(&q1, 5 * MB, pool, 0));
	CU(f.AllocFromPool_ptsz(&q2, 3 * MB, pool, 0));
	CU(f.PoolGetAttribute(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &res));
	st = stats();
	CHECK(res == 10 * MB && st.unpooled_mempool_bytes == 10 * MB && st.unpooled_bytes == 10 * MB);
	REFUSED(f.AllocFromPool(&x, 16 * MB, pool, 0), "cuMemAllocFromPoolAsync"); /* 40 + 10 + 16 */
	/* its unused chunk trimmed first, then the allocation fits */
	CU(d.MemFreeAsync(q1, 0));
	CU(d.StreamSynchronize(0));
	CU(f.AllocFromPool(&q1, 18 * MB, pool, 0)); /* 40 + 10 + 18 > 64, 40 + 4 + 18 is not */
	CU(f.PoolGetAttribute(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &res));
	CHECK(res == 22 * MB && stats().unpooled_mempool_bytes == 22 * MB);
	/* set as the device's pool: cuMemAllocAsync goes to it, not to gpupool */
	CU(f.SetMemPool(0, pool));
	CU(d.MemAllocAsync(&q3, MB, 0));
	st = stats();
	CHECK(st.driver_allocs == driver_allocs && st.unpooled_mempool_bytes == 24 * MB);
	REFUSED(d.MemAllocAsync(&x, 2 * MB, 0), "cuMemAllocFromPoolAsync"); /* 40 + 24 + 2 */
	CU(d.MemFreeAsync(q1, 0));
	CU(d.MemFreeAsync(q2, 0));
	CU(d.MemFree(q3));
	CU(d.StreamSynchronize(0));
	CU(f.PoolDestroy(pool));
	st = stats();
	CHECK(st.unpooled_mempool_bytes == 0 && st.unpooled_bytes == 0 && st.unpooled_mempool_bytes_peak == 24 * MB);
	/* the default pool is back: pooled again */
	CU(d.MemAllocAsync(&q3, MB, 0));
	CHECK(stats().driver_allocs == driver_allocs + 1);
	CU(d.MemFreeAsync(q3, 0));
	CU(d.MemFree(a));
	return 0;
}
