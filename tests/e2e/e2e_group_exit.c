/* The group's cap holds until the process ends (docs/security.md, "Exit"), under
 * group:FILE,group_limit:64M and no limit of the process's own: an exit handler registered
 * before the group was joined (so it runs after every exit handler of gpupool's) gets only
 * what the group has left, in 16 MiB pieces, and a free from then on gives nothing back; a
 * thread it starts, asking for 1 MiB pieces while the process exits, gets the rest and no
 * more; and once gpupool has left the group, as the process ends, every take is refused
 * (e2e_group_exit_fini.c, a library that ends after libgpupool.so). A failed check ends the
 * process with status 3. */
#include <cuda_runtime_api.h>

#include "e2e_group_exit.h"
#include "e2e_util.h"

static void after_gpupool(void)
{
	size_t room = e2e_group_exit_room();
	void *p[64];
	int n = 0;
	while (n < 64 && cudaMalloc(&p[n], 16 * MiB) == cudaSuccess)
		n++;
	fprintf(stderr, "e2e_group_exit: exit began with %zu MiB of the group left: %d x 16 MiB served\n", room / MiB,
		n);
	expect(n == (int)(room / (16 * MiB)), "the group's cap did not hold for an exit handler");
	expect(cudaGetLastError() == cudaErrorMemoryAllocation, "the refusal left no error");
	expect(cudaFree(p[0]) == cudaSuccess, "cudaFree failed");
	void *q = NULL;
	expect(cudaMalloc(&q, 16 * MiB) == cudaErrorMemoryAllocation, "a free after exit gave room back");
	e2e_group_exit_thread(room - (size_t)n * 16 * MiB);
}

int main(void)
{
	e2e_shm_dir();
	unlink(e2e_group_exit_path()); /* a file of an earlier run */
	CHECK(atexit(after_gpupool) == 0); /* before the group is joined: runs after gpupool's handlers */
	void *p = NULL;
	CK(cudaMalloc(&p, 4096)); /* joins the group; kept, so that its segment stays the pool's */
	CHECK(e2e_group_exit_room() < 64 * MiB); /* the group counts the pool's segment */
	return 0;
}
