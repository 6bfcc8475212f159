/* gpupool-trace-driver: the "main job" of the replay benchmark. Reads a trace and issues
 * the real CUDA runtime calls in order (cudaMalloc/cudaFree/cudaMallocAsync/
 * cudaFreeAsync), checking every return code against the trace's err column. Plain CUDA
 * runtime user: runs unchanged with and without LD_PRELOAD=libgpupool.so. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda_runtime_api.h>
#include <uthash.h>

#include "tracefile.h"

struct pmap {
	uintptr_t tptr;
	void *real;
	UT_hash_handle hh;
};

struct smap {
	uint64_t key[2]; /* device, trace handle */
	cudaStream_t s;
	UT_hash_handle hh;
};

static struct pmap *g_ptrs;
static struct smap *g_streams;
static unsigned long g_mismatch_reports;

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void *xmalloc(size_t n)
{
	void *p = calloc(1, n);
	if (!p) {
		fprintf(stderr, "gpupool-trace-driver: out of host memory\n");
		exit(1);
	}
	return p;
}

/* One non-blocking stream per distinct (device, handle); 0, 1 (legacy) and 2
 * (per-thread) keep their special meaning. */
static cudaStream_t stream_for(int dev, uintptr_t handle, unsigned long *errs)
{
	if (handle <= 2)
		return (cudaStream_t)handle;
	struct smap *m;
	uint64_t key[2] = {(uint64_t)dev, (uint64_t)handle};
	HASH_FIND(hh, g_streams, key, sizeof key, m);
	if (m)
		return m->s;
	m = xmalloc(sizeof *m);
	memcpy(m->key, key, sizeof key);
	cudaError_t rc = cudaStreamCreateWithFlags(&m->s, cudaStreamNonBlocking);
	if (rc != cudaSuccess) {
		fprintf(stderr, "gpupool-trace-driver: cudaStreamCreateWithFlags: %s\n",
			cudaGetErrorString(rc));
		(*errs)++;
		m->s = 0;
	}
	HASH_ADD(hh, g_streams, key, sizeof m->key, m);
	return m->s;
}

static void check(const struct gp_trace_row *r, cudaError_t got, unsigned long *errs)
{
	if ((int)got == r->err)
		return;
	(*errs)++;
	if (g_mismatch_reports++ < 10)
		fprintf(stderr, "gpupool-trace-driver: line %lu: %s returned %d (%s), the trace says %d\n",
			r->line, gp_trace_op_name(r->op), (int)got, cudaGetErrorString(got), r->err);
}

int main(int argc, char **argv)
{
	const char *path = NULL;
	unsigned long long limit = 0;
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--limit-rows") == 0 && i + 1 < argc) {
			char *end;
			limit = strtoull(argv[++i], &end, 10);
			if (*end || argv[i][0] == '-') {
				fprintf(stderr, "gpupool-trace-driver: bad --limit-rows '%s'\n", argv[i]);
				return 2;
			}
		} else if (argv[i][0] == '-' || path) {
			fprintf(stderr, "usage: gpupool-trace-driver [--limit-rows N] TRACE\n");
			return 2;
		} else {
			path = argv[i];
		}
	}
	if (!path) {
		fprintf(stderr, "usage: gpupool-trace-driver [--limit-rows N] TRACE\n");
		return 2;
	}

	struct gp_tracefile *tf;
	char err[800];
	if (gp_tracefile_open(&tf, path, 0, err, sizeof err)) {
		fprintf(stderr, "gpupool-trace-driver: %s\n", err);
		return 2;
	}
	int ndev = 0, cur = -1;
	cudaError_t rc = cudaGetDeviceCount(&ndev);
	if (rc != cudaSuccess || ndev <= 0) {
		fprintf(stderr, "gpupool-trace-driver: no CUDA device: %s\n", cudaGetErrorString(rc));
		return 1;
	}
	if (cudaGetDevice(&cur) != cudaSuccess)
		cur = -1;

	struct gp_trace_row r;
	unsigned long long ops = 0, calls = 0, unknown = 0;
	unsigned long errs = 0;
	uint64_t call_ns = 0, t_start = now_ns();
	int n;
	while ((!limit || ops < limit) && (n = gp_tracefile_next(tf, &r)) > 0) {
		ops++;
		int dev = r.dev < ndev ? r.dev : ndev - 1;
		if (dev != cur) {
			rc = cudaSetDevice(dev);
			if (rc != cudaSuccess) {
				fprintf(stderr, "gpupool-trace-driver: cudaSetDevice(%d): %s\n", dev,
					cudaGetErrorString(rc));
				errs++;
			}
			cur = dev;
		}
		bool async = r.op == GP_TRACE_MALLOC_ASYNC || r.op == GP_TRACE_FREE_ASYNC;
		cudaStream_t s = async ? stream_for(dev, r.stream, &errs) : 0;
		uint64_t t0, t1;
		if (r.op == GP_TRACE_MALLOC || r.op == GP_TRACE_MALLOC_ASYNC) {
			void *p = NULL;
			t0 = now_ns();
			rc = async ? cudaMallocAsync(&p, (size_t)r.size, s) : cudaMalloc(&p, (size_t)r.size);
			t1 = now_ns();
			check(&r, rc, &errs);
			if (rc == cudaSuccess && p) {
				struct pmap *m;
				HASH_FIND(hh, g_ptrs, &r.ptr, sizeof r.ptr, m);
				if (!m) {
					m = xmalloc(sizeof *m);
					m->tptr = r.ptr;
					HASH_ADD(hh, g_ptrs, tptr, sizeof m->tptr, m);
				}
				m->real = p; /* a lost free in the trace leaks the old one, as it did */
			}
			if (rc != cudaSuccess)
				(void)cudaGetLastError();
		} else {
			struct pmap *m = NULL;
			void *p = NULL;
			if (r.ptr) {
				HASH_FIND(hh, g_ptrs, &r.ptr, sizeof r.ptr, m);
				if (!m) {
					if (unknown++ == 0)
						fprintf(stderr, "gpupool-trace-driver: line %lu: free of %lx, never "
							"allocated in the trace: skipped (counted)\n",
							r.line, (unsigned long)r.ptr);
					continue;
				}
				p = m->real;
			}
			t0 = now_ns();
			rc = async ? cudaFreeAsync(p, s) : cudaFree(p);
			t1 = now_ns();
			check(&r, rc, &errs);
			if (m && rc == cudaSuccess) {
				HASH_DEL(g_ptrs, m);
				free(m);
			}
			if (rc != cudaSuccess)
				(void)cudaGetLastError();
		}
		calls++;
		call_ns += t1 - t0;
	}
	if (n < 0 && (!limit || ops < limit)) {
		fprintf(stderr, "gpupool-trace-driver: %s\n", gp_tracefile_error(tf));
		return 2;
	}
	gp_tracefile_close(tf);
	rc = cudaDeviceSynchronize();
	if (rc != cudaSuccess) {
		fprintf(stderr, "gpupool-trace-driver: cudaDeviceSynchronize: %s\n", cudaGetErrorString(rc));
		errs++;
	}
	uint64_t wall = now_ns() - t_start;
	printf("ops=%llu\ncalls=%llu\nwall_ns=%llu\ncall_ns=%llu\nns_per_call=%.1f\nerrors=%lu\n"
	       "unknown_frees=%llu\nlive_at_end=%u\nstreams=%u\n",
	       ops, calls, (unsigned long long)wall, (unsigned long long)call_ns,
	       calls ? (double)call_ns / (double)calls : 0.0, errs, unknown, HASH_COUNT(g_ptrs),
	       HASH_COUNT(g_streams));
	return errs ? 1 : 0;
}
