/* Contract 1, cudaFree is a fence: a block freed with cudaFree while a delayed fake kernel
 * still writes into it is not handed to a new owner before that write has landed, and the
 * free itself returns at once (no device sync on the caller's thread). Argument "reuse":
 * run under a limit that leaves room for one block, so the new owner must get the old
 * block, behind a fence. */
#include <cuda_runtime_api.h>

#include "e2e_util.h"

int main(int argc, char **argv)
{
	int reuse = argc > 1 && !strcmp(argv[1], "reuse");
	e2e_shm_dir();
	static const size_t sizes[] = {512, 4096, 65536, 1 << 20, 3 << 20, 12 << 20};
	static const unsigned delays_us[] = {0, 2000, 50000, 5000};
	cudaStream_t k, w;
	CK(cudaStreamCreateWithFlags(&k, cudaStreamNonBlocking));
	CK(cudaStreamCreateWithFlags(&w, cudaStreamNonBlocking));
	unsigned long free0 = gpfake_calls("cudaFree");
	int same = 0, rounds = 0;
	uint64_t worst_free_ns = 0, worst_long_ns = 0; /* all rounds; rounds with the 50 ms kernel */
	for (int it = 0; it < 48; it++) {
		size_t n = reuse ? (size_t)12 << 20 : sizes[it % 6];
		unsigned delay = delays_us[(it / 6) % 4];
		void *a = NULL, *b = NULL;
		CK(cudaMalloc(&a, n));
		CK(gpfake_launch_fill(a, n, 0xAA, delay, k));
		unsigned long fk = gpfake_calls("cudaFree"), ds = gpfake_calls("cudaDeviceSynchronize");
		uint64_t t0 = e2e_now_ns();
		CK(cudaFree(a));
		uint64_t dt = e2e_now_ns() - t0;
		if (!reuse) /* neither a real free nor a sync on the caller's thread */
			CHECK(gpfake_calls("cudaFree") == fk && gpfake_calls("cudaDeviceSynchronize") - ds <= 1);
		if (dt > worst_free_ns)
			worst_free_ns = dt;
		if (delay == 50000 && dt > worst_long_ns)
			worst_long_ns = dt;
		CK(cudaMalloc(&b, n));
		same += a == b;
		CK(cudaMemsetAsync(b, 0x55, n, w));
		CK(cudaStreamSynchronize(w));
		CK(cudaDeviceSynchronize()); /* the delayed fill has run by now */
		CHECK(e2e_dev_all(b, n, 0x55));
		CK(cudaFree(b));
		rounds++;
	}
	CK(cudaDeviceSynchronize());
	e2e_wait_no_pending(0);
	struct gpupool_device_stats st = e2e_stats(0);
	printf("rounds=%d reused_same_block=%d worst_free_us=%llu fences=%llu inline_fences=%llu segments=%llu seg_frees=%llu releases=%llu oom_retries=%llu fake_frees=%lu\n",
	       rounds, same, (unsigned long long)(worst_free_ns / 1000), (unsigned long long)st.fences,
	       (unsigned long long)st.inline_fences, (unsigned long long)st.segment_allocs, (unsigned long long)st.segment_frees, (unsigned long long)st.releases, (unsigned long long)st.oom_retries, gpfake_calls("cudaFree") - free0);
	/* the 50 ms kernel did not hold cudaFree: waiting for it would take ~50 ms. The margin is
	 * for a loaded host (frees of 4.5 ms were seen with 12 copies of this test at once) */
	CHECK(worst_long_ns < 40000000ull);
	/* the pool kept the memory: real frees are only its own segment releases, far fewer than frees */
	CHECK(gpfake_calls("cudaFree") - free0 == st.segment_frees);
	CHECK(st.segment_frees * 2 < st.frees);
	CHECK(st.frees == (uint64_t)2 * rounds);
	CHECK(st.fences + st.inline_fences > 0);
	CHECK(st.live_blocks == 0 && st.pending_frees == 0);
	CHECK(gpfake_faults() == 0);
	if (reuse) {
		CHECK(same == rounds);   /* one block fits under the limit: every round reused it */
		CHECK(st.segment_allocs == 1);
	}
	CK(cudaStreamDestroy(k));
	CK(cudaStreamDestroy(w));
	return 0;
}
