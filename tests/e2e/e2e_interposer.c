/* gpupool and another dlsym interposer in one process, preloaded in either order: both must
 * keep working. argv[1]: "tracer" (libe2e_tracer.so) or "vgpu" (libe2e_vgpu.so); argv[2]:
 * "gpupool-first" or "gpupool-second", the order of LD_PRELOAD. A program without the CUDA
 * runtime loads the fake driver and finds its entry points with dlsym on its handle, as Numba
 * and ctypes programs do.
 *   tracer: its dlsym sees the program's 3 look-ups of e2e_probe_* and answers its own name;
 *     cuMemAlloc_v2 on libcuda's handle is gpupool's and its allocations are pooled.
 *   vgpu: its own names resolve (cuMemcpyDtoH_v2 is its hook) and the allocations made
 *     through whatever cuMemAlloc_v2 the program gets are pooled; gpupool first: the program's
 *     allocations are gpupool's and the interposer sees gpupool's segments (gpupool calls
 *     the driver through the interposer after it, as the program would without gpupool);
 *     gpupool second: the program gets the interposer's hooks, which reach gpupool's. */
#include <cuda.h>

#include "e2e_interposers.h"
#include "e2e_util.h"

#define N 50

/* The name of the file `p` lies in begins with `lib` (libgpupool.so.0.1.0, libgpupool.so). */
static int from(const void *p, const char *lib)
{
	Dl_info info;
	if (!p || !dladdr(p, &info) || !info.dli_fname)
		return 0;
	const char *base = strrchr(info.dli_fname, '/');
	base = base ? base + 1 : info.dli_fname;
	return !strncmp(base, lib, strlen(lib));
}

int main(int argc, char **argv)
{
	CHECK(argc == 3);
	int tracer = !strcmp(argv[1], "tracer");
	int first = !strcmp(argv[2], "gpupool-first");
	CHECK(tracer || !strcmp(argv[1], "vgpu"));
	CHECK(first || !strcmp(argv[2], "gpupool-second"));
	e2e_shm_dir();
	void *h = dlopen("libcuda.so.1", RTLD_NOW);
	CHECK(h != NULL);

	if (tracer) {
		/* the tracer sees the program's look-ups and its own name resolves */
		CHECK(dlsym(RTLD_DEFAULT, "e2e_probe_1") == NULL);
		CHECK(dlsym(h, "e2e_probe_2") == NULL);
		CHECK(dlsym(RTLD_DEFAULT, "e2e_probe_3") == NULL);
		e2e_tracer_seen_fn seen;
		E2E_FN(seen, dlsym(RTLD_DEFAULT, "e2e_tracer_seen"));
		CHECK(seen() == 3);
	} else {
		void *dtoh = dlsym(h, "cuMemcpyDtoH_v2");
		if (!from(dtoh, "libe2e_vgpu.so"))
			fprintf(stderr, "cuMemcpyDtoH_v2 on libcuda's handle is not the interposer's hook\n");
		CHECK(from(dtoh, "libe2e_vgpu.so"));
	}

	CUresult (*init)(unsigned), (*retain)(CUcontext *, CUdevice), (*set)(CUcontext);
	CUresult (*alloc)(CUdeviceptr *, size_t), (*release)(CUdeviceptr);
	unsigned long (*calls)(const char *);
	E2E_FN(init, dlsym(h, "cuInit"));
	E2E_FN(retain, dlsym(h, "cuDevicePrimaryCtxRetain"));
	E2E_FN(set, dlsym(h, "cuCtxSetCurrent"));
	E2E_FN(alloc, dlsym(h, "cuMemAlloc_v2"));
	E2E_FN(release, dlsym(h, "cuMemFree_v2"));
	E2E_FN(calls, dlsym(h, "gpfakecu_calls"));
	void *got;
	memcpy(&got, &alloc, sizeof got);
	const char *want = tracer || first ? "libgpupool.so" : "libe2e_vgpu.so";
	if (!from(got, want))
		fprintf(stderr, "cuMemAlloc_v2 on libcuda's handle is not %s's\n", want);
	CHECK(from(got, want));
	if (tracer)
		CHECK(got == dlsym(RTLD_DEFAULT, "cuMemAlloc_v2"));

	CUcontext ctx;
	CHECK(init(0) == CUDA_SUCCESS);
	CHECK(retain(&ctx, 0) == CUDA_SUCCESS);
	CHECK(set(ctx) == CUDA_SUCCESS);
	CUdeviceptr p[N];
	for (int i = 0; i < N; i++)
		CHECK(alloc(&p[i], 1000 + (size_t)i) == CUDA_SUCCESS);
	struct gpupool_device_stats st = e2e_stats(0);
	if (st.driver_allocs != N)
		fprintf(stderr, "%llu of %d allocations pooled\n", (unsigned long long)st.driver_allocs, N);
	CHECK(st.driver_allocs == N);
	/* the pool's memory: whole segments, or chunks of virtual memory (segments:auto) */
	unsigned long segments = calls("cuMemAlloc_v2"), chunks = calls("cuMemCreate");
	CHECK(segments + chunks >= 1 && segments + chunks <= 2);
	if (!tracer) {
		unsigned long (*vgpu_calls)(const char *);
		E2E_FN(vgpu_calls, dlsym(RTLD_DEFAULT, "e2e_vgpu_calls"));
		unsigned long seen = vgpu_calls("cuMemAlloc_v2");
		if (seen != (first ? segments : N))
			fprintf(stderr, "the interposer's cuMemAlloc_v2 saw %lu calls, expected %lu\n", seen,
				first ? segments : (unsigned long)N);
		CHECK(seen == (first ? segments : N));
		/* gpupool's chunks reach the interposer after it as its segments do */
		CHECK(vgpu_calls("cuMemCreate") == (first ? chunks : 0));
	}
	for (int i = 0; i < N; i++)
		CHECK(release(p[i]) == CUDA_SUCCESS);
	CHECK(e2e_stats(0).driver_frees == N);
	CHECK(calls("cuMemFree_v2") == 0); /* the pool keeps its segments */
	printf("%s, gpupool %s: %d allocations pooled, %lu segments and %lu chunks from the driver\n", argv[1],
	       first ? "first" : "second", N, segments, chunks);
	return 0;
}
