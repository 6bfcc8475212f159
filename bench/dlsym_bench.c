/* gpupool-dlsym-bench: what one dlsym call costs in this process, in ns, for the kinds of
 * look-up a program makes: a libc name through RTLD_DEFAULT, a name on a library handle
 * (libm), a name that is nowhere (the slowest: every object searched), RTLD_NEXT, and a
 * driver name on libcuda's handle (the fake driver, when LD_LIBRARY_PATH finds it). Run it
 * with and without LD_PRELOAD=libgpupool.so (bench/dlsym_bench.sh interleaves the two). */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static volatile void *sink;

/* The best of 5 runs of n calls of dlsym(handle, name), in ns per call. */
static double per_call(void *handle, const char *name, long n)
{
	double best = 1e30;
	for (int r = 0; r < 5; r++) {
		uint64_t t0 = now_ns();
		for (long i = 0; i < n; i++)
			sink = dlsym(handle, name);
		double ns = (double)(now_ns() - t0) / (double)n;
		best = ns < best ? ns : best;
	}
	return best;
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 200000;
	if (n <= 0) {
		fprintf(stderr, "usage: gpupool-dlsym-bench [CALLS]\n");
		return 2;
	}
	void *m = dlopen("libm.so.6", RTLD_NOW);
	void *cu = dlopen("libcuda.so.1", RTLD_NOW);
	printf("RTLD_DEFAULT,malloc %.1f\n", per_call(RTLD_DEFAULT, "malloc", n));
	printf("libm-handle,cos %.1f\n", m ? per_call(m, "cos", n) : -1.0);
	printf("RTLD_DEFAULT,missing %.1f\n", per_call(RTLD_DEFAULT, "gp_no_such_symbol", n));
	printf("RTLD_NEXT,free %.1f\n", per_call(RTLD_NEXT, "free", n));
	printf("libcuda-handle,cuMemAlloc_v2 %.1f\n", cu ? per_call(cu, "cuMemAlloc_v2", n) : -1.0);
	printf("libcuda-handle,cuInit %.1f\n", cu ? per_call(cu, "cuInit", n) : -1.0);
	return 0;
}
