/* What gpupool writes and says, checked from outside by e2e_outputs.sh. Modes (argv[1]):
 *  alloc      allocate and free through the pool, exit normally (report, trace, page);
 *  oom        a 16 MiB cudaMalloc under a smaller limit fails with cudaErrorMemoryAllocation;
 *  fork_exit  a forked child allocates and ends with _exit; prints the child's pid;
 *  page       allocates, then checks its statistics page: the right size, and every block of
 *             it reserved (a sparse page faults when a full filesystem cannot back a store);
 *  fd_reuse OWN close|dup
 *             with a trace on, allocates, then does what daemons do: closes descriptors 3 to
 *             1023 and opens its own file OWN (which gets a number gpupool's trace may have
 *             had); with dup, also makes every other number from 3 to 1022 a duplicate of
 *             it (and a forked child checks they all stay open). Then allocates enough for gpupool to write the trace's buffer out many
 *             times over, and checks OWN holds only what it wrote (e2e_trace_fd.sh checks it
 *             again after exit). */
#include <fcntl.h>
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
	if (!strcmp(mode, "page")) {
		CK(cudaMalloc(&p, 4096));
		char path[4200];
		snprintf(path, sizeof path, "%s/gpupool.%d", e2e_shm_dir(), (int)getpid());
		struct stat st;
		CHECK(stat(path, &st) == 0);
		CHECK(st.st_size == (off_t)sizeof(struct gpupool_page));
		CHECK((long long)st.st_blocks * 512 >= (long long)st.st_size);
		CK(cudaFree(p));
		return 0;
	}
	if (!strcmp(mode, "fd_reuse")) {
		CHECK(argc == 4 && (!strcmp(argv[3], "close") || !strcmp(argv[3], "dup")));
		for (int i = 0; i < 2000; i++) {
			CK(cudaMalloc(&p, 4096 + (size_t)i));
			CK(cudaFree(p));
		}
		for (int fd = 3; fd < 1024; fd++)
			close(fd);
		int own = open(argv[2], O_RDWR | O_CREAT | O_TRUNC, 0600);
		CHECK(own >= 3);
		CHECK(write(own, "mine\n", 5) == 5);
		if (!strcmp(argv[3], "dup")) {
			/* 1023 stays free: under a limit of 1024 LeakSanitizer needs one at exit */
			for (int fd = 3; fd < 1023; fd++)
				CHECK(fd == own || dup2(own, fd) == fd);
			/* a forked child drops the parent's trace: it must not close the number the
			 * trace had, which is the program's file now */
			fflush(stdout);
			pid_t c = fork();
			CHECK(c >= 0);
			if (c == 0) {
				for (int fd = 3; fd < 1023; fd++)
					if (fcntl(fd, F_GETFD) < 0)
						_exit(3);
				_exit(0);
			}
			int st = 0;
			CHECK(waitpid(c, &st, 0) == c && WIFEXITED(st) && WEXITSTATUS(st) == 0);
		}
		/* ~40,000 rows: several of the trace's 256 KiB blocks */
		for (int i = 0; i < 20000; i++) {
			CK(cudaMalloc(&p, 4096 + (size_t)i));
			CK(cudaFree(p));
		}
		struct stat st;
		char buf[8] = {0};
		CHECK(fstat(own, &st) == 0 && st.st_size == 5);
		CHECK(pread(own, buf, sizeof buf, 0) == 5 && !memcmp(buf, "mine\n", 5));
		return 0;
	}
	CHECK(!strcmp(mode, "alloc"));
	CK(cudaMalloc(&p, 4096));
	CK(cudaFree(p));
	return 0;
}
