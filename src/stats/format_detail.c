/* gpupool-stat's view of one process (see format.h): every gauge (current, peak), every
 * counter, the limit, the uuid and the rates of each device, in a box of a terminal's size
 * where the lines that matter most stay. Fixed buffers only, no malloc, no locks. Depends on
 * format_internal.h (the writer, the fields, the shared helpers) and libc only. */
#include "format_internal.h"

#include <stdarg.h>
#include <string.h>
#include <time.h>

/* "2026-12-04 21:33:38 (5 min ago)", or with `comma` "2026-12-04 21:33:38, 5 min ago": a
 * CLOCK_REALTIME time in local time, and its age at now_ns (0: no age); "unknown" for 0. */
static void date_text(char *buf, size_t cap, uint64_t ns, uint64_t now_ns, bool comma)
{
	if (!ns) {
		snprintf(buf, cap, "unknown");
		return;
	}
	time_t t = (time_t)(ns / 1000000000ull);
	struct tm tm;
	char d[32] = "?";
	if (localtime_r(&t, &tm))
		strftime(d, sizeof d, "%Y-%m-%d %H:%M:%S", &tm);
	if (now_ns && now_ns >= ns) {
		char age[16];
		gp_format_age(age, sizeof age, now_ns - ns);
		snprintf(buf, cap, comma ? "%s, %s ago" : "%s (%s ago)", d, age);
	} else {
		snprintf(buf, cap, "%s", d);
	}
}

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
static enum prio field_prio(const struct gp_format_metric *m)
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
		for (size_t i = 0; i < GP_FORMAT_NMETRICS; i++) {
			const struct gp_format_metric *m = &gp_format_metrics[i];
			value_cell(cell, sizeof cell, gp_format_is_bytes(m), gp_format_field(s, m->off));
			*wcur = (int)strlen(cell) > *wcur ? (int)strlen(cell) : *wcur;
			if (!m->gauge)
				continue;
			value_cell(cell, sizeof cell, gp_format_is_bytes(m), gp_format_field(s, m->peak_off));
			*wpeak = (int)strlen(cell) > *wpeak ? (int)strlen(cell) : *wpeak;
		}
	}
}

static void detail_lines(struct box *b, const struct gp_format_proc *p, uint64_t now_ns)
{
	const struct gpupool_page *pg = p->page;
	char comm[GPUPOOL_COMM_LEN], started[64], user[48] = "";
	int wc, wp;
	detail_widths(p, &wc, &wp);
	gp_format_safe_comm(comm, pg);
	date_text(started, sizeof started, pg->start_time_ns, now_ns, false);
	if (p->user) {
		char u[33];
		gp_format_safe_text(u, p->user, sizeof u);
		snprintf(user, sizeof user, "  user %s", u);
	} else if (p->uid_known) {
		snprintf(user, sizeof user, "  uid %u", (unsigned)p->uid);
	}
	box_line(b, P_TOP, "pid %d  command %s%s  %s  devices %u  started %s", (int)pg->pid, comm, user,
		 p->stale ? "STALE (process gone)" : "live", pg->ndevices, started);
	if (p->remote)
		box_line(b, P_TOP, "another user's process: its answer on the channel (its page is theirs to read)");
	else
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
		char lim[40], cur[40], pk[40], uuid[GP_FORMAT_UUID_LEN], name[GPUPOOL_DEVICE_NAME_LEN + 4] = "";
		if (s->limit_bytes)
			value_cell(lim, sizeof lim, true, s->limit_bytes);
		else
			snprintf(lim, sizeof lim, "none");
		gp_format_uuid(uuid, s);
		if (s->device_name[0]) {
			memcpy(name, "  ", 2);
			gp_format_safe_text(name + 2, s->device_name, GPUPOOL_DEVICE_NAME_LEN);
		}
		box_line(b, P_REST, "%s", "");
		box_line(b, P_TOP, "device %d%s  limit %s%s%s", (int)s->device, name, lim, uuid[0] ? "  " : "", uuid);
		if (s->device_total_bytes) { /* the driver's figures at the library's last look */
			char t[16], f[16], seen[64];
			date_text(seen, sizeof seen, s->device_seen_ns, now_ns, true);
			box_line(b, P_REST, "  GPU memory %s, free %s (the driver's, at %s)",
				 gp_format_bytes(t, sizeof t, s->device_total_bytes),
				 gp_format_bytes(f, sizeof f,
						 s->device_free_bytes < s->device_total_bytes ? s->device_free_bytes
											       : s->device_total_bytes),
				 seen);
		}
		if (s->waiting_bytes) {
			char w[16], since[64];
			date_text(since, sizeof since, s->wait_started_ns, now_ns, false);
			box_line(b, P_MORE, "  waiting for %s since %s", gp_format_bytes(w, sizeof w, s->waiting_bytes), since);
		}
		if (s->floor_bytes) {
			char fl[16];
			box_line(b, P_REST, "  keeps %s cached whatever others ask (its floor)",
				 gp_format_bytes(fl, sizeof fl, s->floor_bytes));
		}
		if (p->rates) {
			const struct gp_format_rate *r = &p->rates[d];
			char a[24], by[24];
			if (r->known && r->allocs_per_s >= 0 && r->bytes_per_s >= 0 && r->allocs_per_s <= 1e300 &&
			    r->bytes_per_s <= 1e300) {
				gp_format_rate_count(a, sizeof a, r->allocs_per_s);
				gp_format_rate_bytes(by, sizeof by, r->bytes_per_s);
				box_line(b, P_KEY, "  per second: %s allocations, %s asked for", a, by);
			} else {
				box_line(b, P_KEY, "  per second: - (from the next refresh)");
			}
		}
		box_line(b, P_KEY, "  %-25s %*s %*s", "gauge", wc, "current", wp, "peak");
		for (size_t i = 0; i < GP_FORMAT_NMETRICS; i++) {
			const struct gp_format_metric *m = &gp_format_metrics[i];
			if (!m->gauge || !gp_format_known(p, m->off))
				continue;
			value_cell(cur, sizeof cur, gp_format_is_bytes(m), gp_format_field(s, m->off));
			if (gp_format_known(p, m->peak_off))
				value_cell(pk, sizeof pk, gp_format_is_bytes(m), gp_format_field(s, m->peak_off));
			else
				snprintf(pk, sizeof pk, "-");
			box_line(b, field_prio(m), "  %-25s %*s %*s", m->name, wc, cur, wp, pk);
		}
		if (p->remote) /* no counter comes with an answer */
			continue;
		box_line(b, P_MORE, "  %-25s %*s", "counter", wc, "total");
		for (size_t i = 0; i < GP_FORMAT_NMETRICS; i++) {
			const struct gp_format_metric *m = &gp_format_metrics[i];
			if (m->gauge)
				continue;
			value_cell(cur, sizeof cur, gp_format_is_bytes(m), gp_format_field(s, m->off));
			box_line(b, field_prio(m), "  %-25s %*s", m->name, wc, cur);
		}
		double hr = gp_format_hit_rate(s);
		if (hr >= 0)
			box_line(b, P_MORE, "  %-25s %*.1f%%", "hit rate", wc - 1, hr);
		char saved[24];
		gp_format_calls_saved(saved, sizeof saved, s);
		box_line(b, P_REST, "  %-25s %*s", "driver calls saved", wc, saved);
	}
}

void gp_format_detail_view(struct gp_format_out *o, const struct gp_format_proc *p, const struct gp_format_view *v)
{
	unsigned width = v ? v->width : 0, rows = v ? v->rows : 0;
	uint64_t now_ns = v ? v->now_ns : 0;
	struct box b = {.o = o, .width = width, .counting = true};
	detail_lines(&b, p, now_ns);
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
	detail_lines(&b, p, now_ns);
	if (b.left) {
		char line[128];
		snprintf(line, sizeof line, "%u row%s left out: a taller terminal shows %s", b.left, b.left == 1 ? "" : "s",
			 b.left == 1 ? "it" : "them");
		if (width && width < sizeof line)
			line[width] = '\0';
		gp_format_printf(o, "%s\n", line);
	}
}

void gp_format_detail_box(struct gp_format_out *o, const struct gp_format_proc *p, unsigned width, unsigned rows)
{
	struct gp_format_view v = {.width = width, .rows = rows};
	gp_format_detail_view(o, p, &v);
}

void gp_format_detail(struct gp_format_out *o, const struct gp_format_proc *p)
{
	gp_format_detail_box(o, p, 0, 0);
}
