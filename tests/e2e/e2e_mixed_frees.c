/* Contract 3, mixed frees are legal: cudaFree on cudaMallocAsync memory fences it like any
 * cudaFree; cudaFreeAsync on cudaMalloc memory is stream-ordered on the stream given. Run
 * with a limit that holds one 12 MiB block, so the next owner is always the freed block. */
#include <cuda_runtime_api.h>

#include "e2e_util.h"

#define N ((size_t)12 << 20)

int main(void)
{
	e2e_shm_dir();
	cudaStream_t s, t;
	CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	CK(cudaStreamCreateWithFlags(&t, cudaStreamNonBlocking));
	unsigned long f0 = gpfake_calls("cudaFree"), fa0 = gpfake_calls("cudaFreeAsync");
	for (int i = 0; i < 6; i++) {
		/* cudaMallocAsync memory, freed with cudaFree, next owner on another stream */
		void *a = NULL, *b = NULL;
		CK(cudaMallocAsync(&a, N, s));
		CK(gpfake_launch_fill(a, N, 0xAA, 50000, s));
		uint64_t t0 = e2e_now_ns();
		CK(cudaFree(a));
		CHECK(e2e_now_ns() - t0 < 40000000ull); /* did not wait for the 50 ms kernel */
		if (i % 2)
			CK(cudaMalloc(&b, N));
		else
			CK(cudaMallocAsync(&b, N, t));
		CHECK(a == b);
		CK(cudaMemsetAsync(b, 0x5A, N, t));
		CK(cudaStreamSynchronize(t));
		CK(cudaDeviceSynchronize());
		CHECK(e2e_dev_all(b, N, 0x5A));

		/* cudaMalloc memory freed with cudaFreeAsync: reused at once on s, data in order */
		CK(cudaFree(b));
		void *c = NULL, *d = NULL, *e = NULL;
		CK(cudaMalloc(&c, N));
		CHECK(c == a);
		CK(gpfake_launch_fill(c, N, 0xBB, 15000, s));
		CK(cudaFreeAsync(c, s));
		CK(cudaMallocAsync(&d, N, s));
		CHECK(d == c);
		CK(cudaMemsetAsync(d, 0x6B, N, s));
		CK(cudaStreamSynchronize(s));
		CHECK(e2e_dev_all(d, N, 0x6B));
		/* ...and on another stream only behind the earlier work of s */
		CK(gpfake_launch_fill(d, N, 0xCC, 15000, s));
		CK(cudaFreeAsync(d, s));
		CK(cudaMallocAsync(&e, N, t));
		CHECK(e == d);
		CK(cudaMemsetAsync(e, 0x7C, N, t));
		CK(cudaStreamSynchronize(t));
		CK(cudaDeviceSynchronize());
		CHECK(e2e_dev_all(e, N, 0x7C));
		CK(cudaFree(e));
	}
	CK(cudaDeviceSynchronize());
	CHECK(gpfake_calls("cudaFree") == f0 && gpfake_calls("cudaFreeAsync") == fa0);
	struct gpupool_device_stats st = e2e_stats(0);
	CHECK(st.segment_allocs == 1 && st.invalid_frees == 0);
	CHECK(gpfake_faults() == 0);
	return 0;
}
