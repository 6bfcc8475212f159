/* The release thread's socket closed by the program and its number reused by the program's
 * own stream socket (a daemon that closes every descriptor, then opens many): the thread must
 * neither read the program's bytes nor spin on the descriptor once the peer is gone. */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

static double cpu_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

int main(void)
{
	void *p;
	if (cudaMalloc(&p, 1 << 20) != cudaSuccess)
		return 2;
	cudaFree(p);
	usleep(100000);
	int gfd = -1;
	for (int fd = 3; fd < 65536 && gfd < 0; fd++) {
		struct sockaddr_un sa;
		socklen_t l = sizeof sa;
		if (getsockname(fd, (struct sockaddr *)&sa, &l) == 0 && l > 10 && sa.sun_path[0] == 0 &&
		    !strncmp(sa.sun_path + 1, "gpupool.", 8))
			gfd = fd;
	}
	if (gfd < 0) {
		fprintf(stderr, "no release thread socket\n");
		return 2;
	}
	close(gfd);
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0 || dup2(sv[0], gfd) != gfd)
		return 2;
	close(sv[0]);
	static const char msg[] = "the program's own bytes, which only the program reads";
	if (write(sv[1], msg, sizeof msg) != (ssize_t)sizeof msg)
		return 2;
	usleep(600000); /* two of the thread's polls */
	char buf[256];
	ssize_t n = recv(gfd, buf, sizeof buf, MSG_DONTWAIT);
	int bad = 0;
	if (n != (ssize_t)sizeof msg) {
		fprintf(stderr, "FAIL: wrote %zu bytes on the reused descriptor, read back %zd\n", sizeof msg, n);
		bad = 1;
	}
	close(sv[1]); /* the peer gone: the descriptor reads end of file for ever */
	double c0 = cpu_s();
	sleep(1);
	double used = cpu_s() - c0;
	if (used > 0.2) {
		fprintf(stderr, "FAIL: %.2f s of CPU in 1 s of sleep\n", used);
		bad = 1;
	}
	close(gfd);
	return bad;
}
