/* Tests of the fake CUDA runtime itself (tests/fake/fakecuda.c): memory and errors, stream
 * order, fences, events, per-thread streams, capture and graphs, IPC, counters and fault
 * injection (API and FAKECUDA_FAIL in a child process), the driver's entry points asked of
 * the fake driver (found through LD_LIBRARY_PATH). Links only against the fake. */
#define CUDA_ENABLE_DEPRECATED /* cudaGetDriverEntryPoint is deprecated in CUDA 13 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include <cuda.h>

#include "fakecuda.h"
#include "testproc.h"

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int all_bytes(const void *p, size_t n, unsigned char v)
{
	const unsigned char *b = p;
	for (size_t i = 0; i < n; i++)
		if (b[i] != v)
			return 0;
	return 1;
}

/* The byte at p of device memory, read from the host while a stream worker may be writing it:
 * on purpose (the fake's device memory is host memory), to see that queued work has not run
 * yet, which ThreadSanitizer would call a race. */
__attribute__((no_sanitize("thread"), noinline)) static unsigned char peek_unordered(const unsigned char *p)
{
	return *(const volatile unsigned char *)p; /* volatile: the read stays here, uninstrumented */
}

static int setup(void **state)
{
	(void)state;
	assert_int_equal(cudaSetDevice(0), cudaSuccess);
	assert_int_equal(cudaDeviceSynchronize(), cudaSuccess);
	gpfake_fail_clear();
	gpfake_set_capacity(0, (size_t)1 << 30);
	gpfake_set_capacity(1, (size_t)1 << 30);
	(void)cudaGetLastError();
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	assert_int_equal(cudaDeviceSynchronize(), cudaSuccess);
	assert_int_equal(gpfake_allocations(-1), 0);
	assert_int_equal(gpfake_faults(), 0);
	return 0;
}

static void *peek_other_thread(void *arg)
{
	cudaError_t *out = arg;
	out[0] = cudaPeekAtLastError();
	out[1] = cudaGetLastError();
	return NULL;
}

static void test_memory_and_errors(void **state)
{
	(void)state;
	void *p = NULL, *q = (void *)1;
	size_t fr, tot;
	gpfake_set_capacity(0, 8192);
	assert_int_equal(cudaMalloc(&p, 4000), cudaSuccess);
	assert_non_null(p);
	assert_int_equal((uintptr_t)p % 512, 0);
	assert_int_equal(gpfake_used(0), 4096);
	assert_int_equal(cudaMemGetInfo(&fr, &tot), cudaSuccess);
	assert_int_equal(tot, 8192);
	assert_int_equal(fr, 4096);

	/* Beyond capacity: OOM, sticky last error until read, per thread. */
	assert_int_equal(cudaMalloc(&q, 4097), cudaErrorMemoryAllocation);
	assert_ptr_equal(q, (void *)1);
	assert_int_equal(gpfake_used(0), 4096);
	cudaError_t other[2];
	pthread_t t;
	pthread_create(&t, NULL, peek_other_thread, other);
	pthread_join(t, NULL);
	assert_int_equal(other[0], cudaSuccess);
	assert_int_equal(other[1], cudaSuccess);
	assert_int_equal(cudaPeekAtLastError(), cudaErrorMemoryAllocation);
	assert_int_equal(cudaPeekAtLastError(), cudaErrorMemoryAllocation);
	assert_int_equal(cudaGetLastError(), cudaErrorMemoryAllocation);
	assert_int_equal(cudaGetLastError(), cudaSuccess);

	/* Device 1 has its own capacity and accounting. */
	assert_int_equal(cudaSetDevice(1), cudaSuccess);
	assert_int_equal(cudaMalloc(&q, 4097), cudaSuccess);
	assert_int_equal(gpfake_used(1), 4608);
	struct cudaPointerAttributes at;
	assert_int_equal(cudaPointerGetAttributes(&at, (char *)q + 100), cudaSuccess);
	assert_int_equal(at.type, cudaMemoryTypeDevice);
	assert_int_equal(at.device, 1);
	assert_ptr_equal(at.devicePointer, (char *)q + 100);
	assert_int_equal(cudaPointerGetAttributes(&at, &at), cudaSuccess);
	assert_int_equal(at.type, cudaMemoryTypeUnregistered);
	assert_int_equal(cudaFree(q), cudaSuccess);
	assert_int_equal(gpfake_used(1), 0);
	assert_int_equal(cudaSetDevice(7), cudaErrorInvalidDevice);
	int d = -1, n = 0;
	assert_int_equal(cudaGetDevice(&d), cudaSuccess);
	assert_int_equal(d, 1);
	assert_int_equal(cudaGetDeviceCount(&n), cudaSuccess);
	assert_int_equal(n, 2);
	assert_int_equal(cudaSetDevice(0), cudaSuccess);

	/* Argument rules. */
	assert_int_equal(cudaMalloc(NULL, 16), cudaErrorInvalidValue);
	q = (void *)1;
	assert_int_equal(cudaMalloc(&q, 0), cudaSuccess);
	assert_null(q);
	assert_int_equal(cudaFree(NULL), cudaSuccess);
	assert_int_equal(cudaFree((char *)p + 512), cudaErrorInvalidValue);
	assert_int_equal(cudaGetLastError(), cudaErrorInvalidValue);
	assert_int_equal(cudaFree(p), cudaSuccess);
	assert_int_equal(cudaFree(p), cudaErrorInvalidValue);
	assert_int_equal(gpfake_used(0), 0);
	assert_string_equal(cudaGetErrorName(cudaErrorMemoryAllocation), "cudaErrorMemoryAllocation");
	assert_string_equal(cudaGetErrorString(cudaErrorMemoryAllocation), "out of memory");
	int v = 0;
	assert_int_equal(cudaRuntimeGetVersion(&v), cudaSuccess);
	assert_int_equal(v, 13000);
	(void)cudaGetLastError();
}

static void test_fill_stream_order(void **state)
{
	(void)state;
	enum { N = 4096 };
	unsigned char *p, host[N];
	cudaStream_t s;
	assert_int_equal(cudaStreamCreate(&s), cudaSuccess);
	assert_int_equal(cudaMalloc((void **)&p, N), cudaSuccess);
	assert_int_equal(cudaMemset(p, 0, N), cudaSuccess); /* device memory starts unspecified */
	double t0 = now_ms();
	assert_int_equal(gpfake_launch_fill(p, N, 0xAA, 150000, s), cudaSuccess);
	assert_int_equal(cudaMemsetAsync(p, 0x55, N / 2, s), cudaSuccess);
	assert_int_equal(cudaMemcpyAsync(host, p, N, cudaMemcpyDeviceToHost, s), cudaSuccess);
	assert_int_equal(cudaStreamQuery(s), cudaErrorNotReady);
	assert_int_equal(cudaGetLastError(), cudaSuccess);     /* NotReady is not an error */
	assert_int_equal(peek_unordered(p), 0);                 /* the fill has not landed yet */
	assert_int_equal(cudaStreamSynchronize(s), cudaSuccess);
	assert_true(now_ms() - t0 >= 140);
	assert_int_equal(cudaStreamQuery(s), cudaSuccess);
	assert_true(all_bytes(host, N / 2, 0x55));
	assert_true(all_bytes(host + N / 2, N / 2, 0xAA));

	/* Legacy stream waits for earlier work of blocking streams (sync memcpy sees the fill). */
	assert_int_equal(gpfake_launch_fill(p, N, 0x11, 100000, s), cudaSuccess);
	memset(host, 0, N);
	assert_int_equal(cudaMemcpy(host, p, N, cudaMemcpyDeviceToHost), cudaSuccess);
	assert_true(all_bytes(host, N, 0x11));

	/* A non-blocking stream is not ordered with the legacy stream. */
	cudaStream_t nb;
	unsigned char *r;
	assert_int_equal(cudaStreamCreateWithFlags(&nb, cudaStreamNonBlocking), cudaSuccess);
	assert_int_equal(cudaMalloc((void **)&r, N), cudaSuccess);
	assert_int_equal(gpfake_launch_fill(p, N, 0x22, 300000, nb), cudaSuccess);
	t0 = now_ms();
	assert_int_equal(cudaMemset(r, 0x33, N), cudaSuccess);
	assert_true(now_ms() - t0 < 250);
	assert_int_equal(r[N - 1], 0x33);
	assert_int_equal(cudaStreamQuery(nb), cudaErrorNotReady);
	assert_int_equal(cudaStreamDestroy(nb), cudaSuccess);   /* queued work still runs */
	assert_int_equal(cudaStreamDestroy(nb), cudaErrorInvalidResourceHandle);
	(void)cudaGetLastError();
	assert_int_equal(cudaDeviceSynchronize(), cudaSuccess);
	assert_int_equal(p[N - 1], 0x22);

	/* Bad arguments. */
	assert_int_equal(cudaMemsetAsync(p, 0, N + 1, s), cudaErrorInvalidValue);
	assert_int_equal(cudaMemcpy(host, p, 1, (enum cudaMemcpyKind)9),
	                 cudaErrorInvalidMemcpyDirection);
	(void)cudaGetLastError();
	assert_int_equal(cudaFree(r), cudaSuccess);
	assert_int_equal(cudaFree(p), cudaSuccess);
	assert_int_equal(cudaStreamDestroy(s), cudaSuccess);
}

static void test_free_is_fence(void **state)
{
	(void)state;
	unsigned char *p;
	cudaStream_t s;
	assert_int_equal(cudaStreamCreate(&s), cudaSuccess);
	assert_int_equal(cudaMalloc((void **)&p, 1 << 20), cudaSuccess);
	double t0 = now_ms();
	assert_int_equal(gpfake_launch_fill(p, 1 << 20, 0x7f, 150000, s), cudaSuccess);
	assert_int_equal(cudaFree(p), cudaSuccess);   /* must wait for the fill, then free */
	assert_true(now_ms() - t0 >= 140);
	assert_int_equal(cudaStreamQuery(s), cudaSuccess);
	assert_int_equal(gpfake_used(0), 0);

	/* cudaFreeAsync: released when the stream reaches it. */
	assert_int_equal(cudaMallocAsync((void **)&p, 1000, s), cudaSuccess);
	assert_int_equal(gpfake_launch_fill(p, 1000, 1, 100000, s), cudaSuccess);
	assert_int_equal(cudaFreeAsync(p, s), cudaSuccess);
	assert_int_equal(gpfake_used(0), 1024);
	assert_int_equal(cudaFreeAsync(p, s), cudaErrorInvalidValue);
	assert_int_equal(cudaFree(p), cudaErrorInvalidValue);
	(void)cudaGetLastError();
	assert_int_equal(cudaStreamSynchronize(s), cudaSuccess);
	assert_int_equal(gpfake_used(0), 0);
	assert_int_equal(cudaStreamDestroy(s), cudaSuccess);
}

static void test_events(void **state)
{
	(void)state;
	enum { N = 8192 };
	unsigned char *a, *b;
	cudaStream_t s1, s2;
	cudaEvent_t ev, e0;
	assert_int_equal(cudaStreamCreate(&s1), cudaSuccess);
	assert_int_equal(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking), cudaSuccess);
	assert_int_equal(cudaEventCreate(&ev), cudaSuccess);
	assert_int_equal(cudaEventCreate(&e0), cudaSuccess);
	assert_int_equal(cudaEventQuery(ev), cudaSuccess);        /* never recorded */
	assert_int_equal(cudaMalloc((void **)&a, N), cudaSuccess);
	assert_int_equal(cudaMalloc((void **)&b, N), cudaSuccess);
	assert_int_equal(cudaEventRecord(e0, s1), cudaSuccess);
	assert_int_equal(gpfake_launch_fill(a, N, 0x5a, 150000, s1), cudaSuccess);
	assert_int_equal(cudaEventRecord(ev, s1), cudaSuccess);
	assert_int_equal(cudaEventQuery(ev), cudaErrorNotReady);
	assert_int_equal(cudaStreamWaitEvent(s2, ev, 0), cudaSuccess);
	assert_int_equal(cudaMemcpyAsync(b, a, N, cudaMemcpyDeviceToDevice, s2), cudaSuccess);
	assert_int_equal(cudaStreamSynchronize(s2), cudaSuccess);
	assert_true(all_bytes(b, N, 0x5a));
	assert_int_equal(cudaEventQuery(ev), cudaSuccess);
	assert_int_equal(cudaEventSynchronize(ev), cudaSuccess);
	float ms = 0;
	assert_int_equal(cudaEventElapsedTime(&ms, e0, ev), cudaSuccess);
	assert_true(ms >= 140.0f);
	/* Destroying an event with a queued record is fine. */
	assert_int_equal(gpfake_launch_fill(a, N, 1, 20000, s1), cudaSuccess);
	assert_int_equal(cudaEventRecord(ev, s1), cudaSuccess);
	assert_int_equal(cudaEventDestroy(ev), cudaSuccess);
	assert_int_equal(cudaEventDestroy(e0), cudaSuccess);
	assert_int_equal(cudaStreamSynchronize(s1), cudaSuccess);
	assert_int_equal(cudaFree(a), cudaSuccess);
	assert_int_equal(cudaFree(b), cudaSuccess);
	assert_int_equal(cudaStreamDestroy(s1), cudaSuccess);
	assert_int_equal(cudaStreamDestroy(s2), cudaSuccess);
}

struct ids {
	unsigned long long pt, pt0, legacy;
};

static void *get_ids(void *arg)
{
	struct ids *r = arg;
	assert_int_equal(cudaStreamGetId(cudaStreamPerThread, &r->pt), cudaSuccess);
	assert_int_equal(cudaStreamGetId_ptsz(NULL, &r->pt0), cudaSuccess);
	assert_int_equal(cudaStreamGetId(NULL, &r->legacy), cudaSuccess);
	return NULL;
}

static void test_per_thread_streams(void **state)
{
	(void)state;
	struct ids m, t1, t2, again;
	pthread_t th;
	get_ids(&m);
	get_ids(&again);
	pthread_create(&th, NULL, get_ids, &t1);
	pthread_join(th, NULL);
	pthread_create(&th, NULL, get_ids, &t2);
	pthread_join(th, NULL);
	assert_true(m.pt == m.pt0 && m.pt == again.pt);
	assert_true(t1.pt == t1.pt0 && t2.pt == t2.pt0);
	assert_true(m.pt != t1.pt && m.pt != t2.pt && t1.pt != t2.pt);
	assert_true(m.legacy == t1.legacy && m.legacy == t2.legacy);
	assert_true(m.legacy != m.pt);

	/* _ptsz with stream 0 uses the per-thread stream: a fill there is not on the legacy one. */
	unsigned char *p;
	assert_int_equal(cudaMalloc((void **)&p, 512), cudaSuccess);
	assert_int_equal(cudaMemsetAsync_ptsz(p, 9, 512, NULL), cudaSuccess);
	assert_int_equal(cudaStreamSynchronize_ptsz(NULL), cudaSuccess);
	assert_int_equal(p[511], 9);
	assert_int_equal(gpfake_calls("cudaMemsetAsync_ptsz"), 1);
	assert_int_equal(cudaFreeAsync_ptsz(p, NULL), cudaSuccess);
	assert_int_equal(cudaStreamSynchronize(cudaStreamPerThread), cudaSuccess);
}

static void test_capture(void **state)
{
	(void)state;
	unsigned char *p;
	cudaStream_t s;
	cudaGraph_t g = (cudaGraph_t)1;
	enum cudaStreamCaptureStatus st;
	assert_int_equal(cudaStreamCreate(&s), cudaSuccess);
	assert_int_equal(cudaMalloc((void **)&p, 1024), cudaSuccess);
	assert_int_equal(cudaMemset(p, 0, 1024), cudaSuccess); /* device memory starts unspecified */

	/* DeviceSynchronize during a global capture fails and invalidates it. */
	assert_int_equal(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), cudaSuccess);
	assert_int_equal(cudaStreamIsCapturing(s, &st), cudaSuccess);
	assert_int_equal(st, cudaStreamCaptureStatusActive);
	assert_int_equal(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal),
	                 cudaErrorIllegalState);
	assert_int_equal(cudaMemsetAsync(p, 3, 1024, s), cudaSuccess);
	assert_int_equal(cudaStreamIsCapturing(NULL, &st), cudaErrorStreamCaptureImplicit);
	assert_int_equal(cudaDeviceSynchronize(), cudaErrorStreamCaptureUnsupported);
	assert_int_equal(cudaGetLastError(), cudaErrorStreamCaptureUnsupported);
	assert_int_equal(cudaStreamIsCapturing(s, &st), cudaSuccess);
	assert_int_equal(st, cudaStreamCaptureStatusInvalidated);
	assert_int_equal(cudaStreamEndCapture(s, &g), cudaErrorStreamCaptureInvalidated);
	assert_null(g);
	assert_int_equal(p[0], 0);                       /* captured work never ran */

	/* cudaMalloc and cudaFree are unsafe during a global capture too. */
	void *q;
	assert_int_equal(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), cudaSuccess);
	assert_int_equal(cudaMalloc(&q, 16), cudaErrorStreamCaptureUnsupported);
	assert_int_equal(cudaStreamEndCapture(s, &g), cudaErrorStreamCaptureInvalidated);
	assert_int_equal(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), cudaSuccess);
	assert_int_equal(cudaFree(p), cudaErrorStreamCaptureUnsupported);
	assert_int_equal(cudaStreamEndCapture(s, &g), cudaErrorStreamCaptureInvalidated);

	/* Relaxed mode allows them. */
	assert_int_equal(cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed), cudaSuccess);
	assert_int_equal(cudaDeviceSynchronize(), cudaSuccess);
	assert_int_equal(cudaStreamEndCapture(s, &g), cudaSuccess);
	assert_int_equal(cudaGraphDestroy(g), cudaSuccess);

	/* A clean capture gives a graph that replays the work. */
	assert_int_equal(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), cudaSuccess);
	assert_int_equal(cudaMemsetAsync(p, 4, 1024, s), cudaSuccess);
	assert_int_equal(gpfake_launch_fill(p, 10, 5, 1000, s), cudaSuccess);
	assert_int_equal(cudaStreamEndCapture(s, &g), cudaSuccess);
	assert_non_null(g);
	assert_int_equal(p[0], 0);
	cudaGraphExec_t x;
	assert_int_equal(cudaGraphInstantiate(&x, g, 0), cudaSuccess);
	assert_int_equal(cudaGraphDestroy(g), cudaSuccess);
	assert_int_equal(cudaGraphLaunch(x, s), cudaSuccess);
	assert_int_equal(cudaStreamSynchronize(s), cudaSuccess);
	assert_int_equal(p[0], 5);
	assert_int_equal(p[10], 4);
	assert_int_equal(cudaGraphExecDestroy(x), cudaSuccess);
	assert_int_equal(cudaStreamEndCapture(s, &g), cudaErrorIllegalState);
	assert_int_equal(cudaStreamBeginCapture(NULL, cudaStreamCaptureModeGlobal),
	                 cudaErrorStreamCaptureUnsupported);
	(void)cudaGetLastError();
	assert_int_equal(cudaFree(p), cudaSuccess);
	assert_int_equal(cudaStreamDestroy(s), cudaSuccess);
}

static void test_ipc(void **state)
{
	(void)state;
	char *p;
	void *o = NULL;
	cudaIpcMemHandle_t h;
	assert_int_equal(cudaMalloc((void **)&p, 1 << 16), cudaSuccess);
	assert_int_equal(cudaIpcGetMemHandle(&h, p + 4096), cudaSuccess);
	assert_int_equal(cudaIpcOpenMemHandle(&o, h, cudaIpcMemLazyEnablePeerAccess), cudaSuccess);
	assert_ptr_equal(o, p);                          /* the whole allocation, not p + 4096 */
	assert_int_equal(cudaIpcCloseMemHandle(o), cudaSuccess);
	assert_int_equal(cudaIpcCloseMemHandle(o), cudaErrorInvalidValue);
	int local;
	assert_int_equal(cudaIpcGetMemHandle(&h, &local), cudaErrorInvalidValue);
	(void)cudaGetLastError();
	assert_int_equal(cudaFree(p), cudaSuccess);
}

static void test_counters_and_injection(void **state)
{
	(void)state;
	void *p = (void *)1, *q;
	typedef unsigned long (*calls_fn)(const char *);
	calls_fn f = (calls_fn)(uintptr_t)dlsym(RTLD_DEFAULT, "gpfake_calls");
	assert_non_null(f);
	gpfake_reset_counters();
	assert_int_equal(gpfake_calls("cudaMalloc"), 0);
	assert_int_equal(gpfake_fail_nth("cudaMalloc", 2, cudaErrorMemoryAllocation), 0);
	assert_int_equal(gpfake_fail_nth("noSuchFunction", 1, cudaErrorUnknown), -1);
	assert_int_equal(cudaMalloc(&q, 100), cudaSuccess);
	size_t used = gpfake_used(0);
	assert_int_equal(cudaMalloc(&p, 100), cudaErrorMemoryAllocation);
	assert_ptr_equal(p, (void *)1);                  /* no side effects */
	assert_int_equal(gpfake_used(0), used);
	assert_int_equal(cudaGetLastError(), cudaErrorMemoryAllocation);
	assert_int_equal(cudaMalloc(&p, 100), cudaSuccess);
	assert_int_equal(f("cudaMalloc"), 3);
	assert_int_equal(gpfake_fail_nth("cudaFree", 1, cudaErrorIllegalAddress), 0);
	assert_int_equal(cudaFree(p), cudaErrorIllegalAddress);
	assert_int_equal(cudaGetLastError(), cudaErrorIllegalAddress);
	assert_int_equal(cudaFree(p), cudaSuccess);
	assert_int_equal(cudaFree(q), cudaSuccess);
	assert_int_equal(gpfake_calls("cudaFree"), 3);
	assert_int_equal(gpfake_calls("cudaMallocAsync"), 0);
	gpfake_reset_counters();
	assert_int_equal(gpfake_calls("cudaFree"), 0);
}

/* Several threads, each on its own per-thread stream, with allocation, copies and async frees
 * interleaved: every thread must read back exactly its own bytes. */
static void *stress_thread(void *arg)
{
	unsigned char tag = (unsigned char)(uintptr_t)arg;
	unsigned char host[3000];
	int bad = 0;
	for (int i = 0; i < 200; i++) {
		unsigned char *p = NULL;
		size_t n = 100 + (size_t)(i * 13 % 2900);
		if (cudaMallocAsync_ptsz((void **)&p, n, NULL) != cudaSuccess)
			return (void *)1;
		cudaMemsetAsync_ptsz(p, tag, n, NULL);
		if (i % 7 == 0)
			gpfake_launch_fill(p, n / 2, (unsigned char)(tag + 1), 100, cudaStreamPerThread);
		cudaMemcpyAsync_ptsz(host, p, n, cudaMemcpyDeviceToHost, NULL);
		cudaFreeAsync_ptsz(p, NULL);
		cudaStreamSynchronize(cudaStreamPerThread);
		if (!all_bytes(host + n / 2, n - n / 2, tag) ||
		    !all_bytes(host, n / 2, i % 7 == 0 ? (unsigned char)(tag + 1) : tag))
			bad++;
	}
	return (void *)(uintptr_t)bad;
}

static void test_threads(void **state)
{
	(void)state;
	pthread_t t[6];
	for (uintptr_t i = 0; i < 6; i++)
		pthread_create(&t[i], NULL, stress_thread, (void *)(i * 16 + 3));
	for (int i = 0; i < 6; i++) {
		void *r;
		pthread_join(t[i], &r);
		assert_null(r);
	}
	assert_int_equal(gpfake_used(0), 0);
}

/* Managed, pitched and 3D allocations draw from the device's capacity like cudaMalloc, are
 * ordinary device memory to copies and are freed with cudaFree. */
static void test_managed_pitched(void **state)
{
	(void)state;
	void *m = NULL, *p = NULL, *big = NULL;
	size_t pitch = 0, fr, tot;
	struct cudaPitchedPtr pp, empty;
	gpfake_reset_counters();
	gpfake_set_capacity(0, (size_t)64 << 10);
	assert_int_equal(cudaMallocManaged(&m, 1000, 4), cudaErrorInvalidValue);
	assert_int_equal(cudaMallocManaged(&m, 0, cudaMemAttachGlobal), cudaErrorInvalidValue);
	assert_int_equal(cudaMallocManaged(NULL, 10, cudaMemAttachGlobal), cudaErrorInvalidValue);
	assert_int_equal(cudaGetLastError(), cudaErrorInvalidValue);
	assert_int_equal(cudaMallocManaged(&m, 1000, cudaMemAttachHost), cudaSuccess);
	assert_int_equal(gpfake_used(0), 1024);
	assert_int_equal(cudaMallocPitch(&p, &pitch, 1000, 3), cudaSuccess);
	assert_int_equal(pitch, 1024);
	assert_int_equal(gpfake_used(0), 1024 + 3 * 1024);
	assert_int_equal(cudaMalloc3D(&pp, (struct cudaExtent){ 100, 2, 3 }), cudaSuccess);
	assert_non_null(pp.ptr);
	assert_int_equal(pp.pitch, 512);
	assert_int_equal(pp.xsize, 100);
	assert_int_equal(pp.ysize, 2);
	assert_int_equal(gpfake_used(0), 4 * 1024 + 6 * 512);
	assert_int_equal(gpfake_allocations(0), 3);
	assert_int_equal(cudaMemGetInfo(&fr, &tot), cudaSuccess);
	assert_int_equal(fr, tot - gpfake_used(0));
	/* ordinary device memory for copies: the whole pitched extent */
	unsigned char host[3 * 1024];
	assert_int_equal(cudaMemset(p, 0x5a, 3 * pitch), cudaSuccess);
	assert_int_equal(cudaMemcpy(host, p, sizeof host, cudaMemcpyDeviceToHost), cudaSuccess);
	assert_true(all_bytes(host, sizeof host, 0x5a));
	assert_int_equal(cudaMemset(pp.ptr, 1, 6 * 512 + 1), cudaErrorInvalidValue);
	/* out of memory, as cudaMalloc, and nothing taken */
	assert_int_equal(cudaMallocManaged(&big, (size_t)64 << 10, cudaMemAttachGlobal), cudaErrorMemoryAllocation);
	assert_int_equal(cudaMallocPitch(&big, &pitch, (size_t)32 << 10, 2), cudaErrorMemoryAllocation);
	assert_int_equal(cudaGetLastError(), cudaErrorMemoryAllocation);
	assert_int_equal(gpfake_used(0), 4 * 1024 + 6 * 512);
	/* an empty extent allocates nothing */
	assert_int_equal(cudaMalloc3D(&empty, (struct cudaExtent){ 0, 2, 3 }), cudaSuccess);
	assert_null(empty.ptr);
	assert_int_equal(cudaFree(m), cudaSuccess);
	assert_int_equal(cudaFree(p), cudaSuccess);
	assert_int_equal(cudaFree(pp.ptr), cudaSuccess);
	assert_int_equal(gpfake_used(0), 0);
	assert_int_equal(gpfake_calls("cudaMallocManaged"), 5);
	assert_int_equal(gpfake_calls("cudaMallocPitch"), 2);
	assert_int_equal(gpfake_calls("cudaMalloc3D"), 2);
	assert_int_equal(gpfake_fail_nth("cudaMallocManaged", 1, cudaSuccess), 0);
	assert_int_equal(cudaMallocManaged(&m, 10, cudaMemAttachGlobal), cudaErrorMemoryAllocation);
	assert_int_equal(gpfake_used(0), 0);
	(void)cudaGetLastError();
}

static unsigned long long pool_attr(cudaMemPool_t pool, enum cudaMemPoolAttr attr)
{
	unsigned long long v = ~0ull;
	assert_int_equal(cudaMemPoolGetAttribute(pool, attr, &v), cudaSuccess);
	return v;
}

/* Pools the program makes: chunks reserved from the device's capacity, kept after a free up
 * to the release threshold at the next synchronize, trimmed on request. */
static void test_pools(void **state)
{
	(void)state;
	const size_t MiB = (size_t)1 << 20;
	cudaMemPool_t def = NULL, cur = NULL, pool = NULL, other = NULL;
	struct cudaMemPoolProps props;
	cudaStream_t s;
	void *p = NULL, *q = NULL;
	gpfake_reset_counters();
	gpfake_set_capacity(0, 8 * MiB);
	assert_int_equal(cudaDeviceGetDefaultMemPool(&def, 0), cudaSuccess);
	assert_int_equal(cudaDeviceGetMemPool(&cur, 0), cudaSuccess);
	assert_ptr_equal(def, cur);
	assert_int_equal(cudaDeviceGetDefaultMemPool(&def, 7), cudaErrorInvalidDevice);
	assert_int_equal(cudaMemPoolDestroy(def), cudaErrorInvalidValue); /* the default pool stays */
	memset(&props, 0, sizeof props);
	props.allocType = cudaMemAllocationTypePinned;
	props.location.type = cudaMemLocationTypeHost;
	assert_int_equal(cudaMemPoolCreate(&pool, &props), cudaErrorInvalidValue);
	props.location.type = cudaMemLocationTypeDevice;
	props.location.id = 9;
	assert_int_equal(cudaMemPoolCreate(&pool, &props), cudaErrorInvalidDevice);
	props.location.id = 1;
	assert_int_equal(cudaMemPoolCreate(&other, &props), cudaSuccess);
	props.location.id = 0;
	assert_int_equal(cudaMemPoolCreate(&pool, &props), cudaSuccess);
	assert_int_equal(cudaDeviceSetMemPool(0, other), cudaErrorInvalidDevice);
	assert_int_equal(cudaDeviceSetMemPool(0, pool), cudaSuccess);
	assert_int_equal(cudaDeviceGetMemPool(&cur, 0), cudaSuccess);
	assert_ptr_equal(cur, pool);
	(void)cudaGetLastError();

	/* one chunk per allocation; a free is stream-ordered, the release comes at a synchronize */
	assert_int_equal(cudaStreamCreate(&s), cudaSuccess);
	assert_int_equal(cudaMallocFromPoolAsync(&p, 1000, pool, s), cudaSuccess);
	assert_int_equal(pool_attr(pool, cudaMemPoolAttrReservedMemCurrent), 2 * MiB);
	assert_int_equal(pool_attr(pool, cudaMemPoolAttrUsedMemCurrent), 1024);
	assert_int_equal(gpfake_used(0), 2 * MiB);
	assert_int_equal(cudaMemsetAsync(p, 7, 1000, s), cudaSuccess);
	assert_int_equal(cudaFreeAsync(p, s), cudaSuccess);
	assert_int_equal(cudaStreamSynchronize(s), cudaSuccess); /* threshold 0: all goes */
	assert_int_equal(pool_attr(pool, cudaMemPoolAttrReservedMemCurrent), 0);
	assert_int_equal(pool_attr(pool, cudaMemPoolAttrUsedMemCurrent), 0);
	assert_int_equal(gpfake_used(0), 0);

	/* with a threshold, freed chunks stay reserved (and counted) for reuse */
	unsigned long long th = 4 * MiB;
	assert_int_equal(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &th), cudaSuccess);
	assert_int_equal(pool_attr(pool, cudaMemPoolAttrReleaseThreshold), 4 * MiB);
	assert_int_equal(cudaMallocFromPoolAsync(&p, 3 * MiB, pool, s), cudaSuccess);
	assert_int_equal(cudaFreeAsync(p, s), cudaSuccess);
	assert_int_equal(cudaDeviceSynchronize(), cudaSuccess);
	assert_int_equal(pool_attr(pool, cudaMemPoolAttrReservedMemCurrent), 4 * MiB);
	assert_int_equal(pool_attr(pool, cudaMemPoolAttrUsedMemCurrent), 0);
	assert_int_equal(gpfake_used(0), 4 * MiB);
	assert_int_equal(cudaMalloc(&q, 5 * MiB), cudaErrorMemoryAllocation); /* the pool holds it */
	assert_int_equal(cudaMallocFromPoolAsync(&p, MiB, pool, s), cudaSuccess); /* reused */
	assert_int_equal(pool_attr(pool, cudaMemPoolAttrReservedMemCurrent), 4 * MiB);
	assert_int_equal(pool_attr(pool, cudaMemPoolAttrUsedMemHigh), 3 * MiB);
	assert_int_equal(cudaFreeAsync(p, s), cudaSuccess);
	assert_int_equal(cudaStreamSynchronize(s), cudaSuccess);
	assert_int_equal(cudaMemPoolTrimTo(pool, 0), cudaSuccess);
	assert_int_equal(pool_attr(pool, cudaMemPoolAttrReservedMemCurrent), 0);
	assert_int_equal(gpfake_used(0), 0);
	assert_int_equal(cudaMalloc(&q, 5 * MiB), cudaSuccess);
	assert_int_equal(pool_attr(pool, cudaMemPoolAttrReservedMemHigh), 4 * MiB);
	unsigned long long zero = 0, one = 1;
	assert_int_equal(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReservedMemHigh, &one), cudaErrorInvalidValue);
	assert_int_equal(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReservedMemHigh, &zero), cudaSuccess);
	assert_int_equal(pool_attr(pool, cudaMemPoolAttrReservedMemHigh), 0);
	assert_int_equal(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReservedMemCurrent, &zero), cudaErrorInvalidValue);

	/* out of memory: a chunk must fit what is left; a full pool gives back its unused chunks
	 * before failing */
	assert_int_equal(cudaMallocFromPoolAsync(&p, 2 * MiB + 1, pool, s), cudaErrorMemoryAllocation);
	assert_int_equal(cudaGetLastError(), cudaErrorMemoryAllocation);
	assert_int_equal(cudaMallocFromPoolAsync(&p, 2 * MiB, pool, s), cudaSuccess);
	assert_int_equal(cudaFreeAsync(p, s), cudaSuccess);
	assert_int_equal(cudaStreamSynchronize(s), cudaSuccess);
	assert_int_equal(pool_attr(pool, cudaMemPoolAttrReservedMemCurrent), 2 * MiB); /* kept */
	assert_int_equal(cudaFree(q), cudaSuccess);
	assert_int_equal(cudaMallocFromPoolAsync(&q, 7 * MiB, pool, s), cudaSuccess); /* 8 MiB chunk */
	assert_int_equal(pool_attr(pool, cudaMemPoolAttrReservedMemCurrent), 8 * MiB);
	assert_int_equal(gpfake_used(0), 8 * MiB);
	(void)cudaGetLastError();

	/* bad arguments */
	assert_int_equal(cudaMallocFromPoolAsync(&p, 0, pool, s), cudaErrorInvalidValue);
	assert_int_equal(cudaMallocFromPoolAsync(&p, 10, (cudaMemPool_t)&props, s), cudaErrorInvalidValue);
	assert_int_equal(cudaMemPoolTrimTo((cudaMemPool_t)&props, 0), cudaErrorInvalidValue);
	(void)cudaGetLastError();

	/* a pool destroyed with a live allocation: gone for new work at once, its memory once
	 * that allocation is freed; the device's current pool is the default one again */
	assert_int_equal(cudaMemPoolDestroy(pool), cudaSuccess);
	assert_int_equal(cudaDeviceGetMemPool(&cur, 0), cudaSuccess);
	assert_ptr_equal(cur, def);
	assert_int_equal(cudaMallocFromPoolAsync(&p, 10, pool, s), cudaErrorInvalidValue);
	assert_int_equal(gpfake_used(0), 8 * MiB);
	assert_int_equal(cudaFree(q), cudaSuccess);
	assert_int_equal(gpfake_used(0), 0);

	/* the default pool is a pool like the others */
	assert_int_equal(cudaMallocFromPoolAsync_ptsz(&p, 10, def, NULL), cudaSuccess);
	assert_int_equal(pool_attr(def, cudaMemPoolAttrReservedMemCurrent), 2 * MiB);
	assert_int_equal(cudaFreeAsync_ptsz(p, NULL), cudaSuccess);
	assert_int_equal(cudaStreamSynchronize_ptsz(NULL), cudaSuccess);
	assert_int_equal(pool_attr(def, cudaMemPoolAttrReservedMemCurrent), 0);
	assert_int_equal(gpfake_used(0), 0);

	/* a reset leaves the pools' allocations (cuda_runtime_api.h: cudaDeviceReset "will not
	 * destroy memory allocations by cudaMallocAsync() and cudaMallocFromPoolAsync()") and
	 * takes what they keep unused */
	assert_int_equal(cudaMemPoolSetAttribute(def, cudaMemPoolAttrReleaseThreshold, &th), cudaSuccess);
	assert_int_equal(cudaMallocFromPoolAsync(&p, 100, def, s), cudaSuccess);
	assert_int_equal(cudaMallocFromPoolAsync(&q, 100, def, s), cudaSuccess);
	assert_int_equal(cudaFreeAsync(q, s), cudaSuccess);
	assert_int_equal(cudaDeviceSynchronize(), cudaSuccess);
	assert_int_equal(gpfake_used(0), 4 * MiB);
	assert_int_equal(cudaDeviceReset(), cudaSuccess);
	assert_int_equal(gpfake_used(0), 2 * MiB);
	assert_int_equal(pool_attr(def, cudaMemPoolAttrReservedMemCurrent), 2 * MiB);
	assert_int_equal(cudaMemPoolSetAttribute(def, cudaMemPoolAttrReleaseThreshold, &zero), cudaSuccess);
	assert_int_equal(cudaFree(p), cudaSuccess); /* after the reset, as the program may */
	assert_int_equal(cudaDeviceSynchronize(), cudaSuccess); /* the threshold applies */
	assert_int_equal(gpfake_used(0), 0);

	assert_int_equal(cudaMemPoolDestroy(other), cudaSuccess);
	assert_int_equal(cudaStreamDestroy(s), cudaSuccess);
	assert_int_equal(gpfake_calls("cudaMallocFromPoolAsync"), 11);
	assert_int_equal(gpfake_calls("cudaMallocFromPoolAsync_ptsz"), 1);
	(void)cudaGetLastError();
}

static void test_device_properties(void **state)
{
	(void)state;
	struct cudaDeviceProp prop;
	int v = -1;
	gpfake_set_capacity(1, (size_t)3 << 30);
	assert_int_equal(cudaGetDeviceProperties_v2(&prop, 1), cudaSuccess);
	assert_string_equal(prop.name, "fake GPU");
	assert_memory_equal(prop.uuid.bytes, "fakegpu", 7);
	assert_int_equal(prop.uuid.bytes[15], 2);
	assert_int_equal(prop.totalGlobalMem, (size_t)3 << 30);
	assert_int_equal(prop.multiProcessorCount, 0);
	assert_int_equal(cudaGetDeviceProperties(&prop, 0), cudaSuccess);
	assert_int_equal(prop.uuid.bytes[15], 1);
	assert_int_equal(cudaGetDeviceProperties(&prop, 2), cudaErrorInvalidDevice);
	assert_int_equal(cudaGetDeviceProperties(NULL, 0), cudaErrorInvalidValue);
	assert_int_equal(cudaDeviceGetAttribute(&v, cudaDevAttrMemoryPoolsSupported, 0), cudaSuccess);
	assert_int_equal(v, 1);
	assert_int_equal(cudaDeviceGetAttribute(&v, cudaDevAttrMultiProcessorCount, 0), cudaSuccess);
	assert_int_equal(v, 0);
	assert_int_equal(cudaDeviceGetAttribute(&v, cudaDevAttrMultiProcessorCount, 5), cudaErrorInvalidDevice);
	(void)cudaGetLastError();
}

/* ---- the machine-wide device (FAKECUDA_MACHINE) and CUDA_VISIBLE_DEVICES, across processes:
 * this program run again as children (machine_child) ---- */
/* A child that asks device `dev` for `size` bytes: "free F total T rc E" (cudaMemGetInfo first,
 * then cudaMalloc). */
static void try_alloc(const char *const *env, const char *size, const char *dev, char *line, size_t cap,
                      char *err, size_t ecap)
{
	run_child("/proc/self/exe", env, "try", size, dev, line, cap, err, ecap);
}

static void test_machine_shared(void **state)
{
	(void)state;
	char var[192], line[256], err[4096];
	snprintf(var, sizeof var, "FAKECUDA_MACHINE=%s", machine_path("shared"));
	const char *env[] = { var, "FAKECUDA_CAPACITY=8M", NULL };

	/* one holds 6 MiB of device 0: the other sees 2 MiB free and cannot have 4 */
	struct child a = spawn("/proc/self/exe", env, "hold", "6M", "0");
	read_line(a.out, line, sizeof line);
	assert_string_equal(line, "held 0");
	try_alloc(env, "4M", "0", line, sizeof line, err, sizeof err);
	assert_string_equal(line, "free 2097152 total 8388608 rc 2");
	assert_string_equal(err, "");
	try_alloc(env, "4M", "1", line, sizeof line, NULL, 0); /* another device, its own capacity */
	assert_string_equal(line, "free 8388608 total 8388608 rc 0");
	/* ... until the first frees it */
	assert_int_equal(write(a.in, "f", 1), 1);
	read_line(a.out, line, sizeof line);
	assert_string_equal(line, "freed 0");
	try_alloc(env, "4M", "0", line, sizeof line, NULL, 0);
	assert_string_equal(line, "free 8388608 total 8388608 rc 0");
	assert_int_equal(finish(a, NULL, 0), 0);

	/* ... or is killed: its memory goes with it (before it is reaped, as with the driver) */
	a = spawn("/proc/self/exe", env, "hold", "6M", "0");
	read_line(a.out, line, sizeof line);
	assert_string_equal(line, "held 0");
	assert_int_equal(kill(a.pid, SIGKILL), 0);
	for (int i = 0; i < 1000; i++) { /* until it is a zombie */
		char st[64], path[64];
		snprintf(path, sizeof path, "/proc/%d/stat", (int)a.pid);
		FILE *f = fopen(path, "r");
		int got = f ? fscanf(f, "%*d %*s %63s", st) : 0;
		if (f)
			fclose(f);
		if (got == 1 && st[0] == 'Z')
			break;
		usleep(1000);
	}
	try_alloc(env, "4M", "0", line, sizeof line, NULL, 0);
	assert_string_equal(line, "free 8388608 total 8388608 rc 0");
	assert_int_equal(finish(a, NULL, 0), -SIGKILL);

	/* a stopped process keeps its memory and blocks nobody */
	a = spawn("/proc/self/exe", env, "hold", "6M", "0");
	read_line(a.out, line, sizeof line);
	assert_string_equal(line, "held 0");
	assert_int_equal(kill(a.pid, SIGSTOP), 0);
	try_alloc(env, "4M", "0", line, sizeof line, NULL, 0);
	assert_string_equal(line, "free 2097152 total 8388608 rc 2");
	assert_int_equal(kill(a.pid, SIGKILL), 0);
	assert_int_equal(finish(a, NULL, 0), -SIGKILL);
	try_alloc(env, "8M", "0", line, sizeof line, NULL, 0);
	assert_string_equal(line, "free 8388608 total 8388608 rc 0");

	/* other settings: one line, and the machine's capacity */
	const char *env16[] = { var, "FAKECUDA_CAPACITY=16M", NULL };
	try_alloc(env16, "10M", "0", line, sizeof line, err, sizeof err);
	assert_string_equal(line, "free 8388608 total 8388608 rc 2");
	assert_int_equal(lines(err), 1);
	assert_non_null(strstr(err, "FAKECUDA_MACHINE"));

	/* four at once ask for 3 MiB each of 8: exactly two get it */
	struct child four[4];
	int got = 0, refused = 0;
	for (int i = 0; i < 4; i++)
		four[i] = spawn("/proc/self/exe", env, "hold", "3M", "0");
	for (int i = 0; i < 4; i++) {
		read_line(four[i].out, line, sizeof line);
		got += strcmp(line, "held 0") == 0;
		refused += strcmp(line, "held 2") == 0;
	}
	assert_int_equal(got, 2);
	assert_int_equal(refused, 2);
	for (int i = 0; i < 4; i++)
		assert_int_equal(finish(four[i], NULL, 0), 0);

	/* many processes one after the other: slots are given back */
	for (int i = 0; i < 140; i++) {
		try_alloc(env, "1M", "1", line, sizeof line, NULL, 0);
		assert_string_equal(line, "free 8388608 total 8388608 rc 0");
	}
}

/* Each process may see other devices under other numbers; capacity and UUID follow the
 * physical device. */
static void test_machine_visible(void **state)
{
	(void)state;
	char var[192], line[256], err[4096];
	snprintf(var, sizeof var, "FAKECUDA_MACHINE=%s", machine_path("visible"));
	/* the machine's devices carry its name in bytes 8-11 (fm_uuid: FNV-1a of the path) */
	unsigned ino = 2166136261u;
	for (const char *c = machine_path("visible"); *c; c++)
		ino = (ino ^ (unsigned char)*c) * 16777619u;
	char u3[96], u1[96];
	snprintf(u3, sizeof u3, "CUDA_VISIBLE_DEVICES=GPU-66616b65-6770-7500-%04x-%04x00000003,1", ino >> 16,
		 ino & 0xffff);
	snprintf(u1, sizeof u1, "CUDA_VISIBLE_DEVICES=GPU-66616B6567707500%08X00000001,0", ino);
	struct {
		const char *cvd, *expect;
	} cases[] = {
		{ NULL, "n 3 rc 0 uuid 1 2 3" },
		{ "CUDA_VISIBLE_DEVICES=2,0", "n 2 rc 0 uuid 3 1" },
		{ u3, "n 2 rc 0 uuid 3 2" },
		{ u1, "n 1 rc 0 uuid 1" },
		{ "CUDA_VISIBLE_DEVICES=1,7,0", "n 1 rc 0 uuid 2" },      /* stops at the first invalid */
		{ "CUDA_VISIBLE_DEVICES=1,1,0", "n 1 rc 0 uuid 2" },      /* named twice */
		{ "CUDA_VISIBLE_DEVICES=GPU-66616b65,0", "n 0 rc 100 uuid" }, /* an ambiguous prefix */
		{ "CUDA_VISIBLE_DEVICES=", "n 0 rc 100 uuid" },
		{ "CUDA_VISIBLE_DEVICES=-1", "n 0 rc 100 uuid" },
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		const char *env[] = { var, "FAKECUDA_DEVICES=3", "FAKECUDA_CAPACITY=8M", cases[i].cvd, NULL };
		struct child c = spawn("/proc/self/exe", env, "info", "-", "-");
		read_line(c.out, line, sizeof line);
		assert_int_equal(finish(c, err, sizeof err), 0);
		assert_string_equal(line, cases[i].expect);
		assert_string_equal(err, "");
	}
	/* physical device 2 is device 0 of one process and device 1 of another */
	const char *env_a[] = { var, "FAKECUDA_DEVICES=3", "FAKECUDA_CAPACITY=8M", "CUDA_VISIBLE_DEVICES=2", NULL };
	const char *env_b[] = { var, "FAKECUDA_DEVICES=3", "FAKECUDA_CAPACITY=8M", "CUDA_VISIBLE_DEVICES=1,2", NULL };
	struct child a = spawn("/proc/self/exe", env_a, "hold", "6M", "0");
	read_line(a.out, line, sizeof line);
	assert_string_equal(line, "held 0");
	try_alloc(env_b, "4M", "1", line, sizeof line, NULL, 0);
	assert_string_equal(line, "free 2097152 total 8388608 rc 2");
	try_alloc(env_b, "4M", "0", line, sizeof line, NULL, 0);
	assert_string_equal(line, "free 8388608 total 8388608 rc 0");
	assert_int_equal(finish(a, NULL, 0), 0);
}

/* A file that is not a machine: one line on stderr, and the process's own capacity. */
static void test_machine_malformed(void **state)
{
	(void)state;
	char var[192], line[256], err[4096];
	const char *bad = machine_path("short");
	FILE *f = fopen(bad, "w");
	assert_non_null(f);
	fputs("not a machine\n", f);
	fclose(f);
	snprintf(var, sizeof var, "FAKECUDA_MACHINE=%s", bad);
	const char *env[] = { var, "FAKECUDA_CAPACITY=8M", NULL };
	struct child a = spawn("/proc/self/exe", env, "hold", "6M", "0");
	read_line(a.out, line, sizeof line);
	assert_string_equal(line, "held 0");
	try_alloc(env, "4M", "0", line, sizeof line, err, sizeof err); /* not shared */
	assert_string_equal(line, "free 8388608 total 8388608 rc 0");
	assert_int_equal(lines(err), 1);
	assert_non_null(strstr(err, "wrong size"));
	assert_int_equal(finish(a, err, sizeof err), 0);
	assert_int_equal(lines(err), 1);

	/* the right size, another magic */
	char good[128];
	snprintf(good, sizeof good, "%s", machine_path("magic"));
	snprintf(var, sizeof var, "FAKECUDA_MACHINE=%s", good);
	try_alloc(env, "0", "0", line, sizeof line, err, sizeof err);
	assert_string_equal(err, "");
	f = fopen(good, "r+");
	assert_non_null(f);
	fputs("GARBAGE!", f);
	fclose(f);
	try_alloc(env, "4M", "0", line, sizeof line, err, sizeof err);
	assert_string_equal(line, "free 8388608 total 8388608 rc 0");
	assert_int_equal(lines(err), 1);
	assert_non_null(strstr(err, "wrong magic"));

	/* a symbolic link, even to a good file */
	char link[128];
	snprintf(link, sizeof link, "%s", machine_path("link"));
	assert_int_equal(symlink(machine_path("shared"), link), 0);
	snprintf(var, sizeof var, "FAKECUDA_MACHINE=%s", link);
	try_alloc(env, "4M", "0", line, sizeof line, err, sizeof err);
	assert_string_equal(line, "free 8388608 total 8388608 rc 0");
	assert_int_equal(lines(err), 1);
	assert_non_null(strstr(err, "symbolic link"));

	/* a directory */
	snprintf(var, sizeof var, "FAKECUDA_MACHINE=%s", g_machine_dir);
	try_alloc(env, "4M", "0", line, sizeof line, err, sizeof err);
	assert_string_equal(line, "free 8388608 total 8388608 rc 0");
	assert_int_equal(lines(err), 1);
}

static int machine_child(const char *mode, const char *a, const char *b)
{
	char line[256];
	if (strcmp(mode, "info") == 0) {
		int n = -1;
		cudaError_t e = cudaGetDeviceCount(&n);
		int at = snprintf(line, sizeof line, "n %d rc %d uuid", n, (int)e);
		for (int d = 0; d < n; d++) {
			struct cudaDeviceProp p;
			if (cudaGetDeviceProperties(&p, d) != cudaSuccess)
				return 1;
			at += snprintf(line + at, sizeof line - (size_t)at, " %d", p.uuid.bytes[15]);
		}
		printf("%s\n", line);
		return 0;
	}
	size_t size = parse_size(a);
	if (cudaSetDevice(atoi(b)) != cudaSuccess)
		return 1;
	void *p = NULL;
	if (strcmp(mode, "try") == 0) {
		size_t fr = 0, tot = 0;
		if (cudaMemGetInfo(&fr, &tot) != cudaSuccess)
			return 1;
		cudaError_t e = size ? cudaMalloc(&p, size) : cudaSuccess;
		printf("free %zu total %zu rc %d\n", fr, tot, (int)e);
		return 0;
	}
	if (strcmp(mode, "hold") != 0)
		return 1;
	printf("held %d\n", (int)cudaMalloc(&p, size));
	fflush(stdout);
	char c;
	while (read(0, &c, 1) == 1) {
		if (c == 'f') {
			printf("freed %d\n", (int)cudaFree(p));
			fflush(stdout);
		}
	}
	return 0;
}

/* Run this program again as a child with FAKECUDA_* set; it checks itself (child_main). */
static void test_env_injection(void **state)
{
	(void)state;
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		setenv("FAKECUDA_FAIL", "cudaMalloc:3,cudaMemGetInfo:1:cudaErrorInvalidDevice", 1);
		setenv("FAKECUDA_DEVICES", "3", 1);
		setenv("FAKECUDA_CAPACITY", "1M", 1);
		execl("/proc/self/exe", "test-fake", "--child", (char *)NULL);
		_exit(127);
	}
	int status = 0;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
}

static int child_main(void)
{
	int fails = 0, n = 0;
	void *p[4] = { 0 };
	size_t fr = 0, tot = 0;
#define CHILD_CHECK(c) do { if (!(c)) { fprintf(stderr, "child: %s failed\n", #c); fails++; } } while (0)
	CHILD_CHECK(cudaGetDeviceCount(&n) == cudaSuccess && n == 3);
	CHILD_CHECK(cudaMemGetInfo(&fr, &tot) == cudaErrorInvalidDevice);
	CHILD_CHECK(cudaMemGetInfo(&fr, &tot) == cudaSuccess && tot == (1u << 20));
	CHILD_CHECK(cudaMalloc(&p[0], 1000) == cudaSuccess);
	CHILD_CHECK(cudaMalloc(&p[1], 1000) == cudaSuccess);
	CHILD_CHECK(cudaMalloc(&p[2], 1000) == cudaErrorMemoryAllocation);
	CHILD_CHECK(cudaGetLastError() == cudaErrorMemoryAllocation);
	CHILD_CHECK(cudaMalloc(&p[3], 1000) == cudaSuccess);
	CHILD_CHECK(cudaMalloc(&p[2], (1u << 20)) == cudaErrorMemoryAllocation);
	CHILD_CHECK(gpfake_calls("cudaMalloc") == 5);
	for (int i = 0; i < 4; i++)
		if (i != 2)
			CHILD_CHECK(cudaFree(p[i]) == cudaSuccess);
	return fails ? 1 : 0;
}

/* cudaGetDriverEntryPoint(ByVersion)(_ptsz), as libcudart answers them: the driver's own
 * entry point picked by the version (the runtime's own, 13.0, where none is given) and the
 * flags' stream variant; a name the driver lacks, or has only past the version, is success
 * with NULL and the status saying which; a version past the driver's, bad flags and NULL
 * pointers are cudaErrorInvalidValue, left as the last error. */
static void test_driver_entry_points(void **state)
{
	(void)state;
	void *fn = NULL;
	enum cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
	unsigned long asked = gpfake_calls("cudaGetDriverEntryPoint");
	assert_int_equal(cudaGetDriverEntryPoint("cuMemCreate", &fn, cudaEnableDefault, &q), cudaSuccess);
	assert_int_equal(gpfake_calls("cudaGetDriverEntryPoint"), asked + 1);
	void *cu = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD); /* the runtime loaded the driver */
	assert_non_null(cu);
	assert_int_equal(q, cudaDriverEntryPointSuccess);
	assert_ptr_equal(fn, dlsym(cu, "cuMemCreate"));
	assert_int_equal(cudaGetDriverEntryPoint("cuMemAlloc", &fn, cudaEnableDefault, NULL), cudaSuccess);
	assert_ptr_equal(fn, dlsym(cu, "cuMemAlloc_v2"));
	/* stream variants: the flags, else the entry point's default */
	assert_int_equal(cudaGetDriverEntryPoint("cuMemAllocAsync", &fn, cudaEnablePerThreadDefaultStream, &q), cudaSuccess);
	assert_ptr_equal(fn, dlsym(cu, "cuMemAllocAsync_ptsz"));
	assert_int_equal(cudaGetDriverEntryPoint_ptsz("cuMemAllocAsync", &fn, cudaEnableDefault, &q), cudaSuccess);
	assert_ptr_equal(fn, dlsym(cu, "cuMemAllocAsync_ptsz"));
	assert_int_equal(cudaGetDriverEntryPoint_ptsz("cuMemAllocAsync", &fn, cudaEnableLegacyStream, &q), cudaSuccess);
	assert_ptr_equal(fn, dlsym(cu, "cuMemAllocAsync"));
	assert_int_equal(cudaGetDriverEntryPointByVersion_ptsz("cuMemFreeAsync", &fn, 12000, 0, &q), cudaSuccess);
	assert_ptr_equal(fn, dlsym(cu, "cuMemFreeAsync_ptsz"));
	/* by version: cuGetProcAddress gained its _v2 in 12.0 */
	assert_int_equal(cudaGetDriverEntryPointByVersion("cuGetProcAddress", &fn, 11080, 0, &q), cudaSuccess);
	assert_ptr_equal(fn, dlsym(cu, "cuGetProcAddress"));
	assert_int_equal(cudaGetDriverEntryPointByVersion("cuGetProcAddress", &fn, 12000, 0, &q), cudaSuccess);
	assert_ptr_equal(fn, dlsym(cu, "cuGetProcAddress_v2"));
	/* not there, or not yet there at the version asked for */
	fn = &q;
	assert_int_equal(cudaGetDriverEntryPoint("cuNoSuchEntryPoint", &fn, 0, &q), cudaSuccess);
	assert_null(fn);
	assert_int_equal(q, cudaDriverEntryPointSymbolNotFound);
	fn = &q;
	assert_int_equal(cudaGetDriverEntryPointByVersion("cuMemCreate", &fn, 10010, 0, &q), cudaSuccess);
	assert_null(fn);
	assert_int_equal(q, cudaDriverEntryPointVersionNotSufficent);
	assert_int_equal(cudaGetLastError(), cudaSuccess);
	/* errors */
	assert_int_equal(cudaGetDriverEntryPointByVersion("cuMemCreate", &fn, 13010, 0, &q), cudaErrorInvalidValue);
	assert_int_equal(cudaGetLastError(), cudaErrorInvalidValue);
	assert_int_equal(cudaGetDriverEntryPoint("cuMemCreate", &fn, 3, &q), cudaErrorInvalidValue);
	assert_int_equal(cudaGetDriverEntryPoint(NULL, &fn, 0, &q), cudaErrorInvalidValue);
	assert_int_equal(cudaGetDriverEntryPoint("cuMemCreate", NULL, 0, &q), cudaErrorInvalidValue);
	assert_int_equal(cudaGetLastError(), cudaErrorInvalidValue);
	dlclose(cu);
}

int main(int argc, char **argv)
{
	if (argc > 1 && strcmp(argv[1], "--child") == 0)
		return child_main();
	if (argc == 5 && strcmp(argv[1], "--machine") == 0)
		return machine_child(argv[2], argv[3], argv[4]);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_memory_and_errors, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fill_stream_order, setup, teardown),
		cmocka_unit_test_setup_teardown(test_free_is_fence, setup, teardown),
		cmocka_unit_test_setup_teardown(test_events, setup, teardown),
		cmocka_unit_test_setup_teardown(test_per_thread_streams, setup, teardown),
		cmocka_unit_test_setup_teardown(test_capture, setup, teardown),
		cmocka_unit_test_setup_teardown(test_ipc, setup, teardown),
		cmocka_unit_test_setup_teardown(test_counters_and_injection, setup, teardown),
		cmocka_unit_test_setup_teardown(test_threads, setup, teardown),
		cmocka_unit_test_setup_teardown(test_env_injection, setup, teardown),
		cmocka_unit_test_setup_teardown(test_managed_pitched, setup, teardown),
		cmocka_unit_test_setup_teardown(test_pools, setup, teardown),
		cmocka_unit_test_setup_teardown(test_device_properties, setup, teardown),
		cmocka_unit_test_setup_teardown(test_machine_shared, setup, teardown),
		cmocka_unit_test_setup_teardown(test_machine_visible, setup, teardown),
		cmocka_unit_test_setup_teardown(test_machine_malformed, setup, teardown),
		cmocka_unit_test_setup_teardown(test_driver_entry_points, setup, teardown),
	};
	int rc = cmocka_run_group_tests(tests, NULL, NULL);
	machine_cleanup((const char *const[]){ "shared", "visible", "short", "magic", "link", NULL });
	return rc;
}
