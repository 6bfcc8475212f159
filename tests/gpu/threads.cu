/* threads: 8 host threads, each with its own non-blocking stream, allocate (cudaMalloc or
 * cudaMallocAsync), write a pattern, let it sit behind a short busy wait, check it in
 * stream order and free (cudaFree or cudaFreeAsync) many times, keeping a few blocks live
 * each. Any block handed to two owners at once, or reused while an old kernel still writes
 * it, shows up as a bad word; any error code fails the run. */
#include <pthread.h>

#include "common.h"

#define NT 8
#define ITERS 400
#define LIVE 6

static unsigned long long *g_bad;
static bool g_shim; /* libgpupool.so is loaded */

struct blk {
	uint32_t *p;
	size_t size;
	uint32_t pat;
	bool async;
};

static void *worker(void *arg)
{
	int id = (int)(intptr_t)arg;
	unsigned long long *bad = &g_bad[id];
	uint64_t rng = 88172645463325252ull + (uint64_t)id * 7919;
	cudaStream_t s;
	CK(cudaSetDevice(0));
	CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	struct blk live[LIVE] = {};
	for (int i = 0; i < ITERS; i++) {
		int k = (int)(gp_xorshift64(&rng) % LIVE);
		struct blk *b = &live[k];
		if (b->p) {
			/* check it (a short wait first, so a wrong co-owner's write lands before) */
			gp_spin_fill<<<1, 1, 0, s>>>(NULL, 0, 0, 20000);
			gp_check_async(b->p, b->size, b->pat, bad, s);
			/* mixed frees (cudaFreeAsync of cudaMalloc memory and the reverse) are the
			 * pool's promise; natively the first is undefined, so only under the shim */
			bool use_async = g_shim ? (gp_xorshift64(&rng) & 1) : b->async;
			if (use_async)
				CK(cudaFreeAsync(b->p, s));
			else
				CK(cudaFree(b->p));
			b->p = NULL;
		}
		size_t size = (size_t)512 << (gp_xorshift64(&rng) % 15); /* 512 B .. 8 MiB */
		size += 512 * (gp_xorshift64(&rng) % 4);
		b->size = size;
		b->pat = ((uint32_t)id << 28) + (uint32_t)i * 4096u;
		b->async = gp_xorshift64(&rng) & 1;
		if (b->async)
			CK(cudaMallocAsync(&b->p, size, s));
		else
			CK(cudaMalloc(&b->p, size));
		gp_fill(b->p, size, b->pat, (double)(gp_xorshift64(&rng) % 50), s);
		if (i % 50 == 49) {
			CK(cudaStreamSynchronize(s));
			EXPECT(*bad == 0, "thread %d iteration %d: %llu bad words", id, i, *bad);
		}
	}
	for (int k = 0; k < LIVE; k++) {
		if (!live[k].p)
			continue;
		gp_check_async(live[k].p, live[k].size, live[k].pat, bad, s);
		if (g_shim || live[k].async)
			CK(cudaFreeAsync(live[k].p, s));
		else
			CK(cudaFree(live[k].p));
	}
	CK(cudaStreamSynchronize(s));
	EXPECT(*bad == 0, "thread %d: %llu bad words at the end", id, *bad);
	CK(cudaStreamDestroy(s));
	return NULL;
}

int main(void)
{
	gp_require_gpu();
	g_shim = gp_shim_loaded();
	CK(cudaMallocHost(&g_bad, NT * sizeof *g_bad));
	memset(g_bad, 0, NT * sizeof *g_bad);
	double t0 = gp_now_us();
	pthread_t th[NT];
	for (int i = 0; i < NT; i++)
		EXPECT(pthread_create(&th[i], NULL, worker, (void *)(intptr_t)i) == 0, "pthread_create");
	for (int i = 0; i < NT; i++)
		pthread_join(th[i], NULL);
	CK(cudaDeviceSynchronize());
	CK(cudaFreeHost(g_bad));
	printf("PASS threads threads=%d iterations=%d shim=%d seconds=%.2f\n", NT, ITERS, gp_shim_loaded(),
	       (gp_now_us() - t0) / 1e6);
	return 0;
}
