/* The driver layer's side of e2e_device_errors.c: an error that is not out of memory reaches
 * cuMemAlloc and cuMemAllocAsync as the driver gave it, when the pool's segment is what the
 * driver refused (one fake device, no CUDA runtime; FAKECU_FAIL injects the state). Each case
 * runs under gpupool and natively (GPUPOOL_DISABLE=1) with the same expectations:
 *   e2e_drv_errors both CODE    every cuMemAlloc fails with CODE (no device, the device taken
 *                               in exclusive mode, no usable driver): both calls
 *   e2e_drv_errors once CODE    the first cuMemAlloc fails (an invalid device); the next is
 *                               served
 *   e2e_drv_errors sticky CODE  a kernel fault (gpfakecu_fault) after a first allocation: the
 *                               next allocations that ask the driver fail with CODE
 * Under gpupool none of them is an out-of-memory: ooms stays 0. */
#include <stdbool.h>

#include "e2e_drv.h"

#define MB ((size_t)1 << 20)

int main(int argc, char **argv)
{
	e2e_shm_dir();
	CHECK(argc > 2);
	const char *mode = argv[1];
	CUresult code = (CUresult)atoi(argv[2]);
	const char *dis = getenv("GPUPOOL_DISABLE");
	bool native = dis && *dis == '1';
	struct e2e_drv d;
	e2e_drv_load(&d, 0);
	CUdeviceptr p = 0;
	if (!strcmp(mode, "both")) {
		CUE(d.MemAlloc(&p, MB), code);
		CUE(d.MemAllocAsync(&p, MB, 0), code);
		CUE(d.MemAlloc(&p, 64 * MB), code);
	} else if (!strcmp(mode, "once")) {
		CUE(d.MemAlloc(&p, MB), code);
		CU(d.MemAlloc(&p, MB)); /* the device serves again */
		CU(d.MemFree(p));
	} else if (!strcmp(mode, "sticky")) {
		CU(d.MemAlloc(&p, MB));
		CU(d.MemFree(p));
		void (*fault)(CUresult);
		E2E_FN(fault, dlsym(d.handle, "gpfakecu_fault"));
		fault(code);
		CUE(d.MemAlloc(&p, 64 * MB), code);
		CUE(d.MemAllocAsync(&p, 64 * MB, 0), code);
		fault(CUDA_SUCCESS); /* the page is read below without a device call, but exit may make one */
	} else {
		return 2;
	}
	if (!native)
		CHECK(e2e_stats(0).ooms == 0);
	printf("cuMemAlloc and cuMemAllocAsync: %d, as the driver gave it\n", (int)code);
	return 0;
}
