/* What gpupool writes and says, checked from outside by e2e_outputs.sh. Modes (argv[1]):
 *  alloc      allocate and free through the pool, exit normally (report, trace, page);
 *  oom        a 16 MiB cudaMalloc under a smaller limit fails with cudaErrorMemoryAllocation;
 *  fork_exit  a forked child allocates and ends with _exit; prints the child's pid. */
#include <sys/wait.h>
#include <cuda_runtime_api.h>

#include "e2e_util.h"

int main(int argc, char **argv)
{
	e2e_shm_dir();
	const char *mode = argc > 1 ? argv[1] : "alloc";
	void *p = NULL;
	if (!strcmp(mode, "oom")) {
		CKE(cudaMalloc(&p, 16 << 20), cudaErrorMemoryAllocation);
		return 0;
	}
	if (!strcmp(mode, "fork_exit")) {
		fflush(stdout);
		pid_t c = fork();
		CHECK(c >= 0);
		if (c == 0) {
			if (cudaMalloc(&p, 4096) != cudaSuccess || cudaFree(p) != cudaSuccess)
				_exit(2);
			_exit(0); /* no exit handlers: the page stays */
		}
		int st = 0;
		CHECK(waitpid(c, &st, 0) == c && WIFEXITED(st) && WEXITSTATUS(st) == 0);
		printf("%ld\n", (long)c);
		return 0;
	}
	CHECK(!strcmp(mode, "alloc"));
	CK(cudaMalloc(&p, 4096));
	CK(cudaFree(p));
	return 0;
}
