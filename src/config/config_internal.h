/* The configuration's internals, shared by its files only (config.c, config_knobs.c,
 * config_values.c, config_messages.c, config_sched.c, config_device.c): the knob's row, the
 * state of one parse, and the functions one file takes from another. The public contract is
 * config.h; nothing outside the config layer includes this. Depends on config.h only. */
#ifndef GP_CONFIG_INTERNAL_H
#define GP_CONFIG_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"

/* Longest part of a bad value quoted back in a message. */
#define GP_CONFIG_QUOTE_MAX 80

/* HAMi-core's limit for every device; with _<n> appended, device n's. */
#define GP_CONFIG_SCHED_VAR "CUDA_DEVICE_MEMORY_LIMIT"

/* Largest value of a size knob: 256T (2^48), the trace format's largest request. Larger
 * ones are typos (no device holds that much), and they keep the pool's sums far from wrapping. */
#define GP_CONFIG_SIZE_CAP ((size_t)1 << 48)

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
	GP_KNOB_RESERVE,   /* reserve_bytes / reserve_percent */
	GP_KNOB_SCHED,     /* a scheduler's variable (documentation; gp_config_parse_sched reads them) */
	GP_KNOB_SEGMENTS,  /* int, enum gp_pool_segments */
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

/* State of one gp_config_parse call. */
struct gp_config_ctx {
	struct gp_config *cfg;
	bool strict;          /* strict mode, known before the first item is parsed */
	bool format_set;      /* report_format given explicitly */
	uint64_t seen;        /* knobs given in GPUPOOL_CONF, by index */
	char var[40];         /* the variable being read: what gp_config_bad adds to cfg->bad_vars */
};

/* ---- one value's syntax (config_values.c): NUL-terminated, already trimmed input; 0 or
 * -EINVAL, *out unchanged on error ---- */

/* ASCII case-insensitive equality. */
bool gp_config_ieq(const char *a, const char *b);
/* 1, true, yes, on / 0, false, no, off (any case). */
int gp_config_parse_bool(const char *s, bool *out);
/* Decimal digits only, at most max. */
int gp_config_parse_uint(const char *s, size_t max, size_t *out);
/* error, warning (or warn), info, debug (any case): enum gp_log_level. */
int gp_config_parse_level(const char *s, int *out);
/* A path of 1 to GP_PATH_MAX - 1 bytes without control characters, copied into dst
 * (GP_PATH_MAX bytes). */
int gp_config_set_path(char *dst, const char *s);
/* A limit: none (0), a size up to max, or a percentage. On error *bytes and *pct unchanged,
 * but for a percentage from 101% to 1000%: -ERANGE, with 100% set (the nearest cap that can
 * be applied: the whole device). */
int gp_config_parse_limit(const char *s, size_t max, size_t *bytes, unsigned *pct);
/* Writes a size the way a user would: 2M, 1536K, 1000; SIZE_MAX as none. Returns buf. */
const char *gp_config_fmt_size(size_t v, char buf[32]);

/* ---- the knob table (config_knobs.c) ---- */

/* The knob `name` of GPUPOOL_CONF (not a variable's row), or NULL. */
const struct gp_config_knob *gp_config_find(const char *name);
/* The row of any name, a variable's (GPUPOOL_*) included, or NULL. */
const struct gp_config_knob *gp_config_find_var(const char *name);
/* k's row number in the table, below 64 (the bit of gp_config_ctx.seen). */
size_t gp_config_knob_index(const struct gp_config_knob *k);
/* Sets knob k of cfg from s (trimmed, NUL-terminated). On error cfg is unchanged. */
int gp_config_knob_set(const struct gp_config_knob *k, const char *s, struct gp_config *cfg);
/* Sets knob k of cfg to the table's default. */
void gp_config_knob_default(const struct gp_config_knob *k, struct gp_config *cfg);
/* cfg all zero, then every knob at its default. */
void gp_config_defaults(struct gp_config *cfg);
/* The value of knob k in cfg, as the parser accepts it (sizes exact, in the largest unit
 * that divides them), into buf (cap bytes, NUL-terminated). */
void gp_config_knob_text(const struct gp_config_knob *k, const struct gp_config *cfg, char *buf, size_t cap);
/* The keys of GPUPOOL_CONF, ", "-separated, into buf (size bytes, cut where it does not fit). */
void gp_config_list_keys(char *buf, size_t size);
/* The knob of GPUPOOL_CONF whose name `key` is a typo of (at most two letters apart, any
 * case: limt, Limit, group_limt), or NULL. */
const struct gp_config_knob *gp_config_suggest(const char *key);
/* Whether k sets a cap: limit, group_limit, group (GPUPOOL_GROUP too). A value of one that
 * cannot be applied as asked refuses every allocation rather than drop the cap. */
bool gp_config_is_cap(const struct gp_config_knob *k);

/* ---- messages (config_messages.c) ---- */

/* Quotes at most GP_CONFIG_QUOTE_MAX bytes of s, with "..." when cut. */
const char *gp_config_quote(const char *s, char buf[GP_CONFIG_QUOTE_MAX + 4]);
/* Logs one warning line "<what>; <consequence>", where the consequence is `instead`,
 * or in strict mode that the pool is disabled. Marks the config bad, and adds c->var to
 * cfg->bad_vars. */
void gp_config_bad(struct gp_config_ctx *c, const char *instead, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* gp_config_bad for a cap that cannot be applied as asked: the line says that every
 * allocation will be refused, and cfg->cap_refused is set. */
void gp_config_bad_cap(struct gp_config_ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* gp_config_bad for the value val of knob k, read from the variable var (GPUPOOL_CONF, or k's
 * own): what k takes, and that its default is used instead (for a cap: gp_config_bad_cap's
 * refusal instead). */
void gp_config_bad_value(struct gp_config_ctx *c, const char *var, const struct gp_config_knob *k, const char *val);
/* Appends one line to cfg->notes (cut where it does not fit). */
void gp_config_note(struct gp_config *cfg, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---- a scheduler's variables (config_sched.c) ---- */

/* CUDA_DEVICE_MEMORY_LIMIT (every device) and CUDA_DEVICE_MEMORY_LIMIT_<n> (device n), as a
 * Kubernetes device plugin such as HAMi's sets them for its library: gpupool's limit when
 * GPUPOOL_CONF gives none (an explicit limit wins, and a note says so). */
void gp_config_parse_sched(struct gp_config_ctx *c, gp_getenv_fn get, bool limit_given);
/* CUDA_DEVICE_MEMORY_LIMIT_<n> for an n gpupool keeps no limit for: set by hand (HAMi-core
 * reads the same 16), so a cap that cannot be applied, one line each, rather than a limit
 * silently missing. */
void gp_config_sched_beyond(struct gp_config_ctx *c, gp_getenv_fn get);

#endif
