/* Contract 2, cudaFreeAsync is stream-ordered: a block freed on S is reused at once by an
 * allocation on S; an allocation on T gets it only behind an event, so a delayed kernel
 * queued on S before the free lands before T's writes; cudaStreamPerThread names a
 * different stream in each thread. 12 MiB blocks get segments of their own, so the only
 * block that fits is the freed one. */
#include <pthread.h>
#include <cuda_runtime_api.h>

#include "e2e_util.h"

#define N ((size_t)12 << 20)

static void *pts_ptr;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int phase;

static void *pts_first(void *arg)
{
	(void)arg;
	void *p = NULL, *q = NULL;
	CK(cudaMallocAsync(&p, N, cudaStreamPerThread));
	CK(cudaFreeAsync(p, cudaStreamPerThread));
	CK(cudaMallocAsync(&q, N, cudaStreamPerThread));
	CHECK(p == q); /* same thread, same per-thread stream: reused at once */
	CK(gpfake_launch_fill(q, N, 0xAA, 30000, cudaStreamPerThread));
	CK(cudaFreeAsync(q, cudaStreamPerThread));
	pthread_mutex_lock(&mu);
	pts_ptr = q;
	phase = 1;
	pthread_cond_broadcast(&cv);
	while (phase != 2)
		pthread_cond_wait(&cv, &mu);
	pthread_mutex_unlock(&mu);
	CK(cudaStreamSynchronize(cudaStreamPerThread));
	return NULL;
}

static void *pts_second(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&mu);
	while (phase != 1)
		pthread_cond_wait(&cv, &mu);
	pthread_mutex_unlock(&mu);
	void *r = NULL;
	/* another thread's per-thread stream: not ours to reuse without ordering */
	CK(cudaMallocAsync(&r, N, cudaStreamPerThread));
	CK(cudaMemsetAsync(r, 0x33, N, cudaStreamPerThread));
	CK(cudaStreamSynchronize(cudaStreamPerThread));
	CK(cudaDeviceSynchronize());
	CHECK(e2e_dev_all(r, N, 0x33));
	CK(cudaFreeAsync(r, cudaStreamPerThread));
	CK(cudaStreamSynchronize(cudaStreamPerThread));
	pthread_mutex_lock(&mu);
	phase = 2;
	pthread_cond_broadcast(&cv);
	pthread_mutex_unlock(&mu);
	return NULL;
}

int main(void)
{
	e2e_shm_dir();
	cudaStream_t s, t;
	CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	CK(cudaStreamCreateWithFlags(&t, cudaStreamNonBlocking));
	unsigned long fa0 = gpfake_calls("cudaFreeAsync"), ma0 = gpfake_calls("cudaMallocAsync");

	/* same stream: immediate reuse, stream order keeps the data right */
	for (int i = 0; i < 5; i++) {
		void *a = NULL, *b = NULL;
		CK(cudaMallocAsync(&a, N, s));
		CK(gpfake_launch_fill(a, N, 0xAA, 50000, s));
		uint64_t t0 = e2e_now_ns();
		CK(cudaFreeAsync(a, s));
		CK(cudaMallocAsync(&b, N, s));
		CHECK(e2e_now_ns() - t0 < 40000000ull); /* did not wait for the 50 ms kernel */
		CHECK(a == b);
		CK(cudaMemsetAsync(b, 0x11, N, s));
		CK(cudaStreamSynchronize(s));
		CHECK(e2e_dev_all(b, N, 0x11));
		CK(cudaFreeAsync(b, s));
	}
	CK(cudaStreamSynchronize(s));

	/* another stream: only behind an event */
	int stolen = 0;
	for (int i = 0; i < 5; i++) {
		void *a = NULL, *c = NULL;
		CK(cudaMallocAsync(&a, N, s));
		CK(gpfake_launch_fill(a, N, 0xAA, 20000, s));
		CK(cudaFreeAsync(a, s));
		CK(cudaMallocAsync(&c, N, t));
		stolen += a == c;
		CK(cudaMemsetAsync(c, 0x22, N, t));
		CK(cudaStreamSynchronize(t));
		CK(cudaDeviceSynchronize());
		CHECK(e2e_dev_all(c, N, 0x22));
		CK(cudaFreeAsync(c, t));
		CK(cudaStreamSynchronize(t));
		/* hand the block back to s's list for the next round */
		void *d = NULL;
		CK(cudaMallocAsync(&d, N, s));
		CK(cudaFreeAsync(d, s));
	}
	struct gpupool_device_stats st = e2e_stats(0);
	printf("stolen=%d stream_steals=%llu segments=%llu\n", stolen, (unsigned long long)st.stream_steals,
	       (unsigned long long)st.segment_allocs);
	CHECK(stolen > 0 && st.stream_steals > 0); /* the cross-stream path was exercised */

	/* the per-thread default stream is a different stream in each thread */
	pthread_t t1, t2;
	CHECK(pthread_create(&t1, NULL, pts_first, NULL) == 0);
	CHECK(pthread_create(&t2, NULL, pts_second, NULL) == 0);
	pthread_join(t1, NULL);
	pthread_join(t2, NULL);

	CK(cudaDeviceSynchronize());
	CHECK(gpfake_calls("cudaFreeAsync") == fa0 && gpfake_calls("cudaMallocAsync") == ma0);
	CHECK(gpfake_faults() == 0);
	CK(cudaStreamDestroy(s));
	CK(cudaStreamDestroy(t));
	return 0;
}
