/* The contracts at the driver level, one per argument, in a program without the runtime that
 * calls the fake driver through gpupool's driver entry points (found by cuGetProcAddress_v2):
 *   fence    cuMemFree is a fence: a block freed while a delayed fake kernel still writes into
 *            it is not handed to a new owner before that write has landed (limit:12M: the new
 *            owner gets the old block), and the free returns at once;
 *   order    cuMemFreeAsync is stream-ordered: another stream gets the block only behind the
 *            freeing stream's work (limit:12M);
 *   oom      a failed segment is released-and-retried; a failure that stays is
 *            CUDA_ERROR_OUT_OF_MEMORY (FAKECUDA_CAPACITY=64M);
 *   capture  an allocation on a capturing stream passes through, and pool traffic on another
 *            thread does not invalidate a global capture;
 *   meminfo  cuMemGetInfo reports the limit as total, cached blocks as free (limit:32M);
 *   threads  eight threads allocating and freeing;
 *   devices  one pool per device, a free finds its block from any current device;
 *   fork     the child starts with a pool of its own;
 *   reset    cuDevicePrimaryCtxReset drops the device's pool. */
#include <pthread.h>
#include <string.h>
#include <sys/wait.h>

#include "e2e_drv.h"

static struct e2e_drv d;

static void fence(void)
{
	CUstream k;
	CU(d.StreamCreate(&k, CU_STREAM_NON_BLOCKING));
	size_t n = (size_t)12 << 20;
	int same = 0, rounds = 16;
	uint64_t worst = 0;
	for (int it = 0; it < rounds; it++) {
		CUdeviceptr a, b;
		CU(d.MemAlloc(&a, n));
		CU(d.launch_fill(a, n, 0xAA, 20000, k));
		uint64_t t0 = e2e_now_ns();
		CU(d.MemFree(a));
		uint64_t dt = e2e_now_ns() - t0;
		worst = dt > worst ? dt : worst;
		CU(d.MemAlloc(&b, n));
		same += a == b;
		memset((void *)(uintptr_t)b, 0x55, n); /* the new owner writes (fake device memory is host memory) */
		CU(d.CtxSynchronize());                /* the delayed fill has run by now */
		CHECK(e2e_drv_all(&d, b, n, 0x55));
		CU(d.MemFree(b));
	}
	struct gpupool_device_stats st = e2e_stats(0);
	printf("fence: rounds=%d same=%d worst_free_us=%llu fences=%llu inline=%llu\n", rounds, same,
	       (unsigned long long)(worst / 1000), (unsigned long long)st.fences, (unsigned long long)st.inline_fences);
	CHECK(same == rounds);             /* one block fits under the limit */
	CHECK(worst < 15000000ull);        /* the 20 ms kernel did not hold cuMemFree */
	CHECK(d.calls("cuMemFree_v2") == 0 && st.segment_allocs == 1);
	CU(d.StreamDestroy(k));
}

static void order(void)
{
	CUstream s1, s2;
	CU(d.StreamCreate(&s1, CU_STREAM_NON_BLOCKING));
	CU(d.StreamCreate(&s2, CU_STREAM_NON_BLOCKING));
	size_t n = (size_t)12 << 20;
	int same = 0, rounds = 16;
	for (int it = 0; it < rounds; it++) {
		CUdeviceptr a, b, c;
		CU(d.MemAllocAsync(&a, n, s1));
		CU(d.launch_fill(a, n, 0xAA, 20000, s1));
		CU(d.MemFreeAsync(a, s1));
		CU(d.MemAllocAsync(&c, n, s1)); /* the same stream: at once */
		CHECK(c == a);
		CU(d.MemFreeAsync(c, s1));
		CU(d.MemAllocAsync(&b, n, s2)); /* another stream: behind s1's work */
		same += a == b;
		CU(d.MemsetD8Async(b, 0x55, n, s2));
		CU(d.StreamSynchronize(s2));
		CU(d.CtxSynchronize());
		CHECK(e2e_drv_all(&d, b, n, 0x55));
		CU(d.MemFreeAsync(b, s2));
	}
	CU(d.CtxSynchronize());
	struct gpupool_device_stats st = e2e_stats(0);
	printf("order: rounds=%d same=%d steals=%llu fences=%llu\n", rounds, same, (unsigned long long)st.stream_steals,
	       (unsigned long long)st.fences + st.inline_fences);
	CHECK(same == rounds && st.segment_allocs == 1);
	CU(d.StreamDestroy(s1));
	CU(d.StreamDestroy(s2));
}

static void oom(void)
{
	CUdeviceptr a, b, c;
	CU(d.MemAlloc(&a, (size_t)40 << 20));
	CU(d.MemFree(a));
	CU(d.MemAlloc(&b, (size_t)50 << 20)); /* only once the cached 40 MiB are given back */
	CUE(d.MemAlloc(&c, (size_t)100 << 20), CUDA_ERROR_OUT_OF_MEMORY);
	CU(d.MemFree(b));
	long long (*release)(int);
	E2E_API(release, "gpupool_release");
	CHECK(release(0) > 0);
	CHECK(d.fail_nth("cuMemAlloc_v2", 1, CUDA_ERROR_OUT_OF_MEMORY) == 0);
	CU(d.MemAlloc(&c, 1000)); /* the injected failure is retried */
	CU(d.MemFree(c));
	struct gpupool_device_stats st = e2e_stats(0);
	printf("oom: ooms=%llu retries=%llu releases=%llu\n", (unsigned long long)st.ooms,
	       (unsigned long long)st.oom_retries, (unsigned long long)st.releases);
	CHECK(st.ooms == 1 && st.oom_retries >= 1);
}

static void *pool_traffic(void *arg)
{
	(void)arg;
	e2e_drv_use(&d, 0);
	for (int i = 0; i < 200; i++) {
		CUdeviceptr p;
		CU(d.MemAlloc(&p, 4096 + (size_t)i * 512));
		CU(d.MemFree(p));
	}
	return NULL;
}

static void capture(void)
{
	CUdeviceptr warm;
	CU(d.MemAlloc(&warm, 4096)); /* a pool, and work for the fence thread */
	CU(d.MemFree(warm));
	CUstream s;
	CU(d.StreamCreate(&s, CU_STREAM_NON_BLOCKING));
	CU(d.StreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
	unsigned long a0 = d.calls("cuMemAllocAsync");
	CUdeviceptr g;
	CU(d.MemAllocAsync(&g, 8192, s)); /* belongs to the graph: the driver's */
	CHECK(d.calls("cuMemAllocAsync") == a0 + 1);
	pthread_t t;
	CHECK(pthread_create(&t, NULL, pool_traffic, NULL) == 0);
	CHECK(pthread_join(t, NULL) == 0);
	e2e_sleep_ms(20); /* the fence thread's interval, many times over */
	CUgraph graph = NULL;
	CU(d.StreamEndCapture(s, &graph)); /* not invalidated: no sync, no real alloc/free in global mode */
	CHECK(graph != NULL);
	CU(d.MemFreeAsync(g, s));
	CU(d.CtxSynchronize());
	struct gpupool_device_stats st = e2e_stats(0);
	printf("capture: passthrough=%llu allocs=%llu\n", (unsigned long long)st.driver_passthrough_allocs,
	       (unsigned long long)st.allocs);
	CHECK(st.driver_passthrough_allocs == 1 && st.allocs == 201);
	CU(d.StreamDestroy(s));
}

static void meminfo(void)
{
	size_t f, t;
	CU(d.MemGetInfo(&f, &t)); /* before any pool: the limit already */
	CHECK(t == (size_t)32 << 20 && f == t);
	CUdeviceptr p;
	CU(d.MemAlloc(&p, (size_t)12 << 20));
	CU(d.MemGetInfo(&f, &t));
	CHECK(t == (size_t)32 << 20 && f == t - ((size_t)12 << 20));
	CU(d.MemFree(p));
	e2e_wait_no_pending(0);
	CU(d.MemGetInfo(&f, &t));
	CHECK(f == t); /* the cached block counts as free */
	printf("meminfo: free=%zu total=%zu\n", f, t);
}

static void *worker(void *arg)
{
	unsigned seed = (unsigned)(uintptr_t)arg;
	e2e_drv_use(&d, 0);
	CUdeviceptr live[16] = {0};
	for (int i = 0; i < 2000; i++) {
		int k = (int)(rand_r(&seed) % 16);
		if (live[k]) {
			CU(d.MemFree(live[k]));
			live[k] = 0;
		} else {
			CU(d.MemAlloc(&live[k], 1 + rand_r(&seed) % (3 << 20)));
		}
	}
	for (int k = 0; k < 16; k++)
		if (live[k])
			CU(d.MemFree(live[k]));
	return NULL;
}

static void threads(void)
{
	pthread_t t[8];
	for (int i = 0; i < 8; i++)
		CHECK(pthread_create(&t[i], NULL, worker, (void *)(uintptr_t)(i + 1)) == 0);
	for (int i = 0; i < 8; i++)
		CHECK(pthread_join(t[i], NULL) == 0);
	e2e_wait_no_pending(0);
	struct gpupool_device_stats st = e2e_stats(0);
	printf("threads: allocs=%llu frees=%llu live=%llu\n", (unsigned long long)st.allocs,
	       (unsigned long long)st.frees, (unsigned long long)st.live_blocks);
	CHECK(st.allocs == st.frees && st.live_blocks == 0 && st.driver_allocs == st.allocs);
}

static void devices(void)
{
	CUdeviceptr a, b;
	CU(d.MemAlloc(&a, 1 << 20));
	e2e_drv_use(&d, 1);
	CU(d.MemAlloc(&b, 1 << 20));
	CU(d.MemFree(a)); /* device 0's block, freed with device 1 current */
	e2e_drv_use(&d, 0);
	CU(d.MemFree(b));
	struct gpupool_device_stats s0 = e2e_stats(0), s1 = e2e_stats(1);
	printf("devices: dev0 allocs=%llu frees=%llu dev1 allocs=%llu frees=%llu\n", (unsigned long long)s0.allocs,
	       (unsigned long long)s0.frees, (unsigned long long)s1.allocs, (unsigned long long)s1.frees);
	CHECK(s0.allocs == 1 && s0.frees == 1 && s1.allocs == 1 && s1.frees == 1);
	/* each device's UUID, from the driver, in its slot (the fake's: "fakegpu", ordinal + 1):
	 * what names the physical GPU in every process, whatever CUDA_VISIBLE_DEVICES says */
	CHECK(memcmp(s0.uuid, "fakegpu", 7) == 0 && s0.uuid[15] == 1);
	CHECK(memcmp(s1.uuid, "fakegpu", 7) == 0 && s1.uuid[15] == 2);
}

static void forked(void)
{
	CUdeviceptr a;
	CU(d.MemAlloc(&a, 4096));
	pid_t pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		CUdeviceptr b;
		CU(d.MemAlloc(&b, 4096));
		struct gpupool_device_stats st = e2e_stats(0);
		_exit(st.allocs == 1 && st.driver_allocs == 1 && e2e_page_exists(getpid()) ? 0 : 3);
	}
	int status = 0;
	CHECK(waitpid(pid, &status, 0) == pid);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	struct gpupool_device_stats st = e2e_stats(0);
	CHECK(st.allocs == 1);
	CU(d.MemFree(a));
	printf("fork: the child had a pool of its own\n");
}

static void reset(void)
{
	CUdeviceptr a;
	CU(d.MemAlloc(&a, 4096));
	CU(d.PrimaryReset(0));
	CHECK(d.calls("cuDevicePrimaryCtxReset_v2") == 1);
	CU(d.MemAlloc(&a, 4096)); /* a new pool, on the same page slot: a new segment */
	struct gpupool_device_stats st = e2e_stats(0);
	CHECK(st.live_blocks == 1 && st.segments == 1 && st.segment_allocs == 2);
	/* a segment each: whole, or a range of virtual memory */
	CHECK(d.calls("cuMemAlloc_v2") + d.calls("cuMemAddressReserve") == 2);
	CU(d.MemFree(a));
	printf("reset: a new pool after the reset\n");
}

int main(int argc, char **argv)
{
	CHECK(argc > 1);
	e2e_shm_dir();
	e2e_drv_load(&d, 1);
	static const struct {
		const char *name;
		void (*fn)(void);
	} cases[] = {{"fence", fence},       {"order", order},     {"oom", oom},   {"capture", capture},
		     {"meminfo", meminfo},   {"threads", threads}, {"devices", devices}, {"fork", forked},
		     {"reset", reset}};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
		if (!strcmp(argv[1], cases[i].name)) {
			cases[i].fn();
			return 0;
		}
	fprintf(stderr, "unknown case %s\n", argv[1]);
	return 2;
}
