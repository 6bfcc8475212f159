/* A process of the reclaim scenarios (e2e_reclaim.sh), over the fake runtime's machine-wide
 * device (FAKECUDA_MACHINE): several processes compete for one capacity.
 *   e2e_reclaim hold MIB [SECONDS]   takes MIB in 64 MiB pieces, frees them with cudaFree
 *                                    (the pool keeps them), prints "ready", idles
 *   e2e_reclaim busy MIB [SECONDS]   the same, then allocates and frees 1 MiB blocks in a loop
 *                                    (a holder that is itself allocating)
 *   e2e_reclaim ask MIB              one cudaMalloc of MIB: prints "ok" or the error, and the
 *                                    time it took; exit status 0 ok, 3 out of memory
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

static volatile sig_atomic_t stop;
static void on_signal(int s) { (void)s, stop = 1; }

static double now_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: e2e_reclaim hold|busy|ask|probe MIB [SECONDS|N]\n");
		return 2;
	}
	size_t mib = (size_t)strtoull(argv[2], NULL, 10);
	double seconds = argc > 3 ? atof(argv[3]) : 60;
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_signal;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
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
	if (!strcmp(argv[1], "ask")) {
		void *p = NULL;
		double t0 = now_s();
		cudaError_t e = cudaMalloc(&p, mib << 20);
		printf("%s seconds=%.3f\n", e == cudaSuccess ? "ok" : cudaGetErrorName(e), now_s() - t0);
		if (e == cudaSuccess)
			cudaFree(p);
		return e == cudaSuccess ? 0 : e == cudaErrorMemoryAllocation ? 3 : 1;
	}
	size_t n = mib / 64;
	void **v = calloc(n ? n : 1, sizeof *v);
	for (size_t i = 0; i < n; i++) {
		cudaError_t e = cudaMalloc(&v[i], (size_t)64 << 20);
		if (e != cudaSuccess) {
			printf("hold: cudaMalloc %zu: %s\n", i, cudaGetErrorName(e));
			return 1;
		}
	}
	for (size_t i = 0; i < n; i++)
		cudaFree(v[i]);
	free(v);
	cudaDeviceSynchronize(); /* the fence thread marks the frees done soon after */
	printf("ready\n");
	fflush(stdout);
	double end = now_s() + seconds;
	bool busy = !strcmp(argv[1], "busy");
	unsigned long rounds = 0;
	while (!stop && now_s() < end) {
		if (busy) {
			void *p = NULL;
			if (cudaMalloc(&p, 1 << 20) == cudaSuccess)
				cudaFree(p);
			rounds++;
			usleep(200);
		} else {
			usleep(20000);
		}
	}
	if (busy)
		printf("busy rounds=%lu\n", rounds);
	return 0;
}
