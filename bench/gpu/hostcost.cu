/* hostcost: host time per allocation call (the patterns of ANCHORS.md). The same binary
 * runs without the shim (the runtime's own cost) and under LD_PRELOAD=libgpupool.so (then
 * "sync" measures gpupool's cudaMalloc/cudaFree path and "async*" its stream path).
 *   hostcost sync|async0|asyncs [pairs|mixed|all]
 *     sync    cudaMalloc / cudaFree
 *     async0  cudaMallocAsync / cudaFreeAsync on stream 0 (the device's default pool natively)
 *     asyncs  the same on a created non-blocking stream
 * pairs: alloc then free of one size, repeated; median per call and per pair.
 * mixed: up to 2000 live blocks, 20,000 operations, xorshift64 from 88172645463325252:
 *   r = next(); alloc when live == 0 or (live < 2000 and r & 1), else free live[next() % live]
 *   (swap-remove); an alloc's size is exp(ln 512 + u * (ln 64Mi - ln 512)) with
 *   u = (next() >> 11) * 2^-53, rounded down to a multiple of 8 bytes.
 * Prints key=value lines, one per measurement. */
#include <algorithm>
#include <cmath>
#include <vector>

#include "../../tests/gpu/common.h"

static const char *g_mode;
static cudaStream_t g_stream;
static bool g_async;

static inline cudaError_t do_alloc(void **p, size_t n)
{
	return g_async ? cudaMallocAsync(p, n, g_stream) : cudaMalloc(p, n);
}

static inline cudaError_t do_free(void *p) { return g_async ? cudaFreeAsync(p, g_stream) : cudaFree(p); }

static double median(std::vector<double> &v)
{
	std::sort(v.begin(), v.end());
	return v.empty() ? 0 : v[v.size() / 2];
}

static double pct(std::vector<double> &v, double q) /* v sorted */
{
	return v.empty() ? 0 : v[std::min(v.size() - 1, (size_t)(q * (double)v.size()))];
}

static void pairs(int shim)
{
	static const size_t sizes[] = {512, 64u << 10, 2u << 20, 32u << 20, 256u << 20, 1u << 30};
	static const char *names[] = {"512B", "64KiB", "2MiB", "32MiB", "256MiB", "1GiB"};
	for (int k = 0; k < 6; k++) {
		/* the native synchronous path costs 0.1-1 ms per pair: fewer pairs there */
		int n = g_async || shim ? 20000 : (k < 3 ? 2000 : k < 5 ? 600 : 200);
		std::vector<double> ta, tf, tp;
		ta.reserve(n);
		tf.reserve(n);
		tp.reserve(n);
		for (int i = 0; i < n + 20; i++) {
			void *p = NULL;
			double t0 = gp_now_us();
			CK(do_alloc(&p, sizes[k]));
			double t1 = gp_now_us();
			CK(do_free(p));
			double t2 = gp_now_us();
			if (i < 20)
				continue; /* warm-up */
			ta.push_back(t1 - t0);
			tf.push_back(t2 - t1);
			tp.push_back(t2 - t0);
		}
		/* the same pairs timed as one batch: no clock read inside */
		double b0 = gp_now_us();
		for (int i = 0; i < n; i++) {
			void *p = NULL;
			CK(do_alloc(&p, sizes[k]));
			CK(do_free(p));
		}
		double batch = (gp_now_us() - b0) / n;
		CK(cudaDeviceSynchronize());
		double ma = median(ta), mf = median(tf), mp = median(tp);
		printf("bench=hostcost pattern=pair mode=%s shim=%d size=%s n=%d alloc_us=%.3f free_us=%.3f pair_us=%.3f "
		       "pair_p99_us=%.3f pair_batch_us=%.3f\n",
		       g_mode, shim, names[k], n, ma, mf, mp, pct(tp, 0.99), batch);
		fflush(stdout);
	}
}

static void mixed(int shim)
{
	const int max_live = 2000, ops = 20000;
	uint64_t s = 88172645463325252ull;
	std::vector<void *> live;
	live.reserve(max_live);
	std::vector<double> ta, tf;
	const double lo = std::log(512.0), hi = std::log(64.0 * 1024 * 1024);
	for (int i = 0; i < ops; i++) {
		uint64_t r = gp_xorshift64(&s);
		int n = (int)live.size();
		if (n == 0 || (n < max_live && (r & 1))) {
			double u = (double)(gp_xorshift64(&s) >> 11) * 0x1.0p-53;
			size_t size = (size_t)std::exp(lo + u * (hi - lo)) & ~(size_t)7;
			void *p = NULL;
			double t0 = gp_now_us();
			CK(do_alloc(&p, size));
			ta.push_back(gp_now_us() - t0);
			live.push_back(p);
		} else {
			size_t k = (size_t)(gp_xorshift64(&s) % (uint64_t)n);
			void *p = live[k];
			live[k] = live.back();
			live.pop_back();
			double t0 = gp_now_us();
			CK(do_free(p));
			tf.push_back(gp_now_us() - t0);
		}
	}
	for (void *p : live)
		CK(do_free(p));
	CK(cudaDeviceSynchronize());
	double sa = 0, sf = 0;
	for (double x : ta)
		sa += x;
	for (double x : tf)
		sf += x;
	double mean_a = ta.empty() ? 0 : sa / (double)ta.size(), mean_f = tf.empty() ? 0 : sf / (double)tf.size();
	printf("bench=hostcost pattern=mixed mode=%s shim=%d allocs=%zu frees=%zu alloc_mean_us=%.3f free_mean_us=%.3f "
	       "alloc_median_us=%.3f free_median_us=%.3f\n",
	       g_mode, shim, ta.size(), tf.size(), mean_a, mean_f, median(ta), median(tf));
}

int main(int argc, char **argv)
{
	if (argc < 2 || (strcmp(argv[1], "sync") && strcmp(argv[1], "async0") && strcmp(argv[1], "asyncs"))) {
		fprintf(stderr, "usage: hostcost sync|async0|asyncs [pairs|mixed|all]\n");
		return 2;
	}
	gp_require_gpu();
	g_mode = argv[1];
	g_async = strcmp(g_mode, "sync") != 0;
	if (!strcmp(g_mode, "asyncs"))
		CK(cudaStreamCreateWithFlags(&g_stream, cudaStreamNonBlocking));
	const char *what = argc > 2 ? argv[2] : "all";
	int shim = gp_shim_loaded();
	if (!strcmp(what, "pairs") || !strcmp(what, "all"))
		pairs(shim);
	if (!strcmp(what, "mixed") || !strcmp(what, "all"))
		mixed(shim);
	if (g_stream)
		CK(cudaStreamDestroy(g_stream));
	return 0;
}
