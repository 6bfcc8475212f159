/* Knobs reach the pool. Modes (argv[1]):
 *  disable  (GPUPOOL_DISABLE=1) every hooked call reaches the runtime, no page, no stats;
 *  basic    allocate and free (the report knobs are checked by e2e_knobs.sh);
 *  sync     (fence:sync) cudaFree fences before it returns, like native cudaFree;
 *  inline   (fence:inline) no fence thread; blocks wait until an allocation fences;
 *  thread   (default) a fence thread starts with the first pool. */
#include <cuda_runtime_api.h>

#include "e2e_util.h"

#define N 20

static void alloc_free_cycle(void)
{
	void *p[N];
	for (int i = 0; i < N; i++)
		CK(cudaMalloc(&p[i], 4096));
	for (int i = 0; i < N; i++)
		CK(cudaFree(p[i]));
}

int main(int argc, char **argv)
{
	e2e_shm_dir();
	const char *mode = argc > 1 ? argv[1] : "basic";
	int t0 = e2e_thread_count();
	if (!strcmp(mode, "disable")) {
		void *p[N], *q[N];
		for (int i = 0; i < N; i++) {
			CK(cudaMalloc(&p[i], 4096));
			CK(cudaMallocAsync(&q[i], 4096, 0));
		}
		for (int i = 0; i < N; i++) {
			CK(cudaFree(p[i]));
			CK(cudaFreeAsync(q[i], 0));
		}
		CK(cudaDeviceSynchronize());
		CHECK(gpfake_calls("cudaMalloc") == N && gpfake_calls("cudaFree") == N);
		CHECK(gpfake_calls("cudaMallocAsync") == N && gpfake_calls("cudaFreeAsync") == N);
		struct gpupool_device_stats st;
		CHECK(e2e_stats_api()(0, &st) == -ENOSYS);
		CHECK(e2e_count_pages() == 0);
	} else if (!strcmp(mode, "sync")) {
		cudaStream_t s;
		CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
		for (int i = 0; i < 3; i++) {
			void *p = NULL;
			CK(cudaMalloc(&p, 65536));
			CK(gpfake_launch_fill(p, 65536, 0xAA, 20000, s));
			uint64_t t = e2e_now_ns();
			CK(cudaFree(p));
			t = e2e_now_ns() - t;
			CHECK(t >= 15000000ull); /* waited for the kernel */
			CHECK(e2e_stats(0).pending_frees == 0);
		}
		CHECK(e2e_stats(0).fences >= 3);
	} else if (!strcmp(mode, "inline") || !strcmp(mode, "thread")) {
		alloc_free_cycle(); /* no stream work: the fake starts no worker thread */
		/* the fake's workers start with its first stream operation, which the fence
		 * thread's first marker (an event recorded) may be at any moment: the count is
		 * taken between two equal readings of the workers (the fake starts them all under
		 * the lock gpfake_workers takes, so a start in between changes the second) */
		int extra, w1, w2;
		do {
			w1 = gpfake_workers();
			extra = e2e_thread_count() - t0;
			w2 = gpfake_workers();
		} while (w1 != w2);
		extra -= w1;
		struct gpupool_device_stats st = e2e_stats(0);
		printf("extra threads %d, pending %llu\n", extra, (unsigned long long)st.pending_frees);
		/* the release thread, in every mode; the fence thread with fence:thread */
		if (!strcmp(mode, "inline")) {
			CHECK(extra == 1);
			CHECK(st.pending_frees == N); /* nobody fences until an allocation must */
			CHECK(gpfake_calls("cudaDeviceSynchronize") == 0);
			CK(cudaSetDevice(0));
		} else {
			CHECK(extra == 2);
			e2e_wait_no_pending(0);
		}
	} else {
		alloc_free_cycle();
	}
	return 0;
}
