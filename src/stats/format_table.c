/* gpupool-stat's default view (see format.h): the lines per GPU, then the table, one row per
 * process and device, sorted by GPU and memory held, fitted to a width and a number of rows,
 * and the legend under it. Fixed buffers (and the caller's room to sort) only, no malloc, no
 * locks. Depends on format_internal.h (the writer and the shared helpers) and libc only:
 * never on the other outputs' files. */
#include "format_internal.h"

#include <stdlib.h>
#include <string.h>

/* ---- lines ----------------------------------------------------------------------- */

/* A line, cut at `cut` characters unless 0, in `color` unless NULL, and its newline. The cut
 * comes first: an escape code is never cut in half. */
static void put_line(struct gp_format_out *o, const char *line, unsigned cut, const char *color)
{
	size_t len = strlen(line);
	if (color)
		gp_format_puts(o, color);
	gp_format_write(o, line, cut && cut < len ? cut : len);
	if (color)
		gp_format_puts(o, GP_FORMAT_RESET);
	gp_format_puts(o, "\n");
}

/* v, or a view of no bounds, no ages and no colour for NULL. */
static const struct gp_format_view *view_or_none(const struct gp_format_view *v)
{
	static const struct gp_format_view none;
	return v ? v : &none;
}

static const char *color_of(const struct gp_format_view *v, const char *code)
{
	return v && v->color ? code : NULL;
}

/* ---- table ----------------------------------------------------------------------- */

/* The table's columns, in display order. keep: the order in which they give way when the
 * width is short (0: never dropped; then the highest number goes first). limit: shown only
 * when some listed slot has a limit; rate: only when some process has rates (--watch);
 * unpooled: when some holds memory outside the pools; waiting: when some waits. */
enum tcol { TC_GPU, TC_PID, TC_USER, TC_COMM, TC_DEV, TC_HELD, TC_USED, TC_IDLE, TC_WAIT, TC_RESERVED,
	    TC_UNPOOLED, TC_ARATE, TC_BRATE, TC_PEAK, TC_CACHED, TC_LARGEST, TC_LIMIT, TC_PCTLIM, TC_HIT,
	    TC_SEGS, TC_OOMS, TC_STATE, TC_COUNT };
enum tcond { C_ALWAYS, C_LIMIT, C_RATE, C_UNPOOLED, C_WAITING };
static const struct {
	const char *head;
	int width; /* negative: left-aligned */
	int keep;
	enum tcond cond;
} tcols[TC_COUNT] = {
	[TC_GPU] = {"GPU", 3, 0, C_ALWAYS},           [TC_PID] = {"PID", 7, 0, C_ALWAYS},
	[TC_USER] = {"USER", -8, 0, C_ALWAYS},        [TC_COMM] = {"COMMAND", -15, 0, C_ALWAYS},
	[TC_DEV] = {"DEV", 3, 13, C_ALWAYS},          [TC_HELD] = {"HELD", 10, 1, C_ALWAYS},
	[TC_USED] = {"USED", 10, 4, C_ALWAYS},        [TC_IDLE] = {"IDLE", 10, 3, C_ALWAYS},
	[TC_WAIT] = {"WAITING", 14, 2, C_WAITING},    [TC_RESERVED] = {"RESERVED", 10, 12, C_ALWAYS},
	[TC_UNPOOLED] = {"UNPOOLED", 10, 11, C_UNPOOLED},
	[TC_ARATE] = {"ALLOCS/S", 8, 5, C_RATE},      [TC_BRATE] = {"BYTES/S", 10, 6, C_RATE},
	[TC_PEAK] = {"PEAK_RSVD", 10, 15, C_ALWAYS},  [TC_CACHED] = {"CACHED", 10, 10, C_ALWAYS},
	[TC_LARGEST] = {"LARGEST", 10, 17, C_ALWAYS}, [TC_LIMIT] = {"LIMIT", 10, 8, C_LIMIT},
	[TC_PCTLIM] = {"%LIM", 5, 7, C_LIMIT},        [TC_HIT] = {"HIT%", 5, 14, C_ALWAYS},
	[TC_SEGS] = {"SEGS", 6, 16, C_ALWAYS},        [TC_OOMS] = {"OOMS", 5, 9, C_ALWAYS},
	[TC_STATE] = {"STATE", -5, 0, C_ALWAYS},
};

#define CELL 48
typedef char cells_t[TC_COUNT][CELL];

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

static bool slot_shown(const struct gp_format_proc *p, uint32_t d)
{
	return !(p->inconsistent & (1u << d)) && p->page->dev[d].active;
}

/* The columns to show in `width` characters (0: no bound). Columns give way in the order of
 * `keep` until the row fits; then any that was dropped and fits again comes back, the most
 * wanted first. The never-dropped columns may still exceed a very narrow width. */
static unsigned table_columns(const struct gp_format_proc *procs, size_t n, unsigned width)
{
	bool any[C_WAITING + 1] = {[C_ALWAYS] = true};
	for (size_t i = 0; i < n; i++) {
		any[C_RATE] |= procs[i].rates != NULL;
		for (uint32_t d = 0; d < procs[i].page->ndevices && d < GPUPOOL_MAX_DEVICES; d++) {
			const struct gpupool_device_stats *s = &procs[i].page->dev[d];
			if (!slot_shown(&procs[i], d))
				continue;
			any[C_LIMIT] |= s->limit_bytes != 0;
			/* the peak too: the column stays while a process that held some runs */
			any[C_UNPOOLED] |= s->unpooled_bytes != 0 || s->unpooled_bytes_peak != 0;
			any[C_WAITING] |= s->waiting_bytes != 0;
		}
	}
	unsigned mask = 0;
	for (int c = 0; c < TC_COUNT; c++)
		if (any[tcols[c].cond])
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
 * width), in `color` unless NULL. */
static void table_row(struct gp_format_out *o, unsigned mask, cells_t cells, unsigned cut, const char *color)
{
	char line[TC_COUNT * (CELL + 2)];
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
	line[len] = '\0';
	put_line(o, line, cut, color);
}

static void table_fill(cells_t cells, const char *v)
{
	for (int c = TC_DEV; c < TC_STATE; c++)
		snprintf(cells[c], CELL, "%s", v);
}

/* A slot's rates for the table, "-" when not known (or not finite: a page's counters are
 * anyone's). */
static void rate_cells(cells_t cells, const struct gp_format_rate *r)
{
	if (r && r->known && r->allocs_per_s >= 0 && r->bytes_per_s >= 0 && r->allocs_per_s <= 1e300 &&
	    r->bytes_per_s <= 1e300) {
		gp_format_rate_count(cells[TC_ARATE], CELL, r->allocs_per_s);
		gp_format_rate_bytes(cells[TC_BRATE], CELL, r->bytes_per_s);
	} else {
		snprintf(cells[TC_ARATE], CELL, "-");
		snprintf(cells[TC_BRATE], CELL, "-");
	}
}

/* The cell of a figure at `off`: its bytes, or "-" where the listing does not know it. */
static void bytes_cell(char *cell, const struct gp_format_proc *p, const struct gpupool_device_stats *s, size_t off)
{
	if (gp_format_known(p, off))
		gp_format_bytes(cell, CELL, gp_format_field(s, off));
	else
		snprintf(cell, CELL, "-");
}

#define OFF_(f) offsetof(struct gpupool_device_stats, f)

/* The cells of one active, consistent slot. */
static void slot_cells(cells_t cells, const struct gp_format_proc *p, uint32_t d, uint64_t now_ns)
{
	const struct gpupool_device_stats *s = &p->page->dev[d];
	gp_format_bytes(cells[TC_HELD], CELL, gp_format_add_sat(s->reserved_bytes, s->unpooled_bytes));
	bytes_cell(cells[TC_USED], p, s, OFF_(allocated_bytes));
	bytes_cell(cells[TC_IDLE], p, s, OFF_(releasable_bytes));
	bytes_cell(cells[TC_RESERVED], p, s, OFF_(reserved_bytes));
	bytes_cell(cells[TC_UNPOOLED], p, s, OFF_(unpooled_bytes));
	if (!s->waiting_bytes) {
		snprintf(cells[TC_WAIT], CELL, "-");
	} else {
		char b[16], age[16];
		gp_format_bytes(b, sizeof b, s->waiting_bytes);
		if (now_ns && s->wait_started_ns && now_ns >= s->wait_started_ns) {
			gp_format_age(age, sizeof age, now_ns - s->wait_started_ns);
			snprintf(cells[TC_WAIT], CELL, "%s %s", b, age);
		} else {
			snprintf(cells[TC_WAIT], CELL, "%s", b);
		}
	}
	rate_cells(cells, p->rates ? &p->rates[d] : NULL);
	bytes_cell(cells[TC_PEAK], p, s, OFF_(reserved_bytes_peak));
	bytes_cell(cells[TC_CACHED], p, s, OFF_(cached_bytes));
	bytes_cell(cells[TC_LARGEST], p, s, OFF_(largest_free_block));
	if (s->limit_bytes) {
		gp_format_bytes(cells[TC_LIMIT], CELL, s->limit_bytes);
		/* what counts against the limit: the pools' segments and the memory held outside
		 * them; a page anyone may have written: no bound on the ratio */
		double pct = 100.0 * (double)gp_format_add_sat(s->reserved_bytes, s->unpooled_bytes) / (double)s->limit_bytes;
		if (pct < 999.95)
			snprintf(cells[TC_PCTLIM], CELL, "%.1f", pct);
		else
			snprintf(cells[TC_PCTLIM], CELL, ">999");
	} else {
		snprintf(cells[TC_LIMIT], CELL, "-");
		snprintf(cells[TC_PCTLIM], CELL, "-");
	}
	double hr = gp_format_known(p, OFF_(hits)) ? gp_format_hit_rate(s) : -1;
	if (hr < 0)
		snprintf(cells[TC_HIT], CELL, "-");
	else
		snprintf(cells[TC_HIT], CELL, "%.1f", hr);
	if (gp_format_known(p, OFF_(segment_allocs)))
		snprintf(cells[TC_SEGS], CELL, "%llu", (unsigned long long)s->segment_allocs);
	else
		snprintf(cells[TC_SEGS], CELL, "-");
	if (gp_format_known(p, OFF_(ooms)))
		snprintf(cells[TC_OOMS], CELL, "%llu", (unsigned long long)s->ooms);
	else
		snprintf(cells[TC_OOMS], CELL, "-");
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

/* The position of slot d's GPU among the k GPUs of the lines (gp_format_gpus), k when it has
 * none (its UUID is not known, or it is inconsistent): those rows come last. */
static uint32_t gpu_of(const struct gp_format_gpu *gpus, size_t k, const struct gp_format_proc *p, uint32_t d)
{
	if (d >= GPUPOOL_MAX_DEVICES || (p->inconsistent & (1u << d)))
		return (uint32_t)k;
	const struct gpupool_device_stats *s = &p->page->dev[d];
	for (size_t g = 0; g < k; g++)
		if (memcmp(gpus[g].uuid, s->uuid, GPUPOOL_UUID_LEN) == 0)
			return (uint32_t)g;
	return (uint32_t)k;
}

/* The sort of the rows: GPU, then memory held (largest first), pid, device. */
static int sort_rows(const void *a_, const void *b_)
{
	const struct gp_format_row *a = a_, *b = b_;
	if (a->gpu_ != b->gpu_)
		return a->gpu_ < b->gpu_ ? -1 : 1;
	if (a->held_ != b->held_)
		return a->held_ > b->held_ ? -1 : 1;
	if (a->pid_ != b->pid_)
		return a->pid_ < b->pid_ ? -1 : 1;
	return (a->device_ > b->device_) - (a->device_ < b->device_);
}

/* Lines of the table: the head, rows while `room` lasts, then what was left out. */
struct table_out {
	struct gp_format_out *o;
	const struct gp_format_view *v;
	size_t room, left;
	unsigned cut; /* 0, or the box's width */
	unsigned mask;
	const struct gp_format_gpu *gpus;
	size_t k;
};

static void table_put(struct table_out *t, cells_t cells, const char *color)
{
	if (t->room) {
		t->room--;
		table_row(t->o, t->mask, cells, t->cut, color);
	} else {
		t->left++;
	}
}

/* The row of slot d of procs[i] (UINT32_MAX: the row of a process without devices). */
static void one_row(struct table_out *t, const struct gp_format_proc *p, uint32_t d)
{
	const struct gpupool_page *pg = p->page;
	const struct gp_format_view *v = t->v;
	cells_t cells;
	char comm[GPUPOOL_COMM_LEN];
	gp_format_safe_comm(comm, pg);
	snprintf(cells[TC_PID], CELL, "%d", (int)pg->pid);
	if (p->user)
		gp_format_safe_text(cells[TC_USER], p->user, 9); /* 8 characters, as ps cuts */
	else if (p->uid_known)
		snprintf(cells[TC_USER], CELL, "%u", (unsigned)p->uid);
	else
		snprintf(cells[TC_USER], CELL, "-");
	snprintf(cells[TC_COMM], CELL, "%s", comm);
	snprintf(cells[TC_STATE], CELL, "%s", p->stale ? "gone" : "live");
	const char *color = p->stale ? color_of(v, GP_FORMAT_DIM) : NULL;
	if (d == UINT32_MAX) {
		snprintf(cells[TC_GPU], CELL, "-");
		table_fill(cells, "-");
		table_put(t, cells, color);
		return;
	}
	const struct gpupool_device_stats *s = &pg->dev[d];
	uint32_t g = gpu_of(t->gpus, t->k, p, d);
	if (g < t->k && t->gpus[g].index >= 0)
		snprintf(cells[TC_GPU], CELL, "%d", t->gpus[g].index);
	else
		snprintf(cells[TC_GPU], CELL, "-");
	if (p->inconsistent & (1u << d)) {
		table_fill(cells, "?");
		snprintf(cells[TC_DEV], CELL, "%d", (int)s->device);
		snprintf(cells[TC_STATE], CELL, "inconsistent (writer died mid-update?)");
		table_put(t, cells, color_of(v, GP_FORMAT_RED));
		return;
	}
	snprintf(cells[TC_DEV], CELL, "%d", (int)s->device);
	slot_cells(cells, p, d, v ? v->now_ns : 0);
	if (s->waiting_bytes && !p->stale)
		color = color_of(v, GP_FORMAT_YELLOW);
	table_put(t, cells, color);
}

void gp_format_table_view(struct gp_format_out *o, const struct gp_format_proc *procs, size_t n,
			  const struct gp_format_view *v)
{
	v = view_or_none(v);
	struct gp_format_gpu gpus[GP_FORMAT_MAX_GPUS];
	size_t k = gp_format_gpus(procs, n, gpus, GP_FORMAT_MAX_GPUS, NULL);
	unsigned width = v->width, rows = v->rows;
	unsigned mask = table_columns(procs, n, width);
	cells_t cells;
	size_t gone = 0, nrows = table_rows(procs, n);
	for (size_t i = 0; i < n; i++)
		gone += procs[i].stale;
	struct table_out t = {o, v, nrows, 0, rows || v->cut ? width : 0, mask, gpus, k};
	/* the head, the rows, the line counting the gone: one line counts what does not fit */
	size_t fixed = 1 + (gone ? 1 : 0);
	if (rows && fixed + nrows > rows)
		t.room = rows > fixed + 1 ? rows - fixed - 1 : 0;
	for (int c = 0; c < TC_COUNT; c++)
		snprintf(cells[c], CELL, "%s", tcols[c].head);
	table_row(o, mask, cells, t.cut, color_of(v, GP_FORMAT_BOLD));
	/* sorted in the caller's room, when it has room for every row */
	struct gp_format_row *sr = v->scratch;
	if (sr && nrows <= v->scratch_cap) {
		size_t m = 0;
		for (size_t i = 0; i < n; i++) {
			const struct gpupool_page *pg = procs[i].page;
			if (pg->ndevices == 0)
				sr[m++] = (struct gp_format_row){(uint32_t)i, UINT32_MAX, (uint32_t)k + 1, pg->pid, -1, 0};
			for (uint32_t d = 0; d < pg->ndevices && d < GPUPOOL_MAX_DEVICES; d++) {
				const struct gpupool_device_stats *s = &pg->dev[d];
				if (!(procs[i].inconsistent & (1u << d)) && !s->active)
					continue;
				bool ok = slot_shown(&procs[i], d);
				sr[m++] = (struct gp_format_row){(uint32_t)i, d, gpu_of(gpus, k, &procs[i], d), pg->pid,
								 s->device,
								 ok ? gp_format_add_sat(s->reserved_bytes, s->unpooled_bytes)
								    : 0};
			}
		}
		qsort(sr, m, sizeof *sr, sort_rows);
		for (size_t r = 0; r < m; r++)
			one_row(&t, &procs[sr[r].proc], sr[r].slot);
	} else {
		/* no room to sort: by GPU, each in page order */
		for (size_t g = 0; g <= k + 1; g++)
			for (size_t i = 0; i < n; i++) {
				const struct gpupool_page *pg = procs[i].page;
				if (pg->ndevices == 0 && g == k + 1)
					one_row(&t, &procs[i], UINT32_MAX);
				for (uint32_t d = 0; d < pg->ndevices && d < GPUPOOL_MAX_DEVICES; d++)
					if (((procs[i].inconsistent & (1u << d)) || pg->dev[d].active) &&
					    gpu_of(gpus, k, &procs[i], d) == g)
						one_row(&t, &procs[i], d);
			}
	}
	char line[160];
	if (t.left) {
		snprintf(line, sizeof line, "%zu row%s left out: a taller terminal shows %s", t.left, t.left == 1 ? "" : "s",
			 t.left == 1 ? "it" : "them");
		put_line(o, line, t.cut, NULL);
	}
	if (gone) {
		snprintf(line, sizeof line, "%zu process%s gone without removing %s page (gpupool-stat --clean removes %s)",
			 gone, gone == 1 ? "" : "es", gone == 1 ? "its" : "their", gone == 1 ? "it" : "them");
		put_line(o, line, t.cut, color_of(v, GP_FORMAT_DIM));
	}
}

void gp_format_table_box(struct gp_format_out *o, const struct gp_format_proc *procs, size_t n, unsigned width,
			 unsigned rows)
{
	struct gp_format_view v = {.width = width, .rows = rows};
	gp_format_table_view(o, procs, n, &v);
}

void gp_format_table_fit(struct gp_format_out *o, const struct gp_format_proc *procs, size_t n, unsigned width)
{
	gp_format_table_box(o, procs, n, width, 0);
}

void gp_format_table(struct gp_format_out *o, const struct gp_format_proc *procs, size_t n)
{
	gp_format_table_box(o, procs, n, 0, 0);
}

void gp_format_legend(struct gp_format_out *o, const struct gp_format_view *v)
{
	put_line(o, "HELD: taken from the GPU; USED: in live blocks; IDLE: --release frees it now", v ? v->width : 0,
		 color_of(v, GP_FORMAT_DIM));
}

void gp_format_none(struct gp_format_out *o)
{
	gp_format_puts(o, "no gpupool processes\n");
}

/* ---- GPU lines ------------------------------------------------------------------- */

/* The UUID in a GPU line: whole (40 characters), or shortened as `form` says: 1,
 * nvidia-smi's first group ("GPU-6770706f"); 2, that group and the last four digits
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

/* The shortest form of gpu_name that tells the GPUs apart. */
static int gpu_name_form(const struct gp_format_gpu *gpus, size_t k)
{
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

unsigned gp_format_gpu_lines_view(struct gp_format_out *o, const struct gp_format_proc *procs, size_t n,
				  const struct gp_format_view *v)
{
	v = view_or_none(v);
	struct gp_format_gpu gpus[GP_FORMAT_MAX_GPUS];
	size_t left = 0, k = gp_format_gpus(procs, n, gpus, GP_FORMAT_MAX_GPUS, &left);
	if (!k)
		return 0;
	int nw = 4; /* NAME: the longest name, 4 at least, 24 at most */
	bool waiting = false, unnumbered = false;
	for (size_t i = 0; i < k; i++) {
		int l = (int)strlen(gpus[i].name);
		nw = l > nw ? (l < 24 ? l : 24) : nw;
		waiting |= gpus[i].waiting_bytes != 0;
		unnumbered |= gpus[i].index < 0;
	}
	/* the UUID last, where the width has room for it: whole, or in a short form; always
	 * where a GPU has no index (nothing else tells the lines apart) */
	unsigned fixed = 3 + 2 + (unsigned)nw + 4 * 11 + 7 + (waiting ? 11 : 0);
	int form = -1; /* -1: no UUID */
	if (!v->width || v->width >= fixed + 2 + 40)
		form = 0;
	else if (unnumbered || v->width >= fixed + 2 + 18)
		form = gpu_name_form(gpus, k);
	if (form > 0 && !unnumbered && v->width < fixed + 2 + (form == 1 ? 12 : 18))
		form = -1;
	char line[320], a[GP_FORMAT_UUID_LEN], wait[16] = "";
	unsigned lines = 0, c = v->cut ? v->width : 0;
	if (waiting)
		snprintf(wait, sizeof wait, " %10s", "WAITING");
	snprintf(line, sizeof line, "%3s  %-*s %10s %10s %10s %10s%s %6s%s%s", "GPU", nw, "NAME", "MEMORY", "FREE",
		 "GPUPOOL", "IDLE", wait, "PROCS", form >= 0 ? "  " : "", form >= 0 ? "UUID" : "");
	put_line(o, line, c, color_of(v, GP_FORMAT_BOLD));
	lines++;
	for (size_t i = 0; i < k; i++) {
		const struct gp_format_gpu *g = &gpus[i];
		char idx[16], total[16], fr[16], held[16], rec[16], note[48] = "", age[16], w[16];
		if (g->index >= 0)
			snprintf(idx, sizeof idx, "%d", g->index);
		else
			snprintf(idx, sizeof idx, "-");
		if (g->total_bytes) {
			gp_format_bytes(total, sizeof total, g->total_bytes);
			gp_format_bytes(fr, sizeof fr, g->free_bytes);
			if (g->figures_other) { /* another user's word only (gp_format_gpu) */
				strncat(total, "?", sizeof total - strlen(total) - 1);
				strncat(fr, "?", sizeof fr - strlen(fr) - 1);
			}
			/* the library looks about once a second: say so when the figure is older */
			if (g->seen_ns && v->now_ns > g->seen_ns && v->now_ns - g->seen_ns >= GP_FORMAT_GPU_STALE_NS) {
				gp_format_age(age, sizeof age, v->now_ns - g->seen_ns);
				snprintf(note, sizeof note, "  seen %s ago", age);
			}
		} else {
			snprintf(total, sizeof total, "-");
			snprintf(fr, sizeof fr, "-");
		}
		wait[0] = '\0';
		if (waiting)
			snprintf(wait, sizeof wait, " %10s",
				 g->waiting_bytes ? gp_format_bytes(w, sizeof w, g->waiting_bytes) : "-");
		a[0] = '\0';
		if (form >= 0)
			gpu_name(a, g, form);
		snprintf(line, sizeof line, "%3s  %-*.*s %10s %10s %10s %10s%s %6u%s%s%s", idx, nw, nw,
			 g->name[0] ? g->name : "-", total, fr, gp_format_bytes(held, sizeof held, g->held_bytes),
			 gp_format_bytes(rec, sizeof rec, g->reclaimable_bytes), wait, g->processes,
			 form >= 0 ? "  " : "", a, note);
		put_line(o, line, c, color_of(v, GP_FORMAT_CYAN));
		lines++;
	}
	bool other = false;
	for (size_t i = 0; i < k; i++)
		other |= gpus[i].figures_other && gpus[i].total_bytes;
	if (other) {
		put_line(o, "?: as another user's process says (none of yours or root's is on that GPU)", c,
			 color_of(v, GP_FORMAT_DIM));
		lines++;
	}
	if (left) {
		snprintf(line, sizeof line, "more GPUs than %d: %zu slot%s of the others not shown", GP_FORMAT_MAX_GPUS,
			 left, left == 1 ? "" : "s");
		put_line(o, line, c, NULL);
		lines++;
	}
	gp_format_puts(o, "\n");
	return lines + 1;
}

unsigned gp_format_gpu_lines(struct gp_format_out *o, const struct gp_format_proc *procs, size_t n, uint64_t now_ns,
			     unsigned width, bool cut)
{
	struct gp_format_view v = {.width = width, .now_ns = now_ns, .cut = cut};
	return gp_format_gpu_lines_view(o, procs, n, &v);
}
