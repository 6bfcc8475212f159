/* Contract 10, never kill the host program. Modes (argv[1]):
 *  report   allocate, free, exit 0; checks that nothing reaches the runtime after main
 *           returns (the exit report reads counters only);
 *  teardown a thread keeps allocating and freeing while main returns, so the fake's
 *           destructor may run while the pool and its fence thread are still busy;
 *  basic    allocate and check data (with a bad knob in the environment);
 *  strict   with a bad knob in strict mode: allocations fail with an error, no abort. */
#include <pthread.h>
#include <cuda_runtime_api.h>

#include "e2e_util.h"

static const char *const names[] = {"cudaMalloc", "cudaFree", "cudaMallocAsync", "cudaFreeAsync",
	"cudaDeviceSynchronize", "cudaGetDevice", "cudaSetDevice", "cudaGetDeviceCount", "cudaMemGetInfo",
	"cudaGetLastError", "cudaPeekAtLastError", "cudaEventCreateWithFlags", "cudaEventRecord",
	"cudaEventDestroy", "cudaStreamWaitEvent", "cudaStreamIsCapturing", "cudaStreamSynchronize",
	"cudaMemcpy", "cudaMemset"};
static unsigned long snap;

static unsigned long total_calls(void)
{
	unsigned long n = 0;
	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
		n += gpfake_calls(names[i]);
	return n;
}

static void take_snapshot(void) { snap = total_calls(); }  /* runs before the report */
static void compare_snapshot(void)                          /* runs after the report */
{
	if (total_calls() != snap) {
		fprintf(stderr, "CUDA calls at exit: %lu\n", total_calls() - snap);
		_exit(3);
	}
}

static void *busy(void *arg)
{
	(void)arg;
	for (;;) {
		void *p = NULL;
		if (cudaMalloc(&p, 65536) == cudaSuccess)
			(void)cudaFree(p);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	e2e_shm_dir();
	const char *mode = argc > 1 ? argv[1] : "basic";
	void *p = NULL;
	if (!strcmp(mode, "strict")) {
		cudaError_t e = cudaMalloc(&p, 4096);
		CHECK(e != cudaSuccess);
		CHECK(cudaMallocAsync(&p, 4096, 0) != cudaSuccess);
		printf("strict: cudaMalloc -> %s\n", cudaGetErrorName(e));
		return 0;
	}
	if (!strcmp(mode, "report"))
		CHECK(atexit(compare_snapshot) == 0); /* before the pool's own handler: runs after it */
	CK(cudaMalloc(&p, 4096));
	CK(cudaMemset(p, 0x12, 4096));
	CHECK(e2e_dev_all(p, 4096, 0x12));
	CK(cudaFree(p));
	if (!strcmp(mode, "teardown")) {
		pthread_t th;
		CHECK(pthread_create(&th, NULL, busy, NULL) == 0);
		e2e_sleep_ms(20);
		return 0; /* the thread is still inside the pool */
	}
	e2e_wait_no_pending(0);
	if (!strcmp(mode, "report"))
		CHECK(atexit(take_snapshot) == 0); /* after the pool's handler: runs before it */
	return 0;
}
