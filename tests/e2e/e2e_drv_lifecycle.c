/* A device's pool over the driver API's lifecycle calls, and the driver's view of pooled
 * memory, one case per argument, in a program without the runtime (entry points through
 * cuGetProcAddress_v2). Each case asserts what the driver itself answers, so it passes
 * natively too (GPUPOOL_DISABLE=1: the fake driver answers everything); under the shim it
 * also checks the pool's counters.
 *   ctx-destroy    cuCtxDestroy of the primary context is refused (CUDA_ERROR_INVALID_CONTEXT,
 *                  as on an H200): the pool stays, so cuMemFree of a block at a segment's base
 *                  frees that block only, and its neighbour in the segment stays usable;
 *   reset-refused  a cuDevicePrimaryCtxReset that fails keeps the pool the same way; one that
 *                  succeeds drops it (the next allocation grows a new pool);
 *   reset-cap      under limit:64M, blocks of the pool's virtual-memory segments until the cap,
 *                  then a successful reset, three times: the chunks outlive the reset in the
 *                  driver, so they count until the killed pool gives them back, which it does
 *                  before the reset returns: each round gets the whole cap again, and the
 *                  device never holds more than the cap (E2E_NO_MEMBARRIER=1: the same
 *                  where the killed pool can never be freed);
 *   reset-cap-busy-fence  the same with the fence thread busy behind a 3 s kernel on
 *                  device 1: the reset still returns at once with the cap whole;
 *   reset-race     threads allocate and free while another resets the device 50 times;
 *                  then nothing is held and the cap is whole (reset_race);
 *   ranges         cuMemGetAddressRange and cuPointerGetAttribute(RANGE_START_ADDR,
 *                  RANGE_SIZE) answer for the allocation as asked (1000 bytes), and outside
 *                  live allocations answer CUDA_ERROR_NOT_FOUND and CUDA_ERROR_INVALID_VALUE:
 *                  one byte past it, a free part of its segment (under the shim), after its
 *                  cuMemFree; cuIpcGetMemHandle of a freed block is refused. */
#include <errno.h>
#include <stdatomic.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/syscall.h>

#include "e2e_drv.h"

static struct e2e_drv d;
static int pooled; /* the shim serves the driver layer (not GPUPOOL_DISABLE=1) */

static struct gpupool_device_stats stats(void)
{
	struct gpupool_device_stats st;
	memset(&st, 0, sizeof st);
	if (pooled)
		st = e2e_stats(0);
	return st;
}

/* The driver's answers for an address no live allocation holds. */
static void not_allocated(CUdeviceptr x)
{
	CUdeviceptr base = 1;
	size_t size = 1;
	CUE(d.MemGetAddressRange(&base, &size, x), CUDA_ERROR_NOT_FOUND);
	CUE(d.PointerGetAttribute(&base, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, x), CUDA_ERROR_INVALID_VALUE);
	CUE(d.PointerGetAttribute(&size, CU_POINTER_ATTRIBUTE_RANGE_SIZE, x), CUDA_ERROR_INVALID_VALUE);
}

/* The driver's answers for an address inside the live allocation [a, a + n). */
static void allocated(CUdeviceptr x, CUdeviceptr a, size_t n)
{
	CUdeviceptr base = 0;
	size_t size = 0;
	CU(d.MemGetAddressRange(&base, &size, x));
	CHECK(base == a && size == n);
	base = 0;
	size = 0;
	CU(d.PointerGetAttribute(&base, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, x));
	CU(d.PointerGetAttribute(&size, CU_POINTER_ATTRIBUTE_RANGE_SIZE, x));
	CHECK(base == a && size == n);
}

/* a (at its segment's base under the shim) and b (its neighbour) live, b written and read. */
static void neighbours_usable(CUdeviceptr a, CUdeviceptr b)
{
	CU(d.MemFree(a));
	CU(d.MemsetD8(b, 0x5a, 1000));
	CHECK(e2e_drv_all(&d, b, 1000, 0x5a));
	allocated(b + 999, b, 1000);
}

static void ctx_destroy(void)
{
	CUdeviceptr a, b;
	CU(d.MemAlloc(&a, 1000));
	CU(d.MemAlloc(&b, 1000));
	CHECK(!pooled || b == a + 1024); /* one segment: a at its base, b next to it */
	unsigned long frees = d.calls("cuMemFree_v2");
	CUE(d.CtxDestroy(d.primary[0]), CUDA_ERROR_INVALID_CONTEXT);
	neighbours_usable(a, b);
	struct gpupool_device_stats st = stats();
	CHECK(!pooled || (st.live_blocks == 1 && st.segments == 1 && d.calls("cuMemFree_v2") == frees));
	CU(d.MemFree(b));
	printf("ctx-destroy: refused, the pool (%s) kept its segment\n", pooled ? "on" : "off");
}

static void reset_refused(void)
{
	CUdeviceptr a, b;
	CU(d.MemAlloc(&a, 1000));
	CU(d.MemAlloc(&b, 1000));
	CHECK(d.fail_nth("cuDevicePrimaryCtxReset_v2", 1, CUDA_ERROR_INVALID_VALUE) == 0);
	CUE(d.PrimaryReset(0), CUDA_ERROR_INVALID_VALUE);
	neighbours_usable(a, b);
	struct gpupool_device_stats st = stats();
	CHECK(!pooled || (st.live_blocks == 1 && st.segments == 1 && st.segment_allocs == 1));
	/* a reset that succeeds: b dies with it, the next allocation is a new pool's */
	CU(d.PrimaryReset(0));
	not_allocated(b);
	CU(d.MemAlloc(&a, 1000));
	CU(d.MemsetD8(a, 0x11, 1000));
	CHECK(e2e_drv_all(&d, a, 1000, 0x11));
	st = stats();
	CHECK(!pooled || (st.live_blocks == 1 && st.segments == 1 && st.segment_allocs == 2));
	CU(d.MemFree(a));
	printf("reset-refused: the pool kept across a failed reset, dropped by one that succeeded\n");
}

#define MiB ((size_t)1 << 20)

static void reset_cap(void)
{
	size_t (*used)(int) = NULL;
	E2E_FN(used, dlsym(d.handle, "gpfakecu_used"));
	for (int round = 0; round < 3; round++) {
		CUdeviceptr p, first = 0;
		int n = 0;
		while (n < 32 && d.MemAlloc(&p, 4 * MiB) == CUDA_SUCCESS) {
			if (!first)
				first = p;
			n++;
		}
		printf("reset-cap: round %d: %d x 4 MiB, the device holds %zu MiB\n", round, n, used(0) / MiB);
		CHECK(n >= 12 && used(0) <= 64 * MiB);
		CU(d.MemsetD8(first, 0x22, 4 * MiB));
		CU(d.PrimaryReset(0));
		CHECK(used(0) == 0); /* as natively: the reset returns with the memory free */
		CU(d.CtxSetCurrent(d.primary[0]));
	}
}

/* The fence thread busy with device 1 (a free behind a 3 s kernel) while device 0, its pool
 * on virtual-memory chunks full under the limit, is reset: the reset returns at once with
 * the device's memory free and the cap whole (before: after 1.8 s, 64 MiB still counted, and
 * the next allocation refused until the kernel ended). */
static void reset_cap_busy_fence(void)
{
	size_t (*used)(int) = NULL;
	E2E_FN(used, dlsym(d.handle, "gpfakecu_used"));
	e2e_drv_use(&d, 1);
	CUdeviceptr b, p;
	CU(d.MemAlloc(&b, MiB));
	CU(d.launch_fill(b, MiB, 1, 3000000, 0));
	CU(d.MemFree(b)); /* the fence thread now waits for the kernel */
	usleep(100000);
	e2e_drv_use(&d, 0);
	int n = 0;
	while (n < 32 && d.MemAlloc(&p, 4 * MiB) == CUDA_SUCCESS)
		n++;
	CHECK(n >= 12);
	uint64_t t0 = e2e_now_ns();
	CU(d.PrimaryReset(0));
	double took = (double)(e2e_now_ns() - t0) / 1e9;
	CU(d.CtxSetCurrent(d.primary[0]));
	printf("reset-cap-busy-fence: %d x 4 MiB; the reset took %.3f s; the device holds %zu MiB\n", n, took,
	       used(0) / MiB);
	CHECK(used(0) == 0);
	CHECK(took < 0.5);
	CU(d.MemAlloc(&p, 32 * MiB)); /* the cap whole */
	CU(d.MemFree(p));
}

/* reset-race: threads allocate and free (at once and on their streams, frees left pending)
 * while another resets the device 50 times: a thread inside the killed pool, waiting for a
 * fence with its lock dropped, resumes and may still map or unmap, so the pool's chunks are
 * dropped only once it is out (before: a chunk unmapped twice, the reuse of its address by
 * the new pool's chunks unmapped under it, memory held and counted nowhere). At the end,
 * everything freed and one reset more: the device holds nothing, and the cap is whole. */
static atomic_int race_stop;

static void *race_worker(void *arg)
{
	unsigned seed = (unsigned)(uintptr_t)arg * 7919u + 1;
	CU(d.CtxSetCurrent(d.primary[0]));
	CUstream s = NULL;
	CU(d.StreamCreate(&s, 0));
	CUdeviceptr held[8] = {0};
	while (!atomic_load(&race_stop)) {
		(void)d.CtxSetCurrent(d.primary[0]);
		int i = rand_r(&seed) % 8;
		if (held[i]) {
			(void)((rand_r(&seed) & 1) ? d.MemFree(held[i]) : d.MemFreeAsync(held[i], s));
			held[i] = 0;
		} else {
			size_t sz = (size_t)(1 + rand_r(&seed) % 12) * MiB + (size_t)(rand_r(&seed) % 4096);
			CUdeviceptr p = 0;
			if (((rand_r(&seed) & 1) ? d.MemAlloc(&p, sz) : d.MemAllocAsync(&p, sz, s)) == CUDA_SUCCESS)
				held[i] = p;
		}
	}
	for (int i = 0; i < 8; i++)
		if (held[i])
			(void)d.MemFree(held[i]);
	return NULL;
}

static void reset_race_round(size_t (*used)(int));

static void reset_race(void)
{
	size_t (*used)(int) = NULL;
	E2E_FN(used, dlsym(d.handle, "gpfakecu_used"));
	/* gpupool's lines go to a file, read after: none may say that memory could not be
	 * unmapped or was lost (a chunk unmapped twice says so before the figures show it) */
	char path[] = "/tmp/e2e-reset-race.XXXXXX";
	int fd = mkstemp(path), saved = dup(2);
	CHECK(fd >= 0 && saved >= 0 && dup2(fd, 2) == 2);
	unlink(path);
	for (int round = 0; round < 4; round++)
		reset_race_round(used);
	CHECK(dup2(saved, 2) == 2);
	char buf[65536];
	ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
	buf[n > 0 ? n : 0] = '\0';
	fputs(buf, stderr);
	CHECK(!strstr(buf, "failed") && !strstr(buf, "lost to the pool"));
	close(fd);
	close(saved);
}

static void reset_race_round(size_t (*used)(int))
{
	atomic_store(&race_stop, 0);
	pthread_t t[3];
	for (int i = 0; i < 3; i++)
		CHECK(pthread_create(&t[i], NULL, race_worker, (void *)(uintptr_t)(i + 1)) == 0);
	for (int r = 0; r < 50; r++) {
		usleep(2000);
		CU(d.PrimaryReset(0));
		CU(d.CtxSetCurrent(d.primary[0]));
	}
	atomic_store(&race_stop, 1);
	for (int i = 0; i < 3; i++)
		CHECK(pthread_join(t[i], NULL) == 0);
	CU(d.CtxSetCurrent(d.primary[0]));
	CU(d.PrimaryReset(0));
	CU(d.CtxSetCurrent(d.primary[0]));
	printf("reset-race: the device holds %zu MiB after the last reset\n", used(0) / MiB);
	CHECK(used(0) == 0);
	CUdeviceptr p[16];
	int n = 0;
	while (n < 16 && d.MemAlloc(&p[n], 4 * MiB) == CUDA_SUCCESS)
		n++;
	printf("reset-race: then %d x 4 MiB served\n", n);
	CHECK(n == 16 && used(0) <= 64 * MiB);
	for (int i = 0; i < n; i++)
		CU(d.MemFree(p[i]));
}

static void ranges(void)
{
	CUdeviceptr p, q;
	CU(d.MemAlloc(&p, 1000));
	CU(d.MemAlloc(&q, 1000));
	allocated(p, p, 1000);
	allocated(p + 999, p, 1000);
	not_allocated(p + 1000); /* inside the pool's 1024-byte block, past the allocation */
	if (pooled)
		not_allocated(q + 4095); /* the free rest of the segment */
	allocated(q + 10, q, 1000);
	CU(d.MemFree(p));
	not_allocated(p);
	CUipcMemHandle h;
	CUE(d.IpcGetMemHandle(&h, p), CUDA_ERROR_INVALID_VALUE); /* not the whole segment's */
	allocated(q, q, 1000);
	CU(d.MemFree(q));
	not_allocated(q);
	printf("ranges: allocations as asked, NOT_FOUND and INVALID_VALUE outside them (pool %s)\n",
	       pooled ? "on" : "off");
}

/* membarrier(2) answers ENOSYS from here on, as on Linux before 4.14, under valgrind or a
 * seccomp profile without it (E2E_NO_MEMBARRIER): a killed pool then stays parked for good. */
static void no_membarrier(void)
{
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_membarrier, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = {sizeof f / sizeof f[0], f};
	CHECK(prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 && prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) == 0);
	CHECK(syscall(__NR_membarrier, 0, 0, 0) == -1 && errno == ENOSYS);
}

int main(int argc, char **argv)
{
	CHECK(argc > 1);
	if (getenv("E2E_NO_MEMBARRIER"))
		no_membarrier();
	e2e_shm_dir();
	const char *off = getenv("GPUPOOL_DISABLE");
	pooled = !(off && *off == '1');
	e2e_drv_load(&d, 1);
	static const struct {
		const char *name;
		void (*fn)(void);
	} cases[] = {{"ctx-destroy", ctx_destroy},
		     {"reset-refused", reset_refused},
		     {"reset-cap", reset_cap},
		     {"reset-cap-busy-fence", reset_cap_busy_fence},
		     {"reset-race", reset_race},
		     {"ranges", ranges}};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
		if (!strcmp(argv[1], cases[i].name)) {
			cases[i].fn();
			return 0;
		}
	fprintf(stderr, "unknown case %s\n", argv[1]);
	return 2;
}
