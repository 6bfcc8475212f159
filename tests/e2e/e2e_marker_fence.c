/* Contract 1 with markers (fences at the point of the free): a 12 MiB block freed with
 * cudaFree while a delayed fake kernel still writes it is handed to its next owner (the
 * same block: the limit leaves room for one) only after that write, with the kernel on
 *   nonblocking  a stream from cudaStreamCreateWithFlags(cudaStreamNonBlocking),
 *   priority     a non-blocking stream from cudaStreamCreateWithPriority,
 *   blocking     a stream from cudaStreamCreate,
 *   legacy       the legacy default stream,
 *   destroyed    a non-blocking stream destroyed right after the launch,
 *   faults       a non-blocking stream, with gpupool's event calls failing now and then.
 * The program lets the fence thread record its marker before it allocates again. With
 * markers on, gpupool never synchronizes the device (except in "faults", where it falls back
 * to that), records events, and leaves the program's last error alone; with
 * GPUPOOL_CONF=fence_marker:0 it records no event and synchronizes the device instead. */
#include <cuda_runtime_api.h>
#include <stdbool.h>

#include "e2e_util.h"

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "nonblocking";
	const char *conf = getenv("GPUPOOL_CONF");
	bool markers = !conf || !strstr(conf, "fence_marker:0");
	bool faults = !strcmp(mode, "faults");
	e2e_shm_dir();
	const size_t n = (size_t)12 << 20;
	cudaStream_t k = NULL, w;
	CK(cudaStreamCreateWithFlags(&w, cudaStreamNonBlocking));
	unsigned long rec0 = gpfake_calls("cudaEventRecord");
	unsigned long gp_syncs = 0;
	for (int it = 0; it < 8; it++) {
		unsigned delay = it % 2 ? 20000 : 5000;
		if (!strcmp(mode, "nonblocking") || !strcmp(mode, "destroyed") || faults)
			CK(cudaStreamCreateWithFlags(&k, cudaStreamNonBlocking));
		else if (!strcmp(mode, "priority"))
			CK(cudaStreamCreateWithPriority(&k, cudaStreamNonBlocking, -1));
		else if (!strcmp(mode, "blocking"))
			CK(cudaStreamCreate(&k));
		else
			k = NULL; /* legacy */
		if (faults)
			CHECK(gpfake_fail_nth(it % 2 ? "cudaEventRecord" : "cudaEventQuery", 1,
					      cudaErrorLaunchFailure) == 0);
		void *a = NULL, *b = NULL;
		CK(cudaMalloc(&a, n));
		CK(gpfake_launch_fill(a, n, 0xAA, delay, k));
		if (!strcmp(mode, "destroyed"))
			CK(cudaStreamDestroy(k)); /* its kernel still runs */
		unsigned long ds = gpfake_calls("cudaDeviceSynchronize");
		unsigned long rec = gpfake_calls("cudaEventRecord");
		CK(cudaFree(a));
		/* let the fence thread record its marker (50 us after the free): the allocation
		 * below then waits for that marker, not for a device synchronize */
		for (int i = 0; markers && !faults && i < 2000 && gpfake_calls("cudaEventRecord") == rec; i++)
			e2e_sleep_ms(1);
		CK(cudaMalloc(&b, n)); /* the one block the limit allows: after the kernel's write */
		CHECK(b == a);
		CHECK(cudaGetLastError() == cudaSuccess); /* nothing of gpupool's own calls leaked */
		CK(cudaMemsetAsync(b, 0x55, n, w));
		CK(cudaStreamSynchronize(w));
		gp_syncs += gpfake_calls("cudaDeviceSynchronize") - ds;
		CK(cudaDeviceSynchronize()); /* the kernel has run by now, whenever it wrote */
		CHECK(e2e_dev_all(b, n, 0x55));
		CK(cudaFree(b));
		if (k && strcmp(mode, "destroyed"))
			CK(cudaStreamDestroy(k));
		gpfake_fail_clear();
	}
	CK(cudaDeviceSynchronize());
	e2e_wait_no_pending(0);
	struct gpupool_device_stats st = e2e_stats(0);
	unsigned long recs = gpfake_calls("cudaEventRecord") - rec0;
	printf("mode=%s markers=%d event_records=%lu gpupool_device_syncs=%lu fences=%llu inline_fences=%llu\n", mode,
	       markers, recs, gp_syncs, (unsigned long long)st.fences, (unsigned long long)st.inline_fences);
	if (markers) {
		CHECK(recs > 0);
		if (!faults)
			CHECK(gp_syncs == 0); /* the fences were markers, never a device synchronize */
	} else {
		CHECK(recs == 0 && gp_syncs > 0);
	}
	CHECK(st.segment_allocs == 1 && st.live_blocks == 0 && st.pending_frees == 0);
	CHECK(gpfake_faults() == 0);
	CK(cudaStreamDestroy(w));
	return 0;
}
