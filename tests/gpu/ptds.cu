/* ptds (built with --default-stream per-thread): stream 0 is a different stream in each
 * thread, and the runtime calls become the _ptsz variants (cudaMallocAsync_ptsz, ...).
 * Six threads each write block A late on their stream 0, check it in stream order, free
 * it there with cudaFreeAsync(A, 0); after a barrier all of them allocate with
 * cudaMallocAsync(B, 0) and write B at once. A pool that keys "stream 0" as one stream
 * for every thread hands one thread's A to another while A's late kernel still runs. */
#include <pthread.h>

#include "common.h"

#define NT 6
#define ROUNDS 40

static pthread_barrier_t g_bar;
static unsigned long long *g_bad; /* one counter per thread, pinned host memory */

static void *worker(void *arg)
{
	int id = (int)(intptr_t)arg;
	unsigned long long *bad = &g_bad[id];
	CK(cudaSetDevice(0));
	for (int i = 0; i < ROUNDS; i++) {
		size_t size = (size_t)4096 << ((i + id) % 12); /* 4 KiB .. 8 MiB */
		uint32_t pa = 0xA0000000u + (uint32_t)(id << 16) + (uint32_t)i;
		uint32_t pb = 0xB0000000u + (uint32_t)(id << 16) + (uint32_t)i;
		uint32_t *a, *b;
		CK(cudaMallocAsync(&a, size, 0));
		gp_fill(a, size, pa, 100.0 + 50.0 * ((i * 7 + id) % 10), 0);
		gp_check_async(a, size, pa, bad, 0);
		CK(cudaFreeAsync(a, 0));
		pthread_barrier_wait(&g_bar);
		CK(cudaMallocAsync(&b, size, 0));
		gp_fill(b, size, pb, 0, 0);
		pthread_barrier_wait(&g_bar); /* every thread's B is written (enqueued) */
		CK(cudaDeviceSynchronize());
		gp_check_async(b, size, pb, bad, 0);
		CK(cudaFreeAsync(b, 0));
		CK(cudaStreamSynchronize(0));
		EXPECT(*bad == 0, "thread %d round %d size %zu: %llu bad words (A=%p B=%p)", id, i, size, *bad, (void *)a,
		       (void *)b);
		pthread_barrier_wait(&g_bar); /* nobody frees while another checks */
	}
	return NULL;
}

int main(void)
{
	gp_require_gpu();
	CK(cudaMallocHost(&g_bad, NT * sizeof *g_bad));
	memset(g_bad, 0, NT * sizeof *g_bad);
	pthread_barrier_init(&g_bar, NULL, NT);
	pthread_t th[NT];
	for (int i = 0; i < NT; i++)
		EXPECT(pthread_create(&th[i], NULL, worker, (void *)(intptr_t)i) == 0, "pthread_create");
	for (int i = 0; i < NT; i++)
		pthread_join(th[i], NULL);
	pthread_barrier_destroy(&g_bar);
	CK(cudaDeviceSynchronize());
	CK(cudaFreeHost(g_bad));
	printf("PASS ptds threads=%d rounds=%d shim=%d\n", NT, ROUNDS, gp_shim_loaded());
	return 0;
}
