/* Contract 11, devices: one pool per device (two fake devices), a device-1 block freed while
 * device 0 is current is found by its pointer, per-device statistics, and the limit
 * (limit:64M) applies to each device on its own. */
#include <cuda_runtime_api.h>

#include "e2e_util.h"

#define MB ((size_t)1 << 20)

int main(void)
{
	e2e_shm_dir();
	int n = 0;
	CK(cudaGetDeviceCount(&n));
	CHECK(n == 2);
	void *b1 = NULL, *b0 = NULL, *c0 = NULL, *c1 = NULL, *x = NULL;
	unsigned long frees = gpfake_calls("cudaFree");
	CK(cudaSetDevice(1));
	CK(cudaMalloc(&b1, MB));
	CK(cudaMemset(b1, 0x11, MB));
	CHECK(e2e_dev_all(b1, MB, 0x11));
	CK(cudaSetDevice(0));
	CK(cudaMalloc(&b0, MB));
	CK(cudaMemset(b0, 0x22, MB));
	CHECK(gpfake_used(1) > 0 && gpfake_used(0) > 0);
	CK(cudaFree(b1)); /* device 0 current */
	CHECK(gpfake_calls("cudaFree") == frees);
	struct gpupool_device_stats s0 = e2e_stats(0), s1 = e2e_stats(1);
	CHECK(s1.allocs == 1 && s1.frees == 1 && s1.live_blocks == 0 && s1.invalid_frees == 0);
	CHECK(s0.allocs == 1 && s0.frees == 0 && s0.live_blocks == 1);
	CHECK(s0.limit_bytes == 64 * MB && s1.limit_bytes == 64 * MB);
	CHECK(e2e_dev_all(b0, MB, 0x22));

	/* the limit is per device */
	CK(cudaMalloc(&c0, 40 * MB));
	CKE(cudaMalloc(&x, 40 * MB), cudaErrorMemoryAllocation);
	CKE(cudaGetLastError(), cudaErrorMemoryAllocation);
	CK(cudaSetDevice(1));
	CK(cudaMalloc(&c1, 40 * MB));
	CHECK(gpfake_used(0) <= 64 * MB && gpfake_used(1) <= 64 * MB);
	s0 = e2e_stats(0);
	s1 = e2e_stats(1);
	CHECK(s0.ooms == 1 && s1.ooms == 0);
	CHECK(s0.reserved_bytes <= 64 * MB && s1.reserved_bytes <= 64 * MB);
	/* a device-0 block freed from device 1, with cudaFreeAsync on device 1's legacy stream */
	CK(cudaFreeAsync(c0, 0));
	CK(cudaFree(b0));
	CK(cudaFree(c1));
	CK(cudaSetDevice(0));
	CK(cudaDeviceSynchronize());
	s0 = e2e_stats(0);
	s1 = e2e_stats(1);
	CHECK(s0.live_blocks == 0 && s1.live_blocks == 0 && s0.invalid_frees == 0 && s1.invalid_frees == 0);
	/* real frees are the pools' own segment releases only */
	CHECK(gpfake_calls("cudaFree") - frees == s0.segment_frees + s1.segment_frees);

	/* For e2e_devices_report.sh: hold 3 MiB on device 0 and 5 MiB on device 1 while the
	 * script reads the statistics page (it removes E2E_HOLD_FILE when done). */
	const char *hold = getenv("E2E_HOLD_FILE");
	if (hold) {
		void *h0 = NULL, *h1 = NULL;
		CK(cudaMalloc(&h0, 3 * MB));
		CK(cudaSetDevice(1));
		CK(cudaMalloc(&h1, 5 * MB));
		FILE *f = fopen(hold, "w");
		CHECK(f != NULL);
		fclose(f);
		for (int i = 0; i < 2000 && access(hold, F_OK) == 0; i++)
			e2e_sleep_ms(10);
		CK(cudaFree(h0));
		CK(cudaFree(h1));
	}
	return 0;
}
