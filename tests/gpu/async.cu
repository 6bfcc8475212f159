/* async: cudaFreeAsync is stream-ordered, mixed frees are legal (DESIGN.md, CUDA semantics
 * 2 and 3). Each case writes block A late (a kernel that busy-waits first), frees A, then
 * allocates B of the same size and writes B's pattern; B must hold B's pattern after
 * everything finished. A pool that hands A to B's stream too early lets the late kernel
 * overwrite B.
 *   same      free and reuse on one stream (stream order alone protects B)
 *   cross     free on S, allocate and write on T, no event (the pool must wait or not reuse)
 *   event     free on S, event on S, T waits on it, allocate on T
 *   mixed     cudaFree on cudaMallocAsync memory, cudaFreeAsync on cudaMalloc memory
 *   perthread cudaStreamPerThread in two threads (two different streams)
 *   async [case...]   (no case: all) */
#include <pthread.h>

#include "common.h"

static unsigned long long *g_bad;
static int g_round;

static size_t size_of(int i)
{
	static const size_t sizes[] = {4096, 512, 65536, 1u << 20, (1u << 20) + 4096, 3u << 20, 12u << 20, 40u << 20};
	return sizes[i % (int)(sizeof sizes / sizeof sizes[0])];
}

static double spin_of(int i) { return 200.0 + (i * 97) % 800; }

static void expect_clean(const char *what, int i, size_t size, void *a, void *b)
{
	EXPECT(*g_bad == 0, "%s round %d size %zu: %llu words of B overwritten (A=%p B=%p)", what, i, size, *g_bad, a,
	       b);
}

static void case_same(cudaStream_t s)
{
	for (int i = 0; i < 40; i++, g_round++) {
		size_t size = size_of(i);
		uint32_t *a, *b;
		CK(cudaMallocAsync(&a, size, s));
		gp_fill(a, size, 0xA000u + g_round, spin_of(i), s);
		gp_check_async(a, size, 0xA000u + g_round, g_bad, s); /* A itself in order */
		CK(cudaFreeAsync(a, s));
		CK(cudaMallocAsync(&b, size, s));
		gp_fill(b, size, 0xB000u + g_round, 0, s);
		gp_check_async(b, size, 0xB000u + g_round, g_bad, s);
		CK(cudaFreeAsync(b, s));
		CK(cudaStreamSynchronize(s));
		expect_clean("same", i, size, a, b);
	}
}

static void case_cross(cudaStream_t s, cudaStream_t t, bool with_event)
{
	cudaEvent_t ev;
	CK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
	for (int i = 0; i < 40; i++, g_round++) {
		size_t size = size_of(i);
		uint32_t *a, *b;
		CK(cudaMallocAsync(&a, size, s));
		gp_fill(a, size, 0xA000u + g_round, spin_of(i), s);
		CK(cudaFreeAsync(a, s));
		if (with_event) {
			CK(cudaEventRecord(ev, s));
			CK(cudaStreamWaitEvent(t, ev, 0));
		}
		CK(cudaMallocAsync(&b, size, t));
		gp_fill(b, size, 0xB000u + g_round, 0, t);
		CK(cudaDeviceSynchronize());
		gp_check_async(b, size, 0xB000u + g_round, g_bad, t);
		CK(cudaFreeAsync(b, t));
		CK(cudaStreamSynchronize(t));
		expect_clean(with_event ? "event" : "cross", i, size, a, b);
	}
	CK(cudaEventDestroy(ev));
}

static void case_mixed(cudaStream_t s, cudaStream_t t)
{
	for (int i = 0; i < 40; i++, g_round++) {
		size_t size = size_of(i);
		uint32_t *a, *b;
		bool async_first = i & 1;
		/* cudaFreeAsync of cudaMalloc memory is the pool's promise (DESIGN point 3);
		 * natively it is undefined, so without the shim every free matches its alloc */
		bool native = !gp_shim_loaded();
		/* odd: cudaMallocAsync + cudaFree (a fence); even: cudaMalloc + cudaFreeAsync on S */
		if (async_first)
			CK(cudaMallocAsync(&a, size, s));
		else
			CK(cudaMalloc(&a, size));
		gp_fill(a, size, 0xA000u + g_round, spin_of(i), s);
		if (async_first && !native)
			CK(cudaFree(a));
		else if (async_first || !native)
			CK(cudaFreeAsync(a, s));
		else
			CK(cudaFree(a));
		/* the new owner: alternately a sync and an async allocation, written on T */
		if (i & 2)
			CK(cudaMalloc(&b, size));
		else
			CK(cudaMallocAsync(&b, size, t));
		gp_fill(b, size, 0xB000u + g_round, 0, t);
		CK(cudaDeviceSynchronize());
		gp_check_async(b, size, 0xB000u + g_round, g_bad, t);
		CK(cudaStreamSynchronize(t));
		expect_clean(async_first ? "mixed(cudaFree of async)" : "mixed(cudaFreeAsync of sync)", i, size, a, b);
		bool b_async = !(i & 2);
		if (native ? b_async : i % 4 == 0)
			CK(cudaFreeAsync(b, t));
		else
			CK(cudaFree(b));
	}
	CK(cudaDeviceSynchronize());
}

/* Thread 1 writes A late on its per-thread stream and frees it there; thread 2 then
 * allocates on its own per-thread stream (another stream) and writes B. */
static pthread_barrier_t g_bar;
static void *pt_writer(void *arg)
{
	(void)arg;
	for (int i = 0; i < 30; i++) {
		size_t size = size_of(i);
		uint32_t *a;
		CK(cudaMallocAsync(&a, size, cudaStreamPerThread));
		gp_fill(a, size, 0xA000u + i, spin_of(i) + 300, cudaStreamPerThread);
		CK(cudaFreeAsync(a, cudaStreamPerThread));
		pthread_barrier_wait(&g_bar); /* A is freed: the reader may allocate */
		pthread_barrier_wait(&g_bar); /* the reader checked */
	}
	CK(cudaStreamSynchronize(cudaStreamPerThread));
	return NULL;
}

static void *pt_reader(void *arg)
{
	(void)arg;
	for (int i = 0; i < 30; i++) {
		size_t size = size_of(i);
		uint32_t *b;
		pthread_barrier_wait(&g_bar);
		CK(cudaMallocAsync(&b, size, cudaStreamPerThread));
		gp_fill(b, size, 0xB000u + i, 0, cudaStreamPerThread);
		CK(cudaDeviceSynchronize());
		gp_check_async(b, size, 0xB000u + i, g_bad, cudaStreamPerThread);
		CK(cudaFreeAsync(b, cudaStreamPerThread));
		CK(cudaStreamSynchronize(cudaStreamPerThread));
		expect_clean("perthread", i, size, NULL, b);
		pthread_barrier_wait(&g_bar);
	}
	return NULL;
}

static void case_perthread(void)
{
	pthread_t w, r;
	pthread_barrier_init(&g_bar, NULL, 2);
	EXPECT(pthread_create(&w, NULL, pt_writer, NULL) == 0, "pthread_create");
	EXPECT(pthread_create(&r, NULL, pt_reader, NULL) == 0, "pthread_create");
	pthread_join(w, NULL);
	pthread_join(r, NULL);
	pthread_barrier_destroy(&g_bar);
}

static bool want(int argc, char **argv, const char *name)
{
	if (argc < 2)
		return true;
	for (int i = 1; i < argc; i++)
		if (!strcmp(argv[i], name))
			return true;
	return false;
}

int main(int argc, char **argv)
{
	gp_require_gpu();
	cudaStream_t s, t;
	CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	CK(cudaStreamCreateWithFlags(&t, cudaStreamNonBlocking));
	CK(cudaMallocHost(&g_bad, sizeof *g_bad));
	*g_bad = 0;
	if (want(argc, argv, "same")) {
		case_same(s);
		printf("async same: ok\n");
	}
	if (want(argc, argv, "cross")) {
		case_cross(s, t, false);
		printf("async cross (no event): ok\n");
	}
	if (want(argc, argv, "event")) {
		case_cross(s, t, true);
		printf("async cross (event): ok\n");
	}
	if (want(argc, argv, "mixed")) {
		case_mixed(s, t);
		printf("async mixed frees: ok\n");
	}
	if (want(argc, argv, "perthread")) {
		case_perthread();
		printf("async cudaStreamPerThread: ok\n");
	}
	CK(cudaStreamDestroy(s));
	CK(cudaStreamDestroy(t));
	CK(cudaFreeHost(g_bad));
	printf("PASS async shim=%d\n", gp_shim_loaded());
	return 0;
}
