/* Contract 6, stream capture is not broken: during a global-mode capture, cudaMallocAsync
 * and cudaFreeAsync on the capturing stream pass through to the runtime, other threads'
 * cudaFree calls park blocks as pending, and no device-wide sync happens (the fake
 * invalidates every global capture on a cudaDeviceSynchronize): EndCapture succeeds, the
 * graph replays, and the pending frees are fenced once the capture is over. */
#include <pthread.h>
#include <cuda_runtime_api.h>

#include "e2e_util.h"

#define NB 64
static void *blocks[NB];

static cudaStream_t other;

/* allocates on another stream while `s` captures: the only fitting free block was freed on
 * the capturing stream, and taking it behind an event would join `other` to the capture */
static void *other_stream_alloc(void *arg)
{
	(void)arg;
	void *y = NULL;
	CK(cudaMallocAsync(&y, 3 << 20, other));
	CK(cudaFreeAsync(y, other));
	CK(cudaStreamSynchronize(other));
	return NULL;
}

static void *freer(void *arg)
{
	(void)arg;
	for (int i = 0; i < NB; i++)
		CK(cudaFree(blocks[i]));
	void *c[4];
	for (int i = 0; i < 4; i++) /* served from ready cached blocks: no runtime call */
		CK(cudaMalloc(&c[i], 4096));
	for (int i = 0; i < 4; i++)
		CK(cudaFree(c[i]));
	e2e_sleep_ms(40); /* the fence thread has had every chance to sync */
	return NULL;
}

int main(void)
{
	e2e_shm_dir();
	cudaStream_t s;
	CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	for (int i = 0; i < NB; i++)
		CK(cudaMalloc(&blocks[i], 65536));
	void *warm[8];
	for (int i = 0; i < 8; i++)
		CK(cudaMalloc(&warm[i], 4096));
	for (int i = 0; i < 8; i++)
		CK(cudaFree(warm[i]));
	e2e_wait_no_pending(0);

	unsigned long sync0 = gpfake_calls("cudaDeviceSynchronize"), m0 = gpfake_calls("cudaMalloc"),
		      ma0 = gpfake_calls("cudaMallocAsync"), fa0 = gpfake_calls("cudaFreeAsync");
	uint64_t fences0 = e2e_stats(0).fences;
	CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
	void *x = NULL;
	CK(cudaMallocAsync(&x, 1 << 20, s));
	CHECK(gpfake_calls("cudaMallocAsync") == ma0 + 1); /* passed through: graph semantics */
	CK(gpfake_launch_fill(x, 1 << 20, 0x42, 0, s));
	CK(cudaFreeAsync(x, s));
	CHECK(gpfake_calls("cudaFreeAsync") == fa0 + 1);
	pthread_t th;
	CHECK(pthread_create(&th, NULL, freer, NULL) == 0);
	pthread_join(th, NULL);
	struct gpupool_device_stats st = e2e_stats(0);
	CHECK(st.pending_frees > 0);         /* frees wait: no fence during the capture */
	CHECK(st.fences == fences0);
	CHECK(gpfake_calls("cudaDeviceSynchronize") == sync0);
	CHECK(gpfake_calls("cudaMalloc") == m0);
	enum cudaStreamCaptureStatus cs;
	CK(cudaStreamIsCapturing(s, &cs));
	CHECK(cs == cudaStreamCaptureStatusActive);
	cudaGraph_t g = NULL;
	CK(cudaStreamEndCapture(s, &g));
	CHECK(g != NULL);

	/* the fence thread catches up after the capture */
	e2e_wait_no_pending(0);
	CHECK(e2e_stats(0).fences > fences0);

	cudaGraphExec_t ge = NULL;
	CK(cudaGraphInstantiate(&ge, g, 0));
	CK(cudaGraphLaunch(ge, s));
	CK(cudaStreamSynchronize(s));
	CK(cudaGraphExecDestroy(ge));
	CK(cudaGraphDestroy(g));
	/* a second capture, with a pending free made before it began */
	void *y = NULL;
	CK(cudaMalloc(&y, 65536));
	CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
	CK(cudaFree(y));
	e2e_sleep_ms(10);
	CK(cudaStreamEndCapture(s, &g));
	CK(cudaGraphDestroy(g));
	e2e_wait_no_pending(0);

	/* a third capture: no block is taken from the capturing stream behind an event */
	CK(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking));
	void *z = NULL;
	CK(cudaMallocAsync(&z, 3 << 20, s));
	CK(cudaFreeAsync(z, s));
	CK(cudaStreamSynchronize(s));
	uint64_t steals0 = e2e_stats(0).stream_steals;
	CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
	CHECK(pthread_create(&th, NULL, other_stream_alloc, NULL) == 0);
	pthread_join(th, NULL);
	CHECK(e2e_stats(0).stream_steals == steals0);
	CK(cudaStreamEndCapture(s, &g));
	CHECK(g != NULL);
	CK(cudaGraphDestroy(g));
	CK(cudaStreamDestroy(other));
	e2e_wait_no_pending(0);
	CHECK(gpfake_faults() == 0);
	CK(cudaStreamDestroy(s));
	return 0;
}
