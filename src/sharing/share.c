/* The channel between processes sharing a GPU (share.h): abstract Unix datagram sockets,
 * one message size, the sender's credentials from the kernel. Never blocks but in
 * gp_share_wait, bounded by its deadline. Depends on libc, proc.h (the clock) and
 * statpage.h (the page directory's names). */
#include "share.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "proc.h"
#include "statpage.h"

/* The inode of this process's pid namespace (0 where /proc does not say): pids are only
 * names within one, and containers that share a network namespace (where abstract sockets
 * live) often have pid namespaces of their own with the same small pids. */
static unsigned long pidns(void)
{
	static _Atomic unsigned long ino; /* 1 + the inode once known */
	unsigned long v = atomic_load_explicit(&ino, memory_order_relaxed);
	if (!v) {
		struct stat st;
		v = 1 + (stat("/proc/self/ns/pid", &st) == 0 ? (unsigned long)st.st_ino : 0);
		atomic_store_explicit(&ino, v, memory_order_relaxed);
	}
	return v - 1;
}

int gp_share_name(int pid, char *buf, size_t cap)
{
	return snprintf(buf, cap, "gpupool.%lu.%d", pidns(), pid);
}

/* "\0gpupool.<pidns>.<pid>": the abstract name of a process's socket, and its length. */
static socklen_t name_of(int pid, struct sockaddr_un *sa)
{
	memset(sa, 0, sizeof *sa);
	sa->sun_family = AF_UNIX;
	int n = gp_share_name(pid, sa->sun_path + 1, sizeof sa->sun_path - 1);
	return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
}

static int sock_new(void)
{
	int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	int one = 1;
	if (setsockopt(fd, SOL_SOCKET, SO_PASSCRED, &one, sizeof one) != 0) {
		int e = errno;
		close(fd);
		return -e;
	}
	return fd;
}

int gp_share_listen(int pid)
{
	int fd = sock_new();
	if (fd < 0)
		return fd;
	struct sockaddr_un sa;
	socklen_t len = name_of(pid, &sa);
	if (bind(fd, (struct sockaddr *)&sa, len) != 0) {
		int e = errno;
		close(fd);
		return -e;
	}
	return fd;
}

int gp_share_asker(void)
{
	int fd = sock_new();
	if (fd < 0)
		return fd;
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	/* the family alone: the kernel binds a unique abstract name (autobind), where the
	 * answers come back */
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa_family_t)) != 0) {
		int e = errno;
		close(fd);
		return -e;
	}
	return fd;
}

static bool msg_ok(const struct gp_share_msg *m)
{
	return m->magic == GP_SHARE_MAGIC && m->version == GP_SHARE_VERSION && m->kind >= GP_SHARE_WAKE &&
	       m->kind <= GP_SHARE_KIND_LAST;
}

int gp_share_recv(int fd, struct gp_share_msg *m, struct gp_share_peer *from)
{
	struct sockaddr_un sa;
	/* one byte more than a message: a longer datagram shows as MSG_TRUNC or a longer count */
	char buf[sizeof *m + 1];
	struct iovec iov = {.iov_base = buf, .iov_len = sizeof buf};
	union {
		struct cmsghdr h;
		char b[CMSG_SPACE(sizeof(struct ucred))];
	} ctl;
	struct msghdr mh = {.msg_name = &sa,
			    .msg_namelen = sizeof sa,
			    .msg_iov = &iov,
			    .msg_iovlen = 1,
			    .msg_control = ctl.b,
			    .msg_controllen = sizeof ctl.b};
	ssize_t n;
	do
		n = recvmsg(fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return errno == EWOULDBLOCK ? -EAGAIN : -errno;
	const struct ucred *cred = NULL;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c))
		if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_CREDENTIALS &&
		    c->cmsg_len == CMSG_LEN(sizeof(struct ucred)))
			cred = (const struct ucred *)(const void *)CMSG_DATA(c);
	/* a descriptor passed with the datagram (SCM_RIGHTS) is not asked for: MSG_CTRUNC
	 * drops it, and any that came is closed on exec only; none is ever used */
	if ((size_t)n != sizeof *m || (mh.msg_flags & MSG_TRUNC) || !cred)
		return -EBADMSG;
	memcpy(m, buf, sizeof *m);
	if (!msg_ok(m))
		return -EBADMSG;
	from->pid = cred->pid;
	from->uid = cred->uid;
	from->addrlen = 0;
	size_t off = offsetof(struct sockaddr_un, sun_path);
	if (mh.msg_namelen > off && mh.msg_namelen - off <= sizeof from->addr) {
		from->addrlen = (unsigned)(mh.msg_namelen - off);
		memcpy(from->addr, sa.sun_path, from->addrlen);
	}
	return 0;
}

int gp_share_wait(int fd, struct gp_share_msg *m, struct gp_share_peer *from, uint64_t deadline_ns)
{
	for (;;) {
		int rc = gp_share_recv(fd, m, from);
		if (rc != -EAGAIN)
			return rc;
		uint64_t now = gp_clock_ns(CLOCK_MONOTONIC);
		if (now >= deadline_ns)
			return -ETIMEDOUT;
		uint64_t ms = (deadline_ns - now + 999999) / 1000000;
		struct pollfd pf = {.fd = fd, .events = POLLIN};
		if (poll(&pf, 1, ms > 60000 ? 60000 : (int)ms) < 0 && errno != EINTR)
			return -errno;
	}
}

static int send_to(int fd, const struct sockaddr_un *sa, socklen_t len, const struct gp_share_msg *m)
{
	ssize_t n;
	do
		n = sendto(fd, m, sizeof *m, MSG_DONTWAIT | MSG_NOSIGNAL, (const struct sockaddr *)sa, len);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return errno == EWOULDBLOCK ? -EAGAIN : -errno;
	return n == (ssize_t)sizeof *m ? 0 : -EIO;
}

int gp_share_send(int fd, int pid, const struct gp_share_msg *m)
{
	if (pid <= 0)
		return -EINVAL;
	struct sockaddr_un sa;
	socklen_t len = name_of(pid, &sa);
	return send_to(fd, &sa, len, m);
}

int gp_share_reply(int fd, const struct gp_share_peer *to, const struct gp_share_msg *m)
{
	if (!to->addrlen || to->addrlen > sizeof((struct sockaddr_un *)0)->sun_path)
		return -EDESTADDRREQ; /* an unbound sender: nowhere to answer */
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	memcpy(sa.sun_path, to->addr, to->addrlen);
	return send_to(fd, &sa, (socklen_t)(offsetof(struct sockaddr_un, sun_path) + to->addrlen), m);
}

struct gp_share_msg gp_share_msg_make(enum gp_share_kind kind, uint64_t id, const unsigned char *uuid)
{
	struct gp_share_msg m = {.magic = GP_SHARE_MAGIC, .version = GP_SHARE_VERSION, .kind = (uint16_t)kind, .id = id};
	if (uuid)
		memcpy(m.uuid, uuid, sizeof m.uuid);
	return m;
}

int gp_share_wake(int pid)
{
	int fd = sock_new();
	if (fd < 0)
		return fd;
	struct gp_share_msg m = gp_share_msg_make(GP_SHARE_WAKE, 0, NULL);
	int rc = gp_share_send(fd, pid, &m);
	close(fd);
	return rc;
}

int gp_share_peers(int self, int max, int **pids)
{
	*pids = NULL;
	int dfd = open(gp_statpage_dir(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return -errno;
	struct gp_statpage_name *names = NULL;
	int n = gp_statpage_scan(dfd, 0, &names);
	close(dfd);
	if (n < 0)
		return n;
	int *out = malloc(sizeof *out * (size_t)(n ? n : 1));
	if (!out) {
		free(names);
		return -ENOMEM;
	}
	int k = 0;
	for (int i = 0; i < n && k < max; i++)
		if (names[i].live && names[i].pid != self)
			out[k++] = names[i].pid;
	free(names);
	*pids = out;
	return k;
}
