/* Helpers shared by the end-to-end programs (tests/e2e/e2e_*.c): checks that exit 1 with
 * the failing expression, the gpupool_* API resolved at run time (the programs link the fake
 * runtime only; libgpupool.so comes in through LD_PRELOAD), device memory checks through the
 * runtime, the statistics page directory and the thread count. Header-only, static. */
#ifndef GP_E2E_UTIL_H
#define GP_E2E_UTIL_H

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "fakecuda.h"
#include "gpupool.h"

#define CK(call)                                                                                        \
	do {                                                                                            \
		cudaError_t e_ = (call);                                                                \
		if (e_ != cudaSuccess) {                                                                \
			fprintf(stderr, "%s:%d: %s -> %s\n", __FILE__, __LINE__, #call, cudaGetErrorName(e_)); \
			exit(1);                                                                        \
		}                                                                                       \
	} while (0)

#define CKE(call, want)                                                                                 \
	do {                                                                                            \
		cudaError_t e_ = (call);                                                                \
		if (e_ != (want)) {                                                                     \
			fprintf(stderr, "%s:%d: %s -> %s, expected %s\n", __FILE__, __LINE__, #call,    \
				cudaGetErrorName(e_), cudaGetErrorName(want));                          \
			exit(1);                                                                        \
		}                                                                                       \
	} while (0)

static inline uint64_t e2e_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline void e2e_sleep_ms(unsigned ms)
{
	struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

/* Sets function pointer `fp` from symbol address `sym` (dlsym, e2e_native), which must
 * not be NULL. */
#define E2E_FN(fp, sym)                                 \
	do {                                            \
		void *s_ = (sym);                       \
		CHECK(s_ != NULL);                      \
		memcpy(&(fp), &s_, sizeof(fp));         \
	} while (0)

/* A gpupool_* entry point of the preloaded library (the programs link the fake runtime
 * only); the check fails when the library is not loaded. */
#define E2E_API(fp, name) E2E_FN(fp, dlsym(RTLD_DEFAULT, name))

/* gpupool_stats from the preloaded library; NULL when it is not loaded. */
typedef int (*e2e_stats_fn)(int, struct gpupool_device_stats *);
static inline e2e_stats_fn e2e_stats_api(void)
{
	void *s = dlsym(RTLD_DEFAULT, "gpupool_stats");
	e2e_stats_fn f;
	memcpy(&f, &s, sizeof f);
	return f;
}

static inline struct gpupool_device_stats e2e_stats(int dev)
{
	struct gpupool_device_stats st;
	memset(&st, 0, sizeof st);
	e2e_stats_fn f = e2e_stats_api();
	CHECK(f != NULL);
	int rc = f(dev, &st);
	if (rc != 0)
		fprintf(stderr, "gpupool_stats(%d) = %d\n", dev, rc);
	CHECK(rc == 0);
	return st;
}

/* Waits (up to 2 s) until no block of `dev` waits for a fence. */
static inline void e2e_wait_no_pending(int dev)
{
	for (int i = 0; i < 2000; i++) {
		if (e2e_stats(dev).pending_frees == 0)
			return;
		e2e_sleep_ms(1);
	}
	CHECK(!"pending frees were not fenced within 2 s");
}

/* The fake's own entry point `name`, bypassing libgpupool.so. */
static inline void *e2e_native(const char *name)
{
	void *h = dlopen("libcudart.so.13", RTLD_NOW | RTLD_NOLOAD);
	CHECK(h != NULL);
	void *s = dlsym(h, name);
	CHECK(s != NULL);
	dlclose(h);
	return s;
}

/* True when the n device bytes at dev all equal v (read back with cudaMemcpy). */
static inline int e2e_dev_all(const void *dev, size_t n, unsigned char v)
{
	unsigned char *h = malloc(n);
	CHECK(h != NULL);
	CK(cudaMemcpy(h, dev, n, cudaMemcpyDeviceToHost));
	size_t bad = n;
	for (size_t i = 0; i < n && bad == n; i++)
		if (h[i] != v)
			bad = i;
	if (bad != n)
		fprintf(stderr, "byte %zu of %p is 0x%02x, expected 0x%02x\n", bad, dev, h[bad], v);
	free(h);
	return bad == n;
}

/* Runs fn(0) .. fn(n - 1) on n threads at once and waits for them all (n at most 64). */
static inline void e2e_run_threads(unsigned n, void *(*fn)(void *))
{
	pthread_t t[64];
	CHECK(n <= 64);
	for (uintptr_t i = 0; i < n; i++)
		CHECK(pthread_create(&t[i], NULL, fn, (void *)i) == 0);
	for (unsigned i = 0; i < n; i++)
		pthread_join(t[i], NULL);
}

/* The statistics page directory (GPUPOOL_SHM_DIR from the test environment), created. */
static inline const char *e2e_shm_dir(void)
{
	const char *d = getenv("GPUPOOL_SHM_DIR");
	CHECK(d && *d && strlen(d) < 4000);
	char buf[4096];
	snprintf(buf, sizeof buf, "%s", d);
	for (char *c = buf + 1;; c++) { /* mkdir -p */
		if (*c == '/' || !*c) {
			char save = *c;
			*c = 0;
			if (mkdir(buf, 0700) != 0)
				CHECK(errno == EEXIST);
			*c = save;
			if (!save)
				break;
		}
	}
	return d;
}

/* Entries named gpupool.* in the page directory. */
static inline int e2e_count_pages(void)
{
	DIR *dir = opendir(e2e_shm_dir());
	CHECK(dir != NULL);
	int n = 0;
	struct dirent *de;
	while ((de = readdir(dir)))
		if (!strncmp(de->d_name, "gpupool.", 8))
			n++;
	closedir(dir);
	return n;
}

static inline int e2e_page_exists(long pid)
{
	char p[4096];
	snprintf(p, sizeof p, "%s/gpupool.%ld", e2e_shm_dir(), pid);
	return access(p, F_OK) == 0;
}

/* Reads the pid field of the page of process `pid`; -1 when unreadable. */
static inline long e2e_page_pid(long pid)
{
	char p[4096];
	snprintf(p, sizeof p, "%s/gpupool.%ld", e2e_shm_dir(), pid);
	FILE *f = fopen(p, "rb");
	if (!f)
		return -1;
	struct gpupool_page pg;
	size_t n = fread(&pg, 1, sizeof pg, f);
	fclose(f);
	if (n != sizeof pg || pg.magic != GPUPOOL_PAGE_MAGIC)
		return -1;
	return pg.pid;
}

static inline int e2e_thread_count(void)
{
	DIR *dir = opendir("/proc/self/task");
	CHECK(dir != NULL);
	int n = 0;
	struct dirent *de;
	while ((de = readdir(dir)))
		if (de->d_name[0] != '.')
			n++;
	closedir(dir);
	return n;
}

/* What the program writes to stderr from e2e_stderr_begin to e2e_stderr_end (a line gpupool
 * logs, say) goes to a temporary file instead; end puts it into buf (cap bytes,
 * NUL-terminated) and answers its length. */
struct e2e_stderr {
	int fd, saved;
};

static inline struct e2e_stderr e2e_stderr_begin(void)
{
	char path[] = "/tmp/gpupool-e2e-stderr-XXXXXX";
	struct e2e_stderr c = {mkstemp(path), -1};
	CHECK(c.fd >= 0);
	unlink(path);
	fflush(stderr);
	c.saved = dup(2);
	CHECK(c.saved >= 0 && dup2(c.fd, 2) == 2);
	return c;
}

static inline size_t e2e_stderr_end(struct e2e_stderr c, char *buf, size_t cap)
{
	fflush(stderr);
	dup2(c.saved, 2);
	close(c.saved);
	ssize_t n = pread(c.fd, buf, cap - 1, 0);
	close(c.fd);
	buf[n > 0 ? n : 0] = 0;
	return n > 0 ? (size_t)n : 0;
}

#endif
