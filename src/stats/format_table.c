/* gpupool-stat's default view (see format.h): the table, one row per process and device,
 * fitted to a width and a number of rows, and the lines per GPU above it. Fixed buffers only,
 * no malloc, no locks. Depends on format_internal.h (the writer and the shared helpers) and
 * libc only: never on the other outputs' files. */
#include "format_internal.h"

#include <string.h>

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
	gp_format_puts(o, "\n");
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
	gp_format_puts(o, "\n");
}

/* A slot's rates for the table, "-" when not known (or not finite: a page's counters are
 * anyone's). */
static void rate_cells(char cells[TC_COUNT][48], const struct gp_format_rate *r)
{
	if (r && r->known && r->allocs_per_s >= 0 && r->bytes_per_s >= 0 && r->allocs_per_s <= 1e300 &&
	    r->bytes_per_s <= 1e300) {
		gp_format_rate_count(cells[TC_ARATE], 48, r->allocs_per_s);
		gp_format_rate_bytes(cells[TC_BRATE], 48, r->bytes_per_s);
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
		gp_format_safe_comm(comm, pg);
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
				double pct = 100.0 * (double)gp_format_add_sat(s->reserved_bytes, s->unpooled_bytes) /
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

/* ---- GPU lines ------------------------------------------------------------------- */

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
	gp_format_puts(o, "\n");
	return lines + 1;
}
