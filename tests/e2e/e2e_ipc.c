/* Contract 7, IPC is never silently wrong: cudaIpcGetMemHandle on a block that is a whole
 * segment succeeds (and the handle opens to that block); on a block inside a shared
 * segment it fails with cudaErrorInvalidValue and prints one line naming the knob. */
#include <fcntl.h>
#include <cuda_runtime_api.h>

#include "e2e_util.h"

int main(void)
{
	e2e_shm_dir();
	void *big = NULL, *s1 = NULL, *s2 = NULL, *o = NULL;
	cudaIpcMemHandle_t h;
	CK(cudaMalloc(&big, (size_t)12 << 20));
	CK(cudaIpcGetMemHandle(&h, big));
	CK(cudaIpcOpenMemHandle(&o, h, cudaIpcMemLazyEnablePeerAccess));
	CHECK(o == big);
	CK(cudaIpcCloseMemHandle(o));

	CK(cudaMalloc(&s1, 4096));
	CK(cudaMalloc(&s2, 4096));
	unsigned long calls = gpfake_calls("cudaIpcGetMemHandle");
	struct e2e_stderr cap = e2e_stderr_begin();
	cudaError_t e = cudaIpcGetMemHandle(&h, s2);
	char buf[4096];
	size_t n = e2e_stderr_end(cap, buf, sizeof buf);
	CKE(e, cudaErrorInvalidValue);
	CKE(cudaGetLastError(), cudaErrorInvalidValue);
	CKE(cudaGetLastError(), cudaSuccess);
	CHECK(gpfake_calls("cudaIpcGetMemHandle") == calls); /* no handle was made */
	CHECK(n > 0);
	fprintf(stderr, "captured: %s", buf);
	int lines = 0;
	for (size_t i = 0; i < n; i++)
		lines += buf[i] == '\n';
	CHECK(lines == 1 && buf[n - 1] == '\n');
	CHECK(strstr(buf, "medium_max") && strstr(buf, "GPUPOOL_CONF"));
	CKE(cudaIpcGetMemHandle(&h, s1), cudaErrorInvalidValue); /* offset 0, but not the whole segment */
	CK(cudaFree(s1));
	CK(cudaFree(s2));
	CK(cudaFree(big));
	return 0;
}
