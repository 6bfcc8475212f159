/* CUDA's errors that are not out of memory reach the program as the runtime gave them, from
 * cudaMalloc and cudaMallocAsync and in cudaGetLastError after them, when the pool's segment
 * is what the device refused (DESIGN contract 5: "errors look like CUDA's"). Each case runs
 * under gpupool and natively (GPUPOOL_DISABLE=1) with the same expectations; the fake runtime
 * injects the state (tests/fake/README.md):
 *   e2e_device_errors both CODE        every allocation fails with CODE (FAKECUDA_FAIL=*:1+:35,
 *                                      no driver; FAKECUDA_DEVICES=0, no device; 46, the device
 *                                      taken in exclusive mode): both calls, and the last error
 *                                      once each
 *   e2e_device_errors once CODE        the first cudaMalloc fails (101, an invalid device);
 *                                      the next one is served
 *   e2e_device_errors async-once CODE  the same through cudaMallocAsync
 *   e2e_device_errors sticky CODE      a kernel fault (gpfake_fault) after a first allocation:
 *                                      a new segment's allocation fails with CODE, and
 *                                      cudaGetLastError keeps returning it
 *   e2e_device_errors batch N          gpupool-maxbatch's probe: N MiB, exit 1 with CUDA's error
 *                                      string on failure
 * Under gpupool none of them is an out-of-memory: ooms stays 0. */
#include <cuda_runtime_api.h>
#include <stdbool.h>

#include "e2e_util.h"
#include "fakecuda.h"

#define MB ((size_t)1 << 20)

static bool native(void)
{
	const char *d = getenv("GPUPOOL_DISABLE");
	return d && *d == '1';
}

/* Under gpupool: not an out-of-memory, and no segment held. */
static void no_oom(void)
{
	if (native())
		return;
	struct gpupool_device_stats st = e2e_stats(0);
	CHECK(st.ooms == 0);
}

#define EXPECT(call, want)                                                                            \
	do {                                                                                          \
		cudaError_t e_ = (call);                                                              \
		if (e_ != (want)) {                                                                   \
			fprintf(stderr, "%s:%d: %s -> %d, expected %d\n", __FILE__, __LINE__, #call, (int)e_, \
				(int)(want));                                                         \
			exit(1);                                                                      \
		}                                                                                     \
	} while (0)

int main(int argc, char **argv)
{
	e2e_shm_dir();
	CHECK(argc > 2);
	const char *mode = argv[1];
	cudaError_t code = (cudaError_t)atoi(argv[2]);
	void *p = NULL;
	if (!strcmp(mode, "batch")) {
		cudaError_t e = cudaMalloc(&p, (size_t)atoi(argv[2]) * MB);
		if (e != cudaSuccess) {
			fprintf(stderr, "CUDA error: %s (%s)\n", cudaGetErrorString(e), cudaGetErrorName(e));
			return 1;
		}
		CK(cudaFree(p));
		return 0;
	}
	if (!strcmp(mode, "both")) {
		EXPECT(cudaMalloc(&p, MB), code);
		EXPECT(cudaGetLastError(), code);
		EXPECT(cudaGetLastError(), cudaSuccess);
		EXPECT(cudaMallocAsync(&p, MB, 0), code);
		EXPECT(cudaGetLastError(), code);
		EXPECT(cudaMalloc(&p, 64 * MB), code);
		no_oom();
		printf("cudaMalloc and cudaMallocAsync: %d (%s), as CUDA gave it\n", (int)code, cudaGetErrorName(code));
		return 0;
	}
	if (!strcmp(mode, "once") || !strcmp(mode, "async-once")) {
		bool async = !strcmp(mode, "async-once");
		EXPECT(async ? cudaMallocAsync(&p, MB, 0) : cudaMalloc(&p, MB), code);
		EXPECT(cudaPeekAtLastError(), code);
		EXPECT(cudaGetLastError(), code);
		EXPECT(cudaGetLastError(), cudaSuccess);
		EXPECT(async ? cudaMallocAsync(&p, MB, 0) : cudaMalloc(&p, MB), cudaSuccess); /* the device serves again */
		EXPECT(cudaGetLastError(), cudaSuccess);
		CK(async ? cudaFreeAsync(p, 0) : cudaFree(p));
		no_oom();
		return 0;
	}
	if (!strcmp(mode, "sticky")) {
		CK(cudaMalloc(&p, MB));
		CK(cudaFree(p));
		no_oom(); /* the page, read before the fault */
		struct gpupool_device_stats before = native() ? (struct gpupool_device_stats){0} : e2e_stats(0);
		gpfake_fault(code); /* a kernel fault */
		EXPECT(cudaMalloc(&p, 64 * MB), code); /* a new segment: the device is asked */
		EXPECT(cudaGetLastError(), code);
		EXPECT(cudaGetLastError(), code); /* sticky: never cleared */
		EXPECT(cudaMallocAsync(&p, 64 * MB, 0), code);
		if (!native()) /* the counters, from the page gpupool_stats read before: still no oom */
			CHECK(before.ooms == 0);
		return 0;
	}
	return 2;
}
