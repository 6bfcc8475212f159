/* The trace recorder (trace.h): fixed per-thread row buffers claimed from a static
 * registry, formatted to CSV under one file lock when full, at thread exit and at close,
 * into one block buffer written out when full: straight to the file, or through zlib (loaded
 * then, zlib_dl.h) for a .gz name; before each block the descriptor is checked to still be
 * the file opened (a program may close it and get the number back for a file of its own).
 * Lock order: a buffer's mutex, then the file mutex. No CUDA, no pool, no getenv; never
 * allocates per call. */
#include "trace.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "outfile.h"
#include "proc.h"
#include "zlib_dl.h"
#include "rank.h"

struct rec {
	uint64_t t_ns, size, dur_ns;
	uintptr_t stream, ptr;
	int32_t tid, err;
	int16_t dev;
	int8_t op;
};

struct tbuf {
	pthread_mutex_t mu;
	atomic_int used;  /* claimed by a live thread */
	unsigned gen;     /* generation it was claimed in, under mu; 0 = none */
	unsigned n;       /* rows in rows[] */
	struct rec rows[GP_TRACE_BUF_ROWS];
};

/* A formatted row is at most 20+13+10+5+16+15+16+20+11+9 bytes < 160. */
#define ROW_MAX 160
/* Rows formatted per write: the stack buffer is FMT_ROWS * ROW_MAX bytes. */
#define FMT_ROWS 64

static struct tbuf g_bufs[GP_TRACE_NBUF];
static pthread_mutex_t g_file_mu = PTHREAD_MUTEX_INITIALIZER;
static int g_fd = -1;                             /* under g_file_mu: the file, or -1 */
static dev_t g_dev;                               /* under g_file_mu: what g_fd was opened on */
static ino_t g_ino;
static char g_path[256];                          /* under g_file_mu: its name, for the log */
static gzFile g_gz;                               /* under g_file_mu: over g_fd for .gz, else NULL */
static gzFile g_gz_lost;                          /* a .gz whose descriptor was lost: kept, never freed */
static const struct gp_zlib *g_z;                 /* zlib, when g_gz */
static char *g_pbuf;                              /* under g_file_mu: text not written yet, or NULL */
static size_t g_plen;                             /* under g_file_mu: bytes in g_pbuf */
/* Text is written in blocks of this size, plain or through zlib: one write (and one check
 * of the descriptor, an fstat) per block rather than per chunk of rows. */
#define PLAIN_BUF (256 * 1024)
static int g_werr;                                /* under g_file_mu: last write error */
static uint64_t g_rows;                           /* under g_file_mu */
static atomic_bool g_on;
static atomic_uint g_gen;
static uint64_t g_start_ns; /* CLOCK_BOOTTIME ns at process start; set before g_on */
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static pthread_key_t g_key;
static bool g_key_ok;

static _Thread_local struct tbuf *tl_buf;
static _Thread_local unsigned tl_gen;
static _Thread_local int32_t tl_tid;

static uint64_t boottime_ns(void) { return gp_clock_ns(CLOCK_BOOTTIME); }

/* Process start as CLOCK_BOOTTIME ns (one clock tick of resolution); "now" when /proc is
 * unreadable. */
static uint64_t process_start_ns(void)
{
	uint64_t now = boottime_ns(), start;
	bool zombie;
	if (gp_proc_start((int)getpid(), &start, &zombie) != 0)
		return now;
	return start <= now ? start : now;
}

static char *put_dec(char *o, uint64_t v)
{
	char tmp[20];
	int n = 0;
	do {
		tmp[n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	while (n)
		*o++ = tmp[--n];
	return o;
}

static char *put_hex(char *o, uint64_t v)
{
	char tmp[16];
	int n = 0;
	do {
		tmp[n++] = "0123456789abcdef"[v & 15];
		v >>= 4;
	} while (v);
	while (n)
		*o++ = tmp[--n];
	return o;
}

static char *put_row(char *o, const struct rec *r)
{
	const char *name = gp_trace_op_name(r->op);
	o = put_dec(o, r->t_ns);
	*o++ = ',';
	size_t l = strlen(name);
	memcpy(o, name, l);
	o += l;
	*o++ = ',';
	o = put_dec(o, (uint64_t)(uint32_t)r->tid);
	*o++ = ',';
	o = put_dec(o, (uint64_t)(uint16_t)r->dev);
	*o++ = ',';
	o = put_hex(o, r->stream);
	*o++ = ',';
	o = put_dec(o, r->size);
	*o++ = ',';
	o = put_hex(o, r->ptr);
	*o++ = ',';
	o = put_dec(o, r->dur_ns);
	*o++ = ',';
	o = put_dec(o, (uint64_t)(uint32_t)r->err);
	*o++ = '\n';
	return o;
}

/* Writes all of text to the plain file: 0 or -errno. */
static int write_all(int fd, const char *text, size_t len)
{
	while (len) {
		ssize_t n = write(fd, text, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -EIO;
		text += n;
		len -= (size_t)n;
	}
	return 0;
}

/* Whether g_fd is still the file gp_trace_open opened. A program may close every descriptor
 * it did not open (daemons close 3-1023, some close_range everything) and then open a file of
 * its own, which gets the number back: writing there would put trace rows in the program's
 * file, closing it would close the program's. So before each block is written, and before
 * the descriptor is flushed or closed, fstat compares it with the device and inode opened.
 * On a mismatch the descriptor is forgotten (never written, flushed or closed again; a .gz's
 * zlib state is leaked, since freeing it would write and close), the text not yet written
 * is dropped, recording stops, and one warning says so; false then. Caller holds g_file_mu. */
static bool fd_ours_locked(void)
{
	struct stat st;
	if (g_fd < 0)
		return false;
	int r = fstat(g_fd, &st);
	if (r == 0 && st.st_dev == g_dev && st.st_ino == g_ino)
		return true;
	bool closed = r != 0;
	gp_log(GP_LOG_WARN, "trace: descriptor %d is no longer %s: the program closed it%s; tracing stops "
	       "(the trace keeps the rows written before%s)", g_fd, g_path,
	       closed ? "" : " and the number is now another file", g_gz ? "; a .gz one ends without its gzip trailer" : "");
	atomic_store(&g_on, false);
	g_fd = -1;
	if (g_gz)
		g_gz_lost = g_gz; /* gzclose would write and close the number */
	g_gz = NULL;
	free(g_pbuf); /* every user holds g_file_mu, and none reads it after this returns false */
	g_pbuf = NULL;
	g_plen = 0;
	if (!g_werr)
		g_werr = -EBADF;
	return false;
}

/* Writes len bytes of text to the file, plain or through zlib, if the descriptor is still
 * ours: 0, or a negative errno (-EBADF: it is not; recording has stopped). Caller holds
 * g_file_mu. */
static int file_write_locked(const char *text, size_t len, const char **why)
{
	if (!fd_ours_locked())
		return -EBADF;
	if (g_gz) {
		if (g_z->gzwrite(g_gz, text, (unsigned)len) != (int)len) {
			int zerr;
			*why = g_z->gzerror(g_gz, &zerr);
			if (zerr == Z_ERRNO)
				*why = strerror(errno);
			return -EIO;
		}
		return 0;
	}
	int rc = write_all(g_fd, text, len);
	if (rc)
		*why = strerror(-rc);
	return rc;
}

/* Writes the block buffer out: 0 or a negative errno. Caller holds g_file_mu. */
static int block_flush_locked(const char **why)
{
	int rc = g_plen ? file_write_locked(g_pbuf, g_plen, why) : 0;
	g_plen = 0;
	return rc;
}

/* Appends text to the file, through the block buffer when it has one: 0 or a negative errno. */
static int block_write_locked(const char *text, size_t len, const char **why)
{
	if (!g_pbuf)
		return file_write_locked(text, len, why);
	if (g_plen + len > PLAIN_BUF) {
		int rc = block_flush_locked(why);
		if (rc)
			return rc;
		if (len > PLAIN_BUF)
			return file_write_locked(text, len, why);
	}
	memcpy(g_pbuf + g_plen, text, len);
	g_plen += len;
	return 0;
}

/* A failed write: one warning, then quiet. A descriptor that is no longer ours said so itself. */
static void write_failed_locked(int rc, const char *why)
{
	if (rc == -EBADF && g_fd < 0)
		return;
	if (!g_werr)
		gp_log(GP_LOG_WARN, "trace: write failed: %s; rows are being lost", why ? why : strerror(-rc));
	g_werr = -EIO;
}

/* Writes formatted text. Caller holds g_file_mu. */
static void write_text_locked(const char *text, unsigned len, unsigned rows)
{
	if (g_fd < 0 || len == 0)
		return;
	const char *why = NULL;
	int rc = block_write_locked(text, len, &why);
	if (rc) {
		write_failed_locked(rc, why);
		return;
	}
	g_rows += rows;
}

/* Formats rows on the stack in chunks (so threads format in parallel) and writes each
 * chunk under the file lock. */
static void write_rows(const struct rec *rows, unsigned n)
{
	char text[FMT_ROWS * ROW_MAX];
	for (unsigned i = 0; i < n; i += FMT_ROWS) {
		unsigned k = n - i < FMT_ROWS ? n - i : FMT_ROWS;
		char *o = text;
		for (unsigned j = 0; j < k; j++)
			o = put_row(o, &rows[i + j]);
		gp_mutex_lock(&g_file_mu, GP_RANK_TRACE_FILE);
		write_text_locked(text, (unsigned)(o - text), k);
		gp_mutex_unlock(&g_file_mu, GP_RANK_TRACE_FILE);
	}
}

/* Flushes b. Caller holds b->mu. */
static void flush_buf(struct tbuf *b)
{
	if (b->n == 0)
		return;
	write_rows(b->rows, b->n);
	b->n = 0;
}

/* pthread key destructor: the thread exits; flush its rows and free the buffer. */
static void thread_exit(void *v)
{
	struct tbuf *b = v;
	if (b != tl_buf)
		return; /* close took it back; it may belong to another thread now */
	gp_mutex_lock(&b->mu, GP_RANK_TRACE_BUFFER);
	if (b->gen != 0 && b->gen == tl_gen) {
		flush_buf(b);
		b->gen = 0;
		atomic_store(&b->used, 0);
	}
	gp_mutex_unlock(&b->mu, GP_RANK_TRACE_BUFFER);
	tl_buf = NULL;
}

static void once_init(void)
{
	for (int i = 0; i < GP_TRACE_NBUF; i++)
		pthread_mutex_init(&g_bufs[i].mu, NULL);
	g_key_ok = pthread_key_create(&g_key, thread_exit) == 0;
}

/* This thread's buffer for generation gen, claiming one when needed; NULL when all are taken. */
static struct tbuf *get_buf(unsigned gen)
{
	if (tl_buf && tl_gen == gen)
		return tl_buf;
	tl_buf = NULL;
	for (int i = 0; i < GP_TRACE_NBUF; i++) {
		struct tbuf *b = &g_bufs[i];
		int expect = 0;
		if (atomic_load_explicit(&b->used, memory_order_relaxed) ||
		    !atomic_compare_exchange_strong(&b->used, &expect, 1))
			continue;
		gp_mutex_lock(&b->mu, GP_RANK_TRACE_BUFFER);
		b->gen = gen;
		b->n = 0;
		gp_mutex_unlock(&b->mu, GP_RANK_TRACE_BUFFER);
		tl_buf = b;
		tl_gen = gen;
		if (g_key_ok)
			pthread_setspecific(g_key, b);
		return b;
	}
	return NULL;
}

uint64_t gp_trace_now_ns(void) { return boottime_ns(); }

void gp_trace_record(int op, int dev, uintptr_t stream, size_t size, uintptr_t ptr,
		     uint64_t dur_ns, int err)
{
	if (atomic_load_explicit(&g_on, memory_order_acquire))
		gp_trace_record_at(op, dev, stream, size, ptr, boottime_ns(), dur_ns, err);
}

void gp_trace_record_at(int op, int dev, uintptr_t stream, size_t size, uintptr_t ptr,
			uint64_t end_ns, uint64_t dur_ns, int err)
{
	if (op < 0 || op > 3 || !atomic_load_explicit(&g_on, memory_order_acquire))
		return;
	unsigned gen = atomic_load_explicit(&g_gen, memory_order_acquire);
	if (!tl_tid)
		tl_tid = (int32_t)gettid();
	struct rec r = {
		.t_ns = end_ns - g_start_ns,
		.size = size,
		.dur_ns = dur_ns,
		.stream = stream,
		.ptr = ptr,
		.tid = tl_tid,
		.err = err,
		.dev = (int16_t)dev,
		.op = (int8_t)op,
	};
	struct tbuf *b = get_buf(gen);
	if (!b) { /* more threads than buffers: write through */
		write_rows(&r, 1);
		return;
	}
	gp_mutex_lock(&b->mu, GP_RANK_TRACE_BUFFER);
	if (b->gen == gen) { /* else close took the buffer back: the row is dropped */
		b->rows[b->n++] = r;
		if (b->n == GP_TRACE_BUF_ROWS)
			flush_buf(b);
	}
	gp_mutex_unlock(&b->mu, GP_RANK_TRACE_BUFFER);
}

int gp_trace_open(const char *path)
{
	if (!path || !*path)
		return -EINVAL;
	if (atomic_load(&g_on))
		return -EALREADY;
	pthread_once(&g_once, once_init);
	size_t l = strlen(path);
	bool gz = l > 3 && strcmp(path + l - 3, ".gz") == 0;
	const struct gp_zlib *z = gz ? gp_zlib_get() : NULL;
	if (gz && !z)
		return -ENOSYS;
	/* the trace shows what the program did and where its memory was: this user's only */
	int fd = gp_outfile_open(path, 0600);
	if (fd < 0)
		return fd;
	fd = gp_outfile_move_high(fd); /* a program that closes it anyway: fd_ours_locked */
	struct stat st;
	if (fstat(fd, &st) != 0) {
		int e = -errno;
		close(fd);
		return e;
	}
	gzFile f = NULL;
	if (gz) {
		f = z->gzdopen(fd, "wb1");
		if (!f) {
			close(fd);
			return -ENOMEM;
		}
		z->gzbuffer(f, 256 * 1024);
	}
	int hrc = f ? (z->gzwrite(f, GP_TRACE_HEADER "\n", sizeof GP_TRACE_HEADER) == (int)sizeof GP_TRACE_HEADER ? 0 : -EIO)
		    : write_all(fd, GP_TRACE_HEADER "\n", sizeof GP_TRACE_HEADER);
	if (hrc) {
		if (f)
			z->gzclose(f);
		else
			close(fd);
		return hrc;
	}
	g_start_ns = process_start_ns();
	gp_mutex_lock(&g_file_mu, GP_RANK_TRACE_FILE);
	g_gz = f;
	g_z = z;
	g_fd = fd;
	g_dev = st.st_dev;
	g_ino = st.st_ino;
	snprintf(g_path, sizeof g_path, "%s", path);
	g_pbuf = malloc(PLAIN_BUF); /* without it, text is written unbuffered */
	g_plen = 0;
	g_werr = 0;
	g_rows = 0;
	gp_mutex_unlock(&g_file_mu, GP_RANK_TRACE_FILE);
	unsigned gen = atomic_load(&g_gen) + 1;
	if (gen == 0)
		gen = 1;
	atomic_store(&g_gen, gen);
	atomic_store_explicit(&g_on, true, memory_order_release);
	return 0;
}

/* Every thread's buffered rows into the file; `retire`: the buffers are given up too (the
 * owner of each sees generation 0, not its own, and never writes there again). */
static void flush_bufs(bool retire)
{
	for (int i = 0; i < GP_TRACE_NBUF; i++) {
		struct tbuf *b = &g_bufs[i];
		if (!atomic_load(&b->used))
			continue;
		gp_mutex_lock(&b->mu, GP_RANK_TRACE_BUFFER);
		if (b->gen != 0)
			flush_buf(b);
		if (retire) {
			b->gen = 0;
			b->n = 0;
			atomic_store(&b->used, 0);
		}
		gp_mutex_unlock(&b->mu, GP_RANK_TRACE_BUFFER);
	}
}

int gp_trace_close(void)
{
	if (!atomic_exchange(&g_on, false))
		return 0;
	flush_bufs(true); /* every thread's rows, including threads that are still running */
	gp_mutex_lock(&g_file_mu, GP_RANK_TRACE_FILE);
	const char *why = NULL;
	int frc = block_flush_locked(&why);
	if (frc)
		write_failed_locked(frc, why);
	int rc = g_werr;
	if (g_fd >= 0 && fd_ours_locked()) {
		if (g_gz) {
			if (g_z->gzclose(g_gz) != Z_OK && !rc)
				rc = -EIO;
		} else if (close(g_fd) != 0 && !rc) {
			rc = -errno;
		}
	} else if (!rc) {
		rc = -EBADF;
	}
	free(g_pbuf);
	g_pbuf = NULL;
	g_plen = 0;
	g_gz = NULL;
	g_fd = -1;
	gp_mutex_unlock(&g_file_mu, GP_RANK_TRACE_FILE);
	return rc;
}

int gp_trace_flush(void)
{
	if (!atomic_load(&g_on))
		return -ENOENT;
	flush_bufs(false);
	gp_mutex_lock(&g_file_mu, GP_RANK_TRACE_FILE);
	const char *why = NULL;
	int rc = g_fd < 0 ? -ENOENT : g_werr ? -EIO : 0; /* -ENOENT: closed, or the descriptor was lost */
	if (g_fd >= 0) {
		int frc = block_flush_locked(&why);
		if (frc) {
			write_failed_locked(frc, why);
			rc = g_fd < 0 ? -ENOENT : -EIO;
		} else if (g_gz && fd_ours_locked() && g_z->gzflush(g_gz, Z_SYNC_FLUSH) != Z_OK) {
			rc = -EIO;
		}
		if (g_fd < 0)
			rc = -ENOENT;
	}
	gp_mutex_unlock(&g_file_mu, GP_RANK_TRACE_FILE);
	return rc;
}

void gp_trace_forget(void)
{
	/* The child has one thread; locks may be held by threads that no longer exist. */
	atomic_store(&g_on, false);
	pthread_mutex_init(&g_file_mu, NULL);
	/* the parent's gzFile or buffer holds unwritten parent data: writing it here would
	 * write it twice. Leak them (no free after fork), close only our fd copy, and only
	 * when it still is the trace (fstat is async-signal-safe): the parent may have closed
	 * it and given the number to a file of its own, which this child inherited. */
	if (g_fd >= 0) {
		struct stat st;
		if (fstat(g_fd, &st) == 0 && st.st_dev == g_dev && st.st_ino == g_ino)
			close(g_fd);
		g_gz = NULL;
		g_pbuf = NULL;
		g_plen = 0;
		g_fd = -1;
	}
	for (int i = 0; i < GP_TRACE_NBUF; i++) {
		pthread_mutex_init(&g_bufs[i].mu, NULL);
		g_bufs[i].n = 0;
		g_bufs[i].gen = 0;
		atomic_store(&g_bufs[i].used, 0);
	}
	tl_buf = NULL;
	tl_tid = 0;
	atomic_fetch_add(&g_gen, 1);
}

uint64_t gp_trace_rows_written(void)
{
	gp_mutex_lock(&g_file_mu, GP_RANK_TRACE_FILE);
	uint64_t n = g_rows;
	gp_mutex_unlock(&g_file_mu, GP_RANK_TRACE_FILE);
	return n;
}
