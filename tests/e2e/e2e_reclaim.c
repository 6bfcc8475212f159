/* A process of the reclaim and wait scenarios (e2e_reclaim.sh, e2e_wait.sh), over the fake
 * runtime's machine-wide device (FAKECUDA_MACHINE): several processes compete for one capacity.
 *   e2e_reclaim hold MIB [SECONDS]   takes MIB in 64 MiB pieces, frees them with cudaFree
 *                                    (the pool keeps them), prints "ready", idles
 *   e2e_reclaim busy MIB [SECONDS]   the same, then allocates and frees 1 MiB blocks in a loop
 *                                    (a holder that is itself allocating)
 *   e2e_reclaim keep MIB [FREE_AFTER] takes MIB in 64 MiB pieces and keeps them in use
 *                                    (nothing idle to give), prints "ready"; after FREE_AFTER
 *                                    seconds (default: never) frees them, prints "freed", idles
 *   e2e_reclaim holdask HOLD ASK     takes HOLD MiB in 64 MiB pieces and keeps them, prints
 *                                    "ready", waits for SIGUSR1, then one cudaMalloc of ASK MiB:
 *                                    prints "ok" or the error and the time, frees all, exits
 *                                    0 ok, 3 out of memory
 *   e2e_reclaim ask MIB              one cudaMalloc of MIB: prints "ok" or the error, and the
 *                                    time it took; exit status 0 ok, 3 out of memory
 *   e2e_reclaim churn MIB PIECE SECONDS IDLE_MS [cache]
 *                                    rounds until SECONDS: takes MIB in PIECE MiB pieces, touches
 *                                    them, frees them, idles 0..IDLE_MS; a piece that fails
 *                                    frees the round's and starts the next round (an out of
 *                                    memory). With "cache", a framework's caching allocator
 *                                    (PyTorch's): the pieces are kept from round to round (its
 *                                    empty_cache on an out of memory finds none unused). Prints
 *                                    "rounds=R ooms=O allocs=A" and each allocation's wait in
 *                                    ms ("waits=a,b,...": those over 1 ms)
 *   e2e_reclaim probe MIB N          N cudaMalloc of MIB each, kept, the failures handled as a
 *                                    program that probes its way up does: prints "ok K failed F"
 * SIGINT or SIGTERM ends the idling: main returns and the exit report is written. */
#include <cuda_runtime_api.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t stop, go;
static void on_signal(int s) { (void)s, stop = 1; }
static void on_go(int s) { (void)s, go = 1; }

static double now_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static int ask(size_t mib)
{
	void *p = NULL;
	double t0 = now_s();
	cudaError_t e = cudaMalloc(&p, mib << 20);
	printf("%s seconds=%.3f\n", e == cudaSuccess ? "ok" : cudaGetErrorName(e), now_s() - t0);
	fflush(stdout);
	if (e == cudaSuccess)
		cudaFree(p);
	return e == cudaSuccess ? 0 : e == cudaErrorMemoryAllocation ? 3 : 1;
}

/* Rounds of MIB in PIECE MiB pieces, each freed at the end of its round (or kept, `cache`),
 * until `seconds`. */
static int churn(size_t mib, size_t piece, double seconds, unsigned idle_ms, bool cache)
{
	size_t n = mib / piece, cached = 0;
	void **v = calloc(n ? n : 1, sizeof *v);
	unsigned long rounds = 0, ooms = 0, allocs = 0;
	unsigned seed = (unsigned)getpid();
	char waits[65536] = "";
	size_t wl = 0;
	double end = now_s() + seconds;
	while (!stop && now_s() < end) {
		size_t k = cache ? cached : 0;
		bool oom = false;
		for (; k < n; k++) {
			double t0 = now_s();
			cudaError_t e = cudaMalloc(&v[k], piece << 20);
			double ms = (now_s() - t0) * 1e3;
			allocs++;
			if (ms > 1 && wl + 16 < sizeof waits)
				wl += (size_t)snprintf(waits + wl, sizeof waits - wl, "%s%.0f", wl ? "," : "", ms);
			if (e != cudaSuccess) {
				oom = true;
				break;
			}
		}
		/* the round's work: touch every piece */
		for (size_t i = 0; i < k; i++)
			cudaMemset(v[i], (int)(rounds & 0xff), piece << 20);
		cudaDeviceSynchronize();
		if (cache) {
			/* freed into the framework's cache: kept (an out of memory empties nothing: the
			 * cache held only what this round was using) */
			if (k > cached)
				cached = k;
		} else {
			for (size_t i = 0; i < k; i++)
				cudaFree(v[i]);
			cached = 0;
		}
		if (oom)
			ooms++;
		else
			rounds++;
		usleep((useconds_t)(rand_r(&seed) % (idle_ms + 1)) * 1000);
	}
	for (size_t i = 0; i < cached; i++)
		cudaFree(v[i]);
	printf("rounds=%lu ooms=%lu allocs=%lu waits=%s\n", rounds, ooms, allocs, waits);
	fflush(stdout);
	free(v);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: e2e_reclaim hold|busy|keep|holdask|ask|probe|churn MIB ...\n");
		return 2;
	}
	size_t mib = (size_t)strtoull(argv[2], NULL, 10);
	double seconds = argc > 3 ? atof(argv[3]) : 60;
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_signal;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sa.sa_handler = on_go;
	sigaction(SIGUSR1, &sa, NULL);
	if (!strcmp(argv[1], "probe")) {
		int n = argc > 3 ? atoi(argv[3]) : 1, ok = 0, failed = 0;
		for (int i = 0; i < n; i++) {
			void *p = NULL;
			if (cudaMalloc(&p, mib << 20) == cudaSuccess)
				ok++;
			else
				failed++, (void)cudaGetLastError();
		}
		printf("ok %d failed %d\n", ok, failed);
		return 0;
	}
	if (!strcmp(argv[1], "ask"))
		return ask(mib);
	if (!strcmp(argv[1], "churn")) {
		if (argc < 6)
			return 2;
		return churn(mib, (size_t)strtoull(argv[3], NULL, 10), atof(argv[4]), (unsigned)atoi(argv[5]),
			     argc > 6 && !strcmp(argv[6], "cache"));
	}
	bool keep = !strcmp(argv[1], "keep"), holdask = !strcmp(argv[1], "holdask");
	double free_after = keep && argc > 3 ? atof(argv[3]) : -1;
	if (keep)
		seconds = 60;
	size_t n = mib / 64;
	void **v = calloc(n ? n : 1, sizeof *v);
	for (size_t i = 0; i < n; i++) {
		cudaError_t e = cudaMalloc(&v[i], (size_t)64 << 20);
		if (e != cudaSuccess) {
			printf("hold: cudaMalloc %zu: %s\n", i, cudaGetErrorName(e));
			return 1;
		}
	}
	for (size_t i = 0; i < n && !keep && !holdask; i++)
		cudaFree(v[i]);
	cudaDeviceSynchronize(); /* the fence thread marks the frees done soon after */
	printf("ready\n");
	fflush(stdout);
	if (holdask) {
		while (!go && !stop)
			usleep(1000);
		int rc = stop ? 1 : ask((size_t)strtoull(argv[3], NULL, 10));
		for (size_t i = 0; i < n; i++)
			cudaFree(v[i]);
		free(v);
		return rc;
	}
	double t0 = now_s(), end = t0 + seconds;
	bool busy = !strcmp(argv[1], "busy");
	unsigned long rounds = 0;
	while (!stop && now_s() < end) {
		if (keep && free_after >= 0 && now_s() - t0 >= free_after) {
			for (size_t i = 0; i < n; i++)
				cudaFree(v[i]);
			n = 0;
			free_after = -1;
			printf("freed\n");
			fflush(stdout);
		}
		if (busy) {
			void *p = NULL;
			if (cudaMalloc(&p, 1 << 20) == cudaSuccess)
				cudaFree(p);
			rounds++;
			usleep(200);
		} else {
			usleep(keep ? 1000 : 20000);
		}
	}
	if (busy)
		printf("busy rounds=%lu\n", rounds);
	for (size_t i = 0; i < n && keep; i++)
		cudaFree(v[i]);
	free(v);
	return 0;
}
