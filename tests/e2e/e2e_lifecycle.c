/* A device's pool over the runtime's lifecycle, one case per argument:
 *   ipc-freed   cudaIpcGetMemHandle of a freed block at its segment's base is refused
 *               (cudaErrorInvalidValue, as natively), not the whole segment exported;
 *   geometry    knobs whose segments cannot fit the device (run with FAKECUDA_CAPACITY=1G
 *               and GPUPOOL_CONF=small_segment:2G,medium_segment:3G,large_round:1G) or the
 *               limit (limit:48M,small_segment:64M) are adapted when the pool is made,
 *               with one warning line naming the knobs, their values and what is used
 *               instead (argv[2]: what that line must hold), and a request of each class
 *               is served;
 *   reset-race  ROUNDS KERNEL_US: cudaDeviceReset while another thread allocates (small and
 *               medium blocks, never touched nor freed: after a reset its pointers are stale,
 *               and natively freeing one could free a new owner's memory at the same address)
 *               and a fake kernel of KERNEL_US is in flight; after each reset 32 allocations
 *               must be device memory (cudaPointerGetAttributes, the fake's own table) and
 *               writable, and cudaDeviceSynchronize must succeed. FAKECUDA_RESET_DELAY_US
 *               widens the race (the fake sleeps before it resets);
 *   reset-loop  ROUNDS: cudaDeviceReset in a loop, each round with a small and a medium block
 *               live, one freed with cudaFree (the fence thread busy) and one stream-ordered
 *               free: the pools the resets kill are freed once no thread can be inside them,
 *               so neither the heap in use nor the resident set grows with the rounds
 *               (checked in builds without sanitizers, whose allocators keep freed memory;
 *               under AddressSanitizer its leak check at exit sees what was never freed). */
#include <cuda_runtime_api.h>
#include <fcntl.h>
#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>

#include "e2e_util.h"

static char **args;

static void ipc_freed(void)
{
	void *a = NULL, *b = NULL;
	CK(cudaMalloc(&a, 1000));
	CK(cudaMalloc(&b, 1000));
	CK(cudaFree(a));
	cudaIpcMemHandle_t h;
	CKE(cudaIpcGetMemHandle(&h, a), cudaErrorInvalidValue);
	CKE(cudaGetLastError(), cudaErrorInvalidValue);
	CK(cudaFree(b));
	printf("ipc-freed: refused\n");
}

/* Runs fn with stderr (fd 2, where gpupool writes) going to a file; its text into buf. */
static void capture_stderr(void (*fn)(void), char *buf, size_t cap)
{
	char path[] = "/tmp/e2e-lifecycle-XXXXXX";
	int fd = mkstemp(path);
	CHECK(fd >= 0);
	unlink(path);
	int saved = dup(2);
	CHECK(saved >= 0 && dup2(fd, 2) == 2);
	fn();
	CHECK(dup2(saved, 2) == 2);
	close(saved);
	ssize_t n = pread(fd, buf, cap - 1, 0);
	CHECK(n >= 0);
	buf[n] = '\0';
	close(fd);
}

static cudaError_t geometry_errs[3];
static void *geometry_ptrs[3];

static void geometry_allocs(void)
{
	static const size_t sizes[3] = {1000, 5 << 20, 20 << 20}; /* small, medium, large */
	for (int i = 0; i < 3; i++)
		geometry_errs[i] = cudaMalloc(&geometry_ptrs[i], sizes[i]);
}

static void geometry(void)
{
	char log[4096];
	capture_stderr(geometry_allocs, log, sizeof log);
	fputs(log, stderr);
	for (int i = 0; i < 3; i++)
		CK(geometry_errs[i]);
	int lines = 0;
	for (const char *l = log; (l = strstr(l, "gpupool: warning:")); l++)
		lines++;
	CHECK(lines == 1 && args[2] && strstr(log, args[2]));
	for (int i = 0; i < 3; i++) {
		CK(cudaMemset(geometry_ptrs[i], 0x22, 1000));
		CK(cudaFree(geometry_ptrs[i]));
	}
	printf("geometry: every class served, one warning\n");
}

static atomic_int race_stop;
static atomic_ulong race_allocs;

static void *race_allocator(void *arg)
{
	(void)arg;
	for (unsigned i = 0; !atomic_load(&race_stop); i++) {
		void *x = NULL;
		/* a small block, and now and then a medium one: each new pool grows segments */
		if (cudaMalloc(&x, i % 8 ? 4096 : (size_t)3 << 20) == cudaSuccess)
			atomic_fetch_add(&race_allocs, 1);
		(void)cudaGetLastError();
		struct timespec ts = {0, 20000};
		nanosleep(&ts, NULL);
	}
	return NULL;
}

static void reset_race(void)
{
	int rounds = args[2] ? atoi(args[2]) : 20;
	unsigned kernel_us = args[2] && args[3] ? (unsigned)atoi(args[3]) : 20000;
	pthread_t t;
	CHECK(pthread_create(&t, NULL, race_allocator, NULL) == 0);
	for (int r = 0; r < rounds; r++) {
		void *k = NULL;
		CK(cudaMalloc(&k, 1 << 20));
		CK(gpfake_launch_fill(k, 1 << 20, 0x33, kernel_us, 0)); /* in flight during the reset */
		CK(cudaDeviceReset());
		void *p[32];
		for (int i = 0; i < 32; i++) {
			size_t n = (size_t)4096 * (size_t)(i + 1);
			CK(cudaMalloc(&p[i], n));
			struct cudaPointerAttributes at;
			CK(cudaPointerGetAttributes(&at, p[i]));
			if (at.type != cudaMemoryTypeDevice) {
				fprintf(stderr, "round %d: allocation %d (%p) after the reset is not device memory\n", r, i,
					p[i]);
				exit(1);
			}
			CK(cudaMemset(p[i], i, n));
		}
		CK(cudaDeviceSynchronize());
		for (int i = 0; i < 32; i++)
			CK(cudaFree(p[i]));
	}
	atomic_store(&race_stop, 1);
	CHECK(pthread_join(t, NULL) == 0);
	printf("reset-race: %d rounds, %lu allocations by the other thread\n", rounds, atomic_load(&race_allocs));
}

/* The resident set, in KiB (VmRSS of /proc/self/status). */
static long rss_kib(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	CHECK(f != NULL);
	char line[256];
	long kib = -1;
	while (fgets(line, sizeof line, f))
		if (sscanf(line, "VmRSS: %ld kB", &kib) == 1)
			break;
	fclose(f);
	return kib;
}

/* Host memory in use from malloc, in KiB: what a leak grows even where freed pages the
 * allocator keeps hide it from the resident set. */
static long heap_kib(void)
{
	struct mallinfo2 mi = mallinfo2();
	return (long)((mi.uordblks + mi.hblkhd) >> 10);
}

static void reset_loop(void)
{
	int rounds = args[2] ? atoi(args[2]) : 1000;
	long rss0 = 0, heap0 = 0;
	for (int r = 0; r < rounds; r++) {
		void *a = NULL, *b = NULL, *c = NULL;
		CK(cudaMalloc(&a, 4096));
		CK(cudaMalloc(&b, 64 << 10));
		CK(cudaMallocAsync(&c, 8192, 0));
		CK(cudaMemset(a, 1, 4096));
		CK(cudaFree(a)); /* pending: the fence thread is woken */
		CK(cudaFreeAsync(c, 0));
		CK(cudaDeviceReset()); /* b dies with the device's memory */
		if (r == rounds / 10) {
			malloc_trim(0); /* what free() kept in its arenas is not a leak */
			rss0 = rss_kib();
			heap0 = heap_kib();
		}
	}
	malloc_trim(0);
	long rss = rss_kib(), heap = heap_kib();
	printf("reset-loop: %d rounds; after %d and at the end: resident %ld and %ld KiB, heap in use %ld and "
	       "%ld KiB\n", rounds, rounds / 10, rss0, rss, heap0, heap);
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
	/* a pool left behind per reset (about 16 KiB each) would grow both by ~14 MiB here (the
	 * sanitizers' allocators keep freed memory and answer mallinfo2 with zeros) */
	CHECK(rss - rss0 < 4096 && heap - heap0 < 1024);
#endif
}

int main(int argc, char **argv)
{
	CHECK(argc > 1);
	args = argv;
	e2e_shm_dir();
	static const struct {
		const char *name;
		void (*fn)(void);
	} cases[] = {{"ipc-freed", ipc_freed}, {"geometry", geometry}, {"reset-race", reset_race},
		     {"reset-loop", reset_loop}};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
		if (!strcmp(argv[1], cases[i].name)) {
			cases[i].fn();
			return 0;
		}
	fprintf(stderr, "unknown case %s\n", argv[1]);
	return 2;
}
