/* cudaDeviceReset frees every allocation of the device: gpupool drops that device's pool
 * (without freeing it under the fence thread, which may be inside it: the free just before
 * the reset wakes that thread), starts the device's gauges from zero in the same page slot,
 * and serves later allocations from a new pool. */
#include <cuda_runtime_api.h>

#include <errno.h>

#include "e2e_util.h"

int main(void)
{
	e2e_shm_dir();
	for (int round = 0; round < 20; round++) {
		void *a = NULL, *b = NULL;
		CK(cudaMalloc(&a, 1 << 20));
		CK(cudaMalloc(&b, 5 << 20));
		CK(cudaMemset(a, 0x5a, 1 << 20));
		CK(cudaFree(a)); /* pending: the fence thread is woken */
		if (round & 1)
			e2e_sleep_ms(1);
		CK(cudaDeviceReset()); /* b dies with the device's memory */
		CHECK(gpfake_allocations(0) == 0);
		struct gpupool_device_stats st;
		CHECK(e2e_stats_api()(0, &st) == -ENODEV); /* no pool until the next allocation */
		void *c = NULL;
		CK(cudaMalloc(&c, 1 << 20));
		CK(cudaMemset(c, 0x11, 1 << 20));
		CHECK(e2e_dev_all(c, 1 << 20, 0x11));
		st = e2e_stats(0);
		/* the gauges restarted: only the new pool's one small segment and one block */
		CHECK(st.live_blocks == 1 && st.reserved_bytes == 2 << 20 && st.pending_frees == 0);
		CK(cudaFree(c));
	}
	return 0;
}
