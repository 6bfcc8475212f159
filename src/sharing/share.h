/* The channel between the processes that share a GPU (docs/sharing.md): each process with a
 * pool listens on an abstract Unix datagram socket, "\0gpupool.<pidns>.<pid>" (gp_share_name),
 * in its network namespace. Datagrams of one fixed size, whose sender the kernel names (SCM_CREDENTIALS:
 * pid and uid no sender can forge), so nothing crosses users through a file in /dev/shm:
 * no file to plant, truncate or lock, and a process that is gone refuses at once
 * (ECONNREFUSED). The messages and their checks only: no pools, no CUDA, no policy (the
 * shim's reclaim.c and release_thread.c). Depends on base (the clock) and stats (the list of
 * pages, which names the processes to ask). */
#ifndef GP_SHARE_H
#define GP_SHARE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "gpupool/stats.h"

#define GP_SHARE_MAGIC 0x48535047u /* "GPSH" little-endian */
/* 2: the status exchange (kinds 6 and 7, struct gp_share_status appended to every message),
 * the wait queue (kinds 8 to 12, the offer's floor); the asks of version 1 (4, 5) are gone */
#define GP_SHARE_VERSION 2u

enum gp_share_kind {
	GP_SHARE_WAKE = 1,  /* look at the page now: a release request was made (gpupool-stat) */
	GP_SHARE_QUERY = 2, /* what could you give on GPU uuid? (bytes: what the asker needs) */
	GP_SHARE_OFFER = 3, /* the answer: bytes releasable now, held = reserved + unpooled, flags */
	/* 4, 5: the asks of version 1, no longer sent */
	GP_SHARE_STATUS = 6,        /* what do you hold? on GPU uuid, or (uuid all zero) on every GPU */
	GP_SHARE_STATUS_ANSWER = 7, /* the answer, one message per device: status (below) */
	/* The wait queue of a GPU (waitq.h, docs/sharing.md). A waiter's ticket is the
	 * CLOCK_MONOTONIC time it began to wait (one clock for every process of the machine):
	 * earlier tickets are served first. */
	GP_SHARE_WAIT = 8,  /* I wait for `bytes` on GPU uuid: id = my ticket, held = the
			     * CLOCK_MONOTONIC time my wait ends; sent again about once a second */
	GP_SHARE_HEARD = 9, /* the answer to a WAIT: id = its ticket, bytes = idle memory the
			     * holder has there now, held = what it holds there (reserved +
			     * unpooled), flags (GP_SHARE_WAITING, GP_SHARE_FRAMEWORK) */
	GP_SHARE_FREED = 10, /* to a waiter: memory went back to the driver on GPU uuid (bytes;
			      * 0: some, not counted), id = the ticket it is meant for */
	GP_SHARE_DONE = 11,  /* the wait with ticket id on GPU uuid ended (served or not) */
	GP_SHARE_POKE = 12,  /* from a process to its own release thread: memory was freed while
			      * others wait (accepted from the process itself only) */
	GP_SHARE_KIND_LAST = GP_SHARE_POKE /* the highest kind this version knows */
};

/* A status answer's figures about one device of the answering process, from its own page
 * slot (never more than it would show its own user): what a reader that may not open that
 * page (another user's) shows. Zero in every other kind of message. */
struct gp_share_status {
	uint64_t start_time_ns; /* the process's page's start_time_ns (CLOCK_REALTIME) */
	uint64_t reserved, unpooled, allocated, cached, releasable; /* bytes, the gauges of the slot */
	uint64_t waiting, wait_started_ns, limit, floor;            /* waiting_bytes, ..., floor_bytes */
	/* the driver's figures: device_total_bytes, device_free_bytes, device_seen_ns */
	uint64_t device_total, device_free, device_seen_ns;
	int32_t device;        /* the device's CUDA ordinal in the answering process */
	uint16_t index, count; /* this answer is the index-th (from 0) of count, one per device
				* asked about; count 0: none (one message, nothing in it) */
	char comm[GPUPOOL_COMM_LEN];           /* the page's comm, NUL-terminated */
	char lib_version[GPUPOOL_VERSION_LEN]; /* the page's lib_version */
	char device_name[GPUPOOL_DEVICE_NAME_LEN];
};

/* OFFER, HEARD: a framework's cache above gpupool (PyTorch, CuPy) may hold more than `bytes`. */
#define GP_SHARE_FRAMEWORK 1u
/* HEARD: the holder waits for memory on that GPU itself. */
#define GP_SHARE_WAITING 2u

struct gp_share_msg {
	uint32_t magic;   /* GP_SHARE_MAGIC */
	uint16_t version; /* GP_SHARE_VERSION */
	uint16_t kind;    /* enum gp_share_kind */
	uint64_t id;      /* the asker's number for the request, echoed in the answer */
	unsigned char uuid[GPUPOOL_UUID_LEN];
	uint64_t bytes;
	uint64_t held;
	uint32_t flags;
	uint32_t pad_;
	/* version 2: appended (every message has the one size of its version) */
	uint64_t floor; /* OFFER: the memory the holder keeps whatever others ask (its reserve) */
	struct gp_share_status status; /* GP_SHARE_STATUS_ANSWER only */
};

/* Who sent a datagram, as the kernel says, and where an answer goes. */
struct gp_share_peer {
	pid_t pid;
	uid_t uid;
	unsigned addrlen;
	char addr[110]; /* sockaddr_un.sun_path: abstract (starts with NUL) */
};

/* The abstract name (without its leading NUL) of process `pid`'s socket, into buf:
 * "gpupool.<inode of this process's pid namespace>.<pid>", so that processes of other pid
 * namespaces with the same pids, in one network namespace, never share a name. Its length. */
int gp_share_name(int pid, char *buf, size_t cap);

/* The listening socket of process `pid` (non-blocking, close-on-exec, credentials passed).
 * Returns the descriptor, or -EADDRINUSE (another socket has the name: a process of
 * another library, or one that squats it), or another -errno. */
int gp_share_listen(int pid);

/* An asker's socket: an address of its own the kernel picks (autobind), credentials passed.
 * The descriptor or -errno. */
int gp_share_asker(void);

/* One datagram from fd, without waiting: 0 with *m and *from, -EAGAIN when none is queued,
 * -EBADMSG for one that is not a message of this version (wrong size, magic, version or
 * kind, no credentials): it is consumed, and the caller ignores it. */
int gp_share_recv(int fd, struct gp_share_msg *m, struct gp_share_peer *from);

/* Waits for one datagram until deadline_ns (CLOCK_MONOTONIC): gp_share_recv's answers, or
 * -ETIMEDOUT. */
int gp_share_wait(int fd, struct gp_share_msg *m, struct gp_share_peer *from, uint64_t deadline_ns);

/* Sends m to the process `pid`'s socket, never waiting: 0, -ECONNREFUSED or -ENOENT (no one
 * listens: gone, or not a process of this library), -EAGAIN (its queue is full), -errno. */
int gp_share_send(int fd, int pid, const struct gp_share_msg *m);

/* Answers the sender of a datagram (its address from gp_share_recv). */
int gp_share_reply(int fd, const struct gp_share_peer *to, const struct gp_share_msg *m);

/* A message of `kind` with id and uuid (NULL: zero) and nothing else. */
struct gp_share_msg gp_share_msg_make(enum gp_share_kind kind, uint64_t id, const unsigned char *uuid);

/* Asks process `pid` to look at its page now (after a release request). 0 or -errno;
 * a process of a library without the channel answers at its next allocation instead. */
int gp_share_wake(int pid);

/* Sends m to this process's own socket (the release thread's): 0 or -errno. */
int gp_share_self(const struct gp_share_msg *m);

/* The processes that may hold a pool: the pids named by the listening sockets of this
 * library in the network namespace (/proc/net/unix: one name per live process, which files
 * planted in a shared directory cannot add to), but `self`, in pid order; where /proc/net/unix
 * cannot be read, the pids of the live pages in the page directory. Returns the count with
 * *pids malloc'd (the caller frees), at most `max`; or -errno. */
int gp_share_peers(int self, int max, int **pids);

#endif
