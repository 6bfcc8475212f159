/* Once exit has begun (gpupool's exit handler has run), the runtime is being torn down and
 * the pool no longer serves: allocations and cudaMemGetInfo reach the runtime unchanged (it
 * answers them, or cudaErrorCudartUnloading once it is gone), frees of what the runtime
 * handed out reach it too, and a free of a block the pool served before exit is still the
 * pool's (it never reaches the runtime). Checked from an exit handler of the program that
 * runs after gpupool's; a failure ends the process with status 3.
 *   e2e_after_exit cap   under limit:64M, what the program allocates from then on still counts,
 *                        until the process ends: 16 MiB pieces stop at the cap, a free gives
 *                        nothing back, and cudaMallocManaged is refused past it too. */
#include <cuda_runtime_api.h>

#include "e2e_util.h"

static void *pooled;

static void expect(int ok, const char *what)
{
	if (!ok) {
		fprintf(stderr, "after exit began: %s\n", what);
		fflush(stderr);
		_exit(3);
	}
}

/* Registered before gpupool's own handler, so it runs after it. */
static void after_gpupool(void)
{
	unsigned long m = gpfake_calls("cudaMalloc"), ma = gpfake_calls("cudaMallocAsync");
	unsigned long f = gpfake_calls("cudaFree"), fa = gpfake_calls("cudaFreeAsync");
	unsigned long mi = gpfake_calls("cudaMemGetInfo");
	void *p = NULL, *q = NULL;
	expect(cudaMalloc(&p, 4096) == cudaSuccess, "cudaMalloc failed");
	expect(gpfake_calls("cudaMalloc") == m + 1, "cudaMalloc did not reach the runtime");
	expect(cudaMallocAsync(&q, 4096, 0) == cudaSuccess, "cudaMallocAsync failed");
	expect(gpfake_calls("cudaMallocAsync") == ma + 1, "cudaMallocAsync did not reach the runtime");
	size_t fr = 0, tot = 0;
	expect(cudaMemGetInfo(&fr, &tot) == cudaSuccess, "cudaMemGetInfo failed");
	expect(gpfake_calls("cudaMemGetInfo") == mi + 1, "cudaMemGetInfo did not reach the runtime");
	expect(cudaFree(pooled) == cudaSuccess, "cudaFree of a pool block failed");
	expect(gpfake_calls("cudaFree") == f, "cudaFree of a pool block reached the runtime");
	expect(cudaFree(p) == cudaSuccess && gpfake_calls("cudaFree") == f + 1, "cudaFree(runtime's) failed");
	expect(cudaFreeAsync(q, 0) == cudaSuccess && gpfake_calls("cudaFreeAsync") == fa + 1,
	       "cudaFreeAsync(runtime's) failed");
	expect(cudaDeviceSynchronize() == cudaSuccess, "cudaDeviceSynchronize failed");
}

#define MiB ((size_t)1 << 20)

static void capped_after_gpupool(void)
{
	void *p[16];
	int n = 0;
	while (n < 16 && cudaMalloc(&p[n], 16 * MiB) == cudaSuccess)
		n++;
	fprintf(stderr, "after exit began: %d x 16 MiB served under limit:64M\n", n);
	expect(n >= 2 && n <= 3, "the cap did not hold for cudaMalloc");
	expect(cudaGetLastError() == cudaErrorMemoryAllocation, "the refusal left no error");
	expect(cudaFree(p[0]) == cudaSuccess, "cudaFree failed");
	void *q = NULL;
	expect(cudaMalloc(&q, 16 * MiB) == cudaErrorMemoryAllocation, "a free after exit gave room back");
	expect(cudaMallocManaged(&q, 16 * MiB, cudaMemAttachGlobal) == cudaErrorMemoryAllocation,
	       "the cap did not hold for cudaMallocManaged");
	expect(cudaMalloc(&q, MiB) == cudaSuccess, "what fits under the cap was refused");
}

int main(int argc, char **argv)
{
	e2e_shm_dir();
	CHECK(atexit(argc > 1 && !strcmp(argv[1], "cap") ? capped_after_gpupool : after_gpupool) == 0);
	void *p = NULL;
	CK(cudaMalloc(&p, 4096)); /* the pool, and gpupool's exit handler after ours */
	CK(cudaFree(p));
	CK(cudaMalloc(&pooled, 8192));
	CHECK(e2e_stats(0).allocs == 2);
	return 0;
}
