/* Driver entry points handed out by the CUDA runtime (cudaGetDriverEntryPoint,
 * cudaGetDriverEntryPointByVersion and their _ptsz forms), as PyTorch's driver table
 * (c10/cuda/driver_api.cpp, get_symbol) and TransformerEngine take them. The program links
 * the fake runtime built on the fake driver (tests/fake/ondriver, first in LD_LIBRARY_PATH),
 * which asks the driver's cuGetProcAddress_v2 for them as libcudart does; gpupool's dlsym
 * gives that runtime the driver's own, so without gpupool's cudaGetDriverEntryPoint the
 * program would get the driver's cuMemCreate and allocate past every limit.
 *   torch   (limit:64M) PyTorch's expandable segments: cuMemCreate/cuMemMap pages of 8 MiB
 *           into one reserved range until refused at the limit, with the driver not called
 *           for the refused one; the page, gpupool-stat --json (E2E_STAT) and the release
 *           thread's socket show the process; the runtime's cudaMalloc shares the limit;
 *           "empty_cache" (cuMemUnmap + cuMemRelease) gives everything back
 *   names   every name the driver layer interposes comes back as gpupool's entry point (the
 *           _v2 and per-thread variants as the flags and version pick them), every other
 *           name as the runtime alone answers; dlmopen(LM_ID_BASE) is dlopen's handle, and
 *           dlvsym finds no driver name (libcuda's names are unversioned)
 *   bad     a NULL pointer, an unknown name, a version past the driver's, one before a
 *           name's, bad flags: exactly the runtime's own answer (code, pointer, status,
 *           last error), compared with the fake runtime called directly
 *   seen PATH  a process whose only device memory is one unpooled path (vmm: cuMemCreate
 *           from cudaGetDriverEntryPoint; managed; pitched; mempool: a pool the program
 *           made) has its page, its line in gpupool-stat --json and its release thread */
#define CUDA_ENABLE_DEPRECATED /* cudaGetDriverEntryPoint is deprecated in CUDA 13 */
#include <dlfcn.h>
#include <link.h>
#include <sys/stat.h>

#include "e2e_drv.h"

#define MB ((size_t)1 << 20)
#define PAGE (8 * MB)

typedef cudaError_t (*entry_fn)(const char *, void **, unsigned long long, enum cudaDriverEntryPointQueryResult *);
typedef cudaError_t (*entry_v_fn)(const char *, void **, unsigned, unsigned long long,
				  enum cudaDriverEntryPointQueryResult *);

/* Is `fn` gpupool's (in libgpupool.so)? */
static int is_ours(void *fn)
{
	Dl_info info;
	CHECK(fn && dladdr(fn, &info) && info.dli_fname);
	return strstr(info.dli_fname, "libgpupool") != NULL;
}

/* PyTorch's get_symbol: the entry point by version first, the unversioned call after. */
static void *get_symbol(const char *name, unsigned version)
{
	void *out = NULL;
	enum cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
	if (cudaGetDriverEntryPointByVersion(name, &out, version, cudaEnableDefault, &q) == cudaSuccess &&
	    q == cudaDriverEntryPointSuccess && out)
		return out;
	if (cudaGetDriverEntryPoint(name, &out, cudaEnableDefault, &q) == cudaSuccess && q == cudaDriverEntryPointSuccess &&
	    out)
		return out;
	fprintf(stderr, "no entry point for %s\n", name);
	exit(1);
}

/* PyTorch's DriverAPI table, the part expandable segments use. */
static struct {
	CUresult (*MemCreate)(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *, unsigned long long);
	CUresult (*MemRelease)(CUmemGenericAllocationHandle);
	CUresult (*AddressReserve)(CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long);
	CUresult (*AddressFree)(CUdeviceptr, size_t);
	CUresult (*Map)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long);
	CUresult (*Unmap)(CUdeviceptr, size_t);
	CUresult (*SetAccess)(CUdeviceptr, size_t, const CUmemAccessDesc *, size_t);
	CUresult (*Granularity)(size_t *, const CUmemAllocationProp *, CUmemAllocationGranularity_flags);
} T;

static void load_table(void)
{
	E2E_FN(T.MemCreate, get_symbol("cuMemCreate", 12000));
	E2E_FN(T.MemRelease, get_symbol("cuMemRelease", 12000));
	E2E_FN(T.AddressReserve, get_symbol("cuMemAddressReserve", 12000));
	E2E_FN(T.AddressFree, get_symbol("cuMemAddressFree", 12000));
	E2E_FN(T.Map, get_symbol("cuMemMap", 12000));
	E2E_FN(T.Unmap, get_symbol("cuMemUnmap", 12000));
	E2E_FN(T.SetAccess, get_symbol("cuMemSetAccess", 12000));
	E2E_FN(T.Granularity, get_symbol("cuMemGetAllocationGranularity", 12000));
}

static unsigned long driver_calls(const char *name)
{
	void *cu = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
	CHECK(cu != NULL);
	unsigned long (*calls)(const char *);
	E2E_FN(calls, dlsym(cu, "gpfakecu_calls"));
	dlclose(cu);
	return calls(name);
}

/* gpupool-stat --json of this process (the tool named by E2E_STAT) holds `want`. */
static void json_has(const char *want)
{
	const char *stat = getenv("E2E_STAT");
	CHECK(stat != NULL);
	char cmd[4200];
	snprintf(cmd, sizeof cmd, "%s --json %d", stat, (int)getpid());
	FILE *f = popen(cmd, "r");
	CHECK(f != NULL);
	static char out[1 << 16];
	size_t n = fread(out, 1, sizeof out - 1, f);
	out[n] = '\0';
	CHECK(pclose(f) == 0);
	if (!strstr(out, want)) {
		fprintf(stderr, "gpupool-stat --json %d lacks %s:\n%s\n", (int)getpid(), want, out);
		exit(1);
	}
}

/* The release thread listens on its socket (@gpupool.<pid namespace>.<pid>, in
 * /proc/net/unix) within 2 s of the first device memory. */
static void release_thread_listens(void)
{
	struct stat ns;
	CHECK(stat("/proc/self/ns/pid", &ns) == 0);
	char want[96];
	snprintf(want, sizeof want, "@gpupool.%lu.%d\n", (unsigned long)ns.st_ino, (int)getpid());
	for (int i = 0; i < 200; i++) {
		FILE *f = fopen("/proc/net/unix", "r");
		CHECK(f != NULL);
		char line[512];
		int found = 0;
		while (!found && fgets(line, sizeof line, f))
			found = strstr(line, want) != NULL;
		fclose(f);
		if (found)
			return;
		e2e_sleep_ms(10);
	}
	fprintf(stderr, "no socket %s", want);
	exit(1);
}

static CUmemAllocationProp device_prop(void)
{
	CUmemAllocationProp prop;
	memset(&prop, 0, sizeof prop);
	prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	prop.location.id = 0;
	return prop;
}

static int torch(void)
{
	CK(cudaFree(0)); /* torch.cuda.init() */
	load_table();
	CHECK(is_ours((void *)(uintptr_t)T.MemCreate) && is_ours((void *)(uintptr_t)T.MemRelease));
	/* mapping keeps the memory counted past cuMemRelease: gpupool's too (docs/driver.md) */
	CHECK(is_ours((void *)(uintptr_t)T.Map) && is_ours((void *)(uintptr_t)T.Unmap));
	CUmemAllocationProp prop = device_prop();
	size_t gran = 0;
	CHECK(T.Granularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED) == CUDA_SUCCESS && PAGE % gran == 0);
	CUdeviceptr base = 0;
	size_t span = 32 * PAGE;
	CU(T.AddressReserve(&base, span, 0, 0, 0));
	CUmemAccessDesc acc = {{CU_MEM_LOCATION_TYPE_DEVICE, 0}, CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
	CUmemGenericAllocationHandle h[32];
	int n = 0;
	CUresult e = CUDA_SUCCESS;
	/* the segment grows a page at a time until the limit says no */
	while (n < 32) {
		unsigned long before = driver_calls("cuMemCreate");
		e = T.MemCreate(&h[n], PAGE, &prop, 0);
		if (e != CUDA_SUCCESS) {
			CHECK(driver_calls("cuMemCreate") == before); /* refused before the driver */
			break;
		}
		CU(T.Map(base + (CUdeviceptr)n * PAGE, PAGE, 0, h[n], 0));
		CU(T.SetAccess(base + (CUdeviceptr)n * PAGE, PAGE, &acc, 1));
		n++;
	}
	CUE(e, CUDA_ERROR_OUT_OF_MEMORY);
	CHECK(n == 8); /* 64 MiB */
	struct gpupool_device_stats st = e2e_stats(0);
	CHECK(st.limit_bytes == 64 * MB && st.unpooled_vmm_bytes == 64 * MB && st.unpooled_bytes == 64 * MB);
	CHECK(st.unpooled_allocs == 8 && st.unpooled_refusals == 1);
	CHECK(e2e_page_exists(getpid()));
	release_thread_listens();
	char want[96];
	snprintf(want, sizeof want, "\"unpooled_vmm_bytes\":%zu,", 64 * MB);
	json_has(want);
	/* the runtime's own allocations share the limit; what it reports is what is left */
	size_t fr = 1, tot = 0;
	CK(cudaMemGetInfo(&fr, &tot));
	CHECK(tot == 64 * MB && fr == 0);
	void *x = NULL;
	CKE(cudaMalloc(&x, MB), cudaErrorMemoryAllocation);
	CKE(cudaGetLastError(), cudaErrorMemoryAllocation);

	/* torch.cuda.empty_cache(): every page unmapped and released */
	for (int i = 0; i < n; i++) {
		CU(T.Unmap(base + (CUdeviceptr)i * PAGE, PAGE));
		CU(T.MemRelease(h[i]));
	}
	CU(T.AddressFree(base, span));
	st = e2e_stats(0);
	CHECK(st.unpooled_vmm_bytes == 0 && st.unpooled_bytes == 0 && st.unpooled_frees == 8);
	CHECK(st.unpooled_vmm_bytes_peak == 64 * MB);
	json_has("\"unpooled_vmm_bytes\":0,");
	CK(cudaMalloc(&x, MB));
	CK(cudaFree(x));
	printf("expandable segments: %d pages of %zu MiB mapped, the next refused at the limit, all given back\n", n,
	       PAGE / MB);
	return 0;
}

/* The fake runtime's own entry point `name` (never gpupool's). */
static void *native(const char *name) { return e2e_native(name); }

static int names(void)
{
	CK(cudaFree(0));
	entry_fn rt;
	E2E_FN(rt, native("cudaGetDriverEntryPoint"));
	/* base name, the entry point gpupool exports for it, flags */
	static const struct {
		const char *base, *full;
		unsigned long long flags;
	} hooked[] = {
		{"cuMemAlloc", "cuMemAlloc_v2", 0}, {"cuMemFree", "cuMemFree_v2", 0},
		{"cuMemAllocAsync", "cuMemAllocAsync", 0}, {"cuMemAllocAsync", "cuMemAllocAsync_ptsz", 2},
		{"cuMemFreeAsync", "cuMemFreeAsync_ptsz", 2}, {"cuMemGetInfo", "cuMemGetInfo_v2", 0},
		{"cuIpcGetMemHandle", "cuIpcGetMemHandle", 0}, {"cuMemGetAddressRange", "cuMemGetAddressRange_v2", 0},
		{"cuPointerGetAttribute", "cuPointerGetAttribute", 0}, {"cuStreamBeginCapture", "cuStreamBeginCapture_v2", 0},
		{"cuStreamBeginCapture", "cuStreamBeginCapture_v2_ptsz", 2}, {"cuStreamEndCapture", "cuStreamEndCapture", 1},
		{"cuStreamEndCapture", "cuStreamEndCapture_ptsz", 2}, {"cuStreamCreate", "cuStreamCreate", 0},
		{"cuStreamDestroy", "cuStreamDestroy_v2", 0}, {"cuDevicePrimaryCtxReset", "cuDevicePrimaryCtxReset_v2", 0},
		{"cuCtxDestroy", "cuCtxDestroy_v2", 0}, {"cuGetProcAddress", "cuGetProcAddress_v2", 0},
		{"cuMemCreate", "cuMemCreate", 0}, {"cuMemRelease", "cuMemRelease", 0},
		{"cuMemMap", "cuMemMap", 0}, {"cuMemUnmap", "cuMemUnmap", 0},
		{"cuMemSetAccess", "cuMemSetAccess", 0}, {"cuMemAddressFree", "cuMemAddressFree", 0},
		{"cuMemAllocManaged", "cuMemAllocManaged", 0}, {"cuMemAllocPitch", "cuMemAllocPitch_v2", 0},
		{"cuMemPoolCreate", "cuMemPoolCreate", 0}, {"cuMemPoolDestroy", "cuMemPoolDestroy", 0},
		{"cuDeviceSetMemPool", "cuDeviceSetMemPool", 0}, {"cuMemAllocFromPoolAsync", "cuMemAllocFromPoolAsync", 1},
		{"cuMemAllocFromPoolAsync", "cuMemAllocFromPoolAsync_ptsz", 2},
	};
	for (size_t i = 0; i < sizeof hooked / sizeof hooked[0]; i++) {
		void *want = dlsym(RTLD_DEFAULT, hooked[i].full); /* gpupool's export */
		CHECK(want && is_ours(want));
		void *got = NULL, *native_got = NULL;
		enum cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
		CK(cudaGetDriverEntryPoint(hooked[i].base, &got, hooked[i].flags, &q));
		CHECK(q == cudaDriverEntryPointSuccess);
		CK(rt(hooked[i].base, &native_got, hooked[i].flags, NULL));
		if (got != want || is_ours(native_got)) {
			fprintf(stderr, "%s (flags %llu): got %p, gpupool's %s is %p, the runtime's own %p\n", hooked[i].base,
				hooked[i].flags, got, hooked[i].full, want, native_got);
			exit(1);
		}
		/* by version, the status left out */
		got = NULL;
		CK(cudaGetDriverEntryPointByVersion(hooked[i].base, &got, 13000, hooked[i].flags, NULL));
		CHECK(got == want);
	}
	/* the _ptsz entry points default to the per-thread variants, the plain ones to the legacy */
	void *got = NULL;
	CK(cudaGetDriverEntryPoint_ptsz("cuMemAllocAsync", &got, cudaEnableDefault, NULL));
	CHECK(got == dlsym(RTLD_DEFAULT, "cuMemAllocAsync_ptsz"));
	CK(cudaGetDriverEntryPointByVersion_ptsz("cuMemFreeAsync", &got, 12000, cudaEnableDefault, NULL));
	CHECK(got == dlsym(RTLD_DEFAULT, "cuMemFreeAsync_ptsz"));
	CK(cudaGetDriverEntryPoint_ptsz("cuMemAllocAsync", &got, cudaEnableLegacyStream, NULL));
	CHECK(got == dlsym(RTLD_DEFAULT, "cuMemAllocAsync"));
	CK(cudaGetDriverEntryPoint("cuMemAllocAsync", &got, cudaEnableDefault, NULL));
	CHECK(got == dlsym(RTLD_DEFAULT, "cuMemAllocAsync"));
	/* cuGetProcAddress at 11.8: the one without the status, gpupool's */
	CK(cudaGetDriverEntryPointByVersion("cuGetProcAddress", &got, 11080, cudaEnableDefault, NULL));
	CHECK(got == dlsym(RTLD_DEFAULT, "cuGetProcAddress"));
	/* every other name: what the runtime alone answers, the driver's own */
	static const char *const others[] = {"cuInit", "cuMemAddressReserve", "cuMemGetAllocationGranularity",
					     "cuCtxSetCurrent", "cuMemcpyDtoH", "cuMemPoolTrimTo", "cuEventRecord"};
	for (size_t i = 0; i < sizeof others / sizeof others[0]; i++) {
		void *a = NULL, *b = NULL;
		CK(cudaGetDriverEntryPoint(others[i], &a, cudaEnableDefault, NULL));
		CK(rt(others[i], &b, cudaEnableDefault, NULL));
		CHECK(a && a == b && !is_ours(a));
	}
	/* what the program got is what it uses: gpupool's cuMemAlloc serves from the pool */
	CUresult (*alloc)(CUdeviceptr *, size_t), (*release)(CUdeviceptr);
	E2E_FN(alloc, (cudaGetDriverEntryPoint("cuMemAlloc", &got, 0, NULL), got));
	E2E_FN(release, (cudaGetDriverEntryPoint("cuMemFree", &got, 0, NULL), got));
	CUdeviceptr p = 0;
	CU(alloc(&p, 4096));
	CHECK(e2e_stats(0).driver_allocs == 1);
	CU(release(p));
	/* and the pool's segment came from the runtime's cudaMalloc, whose driver is the real
	 * one: the driver saw one segment, never the 4 KiB, never twice */
	void *cu = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
	size_t (*alloc_sizes)(size_t *, size_t);
	E2E_FN(alloc_sizes, dlsym(cu, "gpfakecu_alloc_sizes"));
	size_t sizes[8];
	CHECK(alloc_sizes(sizes, 8) == 1 && sizes[0] >= (size_t)2 << 20 && e2e_stats(0).segment_allocs == 1);

	/* dlmopen into the base namespace is dlopen: the same handle, answered by gpupool */
	void *h = dlmopen(LM_ID_BASE, "libcuda.so.1", RTLD_NOW);
	CHECK(h != NULL && h == dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD));
	CHECK(is_ours(dlsym(h, "cuMemCreate")));
	/* dlvsym matches only a definition of the version asked for: libcuda's names have none
	 * (as the real driver's: its only versions are its imports' from glibc) */
	CHECK(dlvsym(h, "cuMemCreate", "GLIBC_2.2.5") == NULL);
	CHECK(dlvsym(RTLD_DEFAULT, "cuMemCreate", "GLIBC_2.2.5") == NULL);
	printf("entry points: %zu interposed names are gpupool's, %zu others the runtime's own\n",
	       sizeof hooked / sizeof hooked[0], sizeof others / sizeof others[0]);
	return 0;
}

/* One call, through gpupool (`ours`) and the runtime alone (`theirs`): the same code,
 * entry point, status and last error. */
struct answer {
	cudaError_t e, last;
	void *fn;
	int status;
};

#define SAME(call_ours, call_theirs)                                                                          \
	do {                                                                                                  \
		struct answer a_[2];                                                                          \
		memset(a_, 0, sizeof a_);                                                                     \
		for (int k_ = 0; k_ < 2; k_++) {                                                              \
			void *fn_ = (void *)(uintptr_t)0x5a5a;                                                \
			enum cudaDriverEntryPointQueryResult q_ = (enum cudaDriverEntryPointQueryResult)7;    \
			(void)cudaGetLastError();                                                             \
			a_[k_].e = k_ == 0 ? call_ours : call_theirs;                                         \
			a_[k_].last = cudaGetLastError();                                                     \
			a_[k_].fn = fn_;                                                                      \
			a_[k_].status = (int)q_;                                                              \
		}                                                                                             \
		if (memcmp(&a_[0], &a_[1], sizeof a_[0]) != 0) {                                              \
			fprintf(stderr, "%s:%d: %s: %d/%d %p %d, alone %d/%d %p %d\n", __FILE__, __LINE__,      \
				#call_ours, a_[0].e, a_[0].last, a_[0].fn, a_[0].status, a_[1].e, a_[1].last,   \
				a_[1].fn, a_[1].status);                                                      \
			exit(1);                                                                              \
		}                                                                                             \
		printf("%-70s -> %d, entry %p, status %d\n", #call_ours, a_[0].e, a_[0].fn, a_[0].status);   \
	} while (0)

static int bad(void)
{
	CK(cudaFree(0));
	entry_fn rt, rt_ptsz;
	entry_v_fn rtv, rtv_ptsz;
	E2E_FN(rt, native("cudaGetDriverEntryPoint"));
	E2E_FN(rt_ptsz, native("cudaGetDriverEntryPoint_ptsz"));
	E2E_FN(rtv, native("cudaGetDriverEntryPointByVersion"));
	E2E_FN(rtv_ptsz, native("cudaGetDriverEntryPointByVersion_ptsz"));
	SAME(cudaGetDriverEntryPoint(NULL, &fn_, 0, &q_), rt(NULL, &fn_, 0, &q_));
	SAME(cudaGetDriverEntryPoint("cuMemCreate", NULL, 0, &q_), rt("cuMemCreate", NULL, 0, &q_));
	SAME(cudaGetDriverEntryPoint("cuNoSuchEntryPoint", &fn_, 0, &q_), rt("cuNoSuchEntryPoint", &fn_, 0, &q_));
	SAME(cudaGetDriverEntryPoint("cuMemCreate", &fn_, 7, &q_), rt("cuMemCreate", &fn_, 7, &q_));
	SAME(cudaGetDriverEntryPoint_ptsz("", &fn_, 0, &q_), rt_ptsz("", &fn_, 0, &q_));
	SAME(cudaGetDriverEntryPointByVersion("cuMemCreate", &fn_, 99000, 0, &q_),
	     rtv("cuMemCreate", &fn_, 99000, 0, &q_));
	SAME(cudaGetDriverEntryPointByVersion("cuMemCreate", &fn_, 0xffffffffu, 0, &q_),
	     rtv("cuMemCreate", &fn_, 0xffffffffu, 0, &q_));
	SAME(cudaGetDriverEntryPointByVersion("cuMemCreate", &fn_, 10000, 0, &q_), rtv("cuMemCreate", &fn_, 10000, 0, &q_));
	SAME(cudaGetDriverEntryPointByVersion("cuMemAllocAsync", &fn_, 11000, 2, &q_),
	     rtv("cuMemAllocAsync", &fn_, 11000, 2, &q_));
	SAME(cudaGetDriverEntryPointByVersion_ptsz("cuGetProcAddress", &fn_, 11020, 0, &q_),
	     rtv_ptsz("cuGetProcAddress", &fn_, 11020, 0, &q_));
	SAME(cudaGetDriverEntryPointByVersion_ptsz(NULL, &fn_, 13000, 0, NULL), rtv_ptsz(NULL, &fn_, 13000, 0, NULL));
	SAME(cudaGetDriverEntryPointByVersion("cuNoSuchEntryPoint", &fn_, 13000, 0, NULL),
	     rtv("cuNoSuchEntryPoint", &fn_, 13000, 0, NULL));
	/* and a name that exists, with the status left out: the code and status are the runtime's */
	void *a = NULL;
	enum cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
	CK(cudaGetDriverEntryPointByVersion("cuMemCreate", &a, 10020, 0, &q));
	CHECK(a && q == cudaDriverEntryPointSuccess);
	return 0;
}

/* A process whose only device memory comes from one path gpupool counts but does not pool. */
static int seen(const char *path)
{
	CK(cudaFree(0));
	CHECK(!e2e_page_exists(getpid())); /* nothing yet: invisible while unused */
	const char *field;
	size_t bytes = 16 * MB;
	if (!strcmp(path, "vmm")) {
		load_table();
		CUmemAllocationProp prop = device_prop();
		CUmemGenericAllocationHandle h;
		CU(T.MemCreate(&h, bytes, &prop, 0));
		field = "unpooled_vmm_bytes";
	} else if (!strcmp(path, "managed")) {
		void *m;
		CK(cudaMallocManaged(&m, bytes, cudaMemAttachGlobal));
		field = "unpooled_managed_bytes";
	} else if (!strcmp(path, "pitched")) {
		void *m;
		size_t pitch;
		CK(cudaMallocPitch(&m, &pitch, 4096, bytes / 4096));
		CHECK(pitch == 4096);
		field = "unpooled_pitched_bytes";
	} else if (!strcmp(path, "mempool")) {
		struct cudaMemPoolProps props;
		memset(&props, 0, sizeof props);
		props.allocType = cudaMemAllocationTypePinned;
		props.location.type = cudaMemLocationTypeDevice;
		props.location.id = 0;
		cudaMemPool_t pool;
		CK(cudaMemPoolCreate(&pool, &props));
		void *m;
		CK(cudaMallocFromPoolAsync(&m, bytes, pool, 0));
		CK(cudaStreamSynchronize(0));
		field = "unpooled_mempool_bytes";
	} else {
		fprintf(stderr, "seen: unknown path %s\n", path);
		return 2;
	}
	CHECK(e2e_page_exists(getpid()));
	struct gpupool_device_stats st = e2e_stats(0);
	CHECK(st.unpooled_bytes == bytes && st.reserved_bytes == 0 && st.allocs == 0);
	release_thread_listens();
	char want[128];
	snprintf(want, sizeof want, "\"%s\":%zu,", field, bytes);
	json_has(want);
	printf("seen: a process holding %zu MiB by %s only has its page, its JSON line and its release thread\n",
	       bytes / MB, path);
	return 0;
}

int main(int argc, char **argv)
{
	e2e_shm_dir();
	CHECK(argc > 1);
	if (!strcmp(argv[1], "torch"))
		return torch();
	if (!strcmp(argv[1], "names"))
		return names();
	if (!strcmp(argv[1], "bad"))
		return bad();
	if (!strcmp(argv[1], "seen") && argc > 2)
		return seen(argv[2]);
	fprintf(stderr, "usage: e2e_rt_entry torch|names|bad|seen PATH\n");
	return 2;
}
