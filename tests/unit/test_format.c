/* Tests of the formatter (format.h: src/stats/format*.c) on synthetic pages: the table, the
 * detail view, the exit report, JSON read back by python3's json module, and Prometheus text
 * parsed back line by line against the exposition grammar with every value compared to the
 * page. */
#include <errno.h>
#include <regex.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "format.h"
#include "statpage.h"

struct field {
	const char *name;
	bool bytes, gauge;
	size_t off, peak_off;
	bool ns;
};
#define T_GAUGE_(n, u, h) {#n, #u[0] == 'b', true, offsetof(struct gpupool_device_stats, n), \
		offsetof(struct gpupool_device_stats, n##_peak), #u[0] == 'n'},
#define T_COUNTER_(n, u, h) {#n, #u[0] == 'b', false, offsetof(struct gpupool_device_stats, n), 0, #u[0] == 'n'},
static const struct field fields[] = {GPUPOOL_GAUGES(T_GAUGE_) GPUPOOL_COUNTERS(T_COUNTER_)};
#define NFIELDS (sizeof fields / sizeof fields[0])

static uint64_t get(const struct gpupool_device_stats *s, size_t off)
{
	uint64_t v;
	memcpy(&v, (const char *)s + off, sizeof v);
	return v;
}

static void set(struct gpupool_device_stats *s, size_t off, uint64_t v) { memcpy((char *)s + off, &v, sizeof v); }

static struct gpupool_page pages[2];
static struct gp_format_proc procs[2];
static char out[1 << 20];
/* what a reader left out, for the listing views */
static const struct gp_format_skip skips[] = {{"invalid", 2}, {"foreign", 3}, {"limit", 0}};
#define NSKIPS (sizeof skips / sizeof skips[0])

/* Two processes: pid 4242 "train" with devices 0 and 3 (distinct values in every field),
 * pid 77 with an awkward comm and one inconsistent slot; pid 77 is stale. Device 0 of each
 * has a limit and a uuid (UUID0, and the same but for its last byte), device 3 neither. */
static const unsigned char UUID0[GPUPOOL_UUID_LEN] = {0x60, 0x4a, 0xc7, 0x6c, 0xd9, 0xcf, 0xfe, 0xf3,
						      0x62, 0xe9, 0xd9, 0x20, 0x44, 0xab, 0x6e, 0x52};
#define UUID0_TEXT "GPU-604ac76c-d9cf-fef3-62e9-d92044ab6e52"
#define UUID77_TEXT "GPU-604ac76c-d9cf-fef3-62e9-d92044ab6e4d"
static int setup(void **state)
{
	(void)state;
	memset(pages, 0, sizeof pages);
	for (int p = 0; p < 2; p++) {
		gp_statpage_init(&pages[p]);
		pages[p].pid = p ? 77 : 4242;
		struct gpupool_device_stats *s0 = gp_statpage_slot(&pages[p], 0);
		struct gpupool_device_stats *s1 = gp_statpage_slot(&pages[p], 3);
		assert_non_null(s0);
		assert_non_null(s1);
		for (size_t i = 0; i < NFIELDS; i++) {
			for (int d = 0; d < 2; d++) {
				struct gpupool_device_stats *s = d ? s1 : s0;
				uint64_t v = (uint64_t)(p * 1000000 + d * 100000 + (int)i * 100 + 1);
				if (fields[i].bytes)
					v <<= 20;
				set(s, fields[i].off, v);
				if (fields[i].gauge)
					set(s, fields[i].peak_off, v * 2);
			}
		}
		s0->limit_bytes = 40ull << 30;
		/* the driver's look at the devices: 80 GiB, a different free and time per process */
		for (int d = 0; d < 2; d++) {
			struct gpupool_device_stats *s = d ? s1 : s0;
			s->device_total_bytes = 80ull << 30;
			s->device_free_bytes = (uint64_t)(10 + p + d) << 30;
			s->device_seen_ns = 1000000000ull * (uint64_t)(1000 + p);
		}
		unsigned char u[GPUPOOL_UUID_LEN];
		memcpy(u, UUID0, sizeof u);
		if (p)
			u[GPUPOOL_UUID_LEN - 1] = 77;
		assert_int_equal(gp_statpage_set_uuid(&pages[p], 0, u), 0);
	}
	/* reserved 1.5 GiB on pid 4242 device 0 for the table */
	pages[0].dev[0].reserved_bytes = 3ull << 29;
	memcpy(pages[0].comm, "train", 6);
	memcpy(pages[1].comm, "we\"ird\\x\n\xff", 11);
	/* what a reader knows beside the pages: a user by name, another by number */
	procs[0] = (struct gp_format_proc){.page = &pages[0], .uid_known = true, .uid = 1000, .user = "alice"};
	procs[1] = (struct gp_format_proc){.page = &pages[1], .inconsistent = 1u << 1, .uid_known = true, .uid = 1001};
	return 0;
}

static void test_bytes(void **state)
{
	(void)state;
	char b[16];
	assert_string_equal(gp_format_bytes(b, sizeof b, 0), "0 B");
	assert_string_equal(gp_format_bytes(b, sizeof b, 1023), "1023 B");
	assert_string_equal(gp_format_bytes(b, sizeof b, 1024), "1.0 KiB");
	assert_string_equal(gp_format_bytes(b, sizeof b, 3ull << 29), "1.5 GiB");
	assert_string_equal(gp_format_bytes(b, sizeof b, (1ull << 30) - 1), "1.0 GiB");
	assert_string_equal(gp_format_bytes(b, sizeof b, UINT64_MAX), "16.0 EiB");
}

/* nvidia-smi's form, every byte value; all zero is "not known" */
static void test_uuid(void **state)
{
	(void)state;
	struct gpupool_device_stats s;
	char buf[GP_FORMAT_UUID_LEN];
	memset(&s, 0, sizeof s);
	assert_string_equal(gp_format_uuid(buf, &s), "");
	memcpy(s.uuid, UUID0, sizeof s.uuid);
	assert_string_equal(gp_format_uuid(buf, &s), UUID0_TEXT);
	memset(s.uuid, 0xff, sizeof s.uuid);
	assert_string_equal(gp_format_uuid(buf, &s), "GPU-ffffffff-ffff-ffff-ffff-ffffffffffff");
	memset(s.uuid, 0, sizeof s.uuid);
	s.uuid[GPUPOOL_UUID_LEN - 1] = 1;
	assert_string_equal(gp_format_uuid(buf, &s), "GPU-00000000-0000-0000-0000-000000000001");
	assert_int_equal(strlen(buf) + 1, GP_FORMAT_UUID_LEN);
}

static void test_writer_targets(void **state)
{
	(void)state;
	struct gp_format_out o;
	char small[10];
	gp_format_to_buf(&o, small, sizeof small);
	gp_format_printf(&o, "%s", "0123456789abc");
	assert_int_equal(gp_format_flush(&o), -EIO);
	assert_string_equal(small, "012345678");
	/* more than the staging buffer, through a pipe with write(2) */
	int fds[2];
	assert_int_equal(pipe(fds), 0);
	gp_format_to_fd(&o, fds[1]);
	for (int i = 0; i < 1000; i++)
		gp_format_printf(&o, "%09d\n", i);
	assert_int_equal(gp_format_flush(&o), 0);
	close(fds[1]);
	char *buf = malloc(20000);
	size_t got = 0;
	ssize_t r;
	while ((r = read(fds[0], buf + got, 20000 - got)) > 0)
		got += (size_t)r;
	close(fds[0]);
	assert_int_equal(got, 10000);
	assert_memory_equal(buf + 9990, "000000999\n", 10);
	free(buf);
}

static const char *render(void (*fn)(struct gp_format_out *, const struct gp_format_proc *, size_t), size_t n)
{
	struct gp_format_out o;
	gp_format_to_buf(&o, out, sizeof out);
	fn(&o, procs, n);
	assert_int_equal(gp_format_flush(&o), 0);
	return out;
}

static void prometheus(struct gp_format_out *o, const struct gp_format_proc *p, size_t n)
{
	gp_format_prometheus(o, p, n, skips, NSKIPS, "1.2.3-test", false);
}

static void openmetrics(struct gp_format_out *o, const struct gp_format_proc *p, size_t n)
{
	gp_format_prometheus(o, p, n, skips, NSKIPS, "1.2.3-test", true);
}

static void test_table(void **state)
{
	(void)state;
	procs[1].stale = true;
	const char *t = render(gp_format_table, 2);
	procs[1].stale = false;
	assert_non_null(strstr(t, "GPU     PID USER     COMMAND         DEV       HELD       USED       IDLE "));
	/* the user by name, or by number; HELD is reserved + unpooled (1.5 GiB + 1001 MiB) */
	assert_non_null(strstr(t, "\n  0    4242 alice    train             0    2.5 GiB  101.0 MiB "));
	assert_non_null(strstr(t, "    4242 alice    train             3 "));
	assert_non_null(strstr(t, "      77 1001     we\"ird\\x??        0 ")); /* control and high bytes as '?' */
	assert_non_null(strstr(t, "inconsistent (writer died mid-update?)"));
	assert_non_null(strstr(t, " gone\n"));
	assert_non_null(strstr(t, "1 process gone without removing its page"));
	assert_non_null(strstr(t, " SEGS "));
	/* some process waits: the column, bytes (and the wait's age where the view has a clock) */
	assert_non_null(strstr(t, "        WAITING "));
	/* a limit on device 0 of pid 4242: 1.5 GiB reserved and 1001 MiB unpooled of 40 GiB */
	assert_non_null(strstr(t, "   40.0 GiB   6.2 "));
	assert_non_null(strstr(t, " RESERVED   UNPOOLED "));
	assert_non_null(strstr(t, " 1001.0 MiB "));
	int lines = 0;
	for (const char *p = t; *p; p++)
		lines += *p == '\n';
	assert_int_equal(lines, 6); /* header + 2 processes x 2 devices + the gone line */
	/* GPU 0 (the UUID pid 4242's device 0 gives) first, the rows without a GPU after */
	assert_true(strstr(t, "\n  0    4242") < strstr(t, "\n  -    4242"));

	/* sorted with room: by GPU, then memory held, largest first; a wait's age from the clock */
	static struct gp_format_row room[16];
	struct gp_format_view v = {.now_ns = (5000ull + 42) * 1000000000ull, .scratch = room, .scratch_cap = 16};
	pages[0].dev[0].wait_started_ns = 5000ull * 1000000000ull;
	procs[1].stale = true; /* its GPU has no line: the rows of no GPU are 4242's device 3 and 77's */
	struct gp_format_out o;
	gp_format_to_buf(&o, out, sizeof out);
	gp_format_table_view(&o, procs, 2, &v);
	assert_int_equal(gp_format_flush(&o), 0);
	pages[0].dev[0].wait_started_ns = 0;
	assert_true(strstr(out, "\n  -      77") < strstr(out, "\n  -    4242")); /* 1.9 TiB before 196.5 GiB */
	assert_true(strstr(out, "\n  0    4242") < strstr(out, "\n  -      77"));
	assert_non_null(strstr(out, "  1.6 GiB 42 s "));
	/* too little room: page order within each GPU, every row still there */
	v.scratch_cap = 2;
	gp_format_to_buf(&o, out, sizeof out);
	gp_format_table_view(&o, procs, 2, &v);
	assert_int_equal(gp_format_flush(&o), 0);
	assert_true(strstr(out, "\n  -    4242") < strstr(out, "\n  -      77"));
	/* colour on: the head bold, a waiting row yellow, a gone one dim; escape codes never cut */
	v.scratch_cap = 16;
	v.color = true;
	v.width = 60;
	v.cut = true;
	gp_format_to_buf(&o, out, sizeof out);
	gp_format_table_view(&o, procs, 2, &v);
	assert_int_equal(gp_format_flush(&o), 0);
	assert_memory_equal(out, "\033[1mGPU ", 8);
	assert_non_null(strstr(out, "\n\033[33m  0    4242 alice"));
	for (const char *l = out; *l; l = strchr(l, '\n') + 1) {
		const char *e = strchr(l, '\n');
		assert_non_null(e);
		if (strncmp(l, "\033[", 2) == 0) /* a coloured line ends with the reset */
			assert_memory_equal(e - 4, "\033[0m", 4);
	}
	/* no process at all: the one line */
	gp_format_to_buf(&o, out, sizeof out);
	gp_format_none(&o);
	assert_int_equal(gp_format_flush(&o), 0);
	assert_string_equal(out, "no gpupool processes\n");
	/* the legend says what the main columns mean, in the width */
	v.width = 60;
	gp_format_to_buf(&o, out, sizeof out);
	gp_format_legend(&o, &v);
	assert_int_equal(gp_format_flush(&o), 0);
	assert_non_null(strstr(out, "HELD: taken from the GPU"));
	procs[1].stale = false;
}

/* Each width gives rows no wider than it, down to the columns that always stay; 0 gives all. */
static void test_table_fit(void **state)
{
	(void)state;
	static const unsigned widths[] = {0, 200, 186, 185, 150, 120, 100, 80, 79, 60, 40, 10};
	for (size_t k = 0; k < sizeof widths / sizeof widths[0]; k++) {
		struct gp_format_out o;
		gp_format_to_buf(&o, out, sizeof out);
		gp_format_table_fit(&o, procs, 1, widths[k]);
		assert_int_equal(gp_format_flush(&o), 0);
		unsigned longest = 0, cur = 0;
		for (const char *p = out; *p; p++) {
			cur = *p == '\n' ? 0 : cur + 1;
			longest = cur > longest ? cur : longest;
		}
		if (widths[k] == 0 || widths[k] >= 186) {
			assert_non_null(strstr(out, "LARGEST"));
			assert_int_equal(longest, 186);
		} else if (widths[k] >= 60) {
			assert_true(longest <= widths[k]);
			assert_non_null(strstr(out, "HELD"));
		}
		if (widths[k] == 80) { /* what an 80-column terminal shows while a process waits */
			assert_non_null(strstr(out, "GPU     PID USER     COMMAND               HELD       IDLE        WAITING  STATE\n"));
			assert_null(strstr(out, "LARGEST"));
		}
		assert_non_null(strstr(out, "GPU     PID USER     COMMAND "));
		assert_non_null(strstr(out, "STATE"));
	}
	/* no process waits: no WAITING column, and 80 columns have room for the rest of the main ones */
	uint64_t w0 = pages[0].dev[0].waiting_bytes, w3 = pages[0].dev[1].waiting_bytes;
	pages[0].dev[0].waiting_bytes = pages[0].dev[1].waiting_bytes = 0;
	struct gp_format_out o;
	gp_format_to_buf(&o, out, sizeof out);
	gp_format_table_fit(&o, procs, 1, 80);
	assert_int_equal(gp_format_flush(&o), 0);
	assert_non_null(strstr(out, "GPU     PID USER     COMMAND         DEV       HELD       USED       IDLE  STATE\n"));
	pages[0].dev[0].waiting_bytes = w0;
	pages[0].dev[1].waiting_bytes = w3;
	/* no limit anywhere: no LIMIT column */
	uint64_t lim = pages[0].dev[0].limit_bytes;
	pages[0].dev[0].limit_bytes = 0;
	const char *t = render(gp_format_table, 1);
	pages[0].dev[0].limit_bytes = lim;
	assert_null(strstr(t, "LIMIT"));
	/* no memory outside the pools, now or before: no UNPOOLED column; a peak alone keeps it */
	for (int d = 0; d < 2; d++)
		pages[0].dev[d].unpooled_bytes = pages[0].dev[d].unpooled_bytes_peak = 0;
	t = render(gp_format_table, 1);
	assert_null(strstr(t, "UNPOOLED"));
	pages[0].dev[1].unpooled_bytes_peak = 1;
	t = render(gp_format_table, 1);
	assert_non_null(strstr(t, "UNPOOLED"));
}


static void test_detail_and_report(void **state)
{
	(void)state;
	struct gp_format_out o;
	pages[0].start_time_ns = 0; /* not known */
	gp_format_to_buf(&o, out, sizeof out);
	gp_format_detail(&o, &procs[0]);
	assert_int_equal(gp_format_flush(&o), 0);
	for (size_t i = 0; i < NFIELDS; i++)
		assert_non_null(strstr(out, fields[i].name));
	assert_non_null(strstr(out, "\ndevice 0  limit 42949672960 (40.0 GiB)  " UUID0_TEXT "\n"));
	assert_non_null(strstr(out, "\ndevice 3  limit none\n"));
	/* dates in local time (TZ=UTC here), no age without a clock */
	assert_non_null(strstr(out, "pid 4242  command train  user alice  live  devices 2  started unknown\n"));
	assert_non_null(strstr(out, "\n  GPU memory 80.0 GiB, free 10.0 GiB (the driver's, at 1970-01-01 00:16:40)\n"));
	assert_non_null(strstr(out, "\n  GPU memory 80.0 GiB, free 11.0 GiB (the driver's, at 1970-01-01 00:16:40)\n"));
	assert_non_null(strstr(out, "\n  waiting for "));
	/* with the clock: ages; a name where the page has one */
	struct gp_format_view v = {.now_ns = 1003ull * 1000000000ull};
	pages[0].start_time_ns = 940ull * 1000000000ull;
	memcpy(pages[0].dev[0].device_name, "NVIDIA H100 80GB HBM3", 22);
	gp_format_to_buf(&o, out, sizeof out);
	gp_format_detail_view(&o, &procs[0], &v);
	assert_int_equal(gp_format_flush(&o), 0);
	assert_non_null(strstr(out, "started 1970-01-01 00:15:40 (63 s ago)\n"));
	assert_non_null(strstr(out, "\ndevice 0  NVIDIA H100 80GB HBM3  limit 42949672960 (40.0 GiB)  " UUID0_TEXT "\n"));
	assert_non_null(strstr(out, "(the driver's, at 1970-01-01 00:16:40, 3 s ago)\n"));
	/* another user's process, from its answer: the figures it gave, no counter */
	procs[0].remote = true;
	gp_format_to_buf(&o, out, sizeof out);
	gp_format_detail_view(&o, &procs[0], &v);
	assert_int_equal(gp_format_flush(&o), 0);
	procs[0].remote = false;
	assert_non_null(strstr(out, "another user's process: its answer on the channel"));
	assert_non_null(strstr(out, "\n  reserved_bytes "));
	assert_null(strstr(out, "\n  requested_bytes "));
	assert_null(strstr(out, "\n  allocs "));
	pages[0].start_time_ns = 0;
	memset(pages[0].dev[0].device_name, 0, sizeof pages[0].dev[0].device_name);

	const struct gpupool_device_stats *s = &pages[0].dev[0];
	char want[128];
	gp_format_to_buf(&o, out, sizeof out);
	gp_format_report(&o, &pages[0]);
	assert_int_equal(gp_format_flush(&o), 0);
	snprintf(want, sizeof want, "driver calls saved %lld,",
		 (long long)(s->allocs + s->frees) - (long long)(s->segment_allocs + s->segment_frees));
	assert_non_null(strstr(out, want));
	assert_non_null(strstr(out, "report for pid 4242 (train)"));
	assert_non_null(strstr(out, "device 3"));
	snprintf(want, sizeof want, "%14llu %14llu", (unsigned long long)s->segment_allocs,
		 (unsigned long long)s->segment_frees);
	assert_non_null(strstr(out, want));

	/* the report through an fd, as at exit */
	FILE *tmp = tmpfile();
	gp_format_to_fd(&o, fileno(tmp));
	gp_format_report(&o, &pages[1]);
	assert_int_equal(gp_format_flush(&o), 0);
	assert_true(lseek(fileno(tmp), 0, SEEK_END) > 200);
	fclose(tmp);
}

static const struct field *find_field(const char *name, bool *peak)
{
	for (size_t i = 0; i < NFIELDS; i++) {
		size_t l = strlen(fields[i].name);
		*peak = false;
		if (strcmp(fields[i].name, name) == 0)
			return &fields[i];
		if (fields[i].gauge && strncmp(fields[i].name, name, l) == 0 && strcmp(name + l, "_peak") == 0) {
			*peak = true;
			return &fields[i];
		}
	}
	return NULL;
}

/* python3 reads the JSON back and prints "pid device key value" for every number */
static void test_json(void **state)
{
	(void)state;
	char path[] = "/tmp/gp_test_json_XXXXXX";
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	struct gp_format_out o;
	gp_format_to_fd(&o, fd);
	gp_format_json_listing(&o, procs, 2, skips, NSKIPS);
	assert_int_equal(gp_format_flush(&o), 0);
	close(fd);
	char cmd[1024];
	snprintf(cmd, sizeof cmd,
		 "python3 -c 'import json,sys\n"
		 "d=json.load(open(sys.argv[1]))\n"
		 "assert d[\"version\"]==2\n"
		 "assert d[\"skipped_pages\"]==5 and d[\"skipped\"]=={\"invalid\":2,\"foreign\":3,\"limit\":0}\n"
		 "for p in d[\"processes\"]:\n"
		 "  assert (p[\"uid\"], p[\"user\"], p[\"source\"]) in ((1000, \"alice\", \"page\"), (1001, None, \"page\"))\n"
		 "  print(\"P\", p[\"pid\"], json.dumps(p[\"comm\"]), p[\"stale\"], len(p[\"devices\"]))\n"
		 "  for v in p[\"devices\"]:\n"
		 "    for k,x in v.items():\n"
		 "      if type(x) is int: print(p[\"pid\"], v[\"device\"], k, x)\n"
		 "      else: print(\"B\", p[\"pid\"], v[\"device\"], k, x)\n"
		 "for g in d[\"gpus\"]:\n"
		 "  assert g[\"index\"] is None and g[\"name\"] is None\n"
		 "  print(\"G\", g[\"uuid\"], g[\"total_bytes\"], g[\"free_bytes\"], g[\"seen_ns\"], g[\"held_bytes\"],"
		 "        g[\"reclaimable_bytes\"], g[\"processes\"], len(g), g[\"waiting_bytes\"])\n"
		 "' %s",
		 path);
	FILE *py = popen(cmd, "r");
	assert_non_null(py);
	char line[512];
	int numbers = 0, procs_seen = 0, inconsistent_seen = 0, uuids_seen = 0, gpus_seen = 0;
	struct gp_format_gpu gpus[4];
	size_t ngpus = gp_format_gpus(procs, 2, gpus, 4, NULL);
	assert_int_equal(ngpus, 2); /* each process's device 0: their UUIDs differ */
	while (fgets(line, sizeof line, py)) {
		char key[128], word[64];
		int pid, dev;
		unsigned long long v;
		if (line[0] == 'G') {
			unsigned long long tot, fr, seen, held, rec, wait;
			unsigned np, nkeys;
			assert_int_equal(sscanf(line, "G %63s %llu %llu %llu %llu %llu %u %u %llu", word, &tot, &fr, &seen,
						&held, &rec, &np, &nkeys, &wait),
					 9);
			const struct gp_format_gpu *g = &gpus[gpus_seen++];
			char uuid[GP_FORMAT_UUID_LEN];
			assert_string_equal(word, gp_format_gpu_uuid(uuid, g));
			assert_int_equal(tot, g->total_bytes);
			assert_int_equal(fr, g->free_bytes);
			assert_int_equal(seen, g->seen_ns);
			assert_int_equal(held, g->held_bytes);
			assert_int_equal(rec, g->reclaimable_bytes);
			assert_int_equal(np, g->processes);
			assert_int_equal(wait, g->waiting_bytes);
			assert_int_equal(nkeys, 11);
			continue;
		}
		if (line[0] == 'P') {
			procs_seen++;
			assert_true(strstr(line, "4242 \"train\" False 2") || strstr(line, "77 \"we\\\"ird\\\\x\\n?\" False 2"));
			continue;
		}
		if (line[0] == 'B') {
			int k = sscanf(line, "B %d %d %127s %63s", &pid, &dev, key, word);
			if (strcmp(key, "uuid") == 0) { /* known on device 0 only: null where not */
				assert_int_equal(k, 4);
				assert_string_equal(word, dev == 0 ? (pid == 4242 ? UUID0_TEXT : UUID77_TEXT) : "None");
				uuids_seen++;
				continue;
			}
			if (strcmp(key, "device_name") == 0) { /* no page has one: null */
				assert_string_equal(word, "None");
				continue;
			}
			assert_int_equal(k, 4);
			assert_string_equal(key, "consistent");
			inconsistent_seen += strcmp(word, "False") == 0;
			continue;
		}
		assert_int_equal(sscanf(line, "%d %d %127s %llu", &pid, &dev, key, &v), 4);
		const struct gpupool_page *pg = pid == 4242 ? &pages[0] : &pages[1];
		const struct gpupool_device_stats *s = dev == 0 ? &pg->dev[0] : &pg->dev[1];
		bool peak;
		const struct field *f = find_field(key, &peak);
		if (strcmp(key, "device") == 0)
			assert_int_equal(v, (unsigned long long)s->device);
		else if (strcmp(key, "limit_bytes") == 0)
			assert_int_equal(v, s->limit_bytes);
		else if (strcmp(key, "device_total_bytes") == 0)
			assert_int_equal(v, s->device_total_bytes);
		else if (strcmp(key, "device_free_bytes") == 0)
			assert_int_equal(v, s->device_free_bytes);
		else if (strcmp(key, "device_seen_ns") == 0)
			assert_int_equal(v, s->device_seen_ns);
		else if (strcmp(key, "floor_bytes") == 0)
			assert_int_equal(v, s->floor_bytes);
		else if (strcmp(key, "wait_started_ns") == 0)
			assert_int_equal(v, s->wait_started_ns);
		else {
			assert_non_null(f);
			assert_int_equal(v, get(s, peak ? f->peak_off : f->off));
		}
		numbers++;
	}
	assert_int_equal(pclose(py), 0);
	unlink(path);
	/* device, limit_bytes, floor_bytes, wait_started_ns, device_total_bytes, device_free_bytes, device_seen_ns */
	size_t per_dev = 7;
	for (size_t i = 0; i < NFIELDS; i++)
		per_dev += fields[i].gauge ? 2 : 1;
	assert_int_equal(procs_seen, 2);
	assert_int_equal(gpus_seen, 2);
	assert_int_equal(inconsistent_seen, 1);
	assert_int_equal(uuids_seen, 3); /* every consistent slot has one, null when not known */
	assert_int_equal(numbers, (int)(3 * per_dev + 1)); /* the inconsistent slot: device only */

	/* one process's document (the exit report) has no reader, nothing skipped */
	gp_format_to_buf(&o, out, sizeof out);
	gp_format_json(&o, procs, 1);
	assert_int_equal(gp_format_flush(&o), 0);
	assert_null(strstr(out, "skipped"));
	assert_null(strstr(out, "\"gpus\""));
	assert_null(strstr(out, "\"source\"")); /* the reader's facts are the listing's */
	assert_string_equal(out + strlen(out) - 4, "\n]}\n");
	/* a remote process (its answer on the channel): null for what the answer does not carry */
	procs[0].remote = true;
	gp_format_to_buf(&o, out, sizeof out);
	gp_format_json_listing(&o, procs, 1, skips, NSKIPS);
	assert_int_equal(gp_format_flush(&o), 0);
	procs[0].remote = false;
	assert_non_null(strstr(out, "\"source\":\"channel\""));
	assert_non_null(strstr(out, "\"release_request\":null"));
	assert_non_null(strstr(out, "\"allocs\":null"));
	assert_non_null(strstr(out, "\"reserved_bytes_peak\":null"));
	assert_null(strstr(out, "\"reserved_bytes\":null"));
	/* a GPU whose total the driver has not given: null, not 0 */
	uint64_t t0 = pages[0].dev[0].device_total_bytes;
	pages[0].dev[0].device_total_bytes = 0;
	gp_format_to_buf(&o, out, sizeof out);
	gp_format_json_listing(&o, procs, 1, skips, NSKIPS);
	assert_int_equal(gp_format_flush(&o), 0);
	pages[0].dev[0].device_total_bytes = t0;
	assert_non_null(strstr(out, "\"total_bytes\":null,\"free_bytes\":null,\"seen_ns\":null"));
	assert_non_null(strstr(out, "\"device_total_bytes\":null"));
}

static bool ends_with(const char *s, const char *suf)
{
	size_t a = strlen(s), b = strlen(suf);
	return a >= b && strcmp(s + a - b, suf) == 0;
}

/* A field's sample name as docs/stats.md lists them: the unit last, _total on counters,
 * the summed requested bytes renamed off the live gauge's family. */
static void prom_sample_name(char *buf, size_t cap, const struct field *f, bool peak)
{
	static const struct {
		const char *field, *name;
	} names[] = {
		{"requested_bytes_total", "alloc_requested_bytes"},
		{"largest_free_block", "largest_free_block_bytes"},
		{"reclaim_wait_ns", "reclaim_wait_seconds"},
		{"wait_ns", "wait_seconds"},
	};
	char stem[64];
	snprintf(stem, sizeof stem, "%s", f->name);
	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
		if (strcmp(f->name, names[i].field) == 0)
			snprintf(stem, sizeof stem, "%s", names[i].name);
	if (peak && ends_with(stem, "_bytes"))
		snprintf(buf, cap, "gpupool_%.*s_peak_bytes", (int)strlen(stem) - 6, stem);
	else
		snprintf(buf, cap, "gpupool_%s%s%s", stem, peak ? "_peak" : "", f->gauge ? "" : "_total");
}

/* OpenMetrics: counter families without _total, UNIT lines whose unit ends the family name,
 * the info family, no name claimed twice (a counter claims <family>, _total and _created),
 * "# EOF" last; the samples are those of the 0.0.4 text. */
static void test_openmetrics(void **state)
{
	(void)state;
	char *text = strdup(render(openmetrics, 2));
	const char *plain = render(prometheus, 2);
	static char claimed[512][96];
	int nclaimed = 0, nunit = 0;
	size_t len = strlen(text);
	assert_true(len > 6 && strcmp(text + len - 6, "# EOF\n") == 0);
	char *save = NULL;
	for (char *ln = strtok_r(text, "\n", &save); ln; ln = strtok_r(NULL, "\n", &save)) {
		char name[96], what[16];
		if (sscanf(ln, "# TYPE %95s %15s", name, what) == 2) {
			static const char *const suffixes[] = {"", "_total", "_created", "_info"};
			bool counter = strcmp(what, "counter") == 0, info = strcmp(what, "info") == 0;
			assert_true(counter || info || strcmp(what, "gauge") == 0);
			assert_false(ends_with(name, "_total"));
			for (size_t k = 0; k < 4; k++) {
				if (k == 1 || k == 2 ? !counter : k == 3 ? !info : false)
					continue;
				assert_true(nclaimed < 512);
				snprintf(claimed[nclaimed], 96, "%s%s", name, suffixes[k]);
				for (int i = 0; i < nclaimed; i++)
					if (strcmp(claimed[i], claimed[nclaimed]) == 0)
						fail_msg("name claimed twice: %s", claimed[i]);
				nclaimed++;
			}
		} else if (sscanf(ln, "# UNIT %95s %15s", name, what) == 2) {
			char suffix[24];
			snprintf(suffix, sizeof suffix, "_%s", what);
			assert_true(ends_with(name, suffix));
			nunit++;
		} else if (ln[0] != '#') {
			/* every sample line is one of the 0.0.4 text's */
			char line[512];
			snprintf(line, sizeof line, "\n%s\n", ln);
			assert_non_null(strstr(plain, line));
		}
	}
	assert_true(nunit > 5);
	free(text);
	text = strdup(render(openmetrics, 2));
	assert_non_null(strstr(text, "# TYPE gpupool_build info\ngpupool_build_info{version=\"1.2.3-test\"} 1\n"));
	assert_non_null(strstr(text, "# TYPE gpupool_allocs counter\n"));
	assert_non_null(strstr(text, "# TYPE gpupool_alloc_requested_bytes counter\n# UNIT gpupool_alloc_requested_bytes bytes\n"));
	assert_non_null(strstr(text, "# UNIT gpupool_process_start_time_seconds seconds\n"));
	free(text);
}

/* The exposition grammar for our samples, one HELP and TYPE per family before its samples,
 * and every value equal to the page. */
static void test_prometheus(void **state)
{
	(void)state;
	const char *text = render(prometheus, 2);
	regex_t sample, help, type;
	assert_int_equal(regcomp(&sample,
				 "^([a-zA-Z_:][a-zA-Z0-9_:]*)"
				 "\\{pid=\"([0-9]+)\",comm=\"(([^\"\\\\\n]|\\\\[\"\\\\n])*)\"(,user=\"alice\")?(,device=\"([0-9]+)\")?"
				 "(,UUID=\"(GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})\")?\\}"
				 " ([0-9]+(\\.[0-9]+)?)$",
				 REG_EXTENDED),
			 0);
	assert_int_equal(regcomp(&help, "^# HELP ([a-zA-Z_:][a-zA-Z0-9_:]*) [^\n]+$", REG_EXTENDED), 0);
	assert_int_equal(regcomp(&type, "^# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) (gauge|counter)$", REG_EXTENDED), 0);
	regex_t gpu_sample;
	assert_int_equal(regcomp(&gpu_sample,
				 "^(gpupool_gpu_[a-z_]+)\\{UUID=\"(GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})\"\\}"
				 " ([0-9]+(\\.[0-9]+)?)$",
				 REG_EXTENDED),
			 0);
	struct gp_format_gpu gpus[4];
	size_t ngpus = gp_format_gpus(procs, 2, gpus, 4, NULL);
	char helped[128][96], typed[128][96], types[128][16];
	int nhelp = 0, ntype = 0, samples = 0, skipped = 0, builds = 0, limits = 0, gpu_samples = 0;
	char *copy = strdup(text), *save = NULL;
	for (char *ln = strtok_r(copy, "\n", &save); ln; ln = strtok_r(NULL, "\n", &save)) {
		regmatch_t m[12];
		if (strncmp(ln, "# HELP ", 7) == 0) {
			assert_int_equal(regexec(&help, ln, 2, m, 0), 0);
			assert_true(nhelp < 128);
			snprintf(helped[nhelp], 96, "%.*s", (int)(m[1].rm_eo - m[1].rm_so), ln + m[1].rm_so);
			for (int i = 0; i < nhelp; i++)
				assert_string_not_equal(helped[i], helped[nhelp]);
			nhelp++;
			continue;
		}
		if (strncmp(ln, "# TYPE ", 7) == 0) {
			assert_int_equal(regexec(&type, ln, 3, m, 0), 0);
			snprintf(typed[ntype], 96, "%.*s", (int)(m[1].rm_eo - m[1].rm_so), ln + m[1].rm_so);
			snprintf(types[ntype], 16, "%.*s", (int)(m[2].rm_eo - m[2].rm_so), ln + m[2].rm_so);
			assert_int_equal(ntype + 1, nhelp);
			assert_string_equal(typed[ntype], helped[ntype]);
			ntype++;
			continue;
		}
		char reason[32];
		unsigned long count;
		if (strcmp(ln, "gpupool_build_info{version=\"1.2.3-test\"} 1") == 0) {
			assert_string_equal(typed[ntype - 1], "gpupool_build_info");
			assert_string_equal(types[ntype - 1], "gauge");
			builds++;
			continue;
		}
		if (sscanf(ln, "gpupool_skipped_pages{reason=\"%31[a-z_]\"} %lu", reason, &count) == 2) {
			assert_string_equal(typed[ntype - 1], "gpupool_skipped_pages");
			assert_string_equal(types[ntype - 1], "gauge");
			assert_string_equal(reason, skips[skipped].reason);
			assert_int_equal(count, skips[skipped].count);
			skipped++;
			continue;
		}
		if (regexec(&gpu_sample, ln, 5, m, 0) == 0) {
			/* a GPU's figure: labelled UUID alone, one of gp_format_gpus's */
			char name[96], uuid[GP_FORMAT_UUID_LEN];
			snprintf(name, sizeof name, "%.*s", (int)(m[1].rm_eo - m[1].rm_so), ln + m[1].rm_so);
			assert_string_equal(name, typed[ntype - 1]);
			assert_string_equal(types[ntype - 1], "gauge");
			const struct gp_format_gpu *g = NULL;
			for (size_t i = 0; i < ngpus && !g; i++)
				if (strncmp(ln + m[2].rm_so, gp_format_gpu_uuid(uuid, &gpus[i]), GP_FORMAT_UUID_LEN - 1) == 0)
					g = &gpus[i];
			assert_non_null(g);
			unsigned long long v = strtoull(ln + m[3].rm_so, NULL, 10);
			if (strcmp(name, "gpupool_gpu_total_bytes") == 0)
				assert_int_equal(v, g->total_bytes);
			else if (strcmp(name, "gpupool_gpu_free_bytes") == 0)
				assert_int_equal(v, g->free_bytes);
			else if (strcmp(name, "gpupool_gpu_seen_timestamp_seconds") == 0)
				assert_int_equal(v, g->seen_ns / 1000000000ull);
			else if (strcmp(name, "gpupool_gpu_held_bytes") == 0)
				assert_int_equal(v, g->held_bytes);
			else if (strcmp(name, "gpupool_gpu_reclaimable_bytes") == 0)
				assert_int_equal(v, g->reclaimable_bytes);
			else if (strcmp(name, "gpupool_gpu_processes") == 0)
				assert_int_equal(v, g->processes);
			else if (strcmp(name, "gpupool_gpu_waiting_bytes") == 0)
				assert_int_equal(v, g->waiting_bytes);
			else if (strcmp(name, "gpupool_gpu_info") == 0) /* no index, no name here: the UUID alone */
				assert_int_equal(v, 1);
			else
				fail_msg("unknown GPU family %s", name);
			gpu_samples++;
			continue;
		}
		if (regexec(&sample, ln, 12, m, 0) != 0)
			fail_msg("not a sample line: %s", ln);
		char name[96];
		snprintf(name, sizeof name, "%.*s", (int)(m[1].rm_eo - m[1].rm_so), ln + m[1].rm_so);
		/* the sample belongs to the family declared last */
		assert_true(ntype > 0);
		assert_string_equal(name, typed[ntype - 1]);
		if (strcmp(types[ntype - 1], "counter") == 0)
			assert_true(ends_with(name, "_total"));
		int pid = atoi(ln + m[2].rm_so);
		assert_true(pid == 4242 || pid == 77);
		assert_true(strncmp(ln + m[3].rm_so, pid == 77 ? "we\\\"ird\\\\x\\n?\"" : "train\"", 6) == 0);
		const struct gpupool_page *pg = pid == 4242 ? &pages[0] : &pages[1];
		unsigned long long v = strtoull(ln + m[10].rm_so, NULL, 10);
		samples++;
		/* the user's name where the reader knows it (pid 4242's), none where not */
		assert_true(pid == 4242 ? m[5].rm_so >= 0 : m[5].rm_so < 0);
		if (m[7].rm_so < 0) {
			assert_string_equal(name, "gpupool_process_start_time_seconds");
			assert_int_equal(v, pg->start_time_ns / 1000000000ull);
			assert_true(m[8].rm_so < 0);
			continue;
		}
		int dev = atoi(ln + m[7].rm_so);
		const struct gpupool_device_stats *s = dev == 0 ? &pg->dev[0] : &pg->dev[1];
		assert_false(pid == 77 && dev == 3); /* inconsistent: left out */
		/* dcgm-exporter's UUID label where the uuid is known (device 0), none elsewhere */
		if (dev == 0) {
			assert_true(m[9].rm_so >= 0);
			assert_memory_equal(ln + m[9].rm_so, pid == 4242 ? UUID0_TEXT : UUID77_TEXT, sizeof UUID0_TEXT - 1);
		} else {
			assert_true(m[8].rm_so < 0);
		}
		if (strcmp(name, "gpupool_limit_bytes") == 0) {
			assert_true(s->limit_bytes > 0); /* no sample for no limit */
			assert_int_equal(v, s->limit_bytes);
			limits++;
			continue;
		}
		/* map back through the names docs/stats.md gives */
		const struct field *f = NULL;
		bool peak = false;
		for (size_t i = 0; i < NFIELDS && !f; i++) {
			for (int pk = 0; pk <= (int)fields[i].gauge && !f; pk++) {
				char want[96];
				prom_sample_name(want, sizeof want, &fields[i], pk);
				if (strcmp(want, name) == 0) {
					f = &fields[i];
					peak = pk;
				}
			}
		}
		if (!f)
			fail_msg("unknown metric %s", name);
		if (f->ns) { /* seconds, to the nanosecond */
			const char *dot = strchr(ln + m[10].rm_so, '.');
			assert_non_null(dot);
			v = v * 1000000000ull + strtoull(dot + 1, NULL, 10);
		}
		assert_int_equal(v, get(s, peak ? f->peak_off : f->off));
	}
	free(copy);
	regfree(&sample);
	regfree(&help);
	regfree(&type);
	regfree(&gpu_sample);
	assert_int_equal(ngpus, 2);
	assert_int_equal(gpu_samples, 8 * 2); /* both GPUs have the driver's figures; and their info */
	size_t families = 4 + 8; /* limit, floor, wait start, start time; the GPUs' */
	for (size_t i = 0; i < NFIELDS; i++)
		families += fields[i].gauge ? 2 : 1;
	assert_int_equal(nhelp, (int)families + 2); /* and skipped pages, build info */
	assert_int_equal(ntype, (int)families + 2);
	/* three consistent slots in every per-device family but the limit (two have one), and
	 * each process's start time */
	assert_int_equal(limits, 2);
	/* floor and wait start: no sample (none on these pages) */
	assert_int_equal(samples, (int)((families - 8 - 3) * 3 - 1 + 2));
	assert_non_null(strstr(text, "# TYPE gpupool_limit_bytes gauge\n"));
	assert_int_equal(skipped, (int)NSKIPS);
	assert_int_equal(builds, 1);
	/* the names docs/stats.md lists */
	assert_non_null(strstr(text, "# TYPE gpupool_allocs_total counter\n"));
	assert_non_null(strstr(text, "# TYPE gpupool_requested_bytes gauge\n"));
	assert_non_null(strstr(text, "# TYPE gpupool_requested_peak_bytes gauge\n"));
	assert_non_null(strstr(text, "# TYPE gpupool_alloc_requested_bytes_total counter\n"));
	assert_non_null(strstr(text, "# TYPE gpupool_released_bytes_total counter\n"));
	assert_non_null(strstr(text, "# TYPE gpupool_largest_free_block_bytes gauge\n"));
	assert_non_null(strstr(text, "# TYPE gpupool_reserved_peak_bytes gauge\n"));
	assert_non_null(strstr(text, "# TYPE gpupool_live_blocks_peak gauge\n"));
	assert_non_null(strstr(text, "# TYPE gpupool_pending_peak_bytes gauge\n"));
	assert_null(strstr(text, "_bytes_peak"));

	/* stale processes are left out */
	procs[1].stale = true;
	text = render(prometheus, 2);
	procs[1].stale = false;
	assert_null(strstr(text, "pid=\"77\""));
}

/* A hostile page may hold any value in any field: every formatter on extreme counters, with
 * the derived figures (driver calls saved, hit rate) exact or saturated, never wrapped
 * (UBSan in the sanitized build catches a signed overflow on the way). */
static void test_extreme_values(void **state)
{
	(void)state;
	static const uint64_t fill[] = {UINT64_MAX, (uint64_t)INT64_MAX, (uint64_t)INT64_MAX + 1, 0};
	static const struct {
		uint64_t allocs, frees, seg_allocs, seg_frees, hits, misses;
		const char *saved, *rate;
	} cases[] = {
		{UINT64_MAX, 0, 0, 0, 0, 0, "18446744073709551615", "-"},
		{UINT64_MAX, UINT64_MAX, 0, 0, UINT64_MAX, UINT64_MAX, "18446744073709551615", "50.0%"},
		{(uint64_t)INT64_MAX, 0, UINT64_MAX, 0, UINT64_MAX, 2, "-9223372036854775808", "100.0%"},
		{0, 0, UINT64_MAX, UINT64_MAX, 1, UINT64_MAX, "-18446744073709551615", "0.0%"},
		{(uint64_t)INT64_MAX + 1, (uint64_t)INT64_MAX + 1, 1, 0, 3, 1, "18446744073709551614", "75.0%"},
	};
	static struct gpupool_page pg;
	struct gp_format_out o;
	char want[128];
	for (size_t f = 0; f < sizeof fill / sizeof fill[0]; f++) {
		for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
			memset(&pg, 0, sizeof pg);
			gp_statpage_init(&pg);
			pg.start_time_ns = fill[f];
			pg.release_request = pg.release_done = fill[f];
			for (int d = 0; d < GPUPOOL_MAX_DEVICES; d++) {
				struct gpupool_device_stats *s = gp_statpage_slot(&pg, d);
				assert_non_null(s);
				s->limit_bytes = fill[f];
				for (size_t i = 0; i < NFIELDS; i++) {
					set(s, fields[i].off, fill[f]);
					if (fields[i].gauge)
						set(s, fields[i].peak_off, fill[f]);
				}
				s->allocs = cases[c].allocs;
				s->frees = cases[c].frees;
				s->segment_allocs = cases[c].seg_allocs;
				s->segment_frees = cases[c].seg_frees;
				s->hits = cases[c].hits;
				s->misses = cases[c].misses;
			}
			struct gp_format_proc p = {.page = &pg, .stale = false, .inconsistent = 0, .rates = NULL};
			gp_format_to_buf(&o, out, sizeof out);
			gp_format_table(&o, &p, 1);
			gp_format_detail(&o, &p);
			gp_format_json(&o, &p, 1);
			gp_format_prometheus(&o, &p, 1, NULL, 0, "0.0.0", false);
			assert_int_equal(gp_format_flush(&o), 0);
			/* the value ends the line, right-aligned in its column */
			const char *line = strstr(out, "\n  driver calls saved ");
			assert_non_null(line);
			snprintf(want, sizeof want, " %s\n", cases[c].saved);
			const char *end = strchr(line + 1, '\n');
			assert_true(end - line + 1 >= (ptrdiff_t)strlen(want));
			assert_memory_equal(end + 1 - strlen(want), want, strlen(want));

			gp_format_to_buf(&o, out, sizeof out);
			gp_format_report(&o, &pg);
			assert_int_equal(gp_format_flush(&o), 0);
			snprintf(want, sizeof want, "driver calls saved %s, hit rate %s,", cases[c].saved,
				 cases[c].rate);
			assert_non_null(strstr(out, want));

		}
	}
}

static unsigned count_lines(const char *t, unsigned *longest)
{
	unsigned lines = 0, cur = 0;
	*longest = 0;
	for (const char *p = t; *p; p++) {
		cur = *p == '\n' ? 0 : cur + 1;
		*longest = cur > *longest ? cur : *longest;
		lines += *p == '\n';
	}
	return lines;
}

/* Rates in the table (ALLOCS/S, BYTES/S) and the PID view: known, not known, not finite. */
static void test_rates(void **state)
{
	(void)state;
	struct gp_format_rate r0[GPUPOOL_MAX_DEVICES] = {{true, 1234.0, 3.0 * (1 << 30)}, {false, 0, 0}};
	struct gp_format_rate r1[GPUPOOL_MAX_DEVICES] = {{true, 0.5, 512.0}, {true, 1.0 / 0.0, 0}};
	procs[0].rates = r0;
	procs[1].rates = r1;
	const char *t = render(gp_format_table, 2);
	assert_non_null(strstr(t, " RESERVED   UNPOOLED ALLOCS/S    BYTES/S "));
	assert_non_null(strstr(t, "     1234    3.0 GiB "));
	assert_non_null(strstr(t, "      0.5      512 B "));
	unsigned dashes = 0;
	for (const char *p = strstr(t, "        -          - "); p; p = strstr(p + 1, "        -          - "))
		dashes++;
	assert_int_equal(dashes, 1); /* device 3 of pid 4242; pid 77's is inconsistent ("?") */
	struct gp_format_out o;
	gp_format_to_buf(&o, out, sizeof out);
	gp_format_detail(&o, &procs[0]);
	assert_int_equal(gp_format_flush(&o), 0);
	assert_non_null(strstr(out, "\n  per second: 1234 allocations, 3.0 GiB asked for\n"));
	assert_non_null(strstr(out, "\n  per second: - (from the next refresh)\n"));
	/* the compact counts */
	static const struct {
		double v;
		const char *text;
	} counts[] = {{0, "0.0"}, {9.94, "9.9"}, {12, "12"}, {9999, "9999"}, {12345, "12.3k"}, {4.1e6, "4.1M"},
		      {1e21, "1000.0E"}};
	for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++) {
		r0[0].allocs_per_s = counts[i].v;
		gp_format_to_buf(&o, out, sizeof out);
		gp_format_detail(&o, &procs[0]);
		assert_int_equal(gp_format_flush(&o), 0);
		char want[96];
		snprintf(want, sizeof want, "per second: %s allocations,", counts[i].text);
		assert_non_null(strstr(out, want));
	}
	/* no rates: no columns */
	procs[0].rates = procs[1].rates = NULL;
	t = render(gp_format_table, 2);
	assert_null(strstr(t, "ALLOCS/S"));
}

/* The views in a terminal's box: at most `rows` lines of at most `width` characters, the
 * key lines kept, the rest counted; with room to spare, the same as without a box. */
static void test_boxes(void **state)
{
	(void)state;
	struct gp_format_rate r0[GPUPOOL_MAX_DEVICES] = {{true, 10, 20}, {true, 30, 40}};
	procs[0].rates = r0;
	static char whole[1 << 16];
	struct gp_format_out o;
	gp_format_to_buf(&o, whole, sizeof whole);
	gp_format_detail(&o, &procs[0]);
	assert_int_equal(gp_format_flush(&o), 0);
	unsigned longest, all = count_lines(whole, &longest);
	assert_true(all > 60);
	gp_format_to_buf(&o, out, sizeof out);
	gp_format_detail_box(&o, &procs[0], 200, all);
	assert_int_equal(gp_format_flush(&o), 0);
	assert_string_equal(out, whole);
	const unsigned sizes[][2] = {{80, 24}, {60, 12}, {40, 7}, {100, all - 1}, {80, 2}, {80, 1}};
	for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
		unsigned w = sizes[k][0], rows = sizes[k][1];
		gp_format_to_buf(&o, out, sizeof out);
		gp_format_detail_box(&o, &procs[0], w, rows);
		assert_int_equal(gp_format_flush(&o), 0);
		unsigned lines = count_lines(out, &longest);
		assert_int_equal(lines, rows);
		assert_true(longest <= w);
		char want[64];
		snprintf(want, sizeof want, "%u row%s left out", all - (rows - 1), all - (rows - 1) == 1 ? "" : "s");
		assert_non_null(strstr(out, w >= 20 ? want : "row"));
		if (rows >= 9) { /* the process, its devices, their rates, reserved and allocated */
			assert_true(strncmp(out, "pid 4242  command train", 23) == 0);
			const char *d0 = strstr(out, "\ndevice 0  limit"), *d3 = strstr(out, "\ndevice 3  limit none\n");
			assert_non_null(d0);
			assert_non_null(d3);
			assert_true(d0 < d3);
			for (const char *dev = d0; dev; dev = dev == d0 ? d3 : NULL) {
				const char *next = dev == d0 ? d3 : out + strlen(out);
				const char *keys[] = {"\n  per second: ", "\n  reserved_bytes ", "\n  allocated_bytes "};
				for (size_t i = 0; i < 3; i++) {
					const char *at = strstr(dev, keys[i]);
					assert_true(at && at < next);
				}
			}
		}
		if (rows == 24) { /* then requested, cached, the largest free block, OOMs, the hit rate */
			assert_non_null(strstr(out, "\n  cached_bytes "));
			assert_non_null(strstr(out, "\n  ooms "));
			assert_null(strstr(out, "\n  splits "));
		}
	}
	/* the table: the head, the rows that fit, the count of the others, the gone line */
	procs[1].stale = true;
	static const unsigned trows[][2] = {{6, 0}, {5, 2}, {4, 3}, {3, 4}};
	for (size_t k = 0; k < sizeof trows / sizeof trows[0]; k++) {
		gp_format_to_buf(&o, out, sizeof out);
		gp_format_table_box(&o, procs, 2, 80, trows[k][0]);
		assert_int_equal(gp_format_flush(&o), 0);
		assert_int_equal(count_lines(out, &longest), trows[k][0]);
		assert_true(longest <= 80);
		assert_non_null(strstr(out, "1 process gone without removing its page"));
		char want[64];
		snprintf(want, sizeof want, "%u row%s left out: a taller terminal shows", trows[k][1],
			 trows[k][1] == 1 ? "" : "s");
		if (trows[k][1])
			assert_non_null(strstr(out, want));
		else
			assert_null(strstr(out, "left out"));
	}
	procs[1].stale = false;
	procs[0].rates = NULL;
}

/* A page of pid with one slot: device 0 of uuid u (all zero: not known), reserved r,
 * unpooled up, releasable rel, the driver's total/free/seen. */
static void gpu_page(struct gpupool_page *pg, int pid, unsigned char u, uint64_t r, uint64_t up, uint64_t rel,
		     uint64_t total, uint64_t fr, uint64_t seen)
{
	memset(pg, 0, sizeof *pg);
	gp_statpage_init(pg);
	pg->pid = pid;
	struct gpupool_device_stats *s = gp_statpage_slot(pg, 0);
	assert_non_null(s);
	if (u) {
		unsigned char uu[GPUPOOL_UUID_LEN];
		memcpy(uu, UUID0, sizeof uu);
		uu[GPUPOOL_UUID_LEN - 1] = u;
		assert_int_equal(gp_statpage_set_uuid(pg, 0, uu), 0);
	}
	s->reserved_bytes = r;
	s->unpooled_bytes = up;
	s->releasable_bytes = rel;
	s->device_total_bytes = total;
	s->device_free_bytes = fr;
	s->device_seen_ns = seen;
}

/* A process of another user (other_user) speaks for itself only: its slots count in its GPU's
 * held and idle bytes and processes, but the driver's figures come from the trusted pages,
 * however fresh its look; its name names the GPU only while no trusted page does, in either
 * order; alone on a GPU it gives no MEMORY or FREE. */
static void test_gpus_other_user(void **state)
{
	(void)state;
	static struct gpupool_page pg[2];
	const uint64_t G = 1ull << 30, S = 1000000000ull;
	gpu_page(&pg[0], 10, 0x52, 1 * G, 0, 1 * G, 80ull << 40, 0, UINT64_MAX);
	memcpy(pg[0].dev[0].device_name, "theirs", 7);
	gpu_page(&pg[1], 11, 0x52, 2 * G, 0, 0, 80 * G, 30 * G, 100 * S);
	memcpy(pg[1].dev[0].device_name, "NVIDIA H100", 12);
	struct gp_format_proc p[2] = {{.page = &pg[0], .other_user = true}, {.page = &pg[1]}};
	struct gp_format_proc q[2] = {p[1], p[0]};
	struct gp_format_gpu g[2];
	for (int order = 0; order < 2; order++) {
		assert_int_equal(gp_format_gpus(order ? q : p, 2, g, 2, NULL), 1);
		assert_int_equal(g[0].total_bytes, 80 * G);
		assert_int_equal(g[0].free_bytes, 30 * G);
		assert_int_equal(g[0].seen_ns, 100 * S);
		assert_string_equal(g[0].name, "NVIDIA H100");
		assert_int_equal(g[0].held_bytes, 3 * G);
		assert_int_equal(g[0].reclaimable_bytes, 1 * G);
		assert_int_equal(g[0].processes, 2);
		assert_false(g[0].figures_other);
	}
	/* alone on the GPU, another user's word is shown as such: marked "?" */
	assert_int_equal(gp_format_gpus(p, 1, g, 2, NULL), 1);
	assert_int_equal(g[0].total_bytes, 80ull << 40);
	assert_true(g[0].figures_other);
	assert_string_equal(g[0].name, "theirs");
	assert_int_equal(g[0].held_bytes, 1 * G);
	struct gp_format_out o;
	gp_format_to_buf(&o, out, sizeof out);
	gp_format_gpu_lines(&o, p, 1, 100 * S, 0, false);
	assert_int_equal(gp_format_flush(&o), 0);
	assert_non_null(strstr(out, "\n  0  theirs  80.0 TiB?       0 B?    1.0 GiB    1.0 GiB      1  " UUID0_TEXT "\n"
				    "?: as another user's process says"));
}

/* The GPUs of a listing: summed by UUID over live, consistent slots; the freshest look;
 * free never above total; sums saturate; unknown UUIDs, gone and inconsistent slots out. */
static void test_gpus(void **state)
{
	(void)state;
	static struct gpupool_page pg[7];
	const uint64_t G = 1ull << 30, S = 1000000000ull;
	gpu_page(&pg[0], 10, 0x52, 4 * G, 1 * G, 2 * G, 80 * G, 30 * G, 100 * S);
	gpu_page(&pg[1], 11, 0x52, 8 * G, 0, 1 * G, 80 * G, 20 * G, 105 * S); /* fresher */
	gpu_page(&pg[2], 12, 0x01, UINT64_MAX, 5, 3, 0, 0, 0);           /* no look yet */
	gpu_page(&pg[3], 13, 0x01, 7, 0, UINT64_MAX, 10 * G, 99 * G, 50 * S); /* free above total */
	gpu_page(&pg[4], 14, 0x00, 9 * G, 0, 0, 80 * G, 1, 200 * S);     /* UUID not known */
	gpu_page(&pg[5], 15, 0x52, 100 * G, 0, 0, 80 * G, 1, 300 * S);   /* gone */
	gpu_page(&pg[6], 16, 0x52, 100 * G, 0, 0, 80 * G, 1, 300 * S);   /* inconsistent */
	struct gp_format_proc p[7];
	for (int i = 0; i < 7; i++)
		p[i] = (struct gp_format_proc){.page = &pg[i], .stale = i == 5, .inconsistent = i == 6 ? 1u : 0u, .rates = NULL};
	struct gp_format_gpu g[4];
	size_t left = 9;
	assert_int_equal(gp_format_gpus(p, 7, g, 4, &left), 2);
	assert_int_equal(left, 0);
	char u[GP_FORMAT_UUID_LEN];
	/* sorted by UUID: ...01 before ...52 */
	assert_string_equal(gp_format_gpu_uuid(u, &g[0]), "GPU-604ac76c-d9cf-fef3-62e9-d92044ab6e01");
	assert_string_equal(gp_format_gpu_uuid(u, &g[1]), UUID0_TEXT);
	assert_int_equal(g[0].held_bytes, UINT64_MAX);
	assert_int_equal(g[0].reclaimable_bytes, UINT64_MAX);
	assert_int_equal(g[0].processes, 2);
	assert_int_equal(g[0].total_bytes, 10 * G);
	assert_int_equal(g[0].free_bytes, 10 * G);
	assert_int_equal(g[0].seen_ns, 50 * S);
	assert_int_equal(g[1].held_bytes, 13 * G);
	assert_int_equal(g[1].reclaimable_bytes, 3 * G);
	assert_int_equal(g[1].processes, 2);
	assert_int_equal(g[1].free_bytes, 20 * G);
	assert_int_equal(g[1].seen_ns, 105 * S);
	/* no room: the slots of the others counted */
	assert_int_equal(gp_format_gpus(p, 7, g, 1, &left), 1);
	assert_int_equal(left, 2);

	/* the lines: a header, a line per GPU, a blank line; the two GPUs' processes all call them
	 * device 0: no index for either (a number both would share), so the UUID tells them apart */
	struct gp_format_out o;
	gp_format_to_buf(&o, out, sizeof out);
	unsigned lines = gp_format_gpu_lines(&o, p, 7, 106 * S, 0, false);
	assert_int_equal(gp_format_flush(&o), 0);
	assert_int_equal(lines, 4);
	assert_int_equal(count_lines(out, &lines), 4);
	assert_non_null(strstr(out, "GPU  NAME     MEMORY       FREE    GPUPOOL       IDLE  PROCS  UUID\n"));
	/* ...52: fresh (1 s old), no note; ...01: its look 56 s old */
	assert_non_null(strstr(out, "\n  -  -      80.0 GiB   20.0 GiB   13.0 GiB    3.0 GiB      2  " UUID0_TEXT "\n"));
	assert_non_null(strstr(out, "\n  -  -      10.0 GiB   10.0 GiB   16.0 EiB   16.0 EiB      2  "
				    "GPU-604ac76c-d9cf-fef3-62e9-d92044ab6e01  seen 56 s ago\n"));
	assert_string_equal(out + strlen(out) - 2, "\n\n");
	/* 80 columns: the first group tells these two apart only with the last digits */
	gp_format_to_buf(&o, out, sizeof out);
	gp_format_gpu_lines(&o, p, 7, 106 * S, 80, false);
	assert_int_equal(gp_format_flush(&o), 0);
	assert_non_null(strstr(out, "      2  GPU-604ac76c..6e52\n"));
	assert_null(strstr(out, UUID0_TEXT));
	/* one GPU: its number (the CUDA index every process gives it), the first group of its
	 * UUID where it fits; no look: "-"; an hour: in minutes */
	gpu_page(&pg[0], 10, 0x52, 4 * G, 0, 0, 0, 0, 0);
	gp_format_to_buf(&o, out, sizeof out);
	gp_format_gpu_lines(&o, p, 1, 106 * S, 80, false);
	assert_int_equal(gp_format_flush(&o), 0);
	assert_non_null(strstr(out, "\n  0  -             -          -    4.0 GiB        0 B      1  GPU-604ac76c\n"));
	gpu_page(&pg[0], 10, 0x52, 4 * G, 0, 0, 80 * G, 1 * G, 100 * S);
	gp_format_to_buf(&o, out, sizeof out);
	gp_format_gpu_lines(&o, p, 1, 3700 * S, 100, true);
	assert_int_equal(gp_format_flush(&o), 0);
	assert_non_null(strstr(out, "\n  0  -      80.0 GiB    1.0 GiB    4.0 GiB        0 B      1  GPU-604ac76c  seen 60 min ago\n"));
	/* the readers' indexes (nvidia-smi's) win and order the lines; a name from a page; what
	 * a process waits for, summed, in a column of its own; colour: the head bold, GPUs cyan */
	int idx3[GPUPOOL_MAX_DEVICES] = {3}, idx1[GPUPOOL_MAX_DEVICES] = {1};
	gpu_page(&pg[0], 10, 0x52, 4 * G, 0, 0, 80 * G, 1 * G, 100 * S);
	gpu_page(&pg[1], 11, 0x01, 2 * G, 0, 0, 80 * G, 1 * G, 100 * S);
	memcpy(pg[1].dev[0].device_name, "NVIDIA H100 80GB HBM3", 22);
	pg[1].dev[0].waiting_bytes = G;
	p[0].gpu_index = idx3;
	p[1].gpu_index = idx1;
	struct gp_format_view v = {.width = 200, .now_ns = 100 * S, .color = true};
	gp_format_to_buf(&o, out, sizeof out);
	gp_format_gpu_lines_view(&o, p, 2, &v);
	assert_int_equal(gp_format_flush(&o), 0);
	assert_non_null(strstr(out, "\033[1mGPU  NAME                      MEMORY       FREE    GPUPOOL       IDLE    WAITING  PROCS  UUID\033[0m\n"));
	const char *l1 = strstr(out, "\033[36m  1  NVIDIA H100 80GB HBM3   80.0 GiB    1.0 GiB    2.0 GiB        0 B    1.0 GiB      1  ");
	const char *l3 = strstr(out, "\033[36m  3  -                       80.0 GiB    1.0 GiB    4.0 GiB        0 B          -      1  ");
	assert_true(l1 && l3 && l1 < l3);
	assert_int_equal(gp_format_gpus(p, 2, g, 4, NULL), 2);
	assert_int_equal(g[0].index, 1);
	assert_string_equal(g[0].name, "NVIDIA H100 80GB HBM3");
	p[0].gpu_index = p[1].gpu_index = NULL;
	pg[1].dev[0].waiting_bytes = 0;
	/* a narrow box cuts every line */
	gpu_page(&pg[0], 10, 0x52, 4 * G, 0, 0, 80 * G, 1 * G, 100 * S);
	gp_format_to_buf(&o, out, sizeof out);
	gp_format_gpu_lines(&o, p, 1, 3700 * S, 30, true);
	assert_int_equal(gp_format_flush(&o), 0);
	count_lines(out, &lines);
	assert_true(lines <= 30);
	/* %LIM: (reserved + unpooled) / limit, the sum saturated, the percentage clamped */
	gpu_page(&pg[0], 10, 0x52, UINT64_MAX, UINT64_MAX, 0, 0, 0, 0);
	pg[0].dev[0].limit_bytes = UINT64_MAX;
	gp_format_to_buf(&o, out, sizeof out);
	gp_format_table(&o, p, 1);
	assert_int_equal(gp_format_flush(&o), 0);
	assert_non_null(strstr(out, "   16.0 EiB 100.0 "));
	pg[0].dev[0].limit_bytes = 1;
	gp_format_to_buf(&o, out, sizeof out);
	gp_format_table(&o, p, 1);
	assert_int_equal(gp_format_flush(&o), 0);
	assert_non_null(strstr(out, "        1 B  >999 "));
	/* nothing known: nothing written */
	gpu_page(&pg[0], 10, 0, 4 * G, 0, 0, 80 * G, 1 * G, 100 * S);
	gp_format_to_buf(&o, out, sizeof out);
	assert_int_equal(gp_format_gpu_lines(&o, p, 1, 106 * S, 0, false), 0);
	assert_int_equal(gp_format_flush(&o), 0);
	assert_string_equal(out, "");
}

/* The exit report's lines for memory outside the pools, reclaims and the decay: there when
 * not all zero, absent otherwise (the common report stays as it was). */
static void test_report_sharing(void **state)
{
	(void)state;
	static struct gpupool_page pg;
	const uint64_t M = 1ull << 20;
	gpu_page(&pg, 5, 1, 64 * M, 0, 0, 0, 0, 0);
	struct gp_format_out o;
	gp_format_to_buf(&o, out, sizeof out);
	gp_format_report(&o, &pg);
	assert_int_equal(gp_format_flush(&o), 0);
	for (const char *w = "unpooled\0reclaims\0decay\0vmm\0"; *w; w += strlen(w) + 1)
		assert_null(strstr(out, w));
	struct gpupool_device_stats *s = &pg.dev[0];
	s->unpooled_bytes = s->unpooled_mempool_bytes = 3 * M;
	s->unpooled_bytes_peak = 9 * M;
	s->unpooled_mempool_bytes_peak = 5 * M;
	s->unpooled_pitched_bytes_peak = 4 * M; /* freed since: its peak still says it was there */
	s->unpooled_allocs = 1;
	s->unpooled_refusals = 2;
	gp_format_to_buf(&o, out, sizeof out);
	gp_format_report(&o, &pg);
	assert_int_equal(gp_format_flush(&o), 0);
	assert_non_null(strstr(out, "\n  allocated                   0 B            0 B\n"
				    "  unpooled                9.0 MiB        3.0 MiB\n"
				    "    memory pools          5.0 MiB        3.0 MiB\n"
				    "    pitched               4.0 MiB            0 B\n"
				    "                       cudaMalloc"));
	assert_null(strstr(out, "    vmm"));
	assert_null(strstr(out, "    managed"));
	assert_non_null(strstr(out, "\n  unpooled calls: 1 allocation, 0 frees, 2 refused at the limit\n"));
	assert_null(strstr(out, "reclaims"));
	s->reclaim_asks = 2;
	s->reclaim_wait_ns = 520000000;
	gp_format_to_buf(&o, out, sizeof out);
	gp_format_report(&o, &pg);
	assert_int_equal(gp_format_flush(&o), 0);
	assert_non_null(strstr(out, "\n  reclaims asked 2, answered 0: received 0 B, waited 0.52 s\n"));
	assert_null(strstr(out, "reclaims served"));
	assert_null(strstr(out, "decay"));
	s->framework_empties = 1;
	s->decayed_bytes = 2048 * M;
	s->decay_releases = 1;
	gp_format_to_buf(&o, out, sizeof out);
	gp_format_report(&o, &pg);
	assert_int_equal(gp_format_flush(&o), 0);
	assert_non_null(strstr(out, "\n  reclaims served 0, refused 0: gave 0 B; framework caches emptied 1\n"));
	assert_non_null(strstr(out, "\n  decay: 1 segment, 2.0 GiB given back after sitting unused\n"));
	assert_null(strstr(out, "waits"));
	assert_null(strstr(out, "out of memory"));
	/* the waits for memory (page version 5), the floor, and OOMs past the first */
	s->waits = 3;
	s->waits_served = 2;
	s->waits_timed_out = 1;
	s->wait_ns = 1200000000;
	s->floor_bytes = 512 * M;
	s->ooms = 212;
	gp_format_to_buf(&o, out, sizeof out);
	gp_format_report(&o, &pg);
	assert_int_equal(gp_format_flush(&o), 0);
	assert_non_null(strstr(out, "\n  waits for memory 3: 2 served, 1 timed out, 1.20 s in all\n"));
	assert_non_null(strstr(out, "\n  floor: 512.0 MiB kept cached whatever others asked\n"));
	assert_non_null(strstr(out, "\n  out of memory 212 times: the first logged as a warning, each one at GPUPOOL_LOG=info\n"));
}

int main(void)
{
	setenv("TZ", "UTC", 1); /* the views' dates are local time */
	tzset();
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bytes),
		cmocka_unit_test(test_uuid),
		cmocka_unit_test(test_writer_targets),
		cmocka_unit_test_setup(test_table, setup),
		cmocka_unit_test_setup(test_table_fit, setup),
		cmocka_unit_test_setup(test_detail_and_report, setup),
		cmocka_unit_test_setup(test_json, setup),
		cmocka_unit_test_setup(test_prometheus, setup),
		cmocka_unit_test_setup(test_openmetrics, setup),
		cmocka_unit_test_setup(test_rates, setup),
		cmocka_unit_test_setup(test_boxes, setup),
		cmocka_unit_test(test_extreme_values),
		cmocka_unit_test(test_gpus),
		cmocka_unit_test(test_gpus_other_user),
		cmocka_unit_test(test_report_sharing),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
