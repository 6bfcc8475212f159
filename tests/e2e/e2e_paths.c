/* Every allocation path of the runtime counts against the limit (limit:64M on a 256 MiB fake
 * device): managed (cudaMallocManaged), pitched (cudaMallocPitch, cudaMalloc3D) and
 * program-pool allocations (cudaMemPoolCreate + cudaMallocFromPoolAsync and its _ptsz twin,
 * cudaDeviceSetMemPool + cudaMallocAsync) are passed to the runtime, shown in the page's
 * unpooled_* figures while held, refused past the limit with cudaErrorMemoryAllocation (left
 * as the last error, the runtime not called), and share the limit with the pool both ways;
 * cudaMemGetInfo leaves them out of free. "name": the entry points as the program links them;
 * "dlsym": looked up with dlsym(RTLD_DEFAULT), as a framework loading CUDA at run time does.
 * "destroy-live": cudaMemPoolDestroy of a pool whose allocation is still live returns at once
 * and the memory stays (cuda.h): it stays counted, so a new pool cannot take the limit again,
 * until the last allocation from the destroyed pool is freed. */
#include <cuda_runtime_api.h>

#include "e2e_util.h"

#define MB ((size_t)1 << 20)

struct rt {
	cudaError_t (*MallocManaged)(void **, size_t, unsigned);
	cudaError_t (*MallocPitch)(void **, size_t *, size_t, size_t);
	cudaError_t (*Malloc3D)(struct cudaPitchedPtr *, struct cudaExtent);
	cudaError_t (*MemPoolCreate)(cudaMemPool_t *, const struct cudaMemPoolProps *);
	cudaError_t (*MemPoolDestroy)(cudaMemPool_t);
	cudaError_t (*DeviceSetMemPool)(int, cudaMemPool_t);
	cudaError_t (*MallocFromPoolAsync)(void **, size_t, cudaMemPool_t, cudaStream_t);
	cudaError_t (*MallocFromPoolAsync_ptsz)(void **, size_t, cudaMemPool_t, cudaStream_t);
	cudaError_t (*MallocAsync)(void **, size_t, cudaStream_t);
	cudaError_t (*Free)(void *);
	cudaError_t (*FreeAsync)(void *, cudaStream_t);
};

static void load(struct rt *f, int by_dlsym)
{
	if (!by_dlsym) {
		*f = (struct rt){cudaMallocManaged,   cudaMallocPitch,	      cudaMalloc3D,
				 cudaMemPoolCreate,   cudaMemPoolDestroy,     cudaDeviceSetMemPool,
				 cudaMallocFromPoolAsync, cudaMallocFromPoolAsync_ptsz, cudaMallocAsync,
				 cudaFree,	      cudaFreeAsync};
		return;
	}
#define L(field, name) E2E_FN(f->field, dlsym(RTLD_DEFAULT, name))
	L(MallocManaged, "cudaMallocManaged");
	L(MallocPitch, "cudaMallocPitch");
	L(Malloc3D, "cudaMalloc3D");
	L(MemPoolCreate, "cudaMemPoolCreate");
	L(MemPoolDestroy, "cudaMemPoolDestroy");
	L(DeviceSetMemPool, "cudaDeviceSetMemPool");
	L(MallocFromPoolAsync, "cudaMallocFromPoolAsync");
	L(MallocFromPoolAsync_ptsz, "cudaMallocFromPoolAsync_ptsz");
	L(MallocAsync, "cudaMallocAsync");
	L(Free, "cudaFree");
	L(FreeAsync, "cudaFreeAsync");
#undef L
}

/* A refusal at the limit: the runtime's out-of-memory code, left as the last error (and
 * cleared by reading it), the runtime not called, the refusal counted. */
#define REFUSED(call, fake_name)                                                            \
	do {                                                                                \
		unsigned long n_ = gpfake_calls(fake_name);                                 \
		uint64_t r_ = e2e_stats(0).unpooled_refusals;                               \
		CKE(call, cudaErrorMemoryAllocation);                                       \
		CKE(cudaGetLastError(), cudaErrorMemoryAllocation);                         \
		CKE(cudaGetLastError(), cudaSuccess);                                       \
		CHECK(gpfake_calls(fake_name) == n_);                                       \
		CHECK(e2e_stats(0).unpooled_refusals == r_ + 1);                            \
	} while (0)

static struct cudaExtent extent(size_t w, size_t h, size_t d)
{
	struct cudaExtent e = {w, h, d};
	return e;
}

static uint64_t pool_reserved(cudaMemPool_t p)
{
	uint64_t v = 0;
	CK(cudaMemPoolGetAttribute(p, cudaMemPoolAttrReservedMemCurrent, &v));
	return v;
}

/* gpupool-stat --json of this process (the tool named by E2E_STAT, where the test gives it)
 * shows the memory held outside the pool while it is held. */
static void json_shows(uint64_t managed, uint64_t pitched)
{
	const char *stat = getenv("E2E_STAT");
	if (!stat)
		return;
	char cmd[4200], want[2][96];
	snprintf(cmd, sizeof cmd, "%s --json %d", stat, (int)getpid());
	FILE *f = popen(cmd, "r");
	CHECK(f != NULL);
	static char out[1 << 16];
	size_t n = fread(out, 1, sizeof out - 1, f);
	out[n] = '\0';
	CHECK(pclose(f) == 0);
	snprintf(want[0], sizeof want[0], "\"unpooled_managed_bytes\":%llu,", (unsigned long long)managed);
	snprintf(want[1], sizeof want[1], "\"unpooled_pitched_bytes\":%llu,", (unsigned long long)pitched);
	CHECK(strstr(out, want[0]) != NULL && strstr(out, want[1]) != NULL);
}

static int destroy_live(const struct rt *f)
{
	struct cudaMemPoolProps props;
	memset(&props, 0, sizeof props);
	props.allocType = cudaMemAllocationTypePinned;
	props.location.type = cudaMemLocationTypeDevice;
	props.location.id = 0;
	for (int round = 0; round < 3; round++) {
		cudaMemPool_t pool, other;
		void *p = NULL, *x = NULL;
		CK(f->MemPoolCreate(&pool, &props));
		CK(f->MallocFromPoolAsync(&p, 48 * MB, pool, 0));
		CK(cudaStreamSynchronize(0));
		CK(f->MemPoolDestroy(pool)); /* p is still live: the runtime keeps the pool's memory */
		struct gpupool_device_stats st = e2e_stats(0);
		CHECK(st.unpooled_mempool_bytes == 48 * MB && st.unpooled_bytes == 48 * MB);
		size_t fr = 0, tot = 0;
		CK(cudaMemGetInfo(&fr, &tot));
		CHECK(tot == 64 * MB && fr == 16 * MB);
		CK(f->MemPoolCreate(&other, &props));
		REFUSED(f->MallocFromPoolAsync(&x, 48 * MB, other, 0), "cudaMallocFromPoolAsync"); /* 48 + 48 */
		CK(f->MemPoolDestroy(other));
		CK(f->Free(p)); /* the last allocation of the destroyed pool: its memory goes */
		st = e2e_stats(0);
		CHECK(st.unpooled_mempool_bytes == 0 && st.unpooled_bytes == 0);
		CHECK(gpfake_used(0) == 0);
	}
	/* two allocations: counted until the later free */
	cudaMemPool_t pool;
	void *p1 = NULL, *p2 = NULL;
	CK(f->MemPoolCreate(&pool, &props));
	CK(f->MallocFromPoolAsync(&p1, 16 * MB, pool, 0));
	CK(f->MallocFromPoolAsync(&p2, 16 * MB, pool, 0));
	CK(cudaStreamSynchronize(0));
	CK(f->MemPoolDestroy(pool));
	CK(f->Free(p1));
	CHECK(e2e_stats(0).unpooled_mempool_bytes == 32 * MB);
	CK(f->Free(p2));
	struct gpupool_device_stats st = e2e_stats(0);
	CHECK(st.unpooled_mempool_bytes == 0 && st.unpooled_bytes == 0 && st.unpooled_allocs == st.unpooled_frees);
	/* cudaDeviceReset with an allocation live, its pool destroyed before or after: the
	 * allocation survives the reset (cuda_runtime_api.h) and stays counted until it is freed */
	for (int round = 0; round < 4; round++) {
		void *q = NULL, *r = NULL, *y = NULL;
		CK(f->MemPoolCreate(&pool, &props));
		CK(f->MallocFromPoolAsync(&q, 40 * MB, pool, 0));
		CK(cudaStreamSynchronize(0));
		if (round % 2 == 0)
			CK(f->MemPoolDestroy(pool));
		CK(cudaDeviceReset());
		CK(cudaMalloc(&r, 16 * MB)); /* 40 + 16 fit the cap */
		CHECK(cudaMalloc(&y, 16 * MB) == cudaErrorMemoryAllocation); /* 40 + 16 + 16 do not */
		(void)cudaGetLastError();
		CHECK(e2e_stats(0).unpooled_mempool_bytes == 40 * MB);
		CK(f->Free(q));
		if (round % 2 != 0)
			CK(f->MemPoolDestroy(pool));
		st = e2e_stats(0);
		CHECK(st.unpooled_mempool_bytes == 0 && st.unpooled_bytes == 0);
		CK(cudaFree(r));
	}
	/* a pool that gives its memory back at a synchronize (release threshold 0): its figure is
	 * read again before a refusal at the cap */
	for (int round = 0; round < 2; round++) {
		void *q = NULL, *r = NULL;
		CK(f->MemPoolCreate(&pool, &props));
		CK(f->MallocFromPoolAsync(&q, 40 * MB, pool, 0));
		CK(cudaFreeAsync(q, 0));
		CK(cudaStreamSynchronize(0)); /* the pool gives its 40 MiB back */
		CK(round ? cudaMalloc(&r, 48 * MB) : cudaMallocManaged(&r, 48 * MB, cudaMemAttachGlobal));
		CK(cudaFree(r));
		CK(f->MemPoolDestroy(pool));
		CHECK(e2e_stats(0).unpooled_mempool_bytes == 0);
	}
	return 0;
}

int main(int argc, char **argv)
{
	e2e_shm_dir();
	CHECK(argc > 1);
	struct rt f;
	load(&f, !strcmp(argv[1], "dlsym"));
	CK(cudaFree(0));
	if (!strcmp(argv[1], "destroy-live"))
		return destroy_live(&f);
	struct gpupool_device_stats st;

	/* managed: counted by its size while held */
	void *m = NULL, *x = NULL;
	CK(f.MallocManaged(&m, 10 * MB, cudaMemAttachGlobal));
	st = e2e_stats(0);
	CHECK(st.unpooled_managed_bytes == 10 * MB && st.unpooled_bytes == 10 * MB);
	CHECK(st.unpooled_allocs == 1 && st.limit_bytes == 64 * MB);
	REFUSED(f.MallocManaged(&x, 60 * MB, cudaMemAttachGlobal), "cudaMallocManaged");

	/* pitched: pitch x rows (the fake's pitch: the width rounded to 512 bytes) */
	void *p2 = NULL;
	size_t pitch = 0;
	CK(f.MallocPitch(&p2, &pitch, 1000, 1000));
	CHECK(pitch == 1024);
	struct cudaPitchedPtr p3;
	CK(f.Malloc3D(&p3, extent(1000, 100, 10)));
	CHECK(p3.pitch == 1024);
	st = e2e_stats(0);
	CHECK(st.unpooled_pitched_bytes == 2 * 1024000);
	CHECK(st.unpooled_bytes == 10 * MB + 2 * 1024000 && st.unpooled_allocs == 3);
	json_shows(st.unpooled_managed_bytes, st.unpooled_pitched_bytes);
	REFUSED(f.MallocPitch(&x, &pitch, 60 * MB, 1), "cudaMallocPitch");
	REFUSED(f.Malloc3D(&p3, extent(1 * MB, 60, 1)), "cudaMalloc3D");

	/* the pool and the unpooled memory share the limit, both ways */
	size_t held = 10 * MB + 2 * 1024000;
	void *a = NULL, *b = NULL;
	CK(cudaMalloc(&a, 30 * MB)); /* a segment of exactly 30 MiB */
	REFUSED(f.MallocManaged(&x, 30 * MB, cudaMemAttachGlobal), "cudaMallocManaged");
	size_t fr = 0, tot = 0;
	CK(cudaMemGetInfo(&fr, &tot));
	CHECK(tot == 64 * MB && fr == 64 * MB - 30 * MB - held);
	unsigned long live = gpfake_allocations(0);
	CKE(cudaMalloc(&b, 30 * MB), cudaErrorMemoryAllocation); /* 30 + 30 + held > 64 */
	CKE(cudaGetLastError(), cudaErrorMemoryAllocation);
	CHECK(gpfake_allocations(0) == live); /* no segment taken */
	CHECK(e2e_stats(0).limit_refusals >= 1);
	CK(cudaMalloc(&b, fr)); /* what cudaMemGetInfo said is free, exactly */
	CK(cudaFree(b));

	/* frees: exact, and the peaks stay */
	CK(f.Free(m));
	CK(f.Free(p2));
	CK(f.Free(p3.ptr));
	st = e2e_stats(0);
	CHECK(st.unpooled_managed_bytes == 0 && st.unpooled_pitched_bytes == 0 && st.unpooled_bytes == 0);
	CHECK(st.unpooled_managed_bytes_peak == 10 * MB && st.unpooled_pitched_bytes_peak == 2 * 1024000);
	CHECK(st.unpooled_frees == 3);

	/* a pool the program made: its reserved bytes count (the fake reserves 2 MiB chunks) */
	cudaMemPool_t pool;
	struct cudaMemPoolProps props;
	memset(&props, 0, sizeof props);
	props.allocType = cudaMemAllocationTypePinned;
	props.location.type = cudaMemLocationTypeDevice;
	props.location.id = 0;
	CK(f.MemPoolCreate(&pool, &props));
	/* it keeps freed chunks (no release threshold): only a trim gives them back */
	uint64_t keep = UINT64_MAX;
	CK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep));
	void *q1 = NULL, *q2 = NULL, *q3 = NULL;
	uint64_t pooled_allocs = e2e_stats(0).allocs;
	CK(f.MallocFromPoolAsync(&q1, 5 * MB, pool, 0));
	CK(f.MallocFromPoolAsync_ptsz(&q2, 4 * MB, pool, 0));
	st = e2e_stats(0);
	CHECK(pool_reserved(pool) == 10 * MB && st.unpooled_mempool_bytes == 10 * MB);
	CHECK(st.unpooled_bytes == 10 * MB && st.allocs == pooled_allocs);
	/* past the limit: gpupool's cached segment (b's) goes back first, and it is not enough */
	CHECK(e2e_stats(0).reserved_bytes == 30 * MB + fr);
	REFUSED(f.MallocFromPoolAsync(&x, 30 * MB, pool, 0), "cudaMallocFromPoolAsync"); /* 30 + 10 + 30 */
	CHECK(e2e_stats(0).reserved_bytes == 30 * MB);
	/* freed chunks stay reserved (and counted) until the pool gives them back */
	CK(f.FreeAsync(q1, 0));
	CK(cudaStreamSynchronize(0));
	CHECK(pool_reserved(pool) == 10 * MB && e2e_stats(0).unpooled_mempool_bytes == 10 * MB);
	/* past the limit with unused chunks: the pool is trimmed, then the allocation fits */
	unsigned long trims = gpfake_calls("cudaMemPoolTrimTo");
	CK(f.MallocFromPoolAsync(&q1, 26 * MB, pool, 0)); /* 30 + 10 + 26 > 64, 30 + 4 + 26 is not */
	CHECK(gpfake_calls("cudaMemPoolTrimTo") == trims + 1);
	CHECK(pool_reserved(pool) == 30 * MB && e2e_stats(0).unpooled_mempool_bytes == 30 * MB);
	/* the program's pool set as the device's: cudaMallocAsync goes to it, not to gpupool */
	CK(f.DeviceSetMemPool(0, pool));
	CK(f.MallocAsync(&q3, 1 * MB, 0));
	st = e2e_stats(0);
	CHECK(st.allocs == pooled_allocs && st.unpooled_mempool_bytes == 32 * MB);
	REFUSED(f.MallocAsync(&x, 8 * MB, 0), "cudaMallocAsync"); /* 30 + 32 + 8, nothing to trim */
	CK(f.FreeAsync(q1, 0));
	CK(f.FreeAsync(q2, 0));
	CK(f.Free(q3));
	CK(f.MemPoolDestroy(pool)); /* what it counted goes back with it */
	st = e2e_stats(0);
	CHECK(st.unpooled_mempool_bytes == 0 && st.unpooled_bytes == 0);
	CHECK(st.unpooled_mempool_bytes_peak == 32 * MB);
	CHECK(st.unpooled_allocs == 3 + 4 && st.unpooled_frees == 3 + 4);
	/* the default pool is back: cudaMallocAsync is pooled again */
	CK(f.MallocAsync(&q3, 1 * MB, 0));
	CHECK(e2e_stats(0).allocs == pooled_allocs + 1);
	CK(f.FreeAsync(q3, 0));
	CK(cudaFree(a));
	return 0;
}
