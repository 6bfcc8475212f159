/* Fuzz harness of the trace reader (tracefile.c) and the replay engine (replay.c): the input
 * is a trace file, plain or gzip'd. It is read in file order and through a sort window (the
 * same rows, the same error), then replayed with the invariant checker after every row under
 * the default knobs and under hostile ones (sizes at their caps, a limit, fence:sync), so the
 * pool sees every size and order the reader lets through. An input that starts with '#'
 * carries its own knobs: its first line, after the '#', is a GPUPOOL_CONF for one more replay,
 * and the trace is the rest (a trace itself starts with its header). */
#include <errno.h>
#include <stdbool.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "config.h"
#include "fuzz.h"
#include "replay.h"
#include "tracefile.h"

/* Knobs the trace is replayed under: the defaults; small caches and a limit; sizes at the
 * largest the knob table takes. */
static const char *const confs[] = {
	"",
	"fence:sync,release_threshold:0,limit:64M,max_split_size:20M,round:2M",
	("fence:inline,round:2M,small_max:2M,small_segment:256T,medium_max:256T,medium_segment:256T,"
	 "large_round:1G,release_threshold:256T"),
};
#define NCONFS (sizeof confs / sizeof confs[0])

static const char *g_conf;

static const char *conf_lookup(const char *name)
{
	return strcmp(name, "GPUPOOL_CONF") == 0 ? g_conf : NULL;
}

static int g_fd = -1;
static char g_path[64];
static struct gp_replay_opts g_opts[NCONFS];

/* The replay options of `conf`, as gpupool-replay --check --conf would set them (a bad knob
 * gets its default, as in the shim). Returns whether the knobs were all good. */
static bool opts_for(const char *conf, struct gp_replay_opts *o)
{
	struct gp_config c;
	g_conf = conf;
	(void)gp_config_parse(&c, conf_lookup);
	gp_replay_opts_default(o);
	gp_replay_opts_from_config(o, &c);
	o->params.check = true;
	return !c.bad;
}

static void init(void)
{
	g_fd = memfd_create("fuzz_trace", MFD_CLOEXEC);
	FUZZ_CHECK(g_fd >= 0);
	snprintf(g_path, sizeof g_path, "/proc/self/fd/%d", g_fd);
	for (size_t i = 0; i < NCONFS; i++) {
		FUZZ_CHECK(opts_for(confs[i], &g_opts[i]));
		g_opts[i].sort_window = i == 1 ? 4 : 0;
		g_opts[i].fence_latency_us = i == 0 ? 0 : 100;
	}
}

/* What one read of the file gave. */
struct readout {
	int rc;                 /* 0 at the end, or the error */
	uint64_t rows, t_sum;
	char err[700];
};

static void read_all(size_t window, struct readout *out)
{
	struct gp_tracefile *tf;
	struct gp_trace_row row;
	char err[700] = "";
	memset(out, 0, sizeof *out);
	out->rc = gp_tracefile_open(&tf, g_path, window, err, sizeof err);
	if (out->rc) {
		FUZZ_CHECK(out->rc == -EINVAL || out->rc == -EIO);
		FUZZ_CHECK(strncmp(err, g_path, strlen(g_path)) == 0);
		snprintf(out->err, sizeof out->err, "%s", err);
		return;
	}
	uint64_t last_t = 0;
	unsigned long last_line = 1;
	while ((out->rc = gp_tracefile_next(tf, &row)) == 1) {
		FUZZ_CHECK(row.op >= GP_TRACE_MALLOC && row.op <= GP_TRACE_FREE_ASYNC);
		FUZZ_CHECK(row.dev >= 0 && row.dev <= GP_TRACEFILE_DEV_MAX);
		FUZZ_CHECK(row.size <= GP_TRACEFILE_SIZE_MAX && row.tid >= 0 && row.err >= 0);
		FUZZ_CHECK(row.op == GP_TRACE_MALLOC || row.op == GP_TRACE_MALLOC_ASYNC || row.size == 0);
		FUZZ_CHECK(row.op == GP_TRACE_MALLOC_ASYNC || row.op == GP_TRACE_FREE_ASYNC || row.stream == 0);
		FUZZ_CHECK(row.line >= 2 && row.line <= gp_tracefile_line(tf));
		if (!window)
			FUZZ_CHECK(row.line > last_line);
		else if (gp_tracefile_out_of_order(tf) == 0)
			FUZZ_CHECK(row.t_ns >= last_t);
		last_t = row.t_ns;
		last_line = row.line;
		out->rows++;
		out->t_sum += row.t_ns;
	}
	FUZZ_CHECK(out->rc == 0 || out->rc == -EINVAL || out->rc == -EIO);
	if (out->rc) {
		snprintf(out->err, sizeof out->err, "%s", gp_tracefile_error(tf));
		FUZZ_CHECK(strncmp(out->err, g_path, strlen(g_path)) == 0);
		FUZZ_CHECK(gp_tracefile_next(tf, &row) == out->rc); /* errors are sticky */
	}
	gp_tracefile_close(tf);
}

static void replay(const struct gp_replay_opts *o, const struct readout *plain)
{
	struct gp_replay_result r;
	int rc = gp_replay_file(g_path, o, &r);
	/* -EFAULT: the pool refused a free of a block it handed out, or broke an invariant */
	FUZZ_CHECK(rc == 0 || rc == -EINVAL || rc == -EIO || rc == -ERANGE || rc == -ENOMEM);
	if (rc) {
		FUZZ_CHECK(r.error[0] != '\0');
		return;
	}
	FUZZ_CHECK(plain->rc == 0 && r.ops == plain->rows);
	FUZZ_CHECK(r.allocs + r.frees + r.skipped_errors + r.unknown_frees + r.null_frees + r.zero_allocs +
			   r.alloc_failures == r.ops);
	FUZZ_CHECK(r.live_at_end <= r.allocs);
	FUZZ_CHECK(r.peak_requested <= r.peak_allocated && r.peak_allocated <= r.peak_reserved);
	FUZZ_CHECK(r.devices <= GPUPOOL_MAX_DEVICES);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *conf = NULL;
	if (g_fd < 0)
		init();
	if (size && data[0] == '#') {
		const uint8_t *nl = memchr(data, '\n', size);
		size_t len = nl ? (size_t)(nl - data) : size;
		conf = strndup((const char *)data + 1, len - 1);
		data += nl ? len + 1 : len;
		size -= nl ? len + 1 : len;
	}
	FUZZ_CHECK(ftruncate(g_fd, 0) == 0);
	FUZZ_CHECK(pwrite(g_fd, data, size, 0) == (ssize_t)size);

	struct readout plain, sorted;
	read_all(0, &plain);
	read_all(3, &sorted);
	/* a window reorders rows, it does not lose them or change the error */
	FUZZ_CHECK(sorted.rc == plain.rc && strcmp(sorted.err, plain.err) == 0);
	FUZZ_CHECK(plain.rc ? sorted.rows <= plain.rows : sorted.rows == plain.rows && sorted.t_sum == plain.t_sum);

	for (size_t i = 0; i < NCONFS; i++)
		replay(&g_opts[i], &plain);
	if (conf) {
		struct gp_replay_opts o;
		(void)opts_for(conf, &o);
		replay(&o, &plain);
		free(conf);
	}
	return 0;
}
