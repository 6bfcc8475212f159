/* Writes the seed corpus of the statistics-page harness into the directory given
 * (tests/fuzz/corpus/statpage): a page written by the pool through the test writer, the
 * same truncated, with every slot's counter odd, with every counter at its largest, and
 * with counters whose derived figures (calls saved, hit rate) overflow naive arithmetic.
 * Rerun when struct gpupool_page changes. Test code only. */
#include <errno.h>
#include <fcntl.h>
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
	return put(argv[1], "valid", &pg, sizeof pg) | put(argv[1], "truncated", &pg, sizeof pg - 100) |
	       put(argv[1], "odd_counters", &odd, sizeof odd) | put(argv[1], "huge_counters", &huge, sizeof huge) |
	       put(argv[1], "mixed_extremes", &mixed, sizeof mixed);
}
