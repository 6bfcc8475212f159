/* gpupool_malloc / gpupool_free, PyTorch's pluggable-allocator entry points, from a C program
 * (two fake devices, limit:64M): stream-ordered reuse on the allocating stream, another
 * stream's allocation only behind an event, the device argument honoured whatever device is
 * current (which is left as it was), statistics and trace like cudaMallocAsync, and the edge
 * cases: size 0, a bad device, NULL, an unknown pointer, and an out-of-memory, which returns
 * NULL in a process without a C++ runtime (e2e_torch_oom.cc covers the throw). */
#include <cuda_runtime_api.h>
#include <sys/types.h>

#include "e2e_util.h"

#define MB ((size_t)1 << 20)
#define N (12 * MB) /* a segment of its own: the only block that fits is the freed one */

/* from the preloaded library (the program links the fake runtime only) */
static void *(*gpupool_malloc_)(ssize_t, int, void *);
static void (*gpupool_free_)(void *, ssize_t, int, void *);
#define gpupool_malloc gpupool_malloc_
#define gpupool_free gpupool_free_

int main(void)
{
	e2e_shm_dir();
	E2E_API(gpupool_malloc_, "gpupool_malloc");
	E2E_API(gpupool_free_, "gpupool_free");
	cudaStream_t s, t;
	CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	CK(cudaStreamCreateWithFlags(&t, cudaStreamNonBlocking));
	unsigned long m0 = gpfake_calls("cudaMalloc");

	/* same stream: the freed block comes back at once; stream order keeps the data right */
	void *a = gpupool_malloc((ssize_t)N, 0, s);
	CHECK(a != NULL);
	CK(gpfake_launch_fill(a, N, 0xAA, 20000, s));
	gpupool_free(a, (ssize_t)N, 0, s);
	void *b = gpupool_malloc((ssize_t)N, 0, s);
	CHECK(b == a);
	CK(cudaMemsetAsync(b, 0x11, N, s));
	CK(cudaStreamSynchronize(s));
	CHECK(e2e_dev_all(b, N, 0x11));

	/* another stream: a kernel still writing the freed block lands before t's writes */
	CK(gpfake_launch_fill(b, N, 0xAA, 20000, s));
	gpupool_free(b, (ssize_t)N, 0, s);
	void *c = gpupool_malloc((ssize_t)N, 0, t);
	CHECK(c != NULL);
	CK(cudaMemsetAsync(c, 0x22, N, t));
	CK(cudaDeviceSynchronize());
	CHECK(e2e_dev_all(c, N, 0x22));
	gpupool_free(c, (ssize_t)N, 0, t);
	CK(cudaDeviceSynchronize());
	CHECK(gpfake_calls("cudaMalloc") - m0 <= 2); /* segments only */

	/* the device argument, not the current device; the current device is left alone */
	size_t used1 = gpfake_used(1);
	void *d1 = gpupool_malloc((ssize_t)MB, 1, NULL);
	CHECK(d1 != NULL && gpfake_used(1) > used1);
	int cur = -1;
	CK(cudaGetDevice(&cur));
	CHECK(cur == 0);
	struct gpupool_device_stats s1 = e2e_stats(1);
	CHECK(s1.allocs == 1 && s1.live_blocks == 1 && s1.allocated_bytes == MB);
	gpupool_free(d1, (ssize_t)MB, 1, NULL);
	CK(cudaDeviceSynchronize());
	s1 = e2e_stats(1);
	CHECK(s1.frees == 1 && s1.live_blocks == 0);

	/* edge cases: nothing allocated, nothing freed, the program goes on */
	CHECK(gpupool_malloc(0, 0, s) == NULL);
	CHECK(gpupool_malloc(-5, 0, s) == NULL);
	CHECK(gpupool_malloc((ssize_t)MB, 7, s) == NULL);
	CHECK(gpupool_malloc((ssize_t)MB, -1, s) == NULL);
	gpupool_free(NULL, 0, 0, s);
	int host;
	gpupool_free(&host, 4, 0, s); /* warns once, ignored */
	gpupool_free(&host, 4, 9, s);
	struct gpupool_device_stats s0 = e2e_stats(0);
	CHECK(s0.live_blocks == 0 && s0.allocs == 3 && s0.frees == 3);

	/* out of memory: NULL, cudaErrorMemoryAllocation as the last error, counted. Under the
	 * sanitizers their runtime brings libstdc++ in and gpupool_malloc would throw instead. */
	if (dlsym(RTLD_DEFAULT, "_ZTISt13runtime_error")) {
		printf("ok (C++ runtime present: out-of-memory left to e2e_torch_oom)\n");
		return 0;
	}
	void *big = gpupool_malloc((ssize_t)(80 * MB), 0, s);
	CHECK(big == NULL);
	CKE(cudaGetLastError(), cudaErrorMemoryAllocation);
	s0 = e2e_stats(0);
	CHECK(s0.ooms == 1 && s0.reserved_bytes <= 64 * MB);
	void *small = gpupool_malloc((ssize_t)MB, 0, s); /* and the pool still serves */
	CHECK(small != NULL);
	gpupool_free(small, (ssize_t)MB, 0, s);

	CK(cudaDeviceSynchronize());
	CHECK(gpfake_faults() == 0);
	CK(cudaStreamDestroy(s));
	CK(cudaStreamDestroy(t));
	printf("ok\n");
	return 0;
}
