/* Contract 11, fork: a child allocates through a fresh pool with its own statistics page
 * gpupool.<childpid> (the parent's page untouched), the parent's pool keeps working, and no
 * child deadlocks although another parent thread is inside the pool at every fork. */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/wait.h>
#include <cuda_runtime_api.h>

#include "e2e_util.h"

static atomic_int stop;

static void *churn(void *arg)
{
	(void)arg;
	while (!atomic_load(&stop)) {
		void *p = NULL;
		CK(cudaMalloc(&p, 4096));
		CK(cudaFree(p));
	}
	return NULL;
}

static int child(pid_t parent)
{
	alarm(10); /* a deadlock becomes a SIGALRM the parent sees */
	void *c = NULL;
	if (cudaMalloc(&c, 8192) != cudaSuccess)
		return 2;
#ifndef __SANITIZE_ADDRESS__
	/* the data check needs the fake's stream workers, threads started in this child. Under
	 * AddressSanitizer (GCC 12) a thread created in a child forked from a multithreaded
	 * parent can hang before its first instruction (1 fork in ~8): there, this check is
	 * left to the plain build */
	if (cudaMemset(c, 0x77, 8192) != cudaSuccess || !e2e_dev_all(c, 8192, 0x77))
		return 3;
#endif
	if (e2e_page_pid(getpid()) != getpid())
		return 4; /* its own page */
	if (e2e_page_pid(parent) != parent)
		return 5; /* the parent's page is still the parent's */
	struct gpupool_device_stats st = e2e_stats(0);
	if (st.allocs != 1 || st.live_blocks != 1)
		return 6; /* a fresh pool, not the parent's counters */
	if (cudaFree(c) != cudaSuccess)
		return 7;
	return 0;
}

int main(void)
{
	e2e_shm_dir();
	pid_t me = getpid();
	void *a = NULL;
	CK(cudaMalloc(&a, 4096));
	CHECK(e2e_page_pid(me) == me);
	pthread_t th;
	CHECK(pthread_create(&th, NULL, churn, NULL) == 0);
	for (int i = 0; i < 20; i++) {
		pid_t pid = fork();
		CHECK(pid >= 0);
		if (pid == 0)
			exit(child(me));
		int status = 0;
		pid_t w = 0;
		for (int k = 0; k < 1500 && (w = waitpid(pid, &status, WNOHANG)) == 0; k++)
			e2e_sleep_ms(10);
		if (w == 0) {
			kill(pid, SIGKILL);
			waitpid(pid, &status, 0);
			CHECK(!"child hung");
		}
		if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
			fprintf(stderr, "child %d: status 0x%x\n", (int)pid, status);
		CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
		CHECK(!e2e_page_exists(pid)); /* the child's page went with it */
		CHECK(e2e_page_pid(me) == me);
	}
	atomic_store(&stop, 1);
	pthread_join(th, NULL);
	/* the parent's pool works and its counters are its own */
	void *b = NULL;
	CK(cudaMalloc(&b, 8192));
	CK(cudaMemset(b, 0x66, 8192));
	CHECK(e2e_dev_all(b, 8192, 0x66));
	CK(cudaFree(b));
	CK(cudaFree(a));
	struct gpupool_device_stats st = e2e_stats(0);
	CHECK(st.live_blocks == 0 && st.allocs > 20);
	CHECK(e2e_count_pages() == 1);
	return 0;
}
