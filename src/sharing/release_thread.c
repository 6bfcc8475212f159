/* The release thread (release_thread.h): a poll on the process's socket with a timeout,
 * the page's release requests, the reclaim exchange (reclaim.c), and each second the decay
 * pass and the device's figures. Every action inside a registry read section, so that a
 * pool a device reset kills is never freed under it; nothing after exit began. Depends on
 * the registry, the pool, share.h and reclaim.h; never on the call bodies. */
#include "release_thread.h"

#include <errno.h>
#include <stdlib.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "outfile.h"
#include "proc.h"
#include "reclaim.h"
#include "registry.h"
#include "registry_internal.h"
#include "share.h"
#include "status.h"
#include "waitq.h"

#define R (gp_registry_self())

/* The page's release requests are also looked at this often, for a gpupool-stat that does
 * not wake the thread (an older one): a quarter of a second. */
#define POLL_MS 250
#define PASS_NS (1000 * 1000 * 1000ull)
/* While segments over their idle time remain past a pass's budget, the next pass comes
 * sooner: 2 GiB per tenth of a second, each pass a short hold of the pool lock. */
#define DECAY_BUDGET ((size_t)2 << 30)
#define BUSY_PASS_NS (100 * 1000 * 1000ull)
/* Datagrams handled per wake, at most: a flood waits in the kernel's bounded queue. */
#define BATCH 64

static atomic_bool started, stopping;
static atomic_int acting; /* inside a pass or an answer (CUDA calls) */
static int sock = -1;
static dev_t sock_dev; /* the socket's identity: a program may close its number and reuse it */
static ino_t sock_ino;

/* The descriptor is still the socket this thread made: a program that closed every
 * descriptor (a daemon) may have its own file under the number now. */
static bool sock_ours(void)
{
	struct stat st;
	return sock >= 0 && fstat(sock, &st) == 0 && S_ISSOCK(st.st_mode) && st.st_dev == sock_dev &&
	       st.st_ino == sock_ino;
}

/* The socket was taken from us: the number is the program's now, never closed or read
 * again; other processes' requests go unanswered (logged once). */
static void sock_lost(void)
{
	gp_log(GP_LOG_INFO, "share: the program closed the socket of gpupool's release thread; this process "
			    "answers release requests within %d ms and gives nothing to reclaims",
	       POLL_MS);
	sock = -1;
}

static uint64_t now_ns(void) { return gp_clock_ns(CLOCK_MONOTONIC); }

/* The decay pass and the device's figures, for every pool. True when some pool still has
 * segments over their idle time (the budget ran out). */
static bool pass(void)
{
	GP_REGISTRY_READER;
	bool more = false;
	uint64_t decay_ns = (uint64_t)R->cfg.decay_ms * 1000000u, now = now_ns();
	for (int d = 0; d < R->ndev && d < GPUPOOL_MAX_DEVICES; d++) {
		gp_pool *p = atomic_load(&R->pools[d]);
		struct gpupool_device_stats *st = gp_registry_slot(R, d);
		if (!p || !st || atomic_load(&stopping))
			continue;
		/* the floor (reserve), decided at the device's first pass and kept by every pool the
		 * device has (a reset makes a new one): the decay never goes below it */
		gp_pool_set_floor(p, gp_reclaim_floor(d));
		size_t given = gp_pool_decay(p, now, decay_ns, DECAY_BUDGET, NULL);
		if (given >= DECAY_BUDGET)
			more = true;
		(void)gp_status_look(p, st, d);
	}
	return more;
}

/* Each sender's budget of requests: PEER_RATE a second, PEER_BURST at once (a token bucket
 * per pid, in a small table; a pid pushed out starts again with a full bucket, so the bound
 * holds per process only while fewer than PEERS send at once). The release thread's only. */
#define PEER_RATE 200
#define PEER_BURST 64
#define PEERS 64
static struct {
	int pid;
	double tokens;
	uint64_t at_ns;
} peers[PEERS];

static bool peer_may(int pid)
{
	uint64_t now = now_ns();
	int slot = 0;
	for (int i = 0; i < PEERS; i++) {
		if (peers[i].pid == pid) {
			slot = i;
			goto found;
		}
		if (peers[i].at_ns < peers[slot].at_ns)
			slot = i; /* the least recently seen */
	}
	peers[slot].pid = pid;
	peers[slot].tokens = PEER_BURST;
	peers[slot].at_ns = now;
found:
	peers[slot].tokens += (double)(now - peers[slot].at_ns) * PEER_RATE / 1e9;
	if (peers[slot].tokens > PEER_BURST)
		peers[slot].tokens = PEER_BURST;
	peers[slot].at_ns = now;
	if (peers[slot].tokens < 1)
		return false;
	peers[slot].tokens -= 1;
	return true;
}

static void drain(void)
{
	/* before any read: a number the program reused for a socket of its own would otherwise
	 * have its bytes read here (and a stream at end of file polls readable for ever) */
	if (!sock_ours()) {
		sock_lost();
		return;
	}
	for (int i = 0; i < BATCH && !atomic_load(&stopping); i++) {
		struct gp_share_msg m;
		struct gp_share_peer from;
		int rc = gp_share_recv(sock, &m, &from);
		if (rc == -EAGAIN)
			return;
		if (rc != 0) {
			if (rc != -EBADMSG) {
				if (!sock_ours())
					sock_lost();
				return;
			}
			gp_log(GP_LOG_DEBUG, "share: a datagram that is not a request, ignored");
			continue;
		}
		/* what one process may cost this one: a few requests a second (its own wakes and
		 * pokes excepted) */
		if (from.pid != getpid() && !peer_may(from.pid)) {
			gp_log(GP_LOG_DEBUG, "share: pid %d sends more than %d requests a second; dropped", (int)from.pid,
			       PEER_RATE);
			continue;
		}
		/* a wake only makes this round look at the page, below */
		if (m.kind == GP_SHARE_QUERY)
			gp_reclaim_answer(sock, &m, &from);
		else if (m.kind == GP_SHARE_WAIT || m.kind == GP_SHARE_DONE || m.kind == GP_SHARE_POKE ||
			 m.kind == GP_SHARE_STATUS_ANSWER)
			gp_waitq_message(sock, &m, &from);
		else if (m.kind == GP_SHARE_STATUS)
			gp_status_answer(sock, &m, &from);
	}
}

static void *release_main(void *arg)
{
	(void)arg;
	uint64_t next_pass = now_ns() + PASS_NS;
	while (!atomic_load(&stopping)) {
		uint64_t now = now_ns();
		int ms = POLL_MS;
		int tick = gp_waitq_tick(); /* a line with someone in it: looked at more often */
		if (tick >= 0 && tick < ms)
			ms = tick;
		if (next_pass > now && (next_pass - now) / 1000000u < (uint64_t)ms)
			ms = (int)((next_pass - now) / 1000000u);
		if (next_pass <= now)
			ms = 0;
		struct pollfd pf = {.fd = sock, .events = POLLIN};
		int n = poll(&pf, sock >= 0 ? 1 : 0, ms);
		if (n < 0 && errno != EINTR)
			usleep(POLL_MS * 1000);
		if (n > 0 && (pf.revents & POLLNVAL))
			sock_lost(); /* closed by the program, its number free */
		atomic_store(&acting, 1);
		if (!atomic_load(&stopping) && !atomic_load(&R->exiting)) {
			if (sock >= 0)
				drain();
			gp_registry_release_requests();
			if (now_ns() >= next_pass)
				next_pass = now_ns() + (pass() ? BUSY_PASS_NS : PASS_NS);
		}
		atomic_store(&acting, 0);
	}
	return NULL;
}

/* At exit, before the registry's exit handler (registered with the first pool, before this
 * thread started: exit handlers run last registered first). */
static void stop_at_exit(void) { gp_release_thread_stop(); }

const atomic_bool *gp_release_thread_stopping(void) { return &stopping; }

void gp_release_thread_start(void)
{
	if (atomic_exchange(&started, true))
		return;
	gp_waitq_arm();
	static bool atexit_set; /* once per process image: a forked child keeps its parent's */
	if (!atexit_set)
		atexit_set = atexit(stop_at_exit) == 0;
	sock = gp_share_listen(getpid());
	if (sock >= 0) {
		sock = gp_outfile_move_high(sock);
		struct stat st;
		if (fstat(sock, &st) == 0) {
			sock_dev = st.st_dev;
			sock_ino = st.st_ino;
		}
	}
	if (sock < 0)
		gp_log(sock == -EADDRINUSE ? GP_LOG_WARN : GP_LOG_INFO,
		       "share: cannot listen for other processes' requests (%s)%s; this process answers "
		       "release requests within %d ms and gives nothing to reclaims",
		       sock == -EADDRINUSE ? "another socket holds the name gpupool.<pid>" : "socket",
		       sock == -EADDRINUSE ? "" : "", POLL_MS);
	pthread_attr_t a;
	pthread_attr_init(&a);
	pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&a, 256 * 1024); /* the runtime, the driver and Python run on it */
	pthread_t t;
	if (pthread_create(&t, &a, release_main, NULL) != 0) {
		gp_log(GP_LOG_WARN, "cannot start the release thread: an idle process answers no release request");
		if (sock >= 0)
			close(sock);
		sock = -1;
	}
	pthread_attr_destroy(&a);
}

void gp_release_thread_stop(void)
{
	atomic_store(&stopping, true);
	/* the runtime tears itself down after the exit handler: let an action in flight end */
	for (int i = 0; i < 2000 && atomic_load(&acting); i++)
		usleep(1000);
}

void gp_release_thread_after_fork(void)
{
	/* the parent's socket: never read here, and it would keep the parent's name alive;
	 * closed only if the number is still that socket (not a file of the program's) */
	if (sock_ours())
		close(sock);
	sock = -1;
	atomic_store(&acting, 0);
	atomic_store(&stopping, false);
	atomic_store(&started, false);
	memset(peers, 0, sizeof peers);
}
