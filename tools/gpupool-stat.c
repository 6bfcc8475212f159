/* gpupool-stat: the live reader of statistics pages ($GPUPOOL_SHM_DIR or /dev/shm), the view
 * of a GPU several users share. Lists processes under a line per GPU (its index as nvidia-smi
 * numbers it, from stat_gpus.c; its name and memory), shows one in full, prints JSON,
 * Prometheus or OpenMetrics text, serves /metrics over HTTP (stat_http.c), refreshes like top
 * (escape codes, colour, keys and a view that fits the window on a terminal only; allocation
 * rates, reclaims and decay between refreshes), asks one process or every process to release
 * its cache (waking each through share.h's channel), and removes pages of dead processes.
 * Other users' processes, whose pages it may not open, answer on the channel with their
 * figures (stat_remote.c); its own processes' answers freshen what their pages say. Everything
 * found in the directory is untrusted: a page whose file is not its process's user's is
 * skipped and counted (docs/security.md); a malformed file is one line on stderr. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <math.h>
#include <poll.h>
#include <pwd.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "format.h"
#include "group.h"
#include "proc.h"
#include "share.h"
#include "stat_events.h"
#include "stat_gpus.h"
#include "stat_http.h"
#include "stat_remote.h"
#include "statpage.h"

#define MAX_PAGES 4096        /* pages one listing keeps: live processes first */
#define MAX_PROBLEM_LINES 20 /* lines naming a malformed file or slot, per listing; the rest are counted */
/* One listing waits this long in all for slots found mid-update, shared among the pages
 * of live processes; a page of a dead one is never waited for. */
#define LISTING_PATIENCE_NS (1000 * 1000 * 1000ull)
/* How long one listing waits for the processes' answers on the channel, all of them asked at
 * once: each answers from its release thread within a millisecond or so; a stopped or
 * swamped one is not waited for longer. */
#define REMOTE_WAIT_NS (100 * 1000 * 1000ull)

enum mode { MODE_TABLE, MODE_JSON, MODE_PROMETHEUS, MODE_OPENMETRICS };

static sigjmp_buf bus_jmp;
static volatile sig_atomic_t in_read;
static volatile sig_atomic_t interrupted;
static volatile sig_atomic_t resized, suspended; /* SIGWINCH, SIGTSTP while watching a terminal */

/* A page truncated by its owner while mapped raises SIGBUS on access: skip that page. */
static void on_sigbus(int sig)
{
	if (in_read)
		siglongjmp(bus_jmp, 1);
	signal(sig, SIG_DFL);
	raise(sig);
}

static void on_sigint(int sig)
{
	(void)sig;
	interrupted = 1;
}

static void on_screen_signal(int sig)
{
	if (sig == SIGWINCH)
		resized = 1;
	else
		suspended = 1;
}

#define SHORT_USAGE                                                                           \
	"usage: gpupool-stat [PID] [-w] [--json | --prometheus | --openmetrics]\n"              \
	"                    [--watch SECONDS [--count N]] [--no-color]\n"                      \
	"       gpupool-stat --listen [ADDR:]PORT | --release [PID] | --clean\n"                   \
	"       gpupool-stat --group FILE\n"

static void usage(FILE *f)
{
	fputs(SHORT_USAGE, f);
	fputs("\n"
	      "A line per GPU, then a row per process and GPU, by GPU and memory held;\n"
	      "other users' processes answer on gpupool's channel. HELD: memory taken\n"
	      "from the GPU; USED: in live allocations; IDLE: in whole free segments,\n"
	      "what --release (or a process short of memory) gets back now; CACHED: HELD\n"
	      "not in use; WAITING: what an allocation waits for. GPU: nvidia-smi's index.\n"
	      "\n"
	      "  PID              every figure of one process, with dates and ages\n"
	      "  -w, --wide       every column (else those that fit the terminal's width,\n"
	      "                   or $COLUMNS when the output is not a terminal, else 80)\n"
	      "  --json           every figure, raw; null where not known (docs/json.md)\n"
	      "  --prometheus     Prometheus text; --openmetrics; --listen serves /metrics\n"
	      "  --watch SECONDS  refresh like top (q quits); --count N: stop after N\n"
	      "  --no-color       no colour (NO_COLOR too); colour is for terminals only\n"
	      "  --release [PID]  ask your processes to give idle memory back (--timeout S)\n"
	      "  --clean          remove the pages of processes that are gone\n"
	      "  --group FILE     a group file's budget per GPU, and its members\n"
	      "  -h, --help       this text; -V, --version: gpupool's version\n"
	      "Exit status 0; 1 when PID has no page or a release is not answered; 2 on bad\n"
	      "usage. More: man gpupool-stat, docs/stats.md.\n",
	      f);
}

/* Bad usage: one line naming what is wrong, one pointing at --help, exit status 2. */
static int bad_usage(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int bad_usage(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fputs("gpupool-stat: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	fputs("Try 'gpupool-stat --help' for more information.\n", stderr);
	return 2;
}

static int parse_pid(const char *s)
{
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (errno || end == s || *end || v <= 0 || v > 0x7fffffff)
		return -1;
	return (int)v;
}

static double parse_seconds(const char *s, double lo, double hi)
{
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	if (errno || end == s || *end || !isfinite(v) || v < lo || v > hi)
		return -1;
	return v;
}

static int by_pid(const void *a, const void *b)
{
	const struct gp_statpage_info *x = a, *y = b;
	return (x->pid > y->pid) - (x->pid < y->pid);
}

/* One listing: the pages read, and the pages left out by reason. */
struct listing {
	struct gp_statpage_info *infos; /* MAX_PAGES */
	int n;
	unsigned long skipped[GP_SKIP_COUNT];
	unsigned long named[GP_SKIP_COUNT]; /* of those, named in a line of their own */
	unsigned long unsettled, unsettled_named; /* slots that never settled */
	int lines;                                /* problem lines printed */
};

/* Prints one problem line while the listing has lines left; false when it has none. */
static bool problem_line(struct listing *l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static bool problem_line(struct listing *l, const char *fmt, ...)
{
	if (l->lines >= MAX_PROBLEM_LINES)
		return false;
	l->lines++;
	va_list ap;
	va_start(ap, fmt);
	fputs("gpupool-stat: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	return true;
}

static void skip(struct listing *l, int rc, const char *why)
{
	enum gp_statpage_skip r = gp_statpage_skip_of(rc);
	l->skipped[r]++;
	if (r == GP_SKIP_INVALID && problem_line(l, "%s", why))
		l->named[r]++;
}

/* One line on stderr per reason, for the pages not named on a line of their own. */
static void report_skips(const struct listing *l)
{
	for (int r = 0; r < GP_SKIP_COUNT; r++) {
		unsigned long k = l->skipped[r] - l->named[r];
		if (k)
			fprintf(stderr, "gpupool-stat: skipped %lu %spage%s: %s\n", k, l->named[r] ? "more " : "",
				k == 1 ? "" : "s", gp_statpage_skip_text((enum gp_statpage_skip)r));
	}
	unsigned long k = l->unsettled - l->unsettled_named;
	if (k)
		fprintf(stderr, "gpupool-stat: %lu %sslot%s inconsistent (writer died mid-update?)\n", k,
			l->unsettled_named ? "more " : "", k == 1 ? "" : "s");
}

/* How long the next page may wait for its slots: an equal share of what is left of the
 * listing's patience among the live pages still to read, GP_STATPAGE_PATIENCE_NS at most. */
static uint64_t page_deadline(uint64_t end, int live_left)
{
	uint64_t now = gp_clock_ns(CLOCK_MONOTONIC);
	uint64_t share = now < end && live_left > 0 ? (end - now) / (uint64_t)live_left : 0;
	return now + (share < GP_STATPAGE_PATIENCE_NS ? share : GP_STATPAGE_PATIENCE_NS);
}

/* gp_statpage_read, with SIGBUS (the file truncated while mapped) made a skip. */
static int read_guarded(int dfd, const char *name, uid_t uid, uint64_t deadline, struct gp_statpage_info *out,
			char *why, size_t wl)
{
	int rc;
	why[0] = '\0';
	in_read = 1;
	if (sigsetjmp(bus_jmp, 1) == 0) {
		rc = gp_statpage_read(dfd, name, uid, deadline, out, why, wl);
	} else {
		rc = -EFAULT;
		snprintf(why, wl, "skipped: %s changed size while being read", name);
	}
	in_read = 0;
	return rc;
}

/* The machine's GPUs (stat_gpus.h), read once: their indexes as nvidia-smi numbers them. */
static struct gp_stat_gpu machine[GP_STAT_GPUS_MAX];
static int nmachine = -1;

static void machine_read(void)
{
	if (nmachine < 0)
		nmachine = gp_stat_gpus_read(GP_STAT_GPUS_DIR, machine, GP_STAT_GPUS_MAX);
}

/* The name of user `uid` (getpwuid_r), remembered for the run; NULL when it has none. */
static const char *user_name(uid_t uid)
{
	static struct {
		uid_t uid;
		char name[33];
		bool found;
	} cache[64];
	static unsigned n;
	for (unsigned i = 0; i < n; i++)
		if (cache[i].uid == uid)
			return cache[i].found ? cache[i].name : NULL;
	struct passwd pw, *res = NULL;
	char buf[4096];
	unsigned slot = n < sizeof cache / sizeof cache[0] ? n++ : (unsigned)(uid % (sizeof cache / sizeof cache[0]));
	cache[slot].uid = uid;
	cache[slot].found = getpwuid_r(uid, &pw, buf, sizeof buf, &res) == 0 && res && res->pw_name;
	if (cache[slot].found)
		snprintf(cache[slot].name, sizeof cache[slot].name, "%s", res->pw_name);
	return cache[slot].found ? cache[slot].name : NULL;
}

/* Asks the live processes of l (the pages read, and the pids of other users' pages it could
 * not read) for their status on the channel: an answer freshens a page's figures (the whole
 * free segments and the driver's free memory, counted now), or becomes the listing's entry of
 * another user's process (its skip uncounted). want_pid > 0: only that process. */
static void ask_processes(struct listing *l, const int *others, int nothers)
{
	int n = 0, own = 0;
	struct gp_stat_remote *r = calloc((size_t)l->n + (size_t)nothers + 1, sizeof *r);
	if (!r)
		return;
	for (int i = 0; i < l->n; i++)
		if (!l->infos[i].stale)
			r[n++].pid = l->infos[i].pid;
	own = n;
	for (int i = 0; i < nothers; i++)
		r[n++].pid = others[i];
	if (n == 0 || gp_stat_remote_ask(r, n, gp_clock_ns(CLOCK_MONOTONIC) + REMOTE_WAIT_NS) <= 0) {
		free(r);
		return;
	}
	for (int i = 0, k = 0; i < own; i++) {
		while (k < l->n && l->infos[k].pid != r[i].pid)
			k++;
		/* not from the page's user: its pid now names another user's process */
		if (k < l->n && r[i].answered && r[i].uid == l->infos[k].owner)
			gp_stat_remote_overlay(&r[i], &l->infos[k].page);
	}
	for (int i = own; i < n; i++) {
		if (!r[i].answered || l->n >= MAX_PAGES)
			continue;
		struct gp_statpage_info *in = &l->infos[l->n++];
		memset(in, 0, sizeof *in);
		snprintf(in->name, sizeof in->name, "%s%d", GP_STATPAGE_NAME, r[i].pid);
		in->pid = r[i].pid;
		in->owner = r[i].uid;
		in->remote = true;
		in->read_ns = gp_clock_ns(CLOCK_MONOTONIC);
		gp_stat_remote_page(&r[i], &in->page);
		/* listed after all: not a page left out */
		if (l->skipped[GP_SKIP_OTHER_USER])
			l->skipped[GP_SKIP_OTHER_USER]--;
	}
	free(r);
}

/* Reads the pages of the directory into l (sorted by pid), live processes first and at
 * most MAX_PAGES of them, within about LISTING_PATIENCE_NS of waiting; malformed files go
 * to stderr, every page left out is counted. Then every live process is asked on the
 * channel (ask_processes): other users' processes come in with what they answer. With
 * want_pid > 0 only that page is read. Returns the count, or -1 when the directory cannot be
 * read. */
static int load(const char *dir, int want_pid, struct listing *l)
{
	*l = (struct listing){.infos = l->infos};
	int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	struct gp_statpage_name *names = NULL;
	int count = dfd < 0 ? -errno : gp_statpage_scan(dfd, want_pid, &names);
	if (count < 0) {
		fprintf(stderr, "gpupool-stat: %s: %s\n", dir, strerror(-count));
		if (dfd >= 0)
			close(dfd);
		return -1;
	}
	int live = 0, n = 0, nothers = 0;
	while (live < count && names[live].live)
		live++;
	int *others = malloc(sizeof *others * (size_t)(live ? live : 1));
	uint64_t end = gp_clock_ns(CLOCK_MONOTONIC) + LISTING_PATIENCE_NS;
	uid_t uid = geteuid();
	static char why[512];
	struct gp_statpage_info *arr = l->infos;
	for (int i = 0; i < count; i++) {
		if (n == MAX_PAGES) {
			l->skipped[GP_SKIP_LIMIT] += (unsigned long)(count - i);
			break;
		}
		char name[32];
		snprintf(name, sizeof name, "%s%d", GP_STATPAGE_NAME, names[i].pid);
		uint64_t deadline = page_deadline(end, live - i);
		int rc = read_guarded(dfd, name, uid, deadline, &arr[n], why, sizeof why);
		if (rc != 0) {
			/* another user's live process: it may answer on the channel */
			if (rc == -EACCES && names[i].live && others)
				others[nothers++] = names[i].pid;
			skip(l, rc, why);
			continue;
		}
		for (int d = 0; d < GPUPOOL_MAX_DEVICES; d++) {
			if (!(arr[n].inconsistent & (1u << d)))
				continue;
			l->unsettled++;
			if (problem_line(l, "%s: device %d: inconsistent (writer died mid-update?)", name,
					 (int)arr[n].page.dev[d].device))
				l->unsettled_named++;
		}
		n++;
	}
	free(names);
	close(dfd);
	l->n = n;
	ask_processes(l, others, nothers);
	free(others);
	qsort(arr, (size_t)l->n, sizeof *arr, by_pid);
	return l->n;
}

/* At most this many event lines under a view on a terminal (--watch). */
#define MAX_EVENT_LINES 8

/* How the text views are drawn: colour (a terminal, no --no-color, no NO_COLOR). */
static bool use_color;

/* width: the table's bound in characters (0: every column); rows: the table's or the PID
 * view's bound in lines (0: none); rates: the listing's, one row of slots per page, or NULL;
 * ev: the events under the table or PID view (--watch), or NULL, of which the newest ev_max
 * are shown. The table has the GPU lines above it and the legend under it, and in a box they
 * and the events take their lines from the table's, leaving it three at least (else they are
 * left out). A listing with no process at all is one line, "no gpupool processes". */
static void render(struct gp_format_out *o, enum mode mode, int pid, unsigned width, unsigned rows,
		   const struct listing *l, struct gp_format_rate (*rates)[GPUPOOL_MAX_DEVICES],
		   const struct gp_stat_events *ev, unsigned ev_max)
{
	static struct gp_format_proc procs[MAX_PAGES];
	static int gidx[MAX_PAGES][GPUPOOL_MAX_DEVICES];
	static struct gp_format_row scratch[MAX_PAGES * GPUPOOL_MAX_DEVICES];
	struct gp_format_skip skips[GP_SKIP_COUNT];
	const struct gp_statpage_info *infos = l->infos;
	int n = l->n;
	uid_t me = geteuid();
	machine_read();
	for (int i = 0; i < n; i++) {
		const struct gp_statpage_info *in = &infos[i];
		for (int d = 0; d < GPUPOOL_MAX_DEVICES; d++)
			gidx[i][d] = gp_stat_gpus_index(machine, nmachine, (const unsigned char *)in->page.dev[d].uuid);
		procs[i] = (struct gp_format_proc){.page = &in->page,
						   .stale = in->stale,
						   .inconsistent = in->inconsistent,
						   .rates = rates ? rates[i] : NULL,
						   .remote = in->remote,
						   .uid_known = true,
						   .uid = (uint32_t)in->owner,
						   .user = user_name(in->owner),
						   /* its word about itself, not about the GPU */
						   .other_user = in->owner != me && in->owner != 0,
						   .gpu_index = gidx[i]};
	}
	for (int r = 0; r < GP_SKIP_COUNT; r++)
		skips[r] = (struct gp_format_skip){gp_statpage_skip_label((enum gp_statpage_skip)r), l->skipped[r]};
	if (mode == MODE_JSON) {
		gp_format_json_listing(o, procs, (size_t)n, skips, GP_SKIP_COUNT);
		return;
	}
	if (mode == MODE_PROMETHEUS || mode == MODE_OPENMETRICS) {
		gp_format_prometheus(o, procs, (size_t)n, skips, GP_SKIP_COUNT, GP_VERSION, mode == MODE_OPENMETRICS);
		return;
	}
	struct gp_format_view v = {.width = width,
				   .now_ns = gp_clock_ns(CLOCK_REALTIME),
				   .color = use_color,
				   .cut = rows != 0,
				   .scratch = scratch,
				   .scratch_cap = sizeof scratch / sizeof scratch[0]};
	if (pid <= 0 && n == 0) {
		gp_format_none(o);
		return;
	}
	/* the lines around the view: GPUs above the table and the legend under it, events (and a
	 * blank line) below */
	unsigned gpu_lines = 0, legend = pid <= 0 ? 1 : 0, ev_lines = ev ? (ev->nev < ev_max ? ev->nev : ev_max) : 0;
	if (pid <= 0) {
		struct gp_format_gpu gpus[GP_FORMAT_MAX_GPUS];
		size_t left = 0, k = gp_format_gpus(procs, (size_t)n, gpus, GP_FORMAT_MAX_GPUS, &left);
		gpu_lines = k ? (unsigned)k + 2 + (left ? 1 : 0) : 0;
	}
	if (rows) {
		if (gpu_lines + 3 > rows)
			gpu_lines = 0;
		if (gpu_lines + legend + 3 > rows)
			legend = 0;
		unsigned room = rows - gpu_lines - legend;
		ev_lines = room > 4 ? (ev_lines < room - 4 ? ev_lines : room - 4) : 0;
	}
	v.rows = rows ? rows - gpu_lines - legend - (ev_lines ? ev_lines + 1 : 0) : 0;
	if (gpu_lines)
		gp_format_gpu_lines_view(o, procs, (size_t)n, &v);
	if (pid > 0) {
		v.width = rows ? width : 0;
		gp_format_detail_view(o, &procs[0], &v);
	} else {
		gp_format_table_view(o, procs, (size_t)n, &v);
	}
	if (legend)
		gp_format_legend(o, &v);
	if (ev_lines) {
		gp_format_printf(o, "\n");
		gp_stat_events_print(ev, o, ev_lines, rows ? width : 0);
	}
}

/* The terminal's lines (TIOCGWINSZ on stdout), 0 when not known. */
static unsigned out_rows(void)
{
	struct winsize ws;
	return isatty(STDOUT_FILENO) && ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 ? ws.ws_row : 0;
}

/* The width the table fits in: the terminal's (TIOCGWINSZ on stdout), else $COLUMNS, else 80. */
static unsigned out_width(void)
{
	struct winsize ws;
	if (isatty(STDOUT_FILENO) && ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0)
		return ws.ws_col;
	const char *c = getenv("COLUMNS");
	char *end;
	long v = c && *c ? strtol(c, &end, 10) : 0;
	return v > 0 && v <= 100000 && !*end ? (unsigned)v : 80;
}

/* Escape codes of a full-screen --watch on a terminal (xterm's; every terminal emulator in
 * use has them): the alternate screen with the cursor hidden, and back. */
#define SCREEN_ENTER "\033[?1049h\033[?25l"
#define SCREEN_LEAVE "\033[?25h\033[?1049l"
#define SCREEN_CLEAR "\033[H\033[2J"

/* ---- --watch: the terminal, the keys, the rates ----------------------------------- */

/* The modes of the terminal on stdin as --watch found them, given back however it ends. */
static struct termios saved_tty;
static bool tty_changed; /* saved_tty is to be given back */
static bool keys_read;   /* stdin is read for keys */

/* Keys from stdin, when it is a terminal of which this process is in the foreground: no
 * echo, no line buffering, so that q is read at once; ISIG stays, so Ctrl-C and Ctrl-Z still
 * signal. Off: the terminal's modes as they were. */
static void tty_keys(bool on)
{
	if (on && !tty_changed) {
		if (!isatty(STDIN_FILENO) || tcgetpgrp(STDIN_FILENO) != getpgrp() ||
		    tcgetattr(STDIN_FILENO, &saved_tty) != 0)
			return;
		struct termios t = saved_tty;
		t.c_lflag &= ~(tcflag_t)(ICANON | ECHO);
		t.c_cc[VMIN] = 1;
		t.c_cc[VTIME] = 0;
		tty_changed = keys_read = tcsetattr(STDIN_FILENO, TCSANOW, &t) == 0;
	} else if (!on && tty_changed) {
		tcsetattr(STDIN_FILENO, TCSANOW, &saved_tty);
		tty_changed = keys_read = false;
	}
}

/* The alternate screen and the keys, on or off. */
static void screen_mode(bool on)
{
	fputs(on ? SCREEN_ENTER : SCREEN_LEAVE, stdout);
	fflush(stdout);
	tty_keys(on);
}

enum wake { WAKE_TIME, WAKE_QUIT, WAKE_REDRAW, WAKE_SUSPEND };

/* Waits `seconds` for the next frame, the watch's signals unblocked only while waiting (so
 * none comes between a look at the flags and the wait), reading keys when they are on: q or
 * Q quits, as SIGINT and SIGTERM do; SIGWINCH redraws at once; SIGTSTP (Ctrl-Z) suspends. */
static enum wake wait_frame(double seconds, const sigset_t *unblocked)
{
	uint64_t end = gp_clock_ns(CLOCK_MONOTONIC) + (uint64_t)(seconds * 1e9);
	for (;;) {
		if (interrupted)
			return WAKE_QUIT;
		if (suspended) {
			suspended = 0;
			return WAKE_SUSPEND;
		}
		if (resized) {
			resized = 0;
			return WAKE_REDRAW;
		}
		uint64_t now = gp_clock_ns(CLOCK_MONOTONIC);
		if (now >= end)
			return WAKE_TIME;
		struct timespec ts = {(time_t)((end - now) / 1000000000u), (long)((end - now) % 1000000000u)};
		struct pollfd pf = {STDIN_FILENO, POLLIN, 0};
		if (ppoll(keys_read ? &pf : NULL, keys_read ? 1 : 0, &ts, unblocked) <= 0 || !pf.revents)
			continue;
		char buf[64];
		ssize_t k = read(STDIN_FILENO, buf, sizeof buf);
		if (k > 0 && (memchr(buf, 'q', (size_t)k) || memchr(buf, 'Q', (size_t)k)))
			return WAKE_QUIT;
		if (k == 0 || (k < 0 && errno != EINTR && errno != EAGAIN))
			keys_read = false; /* the terminal is gone: wait for signals only */
	}
}

/* What a slot's counters were at the last refresh, for the next one's rates. */
struct seen {
	int pid;
	uint64_t start_ns; /* with the pid, the process */
	int32_t device;
	uint64_t allocs, bytes, read_ns;
};

static int seen_by_pid(const void *key, const void *elem)
{
	int pid = *(const int *)key, other = ((const struct seen *)elem)->pid;
	return (pid > other) - (pid < other);
}

/* The rates of every slot of l since the last call (none known the first time, for a new
 * process or device, or a counter that went back), and l remembered for the next call.
 * rates: l->n rows. Returns false when out of memory (no rates then). */
static bool watch_rates(const struct listing *l, struct gp_format_rate (*rates)[GPUPOOL_MAX_DEVICES])
{
	static struct seen *seen;
	static size_t nseen;
	size_t slots = 0;
	for (int i = 0; i < l->n; i++) {
		const struct gp_statpage_info *in = &l->infos[i];
		for (uint32_t d = 0; d < GPUPOOL_MAX_DEVICES; d++) {
			const struct gpupool_device_stats *s = &in->page.dev[d];
			struct gp_format_rate *r = &rates[i][d];
			*r = (struct gp_format_rate){0};
			if (d >= in->page.ndevices || (in->inconsistent & (1u << d)) || !s->active || in->remote)
				continue; /* an answer on the channel has no counters */
			slots++;
			/* the listing is sorted by pid: so is seen */
			const struct seen *f = nseen ? bsearch(&in->pid, seen, nseen, sizeof *seen, seen_by_pid) : NULL;
			while (f && f > seen && f[-1].pid == in->pid)
				f--;
			for (; f && f < seen + nseen && f->pid == in->pid; f++) {
				if (f->start_ns != in->page.start_time_ns || f->device != s->device)
					continue;
				if (in->read_ns > f->read_ns && s->allocs >= f->allocs && s->requested_bytes_total >= f->bytes) {
					double dt = (double)(in->read_ns - f->read_ns) / 1e9;
					*r = (struct gp_format_rate){true, (double)(s->allocs - f->allocs) / dt,
								     (double)(s->requested_bytes_total - f->bytes) / dt};
				}
				break;
			}
		}
	}
	struct seen *next = slots ? malloc(slots * sizeof *next) : NULL;
	if (slots && !next)
		return false;
	size_t k = 0;
	for (int i = 0; i < l->n; i++) {
		const struct gp_statpage_info *in = &l->infos[i];
		for (uint32_t d = 0; d < in->page.ndevices && d < GPUPOOL_MAX_DEVICES; d++) {
			const struct gpupool_device_stats *s = &in->page.dev[d];
			if (!(in->inconsistent & (1u << d)) && s->active && !in->remote)
				next[k++] = (struct seen){in->pid, in->page.start_time_ns, s->device, s->allocs,
							  s->requested_bytes_total, in->read_ns};
		}
	}
	free(seen);
	seen = next;
	nseen = k;
	return true;
}

/* The events of l since the last refresh (stat_events.h), into e; wall_ns: CLOCK_REALTIME
 * before l was read. Out of memory: none this time, and the next refresh starts afresh. */
static void watch_events(struct gp_stat_events *e, const struct listing *l, uint64_t wall_ns)
{
	static struct gp_format_proc procs[MAX_PAGES];
	for (int i = 0; i < l->n; i++)
		procs[i] = (struct gp_format_proc){.page = &l->infos[i].page,
						   .stale = l->infos[i].stale,
						   .inconsistent = l->infos[i].inconsistent,
						   .remote = l->infos[i].remote};
	(void)gp_stat_events_update(e, procs, (size_t)l->n, wall_ns, gp_clock_ns(CLOCK_MONOTONIC));
}

/* Prints the listing (or one process) once, or every `watch` seconds `count` times (0: until
 * q, SIGINT or SIGTERM). Escape codes, keys and a view fitted to the window only for the
 * table and detail views on a terminal; the terminal is given back its screen and its
 * modes however the loop ends. wide: every column. */
static int show(enum mode mode, int pid, double watch, long count, bool wide)
{
	const char *dir = gp_statpage_dir();
	static struct listing l;
	l.infos = calloc(MAX_PAGES, sizeof *l.infos);
	struct gp_format_out *o = malloc(sizeof *o);
	bool text = mode == MODE_TABLE;
	struct gp_format_rate (*rates)[GPUPOOL_MAX_DEVICES] =
		watch > 0 && text ? calloc(MAX_PAGES, sizeof *rates) : NULL;
	struct gp_stat_events *events = watch > 0 && text ? calloc(1, sizeof *events) : NULL;
	if (!l.infos || !o || (watch > 0 && text && (!rates || !events))) {
		fprintf(stderr, "gpupool-stat: out of memory\n");
		free(l.infos);
		free(o);
		free(rates);
		free(events);
		return 1;
	}
	bool screen = watch > 0 && text && isatty(STDOUT_FILENO);
	int status = 0;
	char last_err[512] = "";
	/* the signals that end or change a watch come only while it waits (wait_frame) */
	sigset_t watched, unblocked;
	sigemptyset(&watched);
	sigaddset(&watched, SIGINT);
	sigaddset(&watched, SIGTERM);
	if (screen) {
		struct sigaction sa = {0};
		sa.sa_handler = on_screen_signal;
		sigaction(SIGWINCH, &sa, NULL);
		sigaction(SIGTSTP, &sa, NULL);
		sigaddset(&watched, SIGWINCH);
		sigaddset(&watched, SIGTSTP);
		screen_mode(true);
	}
	sigprocmask(SIG_BLOCK, &watched, &unblocked);
	for (long round = 0; !interrupted;) {
		/* before the read: a page made after it is new to the watch (stat_events.h) */
		uint64_t wall_ns = gp_clock_ns(CLOCK_REALTIME);
		int n = load(dir, pid, &l);
		if (text)
			report_skips(&l);
		gp_format_to_fd(o, STDOUT_FILENO);
		unsigned width = wide ? 0 : out_width(), rows = 0;
		if (watch > 0 && text) {
			time_t now = time(NULL);
			char ts[32], head[1024];
			strftime(ts, sizeof ts, screen ? "%H:%M:%S" : "%Y-%m-%d %H:%M:%S", localtime(&now));
			if (screen) {
				snprintf(head, sizeof head, "gpupool-stat  %s  every %gs  %s  (%s to quit)", dir, watch, ts,
					 keys_read ? "q" : "Ctrl-C");
				unsigned w = out_width();
				if (w && w < sizeof head)
					head[w] = '\0';
				/* the title, a blank line, and the view above the last line: a newline
				 * there would scroll the title away */
				unsigned lines = out_rows();
				rows = lines > 3 ? lines - 3 : lines ? 1 : 0;
				gp_format_printf(o, SCREEN_CLEAR "%s\n\n", head);
			} else {
				gp_format_printf(o, "%s-- gpupool-stat  %s  every %gs  %s\n", round ? "\n" : "", dir, watch,
						 ts);
			}
		}
		status = n < 0 ? 1 : 0;
		if (n < 0)
			snprintf(last_err, sizeof last_err, "%s cannot be read", dir);
		if (n == 0 && pid > 0) {
			snprintf(last_err, sizeof last_err, "no readable page for pid %d in %s", pid, dir);
			if (screen)
				gp_format_printf(o, "%s\n", last_err);
			else
				fprintf(stderr, "gpupool-stat: %s\n", last_err);
			status = 1;
		}
		bool have_rates = rates && n >= 0 && watch_rates(&l, rates);
		if (events && n >= 0)
			watch_events(events, &l, wall_ns);
		/* on a terminal the last lines stay in view a while; appended frames (a log) show
		 * each line once, in the frame that found it */
		unsigned ev_max = !events ? 0 : screen ? MAX_EVENT_LINES : gp_stat_events_fresh(events);
		if (n >= 0 && (n > 0 || pid <= 0 || !text))
			render(o, mode, pid, width, rows, &l, have_rates ? rates : NULL, events, ev_max);
		errno = 0;
		if (gp_format_flush(o) != 0) {
			/* a reader that stopped reading (| head) is no error: stop quietly */
			if (errno != EPIPE && !interrupted) {
				snprintf(last_err, sizeof last_err, "writing to stdout failed: %s",
					 strerror(errno ? errno : EIO));
				fprintf(stderr, "gpupool-stat: %s\n", last_err);
				status = 1;
			}
			break;
		}
		if (watch <= 0 || (count > 0 && round + 1 >= count))
			break;
		enum wake w = wait_frame(watch, &unblocked);
		if (w == WAKE_QUIT)
			break;
		if (w == WAKE_SUSPEND) { /* the shell gets its screen and modes back while stopped */
			screen_mode(false);
			raise(SIGSTOP);
			screen_mode(true);
		}
		round += w == WAKE_TIME; /* a redraw is not one of the --count refreshes */
	}
	if (screen) {
		screen_mode(false);
		if (status) /* what the alternate screen showed is gone with it */
			fprintf(stderr, "gpupool-stat: %s\n", last_err);
	}
	sigprocmask(SIG_SETMASK, &unblocked, NULL);
	if (events)
		gp_stat_events_reset(events);
	free(events);
	free(rates);
	free(o);
	free(l.infos);
	return status;
}

/* --listen: one scrape, the listing read afresh (same bounds as --prometheus). */
struct scrape {
	struct listing l;
	int pid;
};

static void scrape(struct gp_format_out *o, bool openmetrics, void *arg)
{
	struct scrape *s = arg;
	load(gp_statpage_dir(), s->pid, &s->l);
	render(o, openmetrics ? MODE_OPENMETRICS : MODE_PROMETHEUS, s->pid, 0, 0, &s->l, NULL, NULL, 0);
}

static int listen_http(const char *spec, int pid)
{
	static struct scrape s;
	s.pid = pid;
	s.l.infos = calloc(MAX_PAGES, sizeof *s.l.infos);
	if (!s.l.infos) {
		fprintf(stderr, "gpupool-stat: out of memory\n");
		return 1;
	}
	int rc = gp_stat_http_serve(spec, scrape, &s);
	free(s.l.infos);
	return rc;
}

/* --release: one process asked. */
struct target {
	int pid;
	char comm[GPUPOOL_COMM_LEN];
	struct gpupool_page *map; /* NULL once unmapped */
	size_t len;
	uint64_t req;
	uint64_t released[GPUPOOL_MAX_DEVICES]; /* each slot's released_bytes before the request */
	uint64_t asked_ns;                      /* CLOCK_MONOTONIC when the request was made */
	uint64_t done_ns;                       /* CLOCK_MONOTONIC when seen done; 0 while not */
	bool broken;                            /* its file changed size while mapped */
	bool counted;                           /* bytes is known */
	uint64_t bytes;                         /* what the answer handed back */
};

static volatile int bus_target = -1; /* the target being read when SIGBUS came */

/* Reads pid's page and asks it to release (gp_statpage_request_release), its figures before
 * the request into t. 0, or a negative errno with why[] (also for SIGBUS). */
static int request_one(int dfd, int pid, struct target *t, char *why, size_t wl)
{
	static struct gp_statpage_info info;
	char name[32];
	snprintf(name, sizeof name, "%s%d", GP_STATPAGE_NAME, pid);
	*t = (struct target){.pid = pid};
	/* the figures before: read first, so that an answer that comes at once is all counted */
	int rc = read_guarded(dfd, name, geteuid(), 0, &info, why, wl);
	if (rc != 0)
		return rc;
	for (uint32_t d = 0; d < info.page.ndevices && d < GPUPOOL_MAX_DEVICES; d++)
		t->released[d] = info.page.dev[d].released_bytes;
	memcpy(t->comm, info.page.comm, sizeof t->comm);
	t->comm[sizeof t->comm - 1] = '\0';
	for (char *c = t->comm; *c; c++)
		if ((unsigned char)*c < 0x20 || (unsigned char)*c >= 0x7f)
			*c = '?';
	in_read = 1;
	if (sigsetjmp(bus_jmp, 1) != 0) {
		in_read = 0;
		snprintf(why, wl, "the page of pid %d changed size while being read", pid);
		return -EFAULT;
	}
	t->asked_ns = gp_clock_ns(CLOCK_MONOTONIC);
	rc = gp_statpage_request_release(dfd, pid, geteuid(), &t->map, &t->len, &t->req, why, wl);
	in_read = 0;
	/* the release thread looks at the page at once when woken; a library without the
	 * channel answers at its next allocation call instead (no error to report then) */
	if (rc == 0)
		(void)gp_share_wake(pid);
	return rc;
}

/* Bytes handed back by t's releases since the request: released_bytes after less before,
 * slot by slot, never below zero (a counter that went back is not the same process's). */
static uint64_t released_since(const struct target *t, const struct gpupool_page *after)
{
	uint64_t sum = 0;
	for (uint32_t d = 0; d < after->ndevices && d < GPUPOOL_MAX_DEVICES; d++) {
		uint64_t a = after->dev[d].released_bytes, b = t->released[d];
		uint64_t delta = a > b ? a - b : 0;
		sum = sum > UINT64_MAX - delta ? UINT64_MAX : sum + delta;
	}
	return sum;
}

/* Asks `pid`, or (pid 0) every live process whose page this user may read, to release its
 * cache, then waits for all the answers together, `timeout` seconds at most; a line per
 * process. Exit status 1 when one did not answer or pid cannot be asked. */
static int release(int pid, double timeout)
{
	const char *dir = gp_statpage_dir();
	char why[512];
	int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	struct gp_statpage_name *names = NULL;
	int count = dfd < 0 ? -errno : gp_statpage_scan(dfd, pid, &names);
	if (count < 0) {
		fprintf(stderr, "gpupool-stat: %s: %s\n", dir, strerror(-count));
		if (dfd >= 0)
			close(dfd);
		return 1;
	}
	if (pid > 0 && (count == 0 || !names[0].live)) {
		if (kill(pid, 0) != 0 && errno == ESRCH)
			fprintf(stderr, "gpupool-stat: no process %d\n", pid);
		else if (count == 0)
			fprintf(stderr, "gpupool-stat: pid %d has no statistics page in %s (it has not allocated through gpupool)\n",
				pid, dir);
		else
			fprintf(stderr, "gpupool-stat: pid %d is a zombie: its page will not answer\n", pid);
		free(names);
		close(dfd);
		return 1;
	}
	struct target *t = calloc(count ? (size_t)count : 1, sizeof *t);
	if (!t) {
		fprintf(stderr, "gpupool-stat: out of memory\n");
		free(names);
		close(dfd);
		return 1;
	}
	int nt = 0, status = 0;
	unsigned long other_user = 0, foreign = 0;
	for (int i = 0; i < count && names[i].live; i++) {
		int rc = request_one(dfd, names[i].pid, &t[nt], why, sizeof why);
		if (rc == 0) {
			nt++;
			continue;
		}
		/* asking everyone: the pages this user may not write are not theirs to ask */
		if (pid <= 0 && rc == -EACCES) {
			other_user++;
		} else if (pid <= 0 && rc == -EPERM) {
			foreign++;
		} else if (pid > 0 || rc != -ESRCH) { /* a process that ended meanwhile has nothing to release */
			fprintf(stderr, "gpupool-stat: %s\n", why);
			status = 1;
		}
	}
	free(names);
	close(dfd);
	if (other_user)
		fprintf(stderr, "gpupool-stat: skipped %lu page%s: owned by another user (only root asks every process)\n",
			other_user, other_user == 1 ? "" : "s");
	if (foreign)
		fprintf(stderr, "gpupool-stat: skipped %lu page%s: %s\n", foreign, foreign == 1 ? "" : "s",
			gp_statpage_skip_text(GP_SKIP_FOREIGN));
	if (pid <= 0 && nt == 0 && !status) {
		printf("no process to ask in %s\n", dir);
		free(t);
		return 0;
	}
	/* every request is out: now the answers, all of them watched together */
	uint64_t t0 = gp_clock_ns(CLOCK_MONOTONIC), limit = (uint64_t)(timeout * 1e9);
	in_read = 1;
	if (sigsetjmp(bus_jmp, 1) != 0) { /* that page is left out; the others are still watched */
		if (bus_target >= 0)
			t[bus_target].broken = true;
	}
	for (;;) {
		bool all = true;
		for (int i = 0; i < nt; i++) {
			if (t[i].broken || t[i].done_ns)
				continue;
			bus_target = i;
			if (__atomic_load_n(&t[i].map->release_done, __ATOMIC_ACQUIRE) >= t[i].req)
				t[i].done_ns = gp_clock_ns(CLOCK_MONOTONIC);
			else
				all = false;
		}
		bus_target = -1;
		uint64_t now = gp_clock_ns(CLOCK_MONOTONIC);
		if (all || interrupted || now - t0 >= limit)
			break;
		struct timespec nap = {0, 1000000};
		nanosleep(&nap, NULL);
	}
	/* what each answer handed back, read while SIGBUS is still caught: a page that changes
	 * size now is marked broken and the reads start again, each page read once */
	static struct gpupool_page after;
	for (int i = 0; i < nt; i++) {
		if (t[i].broken || !t[i].done_ns || t[i].counted)
			continue;
		bus_target = i;
		gp_statpage_copy_image(t[i].map, t[i].len, &after, gp_clock_ns(CLOCK_MONOTONIC) + GP_STATPAGE_PATIENCE_NS);
		bus_target = -1;
		t[i].bytes = released_since(&t[i], &after);
		t[i].counted = true;
	}
	in_read = 0;
	for (int i = 0; i < nt; i++)
		gp_statpage_unmap(t[i].map, t[i].len);
	uint64_t total = 0;
	int answered = 0;
	for (int i = 0; i < nt; i++) {
		char h[16];
		if (t[i].broken) {
			printf("pid %d (%s): its page changed size while being read\n", t[i].pid, t[i].comm);
			status = 1;
		} else if (!t[i].done_ns) {
			printf("pid %d (%s) did not answer release request %llu within %.1f s (a process answers from "
			       "gpupool's own thread; older versions only on their next allocation call)\n",
			       t[i].pid, t[i].comm, (unsigned long long)t[i].req, timeout);
			status = 1;
		} else {
			total = total > UINT64_MAX - t[i].bytes ? UINT64_MAX : total + t[i].bytes;
			answered++;
			printf("pid %d (%s) released its cache: request %llu done after %.1f ms, %s handed back\n",
			       t[i].pid, t[i].comm, (unsigned long long)t[i].req,
			       (double)(t[i].done_ns - t[i].asked_ns) / 1e6, gp_format_bytes(h, sizeof h, t[i].bytes));
		}
	}
	if (pid <= 0) {
		char h[16];
		printf("asked %d process%s: %d answered, %s handed back in all\n", nt, nt == 1 ? "" : "es", answered,
		       gp_format_bytes(h, sizeof h, total));
	}
	free(t);
	return status;
}

static int clean(void)
{
	const char *dir = gp_statpage_dir();
	int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	struct gp_statpage_name *names = NULL;
	int count = dfd < 0 ? -errno : gp_statpage_scan(dfd, 0, &names);
	if (count < 0) {
		fprintf(stderr, "gpupool-stat: %s: %s\n", dir, strerror(-count));
		if (dfd >= 0)
			close(dfd);
		return 1;
	}
	char why[512];
	int removed = 0;
	for (int i = 0; i < count; i++) {
		char name[32];
		snprintf(name, sizeof name, "%s%d", GP_STATPAGE_NAME, names[i].pid);
		int rc = gp_statpage_clean_one(dfd, name, geteuid(), why, sizeof why);
		if (rc > 0) {
			printf("%s\n", why);
			removed++;
		} else if (rc < 0 || strncmp(why, "kept", 4) == 0) {
			if (strstr(why, "is alive") == NULL)
				fprintf(stderr, "gpupool-stat: %s\n", why);
		}
	}
	free(names);
	close(dfd);
	printf("removed %d stale page%s from %s\n", removed, removed == 1 ? "" : "s", dir);
	return 0;
}

/* --group FILE: the group's budget, use and peak per GPU, and its members; read with the
 * group layer's reader (a copy by read(2): a file truncated meanwhile is a short read). */
static int show_group(const char *path)
{
	static struct gp_group_view v;
	char why[400];
	int rc = gp_group_read(path, &v, why, sizeof why);
	if (rc) {
		fprintf(stderr, "gpupool-stat: group %s: %s\n", path, why);
		return 1;
	}
	unsigned alive = 0;
	for (uint32_t i = 0; i < v.nmembers; i++)
		alive += v.member[i].alive == 1;
	printf("group %s: %u member%s (%u alive)\n", path, v.nmembers, v.nmembers == 1 ? "" : "s", alive);
	printf("%-14s %11s %11s %11s %11s %6s\n", "GPU", "BUDGET", "USED", "PEAK", "RECOVERED", "%USED");
	for (uint32_t d = 0; d < v.ndevices; d++) {
		struct gpupool_device_stats st = {0};
		memcpy(st.uuid, v.dev[d].uuid, sizeof st.uuid);
		char u[GP_FORMAT_UUID_LEN], b[4][32];
		gp_format_uuid(u, &st);
		uint64_t used = v.dev[d].used, budget = v.dev[d].budget;
		printf("%-14.12s %11s %11s %11s %11s %5.1f%%\n", u, gp_format_bytes(b[0], sizeof b[0], budget),
		       gp_format_bytes(b[1], sizeof b[1], used), gp_format_bytes(b[2], sizeof b[2], v.dev[d].peak),
		       gp_format_bytes(b[3], sizeof b[3], v.dev[d].recovered),
		       budget ? 100.0 * (double)(used < budget ? used : budget) / (double)budget : 0.0);
	}
	if (v.nmembers)
		printf("\n%8s %-6s %s\n", "PID", "ALIVE", "HELD (per GPU, in the order above)");
	for (uint32_t i = 0; i < v.nmembers; i++) {
		const struct gp_group_view_member *m = &v.member[i];
		printf("%8d %-6s", m->pid, m->alive == 1 ? "yes" : m->alive == 0 ? "no" : "?");
		for (uint32_t d = 0; d < v.ndevices; d++) {
			char b[32];
			printf(" %s", gp_format_bytes(b, sizeof b, m->held[d]));
		}
		putchar('\n');
	}
	return 0;
}

/* A whole number from lo to hi, else -1. */
static long parse_count(const char *s, long lo, long hi)
{
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < lo || v > hi)
		return -1;
	return v;
}

int main(int argc, char **argv)
{
	enum { OPT_JSON = 1, OPT_PROM, OPT_OM, OPT_LISTEN, OPT_WATCH, OPT_COUNT, OPT_RELEASE, OPT_TIMEOUT, OPT_CLEAN,
	       OPT_HELP, OPT_VERSION, OPT_WIDE, OPT_GROUP, OPT_NO_COLOR };
	static const struct option opts[] = {
		{"json", no_argument, NULL, OPT_JSON},         {"prometheus", no_argument, NULL, OPT_PROM},
		{"openmetrics", no_argument, NULL, OPT_OM},    {"listen", required_argument, NULL, OPT_LISTEN},
		{"watch", required_argument, NULL, OPT_WATCH}, {"count", required_argument, NULL, OPT_COUNT},
		{"release", no_argument, NULL, OPT_RELEASE},
		{"timeout", required_argument, NULL, OPT_TIMEOUT},
		{"clean", no_argument, NULL, OPT_CLEAN},       {"help", no_argument, NULL, OPT_HELP},
		{"version", no_argument, NULL, OPT_VERSION},   {"wide", no_argument, NULL, OPT_WIDE},
		{"group", required_argument, NULL, OPT_GROUP}, {"no-color", no_argument, NULL, OPT_NO_COLOR},
		{NULL, 0, NULL, 0}};
	static const char *const mode_name[] = {"", "--json", "--prometheus", "--openmetrics"};
	enum mode mode = MODE_TABLE;
	double watch = 0, timeout = 5;
	long count = 0;
	int pid = 0, c;
	bool do_clean = false, do_release = false, wide = false, has_timeout = false, no_color = false;
	const char *listen_spec = NULL, *group = NULL;
	opterr = 0; /* our own one-line messages */
	while ((c = getopt_long(argc, argv, ":hwV", opts, NULL)) != -1) {
		enum mode m = MODE_TABLE;
		switch (c) {
		case OPT_JSON: m = MODE_JSON; break;
		case OPT_PROM: m = MODE_PROMETHEUS; break;
		case OPT_OM: m = MODE_OPENMETRICS; break;
		case OPT_LISTEN: listen_spec = optarg; break;
		case OPT_WATCH:
			if ((watch = parse_seconds(optarg, 0.1, 86400)) < 0)
				return bad_usage("--watch %s: expected seconds from 0.1 to 86400", optarg);
			break;
		case OPT_COUNT:
			if ((count = parse_count(optarg, 1, 1000000000)) < 0)
				return bad_usage("--count %s: expected a whole number from 1 to 1000000000", optarg);
			break;
		case OPT_RELEASE: do_release = true; break;
		case OPT_TIMEOUT:
			if ((timeout = parse_seconds(optarg, 0, 3600)) < 0)
				return bad_usage("--timeout %s: expected seconds from 0 to 3600", optarg);
			has_timeout = true;
			break;
		case OPT_CLEAN: do_clean = true; break;
		case OPT_GROUP: group = optarg; break;
		case 'w':
		case OPT_WIDE: wide = true; break;
		case 'h':
		case OPT_HELP: usage(stdout); return 0;
		case 'V':
		case OPT_VERSION: printf("gpupool-stat %s\n", GP_VERSION); return 0; /* project() in meson.build */
		case OPT_NO_COLOR: no_color = true; break;
		case ':': return bad_usage("%s needs a value", argv[optind - 1]);
		default: {
			/* optopt: the short option; a long one is named by the argument itself */
			const char *arg = argv[optind - 1];
			if (optopt && strncmp(arg, "--", 2) != 0)
				return bad_usage("unknown option -%c", optopt);
			int len = (int)strcspn(arg, "=");
			return bad_usage("unknown or ambiguous option %.*s", len, arg);
		}
		}
		if (m != MODE_TABLE && mode != MODE_TABLE && m != mode)
			return bad_usage("%s and %s cannot be used together", mode_name[mode], mode_name[m]);
		if (m != MODE_TABLE)
			mode = m;
	}
	if (optind < argc && (pid = parse_pid(argv[optind++])) < 0)
		return bad_usage("%s%s: expected a process id", do_release ? "--release " : "", argv[optind - 1]);
	if (optind < argc)
		return bad_usage("unexpected argument %s (one PID at most)", argv[optind]);
	/* the modes that do something else take none of the display options */
	const char *other = do_clean ? "--clean" : do_release ? "--release" : listen_spec ? "--listen" : NULL;
	if (do_clean && do_release)
		return bad_usage("--clean and --release cannot be used together");
	if ((do_clean || do_release) && listen_spec)
		return bad_usage("%s and --listen cannot be used together", other);
	if (other && mode != MODE_TABLE && !listen_spec)
		return bad_usage("%s and %s cannot be used together", other, mode_name[mode]);
	if (listen_spec && mode != MODE_TABLE)
		return bad_usage("--listen serves Prometheus and OpenMetrics text: it takes no %s", mode_name[mode]);
	if (other && watch > 0)
		return bad_usage("%s and --watch cannot be used together", other);
	if (other && wide)
		return bad_usage("%s and --wide cannot be used together", other);
	if (do_clean && pid)
		return bad_usage("--clean takes no PID argument");
	if (count && watch <= 0)
		return bad_usage("--count goes with --watch");
	if (has_timeout && !do_release)
		return bad_usage("--timeout goes with --release");
	if (wide && (mode != MODE_TABLE || pid))
		return bad_usage("--wide is for the table of all processes");
	/* colour for the text views on a terminal that wants it (no-color.org: NO_COLOR set and
	 * not empty turns it off; TERM=dumb has none) */
	const char *nc = getenv("NO_COLOR"), *term = getenv("TERM");
	use_color = !no_color && !(nc && *nc) && !(term && strcmp(term, "dumb") == 0) && mode == MODE_TABLE &&
		    isatty(STDOUT_FILENO);
	if (group) {
		if (argc != 3)
			return bad_usage("--group FILE takes no other option or argument");
		return show_group(group);
	}
	struct sigaction sa = {0};
	sa.sa_handler = on_sigbus;
	sigaction(SIGBUS, &sa, NULL);
	sa.sa_handler = on_sigint;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);

	if (do_clean)
		return clean();
	if (do_release)
		return release(pid, timeout);
	if (listen_spec)
		return listen_http(listen_spec, pid);
	return show(mode, pid, watch, count, wide);
}
