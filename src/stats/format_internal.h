/* The formatter's internals, shared by format.c and the files of the outputs (format_*.c)
 * only: the raw writer, the one list of fields every output walks, the small helpers more than
 * one output uses. The contract is format.h; nothing outside the formatter includes this.
 * Depends on format.h and libc only. */
#ifndef GP_FORMAT_INTERNAL_H
#define GP_FORMAT_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "format.h"

/* ---- writer (format.c) ----------------------------------------------------------- */

/* Appends len bytes of s to o's staging buffer, pushing it out whenever it fills. */
void gp_format_write(struct gp_format_out *o, const char *s, size_t len);

static inline void gp_format_puts(struct gp_format_out *o, const char *s) { gp_format_write(o, s, strlen(s)); }

/* ---- fields (format.c) ----------------------------------------------------------- */

/* One field of a device slot, from the X-macros: its name, unit ("bytes", "count", "ns") and
 * help as gpupool/stats.h lists them; a gauge has a peak at peak_off. */
struct gp_format_metric {
	const char *name, *unit, *help;
	bool gauge;
	size_t off, peak_off;
};

#define GP_FORMAT_ONE_(n, u, h) +1
/* Every field, gauges first, in the order of GPUPOOL_GAUGES and GPUPOOL_COUNTERS: the one list
 * that drives every output, so a new counter shows up everywhere. */
enum { GP_FORMAT_NMETRICS = 0 GPUPOOL_GAUGES(GP_FORMAT_ONE_) GPUPOOL_COUNTERS(GP_FORMAT_ONE_) };
extern const struct gp_format_metric gp_format_metrics[GP_FORMAT_NMETRICS];

static inline bool gp_format_is_bytes(const struct gp_format_metric *m) { return strcmp(m->unit, "bytes") == 0; }
/* A time in nanoseconds in the page; Prometheus's unit is the second. */
static inline bool gp_format_is_ns(const struct gp_format_metric *m) { return strcmp(m->unit, "ns") == 0; }

static inline uint64_t gp_format_field(const struct gpupool_device_stats *s, size_t off)
{
	uint64_t v;
	memcpy(&v, (const char *)s + off, sizeof v);
	return v;
}

/* ---- shared helpers (format.c) --------------------------------------------------- */

/* Pool hit rate in percent (hits / (hits + misses)); negative when there were none.
 * In double: the counters come from a page anyone may have written, the sum may not fit. */
double gp_format_hit_rate(const struct gpupool_device_stats *s);

static inline uint64_t gp_format_add_sat(uint64_t a, uint64_t b) { return a > UINT64_MAX - b ? UINT64_MAX : a + b; }

/* Real driver calls the pool avoided, allocs + frees - (segment_allocs + segment_frees),
 * as a sign and a magnitude: both sums saturate at UINT64_MAX, nothing overflows. */
void gp_format_calls_saved(char *buf, size_t cap, const struct gpupool_device_stats *s);

/* Text a page's writer chose (comm, lib_version: `cap` bytes, maybe unterminated): printable
 * ASCII, '?' for anything else, into dst of at least `cap` bytes. */
void gp_format_safe_text(char *dst, const char *src, size_t cap);
/* The page's comm so: dst holds GPUPOOL_COMM_LEN bytes. */
void gp_format_safe_comm(char *dst, const struct gpupool_page *pg);

/* The order of the GPU lines: by index, those without one last, then by UUID. */
bool gp_format_gpu_before(const struct gp_format_gpu *a, const struct gp_format_gpu *b);

/* "12 s", "3 min", "2 h", "5 d": how long ago `ns` was, in a few characters. */
void gp_format_age(char *buf, size_t cap, uint64_t ns);

/* ANSI colours of the text views, or "" without colour. */
#define GP_FORMAT_BOLD "\033[1m"
#define GP_FORMAT_DIM "\033[2m"
#define GP_FORMAT_RED "\033[31m"
#define GP_FORMAT_YELLOW "\033[33m"
#define GP_FORMAT_CYAN "\033[36m"
#define GP_FORMAT_RESET "\033[0m"

/* A count per second in a few characters: "0.5", "812", "9999", "12.3k", "4.1M". */
void gp_format_rate_count(char *buf, size_t cap, double v);
/* Bytes per second as gp_format_bytes writes bytes ("1.5 GiB"); the caller adds "/s" where
 * the column's head does not say it. */
void gp_format_rate_bytes(char *buf, size_t cap, double v);

#endif
