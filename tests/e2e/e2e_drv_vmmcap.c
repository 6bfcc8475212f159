/* The driver's virtual memory API under a cap (one fake device, no CUDA runtime): physical
 * memory from cuMemCreate is on the device until its last handle reference is released and
 * its last mapping unmapped, whichever comes last, and counts until then.
 *   e2e_drv_vmmcap cap   NVIDIA's pattern (cuMemCreate, cuMemMap, cuMemRelease: the mapping
 *                        keeps the memory) 16 times 32 MiB under a 64 MiB cap, limit:64M or
 *                        group:FILE,group_limit:64M: the third is refused, cuMemGetInfo says
 *                        nothing is free, and the first unmap makes room again; the other
 *                        orders (unmap, then release), two mappings of one handle, one unmap
 *                        of two mappings, cuMemRetainAllocationHandle's extra reference, and a
 *                        handle exported (imported back, mapped, the original released):
 *                        counted until the process ends, as is one mapped into a sparse array.
 *   e2e_drv_vmmcap threads  threads map, release and unmap at once, through every order the
 *                        race allows: the fake's bytes never pass the cap, and everything
 *                        comes back to zero.
 *   e2e_drv_vmmcap nolimit  with no cap, cuMemCreate(SIZE_MAX) beside a live 32 MiB handle gets the
 *                        driver's own answer, and the handle's figure stays 32 MiB (it was
 *                        zeroed by a wrapped sum); nolimit-native: the same answers with
 *                        GPUPOOL_DISABLE=1.
 *   e2e_drv_vmmcap retain   cuMemAlloc served by the pool from its virtual-memory segments
 *                        (segments:vmm, limit:64M): cuMemRetainAllocationHandle on a block
 *                        is refused, as natively on cuMemAlloc's memory (retain-native, with
 *                        GPUPOOL_DISABLE=1), so no handle outlives the pool's chunks: after a
 *                        release the device holds nothing, and a limit's worth again and
 *                        again never passes the cap.
 *   e2e_drv_vmmcap range   two live 1 MiB blocks of cuMemAlloc, served by the pool from its
 *                        virtual-memory segments (segments:auto, limit:64M): cuMemUnmap,
 *                        cuMemSetAccess, cuMemAddressFree and cuMemMap on their addresses, on
 *                        their 2 MiB chunk, on the unmapped rest of the pool's reservation and
 *                        on every power-of-two size of range from the chunk up to 8 GiB each
 *                        answer CUDA_ERROR_INVALID_VALUE, as natively on cuMemAlloc's memory
 *                        (range-native, with GPUPOOL_DISABLE=1), and under gpupool never reach
 *                        the driver; the neighbour keeps its bytes, the device holds what the
 *                        pool counts, a release leaves nothing and the chunk serves again. The
 *                        program's own range, through the same entry points, is still the
 *                        driver's and counted.
 *   e2e_drv_vmmcap late   from an exit handler that runs after gpupool's (limit:64M): cuMemAlloc
 *                        and cuMemCreate still count against the cap until the process ends
 *                        (a failure ends the process with status 3).
 *   e2e_drv_vmmcap export-fails  an export that fails (a handle type the fake does not export,
 *                        as NCCL's and PyTorch's FABRIC probes meet it; rounds 0, 2, 3) and a
 *                        sparse array's mapping that fails (its first call fails: FAKECU_FAIL;
 *                        round 1) under a 64 MiB cap: nothing was exported or mapped, so after
 *                        the unmap and the release the memory is no longer counted; a limit's
 *                        worth again and again never runs out.
 *   e2e_drv_vmmcap gate   no cap, on a machine-wide device where another process waits in
 *                        the GPU's line (e2e_gate.sh): takes 2 MiB (its pool, a member of the
 *                        line), prints "ready", and on SIGUSR1 asks cuMemCreate and
 *                        cuMemAllocPitch for 64 MiB each, which the line's gate holds back:
 *                        each ends in CUDA_ERROR_OUT_OF_MEMORY or is counted, never made
 *                        uncounted.
 * Every mode runs through the exported names and through cuGetProcAddress_v2. */
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <unistd.h>

#include "e2e_drv.h"

#define MB ((size_t)1 << 20)
#define CAP (64 * MB)

struct vmm {
	CUresult (*Create)(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *, unsigned long long);
	CUresult (*Release)(CUmemGenericAllocationHandle);
	CUresult (*Reserve)(CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long);
	CUresult (*Free)(CUdeviceptr, size_t);
	CUresult (*Map)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long);
	CUresult (*Unmap)(CUdeviceptr, size_t);
	CUresult (*SetAccess)(CUdeviceptr, size_t, const CUmemAccessDesc *, size_t);
	CUresult (*Retain)(CUmemGenericAllocationHandle *, void *);
	CUresult (*Export)(void *, CUmemGenericAllocationHandle, CUmemAllocationHandleType, unsigned long long);
	CUresult (*Import)(CUmemGenericAllocationHandle *, void *, CUmemAllocationHandleType);
	CUresult (*MapArray)(CUarrayMapInfo *, unsigned, CUstream);
	size_t (*used)(int);
};

static struct e2e_drv d;
static struct vmm v;
static CUmemAllocationProp prop;

static void load(int procaddr)
{
	CUresult (*get)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *) = NULL;
	E2E_FN(get, dlsym(d.handle, "cuGetProcAddress_v2"));
	CUdriverProcAddressQueryResult st;
	void *fn;
#define LOAD_(field, name)                                       \
	fn = NULL;                                               \
	if (procaddr)                                            \
		CU(get(name, &fn, 13000, 0, &st));               \
	else                                                     \
		fn = dlsym(d.handle, name);                      \
	CHECK(fn != NULL);                                       \
	E2E_FN(v.field, fn);
	LOAD_(Create, "cuMemCreate")
	LOAD_(Release, "cuMemRelease")
	LOAD_(Reserve, "cuMemAddressReserve")
	LOAD_(Free, "cuMemAddressFree")
	LOAD_(Map, "cuMemMap")
	LOAD_(Unmap, "cuMemUnmap")
	LOAD_(SetAccess, "cuMemSetAccess")
	LOAD_(Retain, "cuMemRetainAllocationHandle")
	LOAD_(Export, "cuMemExportToShareableHandle")
	LOAD_(Import, "cuMemImportFromShareableHandle")
	LOAD_(MapArray, "cuMemMapArrayAsync")
#undef LOAD_
	E2E_FN(v.used, dlsym(d.handle, "gpfakecu_used"));
	memset(&prop, 0, sizeof prop);
	prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	prop.location.id = 0;
}

/* cuMemGetInfo's free (bytes). */
static size_t info_free(void)
{
	size_t fr = 0, tot = 0;
	CU(d.MemGetInfo(&fr, &tot));
	CHECK(tot == CAP);
	return fr;
}

/* A reservation of `size` bytes with `h` mapped in it, made accessible. */
static CUdeviceptr mapped(CUmemGenericAllocationHandle h, size_t size)
{
	CUdeviceptr va = 0;
	CU(v.Reserve(&va, size, 0, 0, 0));
	CU(v.Map(va, size, 0, h, 0));
	CUmemAccessDesc acc = {{CU_MEM_LOCATION_TYPE_DEVICE, 0}, CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
	CU(v.SetAccess(va, size, &acc, 1));
	return va;
}

/* A map of handle h into level 0 of a sparse array (the fake takes any array handle) */
static CUarrayMapInfo array_map(CUmemGenericAllocationHandle h)
{
	CUarrayMapInfo mi;
	memset(&mi, 0, sizeof mi);
	mi.resourceType = CU_RESOURCE_TYPE_ARRAY;
	mi.resource.array = (CUarray)(uintptr_t)0x5000;
	mi.subresourceType = CU_ARRAY_SPARSE_SUBRESOURCE_TYPE_SPARSE_LEVEL;
	mi.memOperationType = CU_MEM_OPERATION_TYPE_MAP;
	mi.memHandleType = CU_MEM_HANDLE_TYPE_GENERIC;
	mi.memHandle.memHandle = h;
	return mi;
}

static uint64_t vmm_bytes(void) { return e2e_stats(0).unpooled_vmm_bytes; }

static int cap(void)
{
	/* NVIDIA's pattern: create, map, release; the mapping keeps the memory */
	CUmemGenericAllocationHandle h;
	CUdeviceptr va[16];
	int made = 0;
	for (int i = 0; i < 16; i++) {
		CUresult e = v.Create(&h, 32 * MB, &prop, 0);
		if (e == CUDA_ERROR_OUT_OF_MEMORY)
			break;
		CU(e);
		va[made++] = mapped(h, 32 * MB);
		CU(v.Release(h));
	}
	printf("16 x 32 MiB mapped and released under a 64 MiB cap: %d made, the device holds %zu MiB\n", made,
	       v.used(0) / MB);
	CHECK(made == 2);
	CHECK(v.used(0) == CAP && vmm_bytes() == CAP);
	CHECK(info_free() == 0);
	/* the pool gets nothing either */
	CUdeviceptr p = 0;
	CUE(d.MemAlloc(&p, MB), CUDA_ERROR_OUT_OF_MEMORY);
	/* the first unmap makes the memory gone, and the room back */
	CU(v.Unmap(va[0], 32 * MB));
	CHECK(vmm_bytes() == 32 * MB && info_free() == 32 * MB);
	CU(v.Create(&h, 32 * MB, &prop, 0));
	CU(v.Unmap(va[1], 32 * MB)); /* the other order: unmapped first, counted until released */
	CHECK(vmm_bytes() == 32 * MB);
	CU(v.Release(h));
	CHECK(vmm_bytes() == 0 && info_free() == CAP && v.used(0) == 0);
	CU(v.Free(va[0], 32 * MB));
	CU(v.Free(va[1], 32 * MB));

	/* two mappings of one handle: gone with the last */
	CU(v.Create(&h, 32 * MB, &prop, 0));
	CUdeviceptr a = mapped(h, 32 * MB), b = mapped(h, 32 * MB);
	CU(v.Release(h));
	CU(v.Unmap(a, 32 * MB));
	CHECK(vmm_bytes() == 32 * MB);
	CU(v.Unmap(b, 32 * MB));
	CHECK(vmm_bytes() == 0 && v.used(0) == 0);
	CU(v.Free(a, 32 * MB));
	CU(v.Free(b, 32 * MB));

	/* one unmap of two mappings side by side, of two handles */
	CUmemGenericAllocationHandle h1, h2;
	CU(v.Create(&h1, 16 * MB, &prop, 0));
	CU(v.Create(&h2, 16 * MB, &prop, 0));
	CUdeviceptr r = 0;
	CU(v.Reserve(&r, 32 * MB, 0, 0, 0));
	CU(v.Map(r, 16 * MB, 0, h1, 0));
	CU(v.Map(r + 16 * MB, 16 * MB, 0, h2, 0));
	CU(v.Release(h1));
	CU(v.Release(h2));
	CHECK(vmm_bytes() == 32 * MB && info_free() == 32 * MB);
	CU(v.Unmap(r, 32 * MB));
	CHECK(vmm_bytes() == 0 && v.used(0) == 0);

	/* cuMemRetainAllocationHandle: a reference more, released on its own */
	CU(v.Create(&h, 32 * MB, &prop, 0));
	CU(v.Map(r, 32 * MB, 0, h, 0));
	CU(v.Release(h));
	CUmemGenericAllocationHandle back = 0;
	CU(v.Retain(&back, (void *)(uintptr_t)(r + 4 * MB)));
	CHECK(back == h);
	CU(v.Unmap(r, 32 * MB));
	CHECK(vmm_bytes() == 32 * MB && v.used(0) == 32 * MB); /* the retained reference holds it */
	CUmemGenericAllocationHandle hx;
	CU(v.Create(&hx, 32 * MB, &prop, 0));
	CUE(v.Create(&hx, 2 * MB, &prop, 0), CUDA_ERROR_OUT_OF_MEMORY);
	CU(v.Release(hx));
	CU(v.Release(back));
	CHECK(vmm_bytes() == 0 && v.used(0) == 0);
	CUE(v.Release(back), CUDA_ERROR_INVALID_VALUE); /* the driver's answer; nothing given twice */
	struct gpupool_device_stats st = e2e_stats(0);
	CHECK(st.unpooled_bytes == 0 && st.unpooled_vmm_bytes_peak == CAP);
	CHECK(st.unpooled_allocs == st.unpooled_frees);

	/* exported: a handle imported from it (here, back into this process) holds the memory
	 * where gpupool cannot follow, so it stays counted for the rest of the process */
	CU(v.Create(&h, 32 * MB, &prop, 0));
	int fd = -1;
	CU(v.Export(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
	CUmemGenericAllocationHandle imported = 0;
	CU(v.Import(&imported, (void *)(intptr_t)fd, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
	CU(v.Map(r, 32 * MB, 0, imported, 0));
	CU(v.Release(h));
	CHECK(v.used(0) == 32 * MB && vmm_bytes() == 32 * MB);
	CUE(v.Create(&hx, 48 * MB, &prop, 0), CUDA_ERROR_OUT_OF_MEMORY); /* 32 still held */
	CU(v.Unmap(r, 32 * MB));
	CU(v.Release(imported));
	CHECK(v.used(0) == 0 && vmm_bytes() == 32 * MB); /* counted until the process ends */
	CU(v.Free(r, 32 * MB));

	/* mapped into a sparse array, released: the array holds the memory (its unmap names the
	 * array, not the handle), so it is counted until the process ends */
	CU(v.Create(&h, 16 * MB, &prop, 0));
	CUarrayMapInfo mi = array_map(h);
	CU(v.MapArray(&mi, 1, 0));
	CU(v.Release(h));
	CHECK(v.used(0) == 16 * MB && vmm_bytes() == 48 * MB);
	CUE(v.Create(&hx, 32 * MB, &prop, 0), CUDA_ERROR_OUT_OF_MEMORY);
	mi.memOperationType = CU_MEM_OPERATION_TYPE_UNMAP;
	CU(v.MapArray(&mi, 1, 0));
	CHECK(v.used(0) == 0);
	return 0;
}

/* Each thread on its own 8 MiB address range: create, map, then release and unmap in
 * either order, or both at once from two threads. */
#define THREADS 4
#define ROUNDS 400
static _Atomic int over;
static _Atomic unsigned long made, refused;

struct pair {
	CUmemGenericAllocationHandle h;
	CUdeviceptr va;
	pthread_barrier_t go;
	int stop;
};

static void *releaser(void *arg)
{
	struct pair *p = arg;
	CU(d.CtxSetCurrent(d.primary[0]));
	for (;;) {
		pthread_barrier_wait(&p->go);
		if (p->stop)
			return NULL;
		CU(v.Release(p->h));
		pthread_barrier_wait(&p->go);
	}
}

static void *worker(void *arg)
{
	unsigned i = (unsigned)(uintptr_t)arg;
	CU(d.CtxSetCurrent(d.primary[0]));
	struct pair p = {.stop = 0};
	CHECK(pthread_barrier_init(&p.go, NULL, 2) == 0);
	pthread_t rel;
	CHECK(pthread_create(&rel, NULL, releaser, &p) == 0);
	CU(v.Reserve(&p.va, 24 * MB, 0, 0, 0));
	for (int r = 0; r < ROUNDS; r++) {
		CUresult e = v.Create(&p.h, 24 * MB, &prop, 0);
		if (e == CUDA_ERROR_OUT_OF_MEMORY) {
			atomic_fetch_add(&refused, 1);
			continue;
		}
		CU(e);
		atomic_fetch_add(&made, 1);
		CU(v.Map(p.va, 24 * MB, 0, p.h, 0));
		if (v.used(0) > CAP)
			atomic_fetch_add(&over, 1);
		switch ((i + (unsigned)r) % 3) {
		case 0:
			CU(v.Release(p.h));
			CU(v.Unmap(p.va, 24 * MB));
			break;
		case 1:
			CU(v.Unmap(p.va, 24 * MB));
			CU(v.Release(p.h));
			break;
		default: /* both at once */
			pthread_barrier_wait(&p.go);
			CU(v.Unmap(p.va, 24 * MB));
			pthread_barrier_wait(&p.go);
			break;
		}
		if (v.used(0) > CAP)
			atomic_fetch_add(&over, 1);
	}
	p.stop = 1;
	pthread_barrier_wait(&p.go);
	pthread_join(rel, NULL);
	CU(v.Free(p.va, 24 * MB));
	return NULL;
}

static int threads(void)
{
	e2e_run_threads(THREADS, worker);
	printf("%lu made, %lu refused, the cap passed %d times\n", atomic_load(&made), atomic_load(&refused),
	       atomic_load(&over));
	CHECK(atomic_load(&over) == 0 && atomic_load(&made) > 0 && atomic_load(&refused) > 0);
	CHECK(vmm_bytes() == 0 && v.used(0) == 0);
	return 0;
}

static int nolimit(bool native)
{
	CUmemGenericAllocationHandle h, hx;
	CU(v.Create(&h, 32 * MB, &prop, 0));
	CHECK(native || vmm_bytes() == 32 * MB);
	/* the fake driver's answers, as without gpupool: not a multiple of the granularity, then
	 * more than the device */
	CUE(v.Create(&hx, SIZE_MAX, &prop, 0), CUDA_ERROR_INVALID_VALUE);
	CUE(v.Create(&hx, SIZE_MAX & ~(2 * MB - 1), &prop, 0), CUDA_ERROR_OUT_OF_MEMORY);
	if (native) { /* GPUPOOL_DISABLE=1: what the driver answers alone */
		CU(v.Release(h));
		return 0;
	}
	struct gpupool_device_stats st = e2e_stats(0);
	CHECK(st.unpooled_vmm_bytes == 32 * MB && st.unpooled_bytes == 32 * MB);
	CU(v.Release(h));
	CHECK(vmm_bytes() == 0);
	return 0;
}

static int retain(bool native)
{
	long long (*rel)(int) = NULL;
	if (!native)
		E2E_API(rel, "gpupool_release");
	for (int round = 0; round < 4; round++) {
		CUdeviceptr p[16];
		int n = 0;
		while (n < 16 && d.MemAlloc(&p[n], 4 * MB) == CUDA_SUCCESS)
			n++;
		CHECK(native ? n == 16 : n >= 12 && v.used(0) <= CAP); /* most of the cap is served */
		for (int i = 0; i < n; i++) {
			CUmemGenericAllocationHandle h = 0;
			CUE(v.Retain(&h, (void *)(uintptr_t)(p[i] + 2 * MB)), CUDA_ERROR_INVALID_VALUE);
			CUE(v.Retain(&h, (void *)(uintptr_t)p[i]), CUDA_ERROR_INVALID_VALUE);
		}
		for (int i = 0; i < n; i++)
			CU(d.MemFree(p[i]));
		CU(d.CtxSynchronize());
		if (!native) {
			CHECK(rel(0) >= 0);
			CHECK(v.used(0) == 0);
		}
		CHECK(v.used(0) <= CAP);
	}
	return 0;
}

/* A call on the pool's memory: CUDA_ERROR_INVALID_VALUE, as natively on cuMemAlloc's. Every
 * one is tried (the count of wrong answers decides), so that a run shows each call that got
 * through. */
#define NOT_OURS(call)                                                                              \
	do {                                                                                        \
		CUresult e_ = (call);                                                               \
		if (e_ != CUDA_ERROR_INVALID_VALUE) {                                               \
			fprintf(stderr, "%s:%d: %s -> CUresult %d, expected %d\n", __FILE__, __LINE__, \
				#call, (int)e_, (int)CUDA_ERROR_INVALID_VALUE);                      \
			wrong++;                                                                    \
		}                                                                                   \
	} while (0)

static int range(bool native)
{
	const size_t G = 2 * MB; /* the fake's granularity */
	static const char *const vmm_calls[] = {"cuMemUnmap", "cuMemSetAccess", "cuMemAddressFree", "cuMemMap"};
	unsigned long before[4];
	int wrong = 0;
	CUdeviceptr a, b;
	CU(d.MemAlloc(&a, MB));
	CU(d.MemAlloc(&b, MB));
	CU(d.MemsetD8(b, 0x5a, MB));
	CU(d.CtxSynchronize());
	CUdeviceptr chunk = a & ~(CUdeviceptr)(G - 1);
	printf("blocks at 0x%llx and 0x%llx, chunk 0x%llx\n", (unsigned long long)a, (unsigned long long)b,
	       (unsigned long long)chunk);
	for (int i = 0; i < 4; i++) /* the pool's own chunk maps and access: counted apart */
		before[i] = d.calls(vmm_calls[i]);

	CUmemAccessDesc rw = {{CU_MEM_LOCATION_TYPE_DEVICE, 0}, CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
	NOT_OURS(v.SetAccess(chunk, G, &rw, 1));
	NOT_OURS(v.SetAccess(a, MB, &rw, 1));
	NOT_OURS(v.SetAccess(b, MB, &rw, 1));
	/* a handle of the program's mapped onto the pool's reservation, past its chunk */
	CUmemGenericAllocationHandle h = 0;
	CU(v.Create(&h, G, &prop, 0));
	NOT_OURS(v.Map(chunk + G, G, 0, h, 0));
	NOT_OURS(v.Map(chunk + 8 * G, G, 0, h, 0));
	CU(v.Release(h));
	NOT_OURS(v.Unmap(a, MB));
	NOT_OURS(v.Unmap(b, MB));
	NOT_OURS(v.Unmap(chunk, G));
	for (size_t size = G; size <= ((size_t)8 << 30); size *= 2)
		NOT_OURS(v.Free(chunk, size));
	NOT_OURS(v.Free(a, MB));
	if (!native) {
		for (int i = 0; i < 4; i++)
			if (d.calls(vmm_calls[i]) != before[i]) {
				fprintf(stderr, "%s reached the driver %lu times on the pool's memory\n", vmm_calls[i],
					d.calls(vmm_calls[i]) - before[i]);
				wrong++;
			}
	}

	/* the neighbour is intact, and the pool still has what it counts */
	unsigned char c = 0;
	CUresult e = d.MemcpyDtoH(&c, b, 1);
	if (e != CUDA_SUCCESS || c != 0x5a) {
		fprintf(stderr, "the neighbouring block: cuMemcpyDtoH -> %d, byte 0x%02x (wrote 0x5a)\n", (int)e, c);
		wrong++;
	} else if (!e2e_drv_all(&d, b, MB, 0x5a)) {
		wrong++;
	}
	if (!native && e2e_stats(0).reserved_bytes != v.used(0)) {
		fprintf(stderr, "the pool counts %llu bytes, the device holds %zu\n",
			(unsigned long long)e2e_stats(0).reserved_bytes, v.used(0));
		wrong++;
	}
	CU(d.MemFree(a));
	CU(d.MemFree(b));
	CU(d.CtxSynchronize());
	/* freed, the blocks are still not the program's mapping */
	NOT_OURS(v.Unmap(chunk, G));
	NOT_OURS(v.SetAccess(chunk, G, &rw, 1));
	if (!native) {
		long long (*rel)(int) = NULL;
		E2E_API(rel, "gpupool_release");
		if (rel(0) < 0 || v.used(0) != 0) {
			fprintf(stderr, "after a release the device holds %zu bytes\n", v.used(0));
			wrong++;
		}
	}
	e = d.MemAlloc(&a, MB);
	if (e != CUDA_SUCCESS || d.MemsetD8(a, 1, MB) != CUDA_SUCCESS || !e2e_drv_all(&d, a, MB, 1)) {
		fprintf(stderr, "a block after them: cuMemAlloc -> %d, not usable\n", (int)e);
		wrong++;
	} else {
		CU(d.MemFree(a));
	}

	/* the program's own range: the driver's, counted while mapped */
	CUdeviceptr va = 0;
	CU(v.Reserve(&va, 2 * G, 0, 0, 0));
	CU(v.Create(&h, G, &prop, 0));
	CU(v.Map(va + G, G, 0, h, 0));
	CU(v.SetAccess(va + G, G, &rw, 1));
	CU(v.Release(h));
	CHECK(native || vmm_bytes() == G);
	CUE(v.Unmap(va, G), CUDA_ERROR_INVALID_VALUE); /* nothing mapped there: the driver's own answer */
	CU(v.Unmap(va + G, G));
	CU(v.Free(va, 2 * G));
	CHECK(native || vmm_bytes() == 0);
	if (wrong)
		fprintf(stderr, "%d wrong answers\n", wrong);
	return wrong ? 1 : 0;
}

static int export_fails(void)
{
	for (int round = 0; round < 4; round++) {
		CUmemGenericAllocationHandle h;
		CU(v.Create(&h, 32 * MB, &prop, 0));
		int fd = -1;
		if (round != 1)
			CHECK(v.Export(&fd, h, CU_MEM_HANDLE_TYPE_FABRIC, 0) != CUDA_SUCCESS);
		CUarrayMapInfo mi = array_map(h);
		if (round == 1)
			CHECK(v.MapArray(&mi, 1, 0) != CUDA_SUCCESS); /* FAKECU_FAIL: the first call */
		CUdeviceptr va = mapped(h, 32 * MB);
		CU(v.Unmap(va, 32 * MB));
		CU(v.Release(h));
		CU(v.Free(va, 32 * MB));
		printf("round %d: the device holds %zu MiB, %llu MiB counted\n", round, v.used(0) / MB,
		       (unsigned long long)(vmm_bytes() / MB));
		CHECK(v.used(0) == 0 && vmm_bytes() == 0 && info_free() == CAP);
	}
	/* the cap's worth once more: nothing was left counted */
	CUmemGenericAllocationHandle a, b;
	CU(v.Create(&a, 32 * MB, &prop, 0));
	CU(v.Create(&b, 32 * MB, &prop, 0));
	CU(v.Release(a));
	CU(v.Release(b));
	return 0;
}

static volatile sig_atomic_t gate_go;
static void on_gate_go(int sig) { (void)sig, gate_go = 1; }

static int gate(void)
{
	CUresult (*pitch_fn)(CUdeviceptr *, size_t *, size_t, size_t, unsigned) = NULL;
	E2E_FN(pitch_fn, dlsym(d.handle, "cuMemAllocPitch_v2"));
	CHECK(pitch_fn != NULL);
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_gate_go;
	CHECK(sigaction(SIGUSR1, &sa, NULL) == 0);
	CUdeviceptr p;
	CU(d.MemAlloc(&p, 2 * MB)); /* the pool and its page: a member of the GPU's line */
	printf("ready\n");
	fflush(stdout);
	for (int i = 0; i < 20000 && !gate_go; i++)
		usleep(1000);
	CHECK(gate_go);
	CUmemGenericAllocationHandle h;
	CUresult e = v.Create(&h, 64 * MB, &prop, 0);
	printf("cuMemCreate(64 MiB): %d, %llu MiB counted\n", (int)e, (unsigned long long)(vmm_bytes() / MB));
	fflush(stdout);
	CHECK(e == CUDA_ERROR_OUT_OF_MEMORY || (e == CUDA_SUCCESS && vmm_bytes() == 64 * MB));
	if (e == CUDA_SUCCESS)
		CU(v.Release(h));
	CUdeviceptr q = 0;
	size_t pitch = 0;
	e = pitch_fn(&q, &pitch, 8 * MB, 8, 4);
	uint64_t pitched = e2e_stats(0).unpooled_pitched_bytes;
	printf("cuMemAllocPitch(8 MiB x 8): %d, %llu MiB counted\n", (int)e, (unsigned long long)(pitched / MB));
	CHECK(e == CUDA_ERROR_OUT_OF_MEMORY || (e == CUDA_SUCCESS && pitched == pitch * 8));
	if (e == CUDA_SUCCESS)
		CU(d.MemFree(q));
	CU(d.MemFree(p));
	return 0;
}

static void late_expect(bool ok, const char *what)
{
	if (!ok) {
		fprintf(stderr, "after exit began: %s\n", what);
		fflush(stderr);
		_exit(3);
	}
}

static void late_handler(void)
{
	CUdeviceptr p[16];
	int n = 0;
	while (n < 16 && d.MemAlloc(&p[n], 16 * MB) == CUDA_SUCCESS)
		n++;
	fprintf(stderr, "after exit began: %d x 16 MiB served by cuMemAlloc under limit:64M\n", n);
	late_expect(n >= 2 && n <= 3, "the cap did not hold for cuMemAlloc");
	CUmemGenericAllocationHandle h;
	late_expect(v.Create(&h, 32 * MB, &prop, 0) == CUDA_ERROR_OUT_OF_MEMORY, "the cap did not hold for cuMemCreate");
	late_expect(v.used(0) <= CAP, "the device holds more than the cap");
}

static int late(void)
{
	CHECK(atexit(late_handler) == 0);
	CUdeviceptr p;
	CU(d.MemAlloc(&p, MB)); /* the pool, and gpupool's exit handler after ours */
	return 0;
}

int main(int argc, char **argv)
{
	e2e_shm_dir();
	CHECK(argc > 2);
	const char *group = getenv("E2E_GROUP_FILE");
	if (group)
		(void)unlink(group); /* a file of an earlier run */
	e2e_drv_load(&d, !strcmp(argv[2], "procaddr"));
	load(!strcmp(argv[2], "procaddr"));
	if (!strcmp(argv[1], "cap"))
		return cap();
	if (!strcmp(argv[1], "threads"))
		return threads();
	if (!strcmp(argv[1], "late"))
		return late();
	if (!strcmp(argv[1], "export-fails"))
		return export_fails();
	if (!strcmp(argv[1], "gate"))
		return gate();
	if (!strcmp(argv[1], "retain") || !strcmp(argv[1], "retain-native"))
		return retain(!strcmp(argv[1], "retain-native"));
	if (!strcmp(argv[1], "range") || !strcmp(argv[1], "range-native"))
		return range(!strcmp(argv[1], "range-native"));
	if (!strcmp(argv[1], "nolimit") || !strcmp(argv[1], "nolimit-native"))
		return nolimit(!strcmp(argv[1], "nolimit-native"));
	return 2;
}
