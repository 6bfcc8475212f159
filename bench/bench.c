/* gpupool-bench: host cost of the pool core on the fake backend, one key=value per line.
 * Measures the pool alone (no CUDA, no interposer): same-size alloc+free pairs on one
 * stream, the mixed live set of ANCHORS.md at two scales, and two threads sharing one
 * device's pool. See BENCHMARKS.md for how each figure is taken. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend_fake.h"
#include "pool.h"

#define STREAM ((gp_stream)0x1000)

static inline uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static gp_pool *new_pool(struct gp_fake_backend *fb, struct gpupool_device_stats *st)
{
	struct gp_pool_params prm;
	gp_pool_params_default(&prm);
	gp_fake_backend_init(fb, 0);
	memset(st, 0, sizeof *st);
	gp_pool *p;
	if (gp_pool_create(&p, 0, &prm, &fb->be, st)) {
		fprintf(stderr, "gpupool-bench: cannot create a pool\n");
		exit(1);
	}
	return p;
}

/* Median over batches of the mean time of one alloc+free pair in the batch. */
static double pair_median(size_t size)
{
	enum { BATCH = 256, BATCHES = 401, WARM = 2000 };
	struct gp_fake_backend fb;
	struct gpupool_device_stats st;
	gp_pool *p = new_pool(&fb, &st);
	uintptr_t a;
	for (int i = 0; i < WARM; i++) {
		gp_pool_alloc(p, size, STREAM, &a);
		gp_pool_free(p, a, STREAM);
	}
	static double v[BATCHES];
	for (int b = 0; b < BATCHES; b++) {
		uint64_t t0 = now_ns();
		for (int i = 0; i < BATCH; i++) {
			if (gp_pool_alloc(p, size, STREAM, &a) || gp_pool_free(p, a, STREAM)) {
				fprintf(stderr, "gpupool-bench: pair of %zu bytes failed\n", size);
				exit(1);
			}
		}
		v[b] = (double)(now_ns() - t0) / BATCH;
	}
	qsort(v, BATCHES, sizeof v[0], cmp_double);
	if (st.segment_allocs != 1) {
		fprintf(stderr, "gpupool-bench: pairs of %zu bytes took %llu segments\n", size,
			(unsigned long long)st.segment_allocs);
		exit(1);
	}
	gp_pool_destroy(p);
	return v[BATCHES / 2];
}

static uint64_t xorshift64(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* The mixed pattern of ANCHORS.md: up to `maxlive` live blocks, sizes log-uniform in
 * 512 B..64 MiB, `ops` random allocs/frees, xorshift64 seed 88172645463325252. Each call
 * is timed alone; the timer's own cost (median of empty reads) is subtracted. */
static void mixed(long ops, size_t maxlive, double *alloc_mean, double *free_mean, uint64_t *reserved_peak)
{
	struct gp_fake_backend fb;
	struct gpupool_device_stats st;
	gp_pool *p = new_pool(&fb, &st);
	uintptr_t *live = calloc(maxlive, sizeof *live);
	double tov[101];
	for (int i = 0; i < 101; i++) {
		uint64_t t0 = now_ns();
		tov[i] = (double)(now_ns() - t0);
	}
	qsort(tov, 101, sizeof tov[0], cmp_double);
	double timer = tov[50];
	uint64_t seed = 88172645463325252ull;
	size_t n = 0;
	double ta = 0, tf = 0;
	long na = 0, nf = 0;
	const double lo = log(512.0), hi = log(64.0 * 1024 * 1024);
	for (long i = 0; i < ops; i++) {
		uint64_t r = xorshift64(&seed);
		if (n == 0 || (n < maxlive && (r & 1))) {
			double u = (double)(xorshift64(&seed) >> 11) / 9007199254740992.0;
			size_t size = (size_t)exp(lo + u * (hi - lo));
			uint64_t t0 = now_ns();
			int rc = gp_pool_alloc(p, size, STREAM, &live[n]);
			ta += (double)(now_ns() - t0) - timer;
			if (rc) {
				fprintf(stderr, "gpupool-bench: mixed alloc failed\n");
				exit(1);
			}
			n++;
			na++;
		} else {
			size_t k = (size_t)(xorshift64(&seed) % n);
			uintptr_t a = live[k];
			live[k] = live[--n];
			uint64_t t0 = now_ns();
			gp_pool_free(p, a, STREAM);
			tf += (double)(now_ns() - t0) - timer;
			nf++;
		}
	}
	*alloc_mean = ta / (double)na;
	*free_mean = tf / (double)nf;
	*reserved_peak = st.reserved_bytes_peak;
	free(live);
	gp_pool_destroy(p);
}

struct thr {
	gp_pool *p;
	gp_stream s;
	long pairs;
	double ns;
};

static void *thread_pairs(void *arg)
{
	struct thr *t = arg;
	uintptr_t a[4];
	static const size_t sizes[4] = {512, 65536, 3u << 20, 40u << 20};
	uint64_t t0 = now_ns();
	for (long i = 0; i < t->pairs; i++) {
		for (int k = 0; k < 4; k++)
			gp_pool_alloc(t->p, sizes[k], t->s, &a[k]);
		for (int k = 0; k < 4; k++)
			gp_pool_free(t->p, a[k], t->s);
	}
	t->ns = (double)(now_ns() - t0) / (double)(t->pairs * 8);
	return NULL;
}

/* Two threads, each on its own stream, allocating and freeing on one device's pool. */
static double threads2(void)
{
	struct gp_fake_backend fb;
	struct gpupool_device_stats st;
	gp_pool *p = new_pool(&fb, &st);
	struct thr t[2] = {{p, 0x1000, 200000, 0}, {p, 0x2000, 200000, 0}};
	pthread_t th[2];
	for (int i = 0; i < 2; i++)
		pthread_create(&th[i], NULL, thread_pairs, &t[i]);
	for (int i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	gp_pool_destroy(p);
	return (t[0].ns + t[1].ns) / 2;
}

int main(int argc, char **argv)
{
	(void)argv;
	if (argc > 1) {
		fprintf(stderr, "usage: gpupool-bench\n  measures the pool core on the fake backend; "
				"prints key=value lines\n");
		return 2;
	}
	static const size_t sizes[] = {512, 65536, 2097152, 33554432, 268435456, 1073741824};
	for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
		printf("pair_ns_median_%zu=%.1f\n", sizes[i], pair_median(sizes[i]));
	double am, fm;
	uint64_t rp;
	mixed(20000, 2000, &am, &fm, &rp);
	printf("mixed_alloc_ns_mean=%.1f\nmixed_free_ns_mean=%.1f\n", am, fm);
	mixed(200000, 20000, &am, &fm, &rp);
	printf("mixed20k_alloc_ns_mean=%.1f\nmixed20k_free_ns_mean=%.1f\n", am, fm);
	printf("threads2_ns_mean=%.1f\n", threads2());
	return 0;
}
