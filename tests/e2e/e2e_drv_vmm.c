/* The pool's virtual-memory segments on the fake driver (segments:auto, the default), one case
 * per argument, in a program without the runtime that calls the fake driver through gpupool's
 * driver entry points:
 *   grow      blocks in 2 MiB chunks of one reserved range, data across chunk boundaries
 *             intact, the pool's chunks counted once (pooled, not unpooled virtual memory);
 *   release   a free block between live ones: gpupool_release gives its chunks back, the
 *             live blocks' data stays;
 *   fence     cuMemFree is a fence on chunked memory too: a block freed while a delayed fake
 *             kernel still writes into it is not handed out before the write landed;
 *   refused   the driver refuses cuMemMap, cuMemSetAccess, cuMemCreate, cuMemRelease and
 *             cuMemUnmap partway: nothing mapped twice or lost, the page exact, the
 *             allocation CUDA_ERROR_OUT_OF_MEMORY when it cannot be served;
 *   ipc       a cuMemAlloc of at least medium_max is a whole segment and exported; a chunked
 *             block is refused with one line naming the segments knob; with segments:vmm the
 *             large one is refused too;
 *   novmm     a device without virtual memory management: whole segments (FAKECU_NO_VMM). */
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "e2e_drv.h"

#define MiB ((size_t)1 << 20)

static struct e2e_drv d;
static size_t (*used)(int);

/* What the fake driver holds for this process is what the pool reserved, all of it pooled. */
static void agree(void)
{
	struct gpupool_device_stats st = e2e_stats(0);
	if (used(0) != st.reserved_bytes)
		fprintf(stderr, "driver holds %zu bytes, the pool reserved %llu\n", used(0),
			(unsigned long long)st.reserved_bytes);
	CHECK(used(0) == st.reserved_bytes);
	CHECK(st.unpooled_bytes == 0 && st.unpooled_vmm_bytes == 0);
	CHECK(st.cached_bytes == st.reserved_bytes - st.allocated_bytes);
}

static void grow(void)
{
	CUstream s;
	CU(d.StreamCreate(&s, CU_STREAM_NON_BLOCKING));
	CUdeviceptr p[6];
	for (int i = 0; i < 6; i++) {
		CU(d.MemAllocAsync(&p[i], 3 * MiB, s));
		CU(d.MemsetD8Async(p[i], (unsigned char)(0x10 + i), 3 * MiB, s));
	}
	CU(d.StreamSynchronize(s));
	for (int i = 0; i < 6; i++)
		CHECK(e2e_drv_all(&d, p[i], 3 * MiB, (unsigned char)(0x10 + i)));
	struct gpupool_device_stats st = e2e_stats(0);
	CHECK(st.vmm_granularity == 2 * MiB);
	CHECK(p[1] == p[0] + 3 * MiB); /* side by side across chunks */
	CHECK(st.reserved_bytes == 18 * MiB && d.calls("cuMemCreate") == 9);
	CHECK(d.calls("cuMemAddressReserve") == 1 && d.calls("cuMemAlloc_v2") == 0);
	agree();
	for (int i = 0; i < 6; i++)
		CU(d.MemFreeAsync(p[i], s));
	CU(d.StreamSynchronize(s));
	CU(d.StreamDestroy(s));
	printf("grow: 6 blocks of 3 MiB in 9 chunks of one range\n");
}

static void release(void)
{
	long long (*rel)(int);
	E2E_API(rel, "gpupool_release");
	CUdeviceptr a, b, c;
	CU(d.MemAlloc(&a, 4 * MiB));
	CU(d.MemAlloc(&b, 8 * MiB));
	CU(d.MemAlloc(&c, 4 * MiB));
	CU(d.MemsetD8(a, 0xA1, 4 * MiB));
	CU(d.MemsetD8(c, 0xC3, 4 * MiB));
	CU(d.MemFree(b));
	size_t before = used(0);
	CHECK(rel(0) == (long long)(8 * MiB));
	CHECK(used(0) == before - 8 * MiB);
	agree();
	CHECK(e2e_drv_all(&d, a, 4 * MiB, 0xA1) && e2e_drv_all(&d, c, 4 * MiB, 0xC3));
	struct gpupool_device_stats st = e2e_stats(0);
	CHECK(st.segments == 1 && st.reserved_bytes == 8 * MiB);
	/* the hole is memory again when needed */
	CU(d.MemAlloc(&b, 6 * MiB));
	CU(d.MemsetD8(b, 0xB2, 6 * MiB));
	CHECK(e2e_drv_all(&d, b, 6 * MiB, 0xB2));
	agree();
	CU(d.MemFree(a));
	CU(d.MemFree(b));
	CU(d.MemFree(c));
	CHECK(rel(0) > 0);
	CHECK(used(0) == 0 && e2e_stats(0).segments == 0);
	printf("release: the middle chunks went back, the live blocks kept their bytes\n");
}

/* limit:6M: one 4 MiB block fits, so the new owner gets the old block's memory, which it may
 * use only once the old owner's kernel is done. */
static void fence(void)
{
	CUstream k;
	CU(d.StreamCreate(&k, CU_STREAM_NON_BLOCKING));
	int same = 0;
	for (int it = 0; it < 8; it++) {
		CUdeviceptr a, b;
		CU(d.MemAlloc(&a, 4 * MiB));
		CU(d.launch_fill(a, 4 * MiB, 0xAA, 20000, k));
		CU(d.MemFree(a));
		CU(d.MemAlloc(&b, 4 * MiB));
		same += a == b;
		memset((void *)(uintptr_t)b, 0x55, 4 * MiB); /* fake device memory is host memory */
		CU(d.CtxSynchronize());
		CHECK(e2e_drv_all(&d, b, 4 * MiB, 0x55));
		CU(d.MemFree(b));
	}
	CHECK(same == 8);
	CHECK(e2e_stats(0).vmm_granularity == 2 * MiB && d.calls("cuMemAlloc_v2") == 0);
	CU(d.StreamDestroy(k));
	printf("fence: chunked memory waits for its fence as a segment does\n");
}

static void refused(void)
{
	long long (*rel)(int);
	E2E_API(rel, "gpupool_release");
	CUdeviceptr a, b, c;
	/* a map refused at its 3rd chunk: undone, then the retry (release and grow) maps it */
	CHECK(d.fail_nth("cuMemMap", 3, CUDA_ERROR_OUT_OF_MEMORY) == 0);
	CU(d.MemAlloc(&a, 8 * MiB));
	agree();
	/* the access grant refused: every chunk of that map undone, the retry serves it */
	CHECK(d.fail_nth("cuMemSetAccess", 1, CUDA_ERROR_UNKNOWN) == 0);
	CU(d.MemAlloc(&b, 6 * MiB));
	agree();
	CU(d.MemsetD8(b, 0x5B, 6 * MiB));
	CHECK(e2e_drv_all(&d, b, 6 * MiB, 0x5B));
	/* a handle's release refused right after its map: that chunk unmapped again */
	CHECK(d.fail_nth("cuMemRelease", 1, CUDA_ERROR_UNKNOWN) == 0);
	CU(d.MemAlloc(&c, 2 * MiB));
	agree();
	/* out of memory for good: every chunk refused, four times (the pool's try and its retry
	 * after a release, both again as the GPU has the room: calls/ladder.c) */
	for (unsigned long n = 1; n <= 4; n++)
		CHECK(d.fail_nth("cuMemCreate", n, CUDA_ERROR_OUT_OF_MEMORY) == 0);
	CUdeviceptr x = 0;
	CUE(d.MemAlloc(&x, 8 * MiB), CUDA_ERROR_OUT_OF_MEMORY); /* below medium_max: chunks */
	agree();
	CHECK(e2e_stats(0).ooms == 1);
	/* an unmap refused partway through a release: the rest stays, counted, for the next one */
	CU(d.MemFree(a));
	CU(d.MemFree(b));
	CHECK(d.fail_nth("cuMemUnmap", 2, CUDA_ERROR_UNKNOWN) == 0);
	long long r1 = rel(0);
	agree();
	long long r2 = rel(0);
	agree();
	CHECK(r1 > 0 && r2 > 0);
	CU(d.MemFree(c));
	CHECK(rel(0) > 0);
	agree();
	CHECK(used(0) == 0 && e2e_stats(0).reserved_bytes == 0);
	printf("refused: map, access, create, release and unmap refused: %lld + %lld bytes released\n", r1, r2);
}

/* cuIpcGetMemHandle of `p` with stderr captured: the result, and the line it printed in buf. */
static CUresult ipc_capture(CUdeviceptr p, char *buf, size_t cap)
{
	struct e2e_stderr c = e2e_stderr_begin();
	CUipcMemHandle h;
	CUresult e = d.IpcGetMemHandle(&h, p);
	(void)e2e_stderr_end(c, buf, cap);
	return e;
}

static void ipc(int vmm_only)
{
	char buf[4096];
	CUdeviceptr big, small;
	CU(d.MemAlloc(&big, 12 * MiB));
	CU(d.MemAlloc(&small, 64 * 1024));
	unsigned long calls = d.calls("cuIpcGetMemHandle");
	CUresult e = ipc_capture(big, buf, sizeof buf);
	if (vmm_only) {
		CHECK(e == CUDA_ERROR_INVALID_VALUE && strstr(buf, "segments:"));
	} else {
		CHECK(e == CUDA_SUCCESS); /* a whole segment of its own */
	}
	e = ipc_capture(small, buf, sizeof buf);
	fprintf(stderr, "captured: %s", buf);
	CHECK(e == CUDA_ERROR_INVALID_VALUE);
	CHECK(strstr(buf, "segments:") && strstr(buf, "GPUPOOL_CONF"));
	CHECK(d.calls("cuIpcGetMemHandle") == calls + (vmm_only ? 0 : 1)); /* never a wrong handle */
	CU(d.MemFree(big));
	CU(d.MemFree(small));
	printf("ipc: whole segment %s, chunked block refused\n", vmm_only ? "refused too" : "exported");
}

static void novmm(void)
{
	CUdeviceptr a;
	CU(d.MemAlloc(&a, 4096));
	struct gpupool_device_stats st = e2e_stats(0);
	CHECK(st.vmm_granularity == 0 && d.calls("cuMemCreate") == 0 && d.calls("cuMemAlloc_v2") == 1);
	agree();
	CU(d.MemFree(a));
	printf("novmm: whole segments\n");
}

int main(int argc, char **argv)
{
	CHECK(argc > 1);
	e2e_shm_dir();
	e2e_drv_load(&d, 1);
	E2E_FN(used, dlsym(d.handle, "gpfakecu_used"));
	if (!strcmp(argv[1], "grow"))
		grow();
	else if (!strcmp(argv[1], "release"))
		release();
	else if (!strcmp(argv[1], "fence"))
		fence();
	else if (!strcmp(argv[1], "refused"))
		refused();
	else if (!strcmp(argv[1], "ipc"))
		ipc(0);
	else if (!strcmp(argv[1], "ipc-vmm"))
		ipc(1);
	else if (!strcmp(argv[1], "novmm"))
		novmm();
	else
		CHECK(!"unknown case");
	return 0;
}
