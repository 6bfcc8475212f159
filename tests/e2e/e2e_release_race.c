/* Release requests written into the page from outside (as gpupool-stat --release does),
 * back to back, while 8 threads allocate and every release waits for a fence behind slow
 * stream work: each request is answered by one thread at most (GPUPOOL_LOG=info: one
 * "released ... on request" line each, read back from this program's stderr), release_done
 * never goes backwards, and it ends at the last request. */
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <cuda_runtime_api.h>

#include "e2e_util.h"

#define NT 8
#define NREQ 100

static atomic_int stop;
static atomic_int backwards;
static struct gpupool_page *pg;

static void *worker(void *arg)
{
	(void)arg;
	while (!atomic_load(&stop)) {
		void *p = NULL;
		if (cudaMalloc(&p, 4096) == cudaSuccess)
			CK(cudaFree(p));
	}
	return NULL;
}

/* Keeps the device busy, so that each release's fence waits a few milliseconds. */
static void *busy_device(void *arg)
{
	void *dev = arg;
	cudaStream_t s;
	CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	while (!atomic_load(&stop)) {
		CK(gpfake_launch_fill(dev, 4096, 0x5A, 3000, s));
		CK(cudaStreamSynchronize(s));
	}
	CK(cudaStreamDestroy(s));
	return NULL;
}

static void *watch_done(void *arg)
{
	(void)arg;
	uint64_t last = 0;
	while (!atomic_load(&stop)) {
		uint64_t d = __atomic_load_n(&pg->release_done, __ATOMIC_ACQUIRE);
		if (d < last) {
			fprintf(stdout, "release_done went back from %llu to %llu\n", (unsigned long long)last,
				(unsigned long long)d);
			atomic_store(&backwards, 1);
		}
		last = d;
	}
	return NULL;
}

static int count_lines(FILE *f, const char *needle)
{
	char line[1024];
	int n = 0;
	rewind(f);
	while (fgets(line, sizeof line, f))
		if (strstr(line, needle))
			n++;
	return n;
}

int main(void)
{
	FILE *log = tmpfile(); /* gpupool's log, read back at the end */
	CHECK(log != NULL);
	int saved_err = dup(2);
	CHECK(saved_err >= 0 && dup2(fileno(log), 2) == 2);

	char path[4200];
	snprintf(path, sizeof path, "%s/gpupool.%ld", e2e_shm_dir(), (long)getpid());
	void *p = NULL, *dev = NULL;
	CK(cudaMalloc(&p, 4096)); /* the pool and its page */
	CK(cudaFree(p));
	typedef cudaError_t (*malloc_fn)(void **, size_t);
	malloc_fn native_malloc;
	E2E_FN(native_malloc, e2e_native("cudaMalloc"));
	CK(native_malloc(&dev, 4096)); /* not the pool's: the busy thread's target */

	int fd = open(path, O_RDWR | O_CLOEXEC);
	CHECK(fd >= 0);
	pg = mmap(NULL, sizeof *pg, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	CHECK(pg != MAP_FAILED);
	close(fd);

	pthread_t th[NT + 2];
	for (int i = 0; i < NT; i++)
		CHECK(pthread_create(&th[i], NULL, worker, NULL) == 0);
	CHECK(pthread_create(&th[NT], NULL, busy_device, dev) == 0);
	CHECK(pthread_create(&th[NT + 1], NULL, watch_done, NULL) == 0);

	uint64_t req = 0;
	for (int i = 0; i < NREQ; i++) {
		req = __atomic_add_fetch(&pg->release_request, 1, __ATOMIC_SEQ_CST);
		e2e_sleep_ms(1 + (unsigned)(i % 3));
	}
	/* every request answered (generous: the machine may be loaded) */
	for (int i = 0; i < 30000 && __atomic_load_n(&pg->release_done, __ATOMIC_ACQUIRE) < req; i++)
		e2e_sleep_ms(1);
	CHECK(__atomic_load_n(&pg->release_done, __ATOMIC_ACQUIRE) >= req);
	atomic_store(&stop, 1);
	for (int i = 0; i < NT + 2; i++)
		CHECK(pthread_join(th[i], NULL) == 0);

	uint64_t done = __atomic_load_n(&pg->release_done, __ATOMIC_ACQUIRE);
	fflush(stderr);
	dup2(saved_err, 2);
	int answers = count_lines(log, "of cached memory on request");
	printf("requests %llu, answered %d times, release_done %llu\n", (unsigned long long)req, answers,
	       (unsigned long long)done);
	CHECK(done == req);
	CHECK(!atomic_load(&backwards));
	CHECK(answers >= 1 && answers <= NREQ);
	CHECK(count_lines(log, "log limit reached") == 0);
	munmap(pg, sizeof *pg);
	CK(cudaFree(dev));
	return 0;
}
