/* Contract 2, per-thread default stream through the _ptsz entry points: built with
 * -DCUDA_API_PER_THREAD_DEFAULT_STREAM, so cudaMallocAsync(.., 0) is cudaMallocAsync_ptsz and
 * stream 0 is the calling thread's own stream. A block freed on thread A's stream 0 while a
 * delayed kernel writes it must not reach thread B's stream 0 unordered. */
#ifndef CUDA_API_PER_THREAD_DEFAULT_STREAM
#error "build with -DCUDA_API_PER_THREAD_DEFAULT_STREAM"
#endif
#include <pthread.h>
#include <cuda_runtime_api.h>

#include "e2e_util.h"

#define N ((size_t)12 << 20)

static pthread_barrier_t bar;

static void *thread_a(void *arg)
{
	(void)arg;
	void *p = NULL, *q = NULL;
	CK(cudaMallocAsync(&p, N, 0));
	CK(cudaFreeAsync(p, 0));
	CK(cudaMallocAsync(&q, N, 0));
	CHECK(p == q); /* same thread, same stream 0 */
	CK(gpfake_launch_fill(q, N, 0xAA, 30000, cudaStreamPerThread));
	CK(cudaFreeAsync(q, 0));
	pthread_barrier_wait(&bar); /* B allocates now */
	pthread_barrier_wait(&bar);
	CK(cudaStreamSynchronize(0));
	return NULL;
}

static void *thread_b(void *arg)
{
	(void)arg;
	pthread_barrier_wait(&bar);
	void *r = NULL;
	CK(cudaMallocAsync(&r, N, 0));
	CK(cudaMemsetAsync(r, 0x44, N, 0));
	CK(cudaStreamSynchronize(0));
	CK(cudaDeviceSynchronize());
	CHECK(e2e_dev_all(r, N, 0x44));
	CK(cudaFreeAsync(r, 0));
	CK(cudaStreamSynchronize(0));
	pthread_barrier_wait(&bar);
	return NULL;
}

int main(void)
{
	e2e_shm_dir();
	CHECK(pthread_barrier_init(&bar, NULL, 2) == 0);
	pthread_t a, b;
	CHECK(pthread_create(&a, NULL, thread_a, NULL) == 0);
	CHECK(pthread_create(&b, NULL, thread_b, NULL) == 0);
	pthread_join(a, NULL);
	pthread_join(b, NULL);
	/* the calls came through the _ptsz names: the pool served them, none reached the fake */
	CHECK(gpfake_calls("cudaMallocAsync_ptsz") == 0 && gpfake_calls("cudaMallocAsync") == 0);
	struct gpupool_device_stats st = e2e_stats(0);
	CHECK(st.allocs == 3 && st.frees == 3);
	/* during a capture of this thread's stream 0 the call passes through, as _ptsz */
	CK(cudaStreamBeginCapture(0, cudaStreamCaptureModeThreadLocal));
	void *x = NULL;
	CK(cudaMallocAsync(&x, 4096, 0));
	CHECK(gpfake_calls("cudaMallocAsync_ptsz") == 1);
	CK(cudaFreeAsync(x, 0));
	CHECK(gpfake_calls("cudaFreeAsync_ptsz") == 1);
	cudaGraph_t g = NULL;
	CK(cudaStreamEndCapture(0, &g));
	CK(cudaGraphDestroy(g));
	CHECK(gpfake_faults() == 0);
	return 0;
}
