/* gpupool-replay: replays a recorded allocation trace (docs/replay.md; "-": standard input)
 * through gp_pool on the fake backend and prints the peaks, ratios, backend calls and time
 * per op as key=value lines, or one JSON object (--json); optionally writes PyTorch's memory
 * snapshot of the replay, a memory timeline (CSV) and its plot (PNG, SVG or PDF, through
 * gpupool-plot). Every output is made before the replay and removed when anything fails,
 * and the figures are printed only when everything succeeded. Exit 0 on success, 1 on a
 * pool failure, 2 on bad usage, a bad knob, input the pool cannot take or an output that
 * could not be written. */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "config.h"
#include "log.h"
#include "outfile.h"
#include "replay.h"
#include "snapshot.h"
#include "timeline.h"
#include "tracefile.h"

static const char *g_conf;

static const char *conf_lookup(const char *name)
{
	if (strcmp(name, "GPUPOOL_CONF") == 0)
		return g_conf ? g_conf : getenv(name);
	return NULL;
}

static const char short_usage[] = "usage: gpupool-replay [OPTIONS] TRACE\n";

static void usage(FILE *f)
{
	fputs(short_usage, f);
	fprintf(f,
		"Replays TRACE (CSV or gzip'd CSV: t_ns,op,tid,dev,stream,size,ptr,dur_ns,err;\n"
		"- reads standard input) through gpupool's pool on a fake backend with unlimited\n"
		"capacity, and prints what the pool did as key=value lines.\n"
		"  --conf KNOBS              GPUPOOL_CONF syntax (default: $GPUPOOL_CONF); a bad\n"
		"                            knob stops the replay (exit 2)\n"
		"  --check                   the pool's invariant checker after every op\n"
		"  --sort-window ROWS        restore t_ns order within ROWS rows (default 0)\n"
		"  --fence-latency-us US     how far the modelled GPU lags (default 0)\n"
		"  --granularity SIZE        the modelled GPU's virtual-memory chunk, a power of\n"
		"                            two from 4K to 1G (default 2M, an H100's); 0: no\n"
		"                            virtual memory management (whole segments)\n"
		"  --vmm-cost-us US[,UNMAP]  modelled host time of mapping one chunk (its\n"
		"                            access included) and of unmapping one: one figure\n"
		"                            for both (default 20), or two; an H100 measured\n"
		"                            38,29 (BENCHMARKS.md section 28)\n"
		"  --limit-rows N            replay the first N rows only (the outputs below\n"
		"                            show the pool as it was after row N)\n"
		"  --torch-snapshot OUT      PyTorch's memory snapshot of the replay (what\n"
		"                            torch.cuda.memory._dump_snapshot writes): open it\n"
		"                            at https://pytorch.org/memory_viz\n"
		"  --snapshot-max-entries N  events kept per device (default %u)\n"
		"  --timeline OUT.csv        requested, allocated and reserved bytes per device\n"
		"                            over trace time\n"
		"  --timeline-rows N         at most N rows, each the peak of those it stands\n"
		"                            for (default %u; 0: one row per change)\n"
		"  --plot OUT.png            the timeline plotted by gpupool-plot (python3 and\n"
		"                            matplotlib); .svg and .pdf give those formats\n"
		"  --json                    the figures as one JSON object instead\n"
		"  --knobs                   only check the knobs (no TRACE): exit 2 if refused\n"
		"  -h, --help                this text\n"
		"  -V, --version             the version\n",
		GP_SNAPSHOT_MAX_ENTRIES, GP_TIMELINE_MAX_ROWS);
}

__attribute__((format(printf, 1, 2))) static _Noreturn void bad_usage(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fputs("gpupool-replay: ", stderr);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputs(" (usage: gpupool-replay [OPTIONS] TRACE; --help lists them)\n", stderr);
	exit(2);
}

/* A number from min to max at the start of v, into *x, with *end just after it; false when
 * there is none there or it is out of range. */
static bool num_at(const char *v, unsigned long long min, unsigned long long max, unsigned long long *x,
		   const char **end)
{
	char *e;
	if (!v || v[0] == '-')
		return false;
	errno = 0;
	*x = strtoull(v, &e, 10);
	*end = e;
	return !errno && e != v && *x >= min && *x <= max;
}

static unsigned long long num_arg(const char *opt, const char *v, unsigned long long min, unsigned long long max)
{
	unsigned long long x = 0;
	const char *end = NULL;
	if (!num_at(v, min, max, &x, &end) || *end)
		bad_usage("%s needs a number from %llu to %llu, got '%s'", opt, min, max, v ? v : "");
	return x;
}

/* --vmm-cost-us US[,UNMAP]: the map cost, and the unmap cost (the same when not given). */
static void vmm_cost_arg(const char *v, struct gp_replay_opts *o)
{
	unsigned long long m = 0, u = 0;
	const char *end = NULL;
	bool ok = num_at(v, 0, 1000000, &m, &end);
	if (ok && *end == ',') {
		ok = num_at(end + 1, 0, 1000000, &u, &end) && !*end;
	} else if (ok) {
		ok = !*end;
		u = m;
	}
	if (!ok)
		bad_usage("--vmm-cost-us needs US or MAP,UNMAP, microseconds from 0 to 1000000, got '%s'", v ? v : "");
	o->vmm_cost_us = (unsigned)m;
	o->vmm_unmap_cost_us = (unsigned)u;
}

/* --granularity: 0, or a power of two from 4K to 1G, in the knobs' size syntax. */
static size_t granularity_arg(const char *v)
{
	size_t g = 0;
	if (!v || gp_config_parse_size(v, &g) || (g && (g < 4096 || g > ((size_t)1 << 30) || (g & (g - 1)))))
		bad_usage("--granularity needs 0 or a power of two from 4K to 1G, got '%s'", v ? v : "");
	return g;
}

/* Whether `path` names an executable file (not a directory). */
static bool executable_file(const char *path)
{
	struct stat st;
	return access(path, X_OK) == 0 && stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* gpupool-plot into buf: $GPUPOOL_PLOT, else next to this program (installed together), else
 * on PATH, else the source tree's scripts/ (a program run from a Meson build tree). Found
 * before the replay, so that a plot that cannot be made stops nothing long. 0, or -ENOENT. */
static int find_plot(char *buf, size_t len)
{
	const char *env = getenv("GPUPOOL_PLOT");
	if (env && *env) {
		snprintf(buf, len, "%s", env);
		return executable_file(buf) ? 0 : -ENOENT;
	}
	char self[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
	if (n > 0) {
		self[n] = 0;
		char *slash = strrchr(self, '/');
		if (slash) {
			*slash = 0;
			snprintf(buf, len, "%s/gpupool-plot", self);
			if (executable_file(buf))
				return 0;
		}
	}
	const char *path = getenv("PATH");
	for (const char *d = path ? path : ""; *d;) {
		size_t l = strcspn(d, ":");
		snprintf(buf, len, "%.*s%sgpupool-plot", (int)l, d, l ? "/" : "");
		if (l && executable_file(buf))
			return 0;
		d += l + (d[l] == ':');
	}
#ifdef GP_PLOT_SOURCE
	snprintf(buf, len, "%s", GP_PLOT_SOURCE);
	if (executable_file(buf))
		return 0;
#endif
	return -ENOENT;
}

/* Runs gpupool-plot (prog) on the timeline csv: its exit status, or 128 + the signal. */
static int run_plot(const char *prog, const char *csv, const char *out, const char *trace)
{
	fflush(stdout);
	pid_t pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		const char *base = strrchr(trace, '/') ? strrchr(trace, '/') + 1 : trace;
		char title[300];
		snprintf(title, sizeof title, "%.200s replayed by gpupool", base);
		char *argv[] = {"gpupool-plot", (char *)csv, (char *)out, "--title", title, NULL};
		execv(prog, argv);
		fprintf(stderr, "gpupool-replay: cannot run %s: %s; set GPUPOOL_PLOT=/path/to/gpupool-plot\n", prog,
			strerror(errno));
		_exit(127);
	}
	int st;
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return -errno;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
}

/* The formats gpupool-plot writes, by the output's extension (as it reads it). */
static bool plot_format_ok(const char *path)
{
	const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
	const char *dot = strrchr(base, '.');
	return dot && dot != base && (!strcasecmp(dot, ".png") || !strcasecmp(dot, ".svg") || !strcasecmp(dot, ".pdf"));
}

static bool same_file(const char *a, const char *b)
{
	struct stat x, y;
	if (strcmp(b, "-") == 0) /* the trace on standard input: the file behind it, if any */
		return fstat(STDIN_FILENO, &y) == 0 && stat(a, &x) == 0 && x.st_dev == y.st_dev && x.st_ino == y.st_ino;
	if (strcmp(a, b) == 0)
		return true;
	return stat(a, &x) == 0 && stat(b, &y) == 0 && x.st_dev == y.st_dev && x.st_ino == y.st_ino;
}

/* The files this run made (emptied or created): all removed when anything fails, since an
 * output of a replay that did not finish, or half of a run's outputs, would mislead. */
static const char *g_made[4];
static int g_nmade;

static void made(const char *path)
{
	g_made[g_nmade++] = path;
}

static int fail_removing_outputs(int status)
{
	for (int i = 0; i < g_nmade; i++)
		if (g_made[i])
			unlink(g_made[i]);
	g_nmade = 0;
	return status;
}

/* --knobs: the knobs as libgpupool.so reads them (GPUPOOL_CONF or --conf, and a scheduler's
 * variables), each bad one in the library's own line; exit 2 where the library would refuse
 * every allocation (a cap that cannot be applied as asked, strict mode), else "knobs: ..."
 * and 0. gpupool-run asks it before it runs a command. */
static const char *knobs_lookup(const char *name)
{
	return strcmp(name, "GPUPOOL_CONF") == 0 && g_conf ? g_conf : getenv(name); /* as the library's */
}

static int knobs_only(struct gp_config *cfg)
{
	int rc = gp_config_parse(cfg, knobs_lookup);
	if (!cfg->disable && (rc < 0 || cfg->cap_refused)) {
		fprintf(stderr, "gpupool-replay: with these knobs libgpupool.so refuses every allocation (docs/security.md, "
				"\"Caps that cannot be applied\")\n");
		return 2;
	}
	char buf[1024];
	gp_config_describe(cfg, buf, sizeof buf);
	printf("knobs: %s\n", buf[0] ? buf : "all at their defaults (no limit)");
	return 0;
}

enum {
	O_CONF = 1000, O_CHECK, O_SORT, O_LAT, O_GRAN, O_VMMCOST, O_LIMIT, O_SNAP, O_SNAP_MAX, O_TIMELINE, O_TL_ROWS, O_PLOT,
	O_JSON, O_VERSION, O_KNOBS,
};

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{"conf", required_argument, NULL, O_CONF},
		{"check", no_argument, NULL, O_CHECK},
		{"sort-window", required_argument, NULL, O_SORT},
		{"fence-latency-us", required_argument, NULL, O_LAT},
		{"granularity", required_argument, NULL, O_GRAN},
		{"vmm-cost-us", required_argument, NULL, O_VMMCOST},
		{"limit-rows", required_argument, NULL, O_LIMIT},
		{"torch-snapshot", required_argument, NULL, O_SNAP},
		{"snapshot-max-entries", required_argument, NULL, O_SNAP_MAX},
		{"timeline", required_argument, NULL, O_TIMELINE},
		{"timeline-rows", required_argument, NULL, O_TL_ROWS},
		{"plot", required_argument, NULL, O_PLOT},
		{"json", no_argument, NULL, O_JSON},
		{"knobs", no_argument, NULL, O_KNOBS},
		{"help", no_argument, NULL, 'h'},
		{"version", no_argument, NULL, O_VERSION},
		{NULL, 0, NULL, 0},
	};
	struct gp_replay_opts o;
	struct gp_config cfg;
	bool check = false, snap_max_set = false, tl_rows_set = false, json = false, knobs = false;
	const char *snap_path = NULL, *tl_path = NULL, *plot_path = NULL;
	uint64_t snap_max = 0, tl_rows = GP_TIMELINE_MAX_ROWS;

	gp_replay_opts_default(&o);
	opterr = 0; /* our own one-line messages */
	int c;
	while ((c = getopt_long(argc, argv, ":hV", longopts, NULL)) != -1) {
		const char *opt = optind > 1 && optind - 1 < argc ? argv[optind - 1] : "?";
		switch (c) {
		case O_CONF: g_conf = optarg; break;
		case O_CHECK: check = true; break;
		case O_KNOBS: knobs = true; break;
		case O_SORT: o.sort_window = num_arg("--sort-window", optarg, 0, 1u << 20); break;
		case O_LAT: o.fence_latency_us = (unsigned)num_arg("--fence-latency-us", optarg, 0, 10000000); break;
		case O_GRAN: o.granularity = granularity_arg(optarg); break;
		case O_VMMCOST: vmm_cost_arg(optarg, &o); break;
		case O_LIMIT: o.limit_rows = num_arg("--limit-rows", optarg, 0, ULLONG_MAX); break;
		case O_SNAP: snap_path = optarg; break;
		case O_SNAP_MAX:
			snap_max = num_arg("--snapshot-max-entries", optarg, 1, UINT32_MAX);
			snap_max_set = true;
			break;
		case O_TIMELINE: tl_path = optarg; break;
		case O_TL_ROWS:
			/* each device keeps its first and last point: 1 cannot be honoured */
			tl_rows = num_arg("--timeline-rows", optarg, 0, UINT32_MAX);
			if (tl_rows == 1)
				bad_usage("--timeline-rows needs 0 (every change) or at least 2, got '%s'", optarg);
			tl_rows_set = true;
			break;
		case O_PLOT: plot_path = optarg; break;
		case O_JSON: json = true; break;
		case 'h': usage(stdout); return 0;
		case 'V':
		case O_VERSION: printf("gpupool-replay %s\n", GP_VERSION); return 0;
		case ':': bad_usage("option %s needs a value", opt); break;
		default:
			/* a known long option given a value it does not take: optopt is its val */
			for (const struct option *lo = longopts; lo->name; lo++)
				if (optopt && lo->val == optopt && lo->has_arg == no_argument)
					bad_usage("option --%s takes no value", lo->name);
			/* getopt leaves the unknown word in argv[optind - 1] (long) or optopt (short) */
			if (optopt && optopt < 256) {
				char s[3] = {'-', (char)optopt, 0};
				bad_usage("unknown option %s", s);
			}
			bad_usage("unknown option %s", opt);
		}
	}
	if (knobs) {
		if (optind < argc)
			bad_usage("--knobs takes no TRACE");
		return knobs_only(&cfg);
	}
	if (optind >= argc)
		bad_usage("no TRACE given");
	if (argc - optind > 1)
		bad_usage("one TRACE expected; '%s' is one too many", argv[optind + 1]);
	const char *path = argv[optind];
	const char *name = strcmp(path, "-") == 0 ? GP_TRACEFILE_STDIN : path; /* in outputs and messages */
	if (snap_max_set && !snap_path)
		bad_usage("--snapshot-max-entries is for --torch-snapshot, which is not given");
	if (tl_rows_set && !tl_path && !plot_path)
		bad_usage("--timeline-rows is for --timeline or --plot, neither given");
	struct stat pst;
	if (plot_path && stat(plot_path, &pst) == 0 && S_ISDIR(pst.st_mode))
		bad_usage("--plot names a directory, '%s': give it a file name ending in .png, .svg or .pdf", plot_path);
	if (plot_path && !plot_format_ok(plot_path))
		bad_usage("--plot writes PNG, SVG or PDF, by the name's extension: '%s' ends in none of .png, .svg, .pdf",
			  plot_path);
	const char *outs[3] = {snap_path, tl_path, plot_path};
	const char *names[3] = {"--torch-snapshot", "--timeline", "--plot"};
	for (int i = 0; i < 3; i++) {
		if (outs[i] && same_file(outs[i], path))
			bad_usage("%s would overwrite TRACE", names[i]);
		for (int j = i + 1; j < 3; j++)
			if (outs[i] && outs[j] && same_file(outs[i], outs[j]))
				bad_usage("%s and %s name the same file", names[i], names[j]);
	}
	/* a bad knob is logged in one line; the shim would run with its default, but a replay
	 * measures the knobs it was given, so it stops */
	if (gp_config_parse(&cfg, conf_lookup) < 0 || cfg.bad) {
		fprintf(stderr, "gpupool-replay: not replaying: a knob above is bad (--conf or GPUPOOL_CONF)\n");
		return 2;
	}
	gp_log_set_level(cfg.log_level);
	gp_replay_opts_from_config(&o, &cfg); /* the fake device: a % limit has no total */
	o.params.check = o.params.check || check;

	/* Every output before the replay: one that cannot be written stops here, in one line,
	 * not after a long replay; each one made is removed if anything later fails. */
	char plot_prog[PATH_MAX + 32];
	if (plot_path && find_plot(plot_prog, sizeof plot_prog)) {
		fprintf(stderr, "gpupool-replay: --plot: cannot find gpupool-plot (%s); set "
			"GPUPOOL_PLOT=/path/to/gpupool-plot\n", getenv("GPUPOOL_PLOT") && *getenv("GPUPOOL_PLOT")
				? "GPUPOOL_PLOT does not name an executable file"
				: "not next to gpupool-replay nor on PATH");
		return 2;
	}
	struct gp_snapshot *snap = NULL;
	struct gp_timeline *tl = NULL;
	bool tmp_made = false;
	int rc;
	if (plot_path) {
		/* gpupool-plot writes it later, over what is checked and made here */
		int fd = gp_outfile_open(plot_path, 0644);
		if (fd < 0) {
			fprintf(stderr, "gpupool-replay: cannot write %s: %s\n", plot_path, gp_outfile_strerror(fd));
			return 2;
		}
		close(fd);
		made(plot_path);
	}
	if (snap_path) {
		const char *conf = conf_lookup("GPUPOOL_CONF");
		struct gp_snapshot_opts so = {.trace_path = name, .conf = conf ? conf : "",
					      .max_split_size = o.params.max_split_size, .max_entries = snap_max};
		rc = gp_snapshot_new(&snap, snap_path, &so);
		if (rc) {
			fprintf(stderr, "gpupool-replay: cannot write %s: %s\n", snap_path, gp_outfile_strerror(rc));
			return fail_removing_outputs(2);
		}
		made(snap_path);
		o.observers[0] = gp_snapshot_observer(snap);
	}
	if (plot_path && !tl_path) {
		const char *td = getenv("TMPDIR");
		static char tbuf[PATH_MAX];
		snprintf(tbuf, sizeof tbuf, "%s/gpupool-timeline.XXXXXX", td && *td ? td : "/tmp");
		int fd = mkstemp(tbuf);
		if (fd < 0) {
			fprintf(stderr, "gpupool-replay: cannot make a temporary file for the plot's timeline: %s\n",
				strerror(errno));
			gp_snapshot_close(snap);
			return fail_removing_outputs(2);
		}
		close(fd);
		tmp_made = true;
		tl_path = tbuf;
		made(tl_path);
	}
	if (tl_path) {
		rc = gp_timeline_new(&tl, tl_path, tl_rows);
		if (rc) {
			fprintf(stderr, "gpupool-replay: cannot write %s: %s\n", tl_path, gp_outfile_strerror(rc));
			gp_snapshot_close(snap);
			return fail_removing_outputs(2);
		}
		if (!tmp_made)
			made(tl_path);
		o.observers[1] = gp_timeline_observer(tl);
	}

	struct gp_replay_result r;
	rc = gp_replay_file(path, &o, &r);
	int crc = gp_snapshot_close(snap);
	int trc = gp_timeline_close(tl);
	if (rc) {
		fprintf(stderr, "gpupool-replay: %s\n", r.error[0] ? r.error : strerror(-rc));
		return fail_removing_outputs(rc == -EFAULT ? 1 : 2);
	}
	if (crc || trc) {
		fprintf(stderr, "gpupool-replay: writing %s failed: %s\n", crc ? snap_path : tl_path,
			strerror(-(crc ? crc : trc)));
		return fail_removing_outputs(2);
	}
	if (plot_path) {
		int prc = run_plot(plot_prog, tl_path, plot_path, name);
		if (prc) {
			fprintf(stderr, "gpupool-replay: the plot was not made (gpupool-plot exited %d); no output kept\n",
				prc);
			return fail_removing_outputs(2);
		}
	}
	if (tmp_made) {
		unlink(tl_path);
		for (int i = 0; i < g_nmade; i++)
			if (g_made[i] == tl_path)
				g_made[i] = NULL;
	}
	if (json) {
		const char *conf = conf_lookup("GPUPOOL_CONF");
		gp_replay_print_json(stdout, &r, path, conf ? conf : "");
	} else {
		gp_replay_print(stdout, &r);
	}
	if (fflush(stdout) != 0 || ferror(stdout)) {
		fprintf(stderr, "gpupool-replay: cannot print the figures: %s\n", strerror(errno));
		return fail_removing_outputs(2);
	}
	return 0;
}
