/* Contract 8, cudaMemGetInfo tells the truth the program needs. "limit" (limit:64M on a
 * 256 MiB fake device): total is the limit, free is what can still be allocated (checked by
 * allocating it), cached blocks count as free. "nolimit": the device's figures, with the
 * pool's cached bytes counted as free. */
#include <cuda_runtime_api.h>

#include "e2e_util.h"

#define MB ((size_t)1 << 20)
typedef cudaError_t (*meminfo_fn)(size_t *, size_t *);

int main(int argc, char **argv)
{
	e2e_shm_dir();
	CHECK(argc > 1);
	meminfo_fn native;
	E2E_FN(native, e2e_native("cudaMemGetInfo"));
	size_t f = 0, t = 0, nf = 0, nt = 0;
	void *a = NULL, *b = NULL, *c = NULL;
	if (!strcmp(argv[1], "limit")) {
		CK(cudaMemGetInfo(&f, &t));
		CHECK(t == 64 * MB && f == 64 * MB); /* before the pool exists */
		CK(cudaMalloc(&a, 12 * MB));
		CK(cudaMemGetInfo(&f, &t));
		CHECK(t == 64 * MB && f == 52 * MB);
		CK(cudaMalloc(&b, f)); /* all of it */
		CK(cudaMemGetInfo(&f, &t));
		CHECK(t == 64 * MB && f == 0);
		CKE(cudaMalloc(&c, MB), cudaErrorMemoryAllocation);
		CKE(cudaGetLastError(), cudaErrorMemoryAllocation);
		CK(cudaFree(b));
		e2e_wait_no_pending(0);
		CK(cudaMemGetInfo(&f, &t));
		CHECK(t == 64 * MB && f == 52 * MB); /* the cached block is free to this process */
		unsigned long m = gpfake_calls("cudaMalloc");
		CK(cudaMalloc(&b, f));
		CHECK(gpfake_calls("cudaMalloc") == m); /* ...and served from the cache */
		CK(cudaFree(b));
		CK(cudaFree(a));
		CHECK(native(&nf, &nt) == cudaSuccess && nt == 256 * MB);
	} else {
		CK(cudaMalloc(&a, 8 * MB)); /* a 20 MiB segment: 12 MiB of it cached */
		CK(native(&nf, &nt));
		CK(cudaMemGetInfo(&f, &t));
		CHECK(t == nt && t == 256 * MB);
		CHECK(nf == 256 * MB - 20 * MB);
		CHECK(f == nf + 12 * MB);
		CK(cudaFree(a));
		e2e_wait_no_pending(0);
		CK(native(&nf, &nt));
		CK(cudaMemGetInfo(&f, &t));
		CHECK(f == nf + 20 * MB && f == 256 * MB);
	}
	return 0;
}
