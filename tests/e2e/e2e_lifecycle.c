/* A device's pool over the runtime's lifecycle, one case per argument:
 *   ipc-freed   cudaIpcGetMemHandle of a freed block at its segment's base is refused
 *               (cudaErrorInvalidValue, as natively), not the whole segment exported;
 *   geometry    knobs whose segments cannot fit the device (run with FAKECUDA_CAPACITY=1G
 *               and GPUPOOL_CONF=small_segment:2G,medium_segment:3G,large_round:1G) or the
 *               limit (limit:48M,small_segment:64M) are adapted when the pool is made,
 *               with one warning line naming the knobs, their values and what is used
 *               instead (argv[2]: what that line must hold), and a request of each class
 *               is served. */
#include <cuda_runtime_api.h>
#include <fcntl.h>

#include "e2e_util.h"

static char **args;

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

/* Runs fn with stderr (fd 2, where gpupool writes) going to a file; its text into buf. */
static void capture_stderr(void (*fn)(void), char *buf, size_t cap)
{
	char path[] = "/tmp/e2e-lifecycle-XXXXXX";
	int fd = mkstemp(path);
	CHECK(fd >= 0);
	unlink(path);
	int saved = dup(2);
	CHECK(saved >= 0 && dup2(fd, 2) == 2);
	fn();
	CHECK(dup2(saved, 2) == 2);
	close(saved);
	ssize_t n = pread(fd, buf, cap - 1, 0);
	CHECK(n >= 0);
	buf[n] = '\0';
	close(fd);
}

static cudaError_t geometry_errs[3];
static void *geometry_ptrs[3];

static void geometry_allocs(void)
{
	static const size_t sizes[3] = {1000, 5 << 20, 20 << 20}; /* small, medium, large */
	for (int i = 0; i < 3; i++)
		geometry_errs[i] = cudaMalloc(&geometry_ptrs[i], sizes[i]);
}

static void geometry(void)
{
	char log[4096];
	capture_stderr(geometry_allocs, log, sizeof log);
	fputs(log, stderr);
	for (int i = 0; i < 3; i++)
		CK(geometry_errs[i]);
	int lines = 0;
	for (const char *l = log; (l = strstr(l, "gpupool: warning:")); l++)
		lines++;
	CHECK(lines == 1 && args[2] && strstr(log, args[2]));
	for (int i = 0; i < 3; i++) {
		CK(cudaMemset(geometry_ptrs[i], 0x22, 1000));
		CK(cudaFree(geometry_ptrs[i]));
	}
	printf("geometry: every class served, one warning\n");
}

int main(int argc, char **argv)
{
	CHECK(argc > 1);
	args = argv;
	e2e_shm_dir();
	static const struct {
		const char *name;
		void (*fn)(void);
	} cases[] = {{"ipc-freed", ipc_freed}, {"geometry", geometry}};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
		if (!strcmp(argv[1], cases[i].name)) {
			cases[i].fn();
			return 0;
		}
	fprintf(stderr, "unknown case %s\n", argv[1]);
	return 2;
}
