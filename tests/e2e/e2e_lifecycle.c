/* A device's pool over the runtime's lifecycle, one case per argument:
 *   ipc-freed   cudaIpcGetMemHandle of a freed block at its segment's base is refused
 *               (cudaErrorInvalidValue, as natively), not the whole segment exported. */
#include <cuda_runtime_api.h>

#include "e2e_util.h"

static void ipc_freed(void)
{
	void *a = NULL, *b = NULL;
	CK(cudaMalloc(&a, 1000));
	CK(cudaMalloc(&b, 1000));
	CK(cudaFree(a));
	cudaIpcMemHandle_t h;
	CKE(cudaIpcGetMemHandle(&h, a), cudaErrorInvalidValue);
	CKE(cudaGetLastError(), cudaErrorInvalidValue);
	CK(cudaFree(b));
	printf("ipc-freed: refused\n");
}

int main(int argc, char **argv)
{
	CHECK(argc > 1);
	e2e_shm_dir();
	static const struct {
		const char *name;
		void (*fn)(void);
	} cases[] = {{"ipc-freed", ipc_freed}};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
		if (!strcmp(argv[1], cases[i].name)) {
			cases[i].fn();
			return 0;
		}
	fprintf(stderr, "unknown case %s\n", argv[1]);
	return 2;
}
