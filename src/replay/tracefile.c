/* The trace reader (tracefile.h): a line splitter over the file's bytes (plain, or gzip'd:
 * inflated here with zlib's stream API, so that what follows the gzip stream is seen and
 * refused), a strict field parser, and an optional min-heap window that restores t_ns
 * order, in bounded memory. Depends on zlib, libc and trace_format.h only. */
#include "tracefile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#define RDBUF (64 * 1024)
/* Raw bytes read from the file at a time (compressed ones for a .gz). */
#define INBUF (64 * 1024)
/* The name errors give standard input (path "-"). */

struct heap_ent {
	struct gp_trace_row row;
	uint64_t seq;
};

struct gp_tracefile {
	int fd;                    /* the file, or a duplicate of standard input; -1 when none */
	bool gzip;                 /* it starts with gzip's magic: zs inflates it */
	bool zinit;                /* zs is initialised (inflateEnd at close) */
	bool raw_eof;              /* read(2) said the file ends */
	bool member_end;           /* inflate finished a gzip member: what follows must be another
				    * member, or nothing */
	uint64_t raw_off;          /* bytes read from the file so far */
	z_stream zs;               /* next_in/avail_in: the unread bytes of in[], plain or not */
	unsigned char in[INBUF];
	char path[160];
	unsigned long line;
	int failed;                /* sticky negative errno */
	bool eof;                  /* the decoded text has ended */
	size_t beg, end;           /* unread bytes are buf[beg, end) */
	struct heap_ent *heap;     /* sort window, NULL when 0 */
	size_t window, nheap;
	uint64_t seq, ooo;
	uint64_t last_t;
	bool have_last;
	char err[640];
	char buf[RDBUF];
};

static void fmt(char *dst, size_t n, const char *f, ...) __attribute__((format(printf, 3, 4)));
static void fmt(char *dst, size_t n, const char *f, ...)
{
	va_list ap;
	if (!dst || n == 0)
		return;
	va_start(ap, f);
	vsnprintf(dst, n, f, ap);
	va_end(ap);
}

/* Field parsers: the whole field must be consumed; no signs, no spaces, no 0x. */
static int parse_dec(const char *s, size_t n, uint64_t max, uint64_t *out, const char *name,
		     char *why, size_t wl)
{
	uint64_t v = 0;
	if (n == 0) {
		fmt(why, wl, "field '%s' is empty", name);
		return -EINVAL;
	}
	if (s[0] == '-') {
		fmt(why, wl, "field '%s' is negative: '%.*s'", name, (int)(n > 40 ? 40 : n), s);
		return -EINVAL;
	}
	for (size_t i = 0; i < n; i++) {
		unsigned d = (unsigned char)s[i] - '0';
		if (d > 9) {
			fmt(why, wl, "field '%s' is not a decimal number: '%.*s'", name,
			    (int)(n > 40 ? 40 : n), s);
			return -EINVAL;
		}
		if (v > (UINT64_MAX - d) / 10 || v * 10 + d > max) {
			fmt(why, wl, "field '%s' is too large: '%.*s' (most %llu)", name,
			    (int)(n > 40 ? 40 : n), s, (unsigned long long)max);
			return -EINVAL;
		}
		v = v * 10 + d;
	}
	*out = v;
	return 0;
}

static int parse_hex(const char *s, size_t n, uint64_t *out, const char *name, char *why,
		     size_t wl)
{
	uint64_t v = 0;
	if (n == 0 || n > 16) {
		fmt(why, wl, "field '%s' must be 1 to 16 hex digits without 0x: '%.*s'", name,
		    (int)(n > 40 ? 40 : n), s);
		return -EINVAL;
	}
	for (size_t i = 0; i < n; i++) {
		int c = (unsigned char)s[i], d;
		if (c >= '0' && c <= '9')
			d = c - '0';
		else if (c >= 'a' && c <= 'f')
			d = c - 'a' + 10;
		else if (c >= 'A' && c <= 'F')
			d = c - 'A' + 10;
		else {
			fmt(why, wl, "field '%s' is not hex (no 0x prefix): '%.*s'", name, (int)n, s);
			return -EINVAL;
		}
		v = v << 4 | (uint64_t)d;
	}
	if (sizeof(uintptr_t) < 8 && v > UINTPTR_MAX) {
		fmt(why, wl, "field '%s' does not fit a pointer: '%.*s'", name, (int)n, s);
		return -EINVAL;
	}
	*out = v;
	return 0;
}

int gp_tracefile_parse_line(const char *line, size_t len, struct gp_trace_row *row,
			    char *why, size_t wl)
{
	const char *f[9];
	size_t fl[9];
	size_t nf = 0, start = 0;
	uint64_t v;
	int rc;

	if (len == 0) {
		fmt(why, wl, "empty line");
		return -EINVAL;
	}
	for (size_t i = 0; i <= len; i++) {
		if (i < len && line[i] == '\0') {
			fmt(why, wl, "NUL byte in line");
			return -EINVAL;
		}
		if (i == len || line[i] == ',') {
			if (nf == 9) {
				nf++;
				break;
			}
			f[nf] = line + start;
			fl[nf] = i - start;
			nf++;
			start = i + 1;
		}
	}
	if (nf != 9) {
		size_t commas = 0;
		for (size_t i = 0; i < len; i++)
			commas += line[i] == ',';
		fmt(why, wl, "expected 9 comma-separated columns (%s), found %zu", GP_TRACE_HEADER,
		    commas + 1);
		return -EINVAL;
	}
	memset(row, 0, sizeof *row);
	if ((rc = parse_dec(f[0], fl[0], UINT64_MAX, &row->t_ns, "t_ns", why, wl)))
		return rc;
	row->op = -1;
	for (int op = 0; op < 4; op++) {
		const char *name = gp_trace_op_name(op);
		if (strlen(name) == fl[1] && memcmp(name, f[1], fl[1]) == 0)
			row->op = op;
	}
	if (row->op < 0) {
		fmt(why, wl, "field 'op' must be malloc, free, malloc_async or free_async: '%.*s'",
		    (int)(fl[1] > 40 ? 40 : fl[1]), f[1]);
		return -EINVAL;
	}
	if ((rc = parse_dec(f[2], fl[2], INT32_MAX, &v, "tid", why, wl)))
		return rc;
	row->tid = (int32_t)v;
	if ((rc = parse_dec(f[3], fl[3], GP_TRACEFILE_DEV_MAX, &v, "dev", why, wl)))
		return rc;
	row->dev = (int32_t)v;
	if ((rc = parse_hex(f[4], fl[4], &v, "stream", why, wl)))
		return rc;
	row->stream = (uintptr_t)v;
	if ((rc = parse_dec(f[5], fl[5], GP_TRACEFILE_SIZE_MAX, &row->size, "size", why, wl)))
		return rc;
	if ((rc = parse_hex(f[6], fl[6], &v, "ptr", why, wl)))
		return rc;
	row->ptr = (uintptr_t)v;
	if ((rc = parse_dec(f[7], fl[7], UINT64_MAX, &row->dur_ns, "dur_ns", why, wl)))
		return rc;
	if ((rc = parse_dec(f[8], fl[8], INT32_MAX, &v, "err", why, wl)))
		return rc;
	row->err = (int32_t)v;
	if ((row->op == GP_TRACE_FREE || row->op == GP_TRACE_FREE_ASYNC) && row->size != 0) {
		fmt(why, wl, "field 'size' must be 0 on a %s row, found %llu", gp_trace_op_name(row->op),
		    (unsigned long long)row->size);
		return -EINVAL;
	}
	if ((row->op == GP_TRACE_MALLOC || row->op == GP_TRACE_FREE) && row->stream != 0) {
		fmt(why, wl, "field 'stream' must be 0 on a %s row", gp_trace_op_name(row->op));
		return -EINVAL;
	}
	return 0;
}

static int fail(struct gp_tracefile *tf, int rc, const char *f, ...) __attribute__((format(printf, 3, 4)));
static int fail(struct gp_tracefile *tf, int rc, const char *f, ...)
{
	char msg[GP_TRACEFILE_LINE_MAX / 2 + 96];
	va_list ap;
	va_start(ap, f);
	vsnprintf(msg, sizeof msg, f, ap);
	va_end(ap);
	snprintf(tf->err, sizeof tf->err, "%s:%lu: %s", tf->path, tf->line, msg);
	tf->failed = rc;
	return rc;
}

/* Formats why and returns rc. */
static int failed(int rc, char *why, size_t wl, const char *f, ...) __attribute__((format(printf, 4, 5)));
static int failed(int rc, char *why, size_t wl, const char *f, ...)
{
	va_list ap;
	va_start(ap, f);
	vsnprintf(why, wl, f, ap);
	va_end(ap);
	return rc;
}

/* read(2) without EINTR: the bytes read, 0 at the end, or -errno. */
static ssize_t raw_read(int fd, void *b, size_t n)
{
	for (;;) {
		ssize_t r = read(fd, b, n);
		if (r >= 0 || errno != EINTR)
			return r < 0 ? -errno : r;
	}
}

/* Reads until zs holds at least `want` (<= INBUF) unread bytes or the file ends, moving the
 * unread ones to the front of in[] first. 0 or -errno. */
static int fill_in(struct gp_tracefile *tf, size_t want)
{
	if (tf->zs.avail_in && tf->zs.next_in != tf->in)
		memmove(tf->in, tf->zs.next_in, tf->zs.avail_in);
	tf->zs.next_in = tf->in;
	while (tf->zs.avail_in < want && !tf->raw_eof) {
		ssize_t n = raw_read(tf->fd, tf->in + tf->zs.avail_in, INBUF - tf->zs.avail_in);
		if (n < 0)
			return (int)n;
		if (n == 0)
			tf->raw_eof = true;
		tf->zs.avail_in += (uInt)n;
		tf->raw_off += (uint64_t)n;
	}
	return 0;
}

/* Up to cap bytes of the trace's text into dst: *got, 0 at the end. Returns 0, or -EIO (a
 * read error; a gzip stream that is damaged, ends early, or is followed by bytes that are
 * not another gzip member) with what is wrong in why. */
static int src_read(struct gp_tracefile *tf, char *dst, size_t cap, size_t *got, char *why, size_t wl)
{
	int rc;
	*got = 0;
	if (!tf->gzip) {
		if (tf->zs.avail_in) { /* what open read to look for the magic */
			size_t n = tf->zs.avail_in < cap ? tf->zs.avail_in : cap;
			memcpy(dst, tf->zs.next_in, n);
			tf->zs.next_in += n;
			tf->zs.avail_in -= (uInt)n;
			*got = n;
			return 0;
		}
		if (tf->raw_eof)
			return 0;
		ssize_t n = raw_read(tf->fd, dst, cap);
		if (n < 0)
			return failed(-EIO, why, wl, "read error: %s", strerror((int)-n));
		tf->raw_eof = n == 0;
		*got = (size_t)n;
		return 0;
	}
	for (;;) {
		if (tf->member_end) {
			/* gzip allows members one after another (cat a.gz b.gz); anything else after
			 * a member is a damaged or appended file, not an early end of the trace */
			if ((rc = fill_in(tf, 2)))
				return failed(-EIO, why, wl, "read error: %s", strerror(-rc));
			if (tf->zs.avail_in == 0)
				return 0;
			if (tf->zs.avail_in < 2 || tf->zs.next_in[0] != 0x1f || tf->zs.next_in[1] != 0x8b)
				return failed(-EIO, why, wl, "bytes after the end of the gzip stream (at byte %llu of the "
					    "file), not another gzip member: a damaged or appended file",
					    (unsigned long long)(tf->raw_off - tf->zs.avail_in));
			if (inflateReset(&tf->zs) != Z_OK)
				return failed(-EIO, why, wl, "gzip error: cannot start the next member");
			tf->member_end = false;
		}
		if (tf->zs.avail_in == 0) {
			if ((rc = fill_in(tf, 1)))
				return failed(-EIO, why, wl, "read error: %s", strerror(-rc));
			if (tf->zs.avail_in == 0)
				return failed(-EIO, why, wl, "truncated gzip file: the file ends inside the compressed stream");
		}
		tf->zs.next_out = (unsigned char *)dst;
		tf->zs.avail_out = (uInt)cap;
		int zr = inflate(&tf->zs, Z_NO_FLUSH);
		*got = cap - tf->zs.avail_out;
		if (zr == Z_STREAM_END)
			tf->member_end = true;
		else if (zr != Z_OK && (zr != Z_BUF_ERROR || tf->zs.avail_in)) /* Z_BUF_ERROR: more input needed */
			return failed(-EIO, why, wl, "gzip error: %s", zr == Z_MEM_ERROR ? "out of memory"
								: tf->zs.msg ? tf->zs.msg : "corrupt data");
		if (*got)
			return 0;
	}
}

/* Next raw line into line and len (pointing into tf->buf, valid until the next call).
 * Returns 1, 0 at EOF, or a negative errno (sticky). */
static int read_line(struct gp_tracefile *tf, const char **line, size_t *len)
{
	for (;;) {
		char *nl = memchr(tf->buf + tf->beg, '\n', tf->end - tf->beg);
		if (nl) {
			size_t n = (size_t)(nl - (tf->buf + tf->beg));
			*line = tf->buf + tf->beg;
			tf->beg += n + 1;
			tf->line++;
			if (n > GP_TRACEFILE_LINE_MAX)
				return fail(tf, -EINVAL, "line longer than %d bytes",
					    GP_TRACEFILE_LINE_MAX);
			if (n && (*line)[n - 1] == '\r')
				n--;
			*len = n;
			return 1;
		}
		if (tf->end - tf->beg > GP_TRACEFILE_LINE_MAX) {
			tf->line++;
			return fail(tf, -EINVAL, "line longer than %d bytes", GP_TRACEFILE_LINE_MAX);
		}
		if (tf->eof) {
			if (tf->end == tf->beg)
				return 0;
			/* a last line without a newline */
			*line = tf->buf + tf->beg;
			*len = tf->end - tf->beg;
			tf->beg = tf->end;
			tf->line++;
			if (*len && (*line)[*len - 1] == '\r')
				(*len)--;
			return 1;
		}
		memmove(tf->buf, tf->buf + tf->beg, tf->end - tf->beg);
		tf->end -= tf->beg;
		tf->beg = 0;
		size_t got = 0;
		char why[200];
		int rc = src_read(tf, tf->buf + tf->end, RDBUF - tf->end, &got, why, sizeof why);
		if (rc) {
			tf->line++;
			return fail(tf, rc, "%s", why);
		}
		if (got == 0)
			tf->eof = true;
		tf->end += got;
	}
}

int gp_tracefile_open(struct gp_tracefile **out, const char *path, size_t sort_window,
		      char *err, size_t errlen)
{
	struct gp_tracefile *tf;
	const char *line;
	size_t len;
	int rc;

	*out = NULL;
	if (sort_window > GP_TRACEFILE_WINDOW_MAX) {
		fmt(err, errlen, "%s: sort window %zu is larger than %u rows", path, sort_window,
		    GP_TRACEFILE_WINDOW_MAX);
		return -EINVAL;
	}
	tf = calloc(1, sizeof *tf);
	if (!tf)
		return -ENOMEM;
	tf->fd = -1;
	snprintf(tf->path, sizeof tf->path, "%s", strcmp(path, "-") == 0 ? GP_TRACEFILE_STDIN : path);
	if (sort_window) {
		tf->heap = calloc(sort_window, sizeof *tf->heap);
		if (!tf->heap) {
			free(tf);
			return -ENOMEM;
		}
		tf->window = sort_window;
	}
	/* "-": standard input, duplicated so that close leaves the process's own alone */
	bool in = strcmp(path, "-") == 0;
	tf->fd = in ? fcntl(STDIN_FILENO, F_DUPFD_CLOEXEC, 0) : open(path, O_RDONLY | O_CLOEXEC);
	if (tf->fd < 0) {
		rc = -errno;
		fmt(err, errlen, "%s: %s", in ? GP_TRACEFILE_STDIN : path, strerror(errno));
		gp_tracefile_close(tf);
		return rc;
	}
	/* plain or gzip by the magic, not the name (standard input has none) */
	rc = fill_in(tf, 2);
	if (rc) {
		fmt(err, errlen, "%s:1: read error: %s", tf->path, strerror(-rc));
		gp_tracefile_close(tf);
		return -EIO;
	}
	if (tf->zs.avail_in >= 2 && tf->in[0] == 0x1f && tf->in[1] == 0x8b) {
		tf->gzip = true;
		if (inflateInit2(&tf->zs, 16 + MAX_WBITS) != Z_OK) { /* gzip only */
			fmt(err, errlen, "%s: cannot open (out of memory)", tf->path);
			gp_tracefile_close(tf);
			return -ENOMEM;
		}
		tf->zinit = true;
	}
	rc = read_line(tf, &line, &len);
	if (rc == 0) {
		tf->line = 1;
		rc = fail(tf, -EINVAL, "missing header (empty file), expected '%s'", GP_TRACE_HEADER);
	} else if (rc > 0 && (len != strlen(GP_TRACE_HEADER) || memcmp(line, GP_TRACE_HEADER, len))) {
		rc = fail(tf, -EINVAL, "missing or wrong header, expected '%s'", GP_TRACE_HEADER);
	}
	if (rc < 0) {
		fmt(err, errlen, "%s", tf->err);
		gp_tracefile_close(tf);
		return rc;
	}
	*out = tf;
	return 0;
}

static bool heap_less(const struct heap_ent *a, const struct heap_ent *b)
{
	return a->row.t_ns < b->row.t_ns || (a->row.t_ns == b->row.t_ns && a->seq < b->seq);
}

static void heap_push(struct gp_tracefile *tf, const struct gp_trace_row *r)
{
	size_t i = tf->nheap++;
	struct heap_ent e = {*r, tf->seq++};
	while (i > 0) {
		size_t p = (i - 1) / 2;
		if (!heap_less(&e, &tf->heap[p]))
			break;
		tf->heap[i] = tf->heap[p];
		i = p;
	}
	tf->heap[i] = e;
}

static void heap_pop(struct gp_tracefile *tf, struct gp_trace_row *r)
{
	*r = tf->heap[0].row;
	struct heap_ent e = tf->heap[--tf->nheap];
	size_t i = 0, n = tf->nheap;
	for (;;) {
		size_t c = 2 * i + 1;
		if (c >= n)
			break;
		if (c + 1 < n && heap_less(&tf->heap[c + 1], &tf->heap[c]))
			c++;
		if (!heap_less(&tf->heap[c], &e))
			break;
		tf->heap[i] = tf->heap[c];
		i = c;
	}
	if (n)
		tf->heap[i] = e;
}

static int next_raw(struct gp_tracefile *tf, struct gp_trace_row *row)
{
	const char *line;
	size_t len;
	char why[GP_TRACEFILE_LINE_MAX / 2];
	int rc = read_line(tf, &line, &len);
	if (rc <= 0)
		return rc;
	if (gp_tracefile_parse_line(line, len, row, why, sizeof why))
		return fail(tf, -EINVAL, "%s", why);
	row->line = tf->line;
	return 1;
}

int gp_tracefile_next(struct gp_tracefile *tf, struct gp_trace_row *row)
{
	int rc;
	if (tf->failed)
		return tf->failed;
	if (tf->window) {
		while (tf->nheap < tf->window) {
			struct gp_trace_row r;
			rc = next_raw(tf, &r);
			if (rc < 0)
				return rc;
			if (rc == 0)
				break;
			heap_push(tf, &r);
		}
		if (tf->nheap == 0)
			return 0;
		heap_pop(tf, row);
	} else {
		rc = next_raw(tf, row);
		if (rc <= 0)
			return rc;
	}
	if (tf->have_last && row->t_ns < tf->last_t)
		tf->ooo++;
	else
		tf->last_t = row->t_ns;
	tf->have_last = true;
	return 1;
}

const char *gp_tracefile_error(const struct gp_tracefile *tf)
{
	return tf->err;
}

unsigned long gp_tracefile_line(const struct gp_tracefile *tf)
{
	return tf->line;
}

uint64_t gp_tracefile_out_of_order(const struct gp_tracefile *tf)
{
	return tf->ooo;
}

void gp_tracefile_close(struct gp_tracefile *tf)
{
	if (!tf)
		return;
	if (tf->zinit)
		inflateEnd(&tf->zs);
	if (tf->fd >= 0)
		close(tf->fd);
	free(tf->heap);
	free(tf);
}
