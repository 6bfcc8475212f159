/* Contract 9, invisible when unused: with the shim loaded, a program that only calls
 * cudaGetDeviceCount, cudaFree(0), cudaMemGetInfo and cudaGetLastError gets no thread and
 * no statistics page. e2e_invisible.sh checks that it prints nothing and leaves nothing. */
#include <cuda_runtime_api.h>

#include "e2e_util.h"

int main(void)
{
	e2e_shm_dir();
	if (!dlsym(RTLD_DEFAULT, "gpupool_version")) {
		fprintf(stderr, "libgpupool.so is not loaded\n");
		return 1;
	}
	int t0 = e2e_thread_count();
	int n = 0;
	size_t f = 0, t = 0;
	CK(cudaGetDeviceCount(&n));
	CK(cudaFree(NULL));
	CK(cudaMemGetInfo(&f, &t));
	CK(cudaGetLastError());
	CHECK(n > 0 && t > 0);
	CHECK(gpfake_calls("cudaFree") == 1 && gpfake_calls("cudaMemGetInfo") == 1);
	CHECK(e2e_thread_count() == t0);
	CHECK(e2e_count_pages() == 0);
	return 0;
}
