/* The formatter of statistics pages (see format.h): every field list comes from the
 * GPUPOOL_GAUGES / GPUPOOL_COUNTERS X-macros, so a new counter shows up everywhere.
 * Runs at process exit: fixed buffers only, write(2) for fds, no malloc, no locks.
 * Depends on gpupool/stats.h and libc only. */
#include "format.h"
#include "statpage.h"

#include <errno.h>
#include <stdarg.h>
#include <string.h>
#include <unistd.h>

/* ---- writer ---------------------------------------------------------------------- */

static void out_init(struct gp_format_out *o)
{
	memset(o, 0, offsetof(struct gp_format_out, buf));
	o->fd = -1;
}

void gp_format_to_fd(struct gp_format_out *o, int fd)
{
	out_init(o);
	o->fd = fd;
}

void gp_format_to_file(struct gp_format_out *o, FILE *fp)
{
	out_init(o);
	o->fp = fp;
}

void gp_format_to_buf(struct gp_format_out *o, char *dst, size_t cap)
{
	out_init(o);
	o->dst = dst;
	o->cap = cap;
	if (dst && cap)
		dst[0] = '\0';
}

static void drain(struct gp_format_out *o)
{
	const char *p = o->buf;
	size_t left = o->n;
	o->n = 0;
	if (o->fd >= 0) {
		while (left) {
			ssize_t w = write(o->fd, p, left);
			if (w < 0 && errno == EINTR)
				continue;
			if (w <= 0) {
				o->truncated = true;
				return;
			}
			p += w;
			left -= (size_t)w;
		}
	} else if (o->fp) {
		if (fwrite(p, 1, left, o->fp) != left)
			o->truncated = true;
	} else if (o->dst && o->cap) {
		size_t room = o->cap - 1 - o->len;
		if (left > room) {
			left = room;
			o->truncated = true;
		}
		memcpy(o->dst + o->len, p, left);
		o->len += left;
		o->dst[o->len] = '\0';
	} else {
		o->truncated = true;
	}
}

static void gp_format_write(struct gp_format_out *o, const char *s, size_t len)
{
	while (len) {
		size_t room = sizeof o->buf - o->n;
		size_t k = len < room ? len : room;
		memcpy(o->buf + o->n, s, k);
		o->n += k;
		s += k;
		len -= k;
		if (o->n == sizeof o->buf)
			drain(o);
	}
}

void gp_format_printf(struct gp_format_out *o, const char *fmt, ...)
{
	char tmp[512];
	va_list ap;
	va_start(ap, fmt);
	int k = vsnprintf(tmp, sizeof tmp, fmt, ap);
	va_end(ap);
	if (k < 0)
		return;
	if ((size_t)k >= sizeof tmp) {
		k = (int)sizeof tmp - 1;
		o->truncated = true;
	}
	gp_format_write(o, tmp, (size_t)k);
}

int gp_format_flush(struct gp_format_out *o)
{
	drain(o);
	if (o->fp)
		fflush(o->fp);
	return o->truncated ? -EIO : 0;
}

static void puts_(struct gp_format_out *o, const char *s) { gp_format_write(o, s, strlen(s)); }

/* ---- fields ---------------------------------------------------------------------- */

struct metric {
	const char *name, *unit, *help;
	bool gauge;
	size_t off, peak_off;
};

#define GP_GAUGE_ROW_(n, u, h) {#n, #u, h, true,                      \
		offsetof(struct gpupool_device_stats, n), offsetof(struct gpupool_device_stats, n##_peak)},
#define GP_COUNTER_ROW_(n, u, h) {#n, #u, h, false,                   \
		offsetof(struct gpupool_device_stats, n), 0},
static const struct metric metrics[] = {GPUPOOL_GAUGES(GP_GAUGE_ROW_) GPUPOOL_COUNTERS(GP_COUNTER_ROW_)};
#define NMETRICS (sizeof metrics / sizeof metrics[0])

static bool is_bytes(const struct metric *m) { return strcmp(m->unit, "bytes") == 0; }
/* A time in nanoseconds in the page; Prometheus's unit is the second. */
static bool is_ns(const struct metric *m) { return strcmp(m->unit, "ns") == 0; }

static uint64_t field(const struct gpupool_device_stats *s, size_t off)
{
	uint64_t v;
	memcpy(&v, (const char *)s + off, sizeof v);
	return v;
}

const char *gp_format_bytes(char *buf, size_t cap, uint64_t b)
{
	static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
	if (b < 1024) {
		snprintf(buf, cap, "%llu B", (unsigned long long)b);
		return buf;
	}
	int u = 0;
	double v = (double)b;
	while (v >= 1024.0 && u < 6) {
		v /= 1024.0;
		u++;
	}
	if (v >= 1023.95 && u < 6) { /* would print as "1024.0" */
		v /= 1024.0;
		u++;
	}
	snprintf(buf, cap, "%.1f %s", v, units[u]);
	return buf;
}

const char *gp_format_uuid(char buf[GP_FORMAT_UUID_LEN], const struct gpupool_device_stats *s)
{
	static const char hex[] = "0123456789abcdef";
	const unsigned char *u = (const unsigned char *)s->uuid;
	bool known = false;
	for (size_t i = 0; i < GPUPOOL_UUID_LEN; i++)
		known |= u[i] != 0;
	if (!known) {
		buf[0] = '\0';
		return buf;
	}
	char *p = buf;
	memcpy(p, "GPU-", 4);
	p += 4;
	for (size_t i = 0; i < GPUPOOL_UUID_LEN; i++) {
		if (i == 4 || i == 6 || i == 8 || i == 10)
			*p++ = '-';
		*p++ = hex[u[i] >> 4];
		*p++ = hex[u[i] & 15];
	}
	*p = '\0';
	return buf;
}

/* Pool hit rate in percent (hits / (hits + misses)); negative when there were none.
 * In double: the counters come from a page anyone may have written, the sum may not fit. */
static double gp_format_hit_rate(const struct gpupool_device_stats *s)
{
	if (!s->hits && !s->misses)
		return -1.0;
	return 100.0 * (double)s->hits / ((double)s->hits + (double)s->misses);
}

static uint64_t add_sat(uint64_t a, uint64_t b) { return a > UINT64_MAX - b ? UINT64_MAX : a + b; }

/* Real driver calls the pool avoided, allocs + frees - (segment_allocs + segment_frees),
 * as a sign and a magnitude: both sums saturate at UINT64_MAX, nothing overflows. */
static void gp_format_calls_saved(char *buf, size_t cap, const struct gpupool_device_stats *s)
{
	uint64_t pool = add_sat(s->allocs, s->frees), real = add_sat(s->segment_allocs, s->segment_frees);
	snprintf(buf, cap, "%s%llu", pool < real ? "-" : "",
		 (unsigned long long)(pool < real ? real - pool : pool - real));
}

/* Text a page's writer chose (comm, lib_version: `cap` bytes, maybe unterminated): printable
 * ASCII, '?' for anything else, into dst of at least `cap` bytes. */
static void safe_text(char *dst, const char *src, size_t cap)
{
	size_t i = 0;
	for (; i < cap - 1 && src[i]; i++) {
		unsigned char c = (unsigned char)src[i];
		dst[i] = c >= 0x20 && c < 0x7f ? (char)c : '?';
	}
	dst[i] = '\0';
}

static void safe_comm(char *dst, const struct gpupool_page *pg) { safe_text(dst, pg->comm, GPUPOOL_COMM_LEN); }

/* ---- table ----------------------------------------------------------------------- */

/* The table's columns, in display order. keep: the order in which they give way when the
 * width is short (0: never dropped; then the highest number goes first). limit: shown only
 * when some listed slot has a limit; rate: only when some process has rates (--watch). */
enum tcol { TC_PID, TC_COMM, TC_DEV, TC_RESERVED, TC_ALLOCATED, TC_UNPOOLED, TC_ARATE, TC_BRATE, TC_PEAK,
	    TC_CACHED, TC_LARGEST, TC_LIMIT, TC_PCTLIM, TC_HIT, TC_SEGS, TC_OOMS, TC_STATE, TC_COUNT };
static const struct {
	const char *head;
	int width; /* negative: left-aligned */
	int keep;
	bool limit, rate, unpooled;
} tcols[TC_COUNT] = {
	[TC_PID] = {"PID", 7, 0, false, false, false},          [TC_COMM] = {"COMMAND", -15, 0, false, false, false},
	[TC_DEV] = {"DEV", 3, 0, false, false, false},          [TC_RESERVED] = {"RESERVED", 10, 1, false, false, false},
	[TC_ALLOCATED] = {"ALLOCATED", 10, 2, false, false, false},
	[TC_UNPOOLED] = {"UNPOOLED", 10, 3, false, false, true},
	[TC_ARATE] = {"ALLOCS/S", 8, 4, false, true, false},    [TC_BRATE] = {"BYTES/S", 10, 5, false, true, false},
	[TC_PEAK] = {"PEAK_RSVD", 10, 11, false, false, false}, [TC_CACHED] = {"CACHED", 10, 8, false, false, false},
	[TC_LARGEST] = {"LARGEST", 10, 13, false, false, false}, [TC_LIMIT] = {"LIMIT", 10, 7, true, false, false},
	[TC_PCTLIM] = {"%LIM", 5, 6, true, false, false},       [TC_HIT] = {"HIT%", 5, 10, false, false, false},
	[TC_SEGS] = {"SEGS", 6, 12, false, false, false},       [TC_OOMS] = {"OOMS", 5, 9, false, false, false},
	[TC_STATE] = {"STATE", -5, 0, false, false, false},
};

/* Characters a row takes with the columns of mask: one space between columns, two before
 * STATE (the last, whose text may run past its width). */
static unsigned table_width(unsigned mask)
{
	unsigned w = 0;
	for (int c = 0; c < TC_COUNT; c++)
		if (mask & (1u << c))
			w += (unsigned)(tcols[c].width < 0 ? -tcols[c].width : tcols[c].width) + (w ? 1u : 0u) +
			     (c == TC_STATE ? 1u : 0u);
	return w;
}

/* The columns to show in `width` characters (0: no bound). Columns give way in the order of
 * `keep` until the row fits; then any that was dropped and fits again comes back, the most
 * wanted first. The never-dropped columns may still exceed a very narrow width. */
static unsigned table_columns(const struct gp_format_proc *procs, size_t n, unsigned width)
{
	bool any_limit = false, any_rate = false, any_unpooled = false;
	for (size_t i = 0; i < n; i++) {
		any_rate |= procs[i].rates != NULL;
		for (uint32_t d = 0; d < procs[i].page->ndevices && d < GPUPOOL_MAX_DEVICES; d++) {
			const struct gpupool_device_stats *s = &procs[i].page->dev[d];
			if (!s->active || (procs[i].inconsistent & (1u << d)))
				continue;
			any_limit |= s->limit_bytes != 0;
			/* the peak too: the column stays while a process that held some runs */
			any_unpooled |= s->unpooled_bytes != 0 || s->unpooled_bytes_peak != 0;
		}
	}
	unsigned mask = 0;
	for (int c = 0; c < TC_COUNT; c++)
		if ((!tcols[c].limit || any_limit) && (!tcols[c].rate || any_rate) && (!tcols[c].unpooled || any_unpooled))
			mask |= 1u << c;
	if (!width)
		return mask;
	unsigned all = mask;
	int maxkeep = 0;
	for (int c = 0; c < TC_COUNT; c++)
		maxkeep = tcols[c].keep > maxkeep ? tcols[c].keep : maxkeep;
	for (int k = maxkeep; k > 0 && table_width(mask) > width; k--)
		for (int c = 0; c < TC_COUNT; c++)
			if (tcols[c].keep == k)
				mask &= ~(1u << c);
	for (int k = 1; k <= maxkeep; k++)
		for (int c = 0; c < TC_COUNT; c++)
			if (tcols[c].keep == k && (all & ~mask & (1u << c)) && table_width(mask | (1u << c)) <= width)
				mask |= 1u << c;
	return mask;
}

/* One row; cut at `cut` characters unless 0 (a terminal's box: STATE may run past its
 * width). */
static void table_row(struct gp_format_out *o, unsigned mask, char cells[TC_COUNT][48], unsigned cut)
{
	char line[TC_COUNT * 50];
	size_t len = 0;
	bool first = true;
	for (int c = 0; c < TC_COUNT; c++) {
		if (!(mask & (1u << c)))
			continue;
		const char *sep = first ? "" : c == TC_STATE ? "  " : " ";
		int k = c == TC_STATE ? snprintf(line + len, sizeof line - len, "%s%s", sep, cells[c]) /* last: no padding */
				      : snprintf(line + len, sizeof line - len, "%s%*s", sep, tcols[c].width, cells[c]);
		if (k > 0)
			len += (size_t)k < sizeof line - len ? (size_t)k : sizeof line - len - 1;
		first = false;
	}
	if (cut && cut < len)
		len = cut;
	gp_format_write(o, line, len);
	puts_(o, "\n");
}

static void table_fill(char cells[TC_COUNT][48], const char *v)
{
	for (int c = TC_RESERVED; c < TC_STATE; c++)
		snprintf(cells[c], 48, "%s", v);
}

/* A line, cut at `cut` characters unless 0, and its newline. */
static void box_cut(struct gp_format_out *o, const char *line, unsigned cut)
{
	size_t len = strlen(line);
	gp_format_write(o, line, cut && cut < len ? cut : len);
	puts_(o, "\n");
}

/* A count per second in a few characters: "0.5", "812", "9999", "12.3k", "4.1M". */
static void rate_count(char *buf, size_t cap, double v)
{
	static const char units[] = " kMGTPE";
	int u = 0;
	if (v >= 9999.5) {
		do {
			v /= 1000.0;
			u++;
		} while (v >= 999.95 && u < 6);
	}
	if (u)
		snprintf(buf, cap, "%.1f%c", v, units[u]);
	else
		snprintf(buf, cap, v < 9.95 ? "%.1f" : "%.0f", v);
}

/* Bytes per second as gp_format_bytes writes bytes ("1.5 GiB"); the caller adds "/s" where
 * the column's head does not say it. */
static void rate_bytes(char *buf, size_t cap, double v)
{
	gp_format_bytes(buf, cap, v >= 18446744073709549568.0 ? UINT64_MAX : (uint64_t)(v + 0.5));
}

/* A slot's rates for the table, "-" when not known (or not finite: a page's counters are
 * anyone's). */
static void rate_cells(char cells[TC_COUNT][48], const struct gp_format_rate *r)
{
	if (r && r->known && r->allocs_per_s >= 0 && r->bytes_per_s >= 0 && r->allocs_per_s <= 1e300 &&
	    r->bytes_per_s <= 1e300) {
		rate_count(cells[TC_ARATE], 48, r->allocs_per_s);
		rate_bytes(cells[TC_BRATE], 48, r->bytes_per_s);
	} else {
		snprintf(cells[TC_ARATE], 48, "-");
		snprintf(cells[TC_BRATE], 48, "-");
	}
}

/* Rows of the table below its head: one per active or inconsistent slot, one for a process
 * without devices. */
static size_t table_rows(const struct gp_format_proc *procs, size_t n)
{
	size_t rows = 0;
	for (size_t i = 0; i < n; i++) {
		const struct gpupool_page *pg = procs[i].page;
		if (pg->ndevices == 0)
			rows++;
		for (uint32_t d = 0; d < pg->ndevices && d < GPUPOOL_MAX_DEVICES; d++)
			rows += (procs[i].inconsistent & (1u << d)) || pg->dev[d].active;
	}
	return rows;
}

/* Lines of the table: the head, rows while `room` lasts, then what was left out. */
struct table_out {
	struct gp_format_out *o;
	size_t room, left;
	unsigned cut; /* 0, or the box's width */
};

static void table_put(struct table_out *t, unsigned mask, char cells[TC_COUNT][48])
{
	if (t->room) {
		t->room--;
		table_row(t->o, mask, cells, t->cut);
	} else {
		t->left++;
	}
}

void gp_format_table_box(struct gp_format_out *o, const struct gp_format_proc *procs, size_t n, unsigned width,
			 unsigned rows)
{
	unsigned mask = table_columns(procs, n, width);
	char cells[TC_COUNT][48];
	size_t gone = 0, nrows = table_rows(procs, n);
	for (size_t i = 0; i < n; i++)
		gone += procs[i].stale;
	struct table_out t = {o, nrows, 0, rows ? width : 0};
	/* the head, the rows, the line counting the gone: one line counts what does not fit */
	size_t fixed = 1 + (gone ? 1 : 0);
	if (rows && fixed + nrows > rows)
		t.room = rows > fixed + 1 ? rows - fixed - 1 : 0;
	for (int c = 0; c < TC_COUNT; c++)
		snprintf(cells[c], sizeof cells[c], "%s", tcols[c].head);
	table_row(o, mask, cells, t.cut);
	for (size_t i = 0; i < n; i++) {
		const struct gpupool_page *pg = procs[i].page;
		char comm[GPUPOOL_COMM_LEN];
		safe_comm(comm, pg);
		snprintf(cells[TC_PID], sizeof cells[TC_PID], "%d", (int)pg->pid);
		snprintf(cells[TC_COMM], sizeof cells[TC_COMM], "%s", comm);
		snprintf(cells[TC_STATE], sizeof cells[TC_STATE], "%s", procs[i].stale ? "gone" : "live");
		if (pg->ndevices == 0) {
			snprintf(cells[TC_DEV], sizeof cells[TC_DEV], "-");
			table_fill(cells, "-");
			table_put(&t, mask, cells);
		}
		for (uint32_t d = 0; d < pg->ndevices && d < GPUPOOL_MAX_DEVICES; d++) {
			const struct gpupool_device_stats *s = &pg->dev[d];
			snprintf(cells[TC_DEV], sizeof cells[TC_DEV], "%d", (int)s->device);
			if (procs[i].inconsistent & (1u << d)) {
				table_fill(cells, "?");
				snprintf(cells[TC_STATE], sizeof cells[TC_STATE], "inconsistent (writer died mid-update?)");
				table_put(&t, mask, cells);
				snprintf(cells[TC_STATE], sizeof cells[TC_STATE], "%s", procs[i].stale ? "gone" : "live");
				continue;
			}
			if (!s->active)
				continue;
			gp_format_bytes(cells[TC_RESERVED], sizeof cells[0], s->reserved_bytes);
			gp_format_bytes(cells[TC_ALLOCATED], sizeof cells[0], s->allocated_bytes);
			gp_format_bytes(cells[TC_UNPOOLED], sizeof cells[0], s->unpooled_bytes);
			rate_cells(cells, procs[i].rates ? &procs[i].rates[d] : NULL);
			gp_format_bytes(cells[TC_PEAK], sizeof cells[0], s->reserved_bytes_peak);
			gp_format_bytes(cells[TC_CACHED], sizeof cells[0], s->cached_bytes);
			gp_format_bytes(cells[TC_LARGEST], sizeof cells[0], s->largest_free_block);
			if (s->limit_bytes) {
				gp_format_bytes(cells[TC_LIMIT], sizeof cells[0], s->limit_bytes);
				/* what counts against the limit: the pools' segments and the memory held
				 * outside them; a page anyone may have written: no bound on the ratio */
				double pct = 100.0 * (double)add_sat(s->reserved_bytes, s->unpooled_bytes) /
					     (double)s->limit_bytes;
				if (pct < 999.95)
					snprintf(cells[TC_PCTLIM], sizeof cells[0], "%.1f", pct);
				else
					snprintf(cells[TC_PCTLIM], sizeof cells[0], ">999");
			} else {
				snprintf(cells[TC_LIMIT], sizeof cells[0], "-");
				snprintf(cells[TC_PCTLIM], sizeof cells[0], "-");
			}
			double hr = gp_format_hit_rate(s);
			if (hr < 0)
				snprintf(cells[TC_HIT], sizeof cells[0], "-");
			else
				snprintf(cells[TC_HIT], sizeof cells[0], "%.1f", hr);
			snprintf(cells[TC_SEGS], sizeof cells[0], "%llu", (unsigned long long)s->segment_allocs);
			snprintf(cells[TC_OOMS], sizeof cells[0], "%llu", (unsigned long long)s->ooms);
			table_put(&t, mask, cells);
		}
	}
	char line[160];
	if (t.left) {
		snprintf(line, sizeof line, "%zu row%s left out: a taller terminal shows %s", t.left, t.left == 1 ? "" : "s",
			 t.left == 1 ? "it" : "them");
		box_cut(o, line, t.cut);
	}
	if (gone) {
		snprintf(line, sizeof line, "%zu process%s gone without removing %s page (gpupool-stat --clean removes %s)",
			 gone, gone == 1 ? "" : "es", gone == 1 ? "its" : "their", gone == 1 ? "it" : "them");
		box_cut(o, line, t.cut);
	}
}

void gp_format_table_fit(struct gp_format_out *o, const struct gp_format_proc *procs, size_t n, unsigned width)
{
	gp_format_table_box(o, procs, n, width, 0);
}

void gp_format_table(struct gp_format_out *o, const struct gp_format_proc *procs, size_t n)
{
	gp_format_table_box(o, procs, n, 0, 0);
}

/* ---- GPUs ------------------------------------------------------------------------ */

size_t gp_format_gpus(const struct gp_format_proc *procs, size_t n, struct gp_format_gpu *gpus, size_t cap,
		      size_t *left_out)
{
	size_t k = 0, left = 0;
	for (size_t i = 0; i < n; i++) {
		const struct gpupool_page *pg = procs[i].page;
		if (procs[i].stale) /* its memory went with the process */
			continue;
		for (uint32_t d = 0; d < pg->ndevices && d < GPUPOOL_MAX_DEVICES; d++) {
			const struct gpupool_device_stats *s = &pg->dev[d];
			if (!s->active || (procs[i].inconsistent & (1u << d)) || !gp_statpage_uuid_known(s))
				continue;
			size_t g = 0;
			while (g < k && memcmp(gpus[g].uuid, s->uuid, GPUPOOL_UUID_LEN) != 0)
				g++;
			if (g == k) {
				if (k == cap) {
					left++;
					continue;
				}
				memset(&gpus[k], 0, sizeof gpus[k]);
				memcpy(gpus[k].uuid, s->uuid, GPUPOOL_UUID_LEN);
				gpus[k].last_pid = -1;
				k++;
			}
			struct gp_format_gpu *u = &gpus[g];
			u->held_bytes = add_sat(u->held_bytes, add_sat(s->reserved_bytes, s->unpooled_bytes));
			u->reclaimable_bytes = add_sat(u->reclaimable_bytes, s->releasable_bytes);
			if (u->last_pid != pg->pid) { /* two slots of one process on one GPU count once */
				u->processes++;
				u->last_pid = pg->pid;
			}
			/* the freshest look at the device among the pages that have one */
			if (s->device_total_bytes && s->device_seen_ns >= u->seen_ns) {
				u->total_bytes = s->device_total_bytes;
				/* a page anyone may have written: free never above total */
				u->free_bytes = s->device_free_bytes < s->device_total_bytes ? s->device_free_bytes
											 : s->device_total_bytes;
				u->seen_ns = s->device_seen_ns;
			}
		}
	}
	/* by UUID, so that the lines keep their order between refreshes (insertion: few GPUs) */
	for (size_t i = 1; i < k; i++) {
		struct gp_format_gpu t = gpus[i];
		size_t j = i;
		for (; j > 0 && memcmp(gpus[j - 1].uuid, t.uuid, GPUPOOL_UUID_LEN) > 0; j--)
			gpus[j] = gpus[j - 1];
		gpus[j] = t;
	}
	if (left_out)
		*left_out = left;
	return k;
}

const char *gp_format_gpu_uuid(char buf[GP_FORMAT_UUID_LEN], const struct gp_format_gpu *g)
{
	struct gpupool_device_stats s;
	memcpy(s.uuid, g->uuid, GPUPOOL_UUID_LEN);
	return gp_format_uuid(buf, &s);
}

/* "12 s", "3 min", "2 h", "5 d": how long ago, in a few characters. */
static void age_text(char *buf, size_t cap, uint64_t ns)
{
	uint64_t s = ns / 1000000000ull;
	if (s < 120)
		snprintf(buf, cap, "%llu s", (unsigned long long)s);
	else if (s < 7200)
		snprintf(buf, cap, "%llu min", (unsigned long long)(s / 60));
	else if (s < 172800)
		snprintf(buf, cap, "%llu h", (unsigned long long)(s / 3600));
	else
		snprintf(buf, cap, "%llu d", (unsigned long long)(s / 86400));
}

/* A GPU's name in the lines: the whole UUID (40 characters), or shortened as `form` says:
 * 1, nvidia-smi's first group ("GPU-6770706f"); 2, that group and the last four digits
 * ("GPU-6770706f..0001"). */
static void gpu_name(char *buf, const struct gp_format_gpu *g, int form)
{
	char u[GP_FORMAT_UUID_LEN];
	gp_format_gpu_uuid(u, g);
	if (form == 1)
		snprintf(buf, GP_FORMAT_UUID_LEN, "%.12s", u);
	else if (form == 2)
		snprintf(buf, GP_FORMAT_UUID_LEN, "%.12s..%s", u, u + GP_FORMAT_UUID_LEN - 5);
	else
		snprintf(buf, GP_FORMAT_UUID_LEN, "%s", u);
}

/* The shortest form of gpu_name that tells the GPUs apart and keeps a line in `width` (0:
 * no bound, the whole UUID). */
static int gpu_name_form(const struct gp_format_gpu *gpus, size_t k, unsigned width)
{
	if (!width || width >= 40 + 54 + 16) /* the whole UUID, the figures, a note of age */
		return 0;
	for (int form = 1; form <= 2; form++) {
		bool unique = true;
		char a[GP_FORMAT_UUID_LEN], b[GP_FORMAT_UUID_LEN];
		for (size_t i = 0; i < k && unique; i++)
			for (size_t j = i + 1; j < k && unique; j++)
				unique = strcmp((gpu_name(a, &gpus[i], form), a), (gpu_name(b, &gpus[j], form), b)) != 0;
		if (unique)
			return form;
	}
	return 0;
}

unsigned gp_format_gpu_lines(struct gp_format_out *o, const struct gp_format_proc *procs, size_t n, uint64_t now_ns,
			     unsigned width, bool cut)
{
	struct gp_format_gpu gpus[GP_FORMAT_MAX_GPUS];
	size_t left = 0, k = gp_format_gpus(procs, n, gpus, GP_FORMAT_MAX_GPUS, &left);
	if (!k)
		return 0;
	int form = gpu_name_form(gpus, k, width);
	int uw = form == 1 ? -12 : form == 2 ? -18 : -40;
	char a[GP_FORMAT_UUID_LEN];
	char line[256];
	unsigned lines = 0, c = cut ? width : 0;
	snprintf(line, sizeof line, "%*s  %10s %10s %10s %12s %6s", uw, "GPU", "TOTAL", "FREE", "GPUPOOL", "RECLAIMABLE",
		 "PROCS");
	box_cut(o, line, c);
	lines++;
	for (size_t i = 0; i < k; i++) {
		const struct gp_format_gpu *g = &gpus[i];
		char total[16], fr[16], held[16], rec[16], note[48] = "", age[16];
		gpu_name(a, g, form);
		if (g->total_bytes) {
			gp_format_bytes(total, sizeof total, g->total_bytes);
			gp_format_bytes(fr, sizeof fr, g->free_bytes);
			/* the library looks about once a second: say so when the figure is older */
			if (g->seen_ns && now_ns > g->seen_ns && now_ns - g->seen_ns >= GP_FORMAT_GPU_STALE_NS) {
				age_text(age, sizeof age, now_ns - g->seen_ns);
				snprintf(note, sizeof note, "  seen %s ago", age);
			}
		} else {
			snprintf(total, sizeof total, "-");
			snprintf(fr, sizeof fr, "-");
		}
		snprintf(line, sizeof line, "%*s  %10s %10s %10s %12s %6u%s", uw, a, total, fr,
			 gp_format_bytes(held, sizeof held, g->held_bytes),
			 gp_format_bytes(rec, sizeof rec, g->reclaimable_bytes), g->processes, note);
		box_cut(o, line, c);
		lines++;
	}
	if (left) {
		snprintf(line, sizeof line, "more GPUs than %d: %zu slot%s of the others not shown", GP_FORMAT_MAX_GPUS,
			 left, left == 1 ? "" : "s");
		box_cut(o, line, c);
		lines++;
	}
	puts_(o, "\n");
	return lines + 1;
}

/* ---- detail ---------------------------------------------------------------------- */

static void value_cell(char *buf, size_t cap, bool bytes, uint64_t v)
{
	if (bytes && v >= 1024) {
		char h[16];
		snprintf(buf, cap, "%llu (%s)", (unsigned long long)v, gp_format_bytes(h, sizeof h, v));
	} else {
		snprintf(buf, cap, "%llu", (unsigned long long)v);
	}
}

/* How much each line of the detail view matters when it does not all fit (detail_box). */
enum prio { P_TOP, P_KEY, P_MORE, P_REST, P_COUNT };

/* The priority of a field's line: reserved and allocated bytes first, then what says whether
 * the pool is healthy. */
static enum prio field_prio(const struct metric *m)
{
	static const char *const key[] = {"reserved_bytes", "allocated_bytes"};
	static const char *const more[] = {"requested_bytes", "cached_bytes", "largest_free_block", "ooms"};
	for (size_t i = 0; i < sizeof key / sizeof key[0]; i++)
		if (strcmp(m->name, key[i]) == 0)
			return P_KEY;
	for (size_t i = 0; i < sizeof more / sizeof more[0]; i++)
		if (strcmp(m->name, more[i]) == 0)
			return P_MORE;
	return P_REST;
}

/* The detail view's lines go through a box: a first pass counts them by priority, the second
 * writes those that fit (all of the priorities below `full`, the first `partial` of `full`),
 * each cut at `width`, and counts the rest. */
struct box {
	struct gp_format_out *o;
	unsigned width; /* 0: no bound */
	bool counting;
	unsigned count[P_COUNT];
	int full;
	unsigned partial, left;
};

static void box_line(struct box *b, enum prio prio, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void box_line(struct box *b, enum prio prio, const char *fmt, ...)
{
	if (b->counting) {
		b->count[prio]++;
		return;
	}
	if ((int)prio > b->full || ((int)prio == b->full && b->partial == 0)) {
		b->left++;
		return;
	}
	if ((int)prio == b->full)
		b->partial--;
	char line[512];
	va_list ap;
	va_start(ap, fmt);
	int k = vsnprintf(line, sizeof line, fmt, ap);
	va_end(ap);
	if (k < 0)
		return;
	if (b->width && b->width < sizeof line && strlen(line) > b->width)
		line[b->width] = '\0';
	gp_format_printf(b->o, "%s\n", line);
}

/* The widths of the value columns of p's slots: the widest cell, or the heading. */
static void detail_widths(const struct gp_format_proc *p, int *wcur, int *wpeak)
{
	char cell[40];
	*wcur = (int)strlen("current");
	*wpeak = (int)strlen("peak");
	const struct gpupool_page *pg = p->page;
	for (uint32_t d = 0; d < pg->ndevices && d < GPUPOOL_MAX_DEVICES; d++) {
		const struct gpupool_device_stats *s = &pg->dev[d];
		if ((p->inconsistent & (1u << d)) || !s->active)
			continue;
		for (size_t i = 0; i < NMETRICS; i++) {
			value_cell(cell, sizeof cell, is_bytes(&metrics[i]), field(s, metrics[i].off));
			*wcur = (int)strlen(cell) > *wcur ? (int)strlen(cell) : *wcur;
			if (!metrics[i].gauge)
				continue;
			value_cell(cell, sizeof cell, is_bytes(&metrics[i]), field(s, metrics[i].peak_off));
			*wpeak = (int)strlen(cell) > *wpeak ? (int)strlen(cell) : *wpeak;
		}
	}
}

static void detail_lines(struct box *b, const struct gp_format_proc *p)
{
	const struct gpupool_page *pg = p->page;
	char comm[GPUPOOL_COMM_LEN];
	int wc, wp;
	detail_widths(p, &wc, &wp);
	safe_comm(comm, pg);
	box_line(b, P_TOP, "pid %d  command %s  %s  devices %u  started %llu.%03llu (unix time)", (int)pg->pid, comm,
		 p->stale ? "STALE (process gone)" : "live", pg->ndevices,
		 (unsigned long long)(pg->start_time_ns / 1000000000ull),
		 (unsigned long long)(pg->start_time_ns / 1000000ull % 1000ull));
	box_line(b, P_REST, "release requests %llu, done %llu", (unsigned long long)pg->release_request,
		 (unsigned long long)pg->release_done);
	for (uint32_t d = 0; d < pg->ndevices && d < GPUPOOL_MAX_DEVICES; d++) {
		const struct gpupool_device_stats *s = &pg->dev[d];
		if (p->inconsistent & (1u << d)) {
			box_line(b, P_REST, "%s", "");
			box_line(b, P_TOP, "device %d: inconsistent (writer died mid-update?)", (int)s->device);
			continue;
		}
		if (!s->active)
			continue;
		char lim[40], cur[40], pk[40], uuid[GP_FORMAT_UUID_LEN];
		if (s->limit_bytes)
			value_cell(lim, sizeof lim, true, s->limit_bytes);
		else
			snprintf(lim, sizeof lim, "none");
		gp_format_uuid(uuid, s);
		box_line(b, P_REST, "%s", "");
		box_line(b, P_TOP, "device %d  limit %s%s%s", (int)s->device, lim, uuid[0] ? "  " : "", uuid);
		if (s->device_total_bytes) { /* the driver's figures at the library's last look */
			char t[16], f[16];
			box_line(b, P_REST, "  GPU memory %s, free %s (the driver's, at %llu.%03llu unix time)",
				 gp_format_bytes(t, sizeof t, s->device_total_bytes),
				 gp_format_bytes(f, sizeof f,
						 s->device_free_bytes < s->device_total_bytes ? s->device_free_bytes
											       : s->device_total_bytes),
				 (unsigned long long)(s->device_seen_ns / 1000000000ull),
				 (unsigned long long)(s->device_seen_ns / 1000000ull % 1000ull));
		}
		if (p->rates) {
			const struct gp_format_rate *r = &p->rates[d];
			char a[24], by[24];
			if (r->known && r->allocs_per_s >= 0 && r->bytes_per_s >= 0 && r->allocs_per_s <= 1e300 &&
			    r->bytes_per_s <= 1e300) {
				rate_count(a, sizeof a, r->allocs_per_s);
				rate_bytes(by, sizeof by, r->bytes_per_s);
				box_line(b, P_KEY, "  per second: %s allocations, %s asked for", a, by);
			} else {
				box_line(b, P_KEY, "  per second: - (from the next refresh)");
			}
		}
		box_line(b, P_KEY, "  %-25s %*s %*s", "gauge", wc, "current", wp, "peak");
		for (size_t i = 0; i < NMETRICS; i++) {
			if (!metrics[i].gauge)
				continue;
			value_cell(cur, sizeof cur, is_bytes(&metrics[i]), field(s, metrics[i].off));
			value_cell(pk, sizeof pk, is_bytes(&metrics[i]), field(s, metrics[i].peak_off));
			box_line(b, field_prio(&metrics[i]), "  %-25s %*s %*s", metrics[i].name, wc, cur, wp, pk);
		}
		box_line(b, P_MORE, "  %-25s %*s", "counter", wc, "total");
		for (size_t i = 0; i < NMETRICS; i++) {
			if (metrics[i].gauge)
				continue;
			value_cell(cur, sizeof cur, is_bytes(&metrics[i]), field(s, metrics[i].off));
			box_line(b, field_prio(&metrics[i]), "  %-25s %*s", metrics[i].name, wc, cur);
		}
		double hr = gp_format_hit_rate(s);
		if (hr >= 0)
			box_line(b, P_MORE, "  %-25s %*.1f%%", "hit rate", wc - 1, hr);
		char saved[24];
		gp_format_calls_saved(saved, sizeof saved, s);
		box_line(b, P_REST, "  %-25s %*s", "driver calls saved", wc, saved);
	}
}

void gp_format_detail_box(struct gp_format_out *o, const struct gp_format_proc *p, unsigned width, unsigned rows)
{
	struct box b = {.o = o, .width = width, .counting = true};
	detail_lines(&b, p);
	unsigned total = 0;
	for (int i = 0; i < P_COUNT; i++)
		total += b.count[i];
	b.counting = false;
	b.full = P_COUNT;
	if (rows && total > rows) {
		/* the last line counts what is left out; the most important lines first */
		unsigned avail = rows - 1, used = 0;
		int t = 0;
		while (t < P_COUNT && used + b.count[t] <= avail)
			used += b.count[t++];
		b.full = t;
		b.partial = avail - used;
	}
	detail_lines(&b, p);
	if (b.left) {
		char line[128];
		snprintf(line, sizeof line, "%u row%s left out: a taller terminal shows %s", b.left, b.left == 1 ? "" : "s",
			 b.left == 1 ? "it" : "them");
		if (width && width < sizeof line)
			line[width] = '\0';
		gp_format_printf(o, "%s\n", line);
	}
}

void gp_format_detail(struct gp_format_out *o, const struct gp_format_proc *p)
{
	gp_format_detail_box(o, p, 0, 0);
}

/* ---- JSON ------------------------------------------------------------------------ */

static void json_string(struct gp_format_out *o, const char *s, size_t max)
{
	puts_(o, "\"");
	for (size_t i = 0; i < max && s[i]; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c == '"' || c == '\\')
			gp_format_printf(o, "\\%c", c);
		else if (c < 0x20)
			gp_format_printf(o, "\\u%04x", c);
		else if (c >= 0x7f) /* not necessarily UTF-8: keep the document valid */
			puts_(o, "?");
		else
			gp_format_write(o, (const char *)&s[i], 1);
	}
	puts_(o, "\"");
}

/* {"version":N,"processes":[...]: the document without its closing brace */
static void json_processes(struct gp_format_out *o, const struct gp_format_proc *procs, size_t n)
{
	gp_format_printf(o, "{\"version\":%u,\"processes\":[", GP_FORMAT_JSON_VERSION);
	for (size_t i = 0; i < n; i++) {
		const struct gpupool_page *pg = procs[i].page;
		gp_format_printf(o, "%s\n{\"pid\":%d,\"comm\":", i ? "," : "", (int)pg->pid);
		json_string(o, pg->comm, GPUPOOL_COMM_LEN);
		puts_(o, ",\"gpupool_version\":");
		json_string(o, pg->lib_version, GPUPOOL_VERSION_LEN);
		gp_format_printf(o, ",\"stale\":%s,\"start_time_ns\":%llu,\"release_request\":%llu,"
				 "\"release_done\":%llu,\"ndevices\":%u,\"devices\":[",
				 procs[i].stale ? "true" : "false", (unsigned long long)pg->start_time_ns,
				 (unsigned long long)pg->release_request, (unsigned long long)pg->release_done,
				 pg->ndevices);
		bool first = true;
		for (uint32_t d = 0; d < pg->ndevices && d < GPUPOOL_MAX_DEVICES; d++) {
			const struct gpupool_device_stats *s = &pg->dev[d];
			bool bad = procs[i].inconsistent & (1u << d);
			if (!bad && !s->active)
				continue;
			gp_format_printf(o, "%s{\"device\":%d,\"consistent\":%s", first ? "" : ",",
					 (int)s->device, bad ? "false" : "true");
			first = false;
			if (!bad) {
				char uuid[GP_FORMAT_UUID_LEN];
				gp_format_printf(o, ",\"uuid\":\"%s\",\"limit_bytes\":%llu", gp_format_uuid(uuid, s),
						 (unsigned long long)s->limit_bytes);
				gp_format_printf(o, ",\"device_total_bytes\":%llu,\"device_free_bytes\":%llu,"
						 "\"device_seen_ns\":%llu",
						 (unsigned long long)s->device_total_bytes,
						 (unsigned long long)s->device_free_bytes,
						 (unsigned long long)s->device_seen_ns);
				for (size_t k = 0; k < NMETRICS; k++) {
					gp_format_printf(o, ",\"%s\":%llu", metrics[k].name,
							 (unsigned long long)field(s, metrics[k].off));
					if (metrics[k].gauge)
						gp_format_printf(o, ",\"%s_peak\":%llu", metrics[k].name,
								 (unsigned long long)field(s, metrics[k].peak_off));
				}
			}
			puts_(o, "}");
		}
		puts_(o, "]}");
	}
	puts_(o, "\n]");
}

void gp_format_json(struct gp_format_out *o, const struct gp_format_proc *procs, size_t n)
{
	json_processes(o, procs, n);
	puts_(o, "}\n");
}

void gp_format_json_listing(struct gp_format_out *o, const struct gp_format_proc *procs, size_t n,
			    const struct gp_format_skip *skips, size_t nskips)
{
	json_processes(o, procs, n);
	struct gp_format_gpu gpus[GP_FORMAT_MAX_GPUS];
	size_t ng = gp_format_gpus(procs, n, gpus, GP_FORMAT_MAX_GPUS, NULL);
	puts_(o, ",\"gpus\":[");
	for (size_t g = 0; g < ng; g++) {
		char uuid[GP_FORMAT_UUID_LEN];
		gp_format_printf(o, "%s\n{\"uuid\":\"%s\",\"total_bytes\":%llu,\"free_bytes\":%llu,\"seen_ns\":%llu,"
				 "\"held_bytes\":%llu,\"reclaimable_bytes\":%llu,\"processes\":%u}",
				 g ? "," : "", gp_format_gpu_uuid(uuid, &gpus[g]), (unsigned long long)gpus[g].total_bytes,
				 (unsigned long long)gpus[g].free_bytes, (unsigned long long)gpus[g].seen_ns,
				 (unsigned long long)gpus[g].held_bytes, (unsigned long long)gpus[g].reclaimable_bytes,
				 gpus[g].processes);
	}
	puts_(o, ng ? "\n]" : "]");
	unsigned long long total = 0;
	for (size_t k = 0; k < nskips; k++)
		total += skips[k].count;
	gp_format_printf(o, ",\"skipped_pages\":%llu,\"skipped\":{", total);
	for (size_t k = 0; k < nskips; k++) {
		puts_(o, k ? "," : "");
		json_string(o, skips[k].reason, 64);
		gp_format_printf(o, ":%lu", skips[k].count);
	}
	puts_(o, "}}\n");
}

/* ---- Prometheus / OpenMetrics ---------------------------------------------------- */

static bool ends_with(const char *s, const char *suffix)
{
	size_t a = strlen(s), b = strlen(suffix);
	return a >= b && memcmp(s + a - b, suffix, b) == 0;
}

/* A counter whose family would have a gauge's name takes another stem: the gauge
 * requested_bytes (live) and the counter requested_bytes_total (summed) would both be the
 * family gpupool_requested_bytes, which parsers reject ("Clashing name"). */
static const struct {
	const char *field, *stem;
} prom_stems[] = {{"requested_bytes_total", "alloc_requested"}};

/* The family name of a field (docs/stats.md): gpupool_<stem>[_peak][_bytes], the stem being
 * the field's name less "_total" and "_bytes", so that the unit comes last; a counter's
 * samples add "_total" to it. */
static void prom_family_name(char *buf, size_t cap, const struct metric *m, bool peak)
{
	char stem[64];
	snprintf(stem, sizeof stem, "%s", m->name);
	for (size_t i = 0; i < sizeof prom_stems / sizeof prom_stems[0]; i++)
		if (!m->gauge && strcmp(m->name, prom_stems[i].field) == 0)
			snprintf(stem, sizeof stem, "%s", prom_stems[i].stem);
	if (ends_with(stem, "_total"))
		stem[strlen(stem) - 6] = '\0';
	if (ends_with(stem, "_bytes"))
		stem[strlen(stem) - 6] = '\0';
	if (ends_with(stem, "_ns"))
		stem[strlen(stem) - 3] = '\0';
	snprintf(buf, cap, "gpupool_%s%s%s", stem, peak ? "_peak" : "",
		 is_bytes(m) ? "_bytes" : is_ns(m) ? "_seconds" : "");
}

/* A label value: backslash, double quote and newline escaped; bytes outside printable ASCII
 * (the program's comm need not be UTF-8) become '?'. */
static void prom_label_value(struct gp_format_out *o, const char *s, size_t max)
{
	for (size_t i = 0; i < max && s[i]; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c == '\\' || c == '"')
			gp_format_printf(o, "\\%c", c);
		else if (c == '\n')
			puts_(o, "\\n");
		else
			gp_format_write(o, c >= 0x20 && c < 0x7f ? &s[i] : "?", 1);
	}
}

static void prom_labels(struct gp_format_out *o, const struct gpupool_page *pg, const struct gpupool_device_stats *s)
{
	gp_format_printf(o, "{pid=\"%d\",comm=\"", (int)pg->pid);
	prom_label_value(o, pg->comm, GPUPOOL_COMM_LEN - 1);
	char uuid[GP_FORMAT_UUID_LEN];
	if (s && gp_format_uuid(uuid, s)[0]) /* dcgm-exporter's label name: joins on(UUID) */
		gp_format_printf(o, "\",device=\"%d\",UUID=\"%s\"}", (int)s->device, uuid);
	else if (s)
		gp_format_printf(o, "\",device=\"%d\"}", (int)s->device);
	else
		puts_(o, "\"}");
}

static bool prom_slot_ok(const struct gp_format_proc *p, uint32_t d)
{
	return !p->stale && !(p->inconsistent & (1u << d)) && p->page->dev[d].active;
}

/* The metadata of one family. The text format 0.0.4 names a counter's family by its sample
 * name (with _total) and has no UNIT line; OpenMetrics names the family without _total and
 * gives the unit (the family name then ends in it). */
static void prom_meta(struct gp_format_out *o, bool om, const char *family, const char *type, const char *unit,
		      const char *help_prefix, const char *help)
{
	const char *total = !om && strcmp(type, "counter") == 0 ? "_total" : "";
	gp_format_printf(o, "# HELP %s%s %s%s\n# TYPE %s%s %s\n", family, total, help_prefix, help, family, total,
			 type);
	if (om && unit)
		gp_format_printf(o, "# UNIT %s %s\n", family, unit);
}

/* One family with one sample per live, consistent, active device slot: the field at off
 * (but for a zero when skip_zero). */
static void prom_device_family(struct gp_format_out *o, bool om, const struct gp_format_proc *procs, size_t n,
			       const char *family, const char *type, const char *unit, const char *help_prefix,
			       const char *help, size_t off, bool skip_zero)
{
	prom_meta(o, om, family, type, unit, help_prefix, help);
	const char *total = strcmp(type, "counter") == 0 ? "_total" : "";
	for (size_t i = 0; i < n; i++) {
		const struct gpupool_page *pg = procs[i].page;
		for (uint32_t d = 0; d < pg->ndevices && d < GPUPOOL_MAX_DEVICES; d++) {
			if (!prom_slot_ok(&procs[i], d) || (skip_zero && !field(&pg->dev[d], off)))
				continue;
			gp_format_printf(o, "%s%s", family, total);
			prom_labels(o, pg, &pg->dev[d]);
			uint64_t v = field(&pg->dev[d], off);
			if (unit && strcmp(unit, "seconds") == 0) /* a field in nanoseconds */
				gp_format_printf(o, " %llu.%09llu\n", (unsigned long long)(v / 1000000000u),
						 (unsigned long long)(v % 1000000000u));
			else
				gp_format_printf(o, " %llu\n", (unsigned long long)v);
		}
	}
}

/* The GPUs (gp_format_gpus), one family per figure, labelled UUID alone: sums over the
 * processes, which a per-process series cannot give without a query. The driver's figures
 * only for GPUs that have them (a 0 would read as a GPU without memory). */
static void prom_gpus(struct gp_format_out *o, bool om, const struct gp_format_proc *procs, size_t n)
{
	static const struct {
		const char *family, *unit, *help;
		bool driver;
	} fams[] = {
		{"gpupool_gpu_total_bytes", "bytes", "the GPU's memory, as the driver reported it (cudaMemGetInfo)", true},
		{"gpupool_gpu_free_bytes", "bytes", "the GPU's free memory, as the driver reported it at its last look",
		 true},
		{"gpupool_gpu_seen_timestamp_seconds", "seconds", "when the driver's figures were taken (unix time)", true},
		{"gpupool_gpu_held_bytes", "bytes", "bytes held by gpupool processes: reserved plus unpooled, summed",
		 false},
		{"gpupool_gpu_reclaimable_bytes", "bytes", "bytes gpupool processes can give back (releasable, summed)",
		 false},
		{"gpupool_gpu_processes", NULL, "gpupool processes using the GPU", false},
	};
	struct gp_format_gpu gpus[GP_FORMAT_MAX_GPUS];
	size_t k = gp_format_gpus(procs, n, gpus, GP_FORMAT_MAX_GPUS, NULL);
	for (size_t f = 0; f < sizeof fams / sizeof fams[0]; f++) {
		prom_meta(o, om, fams[f].family, "gauge", fams[f].unit, "", fams[f].help);
		for (size_t g = 0; g < k; g++) {
			const struct gp_format_gpu *u = &gpus[g];
			if (fams[f].driver && !u->total_bytes)
				continue;
			char uuid[GP_FORMAT_UUID_LEN];
			gp_format_printf(o, "%s{UUID=\"%s\"} ", fams[f].family, gp_format_gpu_uuid(uuid, u));
			switch (f) {
			case 0: gp_format_printf(o, "%llu\n", (unsigned long long)u->total_bytes); break;
			case 1: gp_format_printf(o, "%llu\n", (unsigned long long)u->free_bytes); break;
			case 2:
				gp_format_printf(o, "%llu.%03llu\n", (unsigned long long)(u->seen_ns / 1000000000ull),
						 (unsigned long long)(u->seen_ns / 1000000ull % 1000ull));
				break;
			case 3: gp_format_printf(o, "%llu\n", (unsigned long long)u->held_bytes); break;
			case 4: gp_format_printf(o, "%llu\n", (unsigned long long)u->reclaimable_bytes); break;
			default: gp_format_printf(o, "%u\n", u->processes); break;
			}
		}
	}
}

void gp_format_prometheus(struct gp_format_out *o, const struct gp_format_proc *procs, size_t n,
			  const struct gp_format_skip *skips, size_t nskips, const char *version, bool om)
{
	if (version) {
		/* an info family: gpupool_build in OpenMetrics, a gauge gpupool_build_info in 0.0.4 */
		prom_meta(o, om, om ? "gpupool_build" : "gpupool_build_info", om ? "info" : "gauge", NULL, "",
			  "the version of gpupool-stat that exported these figures");
		puts_(o, "gpupool_build_info{version=\"");
		prom_label_value(o, version, 64);
		puts_(o, "\"} 1\n");
	}
	char name[96];
	for (size_t k = 0; k < NMETRICS; k++) {
		const struct metric *m = &metrics[k];
		const char *unit = is_bytes(m) ? "bytes" : is_ns(m) ? "seconds" : NULL;
		prom_family_name(name, sizeof name, m, false);
		prom_device_family(o, om, procs, n, name, m->gauge ? "gauge" : "counter", unit, "", m->help, m->off,
				   false);
		if (m->gauge) {
			prom_family_name(name, sizeof name, m, true);
			prom_device_family(o, om, procs, n, name, "gauge", unit, "peak of: ", m->help, m->peak_off,
					   false);
		}
	}
	/* no sample where there is no limit: a 0 would read as a limit of nothing */
	prom_device_family(o, om, procs, n, "gpupool_limit_bytes", "gauge", "bytes", "",
			   "configured limit on reserved bytes (no sample: no limit)",
			   offsetof(struct gpupool_device_stats, limit_bytes), true);
	prom_meta(o, om, "gpupool_process_start_time_seconds", "gauge", "seconds", "",
		  "when the process started using gpupool (unix time)");
	for (size_t i = 0; i < n; i++) {
		if (procs[i].stale)
			continue;
		const struct gpupool_page *pg = procs[i].page;
		puts_(o, "gpupool_process_start_time_seconds");
		prom_labels(o, pg, NULL);
		gp_format_printf(o, " %llu.%03llu\n", (unsigned long long)(pg->start_time_ns / 1000000000ull),
				 (unsigned long long)(pg->start_time_ns / 1000000ull % 1000ull));
	}
	prom_gpus(o, om, procs, n);
	prom_meta(o, om, "gpupool_skipped_pages", "gauge", NULL, "",
		  "statistics pages the reader left out, by reason");
	for (size_t k = 0; k < nskips; k++)
		gp_format_printf(o, "gpupool_skipped_pages{reason=\"%s\"} %lu\n", skips[k].reason, skips[k].count);
	if (om)
		puts_(o, "# EOF\n");
}

/* ---- exit report ----------------------------------------------------------------- */

/* Seconds of a nanosecond counter, for a line ("0.52 s"). */
static void seconds_text(char *buf, size_t cap, uint64_t ns)
{
	snprintf(buf, cap, "%.2f s", (double)ns / 1e9);
}

/* The report's rows for memory held outside the pools (in all, then by kind), under peak and
 * final, only where not all zero: the common report stays short. */
static void report_unpooled(struct gp_format_out *o, const struct gpupool_device_stats *s)
{
	static const struct {
		const char *label;
		size_t off, peak_off;
	} kinds[] = {
		{"  vmm", offsetof(struct gpupool_device_stats, unpooled_vmm_bytes),
		 offsetof(struct gpupool_device_stats, unpooled_vmm_bytes_peak)},
		{"  memory pools", offsetof(struct gpupool_device_stats, unpooled_mempool_bytes),
		 offsetof(struct gpupool_device_stats, unpooled_mempool_bytes_peak)},
		{"  managed", offsetof(struct gpupool_device_stats, unpooled_managed_bytes),
		 offsetof(struct gpupool_device_stats, unpooled_managed_bytes_peak)},
		{"  pitched", offsetof(struct gpupool_device_stats, unpooled_pitched_bytes),
		 offsetof(struct gpupool_device_stats, unpooled_pitched_bytes_peak)},
	};
	char a[16], b[16];
	if (s->unpooled_bytes || s->unpooled_bytes_peak) {
		gp_format_printf(o, "  %-16s %14s %14s\n", "unpooled", gp_format_bytes(a, sizeof a, s->unpooled_bytes_peak),
				 gp_format_bytes(b, sizeof b, s->unpooled_bytes));
		for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
			uint64_t cur = field(s, kinds[k].off), pk = field(s, kinds[k].peak_off);
			if (cur || pk)
				gp_format_printf(o, "  %-16s %14s %14s\n", kinds[k].label, gp_format_bytes(a, sizeof a, pk),
						 gp_format_bytes(b, sizeof b, cur));
		}
	}
}

/* The report's lines for the calls held outside the pools, reclaims and the decay, each
 * only where its figures are not all zero. */
static void report_sharing(struct gp_format_out *o, const struct gpupool_device_stats *s)
{
	char a[16], c[16];
	if (s->unpooled_allocs || s->unpooled_frees || s->unpooled_refusals)
		gp_format_printf(o, "  unpooled calls: %llu allocation%s, %llu free%s, %llu refused at the limit\n",
				 (unsigned long long)s->unpooled_allocs, s->unpooled_allocs == 1 ? "" : "s",
				 (unsigned long long)s->unpooled_frees, s->unpooled_frees == 1 ? "" : "s",
				 (unsigned long long)s->unpooled_refusals);
	if (s->reclaim_asks || s->reclaim_answers || s->reclaim_received_bytes || s->reclaim_wait_ns) {
		seconds_text(c, sizeof c, s->reclaim_wait_ns);
		gp_format_printf(o, "  reclaims asked %llu, answered %llu: received %s, waited %s\n",
				 (unsigned long long)s->reclaim_asks, (unsigned long long)s->reclaim_answers,
				 gp_format_bytes(a, sizeof a, s->reclaim_received_bytes), c);
	}
	if (s->reclaims_served || s->reclaims_refused || s->reclaim_given_bytes || s->framework_empties)
		gp_format_printf(o, "  reclaims served %llu, refused %llu: gave %s; framework caches emptied %llu\n",
				 (unsigned long long)s->reclaims_served, (unsigned long long)s->reclaims_refused,
				 gp_format_bytes(a, sizeof a, s->reclaim_given_bytes),
				 (unsigned long long)s->framework_empties);
	if (s->decay_releases || s->decayed_bytes)
		gp_format_printf(o, "  decay: %llu segment%s, %s given back after sitting unused\n",
				 (unsigned long long)s->decay_releases, s->decay_releases == 1 ? "" : "s",
				 gp_format_bytes(a, sizeof a, s->decayed_bytes));
}

void gp_format_report(struct gp_format_out *o, const struct gpupool_page *pg)
{
	char comm[GPUPOOL_COMM_LEN], version[GPUPOOL_VERSION_LEN + 1];
	safe_comm(comm, pg);
	safe_text(version, pg->lib_version, GPUPOOL_VERSION_LEN + 1);
	gp_format_printf(o, "gpupool: report for pid %d (%s)%s%s%s\n", (int)pg->pid, comm,
			 version[0] ? ", gpupool " : "", version, pg->ndevices ? "" : ": no device memory was allocated");
	for (uint32_t d = 0; d < pg->ndevices && d < GPUPOOL_MAX_DEVICES; d++) {
		const struct gpupool_device_stats *s = &pg->dev[d];
		if (!s->active)
			continue;
		char a[16], b[16], h[16], saved[24];
		gp_format_printf(o, "  device %-3d %19s %14s\n", (int)s->device, "peak", "final");
		gp_format_printf(o, "  %-16s %14s %14s\n", "reserved", gp_format_bytes(a, sizeof a, s->reserved_bytes_peak),
				 gp_format_bytes(b, sizeof b, s->reserved_bytes));
		gp_format_printf(o, "  %-16s %14s %14s\n", "allocated", gp_format_bytes(a, sizeof a, s->allocated_bytes_peak),
				 gp_format_bytes(b, sizeof b, s->allocated_bytes));
		report_unpooled(o, s);
		gp_format_printf(o, "  %-16s %14s %14s\n", "", "cudaMalloc", "cudaFree");
		gp_format_printf(o, "  %-16s %14llu %14llu\n", "real calls", (unsigned long long)s->segment_allocs,
				 (unsigned long long)s->segment_frees);
		gp_format_printf(o, "  %-16s %14llu %14llu\n", "pool requests", (unsigned long long)s->allocs,
				 (unsigned long long)s->frees);
		double hr = gp_format_hit_rate(s);
		if (hr < 0)
			snprintf(h, sizeof h, "-");
		else
			snprintf(h, sizeof h, "%.1f%%", hr);
		gp_format_calls_saved(saved, sizeof saved, s);
		gp_format_printf(o, "  driver calls saved %s, hit rate %s, largest free block %s\n", saved, h,
				 gp_format_bytes(a, sizeof a, s->largest_free_block));
		gp_format_printf(o, "  fences %llu, OOMs %llu (retried %llu), invalid frees %llu\n",
				 (unsigned long long)s->fences, (unsigned long long)s->ooms,
				 (unsigned long long)s->oom_retries, (unsigned long long)s->invalid_frees);
		if (s->driver_allocs || s->driver_frees || s->driver_passthrough_allocs)
			gp_format_printf(o, "  by layer: runtime %llu requests, driver API %llu (%llu passed to the driver)\n",
					 (unsigned long long)(s->allocs >= s->driver_allocs ? s->allocs - s->driver_allocs : 0),
					 (unsigned long long)s->driver_allocs,
					 (unsigned long long)s->driver_passthrough_allocs);
		report_sharing(o, s);
	}
}
