/* gpupool_trace_flush: the rows of every thread reach the trace file while the process runs
 * (plain and .gz, the latter readable by zlib though its stream has no end yet); recording
 * goes on after; the trace's path comes back; -ERANGE for a short buffer; -ENOENT without a
 * trace. usage: e2e_trace_flush none | PATH  (PATH: the trace knob's, set by the test). */
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <zlib.h>

#include "e2e_util.h"

static int (*flush_)(char *, size_t);

/* Complete rows in the trace file (the header excluded). */
static long rows_in(const char *path)
{
	gzFile f = gzopen(path, "rb"); /* reads plain files too */
	CHECK(f != NULL);
	char buf[65536];
	long nl = 0;
	int n;
	while ((n = gzread(f, buf, sizeof buf)) > 0)
		for (int i = 0; i < n; i++)
			nl += buf[i] == '\n';
	gzclose(f);
	return nl - 1;
}

static void *worker(void *arg)
{
	(void)arg;
	for (int i = 0; i < 10; i++) {
		void *p;
		CK(cudaMalloc(&p, 4096));
		CK(cudaFree(p));
	}
	return NULL; /* the thread stays registered with its buffer until it exits: not joined yet */
}

int main(int argc, char **argv)
{
	CHECK(argc == 2);
	e2e_shm_dir();
	void *p;
	CK(cudaMalloc(&p, 1000)); /* the first pool opens the trace */
	E2E_API(flush_, "gpupool_trace_flush");
	char path[4096];
	if (!strcmp(argv[1], "none")) {
		CHECK(flush_(path, sizeof path) == -ENOENT);
		CK(cudaFree(p));
		printf("no trace: -ENOENT\n");
		return 0;
	}
	CHECK(flush_(NULL, 0) == 0);
	long r0 = rows_in(argv[1]);
	CHECK(r0 == 1);
	pthread_t t;
	CHECK(pthread_create(&t, NULL, worker, NULL) == 0);
	e2e_sleep_ms(50); /* the worker has made its calls and is waiting to be joined */
	for (int i = 0; i < 5; i++) {
		void *q;
		CK(cudaMallocAsync(&q, 1 << 20, 0));
		CK(cudaFreeAsync(q, 0));
	}
	memset(path, 0, sizeof path);
	CHECK(flush_(path, sizeof path) == 0);
	CHECK(!strcmp(path, argv[1]));
	long r1 = rows_in(argv[1]);
	CHECK(pthread_join(t, NULL) == 0);
	printf("after flush: %ld rows (1 + 20 of another thread + 10)\n", r1);
	CHECK(r1 >= 1 + 10); /* this thread's rows */
	CHECK(r1 == 1 + 20 + 10);
	char small[4];
	CHECK(flush_(small, sizeof small) == -ERANGE);
	CK(cudaFree(p));
	CHECK(flush_(NULL, 0) == 0);
	CHECK(rows_in(argv[1]) == r1 + 1);
	return 0;
}
