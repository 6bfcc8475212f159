/* Configuration: GPUPOOL_CONF (key:value,...) and the standalone GPUPOOL_* switches parsed
 * into struct gp_config by one knob table that also prints the README's table. Pure: env
 * through a lookup function, no allocation, no exit, bounded work on any input. Depends on
 * log.h, and on pool.h for the parameters, their defaults and the geometry rules. */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <string.h>

#include "log.h"
#include "pool.h"

/* Longest GPUPOOL_CONF read; a longer one is ignored as a whole (said in one line). */
#define GP_CONFIG_MAX_LEN 4096
/* Longest part of a bad value quoted back in a message. */
#define GP_CONFIG_QUOTE_MAX 80

/* HAMi-core's limit for every device; with _<n> appended, device n's. */
#define SCHED_VAR "CUDA_DEVICE_MEMORY_LIMIT"
/* CUDA_DEVICE_MEMORY_LIMIT_<n> is looked for up to this n (exclusive): those from
 * GP_CONFIG_MAX_DEVICES on are for devices gpupool has no limit for, and said so. */
#define SCHED_PROBE_MAX 256

#define KIB ((size_t)1 << 10)
#define MIB ((size_t)1 << 20)
#define GIB ((size_t)1 << 30)
/* Largest value of a size knob: 256T (2^48), the trace format's largest request. Larger
 * ones are typos (no device holds that much), and they keep the pool's sums far from wrapping. */
#define SIZE_CAP ((size_t)1 << 48)

/* A default of pool.h as the table writes it: 512, or 2M for a GP_POOL_DEFAULT_*_MIB. */
#define GP_TEXT_(x) #x
#define GP_TEXT(x) GP_TEXT_(x)
#define GP_MIB_TEXT(x) GP_TEXT(x) "M"

enum gp_knob_type {
	GP_KNOB_CONF,      /* the GPUPOOL_CONF row itself (documentation only) */
	GP_KNOB_BOOL,      /* bool */
	GP_KNOB_SIZE,      /* size_t in [min, max] */
	GP_KNOB_SIZE_NONE, /* size_t in [min, max], or "none" = SIZE_MAX */
	GP_KNOB_POW2,      /* size_t power of two in [min, max] */
	GP_KNOB_LIMIT,     /* limit_bytes / limit_percent */
	GP_KNOB_UINT,      /* unsigned decimal in [min, max] */
	GP_KNOB_FENCE,     /* enum gp_fence_policy */
	GP_KNOB_LEVEL,     /* int, enum gp_log_level */
	GP_KNOB_REPORT,    /* char[GP_PATH_MAX]: stderr, stdout, none or a path */
	GP_KNOB_FORMAT,    /* enum gp_report_format */
	GP_KNOB_PATH,      /* char[GP_PATH_MAX]: a path, or "none" = "" */
	GP_KNOB_GROUP_LIMIT, /* group_limit_bytes / group_limit_percent */
	GP_KNOB_SCHED,     /* a scheduler's variable (documentation; gp_config_parse_sched reads them) */
};

struct gp_config_knob {
	const char *name;   /* key in GPUPOOL_CONF, or a whole variable name (GPUPOOL_*) */
	enum gp_knob_type type;
	size_t offset;      /* the field of struct gp_config this knob sets */
	size_t min, max;    /* bounds for sizes and integers */
	const char *def;    /* default, in the syntax the parser accepts ("" = unset) */
	const char *range;  /* what is accepted; also the "expected ..." of a warning */
	const char *effect;
};

#define F(field) offsetof(struct gp_config, field)
#define BOOL_RANGE "a boolean: 1, 0, true, false, yes, no"
#define LEVEL_RANGE "error, warning, info or debug"
#define REPORT_RANGE "stderr, stdout (or -), none, or a file path (at most 255 bytes)"

/* The one knob table: parser (lookup, defaults, bounds) and documentation. */
static const struct gp_config_knob knobs[] = {
	{"GPUPOOL_CONF", GP_KNOB_CONF, 0, 0, 0, "",
	 "key:value,key:value with the keys below (at most 4096 characters)",
	 "Sets the knobs below, e.g. `GPUPOOL_CONF=limit:40G,max_split_size:256M`."},
	{"GPUPOOL_DISABLE", GP_KNOB_BOOL, F(disable), 0, 0, "0", BOOL_RANGE,
	 "Pass every call to the CUDA runtime unchanged: no pool, no page, no report."},
	{"GPUPOOL_REPORT", GP_KNOB_REPORT, F(report), 0, 0, "stderr", REPORT_RANGE,
	 "Where the exit report goes; wins over the report key. A path ending in .json selects JSON."},
	{"GPUPOOL_LOG", GP_KNOB_LEVEL, F(log_level), 0, 0, "warning", LEVEL_RANGE,
	 "Log level; wins over the log key."},
	{"GPUPOOL_GROUP", GP_KNOB_PATH, F(group), 0, 0, "none", "a file path (at most 255 bytes), or none",
	 "The group file; wins over the group key (docs/kubernetes.md)."},
	{"CUDA_DEVICE_MEMORY_LIMIT", GP_KNOB_SCHED, 0, 0, 0, "",
	 "bytes, or a number with k, m or g (any case; 1024-based), as HAMi-core reads it, from 1 to 262144g",
	 "A scheduler's limit per device (HAMi's), taken as limit when GPUPOOL_CONF has no limit (docs/kubernetes.md)."},
	{"CUDA_DEVICE_MEMORY_LIMIT_<n>", GP_KNOB_SCHED, 0, 0, 0, "",
	 "as CUDA_DEVICE_MEMORY_LIMIT; n a device index from 0 to 15",
	 "Device n's limit (its CUDA index in the process), over CUDA_DEVICE_MEMORY_LIMIT; also only without a limit in GPUPOOL_CONF. An n above 15 is a bad value (one warning) and sets nothing."},
	{"limit", GP_KNOB_LIMIT, F(limit_bytes), 0, SIZE_CAP, "none",
	 "a size up to 256T (e.g. 40G, 512MiB) or a percentage of device memory (1%..100%); 0 or none for no limit",
	 "Most device memory the pool reserves per device; past it allocations fail with cudaErrorMemoryAllocation."},
	{"group", GP_KNOB_PATH, F(group), 0, 0, "none", "a file path (at most 255 bytes), or none",
	 "Share one budget per device with every process naming this file (docs/kubernetes.md); created 0600 when missing."},
	{"group_limit", GP_KNOB_GROUP_LIMIT, F(group_limit_bytes), 0, SIZE_CAP, "none",
	 "a size up to 256T or a percentage of device memory (1%..100%); 0 or none for none",
	 "The group's budget per device, set by the first member to use the device; the file's wins after that."},
	{"round", GP_KNOB_POW2, F(round), 512, 2 * MIB, GP_TEXT(GP_POOL_DEFAULT_ROUND), "a power of two from 512 to 2M",
	 "Every request is rounded up to a multiple of this."},
	{"small_max", GP_KNOB_SIZE, F(small_max), 1, SIZE_CAP, GP_MIB_TEXT(GP_POOL_DEFAULT_SMALL_MAX_MIB),
	 "a size from 1 to 256T, at most small_segment and at most medium_max",
	 "Requests up to this size are served from small segments."},
	{"small_segment", GP_KNOB_SIZE, F(small_segment), 1, SIZE_CAP, GP_MIB_TEXT(GP_POOL_DEFAULT_SMALL_SEGMENT_MIB),
	 "a size from 1 to 256T, a multiple of round, at least small_max",
	 "Size of a small segment."},
	{"medium_max", GP_KNOB_SIZE, F(medium_max), 1, SIZE_CAP, GP_MIB_TEXT(GP_POOL_DEFAULT_MEDIUM_MAX_MIB),
	 "a size from 1 to 256T, at least small_max, at most medium_segment",
	 "Requests above small_max and below this are served from medium segments."},
	{"medium_segment", GP_KNOB_SIZE, F(medium_segment), 1, SIZE_CAP, GP_MIB_TEXT(GP_POOL_DEFAULT_MEDIUM_SEGMENT_MIB),
	 "a size from 1 to 256T, a multiple of round, at least medium_max",
	 "Size of a medium segment."},
	{"large_round", GP_KNOB_POW2, F(large_round), 512, GIB, GP_MIB_TEXT(GP_POOL_DEFAULT_LARGE_ROUND_MIB),
	 "a power of two from 512 to 1G, at least round",
	 "Larger requests get a segment of their own, rounded up to a multiple of this."},
	{"max_split_size", GP_KNOB_SIZE_NONE, F(max_split_size), 20 * MIB, SIZE_CAP, "none",
	 "a size from 20M to 256T, or none",
	 "Cached blocks larger than this are never split for a smaller request (limits fragmentation)."},
	{"release_threshold", GP_KNOB_SIZE_NONE, F(release_threshold), 0, SIZE_CAP, "none",
	 "a size up to 256T, or none",
	 "After a free, fully free segments are returned to the runtime while more than this is cached; none keeps everything."},
	{"decay_ms", GP_KNOB_UINT, F(decay_ms), 0, 86400000, "10000", "an integer from 0 to 86400000",
	 "Milliseconds a whole free segment may sit unused before it goes back to the driver by itself (at most 2 GiB of them per tenth of a second); 0 keeps it until a release, a reclaim or the exit (docs/sharing.md)."},
	{"reclaim", GP_KNOB_BOOL, F(reclaim), 0, 0, "1", BOOL_RANGE,
	 "When the GPU itself is out of memory, ask the other gpupool processes on the same GPU (matched by UUID) to give back memory they hold idle, and answer their requests in turn; 0: neither (docs/sharing.md)."},
	{"reclaim_wait_ms", GP_KNOB_UINT, F(reclaim_wait_ms), 0, 60000, "2000", "an integer from 0 to 60000",
	 "Longest an allocation that found the GPU full waits for other processes to give memory back before it fails; 0: it does not ask them at all (it still answers their requests; reclaim:0 turns both off)."},
	{"fence", GP_KNOB_FENCE, F(fence), 0, 0, "thread", "thread, inline or sync",
	 "How cudaFree'd blocks are fenced before reuse: a background thread, the allocating thread only, or a sync in every cudaFree."},
	{"fence_interval_us", GP_KNOB_UINT, F(fence_interval_us), 0, 1000000, "50",
	 "an integer from 0 to 1000000",
	 "Microseconds the fence thread waits for more frees before fencing them together."},
	{"fence_marker", GP_KNOB_BOOL, F(fence_marker), 0, 0, "1", BOOL_RANGE,
	 "Fence a cudaFree'd block at the point of the GPU's queue where it was freed (CUDA events on the legacy stream and on each non-blocking stream gpupool saw created, through the runtime or the driver), so the GPU never idles behind a fence; 0: every fence is a cudaDeviceSynchronize."},
	{"legacy_stream", GP_KNOB_BOOL, F(legacy_stream), 0, 0, "0", BOOL_RANGE,
	 "A promise that the program issues all its GPU work on the legacy default stream (no per-thread default stream, no peer access; PyTorch without streams of its own): a cudaFree'd block is then reused in that stream's order at once, with no fence. gpupool drops it, with a warning, when the program creates a stream or uses the per-thread one."},
	{"report", GP_KNOB_REPORT, F(report), 0, 0, "stderr", REPORT_RANGE,
	 "Where the exit report goes (GPUPOOL_REPORT wins)."},
	{"report_format", GP_KNOB_FORMAT, F(report_format), 0, 0, "text", "text or json",
	 "Format of the exit report; json when not set and the report path ends in .json."},
	{"log", GP_KNOB_LEVEL, F(log_level), 0, 0, "warning", LEVEL_RANGE,
	 "Log level (GPUPOOL_LOG wins)."},
	{"strict", GP_KNOB_BOOL, F(strict), 0, 0, "0", BOOL_RANGE,
	 "A bad value anywhere disables the pool and makes every allocation fail (cudaErrorInvalidValue), so the program stops."},
	{"stats_page", GP_KNOB_BOOL, F(stats_page), 0, 0, "1", BOOL_RANGE,
	 "Publish live statistics at /dev/shm/gpupool.PID for gpupool-stat."},
	{"trace", GP_KNOB_PATH, F(trace), 0, 0, "none", "a file path (at most 255 bytes), or none",
	 "Record the request stream to this file (for gpupool-replay)."},
	{"check", GP_KNOB_BOOL, F(check), 0, 0, "0", BOOL_RANGE,
	 "Run the pool's invariant checker after every call (slow; for debugging)."},
};

#define GP_NKNOBS (sizeof knobs / sizeof knobs[0])
_Static_assert(sizeof knobs / sizeof knobs[0] <= 64, "the duplicate mask is 64 bits");

/* A row that names a variable of its own (GPUPOOL_*, a scheduler's CUDA_*), not a key of
 * GPUPOOL_CONF. */
static bool gp_config_is_var(const struct gp_config_knob *k)
{
	return strncmp(k->name, "GPUPOOL_", 8) == 0 || strncmp(k->name, "CUDA_", 5) == 0;
}

/* State of one gp_config_parse call. */
struct gp_config_ctx {
	struct gp_config *cfg;
	bool strict;          /* strict mode, known before the first item is parsed */
	bool format_set;      /* report_format given explicitly */
	uint64_t seen;        /* knobs given in GPUPOOL_CONF, by index */
	char var[40];         /* the variable being read: what gp_config_bad adds to cfg->bad_vars */
};

/* ---- small parsers: NUL-terminated, already trimmed input; 0 or -EINVAL ---- */

static bool gp_config_ieq(const char *a, const char *b)
{
	for (; *a && *b; a++, b++)
		if (tolower((unsigned char)*a) != tolower((unsigned char)*b))
			return false;
	return *a == *b;
}

static int gp_config_parse_bool(const char *s, bool *out)
{
	static const char *const yes[] = {"1", "true", "yes", "on"};
	static const char *const no[] = {"0", "false", "no", "off"};
	for (size_t i = 0; i < 4; i++) {
		if (gp_config_ieq(s, yes[i])) {
			*out = true;
			return 0;
		}
		if (gp_config_ieq(s, no[i])) {
			*out = false;
			return 0;
		}
	}
	return -EINVAL;
}

static int gp_config_parse_uint(const char *s, size_t max, size_t *out)
{
	size_t v = 0;
	if (!isdigit((unsigned char)*s))
		return -EINVAL;
	for (; isdigit((unsigned char)*s); s++) {
		size_t d = (size_t)(*s - '0');
		if (v > (max - d) / 10)
			return -EINVAL;
		v = v * 10 + d;
	}
	if (*s)
		return -EINVAL;
	*out = v;
	return 0;
}

int gp_config_parse_size(const char *s, size_t *out)
{
	if (!s)
		return -EINVAL;
	while (isspace((unsigned char)*s))
		s++;
	if (!isdigit((unsigned char)*s))
		return -EINVAL; /* empty, sign, leading '.', junk */
	size_t ip = 0;
	for (; isdigit((unsigned char)*s); s++) {
		size_t d = (size_t)(*s - '0');
		if (ip > (SIZE_MAX - d) / 10)
			return -EINVAL;
		ip = ip * 10 + d;
	}
	/* Up to 6 fraction digits count; more are accepted and ignored. */
	unsigned long long num = 0, den = 1;
	if (*s == '.') {
		s++;
		if (!isdigit((unsigned char)*s))
			return -EINVAL;
		for (; isdigit((unsigned char)*s); s++) {
			if (den < 1000000) {
				num = num * 10 + (unsigned long long)(*s - '0');
				den *= 10;
			}
		}
	}
	unsigned shift = 0;
	switch (tolower((unsigned char)*s)) {
	case 'k': shift = 10; break;
	case 'm': shift = 20; break;
	case 'g': shift = 30; break;
	case 't': shift = 40; break;
	default: break;
	}
	if (shift) {
		s++;
		if (tolower((unsigned char)*s) == 'i') {
			s++;
			if (tolower((unsigned char)*s) != 'b')
				return -EINVAL;
		}
	}
	if (tolower((unsigned char)*s) == 'b')
		s++;
	while (isspace((unsigned char)*s))
		s++;
	if (*s)
		return -EINVAL;
	if (shift >= sizeof(size_t) * 8)
		return -EINVAL;
	if (!shift && num)
		return -EINVAL; /* a fraction of a byte */
	if (ip > (SIZE_MAX >> shift))
		return -EINVAL;
	size_t v = ip << shift;
	/* num < 10^6 and shift <= 40: the product fits in 64 bits. */
	unsigned long long frac = (num << shift) / den;
	if (frac > SIZE_MAX - v)
		return -EINVAL;
	*out = v + (size_t)frac;
	return 0;
}

/* "80%" -> 80; 1..100 only. */
static int gp_config_parse_percent(const char *s, unsigned *out)
{
	size_t n = strlen(s), v;
	char digits[8];
	if (n < 2 || s[n - 1] != '%' || n - 1 >= sizeof digits)
		return -EINVAL;
	memcpy(digits, s, n - 1);
	digits[n - 1] = '\0';
	if (gp_config_parse_uint(digits, 1000, &v) || v < 1 || v > 100)
		return -EINVAL;
	*out = (unsigned)v;
	return 0;
}

static int gp_config_parse_level(const char *s, int *out)
{
	for (int i = GP_LOG_ERROR; i <= GP_LOG_DEBUG; i++) {
		if (gp_config_ieq(s, gp_log_level_name(i))) {
			*out = i;
			return 0;
		}
	}
	if (gp_config_ieq(s, "warn")) {
		*out = GP_LOG_WARN;
		return 0;
	}
	return -EINVAL;
}

static int gp_config_set_path(char *dst, const char *s)
{
	size_t n = strlen(s);
	if (n == 0 || n >= GP_PATH_MAX)
		return -EINVAL;
	for (size_t i = 0; i < n; i++)
		if (iscntrl((unsigned char)s[i]))
			return -EINVAL;
	memcpy(dst, s, n + 1);
	return 0;
}

/* A limit: none (0), a size up to max, or a percentage. On error *bytes and *pct unchanged. */
static int gp_config_parse_limit(const char *s, size_t max, size_t *bytes, unsigned *pct)
{
	size_t v;
	unsigned p;
	if (gp_config_ieq(s, "none")) {
		*bytes = 0;
		*pct = 0;
	} else if (strchr(s, '%')) {
		if (gp_config_parse_percent(s, &p))
			return -EINVAL;
		*bytes = 0;
		*pct = p;
	} else {
		if (gp_config_parse_size(s, &v) || v > max)
			return -EINVAL;
		*bytes = v;
		*pct = 0;
	}
	return 0;
}

/* Sets knob k of cfg from s (trimmed, NUL-terminated). On error cfg is unchanged. */
static int gp_config_knob_set(const struct gp_config_knob *k, const char *s, struct gp_config *cfg)
{
	char *field = (char *)cfg + k->offset;
	size_t v;
	switch (k->type) {
	case GP_KNOB_CONF:
		return -EINVAL;
	case GP_KNOB_BOOL: {
		bool b;
		if (gp_config_parse_bool(s, &b))
			return -EINVAL;
		*(bool *)field = b;
		return 0;
	}
	case GP_KNOB_SIZE_NONE:
		if (gp_config_ieq(s, "none")) {
			*(size_t *)field = SIZE_MAX;
			return 0;
		}
		/* fall through */
	case GP_KNOB_SIZE:
	case GP_KNOB_POW2:
		if (gp_config_parse_size(s, &v) || v < k->min || v > k->max)
			return -EINVAL;
		if (k->type == GP_KNOB_POW2 && (v & (v - 1)))
			return -EINVAL;
		*(size_t *)field = v;
		return 0;
	case GP_KNOB_LIMIT:
		return gp_config_parse_limit(s, k->max, &cfg->limit_bytes, &cfg->limit_percent);
	case GP_KNOB_GROUP_LIMIT:
		return gp_config_parse_limit(s, k->max, &cfg->group_limit_bytes, &cfg->group_limit_percent);
	case GP_KNOB_SCHED:
		return 0; /* read by gp_config_parse_sched, not through the table */
	case GP_KNOB_UINT:
		if (gp_config_parse_uint(s, k->max, &v) || v < k->min)
			return -EINVAL;
		*(unsigned *)field = (unsigned)v;
		return 0;
	case GP_KNOB_FENCE:
		if (gp_config_ieq(s, "thread"))
			cfg->fence = GP_FENCE_THREAD;
		else if (gp_config_ieq(s, "inline"))
			cfg->fence = GP_FENCE_INLINE;
		else if (gp_config_ieq(s, "sync"))
			cfg->fence = GP_FENCE_SYNC;
		else
			return -EINVAL;
		return 0;
	case GP_KNOB_LEVEL:
		return gp_config_parse_level(s, (int *)field);
	case GP_KNOB_REPORT:
		if (gp_config_ieq(s, "stderr") || gp_config_ieq(s, "stdout") || gp_config_ieq(s, "none")) {
			char w[8];
			size_t i;
			for (i = 0; s[i]; i++)
				w[i] = (char)tolower((unsigned char)s[i]);
			w[i] = '\0';
			memcpy(field, w, i + 1);
			return 0;
		}
		if (strcmp(s, "-") == 0) {
			memcpy(field, "stdout", sizeof "stdout");
			return 0;
		}
		return gp_config_set_path(field, s);
	case GP_KNOB_FORMAT:
		if (gp_config_ieq(s, "text"))
			cfg->report_format = GP_REPORT_TEXT;
		else if (gp_config_ieq(s, "json"))
			cfg->report_format = GP_REPORT_JSON;
		else
			return -EINVAL;
		return 0;
	case GP_KNOB_PATH:
		if (gp_config_ieq(s, "none")) {
			field[0] = '\0';
			return 0;
		}
		return gp_config_set_path(field, s);
	}
	return -EINVAL;
}

static void gp_config_knob_default(const struct gp_config_knob *k, struct gp_config *cfg)
{
	if (k->type != GP_KNOB_CONF) {
		int rc = gp_config_knob_set(k, k->def, cfg);
		(void)rc; /* the table's defaults parse; the defaults test checks it */
	}
}

/* The value of knob k in cfg, as the parser accepts it (sizes exact, in the largest unit
 * that divides them), into buf (cap bytes, NUL-terminated). */
static void gp_config_knob_text(const struct gp_config_knob *k, const struct gp_config *cfg, char *buf, size_t cap)
{
	const char *field = (const char *)cfg + k->offset;
	static const char *const units = "KMGT";
	size_t v = 0;
	switch (k->type) {
	case GP_KNOB_CONF:
		snprintf(buf, cap, "%s", "");
		return;
	case GP_KNOB_BOOL:
		snprintf(buf, cap, "%d", *(const bool *)field ? 1 : 0);
		return;
	case GP_KNOB_LIMIT:
	case GP_KNOB_GROUP_LIMIT: {
		bool group = k->type == GP_KNOB_GROUP_LIMIT;
		unsigned pct = group ? cfg->group_limit_percent : cfg->limit_percent;
		v = group ? cfg->group_limit_bytes : cfg->limit_bytes;
		if (pct) {
			snprintf(buf, cap, "%u%%", pct);
			return;
		}
		if (!v) {
			snprintf(buf, cap, "none");
			return;
		}
		break;
	}
	case GP_KNOB_SCHED:
		snprintf(buf, cap, "%s", "");
		return;
	case GP_KNOB_SIZE_NONE:
		if (*(const size_t *)field == SIZE_MAX) {
			snprintf(buf, cap, "none");
			return;
		}
		/* fall through */
	case GP_KNOB_SIZE:
	case GP_KNOB_POW2:
		v = *(const size_t *)field;
		break;
	case GP_KNOB_UINT:
		snprintf(buf, cap, "%u", *(const unsigned *)field);
		return;
	case GP_KNOB_FENCE:
		snprintf(buf, cap, "%s", cfg->fence == GP_FENCE_INLINE ? "inline" : cfg->fence == GP_FENCE_SYNC ? "sync" : "thread");
		return;
	case GP_KNOB_LEVEL:
		snprintf(buf, cap, "%s", gp_log_level_name(*(const int *)field));
		return;
	case GP_KNOB_FORMAT:
		snprintf(buf, cap, "%s", cfg->report_format == GP_REPORT_JSON ? "json" : "text");
		return;
	case GP_KNOB_REPORT:
	case GP_KNOB_PATH:
		snprintf(buf, cap, "%s", field[0] ? field : "none");
		return;
	}
	int u = -1;
	while (u < 3 && v && v % 1024 == 0) {
		v /= 1024;
		u++;
	}
	if (u < 0)
		snprintf(buf, cap, "%zu", v);
	else
		snprintf(buf, cap, "%zu%c", v, units[u]);
}

static const struct gp_config_knob *gp_config_find(const char *name)
{
	for (size_t i = 0; i < GP_NKNOBS; i++)
		if (!gp_config_is_var(&knobs[i]) && strcmp(knobs[i].name, name) == 0)
			return &knobs[i];
	return NULL;
}

/* Appends to buf (cap bytes) at *n, which counts what it needs even past cap. */
__attribute__((format(printf, 4, 5)))
static void gp_config_put(char *buf, size_t cap, size_t *n, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int w = vsnprintf(buf + (*n < cap ? *n : cap), *n < cap ? cap - *n : 0, fmt, ap);
	va_end(ap);
	if (w > 0)
		*n += (size_t)w;
}

/* The limit from a scheduler's variables, each value with the variables that set it: the
 * one for every device, then each other value of the per-device ones (gp_config_describe). */
static void gp_config_describe_sched(const struct gp_config *cfg, char *buf, size_t cap, size_t *n)
{
	const struct gp_config_knob *k = gp_config_find("limit");
	struct gp_config t;
	char v[64];
	bool done[GP_CONFIG_MAX_DEVICES] = {false};
	if (cfg->limit_sched) {
		gp_config_knob_text(k, cfg, v, sizeof v);
		gp_config_put(buf, cap, n, "%slimit:%s (" SCHED_VAR ")", *n ? "," : "", v);
	}
	for (int d = 0; d < GP_CONFIG_MAX_DEVICES; d++) {
		size_t x = cfg->limit_device[d];
		if (!x || done[d] || (cfg->limit_sched && x == cfg->limit_bytes))
			continue;
		int same[GP_CONFIG_MAX_DEVICES], m = 0;
		for (int e = d; e < GP_CONFIG_MAX_DEVICES; e++)
			if (cfg->limit_device[e] == x) {
				same[m++] = e;
				done[e] = true;
			}
		memset(&t, 0, sizeof t);
		t.limit_bytes = x;
		gp_config_knob_text(k, &t, v, sizeof v);
		gp_config_put(buf, cap, n, "%slimit:%s (" SCHED_VAR "_%d", *n ? "," : "", v, d);
		for (int i = 1; i < m; i++)
			gp_config_put(buf, cap, n, "%s_%d", i == m - 1 ? " and " : ", ", same[i]);
		gp_config_put(buf, cap, n, ")");
	}
}

size_t gp_config_describe(const struct gp_config *cfg, char *buf, size_t cap)
{
	struct gp_config def;
	memset(&def, 0, sizeof def);
	for (size_t i = 0; i < GP_NKNOBS; i++)
		gp_config_knob_default(&knobs[i], &def);
	size_t n = 0;
	if (cap)
		buf[0] = '\0';
	for (size_t i = 0; i < GP_NKNOBS; i++) {
		const struct gp_config_knob *k = &knobs[i];
		/* the GPUPOOL_* variables set the fields of the report and log keys */
		if (k->type == GP_KNOB_CONF || gp_config_is_var(k))
			continue;
		if (k->type == GP_KNOB_LIMIT && !cfg->limit_percent && (cfg->limit_sched || !cfg->limit_bytes)) {
			gp_config_describe_sched(cfg, buf, cap, &n);
			continue;
		}
		char a[GP_PATH_MAX + 8], b[GP_PATH_MAX + 8];
		gp_config_knob_text(k, cfg, a, sizeof a);
		gp_config_knob_text(k, &def, b, sizeof b);
		if (strcmp(a, b) == 0)
			continue;
		gp_config_put(buf, cap, &n, "%s%s:%s", n ? "," : "", k->name, a);
	}
	return n;
}

static const struct gp_config_knob *gp_config_find_var(const char *name)
{
	for (size_t i = 0; i < GP_NKNOBS; i++)
		if (strcmp(knobs[i].name, name) == 0)
			return &knobs[i];
	return NULL;
}

/* ---- messages ---- */

/* Quotes at most GP_CONFIG_QUOTE_MAX bytes of s, with "..." when cut. */
static const char *gp_config_quote(const char *s, char buf[GP_CONFIG_QUOTE_MAX + 4])
{
	size_t n = strnlen(s, GP_CONFIG_QUOTE_MAX + 1);
	if (n <= GP_CONFIG_QUOTE_MAX)
		return s;
	memcpy(buf, s, GP_CONFIG_QUOTE_MAX);
	memcpy(buf + GP_CONFIG_QUOTE_MAX, "...", 4);
	return buf;
}

/* Adds `var` to cfg->bad_vars once; ", ..." ends a list that is full. */
static void gp_config_add_bad_var(struct gp_config *cfg, const char *var)
{
	char *b = cfg->bad_vars;
	size_t n = strnlen(b, sizeof cfg->bad_vars), m = strlen(var);
	for (const char *p = b; (p = strstr(p, var)) != NULL; p += m)
		if ((p == b || p[-1] == ' ') && (p[m] == ',' || !p[m]))
			return;
	if (n >= 5 && strcmp(b + n - 5, ", ...") == 0)
		return;
	if (n + (n ? 2 : 0) + m + 5 < sizeof cfg->bad_vars)
		snprintf(b + n, sizeof cfg->bad_vars - n, "%s%s", n ? ", " : "", var);
	else
		snprintf(b + n, sizeof cfg->bad_vars - n, ", ...");
}

/* Logs one warning line "<what>; <consequence>", where the consequence is `instead`,
 * or in strict mode that the pool is disabled. Marks the config bad. */
__attribute__((format(printf, 3, 4)))
static void gp_config_bad(struct gp_config_ctx *c, const char *instead, const char *fmt, ...)
{
	char msg[448];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	c->cfg->bad = true;
	gp_config_add_bad_var(c->cfg, c->var);
	if (c->strict)
		gp_log(GP_LOG_WARN, "%s; strict mode: the pool is disabled and every hooked CUDA allocation call will fail",
		       msg);
	else
		gp_log(GP_LOG_WARN, "%s; %s", msg, instead);
}

static void gp_config_bad_value(struct gp_config_ctx *c, const char *var, const struct gp_config_knob *k,
				const char *val)
{
	char q[GP_CONFIG_QUOTE_MAX + 4], instead[96];
	snprintf(instead, sizeof instead, "using the default (%s)", k->def);
	if (strcmp(var, k->name) == 0) /* a standalone variable */
		gp_config_bad(c, instead, "%s=%s: expected %s", var, gp_config_quote(val, q), k->range);
	else
		gp_config_bad(c, instead, "%s: %s:%s: expected %s", var, k->name, gp_config_quote(val, q), k->range);
}

/* Writes a size the way a user would: 2M, 1536K, 1000. */
static const char *gp_config_fmt_size(size_t v, char buf[32])
{
	static const char suffix[] = "TGMK";
	if (v == SIZE_MAX) {
		snprintf(buf, 32, "none");
		return buf;
	}
	for (unsigned i = 0; i < 4; i++) {
		unsigned shift = 40 - 10 * i;
		if (shift < sizeof(size_t) * 8 && v && (v & (((size_t)1 << shift) - 1)) == 0) {
			snprintf(buf, 32, "%zu%c", v >> shift, suffix[i]);
			return buf;
		}
	}
	snprintf(buf, 32, "%zu", v);
	return buf;
}

/* ---- GPUPOOL_CONF ---- */

static char *gp_config_trim(char *s, char *end)
{
	while (s < end && isspace((unsigned char)*s))
		s++;
	while (end > s && isspace((unsigned char)end[-1]))
		end--;
	*end = '\0';
	return s;
}

/* Splits the next item off *cur (a ',' separated list in a writable buffer): *key and
 * *val are trimmed and NUL-terminated, *val is NULL when there was no ':'. Returns false
 * at the end of the list. Empty items come back with an empty key and *val NULL. */
static bool gp_config_next_item(char **cur, char **key, char **val)
{
	char *s = *cur;
	if (!s)
		return false;
	char *comma = strchr(s, ',');
	char *end = comma ? comma : s + strlen(s);
	*cur = comma ? comma + 1 : NULL;
	char *colon = memchr(s, ':', (size_t)(end - s));
	if (colon) {
		*val = gp_config_trim(colon + 1, end);
		*key = gp_config_trim(s, colon);
	} else {
		*val = NULL;
		*key = gp_config_trim(s, end);
	}
	return true;
}

/* Strict mode must be known before the first bad item is reported, wherever it appears. */
static bool gp_config_prescan_strict(const char *conf)
{
	char buf[GP_CONFIG_MAX_LEN + 1], *cur = buf, *key, *val;
	bool strict = false, b;
	memcpy(buf, conf, strlen(conf) + 1);
	while (gp_config_next_item(&cur, &key, &val))
		if (val && strcmp(key, "strict") == 0 && gp_config_parse_bool(val, &b) == 0)
			strict = b;
	return strict;
}

static void gp_config_list_keys(char *buf, size_t size)
{
	size_t used = 0;
	buf[0] = '\0';
	for (size_t i = 0; i < GP_NKNOBS && used < size; i++) {
		if (gp_config_is_var(&knobs[i]))
			continue;
		int n = snprintf(buf + used, size - used, "%s%s", used ? ", " : "", knobs[i].name);
		if (n < 0)
			break;
		used += (size_t)n;
	}
}

static void gp_config_parse_conf(struct gp_config_ctx *c, const char *conf)
{
	char buf[GP_CONFIG_MAX_LEN + 1], *cur = buf, *key, *val;
	char q[GP_CONFIG_QUOTE_MAX + 4], q2[GP_CONFIG_QUOTE_MAX + 4];
	size_t len = strnlen(conf, GP_CONFIG_MAX_LEN + 1);
	if (len > GP_CONFIG_MAX_LEN) {
		gp_config_bad(c, "ignoring GPUPOOL_CONF: every knob keeps its default",
			      "GPUPOOL_CONF: %s: longer than %d characters", gp_config_quote(conf, q),
			      GP_CONFIG_MAX_LEN);
		return;
	}
	c->strict = gp_config_prescan_strict(conf);
	memcpy(buf, conf, len + 1);
	while (gp_config_next_item(&cur, &key, &val)) {
		if (!val) {
			if (*key)
				gp_config_bad(c, "ignoring this item",
					      "GPUPOOL_CONF: %s: expected key:value (e.g. limit:40G)",
					      gp_config_quote(key, q));
			continue; /* empty items (a:1,,b:2 or a trailing comma) are harmless */
		}
		const struct gp_config_knob *k = gp_config_find(key);
		if (!k) {
			char keys[320];
			gp_config_list_keys(keys, sizeof keys);
			gp_config_bad(c, "ignoring this item", "GPUPOOL_CONF: %s:%s: unknown key, expected one of %s",
				      gp_config_quote(key, q), gp_config_quote(val, q2), keys);
			continue;
		}
		uint64_t bit = (uint64_t)1 << (size_t)(k - knobs);
		if (c->seen & bit)
			gp_log(GP_LOG_WARN, "GPUPOOL_CONF: %s given more than once; the last one wins (%s:%s)", k->name,
			       k->name, gp_config_quote(val, q));
		c->seen |= bit;
		if (gp_config_knob_set(k, val, c->cfg) != 0) {
			gp_config_knob_default(k, c->cfg);
			gp_config_bad_value(c, "GPUPOOL_CONF", k, val);
		} else if (k->type == GP_KNOB_FORMAT) {
			c->format_set = true;
		}
	}
}

static void gp_config_reset(struct gp_config *cfg, const char *const *names)
{
	for (; *names; names++)
		gp_config_knob_default(gp_config_find(*names), cfg);
}

/* "using the default (large_round:2M)", or "using the defaults (small_max:1M, ...)" for
 * several knobs: what gp_config_reset(names) puts back, from the table. */
static const char *gp_config_defaults_text(const char *const *names, char *buf, size_t size)
{
	int used = snprintf(buf, size, "using the default%s (", names[1] ? "s" : "");
	for (size_t i = 0; names[i] && used >= 0 && (size_t)used < size; i++)
		used += snprintf(buf + used, size - (size_t)used, "%s%s:%s", i ? ", " : "", names[i],
				 gp_config_find(names[i])->def);
	if (used >= 0 && (size_t)used < size)
		snprintf(buf + used, size - (size_t)used, ")");
	return buf;
}

/* The geometry rules (gp_pool_params_check) that cfg breaks as it stands. */
static unsigned gp_config_geometry(const struct gp_config *cfg)
{
	struct gp_pool_params prm;
	gp_config_pool_params(cfg, 0, &prm);
	return gp_pool_params_check(&prm);
}

/* Segment geometry: the pool's rules (gp_pool_params_check), checked group by group in
 * this order, each on the values the groups before it left. A conflict is one line and
 * puts its group back to the defaults. round cannot break its rule (its knob takes powers
 * of two only), so no group resets it. */
static void gp_config_check_geometry(struct gp_config_ctx *c)
{
	static const char *const small[] = {"small_max", "small_segment", NULL};
	static const char *const medium[] = {"medium_max", "medium_segment", NULL};
	static const char *const both[] = {"small_max", "small_segment", "medium_max", "medium_segment", NULL};
	static const char *const large[] = {"large_round", NULL};
	struct gp_config *g = c->cfg;
	char a[32], b[32], r[32], instead[128];

	if (gp_config_geometry(g) & GP_GEOMETRY_SMALL) {
		gp_config_bad(c, gp_config_defaults_text(small, instead, sizeof instead),
			      "GPUPOOL_CONF: small_max:%s, small_segment:%s, round:%s: expected small_max <= small_segment "
			      "and small_segment a multiple of round",
			      gp_config_fmt_size(g->small_max, a), gp_config_fmt_size(g->small_segment, b),
			      gp_config_fmt_size(g->round, r));
		gp_config_reset(g, small);
	}
	if (gp_config_geometry(g) & GP_GEOMETRY_MEDIUM) {
		gp_config_bad(c, gp_config_defaults_text(medium, instead, sizeof instead),
			      "GPUPOOL_CONF: medium_max:%s, medium_segment:%s, round:%s: expected medium_max <= "
			      "medium_segment and medium_segment a multiple of round",
			      gp_config_fmt_size(g->medium_max, a), gp_config_fmt_size(g->medium_segment, b),
			      gp_config_fmt_size(g->round, r));
		gp_config_reset(g, medium);
	}
	if (gp_config_geometry(g) & GP_GEOMETRY_CLASSES) {
		gp_config_bad(c, gp_config_defaults_text(both, instead, sizeof instead),
			      "GPUPOOL_CONF: small_max:%s, medium_max:%s: expected small_max <= medium_max",
			      gp_config_fmt_size(g->small_max, a), gp_config_fmt_size(g->medium_max, b));
		gp_config_reset(g, both);
	}
	if (gp_config_geometry(g) & GP_GEOMETRY_LARGE) {
		gp_config_bad(c, gp_config_defaults_text(large, instead, sizeof instead),
			      "GPUPOOL_CONF: large_round:%s, round:%s: expected large_round a multiple of round",
			      gp_config_fmt_size(g->large_round, a), gp_config_fmt_size(g->round, r));
		gp_config_reset(g, large);
	}
}

/* A standalone variable: unset or empty means "not given". Returns true when it set cfg. */
static bool gp_config_parse_var(struct gp_config_ctx *c, gp_getenv_fn get, const char *name)
{
	const struct gp_config_knob *k = gp_config_find_var(name);
	const char *v = get(name);
	char buf[GP_PATH_MAX + 1];
	if (!v)
		return false;
	snprintf(c->var, sizeof c->var, "%s", name);
	size_t n = strnlen(v, GP_PATH_MAX + 1);
	if (n > GP_PATH_MAX) {
		gp_config_bad_value(c, name, k, v);
		return false;
	}
	memcpy(buf, v, n + 1);
	char *s = gp_config_trim(buf, buf + n);
	if (!*s)
		return false;
	/* Parse into a copy so a bad value leaves the GPUPOOL_CONF value or default alone. */
	struct gp_config tmp = *c->cfg;
	if (gp_config_knob_set(k, s, &tmp) != 0) {
		gp_config_bad_value(c, name, k, s);
		return false;
	}
	*c->cfg = tmp;
	return true;
}

/* ---- a scheduler's variables (HAMi-core's CUDA_DEVICE_MEMORY_LIMIT) ---- */

int gp_config_parse_hami_size(const char *s, size_t *out)
{
	size_t n = s ? strlen(s) : 0, v = 0;
	unsigned shift = 0;
	if (!n)
		return -EINVAL;
	switch (tolower((unsigned char)s[n - 1])) {
	case 'k': shift = 10; n--; break;
	case 'm': shift = 20; n--; break;
	case 'g': shift = 30; n--; break;
	default: break;
	}
	/* HAMi-core reads the number with strtoul(s, .., 0): a leading 0 would be octal there */
	if (!n || (s[0] == '0' && n > 1))
		return -EINVAL;
	for (size_t i = 0; i < n; i++) {
		if (!isdigit((unsigned char)s[i]))
			return -EINVAL;
		v = v * 10 + (size_t)(s[i] - '0');
		if (v > SIZE_CAP)
			return -EINVAL;
	}
	if (!v || v > SIZE_CAP >> shift)
		return -EINVAL; /* 0: HAMi-core's "no limit", said as a bad value there too */
	*out = v << shift;
	return 0;
}

/* Appends one line to cfg->notes (cut where it does not fit). */
__attribute__((format(printf, 2, 3)))
static void gp_config_note(struct gp_config *cfg, const char *fmt, ...)
{
	size_t n = strnlen(cfg->notes, sizeof cfg->notes);
	if (n + 2 >= sizeof cfg->notes)
		return;
	if (n)
		cfg->notes[n++] = '\n';
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(cfg->notes + n, sizeof cfg->notes - n, fmt, ap);
	va_end(ap);
}

void gp_config_log_notes(const struct gp_config *cfg)
{
	const char *p = cfg->notes, *end = p + strnlen(cfg->notes, sizeof cfg->notes);
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		int len = (int)((nl ? nl : end) - p);
		gp_log(GP_LOG_INFO, "%.*s", len, p);
		p += len + 1;
	}
}

/* One scheduler's variable: its limit in *out, or a bad value said. True when it set *out. */
static bool gp_config_sched_value(struct gp_config_ctx *c, const char *name, const char *val, size_t *out)
{
	char q[GP_CONFIG_QUOTE_MAX + 4];
	if (gp_config_parse_hami_size(val, out) == 0)
		return true;
	snprintf(c->var, sizeof c->var, "%s", name);
	gp_config_bad(c, "no limit from it",
		      "%s=%s: expected bytes, or a number with k, m or g (e.g. 4096m, 4g), from 1 to 262144g, as HAMi-core "
		      "reads it",
		      name, gp_config_quote(val, q));
	return false;
}

/* CUDA_DEVICE_MEMORY_LIMIT (every device) and CUDA_DEVICE_MEMORY_LIMIT_<n> (device n), as a
 * Kubernetes device plugin such as HAMi's sets them for its library: gpupool's limit when
 * GPUPOOL_CONF gives none (an explicit limit wins, and a note says so). */
static void gp_config_parse_sched(struct gp_config_ctx *c, gp_getenv_fn get, bool limit_given)
{
	struct gp_config *cfg = c->cfg;
	const char *vals[GP_CONFIG_MAX_DEVICES + 1];
	char names[GP_CONFIG_MAX_DEVICES + 1][sizeof SCHED_VAR + 4], t[32];
	int first = -1;
	for (int i = 0; i <= GP_CONFIG_MAX_DEVICES; i++) {
		/* index 0 is the variable for every device, i the one for device i - 1 */
		if (i)
			snprintf(names[i], sizeof names[i], "%s_%d", SCHED_VAR, i - 1);
		else
			snprintf(names[i], sizeof names[i], "%s", SCHED_VAR);
		vals[i] = get(names[i]);
		if (vals[i] && !*vals[i])
			vals[i] = NULL; /* empty: unset, as HAMi-core takes it */
		if (vals[i] && first < 0)
			first = i;
	}
	if (first < 0)
		return;
	if (limit_given) {
		char q[GP_CONFIG_QUOTE_MAX + 4], lim[64];
		gp_config_knob_text(gp_config_find("limit"), cfg, lim, sizeof lim);
		gp_config_note(cfg, "%s=%s (a scheduler's limit): limit:%s in GPUPOOL_CONF wins", names[first],
			       gp_config_quote(vals[first], q), lim);
		return;
	}
	size_t v;
	if (vals[0] && gp_config_sched_value(c, names[0], vals[0], &v)) {
		cfg->limit_bytes = v;
		cfg->limit_percent = 0;
		cfg->limit_sched = true;
		gp_config_note(cfg, "%s=%s: every device's limit is %s (as limit:%s)", names[0], vals[0],
			       gp_config_fmt_size(v, t), t);
	}
	for (int d = 0; d < GP_CONFIG_MAX_DEVICES; d++) {
		if (vals[d + 1] && gp_config_sched_value(c, names[d + 1], vals[d + 1], &v)) {
			cfg->limit_device[d] = v;
			gp_config_note(cfg, "%s=%s: device %d's limit is %s", names[d + 1], vals[d + 1], d,
				       gp_config_fmt_size(v, t));
		}
	}
}

/* CUDA_DEVICE_MEMORY_LIMIT_<n> for an n gpupool keeps no limit for: set by hand (HAMi-core
 * reads the same 16), so a bad value, one line each, rather than a limit silently missing. */
static void gp_config_sched_beyond(struct gp_config_ctx *c, gp_getenv_fn get)
{
	char name[sizeof SCHED_VAR + 8], q[GP_CONFIG_QUOTE_MAX + 4], instead[48];
	for (int d = GP_CONFIG_MAX_DEVICES; d < SCHED_PROBE_MAX; d++) {
		snprintf(name, sizeof name, "%s_%d", SCHED_VAR, d);
		const char *v = get(name);
		if (!v || !*v)
			continue;
		snprintf(c->var, sizeof c->var, "%s", name);
		snprintf(instead, sizeof instead, "device %d gets no limit from it", d);
		gp_config_bad(c, instead, "%s=%s: expected a device index from 0 to %d after %s_", name,
			      gp_config_quote(v, q), GP_CONFIG_MAX_DEVICES - 1, SCHED_VAR);
	}
}

/* group_limit is a group's budget: without a group it applies to nothing, and says so. Not a
 * bad value: the same GPUPOOL_CONF may be shared by processes that get GPUPOOL_GROUP. */
static void gp_config_check_group(const struct gp_config *cfg)
{
	if (cfg->group[0] || (!cfg->group_limit_bytes && !cfg->group_limit_percent))
		return;
	char t[64];
	gp_config_knob_text(gp_config_find("group_limit"), cfg, t, sizeof t);
	gp_log(GP_LOG_WARN, "GPUPOOL_CONF: group_limit:%s has no group to apply to; set group:FILE or GPUPOOL_GROUP", t);
}

static bool gp_config_ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), m = strlen(suffix);
	return n >= m && gp_config_ieq(s + n - m, suffix);
}

int gp_config_parse(struct gp_config *cfg, gp_getenv_fn get)
{
	struct gp_config_ctx c = {.cfg = cfg};
	memset(cfg, 0, sizeof *cfg);
	for (size_t i = 0; i < GP_NKNOBS; i++)
		gp_config_knob_default(&knobs[i], cfg);

	const char *conf = get("GPUPOOL_CONF");
	snprintf(c.var, sizeof c.var, "GPUPOOL_CONF");
	if (conf)
		gp_config_parse_conf(&c, conf);
	cfg->strict = c.strict;
	gp_config_check_geometry(&c);

	gp_config_parse_var(&c, get, "GPUPOOL_DISABLE");
	gp_config_parse_var(&c, get, "GPUPOOL_LOG");
	gp_config_parse_var(&c, get, "GPUPOOL_REPORT");
	gp_config_parse_var(&c, get, "GPUPOOL_GROUP");
	bool limit_given = c.seen & (uint64_t)1 << (size_t)(gp_config_find("limit") - knobs);
	gp_config_parse_sched(&c, get, limit_given);
	if (!limit_given) /* an explicit limit wins over every scheduler's variable, this one too */
		gp_config_sched_beyond(&c, get);
	gp_config_check_group(cfg);
	if (!c.format_set && gp_config_ends_with(cfg->report, ".json"))
		cfg->report_format = GP_REPORT_JSON;

	return cfg->strict && cfg->bad ? -EINVAL : 0;
}

/* ---- documentation ---- */

void gp_config_print_knobs(FILE *f)
{
	fprintf(f, "| knob | default | range | effect |\n");
	fprintf(f, "|------|---------|-------|--------|\n");
	for (size_t i = 0; i < GP_NKNOBS; i++) {
		const struct gp_config_knob *k = &knobs[i];
		if (*k->def)
			fprintf(f, "| `%s` | `%s` | %s | %s |\n", k->name, k->def, k->range, k->effect);
		else
			fprintf(f, "| `%s` | unset | %s | %s |\n", k->name, k->range, k->effect);
	}
}

void gp_config_pool_params(const struct gp_config *c, size_t device_total, struct gp_pool_params *p)
{
	gp_pool_params_default(p);
	p->round = c->round;
	p->small_max = c->small_max;
	p->small_segment = c->small_segment;
	p->medium_max = c->medium_max;
	p->medium_segment = c->medium_segment;
	p->large_round = c->large_round;
	p->max_split_size = c->max_split_size;
	p->release_threshold = c->release_threshold;
	p->sync_free = c->fence == GP_FENCE_SYNC;
	p->fence_marker = c->fence_marker;
	p->check = c->check;
	p->limit = gp_config_limit(c, device_total);
}

/* A segment size for a class whose own does not fit `room` bytes: the default `def` when it
 * fits, else the largest multiple of `unit` that does (at least `unit`). */
static size_t gp_config_fit_size(size_t def, size_t room, size_t unit)
{
	if (def <= room)
		return def;
	size_t v = room / unit * unit;
	return v ? v : unit;
}

/* Appends "name:value" to a comma-separated list in buf (cap bytes). */
static void gp_config_list_add(char *buf, size_t cap, const char *name, size_t v)
{
	char t[32];
	size_t n = strnlen(buf, cap);
	if (n < cap)
		snprintf(buf + n, cap - n, "%s%s:%s", n ? ", " : "", name, gp_config_fmt_size(v, t));
}

bool gp_config_fit_device(struct gp_pool_params *p, int device, size_t device_free, char *msg, size_t cap)
{
	if (!device_free)
		return false;
	/* A segment of all the free memory would be the device's only one: half of it leaves
	 * the other classes room. Small requests have no exact-size fallback under the limit
	 * (medium and large ones do): their segment must fit the limit too. */
	size_t room = device_free / 2;
	size_t small_room = p->limit && p->limit < room ? p->limit : room;
	char was[160] = "", now[200] = "";
	unsigned n = 0;
	if (p->small_segment > small_room) {
		gp_config_list_add(was, sizeof was, "small_segment", p->small_segment);
		p->small_segment = gp_config_fit_size((size_t)GP_POOL_DEFAULT_SMALL_SEGMENT_MIB << 20, small_room, p->round);
		gp_config_list_add(now, sizeof now, "small_segment", p->small_segment);
		n++;
	}
	if (p->medium_segment > room) {
		gp_config_list_add(was, sizeof was, "medium_segment", p->medium_segment);
		p->medium_segment = gp_config_fit_size((size_t)GP_POOL_DEFAULT_MEDIUM_SEGMENT_MIB << 20, room, p->round);
		gp_config_list_add(now, sizeof now, "medium_segment", p->medium_segment);
		n++;
	}
	if (p->large_round > room) {
		gp_config_list_add(was, sizeof was, "large_round", p->large_round);
		size_t v = (size_t)GP_POOL_DEFAULT_LARGE_ROUND_MIB << 20; /* a power of two, as the knob */
		while (v > room && v > p->round)
			v >>= 1;
		p->large_round = v < p->round ? p->round : v;
		gp_config_list_add(now, sizeof now, "large_round", p->large_round);
		n++;
	}
	if (!n)
		return false;
	/* the classes' bounds follow their segments (gp_pool_params_check) */
	if (p->small_max > p->small_segment) {
		p->small_max = p->small_segment;
		gp_config_list_add(now, sizeof now, "small_max", p->small_max);
	}
	if (p->medium_max > p->medium_segment) {
		p->medium_max = p->medium_segment;
		gp_config_list_add(now, sizeof now, "medium_max", p->medium_max);
	}
	if (p->small_max > p->medium_max) {
		p->small_max = p->medium_max;
		gp_config_list_add(now, sizeof now, "small_max", p->small_max);
	}
	char lim[64] = "";
	if (small_room < room) {
		char t[32];
		snprintf(lim, sizeof lim, ", a small one at most the limit, %s", gp_config_fmt_size(p->limit, t));
	}
	snprintf(msg, cap,
		 "GPUPOOL_CONF: %s %s not fit device %d (a segment may take at most half of the %.1f GiB free when "
		 "its pool was made%s), and every request of that class would fail; using %s instead",
		 was, n > 1 ? "do" : "does", device, (double)device_free / (double)GIB, lim, now);
	return true;
}

size_t gp_config_device_limit(const struct gp_config *c, int device, size_t device_total)
{
	if (device >= 0 && device < GP_CONFIG_MAX_DEVICES && c->limit_device[device])
		return c->limit_device[device];
	return gp_config_limit(c, device_total);
}

size_t gp_config_group_limit(const struct gp_config *c, size_t device_total)
{
	if (c->group_limit_percent && device_total)
		return device_total / 100 * c->group_limit_percent + device_total % 100 * c->group_limit_percent / 100;
	return c->group_limit_bytes;
}

size_t gp_config_limit(const struct gp_config *c, size_t device_total)
{
	if (c->limit_percent && device_total) /* in two parts: no overflow near SIZE_MAX */
		return device_total / 100 * c->limit_percent + device_total % 100 * c->limit_percent / 100;
	return c->limit_bytes;
}
