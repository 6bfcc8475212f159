/* Tests of the trace recorder (trace.c), the reader (tracefile.c) and the replay engine
 * (replay.c): hand-made traces with known peaks in tests/traces/, recorder round trips
 * from several threads (plain and gzip), and malformed or hostile input that must fail
 * with the right line number. Also prints the recorder's cost per call. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include <cmocka.h>

#include "replay.h"
#include "trace.h"
#include "tracefile.h"

static char g_traces[PATH_MAX];
static char g_tmpdir[PATH_MAX];

/* tests/traces of the source tree (GP_SOURCE_DIR: the environment's, else the one built from). */
static void find_traces(void)
{
	const char *dir = getenv("GP_SOURCE_DIR");
	snprintf(g_traces, sizeof g_traces, "%s/tests/traces", dir ? dir : GP_SOURCE_DIR);
}

static void trace_path(char *out, size_t n, const char *name)
{
	snprintf(out, n, "%s/%s", g_traces, name);
}

static int setup_all(void **state)
{
	(void)state;
	find_traces();
	snprintf(g_tmpdir, sizeof g_tmpdir, "/tmp/gp_test_trace.XXXXXX");
	if (!mkdtemp(g_tmpdir))
		return -1;
	return 0;
}

static int teardown_all(void **state)
{
	char cmd[PATH_MAX + 16];
	(void)state;
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_tmpdir);
	return system(cmd) == 0 ? 0 : -1;
}

static void tmp_path(char *out, size_t n, const char *name)
{
	snprintf(out, n, "%s/%s", g_tmpdir, name);
}

static void write_file(const char *path, const char *data, size_t len, bool gz)
{
	if (gz) {
		gzFile f = gzopen(path, "wb");
		assert_non_null(f);
		assert_int_equal(gzwrite(f, data, (unsigned)len), (int)len);
		assert_int_equal(gzclose(f), Z_OK);
	} else {
		FILE *f = fopen(path, "wb");
		assert_non_null(f);
		assert_int_equal(fwrite(data, 1, len, f), len);
		assert_int_equal(fclose(f), 0);
	}
}

/* ---- replay of hand-made traces -------------------------------------------------- */

/* Replays tests/traces/<name> with the invariant checker after every operation, on a device
 * of virtual-memory granularity `gran` (0: a device without it, whole segments) with
 * segments:`segments`. */
static void replay_on(const char *name, size_t gran, int segments, struct gp_replay_result *r)
{
	char p[PATH_MAX + 64];
	struct gp_replay_opts o;
	gp_replay_opts_default(&o);
	o.params.check = true;
	o.params.segments = segments;
	o.granularity = gran;
	trace_path(p, sizeof p, name);
	int rc = gp_replay_file(p, &o, r);
	if (rc)
		fprintf(stderr, "replay %s: %d %s\n", p, rc, r->error);
	assert_int_equal(rc, 0);
}

/* The hand-made traces' figures below are those of whole segments. */
static void replay(const char *name, struct gp_replay_result *r)
{
	replay_on(name, 0, GP_SEGMENTS_AUTO, r);
}

static void test_replay_simple_sync(void **state)
{
	struct gp_replay_result r;
	(void)state;
	replay("simple_sync.csv", &r);
	assert_int_equal(r.ops, 6);
	assert_int_equal(r.allocs, 3);
	assert_int_equal(r.frees, 3);
	assert_int_equal(r.peak_requested, 4000);
	assert_int_equal(r.peak_allocated, 1024 + 3072);
	assert_int_equal(r.peak_reserved, 2u << 20);
	assert_int_equal(r.segments_peak, 1);
	assert_int_equal(r.backend_allocs, 1);
	assert_int_equal(r.unknown_frees, 0);
	assert_int_equal(r.live_at_end, 0);
	assert_int_equal(r.devices, 1);
}

static void test_replay_async_streams(void **state)
{
	struct gp_replay_result r;
	(void)state;
	replay("async_streams.csv", &r);
	assert_int_equal(r.ops, 6);
	assert_int_equal(r.allocs, 3);
	assert_int_equal(r.frees, 3);
	assert_int_equal(r.peak_requested, 17u << 20);
	/* 12 MiB: its own segment; 5 MiB: a 20 MiB medium segment; the second 12 MiB
	 * reuses the first on the same stream */
	assert_int_equal(r.peak_reserved, 32u << 20);
	assert_int_equal(r.backend_allocs, 2);
	assert_int_equal(r.model_fences, 0);
}

static void test_replay_fence_gap(void **state)
{
	struct gp_replay_result r;
	(void)state;
	replay("fence_gap.csv", &r);
	assert_int_equal(r.ops, 10);
	assert_int_equal(r.allocs, 4);
	assert_int_equal(r.frees, 3);
	assert_int_equal(r.skipped_errors, 1);
	assert_int_equal(r.unknown_frees, 1);
	assert_int_equal(r.null_frees, 1);
	assert_int_equal(r.live_at_end, 1);
	assert_int_equal(r.devices, 2);
	/* the free at 2 us is still pending at 3 us (the modelled fence thread waits 50 us):
	 * a second segment would raise the peak for memory a fence returns, so the pool
	 * fences inline and reuses the block; at 1 ms the modelled thread has retired the
	 * second free, so still one 12 MiB segment */
	assert_int_equal(r.model_fences, 1);
	assert_int_equal(r.peak_requested, (12u << 20) + 4096);
	assert_int_equal(r.peak_reserved, (12u << 20) + (2u << 20));
	assert_int_equal(r.backend_allocs, 2);
}

/* The same traces on a device with virtual memory (2 MiB chunks): what is reserved is the
 * chunks the blocks need. */
static void test_replay_vmm(void **state)
{
	struct gp_replay_result r;
	(void)state;
	replay_on("simple_sync.csv", 2u << 20, GP_SEGMENTS_VMM, &r);
	assert_int_equal(r.peak_reserved, 2u << 20);
	assert_int_equal(r.vmm_reserves, 1);
	assert_int_equal(r.chunks_mapped, 1);
	assert_int_equal(r.backend_allocs, 0);
	/* 12 MiB and 5 MiB side by side in one range, 9 chunks (whole segments: 32 MiB) */
	replay_on("async_streams.csv", 2u << 20, GP_SEGMENTS_VMM, &r);
	assert_int_equal(r.peak_requested, 17u << 20);
	assert_int_equal(r.peak_reserved, 18u << 20);
	assert_int_equal(r.chunks_mapped, 9);
	assert_int_equal(r.segments_peak, 1);
	/* segments:auto gives cudaMallocAsync memory the same */
	replay_on("async_streams.csv", 2u << 20, GP_SEGMENTS_AUTO, &r);
	assert_int_equal(r.peak_reserved, 18u << 20);
	assert_int_equal(r.backend_allocs, 0);
	/* two devices: 12 MiB on device 0 (6 chunks), 4 KiB on device 1 (1 chunk) */
	replay_on("fence_gap.csv", 2u << 20, GP_SEGMENTS_VMM, &r);
	assert_int_equal(r.peak_reserved, (12u << 20) + (2u << 20));
	assert_int_equal(r.vmm_reserves, 2);
	assert_int_equal(r.chunks_mapped, 7);
	assert_int_equal(r.backend_allocs, 0);
	/* segments:auto: a cudaMalloc of 12 MiB (at least medium_max) gets a whole segment of its
	 * own, which cudaIpcGetMemHandle can export; the 4 KiB one a chunk */
	replay_on("fence_gap.csv", 2u << 20, GP_SEGMENTS_AUTO, &r);
	assert_int_equal(r.peak_reserved, (12u << 20) + (2u << 20));
	assert_int_equal(r.backend_allocs, 1);
	assert_int_equal(r.chunks_mapped, 1);
}

static void test_replay_fence_policies(void **state)
{
	char p[PATH_MAX + 64];
	struct gp_replay_opts o;
	struct gp_replay_result r;
	(void)state;
	trace_path(p, sizeof p, "fence_gap.csv");
	/* sync: every cudaFree fences, so the 12 MiB block is reused at once */
	gp_replay_opts_default(&o);
	o.fence = GP_FENCE_SYNC;
	o.params.sync_free = true;
	assert_int_equal(gp_replay_file(p, &o, &r), 0);
	assert_int_equal(r.peak_reserved, (12u << 20) + (2u << 20));
	assert_int_equal(r.model_fences, 0);
	/* inline: no fence thread; the allocating thread fences rather than raise the peak */
	gp_replay_opts_default(&o);
	o.fence = GP_FENCE_INLINE;
	assert_int_equal(gp_replay_file(p, &o, &r), 0);
	assert_int_equal(r.peak_reserved, (12u << 20) + (2u << 20));
	/* --limit-rows */
	gp_replay_opts_default(&o);
	o.limit_rows = 3;
	assert_int_equal(gp_replay_file(p, &o, &r), 0);
	assert_int_equal(r.ops, 3);
	assert_int_equal(r.allocs, 2);
}

/* Time in the replay: a device 1 ms behind. The cudaMalloc at 3 us needs the block freed at
 * 2 us (growing would raise the peak), which no marker covers yet: a device_sync (what a
 * marker recorded and waited for at once would be), 1 ms. At 1 ms (2 ms on the program's clock, after that wait) the
 * thread's marker of 1.054 ms has 54 us to go, more than the wait credit left (the first
 * wait spent it): the pool grows. Without markers the thread's device_sync for the second
 * free, begun at 1.054 ms, returns at 2.054 ms, after that cudaMalloc: it fences inline
 * again (another 1 ms) and reuses the block; the thread's sync then completes. */
static void test_replay_time(void **state)
{
	char p[PATH_MAX + 64];
	struct gp_replay_opts o;
	struct gp_replay_result r;
	(void)state;
	trace_path(p, sizeof p, "fence_gap.csv");
	for (int markers = 1; markers >= 0; markers--) {
		gp_replay_opts_default(&o);
		o.params.check = true;
		o.params.fence_marker = markers;
		o.fence_latency_us = 1000;
		assert_int_equal(gp_replay_file(p, &o, &r), 0);
		assert_int_equal(r.wait_ns, markers ? 1000000 : 2000000);
		assert_int_equal(r.duration_ns, 1001000);
		assert_int_equal(r.inline_fences, markers ? 1 : 2);
		assert_int_equal(r.model_fences, 1);
		assert_int_equal(r.markers, markers ? 1 : 0);
		assert_int_equal(r.peak_reserved, markers ? (26u << 20) : (14u << 20));
	}
	/* no latency: no wait, and the same answer every time */
	struct gp_replay_result r0;
	gp_replay_opts_default(&o);
	assert_int_equal(gp_replay_file(p, &o, &r0), 0);
	assert_int_equal(gp_replay_file(p, &o, &r), 0);
	assert_int_equal(r0.wait_ns, 0);
	assert_int_equal(r.wait_ns, 0);
	assert_int_equal(r0.peak_reserved, r.peak_reserved);
	assert_int_equal(r0.fences, r.fences);
	assert_int_equal(r0.markers, r.markers);
	assert_int_equal(r0.inline_fences, r.inline_fences);
}

/* ---- malformed input ---------------------------------------------------------------- */

#define HDR GP_TRACE_HEADER "\n"
#define ROW "1000,malloc,1,0,0,4096,7f0000000000,10,0\n"

struct bad_case {
	const char *name;
	const char *text;
	int rc;
	unsigned long line;
	const char *needle;
};

static void expect_bad(const char *path, int want_rc, unsigned long want_line, const char *needle)
{
	struct gp_tracefile *tf = NULL;
	struct gp_trace_row row;
	char err[800] = "";
	int rc = gp_tracefile_open(&tf, path, 0, err, sizeof err);
	unsigned long line = 1;
	if (rc == 0) {
		while ((rc = gp_tracefile_next(tf, &row)) > 0)
			;
		snprintf(err, sizeof err, "%s", gp_tracefile_error(tf));
		line = gp_tracefile_line(tf);
		/* sticky */
		assert_int_equal(gp_tracefile_next(tf, &row), rc);
		gp_tracefile_close(tf);
	}
	if (rc != want_rc || line != want_line || !strstr(err, needle))
		fprintf(stderr, "%s: rc %d line %lu err '%s' (want %d, %lu, '%s')\n", path, rc,
			line, err, want_rc, want_line, needle);
	assert_int_equal(rc, want_rc);
	assert_int_equal(line, want_line);
	assert_non_null(strstr(err, needle));
	/* the line number is in the message as PATH:LINE: */
	char tag[PATH_MAX + 32];
	snprintf(tag, sizeof tag, "%s:%lu: ", path, want_line);
	assert_non_null(strstr(err, tag));

	/* the replay engine reports the same line */
	struct gp_replay_opts o;
	struct gp_replay_result r;
	gp_replay_opts_default(&o);
	assert_int_equal(gp_replay_file(path, &o, &r), want_rc);
	assert_int_equal(r.error_line, want_line);
	assert_non_null(strstr(r.error, needle));
}

static void test_malformed(void **state)
{
	static char overlong[2048];
	(void)state;
	memset(overlong, 0, sizeof overlong);
	strcpy(overlong, HDR ROW "1000,malloc,1,0,0,4096,7f0000000000,10,0");
	memset(overlong + strlen(overlong), '7', 700);
	strcat(overlong, "\n" ROW);
	const struct bad_case cases[] = {
		{"empty", "", -EINVAL, 1, "missing header"},
		{"noheader", ROW ROW, -EINVAL, 1, "header"},
		{"badop", HDR "1000,mallocx,1,0,0,4096,7f00,10,0\n", -EINVAL, 2, "'op'"},
		{"badhex", HDR ROW "1000,free,1,0,0,0,7g00,10,0\n", -EINVAL, 3, "'ptr' is not hex"},
		{"0xhex", HDR "1000,malloc_async,1,0,0x10,4096,7f00,10,0\n", -EINVAL, 2, "'stream'"},
		{"longhex", HDR "1000,free,1,0,0,0,12345678901234567,10,0\n", -EINVAL, 2, "'ptr'"},
		{"cols8", HDR ROW ROW "1000,malloc,1,0,0,4096,7f00,10\n", -EINVAL, 4, "found 8"},
		{"cols10", HDR "1000,malloc,1,0,0,4096,7f00,10,0,5\n", -EINVAL, 2, "9 comma-separated"},
		{"huge", HDR "1,malloc,1,0,0,281474976710657,7f00,10,0\n", -EINVAL, 2, "'size' is too large"},
		{"maxsize", HDR "1,malloc,1,0,0,281474976710656,7f00,10,0\n" "x\n", -EINVAL, 3, "columns"},
		{"u64wrap", HDR "99999999999999999999999,malloc,1,0,0,1,7f00,10,0\n", -EINVAL, 2, "'t_ns'"},
		{"negsize", HDR "1,malloc,1,0,0,-4096,7f00,10,0\n", -EINVAL, 2, "'size' is negative"},
		{"negerr", HDR "1,malloc,1,0,0,4096,7f00,10,-2\n", -EINVAL, 2, "'err' is negative"},
		{"emptyfield", HDR "1,malloc,1,,0,4096,7f00,10,0\n", -EINVAL, 2, "'dev' is empty"},
		{"bigdev", HDR "1,malloc,1,5000,0,4096,7f00,10,0\n", -EINVAL, 2, "'dev'"},
		{"space", HDR "1,malloc,1,0,0, 4096,7f00,10,0\n", -EINVAL, 2, "'size'"},
		{"freesize", HDR "1,free,1,0,0,4096,7f00,10,0\n", -EINVAL, 2, "must be 0"},
		{"blank", HDR ROW "\n" ROW, -EINVAL, 3, "empty line"},
		{"nul", HDR "1,malloc,1,0\0,0,4096,7f00,10,0\n", -EINVAL, 2, "NUL"},
		{"overlong", overlong, -EINVAL, 3, "longer than"},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		char p[PATH_MAX + 64];
		size_t len = strlen(cases[i].text);
		if (strcmp(cases[i].name, "nul") == 0)
			len = sizeof(HDR "1,malloc,1,0\0,0,4096,7f00,10,0\n") - 1;
		snprintf(p, sizeof p, "%s/%s.csv", g_tmpdir, cases[i].name);
		write_file(p, cases[i].text, len, false);
		expect_bad(p, cases[i].rc, cases[i].line, cases[i].needle);
		/* the same through gzip */
		snprintf(p, sizeof p, "%s/%s.csv.gz", g_tmpdir, cases[i].name);
		write_file(p, cases[i].text, len, true);
		expect_bad(p, cases[i].rc, cases[i].line, cases[i].needle);
	}
}

static void test_replay_bad_device(void **state)
{
	char p[PATH_MAX + 64];
	struct gp_replay_opts o;
	struct gp_replay_result r;
	(void)state;
	tmp_path(p, sizeof p, "dev16.csv");
	const char *t = HDR ROW "1,malloc,1,16,0,4096,7f00,10,0\n";
	write_file(p, t, strlen(t), false);
	gp_replay_opts_default(&o);
	assert_int_equal(gp_replay_file(p, &o, &r), -EINVAL);
	assert_int_equal(r.error_line, 3);
	assert_non_null(strstr(r.error, ":3: device ordinal"));
}

/* ---- hostile sizes and knobs: one error, never an abort or a wrapped sum ---------------- */

/* Replays `rows` rows, each written by row(i, f), from a file `name` in the temporary
 * directory; returns gp_replay_file's result. */
static int replay_rows(const char *name, unsigned rows, void (*row)(unsigned, FILE *),
		       const struct gp_replay_opts *o, struct gp_replay_result *r)
{
	char p[PATH_MAX + 64];
	tmp_path(p, sizeof p, name);
	FILE *f = fopen(p, "w");
	assert_non_null(f);
	fputs(HDR, f);
	for (unsigned i = 0; i < rows; i++)
		row(i, f);
	assert_int_equal(fclose(f), 0);
	return gp_replay_file(p, o, r);
}

/* The same for the rows in `text`. */
static int replay_text(const char *name, const char *text, const struct gp_replay_opts *o,
		       struct gp_replay_result *r)
{
	char p[PATH_MAX + 64];
	tmp_path(p, sizeof p, name);
	write_file(p, text, strlen(text), false);
	return gp_replay_file(p, o, r);
}

static void row_max_malloc(unsigned i, FILE *f)
{
	fprintf(f, "%u,malloc,1,0,0,%llu,%x,10,0\n", i + 1, (unsigned long long)GP_TRACEFILE_SIZE_MAX, (i + 1) * 16);
}

static void row_max_malloc_free(unsigned i, FILE *f)
{
	if (i % 2 == 0)
		fprintf(f, "%u,malloc,1,0,0,%llu,a0,10,0\n", i + 1, (unsigned long long)GP_TRACEFILE_SIZE_MAX);
	else
		fprintf(f, "%u,free,1,0,0,0,a0,10,0\n", i + 1);
}

/* 70,000 live allocations of 2^48 bytes: the replay stops at the first row that takes the
 * pool past 2^50 bytes on the device, instead of wrapping its peaks past 2^64. */
static void test_replay_hostile_sizes(void **state)
{
	struct gp_replay_opts o;
	struct gp_replay_result r;
	(void)state;
	gp_replay_opts_default(&o);
	assert_int_equal(replay_rows("max_sizes.csv", 70000, row_max_malloc, &o, &r), -ERANGE);
	assert_int_equal(r.error_line, 6); /* the 5th row: 5 * 2^48 > 2^50 */
	assert_non_null(strstr(r.error, ":6: the pool holds more than 2^50 bytes"));
}

/* Segments of 2^48 bytes taken and released 66,000 times use up the fake device's 64-bit
 * address space (its addresses are never reused): an error, not overlapping segments. */
static void test_replay_address_space_used_up(void **state)
{
	struct gp_replay_opts o;
	struct gp_replay_result r;
	(void)state;
	gp_replay_opts_default(&o);
	o.fence = GP_FENCE_SYNC;
	o.params.sync_free = true;
	o.params.release_threshold = 0;
	assert_int_equal(replay_rows("cycles.csv", 132000, row_max_malloc_free, &o, &r), -ERANGE);
	assert_non_null(strstr(r.error, "address space is used up"));
	assert_true(r.error_line > 100000);
}

/* Knobs the parser refuses but a caller may still pass: large_round 2^63. Each large request
 * takes a 2^63-byte segment; with the checker on, the replay stops with an error at the first
 * one rather than let the next overlap it (the checker would abort). */
static void test_replay_hostile_knobs(void **state)
{
	struct gp_replay_opts o;
	struct gp_replay_result r;
	(void)state;
	const char *t = HDR "1,malloc,1,0,0,20000000,7f0000000000,1,0\n2,malloc,1,0,0,20000000,7f0000100000,1,0\n"
			"3,malloc,1,0,0,20000000,7f0000200000,1,0\n";
	gp_replay_opts_default(&o);
	o.params.check = true;
	o.params.large_round = (size_t)1 << 63;
	assert_int_equal(replay_text("large_round.csv", t, &o, &r), -ERANGE);
	assert_int_equal(r.error_line, 2);
	/* a geometry the pool refuses (large_round not a multiple of round): an error naming the row */
	o.params.large_round = 3000;
	assert_int_equal(replay_text("large_round.csv", t, &o, &r), -EINVAL);
	assert_non_null(strstr(r.error, ":2: cannot create a pool"));
}

/* A free at the very end of time: the modelled fence's deadline saturates instead of
 * wrapping to the past (which fenced at the next row). */
static void test_replay_fence_deadline_saturates(void **state)
{
	struct gp_replay_opts o;
	struct gp_replay_result r;
	(void)state;
	const char *t = HDR "1,malloc,1,0,0,4096,a0,10,0\n18446744073709551000,free,1,0,0,0,a0,10,0\n"
			"18446744073709551001,malloc,1,0,0,4096,b0,10,0\n";
	gp_replay_opts_default(&o);
	assert_int_equal(replay_text("late.csv", t, &o, &r), 0);
	assert_int_equal(r.model_fences, 0);
	assert_int_equal(r.allocs, 2);
}

static void test_missing_file(void **state)
{
	struct gp_tracefile *tf;
	char err[256];
	(void)state;
	assert_int_equal(gp_tracefile_open(&tf, "/nonexistent/x.csv", 0, err, sizeof err), -ENOENT);
	assert_non_null(strstr(err, "/nonexistent/x.csv"));
	assert_int_equal(gp_tracefile_open(&tf, "/nonexistent/x.csv", GP_TRACEFILE_WINDOW_MAX + 1,
					   err, sizeof err), -EINVAL);
}

static void test_truncated_gzip(void **state)
{
	char p[PATH_MAX + 64];
	(void)state;
	/* 20000 rows of varied content, so the compressed stream is long */
	size_t cap = 20001 * 64, len = 0;
	char *text = malloc(cap);
	assert_non_null(text);
	len += (size_t)sprintf(text, HDR);
	for (int i = 0; i < 20000; i++)
		len += (size_t)sprintf(text + len, "%d,malloc,%d,0,0,%d,%x,%d,0\n", i * 7, i % 13,
				       (i * 7919) % 100000 + 1, 0x100000 + i * 4096, i % 977);
	tmp_path(p, sizeof p, "trunc.csv.gz");
	write_file(p, text, len, true);
	FILE *f = fopen(p, "rb");
	fseek(f, 0, SEEK_END);
	long full = ftell(f);
	fclose(f);
	/* cut in the middle: the reader must fail with an error, not end quietly */
	assert_int_equal(truncate(p, full / 2), 0);
	struct gp_tracefile *tf;
	struct gp_trace_row row;
	char err[800];
	assert_int_equal(gp_tracefile_open(&tf, p, 0, err, sizeof err), 0);
	int rc;
	unsigned long rows = 0;
	while ((rc = gp_tracefile_next(tf, &row)) > 0)
		rows++;
	assert_int_equal(rc, -EIO);
	assert_true(rows > 100 && rows < 20000);
	assert_non_null(strstr(gp_tracefile_error(tf), "truncated"));
	assert_true(gp_tracefile_line(tf) == rows + 2);
	gp_tracefile_close(tf);
	/* cut inside the 8-byte trailer only: every row is there, the CRC/length is not */
	write_file(p, text, len, true);
	assert_int_equal(truncate(p, full - 3), 0);
	assert_int_equal(gp_tracefile_open(&tf, p, 0, err, sizeof err), 0);
	rows = 0;
	while ((rc = gp_tracefile_next(tf, &row)) > 0)
		rows++;
	assert_int_equal(rc, -EIO);
	gp_tracefile_close(tf);
	/* garbage after a gzip magic */
	write_file(p, "\x1f\x8b\x08\x00garbagegarbage", 18, false);
	assert_int_not_equal(gp_tracefile_open(&tf, p, 0, err, sizeof err), 0);
	free(text);
}

/* Reads every row of p: the number of rows, and the final return code in *rc. */
static unsigned long read_rows(const char *p, int *rc, char *err, size_t errlen)
{
	struct gp_tracefile *tf;
	struct gp_trace_row row;
	unsigned long rows = 0;
	*rc = gp_tracefile_open(&tf, p, 0, err, errlen);
	if (*rc)
		return 0;
	while ((*rc = gp_tracefile_next(tf, &row)) > 0)
		rows++;
	snprintf(err, errlen, "%s", gp_tracefile_error(tf));
	gp_tracefile_close(tf);
	return rows;
}

static void append(const char *p, const void *data, size_t len)
{
	FILE *f = fopen(p, "ab");
	assert_non_null(f);
	assert_int_equal(fwrite(data, 1, len, f), len);
	assert_int_equal(fclose(f), 0);
}

/* A gzip file is whole gzip members and nothing else: bytes after the stream are an error,
 * as a stream that ends early is (zlib's gzread ignores them); members one after another
 * (cat a.gz b.gz) are one file, as gzip reads them. */
static void test_gzip_trailing_bytes(void **state)
{
	char p[PATH_MAX + 64], err[800];
	const char *rows = "1,malloc,1,0,0,4096,a0,10,0\n2,free,1,0,0,0,a0,10,0\n";
	char text[256];
	int rc;
	(void)state;
	snprintf(text, sizeof text, HDR "%s", rows);
	tmp_path(p, sizeof p, "tail.csv.gz");
	write_file(p, text, strlen(text), true);
	assert_int_equal(read_rows(p, &rc, err, sizeof err), 2);
	assert_int_equal(rc, 0);
	const char *tails[] = {"junk", "\n", "\x1f", "\0\0\0\0"};
	for (size_t i = 0; i < sizeof tails / sizeof tails[0]; i++) {
		write_file(p, text, strlen(text), true);
		append(p, tails[i], i == 3 ? 4 : strlen(tails[i]));
		assert_int_equal(read_rows(p, &rc, err, sizeof err), 2);
		assert_int_equal(rc, -EIO);
		assert_non_null(strstr(err, "after the end of the gzip stream"));
		assert_non_null(strstr(err, "tail.csv.gz:4: "));
	}
	/* a second member: its rows follow the first's (its header is a malformed row) */
	char q[PATH_MAX + 64];
	tmp_path(q, sizeof q, "rows.gz");
	write_file(q, rows, strlen(rows), true);
	write_file(p, text, strlen(text), true);
	FILE *f = fopen(q, "rb");
	assert_non_null(f);
	char buf[256];
	size_t n = fread(buf, 1, sizeof buf, f);
	fclose(f);
	append(p, buf, n);
	assert_int_equal(read_rows(p, &rc, err, sizeof err), 4);
	assert_int_equal(rc, 0);
}

/* "-" reads standard input, plain or gzip'd, told apart by the magic. */
static void test_stdin(void **state)
{
	char p[PATH_MAX + 64], err[800];
	const char *text = HDR "1,malloc,1,0,0,4096,a0,10,0\n2,free,1,0,0,0,a0,10,0\n";
	int rc, saved = dup(0);
	(void)state;
	assert_true(saved >= 0);
	for (int gz = 0; gz < 2; gz++) {
		tmp_path(p, sizeof p, gz ? "in.gz" : "in.txt");
		write_file(p, text, strlen(text), gz);
		FILE *f = freopen(p, "rb", stdin);
		assert_non_null(f);
		assert_int_equal(read_rows("-", &rc, err, sizeof err), 2);
		assert_int_equal(rc, 0);
		/* stdin itself stays open */
		assert_true(fcntl(0, F_GETFD) >= 0);
	}
	append(p, "x", 1);
	assert_non_null(freopen(p, "rb", stdin));
	assert_int_equal(read_rows("-", &rc, err, sizeof err), 2);
	assert_int_equal(rc, -EIO);
	assert_int_equal(strncmp(err, "<stdin>:4: ", strlen("<stdin>:4: ")), 0);
	assert_int_equal(dup2(saved, 0), 0);
	close(saved);
}

static void test_parse_line_ok(void **state)
{
	struct gp_trace_row r;
	char why[256];
	(void)state;
	const char *l = "16212534833,malloc_async,1615,3,7FB8a000,93763584,7fb800000000,171866,2\r";
	assert_int_equal(gp_tracefile_parse_line(l, strlen(l) - 1, &r, why, sizeof why), 0);
	assert_int_equal(r.t_ns, 16212534833ull);
	assert_int_equal(r.op, GP_TRACE_MALLOC_ASYNC);
	assert_int_equal(r.tid, 1615);
	assert_int_equal(r.dev, 3);
	assert_int_equal(r.stream, 0x7fb8a000);
	assert_int_equal(r.size, 93763584);
	assert_int_equal(r.ptr, 0x7fb800000000ull);
	assert_int_equal(r.dur_ns, 171866);
	assert_int_equal(r.err, 2);
	l = "1,free_async,1,0,ffffffffffffffff,0,ffffffffffffffff,18446744073709551615,0";
	assert_int_equal(gp_tracefile_parse_line(l, strlen(l), &r, why, sizeof why), 0);
	assert_int_equal(r.dur_ns, UINT64_MAX);
	assert_int_equal(r.ptr, UINTPTR_MAX);
}

/* ---- the recorder ----------------------------------------------------------------- */

#define NTHREADS 6
#define PER_THREAD 5000

/* Frees must carry size 0 in the file format: this thread body records valid rows. */
static void *rec_thread_valid(void *arg)
{
	int k = (int)(intptr_t)arg;
	for (int i = 0; i < PER_THREAD; i++) {
		int op = i % 4;
		bool fr = op == GP_TRACE_FREE || op == GP_TRACE_FREE_ASYNC;
		bool sync = op == GP_TRACE_FREE || op == GP_TRACE_MALLOC;
		gp_trace_record(op, k, sync ? 0 : (uintptr_t)(0x1000 * k),
				fr ? 0 : (size_t)i * 512 + (size_t)k, ((uintptr_t)k << 40) | (uintptr_t)i,
				(uint64_t)i, i % 3);
	}
	return NULL;
}

static void roundtrip(const char *name, size_t window)
{
	char p[PATH_MAX + 64];
	pthread_t th[NTHREADS];
	tmp_path(p, sizeof p, name);
	assert_int_equal(gp_trace_open(p), 0);
	assert_int_equal(gp_trace_open(p), -EALREADY);
	for (int k = 0; k < NTHREADS; k++)
		assert_int_equal(pthread_create(&th[k], NULL, rec_thread_valid, (void *)(intptr_t)k), 0);
	/* the main thread records too and is still alive at close */
	rec_thread_valid((void *)(intptr_t)NTHREADS);
	for (int k = 0; k < NTHREADS; k++)
		pthread_join(th[k], NULL);
	assert_int_equal(gp_trace_close(), 0);
	assert_int_equal(gp_trace_close(), 0); /* idempotent */
	gp_trace_record(0, 0, 0, 1, 1, 1, 0);  /* after close: dropped */
	assert_int_equal(gp_trace_rows_written(), (NTHREADS + 1) * PER_THREAD);

	struct gp_tracefile *tf;
	struct gp_trace_row r;
	char err[800];
	int next[NTHREADS + 1] = {0};
	int32_t tid[NTHREADS + 1] = {0};
	uint64_t last_t[NTHREADS + 1] = {0}, last_all = 0;
	int rc;
	unsigned long n = 0;
	assert_int_equal(gp_tracefile_open(&tf, p, window, err, sizeof err), 0);
	while ((rc = gp_tracefile_next(tf, &r)) > 0) {
		int k = r.dev, i = next[k]++;
		assert_true(k >= 0 && k <= NTHREADS);
		assert_int_equal(r.op, i % 4);
		bool sync = r.op == GP_TRACE_FREE || r.op == GP_TRACE_MALLOC;
		assert_int_equal(r.stream, sync ? 0 : (uintptr_t)(0x1000 * k));
		assert_int_equal(r.ptr, ((uintptr_t)k << 40) | (uintptr_t)i);
		assert_int_equal(r.dur_ns, (uint64_t)i);
		assert_int_equal(r.err, i % 3);
		if (r.op == GP_TRACE_MALLOC || r.op == GP_TRACE_MALLOC_ASYNC)
			assert_int_equal(r.size, (uint64_t)i * 512 + (uint64_t)k);
		if (tid[k] == 0)
			tid[k] = r.tid;
		assert_int_equal(r.tid, tid[k]);
		assert_true(r.t_ns >= last_t[k]);
		last_t[k] = r.t_ns;
		if (window)
			assert_true(r.t_ns >= last_all);
		last_all = r.t_ns;
		n++;
	}
	if (rc < 0)
		fprintf(stderr, "%s\n", gp_tracefile_error(tf));
	assert_int_equal(rc, 0);
	assert_int_equal(n, (NTHREADS + 1) * PER_THREAD);
	for (int k = 0; k <= NTHREADS; k++)
		assert_int_equal(next[k], PER_THREAD);
	for (int k = 0; k < NTHREADS; k++)
		assert_int_not_equal(tid[k], tid[NTHREADS]);
	/* t_ns counts from process start: small, not boot time */
	assert_true(last_all < 3600ull * 1000000000u);
	if (window)
		assert_int_equal(gp_tracefile_out_of_order(tf), 0);
	gp_tracefile_close(tf);
}

static void test_recorder_roundtrip(void **state)
{
	(void)state;
	roundtrip("rt.csv", 0);
	roundtrip("rt.csv.gz", 0);
	roundtrip("rt2.csv.gz", 1 << 16);
}

static void *few_rows(void *arg)
{
	(void)arg;
	for (int i = 0; i < 10; i++)
		gp_trace_record(GP_TRACE_MALLOC, 0, 0, 4096, 0x1000 + (uintptr_t)i, 1, 0);
	return NULL;
}

static void test_recorder_many_threads(void **state)
{
	/* more live threads than buffers: the rest write through; all rows arrive */
	enum { N = GP_TRACE_NBUF + 20 };
	pthread_t th[N];
	char p[PATH_MAX + 64];
	(void)state;
	tmp_path(p, sizeof p, "many.csv");
	assert_int_equal(gp_trace_open(p), 0);
	for (int k = 0; k < N; k++)
		assert_int_equal(pthread_create(&th[k], NULL, few_rows, NULL), 0);
	for (int k = 0; k < N; k++)
		pthread_join(th[k], NULL);
	/* buffers of exited threads were flushed and given back: a new round still buffers */
	for (int k = 0; k < 8; k++)
		assert_int_equal(pthread_create(&th[k], NULL, few_rows, NULL), 0);
	for (int k = 0; k < 8; k++)
		pthread_join(th[k], NULL);
	assert_int_equal(gp_trace_close(), 0);
	assert_int_equal(gp_trace_rows_written(), (N + 8) * 10);
}

static void test_recorder_replays(void **state)
{
	/* a recorded file is a valid trace for the replay engine */
	char p[PATH_MAX + 64];
	pthread_t th[3];
	(void)state;
	tmp_path(p, sizeof p, "valid.csv.gz");
	assert_int_equal(gp_trace_open(p), 0);
	for (int k = 0; k < 3; k++)
		assert_int_equal(pthread_create(&th[k], NULL, rec_thread_valid, (void *)(intptr_t)k), 0);
	for (int k = 0; k < 3; k++)
		pthread_join(th[k], NULL);
	assert_int_equal(gp_trace_close(), 0);
	struct gp_replay_opts o;
	struct gp_replay_result r;
	gp_replay_opts_default(&o);
	o.sort_window = 4096;
	assert_int_equal(gp_replay_file(p, &o, &r), 0);
	assert_int_equal(r.ops, 3 * PER_THREAD);
	/* i%3 != 0 rows carry an error and are skipped */
	assert_int_equal(r.skipped_errors, 3 * (PER_THREAD - (PER_THREAD + 2) / 3));
}

static uint64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void *bench_thread(void *arg)
{
	int n = (int)(intptr_t)arg;
	for (int i = 0; i < n; i++)
		gp_trace_record(i & 1, 0, 0, (size_t)i * 512, 0x7f0000000000u + (uintptr_t)i * 512,
				1000, 0);
	return NULL;
}

static void test_recorder_overhead(void **state)
{
	/* the cost the shim pays per recorded call, file writes included (amortized) */
	enum { N = 400000, T = 4 };
	char p[PATH_MAX + 64];
	pthread_t th[T];
	(void)state;
	const char *names[] = {"bench.csv", "bench.csv.gz"};
	for (int f = 0; f < 2; f++) {
		tmp_path(p, sizeof p, names[f]);
		assert_int_equal(gp_trace_open(p), 0);
		uint64_t t0 = mono_ns();
		bench_thread((void *)(intptr_t)N);
		uint64_t t1 = mono_ns();
		for (int k = 0; k < T; k++)
			pthread_create(&th[k], NULL, bench_thread, (void *)(intptr_t)(N / T));
		for (int k = 0; k < T; k++)
			pthread_join(th[k], NULL);
		uint64_t t2 = mono_ns();
		assert_int_equal(gp_trace_close(), 0);
		printf("recorder %s: %.1f ns/call (1 thread), %.1f ns/call wall (%d threads)\n",
		       names[f], (double)(t1 - t0) / N, (double)(t2 - t1) / N, T);
		/* recording off: the cost of the early return */
		t0 = mono_ns();
		bench_thread((void *)(intptr_t)N);
		t1 = mono_ns();
		if (f == 0)
			printf("recorder off: %.1f ns/call\n", (double)(t1 - t0) / N);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_line_ok),
		cmocka_unit_test(test_replay_simple_sync),
		cmocka_unit_test(test_replay_async_streams),
		cmocka_unit_test(test_replay_fence_gap),
		cmocka_unit_test(test_replay_vmm),
		cmocka_unit_test(test_replay_fence_policies),
		cmocka_unit_test(test_replay_time),
		cmocka_unit_test(test_malformed),
		cmocka_unit_test(test_replay_bad_device),
		cmocka_unit_test(test_replay_hostile_sizes),
		cmocka_unit_test(test_replay_address_space_used_up),
		cmocka_unit_test(test_replay_hostile_knobs),
		cmocka_unit_test(test_replay_fence_deadline_saturates),
		cmocka_unit_test(test_missing_file),
		cmocka_unit_test(test_truncated_gzip),
		cmocka_unit_test(test_gzip_trailing_bytes),
		cmocka_unit_test(test_stdin),
		cmocka_unit_test(test_recorder_roundtrip),
		cmocka_unit_test(test_recorder_many_threads),
		cmocka_unit_test(test_recorder_replays),
		cmocka_unit_test(test_recorder_overhead),
	};
	return cmocka_run_group_tests(tests, setup_all, teardown_all);
}
