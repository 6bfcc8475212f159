/* Tests of the fake CUDA driver itself (tests/fake/fakecu.c) for the allocation paths beside
 * cuMemAlloc: virtual memory (cuMemCreate, reservations, mappings), managed and pitched
 * memory, and the memory pools a program makes; each drawing from the device's capacity and
 * reachable through cuGetProcAddress. Links only against the fake driver. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <cmocka.h>

#include "fakecu.h"
#include "testproc.h"

#define MiB ((size_t)1 << 20)

static size_t dev_free(void)
{
	size_t fr = 0, tot = 0;
	assert_int_equal(cuMemGetInfo(&fr, &tot), CUDA_SUCCESS);
	return fr;
}

static int setup(void **state)
{
	(void)state;
	CUcontext c;
	assert_int_equal(cuInit(0), CUDA_SUCCESS);
	assert_int_equal(cuDevicePrimaryCtxRetain(&c, 0), CUDA_SUCCESS);
	assert_int_equal(cuCtxSetCurrent(c), CUDA_SUCCESS);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	assert_int_equal(cuCtxSynchronize(), CUDA_SUCCESS);
	assert_int_equal(gpfakecu_allocations(-1), 0);
	assert_int_equal(gpfakecu_used(0), 0);
	assert_int_equal(cuDevicePrimaryCtxRelease(0), CUDA_SUCCESS);
	return 0;
}

static CUmemAllocationProp dev_prop(int dev)
{
	CUmemAllocationProp p;
	memset(&p, 0, sizeof p);
	p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	p.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	p.location.id = dev;
	return p;
}

static void test_virtual_memory(void **state)
{
	(void)state;
	CUmemAllocationProp prop = dev_prop(0), bad = dev_prop(0);
	CUmemGenericAllocationHandle h = 0, h2 = 0;
	CUdeviceptr va = 0;
	size_t gran = 0, total = dev_free();
	assert_int_equal(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM), CUDA_SUCCESS);
	assert_int_equal(gran, 2 * MiB);
	bad.type = CU_MEM_ALLOCATION_TYPE_INVALID;
	assert_int_equal(cuMemGetAllocationGranularity(&gran, &bad, CU_MEM_ALLOC_GRANULARITY_MINIMUM), CUDA_ERROR_INVALID_VALUE);
	bad = dev_prop(5);
	assert_int_equal(cuMemCreate(&h, 2 * MiB, &bad, 0), CUDA_ERROR_INVALID_DEVICE);
	assert_int_equal(cuMemCreate(&h, MiB, &prop, 0), CUDA_ERROR_INVALID_VALUE); /* not a multiple */
	assert_int_equal(cuMemCreate(&h, 2 * MiB, &prop, 1), CUDA_ERROR_INVALID_VALUE);
	assert_int_equal(cuMemCreate(&h, total + 2 * MiB, &prop, 0), CUDA_ERROR_OUT_OF_MEMORY);
	assert_int_equal(gpfakecu_used(0), 0);

	/* physical memory counts from cuMemCreate */
	assert_int_equal(cuMemCreate(&h, 4 * MiB, &prop, 0), CUDA_SUCCESS);
	assert_int_equal(gpfakecu_used(0), 4 * MiB);
	assert_int_equal(dev_free(), total - 4 * MiB);
	CUmemAllocationProp got;
	assert_int_equal(cuMemGetAllocationPropertiesFromHandle(&got, h), CUDA_SUCCESS);
	assert_int_equal(got.type, CU_MEM_ALLOCATION_TYPE_PINNED);
	assert_int_equal(got.location.id, 0);

	/* addresses are no memory */
	assert_int_equal(cuMemAddressReserve(&va, 3 * MiB, 0, 0, 0), CUDA_ERROR_INVALID_VALUE);
	assert_int_equal(cuMemAddressReserve(&va, 8 * MiB, 0, 0, 0), CUDA_SUCCESS);
	assert_int_equal(va % (2 * MiB), 0);
	assert_int_equal(gpfakecu_used(0), 4 * MiB);

	/* map: inside the reservation, not over another mapping, no offset */
	assert_int_equal(cuMemMap(va, 4 * MiB, 2 * MiB, h, 0), CUDA_ERROR_INVALID_VALUE);
	assert_int_equal(cuMemMap(va + 6 * MiB, 4 * MiB, 0, h, 0), CUDA_ERROR_INVALID_VALUE);
	assert_int_equal(cuMemMap(va, 6 * MiB, 0, h, 0), CUDA_ERROR_INVALID_VALUE); /* larger than h */
	assert_int_equal(cuMemMap(va, 2 * MiB, 0, h, 0), CUDA_ERROR_NOT_SUPPORTED); /* part of h, as on an H100 */
	assert_int_equal(cuMemMap(va, 4 * MiB, 0, h, 0), CUDA_SUCCESS);
	assert_int_equal(cuMemMap(va + 2 * MiB, 2 * MiB, 0, h, 0), CUDA_ERROR_INVALID_VALUE);
	CUmemAccessDesc acc;
	memset(&acc, 0, sizeof acc);
	acc.location = prop.location;
	acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
	assert_int_equal(cuMemSetAccess(va, 4 * MiB, &acc, 1), CUDA_SUCCESS);
	assert_int_equal(cuMemSetAccess(va, 6 * MiB, &acc, 1), CUDA_ERROR_INVALID_VALUE); /* past it */
	assert_int_equal(cuMemSetAccess(va, 4 * MiB, &acc, 0), CUDA_ERROR_INVALID_VALUE);

	/* released while mapped: still counted until the last mapping goes */
	assert_int_equal(cuMemRelease(h), CUDA_SUCCESS);
	assert_int_equal(cuMemRelease(h), CUDA_ERROR_INVALID_VALUE);
	assert_int_equal(gpfakecu_used(0), 4 * MiB);
	assert_int_equal(cuMemAddressFree(va, 8 * MiB), CUDA_ERROR_INVALID_VALUE); /* still mapped */
	assert_int_equal(cuMemUnmap(va, 2 * MiB), CUDA_ERROR_INVALID_VALUE);        /* half a mapping */
	assert_int_equal(cuMemUnmap(va, 4 * MiB), CUDA_SUCCESS);
	assert_int_equal(gpfakecu_used(0), 0);
	assert_int_equal(cuMemUnmap(va, 4 * MiB), CUDA_ERROR_INVALID_VALUE);

	/* released when not mapped: gone at once */
	assert_int_equal(cuMemCreate(&h2, 2 * MiB, &prop, 0), CUDA_SUCCESS);
	assert_int_equal(cuMemMap(va + 6 * MiB, 2 * MiB, 0, h2, 0), CUDA_SUCCESS);
	assert_int_equal(cuMemUnmap(va, 8 * MiB), CUDA_SUCCESS);
	assert_int_equal(gpfakecu_used(0), 2 * MiB);
	assert_int_equal(cuMemRelease(h2), CUDA_SUCCESS);
	assert_int_equal(gpfakecu_used(0), 0);
	assert_int_equal(cuMemAddressFree(va, 4 * MiB), CUDA_ERROR_INVALID_VALUE);
	assert_int_equal(cuMemAddressFree(va, 8 * MiB), CUDA_SUCCESS);

	/* one capacity: cuMemAlloc and cuMemCreate share it */
	CUdeviceptr d = 0;
	assert_int_equal(cuMemAlloc(&d, total - 2 * MiB), CUDA_SUCCESS);
	assert_int_equal(cuMemCreate(&h, 4 * MiB, &prop, 0), CUDA_ERROR_OUT_OF_MEMORY);
	assert_int_equal(cuMemCreate(&h, 2 * MiB, &prop, 0), CUDA_SUCCESS);
	assert_int_equal(cuMemFree(d), CUDA_SUCCESS);
	assert_int_equal(cuMemRelease(h), CUDA_SUCCESS);
	assert_int_equal(gpfakecu_calls("cuMemCreate"), 8);
	assert_int_equal(gpfakecu_calls("cuMemRelease"), 4);
}

static void test_managed_pitched(void **state)
{
	(void)state;
	CUdeviceptr m = 0, p = 0, base = 0;
	size_t pitch = 0, size = 0, total = dev_free();
	unsigned long before = gpfakecu_calls("cuMemAllocPitch_v2");
	assert_int_equal(cuMemAllocManaged(&m, 1000, 0), CUDA_ERROR_INVALID_VALUE);
	assert_int_equal(cuMemAllocManaged(&m, 0, CU_MEM_ATTACH_GLOBAL), CUDA_ERROR_INVALID_VALUE);
	assert_int_equal(cuMemAllocManaged(&m, 1000, CU_MEM_ATTACH_GLOBAL), CUDA_SUCCESS);
	assert_int_equal(gpfakecu_used(0), 1024);
	assert_int_equal(cuMemAllocPitch(&p, &pitch, 1000, 3, 3), CUDA_ERROR_INVALID_VALUE);
	assert_int_equal(cuMemAllocPitch(&p, &pitch, 1000, 3, 4), CUDA_SUCCESS);
	assert_int_equal(pitch, 1024);
	assert_int_equal(gpfakecu_used(0), 4 * 1024);
	assert_int_equal(dev_free(), total - 4 * 1024);
	assert_int_equal(cuMemGetAddressRange(&base, &size, p + 2000), CUDA_SUCCESS);
	assert_int_equal(base, p);
	assert_int_equal(size, 3 * 1024);
	assert_int_equal(cuMemGetAddressRange(&base, &size, m + 999), CUDA_SUCCESS);
	assert_int_equal(base, m);
	assert_int_equal(size, 1000);
	assert_int_equal(cuMemsetD8(p, 1, 3 * 1024), CUDA_SUCCESS);
	assert_int_equal(cuMemAllocManaged(&m, total, CU_MEM_ATTACH_HOST), CUDA_ERROR_OUT_OF_MEMORY);
	assert_int_equal(cuMemAllocPitch(&p, &pitch, total / 2, 2, 4), CUDA_ERROR_OUT_OF_MEMORY);
	assert_int_equal(cuMemFree(m), CUDA_SUCCESS);
	assert_int_equal(cuMemFree(p), CUDA_SUCCESS);
	assert_int_equal(gpfakecu_calls("cuMemAllocPitch_v2") - before, 3);
	/* neither joins the sizes of cuMemAlloc/cuMemAllocAsync */
	size_t sizes[1];
	size_t n = gpfakecu_alloc_sizes(sizes, 1);
	CUdeviceptr d;
	assert_int_equal(cuMemAllocManaged(&d, 4096, CU_MEM_ATTACH_GLOBAL), CUDA_SUCCESS);
	assert_int_equal(gpfakecu_alloc_sizes(sizes, 1), n);
	assert_int_equal(cuMemFree(d), CUDA_SUCCESS);
}

static cuuint64_t pool_attr(CUmemoryPool pool, CUmemPool_attribute attr)
{
	cuuint64_t v = ~(cuuint64_t)0;
	assert_int_equal(cuMemPoolGetAttribute(pool, attr, &v), CUDA_SUCCESS);
	return v;
}

static void test_pools(void **state)
{
	(void)state;
	CUmemoryPool def = NULL, cur = NULL, pool = NULL, other = NULL;
	CUmemPoolProps props;
	CUstream s;
	CUdeviceptr p = 0, q = 0;
	size_t total = dev_free();
	assert_int_equal(cuDeviceGetDefaultMemPool(&def, 0), CUDA_SUCCESS);
	assert_int_equal(cuDeviceGetMemPool(&cur, 0), CUDA_SUCCESS);
	assert_ptr_equal(cur, def);
	assert_int_equal(cuMemPoolDestroy(def), CUDA_ERROR_INVALID_VALUE);
	memset(&props, 0, sizeof props);
	props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
	props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	props.location.id = 3;
	assert_int_equal(cuMemPoolCreate(&pool, &props), CUDA_ERROR_INVALID_DEVICE);
	props.location.id = 1;
	assert_int_equal(cuMemPoolCreate(&other, &props), CUDA_SUCCESS);
	props.location.id = 0;
	assert_int_equal(cuMemPoolCreate(&pool, &props), CUDA_SUCCESS);
	assert_int_equal(cuDeviceSetMemPool(0, other), CUDA_ERROR_INVALID_DEVICE);
	assert_int_equal(cuDeviceSetMemPool(0, pool), CUDA_SUCCESS);
	assert_int_equal(cuDeviceGetMemPool(&cur, 0), CUDA_SUCCESS);
	assert_ptr_equal(cur, pool);
	assert_int_equal(cuStreamCreate(&s, 0), CUDA_SUCCESS);

	assert_int_equal(cuMemAllocFromPoolAsync(&p, 1000, pool, s), CUDA_SUCCESS);
	assert_int_equal(pool_attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 2 * MiB);
	assert_int_equal(pool_attr(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT), 1024);
	assert_int_equal(gpfakecu_used(0), 2 * MiB);
	assert_int_equal(dev_free(), total - 2 * MiB);
	CUdeviceptr base;
	size_t size;
	assert_int_equal(cuMemGetAddressRange(&base, &size, p + 10), CUDA_SUCCESS);
	assert_int_equal(base, p);
	assert_int_equal(size, 1000);
	assert_int_equal(cuMemFreeAsync(p, s), CUDA_SUCCESS);
	assert_int_equal(cuStreamSynchronize(s), CUDA_SUCCESS); /* threshold 0 */
	assert_int_equal(pool_attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 0);
	assert_int_equal(gpfakecu_used(0), 0);

	cuuint64_t th = 4 * MiB, zero = 0;
	assert_int_equal(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &th), CUDA_SUCCESS);
	assert_int_equal(cuMemAllocFromPoolAsync(&p, 3 * MiB, pool, s), CUDA_SUCCESS);
	assert_int_equal(cuMemFreeAsync(p, s), CUDA_SUCCESS);
	assert_int_equal(cuCtxSynchronize(), CUDA_SUCCESS);
	assert_int_equal(pool_attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 4 * MiB);
	assert_int_equal(pool_attr(pool, CU_MEMPOOL_ATTR_USED_MEM_HIGH), 3 * MiB);
	assert_int_equal(gpfakecu_used(0), 4 * MiB);
	assert_int_equal(cuMemAlloc(&q, total - 2 * MiB), CUDA_ERROR_OUT_OF_MEMORY); /* the pool holds it */
	assert_int_equal(cuMemAllocFromPoolAsync(&p, 100, pool, s), CUDA_SUCCESS);    /* reused */
	assert_int_equal(pool_attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 4 * MiB);
	assert_int_equal(cuMemFree(p), CUDA_SUCCESS); /* cuMemFree takes pool memory too */
	assert_int_equal(cuMemPoolTrimTo(pool, 0), CUDA_SUCCESS);
	assert_int_equal(pool_attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 0);
	assert_int_equal(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_USED_MEM_HIGH, &zero), CUDA_SUCCESS);
	assert_int_equal(pool_attr(pool, CU_MEMPOOL_ATTR_USED_MEM_HIGH), 0);
	assert_int_equal(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &zero), CUDA_ERROR_INVALID_VALUE);

	/* out of memory, from the one capacity */
	assert_int_equal(cuMemAlloc(&q, total - 2 * MiB), CUDA_SUCCESS);
	assert_int_equal(cuMemAllocFromPoolAsync(&p, 2 * MiB + 1, pool, s), CUDA_ERROR_OUT_OF_MEMORY);
	assert_int_equal(cuMemAllocFromPoolAsync_ptsz(&p, 2 * MiB, pool, NULL), CUDA_SUCCESS);
	assert_int_equal(cuMemFree(q), CUDA_SUCCESS);

	/* destroyed with a live allocation: the memory goes with it */
	assert_int_equal(cuMemPoolDestroy(pool), CUDA_SUCCESS);
	assert_int_equal(cuDeviceGetMemPool(&cur, 0), CUDA_SUCCESS);
	assert_ptr_equal(cur, def);
	assert_int_equal(cuMemAllocFromPoolAsync(&q, 10, pool, s), CUDA_ERROR_INVALID_VALUE);
	assert_int_equal(gpfakecu_used(0), 2 * MiB);
	assert_int_equal(cuMemFreeAsync_ptsz(p, NULL), CUDA_SUCCESS);
	assert_int_equal(cuStreamSynchronize_ptsz(NULL), CUDA_SUCCESS);
	assert_int_equal(gpfakecu_used(0), 0);
	assert_int_equal(cuMemPoolDestroy(other), CUDA_SUCCESS);
	assert_int_equal(cuStreamDestroy(s), CUDA_SUCCESS);
	assert_int_equal(gpfakecu_calls("cuMemAllocFromPoolAsync_ptsz"), 1);

	/* a reset leaves the pools' allocations (cuda_runtime_api.h: cudaDeviceReset "will not
	 * destroy memory allocations by cudaMallocAsync() and cudaMallocFromPoolAsync()") and
	 * takes what they keep unused */
	assert_int_equal(cuMemPoolSetAttribute(def, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &th), CUDA_SUCCESS);
	assert_int_equal(cuMemAllocFromPoolAsync(&p, 100, def, NULL), CUDA_SUCCESS);
	assert_int_equal(cuMemAllocFromPoolAsync(&q, 100, def, NULL), CUDA_SUCCESS);
	assert_int_equal(cuMemFreeAsync(q, NULL), CUDA_SUCCESS);
	assert_int_equal(cuCtxSynchronize(), CUDA_SUCCESS);
	assert_int_equal(gpfakecu_used(0), 4 * MiB);
	assert_int_equal(cuDevicePrimaryCtxReset(0), CUDA_SUCCESS);
	assert_int_equal(gpfakecu_used(0), 2 * MiB);
	assert_int_equal(pool_attr(def, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 2 * MiB);
	assert_int_equal(cuMemPoolSetAttribute(def, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &zero), CUDA_SUCCESS);
	assert_int_equal(cuMemFree(p), CUDA_SUCCESS); /* after the reset, as the program may */
	assert_int_equal(cuCtxSynchronize(), CUDA_SUCCESS);   /* the threshold applies */
	assert_int_equal(gpfakecu_used(0), 0);
}

/* cuGetProcAddress (both versions) hands out every new entry point, the _v2 and per-thread
 * variants where asked, as the real driver does. */
static void test_proc_address(void **state)
{
	(void)state;
	static const char *const names[] = {
		"cuMemCreate", "cuMemRelease", "cuMemGetAllocationGranularity", "cuMemAddressReserve",
		"cuMemAddressFree", "cuMemMap", "cuMemUnmap", "cuMemSetAccess",
		"cuMemGetAllocationPropertiesFromHandle", "cuMemAllocManaged", "cuMemAllocPitch",
		"cuMemPoolCreate", "cuMemPoolDestroy", "cuDeviceGetDefaultMemPool", "cuDeviceGetMemPool",
		"cuDeviceSetMemPool", "cuMemAllocFromPoolAsync", "cuMemPoolGetAttribute",
		"cuMemPoolSetAttribute", "cuMemPoolTrimTo",
	};
	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
		void *fn = NULL;
		CUdriverProcAddressQueryResult st;
		assert_int_equal(cuGetProcAddress_v2(names[i], &fn, 13000, 0, &st), CUDA_SUCCESS);
		assert_non_null(fn);
		fn = NULL;
		assert_int_equal(cuGetProcAddress(names[i], &fn, 13000, 0), CUDA_SUCCESS);
		assert_non_null(fn);
	}
	void *fn = NULL;
	assert_int_equal(cuGetProcAddress("cuMemAllocPitch", &fn, 13000, 0), CUDA_SUCCESS);
	assert_ptr_equal(fn, (void *)(uintptr_t)cuMemAllocPitch_v2);
	assert_int_equal(cuGetProcAddress("cuMemAllocFromPoolAsync", &fn, 13000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM), CUDA_SUCCESS);
	assert_ptr_equal(fn, (void *)(uintptr_t)cuMemAllocFromPoolAsync_ptsz);
	/* and the call through it is counted like a direct one */
	CUresult (*create)(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *, unsigned long long);
	assert_int_equal(cuGetProcAddress("cuMemCreate", &fn, 13000, 0), CUDA_SUCCESS);
	memcpy(&create, &fn, sizeof create);
	unsigned long n = gpfakecu_calls("cuMemCreate");
	CUmemAllocationProp prop = dev_prop(0);
	CUmemGenericAllocationHandle h;
	assert_int_equal(create(&h, 2 * MiB, &prop, 0), CUDA_SUCCESS);
	assert_int_equal(gpfakecu_calls("cuMemCreate"), n + 1);
	assert_int_equal(cuMemRelease(h), CUDA_SUCCESS);
}

/* ---- one machine (FAKECUDA_MACHINE) for the fake runtime and the fake driver: the runtime's
 * test program (GPFAKE_TEST_RUNTIME) and this one, as children (machine_child) ---- */
/* A child's first line; it must write nothing on stderr. */
static void run_line(const char *prog, const char *const *env, const char *mode, const char *a, const char *b,
		     char *line, size_t cap)
{
	char err[4096];
	run_child(prog, env, mode, a, b, line, cap, err, sizeof err);
	assert_string_equal(err, "");
}

static void test_machine_across_fakes(void **state)
{
	(void)state;
	const char *rt = getenv("GPFAKE_TEST_RUNTIME");
	if (!rt)
		skip();
	char var[192], line[256], other[256];
	snprintf(var, sizeof var, "FAKECUDA_MACHINE=%s", machine_path("m"));
	const char *env[] = {var, "FAKECUDA_CAPACITY=8M", NULL};

	/* the runtime holds: the driver sees it, and fails with its own out-of-memory */
	struct child a = spawn(rt, env, "hold", "6M", "0");
	read_line(a.out, line, sizeof line);
	assert_string_equal(line, "held 0");
	run_line("/proc/self/exe", env, "try", "4M", "0", line, sizeof line);
	assert_string_equal(line, "free 2097152 total 8388608 rc 2"); /* CUDA_ERROR_OUT_OF_MEMORY */
	assert_int_equal(write(a.in, "f", 1), 1);
	read_line(a.out, line, sizeof line);
	assert_string_equal(line, "freed 0");
	run_line("/proc/self/exe", env, "try", "4M", "0", line, sizeof line);
	assert_string_equal(line, "free 8388608 total 8388608 rc 0");
	assert_int_equal(finish(a, NULL, 0), 0);

	/* the driver holds physical memory (cuMemCreate): the runtime sees it until the holder is
	 * killed */
	a = spawn("/proc/self/exe", env, "hold", "6M", "0");
	read_line(a.out, line, sizeof line);
	assert_string_equal(line, "held 0");
	run_line(rt, env, "try", "4M", "0", line, sizeof line);
	assert_string_equal(line, "free 2097152 total 8388608 rc 2"); /* cudaErrorMemoryAllocation */
	assert_int_equal(kill(a.pid, SIGKILL), 0);
	assert_int_equal(finish(a, NULL, 0), -SIGKILL);
	run_line(rt, env, "try", "4M", "0", line, sizeof line);
	assert_string_equal(line, "free 8388608 total 8388608 rc 0");

	/* both number the devices CUDA_VISIBLE_DEVICES shows alike, with the same UUIDs */
	snprintf(var, sizeof var, "FAKECUDA_MACHINE=%s", machine_path("v")); /* three devices */
	/* the machine's devices carry its name in bytes 8-11 (fm_uuid: FNV-1a of the path) */
	unsigned id = 2166136261u;
	for (const char *c = machine_path("v"); *c; c++)
		id = (id ^ (unsigned char)*c) * 16777619u;
	char u2[96];
	snprintf(u2, sizeof u2, "CUDA_VISIBLE_DEVICES=GPU-66616b65-6770-7500-%04x-%04x00000002", id >> 16,
		 id & 0xffff);
	const char *cvd[] = {"CUDA_VISIBLE_DEVICES=2,0", u2, "CUDA_VISIBLE_DEVICES=", NULL};
	const char *expect[] = {"n 2 rc 0 uuid 3 1", "n 1 rc 0 uuid 2", "n 0 rc 100 uuid"};
	for (int i = 0; cvd[i]; i++) {
		const char *e3[] = {var, "FAKECUDA_DEVICES=3", "FAKECUDA_CAPACITY=8M", cvd[i], NULL};
		run_line("/proc/self/exe", e3, "info", "-", "-", line, sizeof line);
		run_line(rt, e3, "info", "-", "-", other, sizeof other);
		assert_string_equal(line, expect[i]);
		assert_string_equal(other, expect[i]);
	}
}

/* The driver's side of the machine tests: "try SIZE DEV" (cuMemGetInfo, then cuMemAlloc),
 * "hold SIZE DEV" (cuMemCreate, released on 'f'), "info" (devices and UUIDs). */
static int machine_child(const char *mode, const char *a, const char *b)
{
	CUresult e = cuInit(0);
	if (strcmp(mode, "info") == 0) {
		int n = 0;
		char line[256];
		if (e == CUDA_SUCCESS && cuDeviceGetCount(&n) != CUDA_SUCCESS)
			return 1;
		int at = snprintf(line, sizeof line, "n %d rc %d uuid", n, (int)e);
		for (int d = 0; d < n; d++) {
			CUuuid u;
			if (cuDeviceGetUuid(&u, d) != CUDA_SUCCESS)
				return 1;
			at += snprintf(line + at, sizeof line - (size_t)at, " %d", u.bytes[15]);
		}
		printf("%s\n", line);
		return 0;
	}
	CUcontext c;
	int dev = atoi(b);
	size_t size = parse_size(a);
	if (e != CUDA_SUCCESS || cuDevicePrimaryCtxRetain(&c, dev) != CUDA_SUCCESS || cuCtxSetCurrent(c) != CUDA_SUCCESS)
		return 1;
	if (strcmp(mode, "try") == 0) {
		size_t fr = 0, tot = 0;
		CUdeviceptr p;
		if (cuMemGetInfo(&fr, &tot) != CUDA_SUCCESS)
			return 1;
		e = size ? cuMemAlloc(&p, size) : CUDA_SUCCESS;
		printf("free %zu total %zu rc %d\n", fr, tot, (int)e);
		return 0;
	}
	if (strcmp(mode, "hold") != 0)
		return 1;
	CUmemAllocationProp prop = dev_prop(dev);
	CUmemGenericAllocationHandle h = 0;
	printf("held %d\n", (int)cuMemCreate(&h, size, &prop, 0));
	fflush(stdout);
	char ch;
	while (read(0, &ch, 1) == 1) {
		if (ch == 'f') {
			printf("freed %d\n", (int)cuMemRelease(h));
			fflush(stdout);
		}
	}
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 5 && strcmp(argv[1], "--machine") == 0)
		return machine_child(argv[2], argv[3], argv[4]);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_virtual_memory, setup, teardown),
		cmocka_unit_test_setup_teardown(test_managed_pitched, setup, teardown),
		cmocka_unit_test_setup_teardown(test_pools, setup, teardown),
		cmocka_unit_test_setup_teardown(test_proc_address, setup, teardown),
		cmocka_unit_test_setup_teardown(test_machine_across_fakes, setup, teardown),
	};
	int rc = cmocka_run_group_tests(tests, NULL, NULL);
	machine_cleanup((const char *const[]){"m", "v", NULL});
	return rc;
}
