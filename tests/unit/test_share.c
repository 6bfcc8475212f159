/* The share layer's channel (share.h): a listener and an asker talk, the kernel names the
 * sender, an answer goes back to the asker's own address, junk is refused and consumed, a
 * name already taken is refused, a process that is not there refuses at once, and the
 * peers are the live listeners but the caller. Depends on share.c, statpage.c and proc.c. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "proc.h"
#include "share.h"

/* A pid no process here has: the listener's name is free for the tests. */
static int fake_pid(int k) { return (1 << 22) + 100 + k; }

static uint64_t in_ms(unsigned ms) { return gp_clock_ns(CLOCK_MONOTONIC) + (uint64_t)ms * 1000000u; }

static void test_exchange(void **state)
{
	(void)state;
	int l = gp_share_listen(fake_pid(1));
	assert_true(l >= 0);
	assert_int_equal(gp_share_listen(fake_pid(1)), -EADDRINUSE); /* one owner per name */
	int a = gp_share_asker();
	assert_true(a >= 0);
	unsigned char uuid[GPUPOOL_UUID_LEN] = "GPU-uuid-123456";
	struct gp_share_msg q = gp_share_msg_make(GP_SHARE_QUERY, 77, uuid), m;
	q.bytes = 123;
	assert_int_equal(gp_share_send(a, fake_pid(1), &q), 0);
	struct gp_share_peer from;
	assert_int_equal(gp_share_wait(l, &m, &from, in_ms(1000)), 0);
	assert_memory_equal(&m, &q, sizeof m);
	assert_int_equal(from.pid, getpid()); /* the kernel's word */
	assert_int_equal(from.uid, geteuid());
	assert_true(from.addrlen > 0 && from.addr[0] == '\0'); /* autobound: abstract */
	/* the answer reaches the asker's own address */
	struct gp_share_msg o = gp_share_msg_make(GP_SHARE_OFFER, 77, uuid);
	o.bytes = 456;
	o.flags = GP_SHARE_FRAMEWORK;
	assert_int_equal(gp_share_reply(l, &from, &o), 0);
	struct gp_share_peer back;
	assert_int_equal(gp_share_wait(a, &m, &back, in_ms(1000)), 0);
	assert_int_equal(m.kind, GP_SHARE_OFFER);
	assert_int_equal(m.bytes, 456);
	assert_int_equal(back.pid, getpid());
	/* nothing more: a timeout, bounded */
	uint64_t t0 = gp_clock_ns(CLOCK_MONOTONIC);
	assert_int_equal(gp_share_wait(a, &m, &back, in_ms(30)), -ETIMEDOUT);
	assert_true(gp_clock_ns(CLOCK_MONOTONIC) - t0 < 1000000000ull);
	/* nobody listens: refused at once, whatever the wait */
	int rc = gp_share_send(a, fake_pid(2), &q);
	assert_true(rc == -ECONNREFUSED || rc == -ENOENT);
	assert_int_equal(gp_share_send(a, 0, &q), -EINVAL);
	/* a wake from a socket of its own */
	assert_int_equal(gp_share_wake(fake_pid(1)), 0);
	assert_int_equal(gp_share_wait(l, &m, &from, in_ms(1000)), 0);
	assert_int_equal(m.kind, GP_SHARE_WAKE);
	close(a);
	close(l);
	/* the name is free again once its socket is closed */
	l = gp_share_listen(fake_pid(1));
	assert_true(l >= 0);
	close(l);
}

/* The status exchange's messages: a query of every GPU, an answer whose figures and text come
 * through whole, in the one message size of the version. */
static void test_status_messages(void **state)
{
	(void)state;
	assert_int_equal(GP_SHARE_VERSION, 2);
	assert_int_equal(offsetof(struct gp_share_msg, status), 64); /* appended after version 1's fields and the offer's floor */
	int l = gp_share_listen(fake_pid(5));
	assert_true(l >= 0);
	int a = gp_share_asker();
	assert_true(a >= 0);
	struct gp_share_msg q = gp_share_msg_make(GP_SHARE_STATUS, 31, NULL), m;
	assert_int_equal(gp_share_send(a, fake_pid(5), &q), 0);
	struct gp_share_peer from, back;
	assert_int_equal(gp_share_wait(l, &m, &from, in_ms(1000)), 0);
	assert_int_equal(m.kind, GP_SHARE_STATUS);
	unsigned char uuid[GPUPOOL_UUID_LEN] = "GPU-uuid-123456";
	struct gp_share_msg ans = gp_share_msg_make(GP_SHARE_STATUS_ANSWER, m.id, uuid);
	ans.status.reserved = 3ull << 30;
	ans.status.releasable = 1ull << 30;
	ans.status.waiting = 5ull << 20;
	ans.status.device = 2;
	ans.status.index = 1;
	ans.status.count = 2;
	snprintf(ans.status.comm, sizeof ans.status.comm, "train");
	snprintf(ans.status.device_name, sizeof ans.status.device_name, "NVIDIA H100 80GB HBM3");
	assert_int_equal(gp_share_reply(l, &from, &ans), 0);
	assert_int_equal(gp_share_wait(a, &m, &back, in_ms(1000)), 0);
	assert_memory_equal(&m, &ans, sizeof m);
	assert_int_equal(back.pid, getpid());
	close(a);
	close(l);
}

/* Raw datagrams to the listener's name, as a hostile sender writes them. */
static void send_raw(int pid, const void *buf, size_t len)
{
	int s = socket(AF_UNIX, SOCK_DGRAM, 0);
	assert_true(s >= 0);
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int n = gp_share_name(pid, sa.sun_path + 1, sizeof sa.sun_path - 1);
	assert_int_equal(sendto(s, buf, len, 0, (struct sockaddr *)&sa,
				(socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n)),
			 (ssize_t)len);
	close(s);
}

static void test_junk(void **state)
{
	(void)state;
	/* the size the e2e scripts' own senders write ("=IHHQ16sQQIIQ208x") */
	assert_int_equal(sizeof(struct gp_share_msg), 272);
	int l = gp_share_listen(fake_pid(3));
	assert_true(l >= 0);
	struct gp_share_msg good = gp_share_msg_make(GP_SHARE_WAIT, 5, NULL), m;
	struct gp_share_peer from;
	char big[sizeof good + 64];
	memset(big, 0x41, sizeof big);
	memcpy(big, &good, sizeof good);
	send_raw(fake_pid(3), big, sizeof big);       /* too long */
	send_raw(fake_pid(3), &good, sizeof good - 1); /* too short */
	send_raw(fake_pid(3), "", 0);                  /* empty */
	struct gp_share_msg bad = good;
	bad.magic ^= 1;
	send_raw(fake_pid(3), &bad, sizeof bad);
	bad = good;
	bad.version = 99;
	send_raw(fake_pid(3), &bad, sizeof bad);
	bad = good;
	bad.kind = 0;
	send_raw(fake_pid(3), &bad, sizeof bad);
	bad.kind = GP_SHARE_KIND_LAST + 1;
	send_raw(fake_pid(3), &bad, sizeof bad);
	bad.kind = 4; /* version 1's ask, no longer a message */
	send_raw(fake_pid(3), &bad, sizeof bad);
	send_raw(fake_pid(3), &good, sizeof good); /* and one good one, after them */
	for (int i = 0; i < 8; i++)
		assert_int_equal(gp_share_wait(l, &m, &from, in_ms(1000)), -EBADMSG); /* each consumed */
	assert_int_equal(gp_share_wait(l, &m, &from, in_ms(1000)), 0);
	assert_int_equal(m.kind, GP_SHARE_WAIT);
	assert_int_equal(m.id, 5);
	/* an unbound sender: nowhere to answer, said as such */
	assert_int_equal(from.addrlen, 0);
	assert_int_equal(gp_share_reply(l, &from, &good), -EDESTADDRREQ);
	assert_int_equal(gp_share_recv(l, &m, &from), -EAGAIN);
	close(l);
}

/* A child's datagram is named by the child's pid, not by what it claims. */
static void test_sender_is_named(void **state)
{
	(void)state;
	int l = gp_share_listen(fake_pid(4));
	assert_true(l >= 0);
	pid_t c = fork();
	assert_true(c >= 0);
	if (c == 0) {
		int a = gp_share_asker();
		struct gp_share_msg g = gp_share_msg_make(GP_SHARE_FREED, 9, NULL);
		g.bytes = 1 << 30;
		_exit(a >= 0 && gp_share_send(a, fake_pid(4), &g) == 0 ? 0 : 1);
	}
	int st;
	assert_int_equal(waitpid(c, &st, 0), c);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	struct gp_share_msg m;
	struct gp_share_peer from;
	assert_int_equal(gp_share_wait(l, &m, &from, in_ms(1000)), 0);
	assert_int_equal(from.pid, c);
	close(l);
}

/* The peers: the processes whose listening socket has this library's name, but the caller;
 * names of gone pids and files planted in the page directory are no peers (256 planted
 * pages once kept every real peer out of the list). */
static void test_peers(void **state)
{
	(void)state;
	char dir[] = "/tmp/gp-share-XXXXXX";
	assert_non_null(mkdtemp(dir));
	setenv("GPUPOOL_SHM_DIR", dir, 1);
	char path[512];
	for (int i = 0; i < 300; i++) { /* junk pages: names of live pids, files anyone may make */
		snprintf(path, sizeof path, "%s/gpupool.%d", dir, i == 0 ? 1 : i == 1 ? getppid() : fake_pid(i));
		int fd = open(path, O_CREAT | O_WRONLY, 0600);
		assert_true(fd >= 0);
		close(fd);
	}
	int squat = gp_share_listen(fake_pid(7)); /* a name whose pid is gone */
	assert_true(squat >= 0);
	int own = gp_share_listen(getpid()); /* the caller's own */
	assert_true(own >= 0);
	/* two children that listen under their own names, and wait to be told to go */
	int go[2];
	assert_int_equal(pipe(go), 0);
	int ready[2];
	assert_int_equal(pipe(ready), 0);
	pid_t kids[2];
	for (int i = 0; i < 2; i++) {
		kids[i] = fork();
		assert_true(kids[i] >= 0);
		if (kids[i] == 0) {
			close(go[1]); /* the parent's end: its close (or death) ends the read below */
			int l = gp_share_listen(getpid());
			char c = l >= 0 ? 'y' : 'n';
			if (write(ready[1], &c, 1) != 1 || read(go[0], &c, 1) < 0)
				_exit(1);
			_exit(0);
		}
	}
	close(go[0]);
	for (int i = 0; i < 2; i++) {
		char c = 0;
		assert_int_equal(read(ready[0], &c, 1), 1);
		assert_int_equal(c, 'y');
	}
	/* other tests' processes may listen too: the children are in the list, in pid order,
	 * and no name of this process's, of a gone pid or of a planted page is */
	int *p = NULL;
	int n = gp_share_peers(getpid(), 1 << 16, &p);
	assert_true(n >= 2);
	int seen = 0;
	for (int i = 0; i < n; i++) {
		assert_true(p[i] != getpid());
		assert_true(p[i] != fake_pid(7));
		assert_true(i == 0 || p[i - 1] < p[i]);
		seen += p[i] == kids[0] || p[i] == kids[1];
	}
	assert_int_equal(seen, 2);
	free(p);
	assert_int_equal(gp_share_peers(getpid(), 1, &p), 1); /* at most max */
	free(p);
	close(go[1]);
	for (int i = 0; i < 2; i++) {
		int st;
		assert_int_equal(waitpid(kids[i], &st, 0), kids[i]);
	}
	close(ready[0]);
	close(ready[1]);
	close(squat);
	close(own);
	n = gp_share_peers(getpid(), 1 << 16, &p);
	for (int i = 0; i < n; i++) /* the children are gone, their sockets with them */
		assert_true(p[i] != kids[0] && p[i] != kids[1]);
	free(p);
	char cmd[300];
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	assert_int_equal(system(cmd), 0);
	unsetenv("GPUPOOL_SHM_DIR");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_exchange),
		cmocka_unit_test(test_status_messages),
		cmocka_unit_test(test_junk),
		cmocka_unit_test(test_sender_is_named),
		cmocka_unit_test(test_peers),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
