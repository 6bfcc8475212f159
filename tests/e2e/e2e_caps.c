/* A cap that cannot be applied as asked never becomes no cap (docs/security.md, "Caps that
 * cannot be applied"), on the fake runtime:
 *   e2e_caps refused      the configuration names a cap gpupool cannot apply (a typo of limit,
 *                         a limit or group_limit it cannot read, a scheduler's limit HAMi-core
 *                         has none from): every allocation is refused, pooled or not, with
 *                         cudaErrorInvalidValue left as the last error
 *   e2e_caps limit MIB    the limit in effect is MIB MiB (limit:200% is the whole device; a
 *                         scheduler's " 64m", "+64m", "64.5m" or "0x4000000" is 64 MiB, as
 *                         HAMi-core reads them, like " 4g" and the others for 4 GiB):
 *                         MIB - 8 fit, 16 more do not
 *   e2e_caps unresolved   limit:50% of a device whose size cannot be asked (cudaMemGetInfo
 *                         fails): every allocation on it is refused as out of memory */
#include <cuda_runtime_api.h>

#include "e2e_util.h"

#define MB ((size_t)1 << 20)

int main(int argc, char **argv)
{
	e2e_shm_dir();
	CHECK(argc > 1);
	void *p = NULL;
	if (!strcmp(argv[1], "refused")) {
		CKE(cudaMalloc(&p, MB), cudaErrorInvalidValue);
		CKE(cudaGetLastError(), cudaErrorInvalidValue);
		CKE(cudaMallocAsync(&p, MB, 0), cudaErrorInvalidValue);
		CKE(cudaMallocManaged(&p, MB, cudaMemAttachGlobal), cudaErrorInvalidValue);
		size_t pitch;
		CKE(cudaMallocPitch(&p, &pitch, 1024, 16), cudaErrorInvalidValue);
		printf("every allocation refused\n");
		return 0;
	}
	if (!strcmp(argv[1], "limit") && argc > 2) {
		size_t mib = (size_t)atoi(argv[2]);
		CK(cudaMalloc(&p, (mib - 8) * MB));
		void *q = NULL;
		CKE(cudaMalloc(&q, 16 * MB), cudaErrorMemoryAllocation);
		struct gpupool_device_stats st = e2e_stats(0);
		if (st.limit_bytes != mib * MB) {
			fprintf(stderr, "limit %llu bytes, expected %zu MiB\n", (unsigned long long)st.limit_bytes, mib);
			return 1;
		}
		CK(cudaFree(p));
		printf("limit %zu MiB\n", mib);
		return 0;
	}
	if (!strcmp(argv[1], "unresolved")) {
		CKE(cudaMalloc(&p, MB), cudaErrorMemoryAllocation);
		CKE(cudaMallocManaged(&p, MB, cudaMemAttachGlobal), cudaErrorMemoryAllocation);
		printf("every allocation refused\n");
		return 0;
	}
	return 2;
}
