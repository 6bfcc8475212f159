/* The one knob table (parser's lookup, defaults and bounds, and docs/knobs.md's table) and all
 * that walks it: a knob set from text, its default, its value as text, the keys, the
 * description of a config (gp_config_describe), the documentation. Depends on
 * config_values.c's parsers, log.h and pool.h's defaults: never on the environment. */
#include "config_internal.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <string.h>

#include "log.h"
#include "pool.h"

#define MIB ((size_t)1 << 20)
#define GIB ((size_t)1 << 30)

/* A default of pool.h as the table writes it: 512, or 2M for a GP_POOL_DEFAULT_*_MIB. */
#define GP_TEXT_(x) #x
#define GP_TEXT(x) GP_TEXT_(x)
#define GP_MIB_TEXT(x) GP_TEXT(x) "M"

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
	 "bytes, or a number with k, m or g (any case; 1024-based), from 1 to 262144g, read as HAMi-core reads it (\" 4g\", \"4.5g\", \"0x100000000\": 4G; said in one line); 0 or no number refuses every allocation",
	 "A scheduler's limit per device (HAMi's), taken as limit when GPUPOOL_CONF has no limit (docs/kubernetes.md)."},
	{"CUDA_DEVICE_MEMORY_LIMIT_<n>", GP_KNOB_SCHED, 0, 0, 0, "",
	 "as CUDA_DEVICE_MEMORY_LIMIT; n a device index from 0 to 15",
	 "Device n's limit (its CUDA index in the process), over CUDA_DEVICE_MEMORY_LIMIT; also only without a limit in GPUPOOL_CONF. An n above 15 is a limit gpupool cannot hold: one line, and every allocation is refused."},
	{"limit", GP_KNOB_LIMIT, F(limit_bytes), 0, GP_CONFIG_SIZE_CAP, "none",
	 "a size up to 256T (e.g. 40G, 512MiB) or a percentage of device memory (1%..100%; up to 1000% is taken as 100%); 0 or none for no limit",
	 "Most device memory the pool reserves per device; past it allocations fail with cudaErrorMemoryAllocation."},
	{"group", GP_KNOB_PATH, F(group), 0, 0, "none", "a file path (at most 255 bytes), or none",
	 "Share one budget per device with every process naming this file (docs/kubernetes.md); created 0600 when missing."},
	{"group_limit", GP_KNOB_GROUP_LIMIT, F(group_limit_bytes), 0, GP_CONFIG_SIZE_CAP, "none",
	 "a size up to 256T or a percentage of device memory (1%..100%; up to 1000% is taken as 100%); 0 or none for none",
	 "The group's budget per device, set by the first member to use the device; the file's wins after that."},
	{"round", GP_KNOB_POW2, F(round), 512, 2 * MIB, GP_TEXT(GP_POOL_DEFAULT_ROUND), "a power of two from 512 to 2M",
	 "Every request is rounded up to a multiple of this."},
	{"small_max", GP_KNOB_SIZE, F(small_max), 1, GP_CONFIG_SIZE_CAP, GP_MIB_TEXT(GP_POOL_DEFAULT_SMALL_MAX_MIB),
	 "a size from 1 to 256T, at most small_segment and at most medium_max",
	 "Requests up to this size are served from small segments."},
	{"small_segment", GP_KNOB_SIZE, F(small_segment), 1, GP_CONFIG_SIZE_CAP,
	 GP_MIB_TEXT(GP_POOL_DEFAULT_SMALL_SEGMENT_MIB), "a size from 1 to 256T, a multiple of round, at least small_max",
	 "Size of a small segment."},
	{"medium_max", GP_KNOB_SIZE, F(medium_max), 1, GP_CONFIG_SIZE_CAP, GP_MIB_TEXT(GP_POOL_DEFAULT_MEDIUM_MAX_MIB),
	 "a size from 1 to 256T, at least small_max, at most medium_segment",
	 "Requests above small_max and below this are served from medium segments."},
	{"medium_segment", GP_KNOB_SIZE, F(medium_segment), 1, GP_CONFIG_SIZE_CAP,
	 GP_MIB_TEXT(GP_POOL_DEFAULT_MEDIUM_SEGMENT_MIB), "a size from 1 to 256T, a multiple of round, at least medium_max",
	 "Size of a medium segment."},
	{"large_round", GP_KNOB_POW2, F(large_round), 512, GIB, GP_MIB_TEXT(GP_POOL_DEFAULT_LARGE_ROUND_MIB),
	 "a power of two from 512 to 1G, at least round",
	 "Larger requests get a segment of their own, rounded up to a multiple of this."},
	{"max_split_size", GP_KNOB_SIZE_NONE, F(max_split_size), 20 * MIB, GP_CONFIG_SIZE_CAP, "none",
	 "a size from 20M to 256T, or none",
	 "Cached blocks of whole segments larger than this are never split for a smaller request (limits fragmentation); a virtual-memory segment's free blocks are split as any, since their rest is never stranded."},
	{"release_threshold", GP_KNOB_SIZE_NONE, F(release_threshold), 0, GP_CONFIG_SIZE_CAP, "none",
	 "a size up to 256T, or none",
	 "After a free, cached memory (whole free segments, then free chunks of virtual-memory segments) goes back to the driver while more than this is cached; none keeps everything."},
	{"segments", GP_KNOB_SEGMENTS, F(segments), 0, 0, "auto", "auto, vmm or whole",
	 "Where the pool's memory comes from. `vmm`: ranges of the driver's virtual memory, into which physical memory is mapped a chunk (2 MiB on an H100) at a time where blocks need it; a range grows at its end, blocks span chunks, and free chunks, in the middle of a range too, go back on a release, a reclaim or the decay. `auto`: the same, but a cudaMalloc or cuMemAlloc of at least medium_max that the pool grows for gets a whole segment of its own, as with `whole`, so that cudaIpcGetMemHandle can still export it (memory of the virtual memory API cannot be exported that way). `whole`: one cudaMalloc or cuMemAlloc per segment. A device without virtual memory management gets whole segments (docs/architecture.md, \"Virtual-memory segments\")."},
	{"decay_ms", GP_KNOB_UINT, F(decay_ms), 0, 86400000, "10000", "an integer from 0 to 86400000",
	 "Milliseconds free memory may sit unused (a whole free segment, or free chunks of a virtual-memory one) before it goes back to the driver by itself (at most 2 GiB of it per tenth of a second); 0 keeps it until a release, a reclaim or the exit (docs/sharing.md)."},
	{"reclaim", GP_KNOB_BOOL, F(reclaim), 0, 0, "1", BOOL_RANGE,
	 "When the GPU itself is out of memory, ask the other gpupool processes on the same GPU (matched by UUID) to give back memory they hold idle, and answer their requests in turn; 0: neither (docs/sharing.md)."},
	{"reclaim_wait_ms", GP_KNOB_UINT, F(reclaim_wait_ms), 0, 60000, "10000", "an integer from 0 to 60000",
	 "Longest an allocation that found the GPU full waits for memory, in the GPU's queue of waiters, while other processes give back what they hold idle and free what they use; 0: it neither asks nor waits (it still answers others; reclaim:0 turns both off). A waiter that holds memory and is behind another gives up sooner (docs/sharing.md, \"Hold and wait\")."},
	{"reserve", GP_KNOB_RESERVE, F(reserve_bytes), 0, GP_CONFIG_SIZE_CAP, "none",
	 "a size up to 256T or a percentage of device memory (1%..100%); 0 or none for none",
	 "Memory per device this process keeps cached whatever others ask: reclaim, the waiters of other processes and the decay take only what it holds above this (an inference server's working set). With limit, a request and a limit; floors that together pass the GPU are refused with one line (docs/sharing.md)."},
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

int gp_config_knob_set(const struct gp_config_knob *k, const char *s, struct gp_config *cfg)
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
	case GP_KNOB_RESERVE:
		return gp_config_parse_limit(s, k->max, &cfg->reserve_bytes, &cfg->reserve_percent);
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
	case GP_KNOB_SEGMENTS:
		if (gp_config_ieq(s, "auto"))
			*(int *)field = GP_SEGMENTS_AUTO;
		else if (gp_config_ieq(s, "vmm"))
			*(int *)field = GP_SEGMENTS_VMM;
		else if (gp_config_ieq(s, "whole"))
			*(int *)field = GP_SEGMENTS_WHOLE;
		else
			return -EINVAL;
		return 0;
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

void gp_config_knob_default(const struct gp_config_knob *k, struct gp_config *cfg)
{
	if (k->type != GP_KNOB_CONF) {
		int rc = gp_config_knob_set(k, k->def, cfg);
		(void)rc; /* the table's defaults parse; the defaults test checks it */
	}
}

void gp_config_knob_text(const struct gp_config_knob *k, const struct gp_config *cfg, char *buf, size_t cap)
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
	case GP_KNOB_GROUP_LIMIT:
	case GP_KNOB_RESERVE: {
		unsigned pct = k->type == GP_KNOB_GROUP_LIMIT ? cfg->group_limit_percent
			       : k->type == GP_KNOB_RESERVE   ? cfg->reserve_percent
							      : cfg->limit_percent;
		v = k->type == GP_KNOB_GROUP_LIMIT ? cfg->group_limit_bytes
		    : k->type == GP_KNOB_RESERVE   ? cfg->reserve_bytes
						   : cfg->limit_bytes;
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
	case GP_KNOB_SEGMENTS:
		snprintf(buf, cap, "%s", gp_config_segments_name(*(const int *)field));
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

const char *gp_config_segments_name(int segments)
{
	return segments == GP_SEGMENTS_VMM ? "vmm" : segments == GP_SEGMENTS_WHOLE ? "whole" : "auto";
}

const struct gp_config_knob *gp_config_find(const char *name)
{
	for (size_t i = 0; i < GP_NKNOBS; i++)
		if (!gp_config_is_var(&knobs[i]) && strcmp(knobs[i].name, name) == 0)
			return &knobs[i];
	return NULL;
}

const struct gp_config_knob *gp_config_find_var(const char *name)
{
	for (size_t i = 0; i < GP_NKNOBS; i++)
		if (strcmp(knobs[i].name, name) == 0)
			return &knobs[i];
	return NULL;
}

size_t gp_config_knob_index(const struct gp_config_knob *k)
{
	return (size_t)(k - knobs);
}

void gp_config_defaults(struct gp_config *cfg)
{
	memset(cfg, 0, sizeof *cfg);
	for (size_t i = 0; i < GP_NKNOBS; i++)
		gp_config_knob_default(&knobs[i], cfg);
}

void gp_config_list_keys(char *buf, size_t size)
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

bool gp_config_is_cap(const struct gp_config_knob *k)
{
	return k && (k->type == GP_KNOB_LIMIT || k->type == GP_KNOB_GROUP_LIMIT ||
		     (k->type == GP_KNOB_PATH && k->offset == offsetof(struct gp_config, group)));
}

/* Letters between a and b (any case): insertions, deletions, substitutions and swaps of two
 * neighbours (optimal string alignment); names of at most 32 bytes, else a large number. */
static unsigned gp_config_distance(const char *a, const char *b)
{
	enum { N = 33 };
	size_t n = strlen(a), m = strlen(b);
	if (n >= N || m >= N)
		return 99;
	unsigned d[N][N];
	for (size_t i = 0; i <= n; i++)
		d[i][0] = (unsigned)i;
	for (size_t j = 0; j <= m; j++)
		d[0][j] = (unsigned)j;
	for (size_t i = 1; i <= n; i++)
		for (size_t j = 1; j <= m; j++) {
			int ca = tolower((unsigned char)a[i - 1]), cb = tolower((unsigned char)b[j - 1]);
			unsigned v = d[i - 1][j - 1] + (ca != cb);
			if (d[i - 1][j] + 1 < v)
				v = d[i - 1][j] + 1;
			if (d[i][j - 1] + 1 < v)
				v = d[i][j - 1] + 1;
			if (i > 1 && j > 1 && ca == tolower((unsigned char)b[j - 2]) && tolower((unsigned char)a[i - 2]) == cb &&
			    d[i - 2][j - 2] + 1 < v)
				v = d[i - 2][j - 2] + 1;
			d[i][j] = v;
		}
	return d[n][m];
}

const struct gp_config_knob *gp_config_suggest(const char *key)
{
	const struct gp_config_knob *best = NULL;
	unsigned best_d = 99;
	for (size_t i = 0; i < GP_NKNOBS; i++) {
		if (gp_config_is_var(&knobs[i]))
			continue;
		unsigned d = gp_config_distance(key, knobs[i].name);
		if (d < best_d) {
			best_d = d;
			best = &knobs[i];
		}
	}
	/* a short name is close to too many words two letters away */
	unsigned most = strlen(key) <= 4 ? 1 : 2;
	return best && best_d <= most ? best : NULL; /* 0: the same letters in another case */
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
		gp_config_put(buf, cap, n, "%slimit:%s (" GP_CONFIG_SCHED_VAR ")", *n ? "," : "", v);
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
		gp_config_put(buf, cap, n, "%slimit:%s (" GP_CONFIG_SCHED_VAR "_%d", *n ? "," : "", v, d);
		for (int i = 1; i < m; i++)
			gp_config_put(buf, cap, n, "%s_%d", i == m - 1 ? " and " : ", ", same[i]);
		gp_config_put(buf, cap, n, ")");
	}
}

size_t gp_config_describe(const struct gp_config *cfg, char *buf, size_t cap)
{
	struct gp_config def;
	gp_config_defaults(&def);
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
