/* capture: a stream capture in global mode is not broken by the pool (DESIGN.md, CUDA
 * semantics 6). The main thread captures cudaMallocAsync / two kernels / cudaFreeAsync on
 * a non-blocking stream while a helper thread keeps doing cudaMalloc, a kernel, cudaFree
 * on its own stream (so the pool holds pending frees and its fence thread wants to sync;
 * a cudaDeviceSynchronize during the capture would invalidate it). EndCapture must
 * succeed; the graph is instantiated and replayed 10 times, each result checked.
 * Without the shim, CUDA itself may refuse the helper's cudaMalloc/cudaFree during a
 * global-mode capture (they are "unsafe" calls) and invalidate the capture: that is
 * CUDA's behaviour, reported as a note, not a failure. */
#include <atomic>
#include <pthread.h>

#include "common.h"

#define N (1u << 20) /* words */

static std::atomic<int> g_stop, g_phase;
static std::atomic<long> g_helper_ops, g_helper_errors;
static cudaError_t g_helper_first_error = cudaSuccess;

__global__ static void k_gen(uint32_t *tmp, const uint32_t *seed, size_t n)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
		tmp[i] = (uint32_t)i * 3u + *seed;
}

__global__ static void k_out(uint32_t *out, const uint32_t *tmp, size_t n)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
		out[i] = tmp[i] + 1u;
}

static void *helper(void *arg)
{
	(void)arg;
	cudaStream_t s;
	CK(cudaSetDevice(0));
	CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	int i = 0;
	while (!g_stop.load()) {
		size_t size = (size_t)4096 << (i++ % 10);
		uint32_t *p = NULL;
		cudaError_t e = cudaMalloc(&p, size);
		if (e == cudaSuccess) {
			gp_spin_fill<<<GP_GRID, GP_BLOCK, 0, s>>>(p, size / 4, 7u, 50000);
			e = cudaGetLastError();
			cudaError_t f = cudaFree(p);
			if (e == cudaSuccess)
				e = f;
		}
		if (e != cudaSuccess) {
			if (g_helper_errors.fetch_add(1) == 0)
				g_helper_first_error = e;
			(void)cudaGetLastError();
		}
		g_helper_ops.fetch_add(1);
		if (g_phase.load() == 0 && i >= 20)
			g_phase.store(1); /* warmed up: pending frees exist from here on */
	}
	(void)cudaStreamSynchronize(s);
	(void)cudaStreamDestroy(s);
	return NULL;
}

int main(void)
{
	gp_require_gpu();
	bool shim = gp_shim_loaded();
	cudaStream_t s;
	CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	uint32_t *out, *seed;
	CK(cudaMalloc(&out, N * 4));
	CK(cudaMalloc(&seed, 4));

	pthread_t th;
	EXPECT(pthread_create(&th, NULL, helper, NULL) == 0, "pthread_create");
	while (g_phase.load() == 0)
		;
	long ops0 = g_helper_ops.load(), err0 = g_helper_errors.load();

	cudaGraph_t graph = NULL;
	uint32_t *tmp = NULL;
	CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
	cudaError_t ea = cudaMallocAsync(&tmp, N * 4, s);
	if (ea == cudaSuccess) {
		k_gen<<<GP_GRID, GP_BLOCK, 0, s>>>(tmp, seed, N);
		k_out<<<GP_GRID, GP_BLOCK, 0, s>>>(out, tmp, N);
		ea = cudaGetLastError();
	}
	cudaError_t ef = ea == cudaSuccess ? cudaFreeAsync(tmp, s) : ea;
	/* keep the capture open a while so the helper's frees and the fence thread overlap it */
	double t0 = gp_now_us();
	while (gp_now_us() - t0 < 50000)
		;
	cudaError_t ee = cudaStreamEndCapture(s, &graph);
	long ops_during = g_helper_ops.load() - ops0, err_during = g_helper_errors.load() - err0;
	g_stop.store(1);
	pthread_join(th, NULL);
	printf("capture: malloc_async=%s free_async=%s end_capture=%s helper_ops_during=%ld helper_errors_during=%ld%s%s\n",
	       cudaGetErrorName(ea), cudaGetErrorName(ef), cudaGetErrorName(ee), ops_during, err_during,
	       err_during ? " helper_first_error=" : "", err_during ? cudaGetErrorName(g_helper_first_error) : "");
	if (ea != cudaSuccess || ef != cudaSuccess || ee != cudaSuccess) {
		(void)cudaGetLastError();
		if (!shim && err_during) {
			printf("note: without the shim CUDA refused the helper's cudaMalloc/cudaFree during the global "
			       "capture and invalidated it (CUDA's own rule); nothing to check natively\n");
			printf("PASS capture shim=0 (native capture invalidated by the helper)\n");
			return 0;
		}
		fprintf(stderr, "FAIL capture: the capture did not survive (shim=%d)\n", shim);
		return 1;
	}
	EXPECT(ops_during > 0, "the helper did not run during the capture");
	if (shim)
		EXPECT(err_during == 0, "the helper's calls failed during the capture under the shim (%s)",
		       cudaGetErrorName(g_helper_first_error));

	cudaGraphExec_t exec;
	CK(cudaGraphInstantiate(&exec, graph, 0));
	uint32_t *host = (uint32_t *)malloc(N * 4);
	EXPECT(host, "malloc");
	for (uint32_t r = 0; r < 10; r++) {
		uint32_t sv = 1000003u * (r + 1);
		CK(cudaMemcpyAsync(seed, &sv, 4, cudaMemcpyHostToDevice, s));
		CK(cudaGraphLaunch(exec, s));
		CK(cudaMemcpyAsync(host, out, N * 4, cudaMemcpyDeviceToHost, s));
		CK(cudaStreamSynchronize(s));
		for (uint32_t i = 0; i < N; i++)
			EXPECT(host[i] == i * 3u + sv + 1u, "replay %u word %u: %u, expected %u", r, i, host[i],
			       i * 3u + sv + 1u);
	}
	free(host);
	CK(cudaGraphExecDestroy(exec));
	CK(cudaGraphDestroy(graph));
	CK(cudaFree(out));
	CK(cudaFree(seed));
	CK(cudaStreamDestroy(s));
	CK(cudaDeviceSynchronize());
	printf("PASS capture shim=%d replays=10\n", shim);
	return 0;
}
