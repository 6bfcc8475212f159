// A C++ holder for the sharing scenarios (bench/gpu/sharing.sh): takes GIB GiB with cudaMalloc
// in 1 GiB pieces, writes them, frees them with cudaFree and idles for SECONDS, as a program
// between two phases does. Build with -cudart shared, so that LD_PRELOAD=libgpupool.so
// serves its calls:  nvcc -O2 -cudart shared -o share_hold share_hold.cu
#include <cuda_runtime.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <vector>

static void wake(int) {} /* SIGINT ends the sleep; main returns and the exit handlers run */

int main(int argc, char **argv)
{
	struct sigaction sa = {};
	sa.sa_handler = wake;
	sigaction(SIGINT, &sa, nullptr);
	int gib = argc > 1 ? atoi(argv[1]) : 80;
	int seconds = argc > 2 ? atoi(argv[2]) : 60;
	std::vector<void *> v;
	for (int i = 0; i < gib; i++) {
		void *p = nullptr;
		cudaError_t e = cudaMalloc(&p, (size_t)1 << 30);
		if (e != cudaSuccess) {
			fprintf(stderr, "share_hold: cudaMalloc %d: %s\n", i, cudaGetErrorString(e));
			return 1;
		}
		cudaMemset(p, 1, (size_t)1 << 30);
		v.push_back(p);
	}
	cudaDeviceSynchronize();
	for (void *p : v)
		cudaFree(p);
	size_t f = 0, t = 0;
	cudaMemGetInfo(&f, &t);
	printf("ready=1 free=%zu\n", f);
	fflush(stdout);
	sleep(seconds);
	cudaMemGetInfo(&f, &t);
	printf("end=1 free=%zu\n", f);
	return 0;
}
