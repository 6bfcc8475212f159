/* gpupool_stats while the pool is inside a slow runtime call: with release_threshold:0, a
 * cudaFreeAsync that frees a whole segment hands it back at once, and the real cudaFree
 * waits for the device's work (here a fake kernel of 500 ms) with the device's counters
 * mid-update. gpupool_stats, called over and over meanwhile, must wait for them and
 * answer 0 every time (never -EAGAIN). */
#include <pthread.h>
#include <stdatomic.h>
#include <cuda_runtime_api.h>

#include "e2e_util.h"

static atomic_int freed;
static void *block;
static cudaStream_t s;
static uint64_t free_ns;

static void *free_block(void *arg)
{
	(void)arg;
	uint64_t t = e2e_now_ns();
	CK(cudaFreeAsync(block, s)); /* a whole free segment: handed back, waiting for the kernel */
	free_ns = e2e_now_ns() - t;
	atomic_store(&freed, 1);
	return NULL;
}

int main(void)
{
	e2e_shm_dir();
	e2e_stats_fn stats = e2e_stats_api();
	CHECK(stats != NULL);
	cudaStream_t busy;
	CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	CK(cudaStreamCreateWithFlags(&busy, cudaStreamNonBlocking));
	CK(cudaMallocAsync(&block, 32 << 20, s)); /* a segment of its own */
	CK(cudaStreamSynchronize(s));
	typedef cudaError_t (*malloc_fn)(void **, size_t);
	malloc_fn native_malloc;
	E2E_FN(native_malloc, e2e_native("cudaMalloc"));
	void *dev = NULL;
	CK(native_malloc(&dev, 4096));
	CK(gpfake_launch_fill(dev, 4096, 0x11, 500000, busy));

	pthread_t th;
	CHECK(pthread_create(&th, NULL, free_block, NULL) == 0);
	unsigned long calls = 0;
	while (!atomic_load(&freed)) {
		struct gpupool_device_stats st;
		int rc = stats(0, &st);
		if (rc != 0) {
			fprintf(stderr, "gpupool_stats(0) = %d after %lu good calls\n", rc, calls);
			return 1;
		}
		calls++;
	}
	CHECK(pthread_join(th, NULL) == 0);
	struct gpupool_device_stats st = e2e_stats(0);
	printf("%lu calls of gpupool_stats while cudaFreeAsync took %.0f ms\n", calls, free_ns / 1e6);
	CHECK(st.segment_frees == 1 && st.reserved_bytes == 0);
	CHECK(free_ns >= 400000000ull); /* it did wait for the kernel (a lower bound only) */
	CK(cudaStreamSynchronize(busy));
	CK(cudaFree(dev));
	return 0;
}
