/* Configuration: the environment parsed once into an immutable struct.
 * Pure: the caller passes the lookup function (getenv, or a table in tests), and every
 * problem is reported through gp_log as one line naming the variable, the value, what
 * was expected and what happens instead. Depends on log.h only. */
#ifndef GP_CONFIG_H
#define GP_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

enum gp_fence_policy {
	GP_FENCE_THREAD, /* a background thread fences when frees are pending (default) */
	GP_FENCE_INLINE, /* only the allocating thread fences, when it would otherwise grow */
	GP_FENCE_SYNC,   /* every cudaFree fences before it returns, like native cudaFree */
};

enum gp_report_format { GP_REPORT_TEXT, GP_REPORT_JSON };

#define GP_PATH_MAX 256
/* Devices whose limit a scheduler's per-device variable may set (CUDA_DEVICE_MEMORY_LIMIT_<n>). */
#define GP_CONFIG_MAX_DEVICES 16

struct gp_config {
	bool disable;                  /* GPUPOOL_DISABLE: pass everything to the runtime */
	bool strict;                   /* a bad knob makes every allocation fail */
	bool bad;                      /* some knob was bad (strict mode acts on this) */
	char bad_vars[128];            /* the variables that held them, ", "-separated ("GPUPOOL_CONF,
					* CUDA_DEVICE_MEMORY_LIMIT_2"; ", ..." where cut); "" when none */
	bool cap_refused;              /* a cap (limit, group, group_limit, a scheduler's limit, or a key
					* that looks like one of them) was given a value that cannot be
					* applied as asked: every allocation is refused rather than run
					* without it (docs/security.md, "Caps that cannot be applied") */
	int log_level;                 /* enum gp_log_level */
	size_t limit_bytes;            /* per-device limit on reserved bytes; 0 = none */
	unsigned limit_percent;        /* limit as % of device memory (1..100); 0 = not used */
	bool limit_sched;              /* limit_bytes came from CUDA_DEVICE_MEMORY_LIMIT, not GPUPOOL_CONF */
	size_t limit_device[GP_CONFIG_MAX_DEVICES]; /* device n's limit from CUDA_DEVICE_MEMORY_LIMIT_<n>
						     * (HAMi-core's variables), over limit_bytes; 0 = none */
	char group[GP_PATH_MAX];       /* the group file (group:, GPUPOOL_GROUP); "" = no group */
	size_t group_limit_bytes;      /* the group's budget per device; 0 = none from this process */
	unsigned group_limit_percent;  /* the group's budget as % of device memory; 0 = not used */
	size_t round;                  /* request rounding */
	size_t small_max, small_segment, medium_max, medium_segment, large_round;
	size_t max_split_size;         /* SIZE_MAX = no cap */
	size_t release_threshold;      /* SIZE_MAX = keep everything cached */
	int segments;                  /* enum gp_pool_segments (pool.h): where segments come from */
	enum gp_fence_policy fence;
	unsigned fence_interval_us;    /* fence thread: wait this long for more frees before fencing */
	bool fence_marker;             /* fence at the point of the free (events); false: device syncs */
	bool legacy_stream;            /* the program's GPU work is all on the legacy default stream:
					* cudaMalloc/cudaFree are stream-ordered on it (registry.h) */
	char report[GP_PATH_MAX];      /* "stderr" (default), "none", or a file path */
	enum gp_report_format report_format;
	bool stats_page;               /* create /dev/shm/gpupool.<pid> */
	char trace[GP_PATH_MAX];       /* record the request stream here; "" = off */
	bool check;                    /* run the pool's invariant checker after every call */
	unsigned decay_ms;             /* a whole free segment unused this long goes back; 0 = never */
	bool reclaim;                  /* ask and answer other processes for idle memory (sharing) */
	unsigned reclaim_wait_ms;      /* the longest an allocation waits for memory on a shared GPU */
	size_t reserve_bytes;          /* the floor: memory per device kept cached whatever others
					* ask (reclaim, waiters, the decay); 0 = none */
	unsigned reserve_percent;      /* the floor as % of device memory; 0 = not used */
	char notes[512];               /* info lines for the log, '\n'-separated (what the parse took
					* from a scheduler's variables): gp_config_log_notes */
};

typedef const char *(*gp_getenv_fn)(const char *name);

/* Fills *cfg from the environment. Bad values are logged and replaced by the default;
 * cfg->bad tells whether any was. Returns 0, or -EINVAL when strict mode is on and a
 * value was bad. Never allocates. */
int gp_config_parse(struct gp_config *cfg, gp_getenv_fn get);

/* Parses one size ("512", "64K", "1.5GiB", "2M"); binary suffixes K M G T with optional
 * "iB" or "B". Returns 0 or -EINVAL; a value written non-zero that comes to less than a
 * byte ("0.0009K", "0.0000001G") is -EINVAL, never 0 (which a limit reads as none). */
int gp_config_parse_size(const char *s, size_t *out);

/* The pool's parameters for one device from the knobs; `device_total` (bytes) resolves a
 * percentage limit (0 when unknown: no limit from a percentage). */
struct gp_pool_params;
void gp_config_pool_params(const struct gp_config *c, size_t device_total, struct gp_pool_params *p);
/* Fits the segment geometry of p (gp_config_pool_params's) to a device with `device_free`
 * bytes free when its pool is made. A segment may take at most half of that (and a small
 * one at most the limit: small requests have no exact-size segment to fall back on): a class
 * whose segment (small_segment, medium_segment) or rounding (large_round) is larger would
 * fail every request of that class, so it gets its default, or the largest size that fits
 * when even that does not, and small_max and medium_max are lowered to their segments where
 * they were above them; p then still passes gp_pool_params_check. True when it changed p,
 * with one line for the log in msg (cap bytes) naming the knobs, their values and what is
 * used instead. device_free 0 (unknown): nothing changes. */
bool gp_config_fit_device(struct gp_pool_params *p, int device, size_t device_free, char *msg, size_t cap);
/* The per-device limit in bytes for a device of `device_total` bytes (0: none). A
 * percentage needs the device's size: with device_total 0 it gives limit_bytes (0). */
size_t gp_config_limit(const struct gp_config *c, size_t device_total);
/* The limit of device `device` (its CUDA ordinal in this process): its own from
 * CUDA_DEVICE_MEMORY_LIMIT_<n> where set, else gp_config_limit's. */
size_t gp_config_device_limit(const struct gp_config *c, int device, size_t device_total);
/* The group budget (group_limit) in bytes for a device of `device_total` bytes (0: none). */
size_t gp_config_group_limit(const struct gp_config *c, size_t device_total);

/* The floor (reserve) in bytes for a device of `device_total` bytes (0: none; a percentage
 * with device_total 0 gives 0). */
size_t gp_config_reserve(const struct gp_config *c, size_t device_total);

/* Parses a size the way HAMi-core reads CUDA_DEVICE_MEMORY_LIMIT (get_limit_from_env in its
 * multiprocess_memory_limit.c): a last character k, m or g (any case) multiplies by 2^10,
 * 2^20 or 2^30, and the number is C's strtoul(s, NULL, 0) of the whole text: leading blanks
 * and a sign skipped, 0x hexadecimal, a leading 0 octal, read up to the first character that
 * is not a digit (" 4g", "+4g", "4.5g" and "0x100000000" are all 4 GiB; "4gb" is 4 bytes).
 * 0 and *out, with *canonical false where the text is not plain digits and an optional
 * suffix; or -EINVAL where HAMi-core has no limit from it (0, no digits, a product past
 * 2^64) or where it is past 262144g (2^48 bytes: no device has that, a negative number is
 * one). */
int gp_config_parse_hami_size(const char *s, size_t *out, bool *canonical);

/* The knobs of `cfg` that differ from their defaults, as GPUPOOL_CONF would set them
 * ("limit:8G,fence_interval_us:100"; "" when all are defaults), into buf (cap bytes,
 * NUL-terminated when cap > 0, cut where it does not fit). A limit from a scheduler's
 * variables names them: "limit:4G (CUDA_DEVICE_MEMORY_LIMIT)", and one item per other value
 * of the per-device ones, "limit:3000M (CUDA_DEVICE_MEMORY_LIMIT_0 and _1)". Returns the
 * length it needs. */
size_t gp_config_describe(const struct gp_config *cfg, char *buf, size_t cap);

/* The segments knob's value as it is written: "auto", "vmm" or "whole". */
const char *gp_config_segments_name(int segments);

/* Logs cfg->notes at info level, one line each: for the caller, once the log level is set. */
void gp_config_log_notes(const struct gp_config *cfg);

/* The knob table as docs/knobs.md shows it (markdown), written to f. */
void gp_config_print_knobs(FILE *f);

#endif
