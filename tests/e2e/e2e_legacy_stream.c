/* legacy_stream:1 (docs/knobs.md): a program whose GPU work is all on the legacy default
 * stream gets its cudaFree'd blocks back at once, in that stream's order, with no fence.
 *   ordered      a delayed fake kernel on the legacy stream still writes block A when A is
 *                freed and allocated again (the same block, at once); the next owner's
 *                memset, queued behind it on the same stream, is what stays. No fence, no
 *                event, no device synchronize.
 *   stream-made  the same after the program created a stream: gpupool drops the promise and
 *                the frees wait for fences again (the block is reused after the kernel).
 *   driver-stream the same, the stream made through the driver (cuStreamCreate).
 *   switch       a block reused in the legacy stream's order while the old owner's kernel
 *                still writes it; then the program makes a non-blocking stream and the new
 *                owner writes the block there: gpupool waits for the device when it drops
 *                the promise, so the new owner's data stays. */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <stdbool.h>

#include "e2e_util.h"

static int switch_mode(void)
{
	const size_t n = (size_t)12 << 20;
	void *a = NULL, *b = NULL;
	CK(cudaMalloc(&a, n));
	CK(gpfake_launch_fill(a, n, 0xAA, 200000, NULL)); /* 200 ms on the legacy stream */
	CK(cudaFree(a));
	CK(cudaMalloc(&b, n));
	CHECK(b == a); /* reused at once, in the legacy stream's order */
	cudaStream_t s;
	CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking)); /* the promise is dropped here */
	CK(cudaMemsetAsync(b, 0x55, n, s));
	CK(cudaStreamSynchronize(s));
	CK(cudaDeviceSynchronize());
	CHECK(e2e_dev_all(b, n, 0x55)); /* not overwritten by the old owner's fill */
	CK(cudaFree(b));
	CK(cudaStreamDestroy(s));
	printf("mode=switch ok\n");
	return 0;
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "ordered";
	if (!strcmp(mode, "switch")) {
		e2e_shm_dir();
		return switch_mode();
	}
	bool ordered = !strcmp(mode, "ordered");
	e2e_shm_dir();
	const size_t n = (size_t)12 << 20;
	cudaStream_t k = NULL;
	CK(cudaFree(0));
	if (!strcmp(mode, "stream-made")) {
		CK(cudaStreamCreate(&k));
	} else if (!strcmp(mode, "driver-stream")) {
		CUresult (*init)(unsigned), (*retain)(CUcontext *, CUdevice), (*current)(CUcontext);
		CUresult (*create)(CUstream *, unsigned);
		void *cu = dlopen("libcuda.so.1", RTLD_NOW); /* as Numba does: gpupool answers its dlsym */
		CHECK(cu != NULL);
		E2E_FN(init, dlsym(cu, "cuInit"));
		E2E_FN(retain, dlsym(cu, "cuDevicePrimaryCtxRetain"));
		E2E_FN(current, dlsym(cu, "cuCtxSetCurrent"));
		E2E_FN(create, dlsym(cu, "cuStreamCreate"));
		CUcontext c;
		CHECK(init(0) == CUDA_SUCCESS && retain(&c, 0) == CUDA_SUCCESS && current(c) == CUDA_SUCCESS);
		CUstream d;
		CHECK(create(&d, CU_STREAM_DEFAULT) == CUDA_SUCCESS);
	}
	unsigned long rec0 = gpfake_calls("cudaEventRecord"), ds0 = gpfake_calls("cudaDeviceSynchronize");
	for (int it = 0; it < 8; it++) {
		void *a = NULL, *b = NULL;
		CK(cudaMalloc(&a, n));
		CK(gpfake_launch_fill(a, n, 0xAA, it % 2 ? 20000 : 5000, NULL));
		CK(cudaFree(a));
		CK(cudaMalloc(&b, n)); /* the one block the limit allows */
		CHECK(b == a);
		CK(cudaMemsetAsync(b, 0x55, n, 0)); /* behind the fill on the legacy stream */
		CK(cudaDeviceSynchronize());
		CHECK(e2e_dev_all(b, n, 0x55));
		CK(cudaFree(b));
	}
	CK(cudaDeviceSynchronize());
	e2e_wait_no_pending(0);
	struct gpupool_device_stats st = e2e_stats(0);
	unsigned long recs = gpfake_calls("cudaEventRecord") - rec0;
	unsigned long syncs = gpfake_calls("cudaDeviceSynchronize") - ds0 - 9; /* the program's own 9 */
	printf("mode=%s fences=%llu inline_fences=%llu event_records=%lu gpupool_device_syncs=%lu\n", mode,
	       (unsigned long long)st.fences, (unsigned long long)st.inline_fences, recs, syncs);
	if (ordered)
		CHECK(st.fences == 0 && st.inline_fences == 0 && recs == 0 && syncs == 0);
	else
		CHECK(st.fences > 0); /* the frees waited for fences again */
	CHECK(st.segment_allocs == 1 && st.live_blocks == 0 && st.pending_frees == 0);
	CHECK(gpfake_faults() == 0);
	return 0;
}
