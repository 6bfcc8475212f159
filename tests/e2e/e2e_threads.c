/* Contract 11, threads: 8 threads allocate and free with cudaMalloc/cudaFree and
 * cudaMallocAsync/cudaFreeAsync on their own streams, some blocks freed while a delayed
 * kernel still writes them, every new owner's bytes checked. */
#include <pthread.h>
#include <cuda_runtime_api.h>

#include "e2e_util.h"

#define NT 8
#define ITERS 120

static void *worker(void *arg)
{
	int id = (int)(intptr_t)arg;
	cudaStream_t s;
	CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	static const size_t sizes[] = {512, 3000, 65536, 700000, 1 << 20, 3 << 20};
	unsigned char *h = malloc(3 << 20);
	CHECK(h != NULL);
	unsigned seed = 12345u + (unsigned)id;
	for (int i = 0; i < ITERS; i++) {
		seed = seed * 1103515245u + 12345u;
		size_t n = sizes[(seed >> 16) % 6];
		int async = (seed >> 8) & 1;
		unsigned char v = (unsigned char)(id * 31 + i);
		void *p = NULL;
		if (async)
			CK(cudaMallocAsync(&p, n, s));
		else
			CK(cudaMalloc(&p, n));
		CK(cudaMemsetAsync(p, v, n, s));
		CK(cudaMemcpyAsync(h, p, n, cudaMemcpyDeviceToHost, s));
		CK(cudaStreamSynchronize(s));
		for (size_t k = 0; k < n; k += 97)
			CHECK(h[k] == v);
		CHECK(h[n - 1] == v);
		if ((seed >> 20) % 4 == 0) /* still being written when freed */
			CK(gpfake_launch_fill(p, n, 0xEE, 500, s));
		if (async)
			CK(cudaFreeAsync(p, s));
		else
			CK(cudaFree(p));
	}
	CK(cudaStreamSynchronize(s));
	CK(cudaStreamDestroy(s));
	free(h);
	return NULL;
}

int main(void)
{
	e2e_shm_dir();
	pthread_t t[NT];
	for (int i = 0; i < NT; i++)
		CHECK(pthread_create(&t[i], NULL, worker, (void *)(intptr_t)i) == 0);
	for (int i = 0; i < NT; i++)
		pthread_join(t[i], NULL);
	CK(cudaDeviceSynchronize());
	e2e_wait_no_pending(0);
	struct gpupool_device_stats st = e2e_stats(0);
	printf("allocs=%llu hits=%llu segments=%llu fences=%llu steals=%llu\n", (unsigned long long)st.allocs,
	       (unsigned long long)st.hits, (unsigned long long)st.segment_allocs, (unsigned long long)st.fences,
	       (unsigned long long)st.stream_steals);
	CHECK(st.allocs == NT * ITERS && st.frees == NT * ITERS);
	CHECK(st.live_blocks == 0 && st.allocated_bytes == 0 && st.invalid_frees == 0);
	CHECK(st.hits > st.allocs / 2);
	CHECK(gpfake_faults() == 0);
	return 0;
}
