/* gpupool_reset_peak_stats (torch.cuda.reset_peak_memory_stats's counterpart) over the fake
 * runtime with two devices: every gauge's peak restarts from its current value on the device
 * asked for (-1: every device), in gpupool_stats and the page alike; counters are left alone;
 * the other device is untouched; a device out of range is -ENODEV, one without a pool yet is
 * 0; and the pool's policy still keeps to the highest reserved figure of the run (a growth
 * below the old peak hands no cached segment back). */
#include <cuda_runtime_api.h>
#include <errno.h>
#include <sys/types.h>

#include "e2e_util.h"

#define MB ((size_t)1 << 20)

static int (*reset_)(int);
static void *(*gpupool_malloc_)(ssize_t, int, void *);
static void (*gpupool_free_)(void *, ssize_t, int, void *);

/* every gauge's peak equals its current value */
static void check_peaks_are_current(const struct gpupool_device_stats *s)
{
#define E2E_PEAK_IS_CURRENT_(name, unit, help)                                                   \
	if (s->name##_peak != s->name) {                                                         \
		fprintf(stderr, "%s_peak %llu, current %llu\n", #name,                           \
			(unsigned long long)s->name##_peak, (unsigned long long)s->name);        \
		CHECK(!"a peak was not reset to its current value");                             \
	}
	GPUPOOL_GAUGES(E2E_PEAK_IS_CURRENT_)
#undef E2E_PEAK_IS_CURRENT_
}

/* the page file's copy of `dev`'s slot (what gpupool-stat and gpupool.py read) */
static struct gpupool_device_stats page_slot(int dev)
{
	char path[4200];
	snprintf(path, sizeof path, "%s/gpupool.%ld", e2e_shm_dir(), (long)getpid());
	FILE *f = fopen(path, "rb");
	CHECK(f != NULL);
	static struct gpupool_page pg;
	CHECK(fread(&pg, sizeof pg, 1, f) == 1);
	fclose(f);
	for (uint32_t i = 0; i < pg.ndevices && i < GPUPOOL_MAX_DEVICES; i++)
		if (pg.dev[i].active && pg.dev[i].device == dev)
			return pg.dev[i];
	CHECK(!"device not on the page");
	return pg.dev[0];
}

int main(void)
{
	e2e_shm_dir();
	E2E_API(reset_, "gpupool_reset_peak_stats");
	E2E_API(gpupool_malloc_, "gpupool_malloc");
	E2E_API(gpupool_free_, "gpupool_free");
	cudaStream_t s;
	CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));

	/* a device out of range; one with no pool yet has nothing to reset */
	CHECK(reset_(2) == -ENODEV);
	CHECK(reset_(-2) == -ENODEV);
	CHECK(reset_(1) == 0);

	/* device 0: four 12 MiB segments (a peak of 48 MiB), freed on their stream (cached at
	 * once), and handed back: reserved 0, its peak 48 MiB */
	void *p[4];
	for (int i = 0; i < 4; i++)
		CHECK((p[i] = gpupool_malloc_((ssize_t)(12 * MB), 0, s)) != NULL);
	for (int i = 0; i < 4; i++)
		gpupool_free_(p[i], (ssize_t)(12 * MB), 0, s);
	long long (*release)(int);
	E2E_API(release, "gpupool_release");
	CHECK(release(0) == (long long)(48 * MB));
	/* device 1: a live block and a higher peak than it holds now */
	void *q = NULL, *q2 = NULL;
	CK(cudaSetDevice(1));
	CK(cudaMalloc(&q, 4 * MB));
	CK(cudaMalloc(&q2, 8 * MB));
	CK(cudaFree(q2));
	e2e_wait_no_pending(1); /* the fence thread is done with device 1: its gauges hold still */
	CK(cudaSetDevice(0));
	/* device 0 again: two 12 MiB blocks, one freed (a whole cached segment) */
	void *a = gpupool_malloc_((ssize_t)(12 * MB), 0, s), *b = gpupool_malloc_((ssize_t)(12 * MB), 0, s);
	CHECK(a && b);
	gpupool_free_(b, (ssize_t)(12 * MB), 0, s);
	struct gpupool_device_stats d0 = e2e_stats(0), d1 = e2e_stats(1);
	CHECK(d0.reserved_bytes == 24 * MB && d0.reserved_bytes_peak == 48 * MB);
	CHECK(d0.allocated_bytes == 12 * MB && d0.allocated_bytes_peak == 48 * MB);
	CHECK(d1.allocated_bytes_peak == 12 * MB);

	/* reset device 0: its peaks are its current values, in gpupool_stats and on the page;
	 * counters are kept; device 1 keeps its peaks */
	CHECK(reset_(0) == 0);
	struct gpupool_device_stats r0 = e2e_stats(0);
	check_peaks_are_current(&r0);
	CHECK(r0.reserved_bytes_peak == 24 * MB && r0.allocated_bytes_peak == 12 * MB);
	CHECK(r0.allocs == d0.allocs && r0.frees == d0.frees && r0.segment_allocs == d0.segment_allocs &&
	      r0.requested_bytes_total == d0.requested_bytes_total && r0.released_bytes == d0.released_bytes);
	struct gpupool_device_stats pg0 = page_slot(0);
	CHECK(pg0.reserved_bytes_peak == 24 * MB && pg0.allocated_bytes_peak == 12 * MB);
	struct gpupool_device_stats r1 = e2e_stats(1);
	CHECK(r1.allocated_bytes_peak == 12 * MB && r1.allocated_bytes == 4 * MB);

	/* the policy still keeps to the run's peak (48 MiB): a 14 MiB segment takes reserved to
	 * 38 MiB, below it, so the cached 12 MiB segment is not handed back first (it would be,
	 * were the policy's peak the reset one, 24 MiB); the reported peak follows the growth */
	unsigned long frees0 = gpfake_calls("cudaFree");
	void *c = gpupool_malloc_((ssize_t)(13 * MB), 0, s);
	CHECK(c != NULL);
	struct gpupool_device_stats g0 = e2e_stats(0);
	CHECK(g0.segment_frees == r0.segment_frees && gpfake_calls("cudaFree") == frees0);
	CHECK(g0.reserved_bytes == 38 * MB && g0.reserved_bytes_peak == 38 * MB);
	CHECK(g0.allocated_bytes_peak == 26 * MB);

	/* -1: every device */
	gpupool_free_(c, (ssize_t)(13 * MB), 0, s);
	gpupool_free_(a, (ssize_t)(12 * MB), 0, s);
	CHECK(reset_(-1) == 0);
	struct gpupool_device_stats e0 = e2e_stats(0), e1 = e2e_stats(1);
	check_peaks_are_current(&e0);
	check_peaks_are_current(&e1);
	CHECK(e0.allocated_bytes_peak == 0 && e1.allocated_bytes_peak == 4 * MB);

	CK(cudaSetDevice(1));
	CK(cudaFree(q));
	CK(cudaSetDevice(0));
	CK(cudaDeviceSynchronize());
	CHECK(gpfake_faults() == 0);
	CK(cudaStreamDestroy(s));
	printf("ok\n");
	return 0;
}
