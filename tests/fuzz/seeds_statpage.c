/* Writes the seed corpus of the statistics-page harness into the directory given
 * (tests/fuzz/corpus/statpage): a page written by the pool through the test writer (with
 * each device's uuid), the same truncated, with every slot's counter odd, with every
 * counter (and uuid byte) at its largest, and with counters whose derived figures (calls
 * saved, hit rate) overflow naive arithmetic; each also in version 2's layout (v2_*, no
 * uuid), and each layout's header in the other's size. Rerun when struct gpupool_page
 * changes, keeping the old layout's seeds under a new name (v1_valid). Test code only. */
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "fuzz_statpage.h"
#include "stat_writer.h"
#include "stats.h"

static int put(const char *dir, const char *name, const void *buf, size_t len)
{
	char path[4096];
	snprintf(path, sizeof path, "%s/%s", dir, name);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0 || write(fd, buf, len) != (ssize_t)len) {
		fprintf(stderr, "seeds_statpage: %s: %s\n", path, strerror(errno));
		return 1;
	}
	close(fd);
	return 0;
}

/* pg in version 2's layout: the same header but for version and size, each slot without its
 * uuid (the figures after it 16 bytes earlier) and without the version 4 fields. Returns the size written to out
 * (gp_statpage_size_of(2)). */
static size_t to_v2(const struct gpupool_page *pg, unsigned char *out)
{
	size_t hdr = offsetof(struct gpupool_page, dev), head = offsetof(struct gpupool_device_stats, uuid);
	size_t slot = offsetof(struct gpupool_device_stats, unpooled_bytes) - GPUPOOL_UUID_LEN;
	uint32_t version = 2, size = (uint32_t)gp_statpage_size_of(2);
	memcpy(out, pg, hdr);
	memcpy(out + offsetof(struct gpupool_page, version), &version, sizeof version);
	memcpy(out + offsetof(struct gpupool_page, size), &size, sizeof size);
	for (int i = 0; i < GPUPOOL_MAX_DEVICES; i++) { /* the slot less its uuid */
		memcpy(out + hdr + (size_t)i * slot, &pg->dev[i], head);
		memcpy(out + hdr + (size_t)i * slot + head, (const char *)&pg->dev[i] + head + GPUPOOL_UUID_LEN,
		       slot - head);
	}
	return size;
}

static int put_both(const char *dir, const char *name, const struct gpupool_page *pg)
{
	static unsigned char v2[sizeof(struct gpupool_page)];
	char v2name[64];
	snprintf(v2name, sizeof v2name, "v2_%s", name);
	return put(dir, name, pg, sizeof *pg) | put(dir, v2name, v2, to_v2(pg, v2));
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: seeds_statpage DIR\n");
		return 2;
	}
	static struct gpupool_page pg, odd, huge, mixed;
	static struct gp_test_writer w;
	gp_statpage_init(&pg);
	pg.pid = GP_FUZZ_STATPAGE_PID;
	pg.start_time_ns = 1700000000ull * 1000000000ull; /* fixed: the seeds do not change */
	memset(pg.comm, 0, sizeof pg.comm);
	memcpy(pg.comm, "seed_writer", 12);
	if (gp_test_writer_init(&w, &pg, 7) != 0)
		return 1;
	for (int i = 0; i < 500; i++)
		gp_test_writer_step(&w, &pg);
	odd = pg;
	for (uint32_t d = 0; d < odd.ndevices; d++)
		gp_stats_begin(&odd.dev[d]);
	huge = pg;
	memcpy(huge.comm, "\"q\\\n\xff<x>\t", 10);
	huge.start_time_ns = huge.release_request = huge.release_done = UINT64_MAX;
	for (int d = 0; d < GPUPOOL_MAX_DEVICES; d++) {
		struct gpupool_device_stats *s = &huge.dev[d];
		uint64_t seq = s->seq;
		memset(s, 0xff, sizeof *s);
		s->seq = seq & ~1ull;
		s->device = d ? INT32_MIN + d : INT32_MAX;
		s->active = 1;
	}
	huge.ndevices = GPUPOOL_MAX_DEVICES;
	mixed = pg;
	mixed.dev[0].allocs = INT64_MAX;
	mixed.dev[0].frees = 0;
	mixed.dev[0].segment_allocs = UINT64_MAX;
	mixed.dev[0].segment_frees = 0;
	mixed.dev[0].hits = UINT64_MAX;
	mixed.dev[0].misses = 2;
	/* each layout's header in the other layout's size */
	static unsigned char v2[sizeof(struct gpupool_page)];
	static struct gpupool_page v2_header;
	size_t v2len = to_v2(&pg, v2);
	memcpy(&v2_header, v2, offsetof(struct gpupool_page, dev));
	return put_both(argv[1], "valid", &pg) | put(argv[1], "truncated", &pg, sizeof pg - 100) |
	       put(argv[1], "v2_truncated", v2, v2len - 100) | put_both(argv[1], "odd_counters", &odd) |
	       put_both(argv[1], "huge_counters", &huge) | put_both(argv[1], "mixed_extremes", &mixed) |
	       put(argv[1], "v3_header_v2_size", &pg, v2len) | put(argv[1], "v2_header_v3_size", &v2_header, sizeof pg);
}
