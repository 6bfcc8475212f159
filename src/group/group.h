/* The group: one memory budget per device shared by every process that names the same file
 * (knob `group`). The file holds, per device (by UUID), the budget and the bytes the members
 * hold, and per member its own holdings, as C11 atomics on a shared mapping: no lock that a
 * dead or stopped member could hold. A member killed with -9 is found by whoever looks next
 * and its share returned. Depends on base (log, proc) only: no CUDA, no pool, no config. */
#ifndef GP_GROUP_H
#define GP_GROUP_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- the file (version 1) ----
 * Fixed size (sizeof(struct gp_group_file)); all fields native-endian (a group spans the
 * processes of one host). Every field but the header's constants changes while members run:
 * read them with atomic loads, or through gp_group_read. */
#define GP_GROUP_MAGIC 0x0031505247504750ull /* "PGPGRP1\0" */
#define GP_GROUP_VERSION 1u
#define GP_GROUP_DEVICES 32u /* device slots: GPUs, or MIG instances (each has its UUID) */
#define GP_GROUP_MEMBERS 256u
#define GP_GROUP_UUID_LEN 16
/* A member's holding on a device: the slot's generation in the top bits (so that a member
 * returning a dead member's share never touches the holding of the slot's next owner), the
 * bytes in the low GP_GROUP_HELD_BITS (512 TiB). */
#define GP_GROUP_HELD_BITS 49
#define GP_GROUP_HELD_MASK (((uint64_t)1 << GP_GROUP_HELD_BITS) - 1)
#define GP_GROUP_GEN_MASK (((uint64_t)1 << (64 - GP_GROUP_HELD_BITS)) - 1)
/* A member's id: its pid (below PID_MAX_LIMIT, 2^22) and its start time in ms since boot
 * (/proc/<pid>/stat), so that a reused pid is not taken for the member. Never 0. */
#define GP_GROUP_PID_BITS 22
#define GP_GROUP_START_BITS 41

struct gp_group_dev_slot {
	_Atomic uint64_t key;       /* 0: free; else gp_group_uuid_key of the device's UUID (never 0).
				     * Set once by compare-exchange; slots are never freed */
	_Atomic uint64_t uuid[2];   /* the UUID's 16 bytes, for readers (written after key) */
	_Atomic uint64_t budget;    /* bytes the members may hold together; 0: none yet (the first
				     * member with a group_limit sets it) */
	_Atomic uint64_t used;      /* bytes the members hold; never above budget by a take */
	_Atomic uint64_t peak;      /* the most used has been */
	_Atomic uint64_t recovered; /* bytes returned from dead members, in total */
	_Atomic uint64_t spare;
};

struct gp_group_member_slot {
	_Atomic uint64_t id;        /* 0: free; else pid | start_ms << GP_GROUP_PID_BITS */
	_Atomic uint64_t pidns;     /* inode of the member's /proc/self/ns/pid: only a member of the
				     * same pid namespace can tell whether it is alive; 0 until set */
	_Atomic uint64_t gen;       /* bumped by each member that takes the slot */
	_Atomic uint64_t joined_ns; /* CLOCK_REALTIME when it joined */
	_Atomic uint64_t held[GP_GROUP_DEVICES]; /* gen << GP_GROUP_HELD_BITS | bytes, per device slot */
};

struct gp_group_file {
	_Atomic uint64_t magic;     /* GP_GROUP_MAGIC, stored last by whoever lays the file out */
	_Atomic uint32_t version;   /* GP_GROUP_VERSION */
	_Atomic uint32_t size;      /* sizeof(struct gp_group_file) */
	_Atomic uint32_t ndevices;  /* GP_GROUP_DEVICES */
	_Atomic uint32_t nmembers;  /* GP_GROUP_MEMBERS */
	_Atomic uint64_t spare[5];
	struct gp_group_dev_slot dev[GP_GROUP_DEVICES];
	struct gp_group_member_slot member[GP_GROUP_MEMBERS];
};

/* ---- a member ---- */

/* This process's membership: filled by gp_group_join, used by one process from any thread
 * (take, give, total: lock-free; join, leave, recover: not concurrently with each other). */
struct gp_group {
	struct gp_group_file *f; /* the shared mapping; NULL: not a member */
	unsigned me;             /* this process's member slot */
	uint64_t id, gen, pidns;
	uint64_t fdev, fino; /* the file's identity: a live member maps it */
	_Atomic uint64_t recover_ns; /* CLOCK_MONOTONIC of the last recovery a failed take made */
};

/* Joins the group of the file at `path`: opens it (created 0600 when missing; never through
 * a symbolic link; a regular file only, of one name (no other hard link), not writable by
 * every user, and in a sticky directory others may write only this user's or the directory
 * owner's), lays out an empty one, checks the layout of any other (its size, magic, version
 * and shape), maps it, takes a member slot and returns the share of every dead member it
 * finds. 0, or a negative errno with one line in why (cap bytes) saying what is wrong with
 * the file: -ELOOP a symbolic link, -EINVAL not a regular file, -EMLINK other hard links,
 * -ESTALE its name changed while it was opened, -EACCES writable by every user, another
 * user's in a sticky directory (or open's own), -EPROTO not a group file of this layout,
 * -ENOSPC every member slot held by a live process, else open's, posix_fallocate's or mmap's.
 * On failure g is not a member. */
int gp_group_join(struct gp_group *g, const char *path, char *why, size_t cap);

/* Tests only: `hook` (NULL: none) is called by gp_group_join between finding the file's magic
 * 0 and laying the file out, so that a test can make another joiner win that race there. */
void gp_group_set_join_hook(void (*hook)(const char *path));

/* Tests only: `hook` (NULL: none) is called by gp_group_join right after it opened the file,
 * before it checks what it opened, so that a test can change the name meanwhile. */
void gp_group_set_open_hook(void (*hook)(const char *path));

/* The slot of the device with this UUID (16 bytes), made on first use. `budget` (bytes; 0:
 * none) becomes the device's budget when it has none yet; the file's wins over it otherwise.
 * The slot number (0 <= n < GP_GROUP_DEVICES), or -ENOSPC when every slot holds another device. */
int gp_group_device(struct gp_group *g, const unsigned char uuid[GP_GROUP_UUID_LEN], uint64_t budget);

/* Takes `bytes` of device slot `dev`'s budget for this process: 0, or -ENOMEM when the
 * group's holdings would pass the budget (after returning dead members' shares, at most
 * every 100 ms), or -EIDRM when this process's member slot was taken from it (another member
 * judged it dead): the process is no longer counted, and should leave. Lock-free. */
int gp_group_take(struct gp_group *g, int dev, uint64_t bytes);

/* Counts `bytes` on device slot `dev` without the budget's check: memory the device already
 * handed out. 0 or -EIDRM (as gp_group_take). Lock-free. */
int gp_group_charge(struct gp_group *g, int dev, uint64_t bytes);

/* Gives back `bytes` taken from device slot `dev`: never more than this process holds there,
 * so no figure underflows. Lock-free. */
void gp_group_give(struct gp_group *g, int dev, uint64_t bytes);

/* Device slot dev's budget (0: none), the group's holdings there, and this process's. */
void gp_group_total(const struct gp_group *g, int dev, uint64_t *budget, uint64_t *used, uint64_t *mine);

/* Returns the holdings of every dead member (a process of this pid namespace that exited, or
 * whose pid now names another process) and frees their slots. The number of members
 * returned. Safe against other members doing the same at the same time. */
int gp_group_recover(struct gp_group *g);

/* Gives back everything this process holds, frees its slot and unmaps the file. */
void gp_group_leave(struct gp_group *g);

/* As the process ends, while other threads may still take and give: returns everything
 * this process holds and frees its slot, but keeps the mapping; its later takes fail with
 * -EIDRM (and change nothing), its later gives give nothing. */
void gp_group_retire(struct gp_group *g);

/* In a child after fork: forgets the parent's membership without touching the file. */
void gp_group_forget(struct gp_group *g);

/* ---- readers (gpupool-stat) ---- */

struct gp_group_view_dev {
	unsigned char uuid[GP_GROUP_UUID_LEN];
	uint64_t budget, used, peak, recovered; /* as in gp_group_dev_slot */
};

struct gp_group_view_member {
	int pid;            /* in the member's pid namespace */
	int alive;          /* 1 alive, 0 dead (its share not yet returned), -1 cannot tell (another
			     * pid namespace, or not asked: gp_group_parse) */
	uint64_t start_ms;  /* since boot */
	uint64_t joined_ns; /* CLOCK_REALTIME */
	uint64_t held[GP_GROUP_DEVICES]; /* bytes, by the view's device index */
};

/* A copy of a group file: the devices in use in slot order, and the members. */
struct gp_group_view {
	uint32_t ndevices, nmembers;
	struct gp_group_view_dev dev[GP_GROUP_DEVICES];
	struct gp_group_view_member member[GP_GROUP_MEMBERS];
};

/* Checks `len` bytes at buf (any alignment) as a group file and copies it into *v (alive
 * -1). 0, or -EPROTO with one line in why. Pure: no I/O. */
int gp_group_parse(const void *buf, size_t len, struct gp_group_view *v, char *why, size_t cap);

/* Reads the group file at `path` read-only (no mapping: a file truncated meanwhile is a short
 * read, not a signal) into *v, with each member's liveness as this process sees it. 0, or a
 * negative errno with one line in why (gp_group_join's, and -EPROTO for a file that is not
 * a group file of this layout, or an empty one). */
int gp_group_read(const char *path, struct gp_group_view *v, char *why, size_t cap);

/* The slot key of a UUID: FNV-1a of its 16 bytes, never 0. */
uint64_t gp_group_uuid_key(const unsigned char uuid[GP_GROUP_UUID_LEN]);

#endif
