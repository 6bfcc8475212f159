/* The formatter's common part (format.h, format_internal.h): the writer, the one list of fields
 * from the GPUPOOL_GAUGES / GPUPOOL_COUNTERS X-macros, the helpers the outputs share, the GPUs
 * summed. Runs at exit: fixed buffers, write(2) for fds, no malloc, no locks. Depends on
 * gpupool/stats.h, statpage.h and libc only: never on an output's file (format_*.c). */
#include "format_internal.h"
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

void gp_format_write(struct gp_format_out *o, const char *s, size_t len)
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

/* ---- fields ---------------------------------------------------------------------- */

#define GP_GAUGE_ROW_(n, u, h) {#n, #u, h, true,                      \
		offsetof(struct gpupool_device_stats, n), offsetof(struct gpupool_device_stats, n##_peak)},
#define GP_COUNTER_ROW_(n, u, h) {#n, #u, h, false,                   \
		offsetof(struct gpupool_device_stats, n), 0},
const struct gp_format_metric gp_format_metrics[GP_FORMAT_NMETRICS] = {
	GPUPOOL_GAUGES(GP_GAUGE_ROW_) GPUPOOL_COUNTERS(GP_COUNTER_ROW_)};

/* ---- what a listing knows ---------------------------------------------------------- */

bool gp_format_known(const struct gp_format_proc *p, size_t off)
{
	/* the figures of share.h's status answer (src/sharing/status.c) */
#define KNOWN_(f) offsetof(struct gpupool_device_stats, f)
	static const size_t remote[] = {
		KNOWN_(device), KNOWN_(active), KNOWN_(limit_bytes), KNOWN_(uuid), KNOWN_(reserved_bytes),
		KNOWN_(allocated_bytes), KNOWN_(cached_bytes), KNOWN_(unpooled_bytes), KNOWN_(releasable_bytes),
		KNOWN_(waiting_bytes), KNOWN_(device_total_bytes), KNOWN_(device_free_bytes), KNOWN_(device_seen_ns),
		KNOWN_(wait_started_ns), KNOWN_(floor_bytes), KNOWN_(device_name),
	};
#undef KNOWN_
	if (!p->remote)
		return true;
	for (size_t i = 0; i < sizeof remote / sizeof remote[0]; i++)
		if (remote[i] == off)
			return true;
	return false;
}

/* ---- shared helpers -------------------------------------------------------------- */

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

double gp_format_hit_rate(const struct gpupool_device_stats *s)
{
	if (!s->hits && !s->misses)
		return -1.0;
	return 100.0 * (double)s->hits / ((double)s->hits + (double)s->misses);
}

void gp_format_calls_saved(char *buf, size_t cap, const struct gpupool_device_stats *s)
{
	uint64_t pool = gp_format_add_sat(s->allocs, s->frees);
	uint64_t real = gp_format_add_sat(s->segment_allocs, s->segment_frees);
	snprintf(buf, cap, "%s%llu", pool < real ? "-" : "",
		 (unsigned long long)(pool < real ? real - pool : pool - real));
}

void gp_format_safe_text(char *dst, const char *src, size_t cap)
{
	size_t i = 0;
	for (; i < cap - 1 && src[i]; i++) {
		unsigned char c = (unsigned char)src[i];
		dst[i] = c >= 0x20 && c < 0x7f ? (char)c : '?';
	}
	dst[i] = '\0';
}

void gp_format_safe_comm(char *dst, const struct gpupool_page *pg)
{
	gp_format_safe_text(dst, pg->comm, GPUPOOL_COMM_LEN);
}

void gp_format_rate_count(char *buf, size_t cap, double v)
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

void gp_format_age(char *buf, size_t cap, uint64_t ns)
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

void gp_format_rate_bytes(char *buf, size_t cap, double v)
{
	gp_format_bytes(buf, cap, v >= 18446744073709549568.0 ? UINT64_MAX : (uint64_t)(v + 0.5));
}

/* ---- GPUs ------------------------------------------------------------------------ */

bool gp_format_gpu_before(const struct gp_format_gpu *a, const struct gp_format_gpu *b)
{
	if ((a->index >= 0) != (b->index >= 0))
		return a->index >= 0;
	if (a->index != b->index)
		return a->index < b->index;
	return memcmp(a->uuid, b->uuid, GPUPOOL_UUID_LEN) < 0;
}

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
				gpus[k].index = -1;
				gpus[k].ordinal_ = -2;
				k++;
			}
			struct gp_format_gpu *u = &gpus[g];
			uint64_t held = gp_format_add_sat(s->reserved_bytes, s->unpooled_bytes);
			u->held_bytes = gp_format_add_sat(u->held_bytes, held);
			u->reclaimable_bytes = gp_format_add_sat(u->reclaimable_bytes, s->releasable_bytes);
			u->waiting_bytes = gp_format_add_sat(u->waiting_bytes, s->waiting_bytes);
			/* another user's process may say anything of itself, not of the GPU: its name
			 * only while no other process names it, its driver's figures never */
			if (s->device_name[0] && (!u->name[0] || (u->name_other_ && !procs[i].other_user))) {
				gp_format_safe_text(u->name, s->device_name, sizeof u->name);
				u->name_other_ = procs[i].other_user;
			}
			if (procs[i].gpu_index && procs[i].gpu_index[d] >= 0)
				u->index = procs[i].gpu_index[d];
			u->ordinal_ = u->ordinal_ == -2 || u->ordinal_ == s->device ? s->device : -1;
			if (u->last_pid != pg->pid) { /* two slots of one process on one GPU count once */
				u->processes++;
				u->last_pid = pg->pid;
			}
			/* the freshest look at the device among the trusted pages that have one; where
			 * none has, the freshest of other users' pages, said to be theirs (figures_other) */
			bool trusted = !procs[i].other_user;
			if (s->device_total_bytes &&
			    (trusted ? u->figures_other || !u->total_bytes || s->device_seen_ns >= u->seen_ns
				     : !u->total_bytes || (u->figures_other && s->device_seen_ns >= u->seen_ns))) {
				u->figures_other = !trusted;
				u->total_bytes = s->device_total_bytes;
				/* a page anyone may have written: free never above total */
				u->free_bytes = s->device_free_bytes < s->device_total_bytes ? s->device_free_bytes
											 : s->device_total_bytes;
				u->seen_ns = s->device_seen_ns;
			}
		}
	}
	/* no reader knew a GPU's index: the CUDA index its processes agree on, where no other GPU
	 * of the listing has (or falls back to) that number, so that two lines never share one */
	for (size_t i = 0; i < k; i++) {
		if (gpus[i].index >= 0 || gpus[i].ordinal_ < 0)
			continue;
		bool unique = true;
		for (size_t j = 0; j < k && unique; j++)
			unique = j == i || (gpus[j].index != gpus[i].ordinal_ &&
					    (gpus[j].index >= 0 || gpus[j].ordinal_ != gpus[i].ordinal_));
		if (unique)
			gpus[i].index = gpus[i].ordinal_;
	}
	/* by index (those without one last), then UUID, so that the lines keep their order
	 * between refreshes (insertion: few GPUs) */
	for (size_t i = 1; i < k; i++) {
		struct gp_format_gpu t = gpus[i];
		size_t j = i;
		for (; j > 0 && gp_format_gpu_before(&t, &gpus[j - 1]); j--)
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
