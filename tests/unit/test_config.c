/* Unit tests of the config layer (src/config/): defaults, every knob, every kind of bad value
 * (default kept, cfg->bad set, exactly one log line naming the variable and the value), strict
 * mode, the standalone switches, docs/knobs.md against gp_config_print_knobs(), and the pool
 * parameters the knobs map to. Depends on config.h, log.c and pool.h's parameters only.
 * Run with --print-knobs to regenerate the table. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "config.h"
#include "log.h"
#include "pool.h"

#define MIB ((size_t)1 << 20)

/* The fake environment the parser reads. */
static const char *env_conf, *env_disable, *env_report, *env_log;
/* Any other variable: "NAME=value" entries, NULL-terminated. */
static const char *const *env_more;

static const char *fake_getenv(const char *name)
{
	for (const char *const *e = env_more; e && *e; e++) {
		size_t n = strlen(name);
		if (strncmp(*e, name, n) == 0 && (*e)[n] == '=')
			return *e + n + 1;
	}
	if (strcmp(name, "GPUPOOL_CONF") == 0)
		return env_conf;
	if (strcmp(name, "GPUPOOL_DISABLE") == 0)
		return env_disable;
	if (strcmp(name, "GPUPOOL_REPORT") == 0)
		return env_report;
	if (strcmp(name, "GPUPOOL_LOG") == 0)
		return env_log;
	return NULL;
}

static int reset_env(void **state)
{
	(void)state;
	env_conf = env_disable = env_report = env_log = NULL;
	env_more = NULL;
	return 0;
}

/* What gp_log wrote to fd 2 during the last parse. */
static char logbuf[8192];

static int parse_capture(struct gp_config *cfg)
{
	FILE *tmp = tmpfile();
	assert_non_null(tmp);
	fflush(stderr);
	int saved = dup(2);
	assert_true(saved >= 0);
	assert_true(dup2(fileno(tmp), 2) >= 0);
	int rc = gp_config_parse(cfg, fake_getenv);
	assert_true(dup2(saved, 2) >= 0);
	close(saved);
	rewind(tmp);
	size_t n = fread(logbuf, 1, sizeof logbuf - 1, tmp);
	logbuf[n] = '\0';
	fclose(tmp);
	return rc;
}

static int log_lines(void)
{
	int n = 0;
	for (const char *p = logbuf; *p; p++)
		n += *p == '\n';
	return n;
}

static void assert_log_has(const char *needle)
{
	if (!strstr(logbuf, needle))
		fail_msg("log lacks \"%s\":\n%s", needle, logbuf);
}

/* All knobs at their documented defaults (bad aside). */
static void assert_defaults(const struct gp_config *c)
{
	assert_false(c->disable);
	assert_false(c->strict);
	assert_int_equal(c->log_level, GP_LOG_WARN);
	assert_int_equal(c->limit_bytes, 0);
	assert_int_equal(c->limit_percent, 0);
	assert_int_equal(c->round, 512);
	assert_int_equal(c->small_max, 1 * MIB);
	assert_int_equal(c->small_segment, 2 * MIB);
	assert_int_equal(c->medium_max, 10 * MIB);
	assert_int_equal(c->medium_segment, 20 * MIB);
	assert_int_equal(c->large_round, 2 * MIB);
	assert_true(c->max_split_size == SIZE_MAX);
	assert_true(c->release_threshold == SIZE_MAX);
	assert_int_equal(c->fence, GP_FENCE_THREAD);
	assert_int_equal(c->fence_interval_us, 50);
	assert_string_equal(c->report, "stderr");
	assert_int_equal(c->report_format, GP_REPORT_TEXT);
	assert_true(c->stats_page);
	assert_string_equal(c->trace, "");
	assert_false(c->check);
}

static void test_defaults(void **state)
{
	(void)state;
	struct gp_config c;
	assert_int_equal(parse_capture(&c), 0);
	assert_defaults(&c);
	assert_false(c.bad);
	assert_int_equal(log_lines(), 0);
	env_conf = "  ";
	assert_int_equal(parse_capture(&c), 0);
	assert_defaults(&c);
	assert_false(c.bad);
	assert_int_equal(log_lines(), 0);
}

/* The knobs in effect as the exit report prints them: only those off their defaults, in the
 * syntax GPUPOOL_CONF takes, and parsing that text back gives the same configuration. */
static void test_describe(void **state)
{
	(void)state;
	struct gp_config c, back;
	char buf[512];
	assert_int_equal(parse_capture(&c), 0);
	assert_int_equal(gp_config_describe(&c, buf, sizeof buf), 0);
	assert_string_equal(buf, "");
	env_conf = "limit:50%,max_split_size:256MiB,fence_interval_us:100,round:1024,release_threshold:0";
	env_log = "info";
	assert_int_equal(parse_capture(&c), 0);
	size_t n = gp_config_describe(&c, buf, sizeof buf);
	assert_string_equal(buf, "limit:50%,round:1K,max_split_size:256M,release_threshold:0,fence_interval_us:100,"
				 "log:info");
	assert_int_equal(n, strlen(buf));
	env_conf = buf;
	env_log = NULL;
	assert_int_equal(parse_capture(&back), 0);
	assert_false(back.bad);
	assert_memory_equal(&back, &c, sizeof c);
	env_conf = "limit:3000,trace:/tmp/x.csv";
	assert_int_equal(parse_capture(&c), 0);
	n = gp_config_describe(&c, buf, 10); /* cut, NUL-terminated, the full length returned */
	assert_string_equal(buf, "limit:300");
	assert_int_equal(n, strlen("limit:3000,trace:/tmp/x.csv"));
}

/* A limit from a scheduler's variables in the knobs line: each value with the variables that
 * set it, the per-device ones only where they differ from the one for every device. */
static void test_describe_sched(void **state)
{
	(void)state;
	struct gp_config c;
	char buf[512];
	static const char *const one[] = {"CUDA_DEVICE_MEMORY_LIMIT_0=3000m", NULL};
	env_more = one;
	assert_int_equal(parse_capture(&c), 0);
	size_t n = gp_config_describe(&c, buf, sizeof buf);
	assert_string_equal(buf, "limit:3000M (CUDA_DEVICE_MEMORY_LIMIT_0)");
	assert_int_equal(n, strlen(buf));

	static const char *const every[] = {"CUDA_DEVICE_MEMORY_LIMIT=4g", NULL};
	env_more = every;
	env_conf = "fence:sync";
	assert_int_equal(parse_capture(&c), 0);
	gp_config_describe(&c, buf, sizeof buf);
	assert_string_equal(buf, "limit:4G (CUDA_DEVICE_MEMORY_LIMIT),fence:sync");

	static const char *const same[] = {"CUDA_DEVICE_MEMORY_LIMIT_0=3000m", "CUDA_DEVICE_MEMORY_LIMIT_1=3000m",
					   "CUDA_DEVICE_MEMORY_LIMIT_3=3000M", NULL};
	env_more = same;
	assert_int_equal(parse_capture(&c), 0);
	gp_config_describe(&c, buf, sizeof buf);
	assert_string_equal(buf, "limit:3000M (CUDA_DEVICE_MEMORY_LIMIT_0, _1 and _3),fence:sync");

	static const char *const mixed[] = {"CUDA_DEVICE_MEMORY_LIMIT=2g", "CUDA_DEVICE_MEMORY_LIMIT_0=2048m",
					    "CUDA_DEVICE_MEMORY_LIMIT_1=4g", "CUDA_DEVICE_MEMORY_LIMIT_2=1g",
					    "CUDA_DEVICE_MEMORY_LIMIT_3=4096m", NULL};
	env_more = mixed;
	env_conf = NULL;
	assert_int_equal(parse_capture(&c), 0);
	n = gp_config_describe(&c, buf, sizeof buf);
	assert_string_equal(buf, "limit:2G (CUDA_DEVICE_MEMORY_LIMIT),limit:4G (CUDA_DEVICE_MEMORY_LIMIT_1 and _3),"
				 "limit:1G (CUDA_DEVICE_MEMORY_LIMIT_2)");
	/* cut, NUL-terminated, the full length returned */
	char small[16];
	assert_int_equal(gp_config_describe(&c, small, sizeof small), n);
	assert_string_equal(small, "limit:2G (CUDA_");

	/* an explicit limit wins, and is the one said */
	env_conf = "limit:8G";
	assert_int_equal(parse_capture(&c), 0);
	gp_config_describe(&c, buf, sizeof buf);
	assert_string_equal(buf, "limit:8G");
	env_conf = "limit:50%";
	assert_int_equal(parse_capture(&c), 0);
	gp_config_describe(&c, buf, sizeof buf);
	assert_string_equal(buf, "limit:50%");
}

static void test_every_key_valid(void **state)
{
	(void)state;
	struct gp_config c;
	env_conf = "limit:40G,round:1K,small_max:512K,small_segment:4M,medium_max:8M,medium_segment:16M,"
		   "large_round:4M,max_split_size:256M,release_threshold:8G,fence:sync,fence_interval_us:200,"
		   "report:/tmp/r.txt,report_format:json,log:debug,strict:1,stats_page:0,trace:/tmp/t.bin,check:true";
	assert_int_equal(parse_capture(&c), 0);
	assert_int_equal(log_lines(), 0);
	assert_false(c.bad);
	assert_int_equal(c.limit_bytes, (size_t)40 << 30);
	assert_int_equal(c.limit_percent, 0);
	assert_int_equal(c.round, 1024);
	assert_int_equal(c.small_max, 512 * 1024);
	assert_int_equal(c.small_segment, 4 * MIB);
	assert_int_equal(c.medium_max, 8 * MIB);
	assert_int_equal(c.medium_segment, 16 * MIB);
	assert_int_equal(c.large_round, 4 * MIB);
	assert_int_equal(c.max_split_size, 256 * MIB);
	assert_int_equal(c.release_threshold, (size_t)8 << 30);
	assert_int_equal(c.fence, GP_FENCE_SYNC);
	assert_int_equal(c.fence_interval_us, 200);
	assert_string_equal(c.report, "/tmp/r.txt");
	assert_int_equal(c.report_format, GP_REPORT_JSON);
	assert_int_equal(c.log_level, GP_LOG_DEBUG);
	assert_true(c.strict);
	assert_false(c.stats_page);
	assert_string_equal(c.trace, "/tmp/t.bin");
	assert_true(c.check);
	assert_false(c.disable);
}

static void test_more_valid_values(void **state)
{
	(void)state;
	struct gp_config c;
	env_conf = " limit : 80% , fence:inline,release_threshold:0, max_split_size:20M ,log:WARN,trace:none,";
	assert_int_equal(parse_capture(&c), 0);
	assert_int_equal(log_lines(), 0);
	assert_false(c.bad);
	assert_int_equal(c.limit_percent, 80);
	assert_int_equal(c.limit_bytes, 0);
	assert_int_equal(c.fence, GP_FENCE_INLINE);
	assert_int_equal(c.release_threshold, 0);
	assert_int_equal(c.max_split_size, 20 * MIB);
	assert_int_equal(c.log_level, GP_LOG_WARN);
	assert_string_equal(c.trace, "");

	env_conf = "limit:100%,max_split_size:none,report:none";
	assert_int_equal(parse_capture(&c), 0);
	assert_int_equal(c.limit_percent, 100);
	assert_true(c.max_split_size == SIZE_MAX);
	assert_string_equal(c.report, "none");

	env_conf = "limit:0,report:-,report_format:text";
	assert_int_equal(parse_capture(&c), 0);
	assert_int_equal(c.limit_bytes, 0);
	assert_int_equal(c.limit_percent, 0);
	assert_string_equal(c.report, "stdout");
	assert_false(c.bad);
}

static void test_empty_items_tolerated(void **state)
{
	(void)state;
	struct gp_config c;
	env_conf = ",limit:1G,,round:2K, ,";
	assert_int_equal(parse_capture(&c), 0);
	assert_int_equal(log_lines(), 0);
	assert_false(c.bad);
	assert_int_equal(c.limit_bytes, (size_t)1 << 30);
	assert_int_equal(c.round, 2048);
}

static void test_parse_size(void **state)
{
	(void)state;
	static const struct {
		const char *s;
		size_t v;
	} good[] = {
		{"512", 512}, {"0", 0}, {"4096B", 4096}, {"64K", 65536}, {"64k", 65536}, {"2MiB", 2 * MIB},
		{"2mib", 2 * MIB}, {"2MB", 2 * MIB}, {"1.5G", (size_t)3 << 29}, {"0.5K", 512}, {" 7M ", 7 * MIB},
		{"1T", (size_t)1 << 40}, {"1.0", 1}, {"18446744073709551615", SIZE_MAX}, {"16383.999999T", 0},
	};
	static const char *const bad[] = {
		"", " ", "-1", "+1", "K", "1Q", "12Q", "1.5", "1.", ".5", "1 K", "1KK", "1Ki", "1KiBx", "1e3",
		"0x10", "18446744073709551616", "16777216T", "99999999999999999999999G", "1,5G", "1B2",
		"0.0009K", "0.0000001G", "0.00000099G", "0.1", "00.000000001T",
	};
	for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
		size_t v = 12345;
		if (gp_config_parse_size(good[i].s, &v) != 0)
			fail_msg("\"%s\" rejected", good[i].s);
		if (good[i].v && v != good[i].v)
			fail_msg("\"%s\" -> %zu, expected %zu", good[i].s, v, good[i].v);
	}
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		size_t v = 12345;
		if (gp_config_parse_size(bad[i], &v) != -EINVAL)
			fail_msg("\"%s\" accepted as %zu", bad[i], v);
		assert_int_equal(v, 12345);
	}
	assert_int_equal(gp_config_parse_size(NULL, NULL), -EINVAL);
}

/* One bad item in GPUPOOL_CONF: rc 0, defaults kept, bad set, exactly one line naming
 * GPUPOOL_CONF and `needle` (the item as the user wrote it). */
static bool one_bad(const char *conf, const char *needle)
{
	struct gp_config c;
	env_conf = conf;
	assert_int_equal(parse_capture(&c), 0);
	assert_true(c.bad);
	assert_defaults(&c);
	if (log_lines() != 1)
		fail_msg("GPUPOOL_CONF=%s: expected one line, got:\n%s", conf, logbuf);
	assert_log_has("gpupool: warning: GPUPOOL_CONF: ");
	assert_log_has(needle);
	return c.cap_refused;
}

/* One bad value of a knob that is not a cap: the default instead. */
static void check_one_bad(const char *conf, const char *needle)
{
	if (one_bad(conf, needle))
		fail_msg("GPUPOOL_CONF=%s: taken for a cap that cannot be applied:\n%s", conf, logbuf);
}

/* One bad value of a cap (limit, group, group_limit, or a key like one of them): not dropped,
 * but every allocation refused (docs/security.md, "Caps that cannot be applied"). */
static void check_one_cap(const char *conf, const char *needle)
{
	if (!one_bad(conf, needle))
		fail_msg("GPUPOOL_CONF=%s: a cap dropped:\n%s", conf, logbuf);
	assert_log_has("a cap that cannot be applied as asked is not dropped: every allocation is refused");
}

static void test_bad_size(void **state)
{
	(void)state;
	check_one_cap("limit:12Q", "limit:12Q: expected a size");
}

static void test_bad_suffix(void **state)
{
	(void)state;
	check_one_bad("release_threshold:8X", "release_threshold:8X: expected a size");
}

static void test_trailing_garbage(void **state)
{
	(void)state;
	check_one_bad("small_max:1Mfoo", "small_max:1Mfoo: expected");
	assert_log_has("using the default (1M)");
}

static void test_overflow(void **state)
{
	(void)state;
	check_one_cap("limit:99999999999T", "limit:99999999999T");
}

static void test_negative(void **state)
{
	(void)state;
	check_one_bad("release_threshold:-1G", "release_threshold:-1G");
}

static void test_empty_value(void **state)
{
	(void)state;
	check_one_cap("limit:", "limit:: expected");
}

static void test_percent_out_of_range(void **state)
{
	(void)state;
	check_one_cap("limit:0%", "limit:0%");
	check_one_cap("limit:50.5%", "limit:50.5%");
	check_one_cap("limit:1001%", "limit:1001%");
	check_one_cap("group_limit:0.5%", "group_limit:0.5%");
	/* more than the device: the nearest cap that can be applied, the whole device (it meant
	 * no limit at all) */
	struct gp_config c;
	static const char *const over[] = {"limit:101%", "limit:200%", "group:/g,group_limit:1000%"};
	for (size_t i = 0; i < sizeof over / sizeof over[0]; i++) {
		env_conf = over[i];
		assert_int_equal(parse_capture(&c), 0);
		assert_true(c.bad);
		assert_false(c.cap_refused);
		assert_int_equal(log_lines(), 1);
		assert_log_has("more than the device's memory");
		assert_log_has(":100% (the whole device) instead");
	}
	env_conf = "limit:200%";
	assert_int_equal(parse_capture(&c), 0);
	assert_int_equal(c.limit_percent, 100);
	assert_int_equal(gp_config_device_limit(&c, 0, (size_t)80 << 30), (size_t)80 << 30);
	env_conf = "limit:200%,strict:1";
	assert_int_equal(parse_capture(&c), -EINVAL); /* a bad value all the same */
}

static void test_unknown_key(void **state)
{
	(void)state;
	/* a typo of a cap: named, and not dropped */
	check_one_cap("limt:40G", "GPUPOOL_CONF: limt:40G: unknown key; did you mean limit?");
	assert_null(strstr(logbuf, "max_split_size")); /* not the list of every key */
	check_one_cap("Limit:1G", "did you mean limit?");
	check_one_cap("lmiit:1G", "did you mean limit?");
	check_one_cap("group_limt:1G", "did you mean group_limit?");
	check_one_cap("gruop:/tmp/g", "did you mean group?");
	/* a typo of another knob: named, ignored */
	check_one_bad("relase_threshold:1G", "relase_threshold:1G: unknown key; did you mean release_threshold?");
	assert_log_has("ignoring this item (release_threshold keeps its value)");
	/* nothing near: the list of keys */
	check_one_bad("colour:blue", "colour:blue: unknown key, expected one of limit, group, group_limit, round");
	assert_log_has("max_split_size");
	assert_log_has("ignoring this item");
	check_one_bad("nokey7:1", "unknown key, expected one of");
}

static void test_bad_enum(void **state)
{
	(void)state;
	check_one_bad("fence:sometimes", "fence:sometimes: expected thread, inline or sync");
	check_one_bad("report_format:xml", "report_format:xml");
	check_one_bad("log:loud", "log:loud");
}

static void test_bad_bool(void **state)
{
	(void)state;
	check_one_bad("stats_page:maybe", "stats_page:maybe: expected a boolean");
	assert_log_has("using the default (1)");
	check_one_bad("check:2", "check:2");
}

static void test_bad_uint(void **state)
{
	(void)state;
	check_one_bad("fence_interval_us:1000001", "fence_interval_us:1000001");
	check_one_bad("fence_interval_us:5ms", "fence_interval_us:5ms");
}

static void test_missing_colon(void **state)
{
	(void)state;
	check_one_cap("limit40G", "limit40G: expected key:value (e.g. limit:40G)");
	check_one_cap("limit=40G", "limit=40G: expected key:value");
	check_one_cap("group_limit 4G", "expected key:value (e.g. group_limit:40G)");
	check_one_bad("fence=sync", "fence=sync: expected key:value");
}

static void test_round_not_power_of_two(void **state)
{
	(void)state;
	check_one_bad("round:768", "round:768: expected a power of two");
	check_one_bad("round:256", "round:256");
	check_one_bad("round:4M", "round:4M");
}

/* A size the pool cannot use is refused by the parser, not by the pool later: large_round a
 * power of two up to 1G, every other size at most 256T. */
static void test_sizes_the_pool_can_use(void **state)
{
	(void)state;
	static const char *const bad[] = {
		"large_round:3M", "large_round:1.5G", "large_round:8388608T", "large_round:2G", "large_round:256",
		"small_max:8388608T", "small_segment:257T", "medium_max:1024T", "medium_segment:300T",
		"max_split_size:257T", "release_threshold:512T",
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
		check_one_bad(bad[i], bad[i]);
	check_one_cap("limit:16383T", "limit:16383T");
	check_one_bad("large_round:3M", "large_round:3M: expected a power of two from 512 to 1G, at least round; "
					"using the default (2M)");
	check_one_cap("limit:257T", "limit:257T: expected a size up to 256T");

	struct gp_config c;
	env_conf = "large_round:1G,limit:256T,release_threshold:256T,max_split_size:256T,medium_segment:256T";
	assert_int_equal(parse_capture(&c), 0);
	if (c.bad || log_lines())
		fail_msg("GPUPOOL_CONF=%s: expected no warning, got:\n%s", env_conf, logbuf);
	assert_int_equal(c.large_round, (size_t)1 << 30);
	assert_int_equal(c.limit_bytes, (size_t)1 << 48);
	assert_int_equal(c.release_threshold, (size_t)1 << 48);
	assert_int_equal(c.max_split_size, (size_t)1 << 48);
	assert_int_equal(c.medium_segment, (size_t)1 << 48);
}

static void test_max_split_below_20m(void **state)
{
	(void)state;
	check_one_bad("max_split_size:16M", "max_split_size:16M: expected a size from 20M");
}

static void test_conflicting_segments(void **state)
{
	(void)state;
	check_one_bad("small_max:4M", "small_max:4M, small_segment:2M");
	assert_log_has("using the defaults (small_max:1M, small_segment:2M)");
	check_one_bad("medium_max:30M", "medium_max:30M, medium_segment:20M");
	assert_log_has("expected medium_max <= medium_segment and medium_segment a multiple of round; "
		       "using the defaults (medium_max:10M, medium_segment:20M)\n");
	check_one_bad("small_segment:3K", "small_segment:3K");
	check_one_bad("small_max:16M,small_segment:16M,medium_max:12M", "small_max:16M, medium_max:12M");
	assert_log_has("expected small_max <= medium_max; "
		       "using the defaults (small_max:1M, small_segment:2M, medium_max:10M, medium_segment:20M)\n");

	struct gp_config c;
	env_conf = "round:2M,large_round:1M";
	assert_int_equal(parse_capture(&c), 0);
	assert_true(c.bad);
	assert_int_equal(log_lines(), 1);
	assert_log_has("GPUPOOL_CONF: large_round:1M, round:2M: expected large_round a multiple of round; "
		       "using the default (large_round:2M)");
	assert_int_equal(c.round, 2 * MIB);
	assert_int_equal(c.large_round, 2 * MIB);

	/* a multiple of round that is not a power of two: refused by the parser in one line */
	env_conf = "large_round:3M";
	assert_int_equal(parse_capture(&c), 0);
	assert_true(c.bad);
	assert_int_equal(log_lines(), 1);
	assert_int_equal(c.large_round, 2 * MIB);

	/* A good group survives a conflict in another group. */
	env_conf = "small_max:4M,medium_max:16M,medium_segment:32M";
	assert_int_equal(parse_capture(&c), 0);
	assert_true(c.bad);
	assert_int_equal(log_lines(), 1);
	assert_int_equal(c.small_max, 1 * MIB);
	assert_int_equal(c.medium_max, 16 * MIB);
	assert_int_equal(c.medium_segment, 32 * MIB);
}

/* The knobs' defaults are the pool's (pool.h), and whatever the geometry checks leave,
 * conflict or not, is a geometry the pool accepts. */
static void test_pool_params(void **state)
{
	(void)state;
	struct gp_config c;
	struct gp_pool_params from_cfg, def;
	assert_int_equal(parse_capture(&c), 0);
	gp_config_pool_params(&c, 0, &from_cfg);
	gp_pool_params_default(&def);
	assert_int_equal(from_cfg.round, def.round);
	assert_int_equal(from_cfg.small_max, def.small_max);
	assert_int_equal(from_cfg.small_segment, def.small_segment);
	assert_int_equal(from_cfg.medium_max, def.medium_max);
	assert_int_equal(from_cfg.medium_segment, def.medium_segment);
	assert_int_equal(from_cfg.large_round, def.large_round);
	assert_true(from_cfg.max_split_size == def.max_split_size);
	assert_true(from_cfg.release_threshold == def.release_threshold);
	assert_int_equal(from_cfg.limit, def.limit);
	assert_int_equal(from_cfg.sync_free, def.sync_free);
	assert_int_equal(from_cfg.check, def.check);
	assert_int_equal(gp_pool_params_check(&from_cfg), 0);

	static const char *const confs[] = {
		"small_max:4M", "medium_max:30M", "small_segment:3K", "small_max:16M,small_segment:16M,medium_max:12M",
		"round:2M,large_round:3M", "round:1M,small_segment:1536K,medium_segment:30M",
		"round:2M,small_max:2M,small_segment:2M,medium_max:1M,medium_segment:1M,large_round:1M",
		"small_max:32M,small_segment:32M,medium_max:16M,medium_segment:40M,large_round:3M",
	};
	for (size_t i = 0; i < sizeof confs / sizeof confs[0]; i++) {
		env_conf = confs[i];
		assert_int_equal(parse_capture(&c), 0);
		gp_config_pool_params(&c, 0, &from_cfg);
		if (gp_pool_params_check(&from_cfg) != 0)
			fail_msg("GPUPOOL_CONF=%s leaves a geometry the pool refuses (%#x)", confs[i],
				 gp_pool_params_check(&from_cfg));
	}
}

static void test_too_long(void **state)
{
	(void)state;
	static char big[6000];
	memset(big, 'x', sizeof big - 1);
	memcpy(big, "limit:1G,", 9);
	check_one_cap(big, "limit:1G,xxx");
	assert_log_has("longer than 4096 characters, with a limit or a group in it");
	memcpy(big, "round:1K,", 9);
	check_one_bad(big, "round:1K,xxx"); /* no cap in it: every knob its default */
	assert_log_has("ignoring GPUPOOL_CONF: every knob keeps its default");
	assert_null(strstr(logbuf, "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"));
}

static void test_long_value_quoted_short(void **state)
{
	(void)state;
	static char v[3000];
	memcpy(v, "trace:", 6);
	memset(v + 6, 'p', sizeof v - 7);
	check_one_bad(v, "trace:ppp");
	assert_log_has("...");
}

static void test_duplicate_key(void **state)
{
	(void)state;
	struct gp_config c;
	env_conf = "limit:1G,round:1K,limit:2G";
	assert_int_equal(parse_capture(&c), 0);
	assert_false(c.bad);
	assert_int_equal(log_lines(), 1);
	assert_log_has("GPUPOOL_CONF: limit given more than once; the last one wins (limit:2G)");
	assert_int_equal(c.limit_bytes, (size_t)2 << 30);
}

static void test_bad_after_good_duplicate_gives_default(void **state)
{
	(void)state;
	struct gp_config c;
	env_conf = "limit:1G,limit:junk";
	assert_int_equal(parse_capture(&c), 0);
	assert_true(c.bad);
	assert_true(c.cap_refused); /* the cap as the last word asks it cannot be applied */
	assert_int_equal(log_lines(), 2);
	assert_int_equal(c.limit_bytes, 0);
}

static void test_strict(void **state)
{
	(void)state;
	struct gp_config c;
	env_conf = "limit:12Q,round:1K,strict:1";
	assert_int_equal(parse_capture(&c), -EINVAL);
	assert_true(c.bad);
	assert_true(c.strict);
	assert_int_equal(log_lines(), 1);
	assert_log_has("GPUPOOL_CONF: limit:12Q: expected a size");
	assert_log_has("strict mode: the pool is disabled and every hooked CUDA allocation call will fail");
	assert_string_equal(c.bad_vars, "GPUPOOL_CONF");

	env_conf = "strict:yes,limit:1G";
	assert_int_equal(parse_capture(&c), 0);
	assert_true(c.strict);
	assert_false(c.bad);
	assert_int_equal(log_lines(), 0);

	/* A bad standalone variable counts too. */
	env_conf = "strict:true";
	env_disable = "perhaps";
	assert_int_equal(parse_capture(&c), -EINVAL);
	assert_int_equal(log_lines(), 1);
	assert_log_has("GPUPOOL_DISABLE=perhaps: expected a boolean");
	assert_log_has("strict mode");
	assert_string_equal(c.bad_vars, "GPUPOOL_DISABLE");
	/* each variable named once, in the order they were read */
	env_conf = "strict:1,limit:12Q,round:3";
	assert_int_equal(parse_capture(&c), -EINVAL);
	assert_int_equal(log_lines(), 3);
	assert_string_equal(c.bad_vars, "GPUPOOL_CONF, GPUPOOL_DISABLE");
	env_conf = "strict:true";

	/* A geometry conflict too. */
	env_disable = NULL;
	env_conf = "small_max:4M,strict:1";
	assert_int_equal(parse_capture(&c), -EINVAL);
	assert_int_equal(log_lines(), 1);

	/* A bad strict value is itself bad, and strict stays off. */
	env_conf = "strict:sure";
	assert_int_equal(parse_capture(&c), 0);
	assert_false(c.strict);
	assert_true(c.bad);
	assert_int_equal(log_lines(), 1);
}

static void test_disable(void **state)
{
	(void)state;
	static const char *const on[] = {"1", "true", "yes", "YES", " on "};
	static const char *const off[] = {"0", "false", "no", "", "  "};
	struct gp_config c;
	for (size_t i = 0; i < 5; i++) {
		env_disable = on[i];
		assert_int_equal(parse_capture(&c), 0);
		assert_true(c.disable);
		assert_false(c.bad);
		env_disable = off[i];
		assert_int_equal(parse_capture(&c), 0);
		assert_false(c.disable);
		assert_false(c.bad);
		assert_int_equal(log_lines(), 0);
	}
	env_disable = "maybe";
	assert_int_equal(parse_capture(&c), 0);
	assert_false(c.disable);
	assert_true(c.bad);
	assert_int_equal(log_lines(), 1);
	assert_log_has("gpupool: warning: GPUPOOL_DISABLE=maybe: expected a boolean: 1, 0, true, false, yes, no; "
		       "using the default (0)");
}

static void test_report(void **state)
{
	(void)state;
	struct gp_config c;
	env_report = "/tmp/gpupool-report.json";
	assert_int_equal(parse_capture(&c), 0);
	assert_string_equal(c.report, "/tmp/gpupool-report.json");
	assert_int_equal(c.report_format, GP_REPORT_JSON);

	/* The standalone variable wins over the key; an explicit format wins over the suffix. */
	env_conf = "report:/tmp/other.txt,report_format:text";
	assert_int_equal(parse_capture(&c), 0);
	assert_string_equal(c.report, "/tmp/gpupool-report.json");
	assert_int_equal(c.report_format, GP_REPORT_TEXT);
	assert_int_equal(log_lines(), 0);

	env_conf = "report:/tmp/other.JSON";
	env_report = "none";
	assert_int_equal(parse_capture(&c), 0);
	assert_string_equal(c.report, "none");
	assert_int_equal(c.report_format, GP_REPORT_TEXT);

	env_conf = NULL;
	env_report = "-";
	assert_int_equal(parse_capture(&c), 0);
	assert_string_equal(c.report, "stdout");

	/* A bad standalone value leaves the GPUPOOL_CONF value in place. */
	static char longpath[400];
	memset(longpath, 'a', sizeof longpath - 1);
	env_conf = "report:/tmp/r.txt";
	env_report = longpath;
	assert_int_equal(parse_capture(&c), 0);
	assert_true(c.bad);
	assert_string_equal(c.report, "/tmp/r.txt");
	assert_int_equal(log_lines(), 1);
	assert_log_has("GPUPOOL_REPORT=aaaa");
}

static void test_log_level(void **state)
{
	(void)state;
	struct gp_config c;
	env_log = "debug";
	env_conf = "log:error";
	assert_int_equal(parse_capture(&c), 0);
	assert_int_equal(c.log_level, GP_LOG_DEBUG);
	env_log = "Info";
	assert_int_equal(parse_capture(&c), 0);
	assert_int_equal(c.log_level, GP_LOG_INFO);
	env_log = "chatty";
	assert_int_equal(parse_capture(&c), 0);
	assert_int_equal(c.log_level, GP_LOG_ERROR); /* the key's value stays */
	assert_true(c.bad);
	assert_int_equal(log_lines(), 1);
	assert_log_has("GPUPOOL_LOG=chatty: expected error, warning, info or debug");
}

/* ---- the documentation ---- */

static void print_knobs_to(char *buf, size_t size)
{
	FILE *f = tmpfile();
	assert_non_null(f);
	gp_config_print_knobs(f);
	rewind(f);
	size_t n = fread(buf, 1, size - 1, f);
	buf[n] = '\0';
	fclose(f);
	assert_true(n < size - 1);
}

static FILE *open_doc(const char *rel)
{
	char path[1024];
	const char *dir = getenv("GP_SOURCE_DIR"); /* the source tree (default: the one built from) */
	snprintf(path, sizeof path, "%s/%s", dir ? dir : GP_SOURCE_DIR, rel);
	return fopen(path, "r");
}

/* docs/knobs.md shows the table the code holds, byte for byte (the man page gpupool(7) is made
 * from it). */
static void test_doc_matches_table(void **state)
{
	(void)state;
	static char table[16384], doc[131072];
	static const char *const docs[] = {"docs/knobs.md"};
	print_knobs_to(table, sizeof table);
	for (size_t i = 0; i < sizeof docs / sizeof docs[0]; i++) {
		FILE *f = open_doc(docs[i]);
		if (!f)
			fail_msg("%s not found: set GP_SOURCE_DIR to the source tree", docs[i]);
		size_t n = fread(doc, 1, sizeof doc - 1, f);
		doc[n] = '\0';
		fclose(f);
		char *begin = strstr(doc, "<!-- knobs:begin -->\n");
		char *end = strstr(doc, "<!-- knobs:end -->");
		assert_non_null(begin);
		assert_non_null(end);
		begin += strlen("<!-- knobs:begin -->\n");
		assert_true(end >= begin);
		*end = '\0';
		if (strcmp(begin, table) != 0)
			fail_msg("%s is stale; regenerate the table with: test_config --print-knobs", docs[i]);
	}
}

static void test_table_rows(void **state)
{
	(void)state;
	static char table[16384];
	print_knobs_to(table, sizeof table);
	static const char *const names[] = {
		"GPUPOOL_CONF", "GPUPOOL_DISABLE", "GPUPOOL_REPORT", "GPUPOOL_LOG", "limit", "round", "small_max",
		"small_segment", "medium_max", "medium_segment", "large_round", "max_split_size", "release_threshold",
		"segments", "fence", "fence_interval_us", "fence_marker", "legacy_stream", "report", "report_format", "log", "strict", "stats_page", "trace", "check",
		"group", "group_limit", "GPUPOOL_GROUP", "CUDA_DEVICE_MEMORY_LIMIT", "CUDA_DEVICE_MEMORY_LIMIT_<n>",
	};
	char row[64];
	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
		snprintf(row, sizeof row, "\n| `%s` |", names[i]);
		if (!strstr(table, row))
			fail_msg("no row for %s", names[i]);
	}
	assert_string_equal(strstr(table, "| knob | default | range | effect |\n"), table);
}

/* group and group_limit: a path and a budget like limit's; GPUPOOL_GROUP wins. */
static void test_group_knobs(void **state)
{
	(void)state;
	struct gp_config c;
	assert_int_equal(parse_capture(&c), 0);
	assert_string_equal(c.group, "");
	assert_int_equal(c.group_limit_bytes, 0);
	assert_int_equal(gp_config_group_limit(&c, (size_t)80 << 30), 0);
	env_conf = "group:/dev/shm/team.grp,group_limit:40G";
	assert_int_equal(parse_capture(&c), 0);
	assert_int_equal(log_lines(), 0);
	assert_string_equal(c.group, "/dev/shm/team.grp");
	assert_int_equal(gp_config_group_limit(&c, (size_t)80 << 30), (size_t)40 << 30);
	char buf[256];
	gp_config_describe(&c, buf, sizeof buf);
	assert_string_equal(buf, "group:/dev/shm/team.grp,group_limit:40G");
	env_conf = "group:/a,group_limit:50%";
	static const char *const more[] = {"GPUPOOL_GROUP=/b", NULL};
	env_more = more;
	assert_int_equal(parse_capture(&c), 0);
	assert_string_equal(c.group, "/b");
	assert_int_equal(gp_config_group_limit(&c, 1000), 500);
	assert_int_equal(gp_config_group_limit(&c, 0), 0);
	/* a bad budget: one line, and every allocation refused rather than no budget */
	env_conf = "group:/a,group_limit:12Q";
	env_more = NULL;
	assert_int_equal(parse_capture(&c), 0);
	assert_true(c.bad);
	assert_true(c.cap_refused);
	assert_int_equal(log_lines(), 1);
	assert_log_has("group_limit:12Q: expected a size up to 256T");
	assert_log_has("every allocation is refused");
	assert_int_equal(c.group_limit_bytes, 0);
	assert_string_equal(c.group, "/a");
	/* a group file that cannot be named: the same */
	static const char *const badgroup[] = {"GPUPOOL_GROUP=/a\tb", NULL};
	env_conf = NULL;
	env_more = badgroup;
	assert_int_equal(parse_capture(&c), 0);
	assert_true(c.cap_refused);
	assert_log_has("GPUPOOL_GROUP=/a\tb: expected a file path");
	env_more = NULL;

	/* a budget with no group: one line, not a bad value (GPUPOOL_GROUP may come per process) */
	env_conf = "group_limit:1G,strict:1";
	assert_int_equal(parse_capture(&c), 0);
	assert_false(c.bad);
	assert_int_equal(log_lines(), 1);
	assert_string_equal(logbuf, "gpupool: warning: GPUPOOL_CONF: group_limit:1G has no group to apply to; set "
				    "group:FILE or GPUPOOL_GROUP\n");
	env_conf = "group_limit:50%,group:none";
	assert_int_equal(parse_capture(&c), 0);
	assert_int_equal(log_lines(), 1);
	assert_log_has("group_limit:50% has no group to apply to");
	env_conf = "group_limit:50%";
	env_more = more;
	assert_int_equal(parse_capture(&c), 0);
	assert_int_equal(log_lines(), 0);
	env_conf = "group_limit:none";
	env_more = NULL;
	assert_int_equal(parse_capture(&c), 0);
	assert_int_equal(log_lines(), 0);
}

/* HAMi-core's reading, exactly (get_limit_from_env: a k, m or g last multiplies, and the
 * number is strtoul(text, NULL, 0)): the same limit from the same text, plain or not; what
 * HAMi-core has no limit from (0, no digits, a product past 2^64), or what no device holds,
 * is refused. */
static void test_hami_size(void **state)
{
	(void)state;
	static const struct {
		const char *s;
		size_t v;
		bool plain;
	} ok[] = {{"4g", (size_t)4 << 30, true}, {"4G", (size_t)4 << 30, true}, {"4096m", (size_t)4 << 30, true},
		  {"1048576k", (size_t)1 << 30, true}, {"1073741824", (size_t)1 << 30, true}, {"1", 1, true},
		  {"262144g", (size_t)1 << 48, true},
		  /* HAMi-core reads these as 4 GiB */
		  {" 4g", (size_t)4 << 30, false}, {"+4g", (size_t)4 << 30, false}, {"4.5g", (size_t)4 << 30, false},
		  {"0x100000000", (size_t)4 << 30, false}, {"4 g", (size_t)4 << 30, false},
		  {"\t4G", (size_t)4 << 30, false}, {"4gg", (size_t)4 << 30, false},
		  /* and these as what its strtoul makes of them */
		  {"0x10", 16, false}, {"010m", (size_t)8 << 20, false}, {"0x1g", (size_t)1 << 30, false},
		  {"4gb", 4, false}, {"4t", 4, false}, {"1e9", 1, false}};
	static const char *const bad[] = {"", "0", "0m", "-4g", "-1", "g", "x", "junk", "0x", "262145g",
					  "99999999999999999999999", "18446744073709551615", "17179869184g"};
	size_t v;
	bool plain;
	for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
		if (gp_config_parse_hami_size(ok[i].s, &v, &plain) != 0)
			fail_msg("'%s' refused", ok[i].s);
		if (v != ok[i].v || plain != ok[i].plain)
			fail_msg("'%s': %zu (plain %d), expected %zu (plain %d)", ok[i].s, v, plain, ok[i].v, ok[i].plain);
	}
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
		if (gp_config_parse_hami_size(bad[i], &v, &plain) == 0)
			fail_msg("'%s' accepted", bad[i]);
}

/* CUDA_DEVICE_MEMORY_LIMIT and _<n> set the limit when GPUPOOL_CONF gives none, each said at
 * info level; an explicit limit wins (also said); a bad one is one warning and no limit. */
static void test_sched_vars(void **state)
{
	(void)state;
	struct gp_config c;
	static const char *const all[] = {"CUDA_DEVICE_MEMORY_LIMIT=2g", "CUDA_DEVICE_MEMORY_LIMIT_1=4096m",
					  "CUDA_DEVICE_MEMORY_LIMIT_15=1g", "CUDA_DEVICE_MEMORY_LIMIT_16=8g", NULL};
	env_more = all;
	assert_int_equal(parse_capture(&c), 0);
	/* notes, not log lines: the caller logs them; the one line is device 16's, which has none */
	assert_int_equal(log_lines(), 1);
	assert_log_has("gpupool: warning: CUDA_DEVICE_MEMORY_LIMIT_16=8g: expected a device index from 0 to 15 after "
		       "CUDA_DEVICE_MEMORY_LIMIT_; a cap that cannot be applied as asked is not dropped: every allocation "
		       "is refused until it is fixed (docs/security.md)\n");
	assert_true(c.bad);
	assert_true(c.cap_refused);
	assert_string_equal(c.bad_vars, "CUDA_DEVICE_MEMORY_LIMIT_16");
	assert_int_equal(c.limit_bytes, (size_t)2 << 30);
	assert_int_equal(gp_config_device_limit(&c, 0, 0), (size_t)2 << 30);
	assert_int_equal(gp_config_device_limit(&c, 1, 0), (size_t)4 << 30);
	assert_int_equal(gp_config_device_limit(&c, 15, 0), (size_t)1 << 30);
	assert_int_equal(gp_config_device_limit(&c, 16, 0), (size_t)2 << 30); /* no device 16 */
	assert_non_null(strstr(c.notes, "CUDA_DEVICE_MEMORY_LIMIT=2g: every device's limit is 2G (as limit:2G)"));
	assert_non_null(strstr(c.notes, "CUDA_DEVICE_MEMORY_LIMIT_1=4096m: device 1's limit is 4G"));
	/* the notes at info level, one line each */
	gp_log_set_level(GP_LOG_INFO);
	FILE *tmp = tmpfile();
	int saved = dup(2);
	dup2(fileno(tmp), 2);
	gp_config_log_notes(&c);
	dup2(saved, 2);
	close(saved);
	rewind(tmp);
	size_t n = fread(logbuf, 1, sizeof logbuf - 1, tmp);
	logbuf[n] = '\0';
	fclose(tmp);
	gp_log_set_level(GP_LOG_WARN);
	assert_int_equal(log_lines(), 3); /* none for device 16 */
	assert_log_has("gpupool: info: CUDA_DEVICE_MEMORY_LIMIT_15=1g: device 15's limit is 1G\n");

	/* only a device's own, as HAMi sets them */
	static const char *const one[] = {"CUDA_DEVICE_MEMORY_LIMIT_0=3000m", NULL};
	env_more = one;
	assert_int_equal(parse_capture(&c), 0);
	assert_int_equal(c.limit_bytes, 0);
	assert_int_equal(gp_config_device_limit(&c, 0, (size_t)80 << 30), (size_t)3000 << 20);
	assert_int_equal(gp_config_device_limit(&c, 1, (size_t)80 << 30), 0);

	/* an explicit limit wins, and a note says so */
	env_conf = "limit:8G";
	assert_int_equal(parse_capture(&c), 0);
	assert_int_equal(gp_config_device_limit(&c, 0, 0), (size_t)8 << 30);
	assert_string_equal(c.notes, "CUDA_DEVICE_MEMORY_LIMIT_0=3000m (a scheduler's limit): limit:8G in GPUPOOL_CONF wins");
	env_conf = "limit:50%";
	assert_int_equal(parse_capture(&c), 0);
	assert_int_equal(gp_config_device_limit(&c, 0, 1000), 500);

	/* what HAMi-core reads otherwise than a scheduler writes: its limit, and a line saying so */
	static const char *const odd[] = {"CUDA_DEVICE_MEMORY_LIMIT= 4g", "CUDA_DEVICE_MEMORY_LIMIT_1=+4g",
					  "CUDA_DEVICE_MEMORY_LIMIT_2=4.5g", "CUDA_DEVICE_MEMORY_LIMIT_3=0x100000000",
					  "CUDA_DEVICE_MEMORY_LIMIT_4=4gb", NULL};
	env_conf = NULL;
	env_more = odd;
	assert_int_equal(parse_capture(&c), 0);
	assert_false(c.bad);
	assert_false(c.cap_refused);
	assert_int_equal(log_lines(), 5);
	assert_log_has("gpupool: warning: CUDA_DEVICE_MEMORY_LIMIT= 4g: taken as HAMi-core reads it: 4G\n");
	assert_log_has("CUDA_DEVICE_MEMORY_LIMIT_2=4.5g: taken as HAMi-core reads it: 4G\n");
	assert_log_has("CUDA_DEVICE_MEMORY_LIMIT_4=4gb: taken as HAMi-core reads it: 4 (bytes: no allocation fits)\n");
	for (int d = 0; d < 4; d++)
		assert_int_equal(gp_config_device_limit(&c, d, 0), (size_t)4 << 30);
	assert_int_equal(gp_config_device_limit(&c, 4, 0), 4);

	/* bad values (HAMi-core has no limit from them): one line each, and every allocation
	 * refused rather than no limit */
	static const char *const badv[] = {"CUDA_DEVICE_MEMORY_LIMIT=junk", "CUDA_DEVICE_MEMORY_LIMIT_2=0",
					   "CUDA_DEVICE_MEMORY_LIMIT_3=2g", "CUDA_DEVICE_MEMORY_LIMIT_4=", NULL};
	env_more = badv;
	assert_int_equal(parse_capture(&c), 0);
	assert_true(c.bad);
	assert_true(c.cap_refused);
	assert_int_equal(log_lines(), 2);
	assert_log_has("CUDA_DEVICE_MEMORY_LIMIT=junk: expected bytes, or a number with k, m or g (e.g. 4096m, "
		       "4g), from 1 to 262144g, as HAMi-core reads it; a cap that cannot be applied as asked is not "
		       "dropped: every allocation is refused until it is fixed (docs/security.md)\n");
	assert_log_has("CUDA_DEVICE_MEMORY_LIMIT_2=0: expected");
	assert_string_equal(c.bad_vars, "CUDA_DEVICE_MEMORY_LIMIT, CUDA_DEVICE_MEMORY_LIMIT_2");
	assert_int_equal(c.limit_bytes, 0);
	assert_int_equal(gp_config_device_limit(&c, 3, 0), (size_t)2 << 30);
	/* strict mode stops on them like on any bad value, and names them */
	env_conf = "strict:1";
	assert_int_equal(parse_capture(&c), -EINVAL);
	assert_string_equal(c.bad_vars, "CUDA_DEVICE_MEMORY_LIMIT, CUDA_DEVICE_MEMORY_LIMIT_2");
	static const char *const beyond[] = {"CUDA_DEVICE_MEMORY_LIMIT_255=1g", NULL};
	env_more = beyond;
	assert_int_equal(parse_capture(&c), -EINVAL);
	assert_int_equal(log_lines(), 1);
	assert_log_has("CUDA_DEVICE_MEMORY_LIMIT_255=1g: expected a device index from 0 to 15");
	assert_string_equal(c.bad_vars, "CUDA_DEVICE_MEMORY_LIMIT_255");
	/* more than the list holds: cut with ", ..." */
	static const char *const many[] = {"CUDA_DEVICE_MEMORY_LIMIT_0=x", "CUDA_DEVICE_MEMORY_LIMIT_1=x",
					   "CUDA_DEVICE_MEMORY_LIMIT_2=x", "CUDA_DEVICE_MEMORY_LIMIT_3=x",
					   "CUDA_DEVICE_MEMORY_LIMIT_4=x", NULL};
	env_more = many;
	assert_int_equal(parse_capture(&c), -EINVAL);
	assert_int_equal(log_lines(), 5);
	assert_string_equal(c.bad_vars, "CUDA_DEVICE_MEMORY_LIMIT_0, CUDA_DEVICE_MEMORY_LIMIT_1, "
					"CUDA_DEVICE_MEMORY_LIMIT_2, CUDA_DEVICE_MEMORY_LIMIT_3, ...");
	/* an explicit limit wins over that one too: nothing said, nothing bad */
	env_conf = "strict:1,limit:8G";
	assert_int_equal(parse_capture(&c), 0);
	assert_int_equal(log_lines(), 0);
	/* not keys of GPUPOOL_CONF */
	env_more = NULL;
	env_conf = "CUDA_DEVICE_MEMORY_LIMIT:4g";
	assert_int_equal(parse_capture(&c), 0);
	assert_true(c.bad);
	assert_log_has("unknown key");
	assert_int_equal(c.limit_bytes, 0);
}

int main(int argc, char **argv)
{
	if (argc > 1 && strcmp(argv[1], "--print-knobs") == 0) {
		gp_config_print_knobs(stdout);
		return 0;
	}
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(test_defaults, reset_env),
		cmocka_unit_test_setup(test_describe, reset_env),
		cmocka_unit_test_setup(test_describe_sched, reset_env),
		cmocka_unit_test_setup(test_group_knobs, reset_env),
		cmocka_unit_test_setup(test_hami_size, reset_env),
		cmocka_unit_test_setup(test_sched_vars, reset_env),
		cmocka_unit_test_setup(test_every_key_valid, reset_env),
		cmocka_unit_test_setup(test_more_valid_values, reset_env),
		cmocka_unit_test_setup(test_empty_items_tolerated, reset_env),
		cmocka_unit_test_setup(test_parse_size, reset_env),
		cmocka_unit_test_setup(test_bad_size, reset_env),
		cmocka_unit_test_setup(test_bad_suffix, reset_env),
		cmocka_unit_test_setup(test_trailing_garbage, reset_env),
		cmocka_unit_test_setup(test_overflow, reset_env),
		cmocka_unit_test_setup(test_negative, reset_env),
		cmocka_unit_test_setup(test_empty_value, reset_env),
		cmocka_unit_test_setup(test_percent_out_of_range, reset_env),
		cmocka_unit_test_setup(test_unknown_key, reset_env),
		cmocka_unit_test_setup(test_bad_enum, reset_env),
		cmocka_unit_test_setup(test_bad_bool, reset_env),
		cmocka_unit_test_setup(test_bad_uint, reset_env),
		cmocka_unit_test_setup(test_missing_colon, reset_env),
		cmocka_unit_test_setup(test_round_not_power_of_two, reset_env),
		cmocka_unit_test_setup(test_sizes_the_pool_can_use, reset_env),
		cmocka_unit_test_setup(test_max_split_below_20m, reset_env),
		cmocka_unit_test_setup(test_conflicting_segments, reset_env),
		cmocka_unit_test_setup(test_pool_params, reset_env),
		cmocka_unit_test_setup(test_too_long, reset_env),
		cmocka_unit_test_setup(test_long_value_quoted_short, reset_env),
		cmocka_unit_test_setup(test_duplicate_key, reset_env),
		cmocka_unit_test_setup(test_bad_after_good_duplicate_gives_default, reset_env),
		cmocka_unit_test_setup(test_strict, reset_env),
		cmocka_unit_test_setup(test_disable, reset_env),
		cmocka_unit_test_setup(test_report, reset_env),
		cmocka_unit_test_setup(test_log_level, reset_env),
		cmocka_unit_test_setup(test_table_rows, reset_env),
		cmocka_unit_test_setup(test_doc_matches_table, reset_env),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
