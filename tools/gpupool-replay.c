/* gpupool-replay: replays a recorded allocation trace (docs/replay.md) through
 * gp_pool on the fake backend and prints the peaks, ratios, backend calls and time per op
 * as key=value lines. Exit 0 on success, 1 on a pool failure, 2 on bad usage, a bad knob
 * or input the pool cannot take. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "log.h"
#include "replay.h"

static const char *g_conf;

static const char *conf_lookup(const char *name)
{
	if (strcmp(name, "GPUPOOL_CONF") == 0)
		return g_conf ? g_conf : getenv(name);
	return NULL;
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: gpupool-replay [--conf KNOBS] [--check] [--sort-window ROWS]\n"
		"                      [--fence-latency-us US] [--limit-rows N] TRACE\n"
		"Replays TRACE (CSV or gzip'd CSV: t_ns,op,tid,dev,stream,size,ptr,dur_ns,err)\n"
		"through gpupool's pool on a fake backend with unlimited capacity.\n"
		"  --conf KNOBS          GPUPOOL_CONF syntax (default: $GPUPOOL_CONF)\n"
		"  --check               run the pool's invariant checker after every op\n"
		"  --sort-window ROWS    restore t_ns order within ROWS rows (default 0: file order)\n"
		"  --fence-latency-us US how far the modelled GPU lags the program (default 0)\n"
		"  --limit-rows N        replay the first N rows only\n"
		"  --version             print the version and exit\n");
}

static unsigned long long num_arg(const char *opt, const char *v, unsigned long long max)
{
	char *end;
	errno = 0;
	unsigned long long x = v ? strtoull(v, &end, 10) : 0;
	if (!v || errno || end == v || *end || v[0] == '-' || x > max) {
		fprintf(stderr, "gpupool-replay: %s needs a number from 0 to %llu, got '%s'\n", opt,
			max, v ? v : "");
		exit(2);
	}
	return x;
}

int main(int argc, char **argv)
{
	struct gp_replay_opts o;
	struct gp_config cfg;
	const char *path = NULL;
	bool check = false;

	gp_replay_opts_default(&o);
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (strcmp(a, "--conf") == 0 && v) {
			g_conf = v;
			i++;
		} else if (strncmp(a, "--conf=", 7) == 0) {
			g_conf = a + 7;
		} else if (strcmp(a, "--check") == 0) {
			check = true;
		} else if (strcmp(a, "--sort-window") == 0) {
			o.sort_window = num_arg(a, v, 1u << 20);
			i++;
		} else if (strcmp(a, "--fence-latency-us") == 0) {
			o.fence_latency_us = (unsigned)num_arg(a, v, 10000000);
			i++;
		} else if (strcmp(a, "--limit-rows") == 0) {
			o.limit_rows = num_arg(a, v, ULLONG_MAX);
			i++;
		} else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
			usage(stdout);
			return 0;
		} else if (strcmp(a, "--version") == 0) {
			printf("gpupool-replay %s\n", GP_VERSION);
			return 0;
		} else if (a[0] == '-' || path) {
			usage(stderr);
			return 2;
		} else {
			path = a;
		}
	}
	if (!path) {
		usage(stderr);
		return 2;
	}
	/* a bad knob is logged in one line; the shim would run with its default, but a replay
	 * measures the knobs it was given, so it stops */
	if (gp_config_parse(&cfg, conf_lookup) < 0 || cfg.bad) {
		fprintf(stderr, "gpupool-replay: not replaying: a knob above is bad\n");
		return 2;
	}
	gp_log_set_level(cfg.log_level);
	gp_replay_opts_from_config(&o, &cfg); /* the fake device: a % limit has no total */
	o.params.check = o.params.check || check;

	struct gp_replay_result r;
	int rc = gp_replay_file(path, &o, &r);
	if (rc == -EFAULT) {
		fprintf(stderr, "gpupool-replay: %s\n", r.error);
		return 1;
	}
	if (rc) {
		fprintf(stderr, "gpupool-replay: %s\n", r.error[0] ? r.error : strerror(-rc));
		return 2;
	}
	gp_replay_print(stdout, &r);
	return 0;
}
