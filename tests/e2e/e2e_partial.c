/* A runtime that lacks entry points (e2e_partial.sh runs this against the fakes of
 * tests/fake/noasync and tests/fake/nosync). Modes (argv[1]):
 *  noasync  no cudaMallocAsync/cudaFreeAsync and no stream capture: cudaMalloc and cudaFree
 *           are still pooled; the missing calls answer cudaErrorNotSupported; every other
 *           hooked call reaches the runtime as usual;
 *  nosync   no cudaDeviceSynchronize (the pool's fences): gpupool is off, and every hooked
 *           call reaches the runtime unchanged; no page;
 *  nosync-capped  the same under a limit: every allocation refused (nosync_capped). */
#include <cuda_runtime_api.h>

#include "e2e_util.h"

/* The loaded runtime has (1) or lacks (0) `name`. */
static int runtime_has(const char *name)
{
	void *h = dlopen("libcudart.so.13", RTLD_NOW | RTLD_NOLOAD);
	CHECK(h != NULL);
	int has = dlsym(h, name) != NULL;
	dlclose(h);
	return has;
}

/* `call` reached the runtime exactly once more than before. */
#define REACHES(name, call)                                     \
	do {                                                    \
		unsigned long n_ = gpfake_calls(name);          \
		CK(call);                                       \
		CHECK(gpfake_calls(name) == n_ + 1);            \
	} while (0)

static void noasync(void)
{
	CHECK(!runtime_has("cudaMallocAsync") && !runtime_has("cudaStreamBeginCapture"));
	REACHES("cudaFree", cudaFree(NULL));
	void *p[4];
	for (int i = 0; i < 4; i++)
		CK(cudaMalloc(&p[i], 4096));
	CHECK(gpfake_calls("cudaMalloc") == 1); /* one segment: pooled */
	CHECK(e2e_stats(0).allocs == 4);
	CK(cudaMemset(p[1], 0x33, 4096));
	CHECK(e2e_dev_all(p[1], 4096, 0x33));
	size_t fr = 0, tot = 0;
	REACHES("cudaMemGetInfo", cudaMemGetInfo(&fr, &tot));
	cudaStream_t s;
	CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	void *q = NULL;
	CKE(cudaMallocAsync(&q, 4096, s), cudaErrorNotSupported);
	CKE(cudaFreeAsync(p[0], s), cudaErrorNotSupported);
	CKE(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), cudaErrorNotSupported);
	cudaGraph_t g;
	CKE(cudaStreamEndCapture(s, &g), cudaErrorNotSupported);
	unsigned long f = gpfake_calls("cudaFree");
	for (int i = 0; i < 4; i++)
		CK(cudaFree(p[i]));
	CHECK(gpfake_calls("cudaFree") == f); /* pool blocks */
	REACHES("cudaStreamDestroy", cudaStreamDestroy(s));
	REACHES("cudaDeviceReset", cudaDeviceReset());
}

static void nosync(void)
{
	CHECK(!runtime_has("cudaDeviceSynchronize"));
	REACHES("cudaFree", cudaFree(NULL));
	void *p[3], *q = NULL;
	for (int i = 0; i < 3; i++)
		REACHES("cudaMalloc", cudaMalloc(&p[i], 4096));
	cudaStream_t s;
	CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	REACHES("cudaMallocAsync", cudaMallocAsync(&q, 4096, s));
	REACHES("cudaFreeAsync", cudaFreeAsync(q, s));
	for (int i = 0; i < 3; i++)
		REACHES("cudaFree", cudaFree(p[i]));
	size_t fr = 0, tot = 0;
	REACHES("cudaMemGetInfo", cudaMemGetInfo(&fr, &tot));
	CHECK(tot == gpfake_capacity(0));
	cudaGraph_t g;
	REACHES("cudaStreamBeginCapture", cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
	REACHES("cudaStreamEndCapture", cudaStreamEndCapture(s, &g));
	CK(cudaGraphDestroy(g));
	REACHES("cudaStreamDestroy", cudaStreamDestroy(s));
	REACHES("cudaDeviceReset", cudaDeviceReset());
	struct gpupool_device_stats st;
	CHECK(e2e_stats_api()(0, &st) == -ENOSYS);
	CHECK(e2e_count_pages() == 0);
}

/* nosync under a limit (nosync-capped): off, and the cap it cannot apply is not dropped:
 * every allocation is refused (cudaErrorInvalidValue) without reaching the runtime; every
 * other hooked call reaches it unchanged. */
static void nosync_capped(void)
{
	CHECK(!runtime_has("cudaDeviceSynchronize"));
	REACHES("cudaFree", cudaFree(NULL));
	unsigned long m = gpfake_calls("cudaMalloc"), a = gpfake_calls("cudaMallocAsync");
	void *p = NULL;
	size_t pitch = 0;
	CKE(cudaMalloc(&p, 4096), cudaErrorInvalidValue);
	CHECK(cudaGetLastError() == cudaErrorInvalidValue);
	CKE(cudaMallocManaged(&p, 4096, cudaMemAttachGlobal), cudaErrorInvalidValue);
	CKE(cudaMallocPitch(&p, &pitch, 512, 8), cudaErrorInvalidValue);
	cudaStream_t s;
	CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	CKE(cudaMallocAsync(&p, 4096, s), cudaErrorInvalidValue);
	/* nothing reached the runtime but the one failing call of each refusal that leaves its
	 * error as the last one (last_error.c: cudaMalloc(NULL, 0)); no memory was taken */
	CHECK(gpfake_calls("cudaMalloc") == m + 4 && gpfake_calls("cudaMallocAsync") == a);
	size_t fr = 0, tot = 0;
	REACHES("cudaMemGetInfo", cudaMemGetInfo(&fr, &tot));
	CHECK(fr == tot);
	REACHES("cudaStreamDestroy", cudaStreamDestroy(s));
	(void)cudaGetLastError();
}

int main(int argc, char **argv)
{
	e2e_shm_dir();
	const char *mode = argc > 1 ? argv[1] : "";
	if (!strcmp(mode, "noasync"))
		noasync();
	else if (!strcmp(mode, "nosync"))
		nosync();
	else if (!strcmp(mode, "nosync-capped"))
		nosync_capped();
	else
		CHECK(!"mode: noasync or nosync");
	printf("%s: ok\n", mode);
	return 0;
}
