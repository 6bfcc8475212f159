/* The group file (group.h): joining, the lock-free take and give of a device's budget, the
 * return of dead members' shares, and the read-only reader. Every word of the file another
 * process writes is read with an atomic load and trusted for nothing but its own value: no
 * index, length or pointer comes from the file. Depends on base (proc) and libc only. */
#include "group.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include "proc.h"

_Static_assert(sizeof(struct gp_group_dev_slot) == 64, "a device slot is one cache line");
_Static_assert(sizeof(struct gp_group_file) ==
		       64 + GP_GROUP_DEVICES * 64 + GP_GROUP_MEMBERS * (32 + 8 * GP_GROUP_DEVICES),
	       "the file has no padding");
_Static_assert(sizeof(struct gp_group_file) < UINT32_MAX, "the header's size field");
_Static_assert(GP_GROUP_PID_BITS + GP_GROUP_START_BITS < 64, "an id fits 63 bits");

#define FILE_SIZE sizeof(struct gp_group_file)
#define PID_MASK (((uint64_t)1 << GP_GROUP_PID_BITS) - 1)
#define START_MASK (((uint64_t)1 << GP_GROUP_START_BITS) - 1)
#define RECOVER_EVERY_NS 100000000ull /* a failing take looks for dead members this often */

#define LOAD(p) atomic_load_explicit((p), memory_order_acquire)
#define RLOAD(p) atomic_load_explicit((p), memory_order_relaxed)

uint64_t gp_group_uuid_key(const unsigned char uuid[GP_GROUP_UUID_LEN])
{
	uint64_t h = 0xcbf29ce484222325ull;
	for (int i = 0; i < GP_GROUP_UUID_LEN; i++)
		h = (h ^ uuid[i]) * 0x100000001b3ull;
	return h ? h : 1;
}

__attribute__((format(printf, 3, 4)))
static void say(char *why, size_t cap, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	if (cap)
		vsnprintf(why, cap, fmt, ap);
	va_end(ap);
}

/* Subtracts n from *w, stopping at zero: a hostile or stale figure never wraps. */
static void sub_clamped(_Atomic uint64_t *w, uint64_t n)
{
	uint64_t v = RLOAD(w);
	while (n && !atomic_compare_exchange_weak_explicit(w, &v, v > n ? v - n : 0, memory_order_acq_rel,
							   memory_order_relaxed))
		;
}

/* ---- who is alive ---- */

/* This process's pid namespace (0 when /proc cannot tell). */
static uint64_t own_pidns(void)
{
	struct stat st;
	return stat("/proc/self/ns/pid", &st) == 0 ? (uint64_t)st.st_ino : 0;
}

static uint64_t start_ms_of(uint64_t since_boot_ns)
{
	return since_boot_ns / 1000000u & START_MASK;
}

/* Whether process `pid` maps the file of device `dev`, inode `ino` (/proc/<pid>/maps): 1, 0,
 * or -1 when its maps cannot be read (another user's process, hidepid). Reads in pieces of
 * a small buffer (a hooked call's stack); a line longer than it is judged by its head, where
 * the device and the inode are. */
static bool maps_line(const char *line, uint64_t dev, uint64_t ino)
{
	unsigned maj, min;
	unsigned long long in;
	return sscanf(line, "%*s %*s %*s %x:%x %llu", &maj, &min, &in) == 3 && maj == major((dev_t)dev) &&
	       min == minor((dev_t)dev) && in == ino;
}

static int maps_file(int pid, uint64_t dev, uint64_t ino)
{
	char path[64], buf[1024];
	snprintf(path, sizeof path, "/proc/%d/maps", pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	size_t have = 0;
	bool any = false, skip = false; /* skip: the rest of a long line already judged */
	int found = 0;
	while (!found) {
		ssize_t r = read(fd, buf + have, sizeof buf - 1 - have);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			close(fd);
			return -1;
		}
		if (r == 0)
			break;
		any = true;
		have += (size_t)r;
		buf[have] = '\0';
		size_t pos = 0;
		char *nl;
		while (!found && (nl = memchr(buf + pos, '\n', have - pos))) {
			*nl = '\0';
			found = !skip && maps_line(buf + pos, dev, ino);
			skip = false;
			pos = (size_t)(nl - buf) + 1;
		}
		if (pos == 0 && have == sizeof buf - 1) { /* a line longer than the buffer */
			found = !skip && maps_line(buf, dev, ino);
			skip = true;
			have = 0;
			continue;
		}
		memmove(buf, buf + pos, have - pos);
		have -= pos;
	}
	close(fd);
	return found ? 1 : any ? 0 : -1;
}

/* Whether the process `id` names still runs (in this pid namespace) as a member of the
 * group of file `dev`/`ino` (0: not checked). A pid that signal 0 cannot reach (ESRCH), a
 * zombie, a pid now held by a process started at another time, or a process that no longer
 * maps the file (it called exec: its device memory went with the old image) is dead; a
 * process this one may not see (hidepid, EPERM, maps unreadable) counts as alive. */
static bool id_alive(uint64_t id, uint64_t dev, uint64_t ino)
{
	int pid = (int)(id & PID_MASK);
	if (pid <= 0)
		return false;
	if (kill(pid, 0) != 0 && errno == ESRCH)
		return false;
	uint64_t ns;
	bool zombie;
	if (gp_proc_start(pid, &ns, &zombie) != 0)
		return true; /* hidden from this /proc, or it died just now: the next look decides */
	if (zombie || start_ms_of(ns) != id >> GP_GROUP_PID_BITS)
		return false;
	return !ino || maps_file(pid, dev, ino) != 0;
}

/* ---- the file ---- */

/* The file's header fields as a member of this version lays them out. */
static bool header_ok(const struct gp_group_file *f)
{
	return LOAD(&f->magic) == GP_GROUP_MAGIC && RLOAD(&f->version) == GP_GROUP_VERSION &&
	       RLOAD(&f->size) == FILE_SIZE && RLOAD(&f->ndevices) == GP_GROUP_DEVICES &&
	       RLOAD(&f->nmembers) == GP_GROUP_MEMBERS;
}

/* A header field that is 0 or this layout's value (an empty file being laid out by another
 * member at the same moment writes the same values). */
static bool blank_or(uint64_t v, uint64_t want)
{
	return v == 0 || v == want;
}

/* Lays out a file whose magic is 0: every byte past the header must be 0 (a file of junk that
 * happens to have the right size is not taken over), the header's fields 0 or this layout's.
 * Members laying out the same file at once store the same values; the magic goes last. A
 * word past the header found set may be another joiner's, which laid the file out first and
 * took a member slot: the caller looks at the magic again (the acquire load of the word makes
 * the magic that joiner stored before its slot visible to that look). */
static int lay_out(struct gp_group_file *f)
{
	if (!blank_or(RLOAD(&f->version), GP_GROUP_VERSION) || !blank_or(RLOAD(&f->size), FILE_SIZE) ||
	    !blank_or(RLOAD(&f->ndevices), GP_GROUP_DEVICES) || !blank_or(RLOAD(&f->nmembers), GP_GROUP_MEMBERS))
		return -EPROTO;
	const _Atomic uint64_t *w = (const _Atomic uint64_t *)(const void *)&f->spare[0];
	const _Atomic uint64_t *end = (const _Atomic uint64_t *)(const void *)(f + 1);
	for (; w < end; w++)
		if (LOAD(w)) /* acquire: see the header of a joiner whose slot this is */
			return -EPROTO;
	atomic_store_explicit(&f->version, GP_GROUP_VERSION, memory_order_relaxed);
	atomic_store_explicit(&f->size, (uint32_t)FILE_SIZE, memory_order_relaxed);
	atomic_store_explicit(&f->ndevices, GP_GROUP_DEVICES, memory_order_relaxed);
	atomic_store_explicit(&f->nmembers, GP_GROUP_MEMBERS, memory_order_relaxed);
	uint64_t zero = 0;
	atomic_compare_exchange_strong_explicit(&f->magic, &zero, GP_GROUP_MAGIC, memory_order_acq_rel,
						memory_order_acquire);
	return 0;
}

/* Why the header is not this layout's, for one line. */
static void say_layout(const struct gp_group_file *f, char *why, size_t cap)
{
	uint64_t magic = RLOAD(&f->magic);
	if (!cap)
		return;
	if (magic != GP_GROUP_MAGIC)
		snprintf(why, cap, "not a gpupool group file (magic 0x%016llx, expected 0x%016llx)",
			 (unsigned long long)magic, (unsigned long long)GP_GROUP_MAGIC);
	else
		snprintf(why, cap,
			 "a group file of another layout (version %u, %u bytes, %u devices, %u members; this "
			 "gpupool reads version %u, %zu bytes, %u devices, %u members)",
			 RLOAD(&f->version), RLOAD(&f->size), RLOAD(&f->ndevices), RLOAD(&f->nmembers),
			 GP_GROUP_VERSION, FILE_SIZE, GP_GROUP_DEVICES, GP_GROUP_MEMBERS);
}

/* What is wrong with an opened file: -EINVAL not a regular file, -EMLINK (a writer only)
 * other hard links, -EACCES writable by every user, -EPROTO a size that is neither the
 * layout's nor, for a writer, 0 (new). A writer grows and lays out what it joins: through
 * another name of the same file it would write whatever that name is (a configuration file
 * of root's, linked into a sticky directory where fs.protected_hardlinks is 0), as the
 * report and trace files refuse (base/outfile.c). A reader writes nothing. */
static int check_stat(const struct stat *st, bool writer, char *why, size_t cap)
{
	if (!S_ISREG(st->st_mode)) {
		say(why, cap, "%s", "it is not a regular file");
		return -EINVAL;
	}
	if (writer && st->st_nlink > 1) {
		if (cap)
			snprintf(why, cap,
				 "it has %llu hard links: joining would grow and lay out the file under its other "
				 "name too, so it is not joined (a group file has one name: remove the other links, "
				 "or name a new file)",
				 (unsigned long long)st->st_nlink);
		return -EMLINK;
	}
	if (st->st_mode & S_IWOTH) {
		say(why, cap, "%s", "it is writable by every user (chmod o-w it: 0660 for a Unix group, 0600 for one user)");
		return -EACCES;
	}
	if ((st->st_size != 0 || !writer) && (size_t)st->st_size != FILE_SIZE) {
		if (cap)
			snprintf(why, cap, "not a gpupool group file: %lld bytes, expected %zu%s", (long long)st->st_size,
				 FILE_SIZE, writer ? " (or an empty file)" : "");
		return -EPROTO;
	}
	return 0;
}

/* In a sticky directory that other users may write (/tmp, /dev/shm), a file owned by neither
 * this user nor the directory's owner is not joined: the rule Linux's fs.protected_regular
 * (at 2) applies to an O_CREAT open, applied whatever the sysctl says. Such a file may have
 * been planted by another user, who can truncate it under the members at any moment, and a
 * member's next load or store past its end is a SIGBUS. -EACCES, or 0. */
static int check_owner(const struct stat *dir, const struct stat *st, char *why, size_t cap)
{
	if (!(dir->st_mode & S_ISVTX) || !(dir->st_mode & (S_IWGRP | S_IWOTH)) || st->st_uid == geteuid() ||
	    st->st_uid == dir->st_uid)
		return 0;
	if (cap)
		snprintf(why, cap,
			 "it is owned by uid %u, who is neither this user nor the owner of its sticky directory "
			 "(uid %u): a file another user planted there could be truncated under the members, so it "
			 "is not joined (the rule of fs.protected_regular); remove it, or keep the group file in a "
			 "directory only the group's users may write",
			 (unsigned)st->st_uid, (unsigned)dir->st_uid);
	return -EACCES;
}

/* The directory of `path` (O_PATH, so that the checks and the open are of one directory),
 * with *base its last component. A negative errno with why when it cannot be opened. */
static int open_dir(const char *path, const char **base, struct stat *dir, char *why, size_t cap)
{
	char name[PATH_MAX];
	const char *slash = strrchr(path, '/');
	size_t n = slash ? (slash == path ? 1 : (size_t)(slash - path)) : 1;
	if (n >= sizeof name) {
		say(why, cap, "%s", strerror(ENAMETOOLONG));
		return -ENAMETOOLONG;
	}
	memcpy(name, slash ? path : ".", n);
	name[n] = '\0';
	*base = slash ? slash + 1 : path;
	int dfd = open(name, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0 || fstat(dfd, dir) != 0) {
		int e = errno;
		say(why, cap, "%s", strerror(e));
		if (dfd >= 0)
			close(dfd);
		return -e;
	}
	return dfd;
}

/* What the name shows before it is opened (no link followed): -ELOOP a symbolic link, -EINVAL
 * not a regular file (a fifo or a device is never opened), and a member's check_owner. */
static int check_name(const struct stat *dir, const struct stat *st, bool writer, char *why, size_t cap)
{
	if (S_ISLNK(st->st_mode)) {
		say(why, cap, "%s", "it is a symbolic link (not followed)");
		return -ELOOP;
	}
	if (!S_ISREG(st->st_mode)) {
		say(why, cap, "%s", "it is not a regular file");
		return -EINVAL;
	}
	return writer ? check_owner(dir, st, why, cap) : 0;
}

static void (*open_hook)(const char *path); /* tests only: gp_group_set_open_hook */

void gp_group_set_open_hook(void (*hook)(const char *path)) { open_hook = hook; }

/* After a writer's checks of the descriptor: the name `base` in `dfd` names the file opened,
 * and that file has one link, both in one look. The descriptor's own count is not enough:
 * another user may link someone else's file at the name just before the open (which, with
 * O_CREAT, opens what is there) and remove that link before the descriptor is looked at,
 * leaving the file opened with one link, its own name elsewhere. A name that names the file
 * opened, of one link, is that file's only name. -ESTALE, or 0. */
static int check_same(int dfd, const char *base, const struct stat *st, char *why, size_t cap)
{
	struct stat now;
	if (fstatat(dfd, base, &now, AT_SYMLINK_NOFOLLOW) == 0 && now.st_dev == st->st_dev && now.st_ino == st->st_ino &&
	    now.st_nlink == 1)
		return 0;
	say(why, cap, "%s", "its name was removed, replaced or linked elsewhere while it was being opened, so it is not "
			    "joined (look at who else writes that directory)");
	return -ESTALE;
}

/* Opens `path` without following a symbolic link or blocking on a fifo, and checks it; a
 * writer (a member) checks its owner too, before the open (so that the line says why where
 * the kernel's fs.protected_regular would refuse the open) and on the descriptor, and that
 * the name names the file it opened, of one link (check_same). */
static int open_checked(const char *path, bool writer, char *why, size_t cap, struct stat *st)
{
	struct stat dir;
	const char *base;
	int dfd = open_dir(path, &base, &dir, why, cap);
	if (dfd < 0)
		return dfd;
	int flags = (writer ? O_RDWR | O_CREAT : O_RDONLY) | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC;
	int fd = -1, rc = fstatat(dfd, base, st, AT_SYMLINK_NOFOLLOW) == 0 ? check_name(&dir, st, writer, why, cap) : 0;
	if (!rc && (fd = openat(dfd, base, flags, 0600)) < 0) {
		rc = -errno;
		say(why, cap, "%s", rc == -ELOOP ? "it is a symbolic link (not followed)" : strerror(-rc));
	}
	if (fd >= 0) {
		if (writer && open_hook)
			open_hook(path);
		rc = fstat(fd, st) != 0 ? -errno : check_stat(st, writer, why, cap);
		if (!rc && writer)
			rc = check_owner(&dir, st, why, cap);
		if (!rc && writer)
			rc = check_same(dfd, base, st, why, cap);
		if (rc && rc != -EINVAL && rc != -EACCES && rc != -EPROTO && rc != -EMLINK && rc != -ESTALE)
			say(why, cap, "%s", strerror(-rc));
	}
	close(dfd);
	if (rc && fd >= 0)
		close(fd);
	return rc ? rc : fd;
}

/* ---- members ---- */

static void (*join_hook)(const char *path); /* tests only: gp_group_set_join_hook */

void gp_group_set_join_hook(void (*hook)(const char *path)) { join_hook = hook; }

static void set_held_gen(struct gp_group_member_slot *m, uint64_t gen)
{
	for (unsigned d = 0; d < GP_GROUP_DEVICES; d++)
		atomic_store_explicit(&m->held[d], (gen & GP_GROUP_GEN_MASK) << GP_GROUP_HELD_BITS,
				      memory_order_release);
}

/* Returns dead member `m` (id `id`) to the group: each holding of its generation zeroed by
 * compare-exchange (so that of several members doing this at once, each byte is returned by
 * one) and taken off the device's figure, then the slot freed. The generation read between
 * two loads of the same id is the dead member's: a new owner bumps it only after the id has
 * changed. True when this call freed the slot. */
static bool reclaim(struct gp_group_file *f, struct gp_group_member_slot *m, uint64_t id)
{
	uint64_t gen = LOAD(&m->gen) & GP_GROUP_GEN_MASK;
	if (LOAD(&m->id) != id)
		return false;
	for (unsigned d = 0; d < GP_GROUP_DEVICES; d++) {
		uint64_t h = LOAD(&m->held[d]);
		while (h >> GP_GROUP_HELD_BITS == gen && (h & GP_GROUP_HELD_MASK)) {
			if (atomic_compare_exchange_weak_explicit(&m->held[d], &h, h & ~GP_GROUP_HELD_MASK,
								  memory_order_acq_rel, memory_order_acquire)) {
				sub_clamped(&f->dev[d].used, h & GP_GROUP_HELD_MASK);
				atomic_fetch_add_explicit(&f->dev[d].recovered, h & GP_GROUP_HELD_MASK,
							  memory_order_relaxed);
				break;
			}
		}
	}
	return atomic_compare_exchange_strong_explicit(&m->id, &id, 0, memory_order_acq_rel, memory_order_relaxed);
}

int gp_group_recover(struct gp_group *g)
{
	struct gp_group_file *f = g->f;
	int n = 0;
	if (!f || !g->pidns)
		return 0; /* without /proc's namespace, no member can be judged */
	for (unsigned i = 0; i < GP_GROUP_MEMBERS; i++) {
		struct gp_group_member_slot *m = &f->member[i];
		uint64_t id = LOAD(&m->id);
		if (!id || i == g->me || LOAD(&m->pidns) != g->pidns)
			continue;
		/* this process's own id in another slot: its image before an exec, whose device
		 * memory went with the old address space */
		if ((id == g->id || !id_alive(id, g->fdev, g->fino)) && reclaim(f, m, id))
			n++;
	}
	return n;
}

/* Takes a free member slot for this process. 0 or -ENOSPC. */
static int claim_slot(struct gp_group *g)
{
	struct gp_group_file *f = g->f;
	for (int round = 0; round < 2; round++) {
		for (unsigned i = 0; i < GP_GROUP_MEMBERS; i++) {
			struct gp_group_member_slot *m = &f->member[i];
			uint64_t zero = 0;
			if (RLOAD(&m->id) || !atomic_compare_exchange_strong_explicit(&m->id, &zero, g->id,
										      memory_order_acq_rel,
										      memory_order_relaxed))
				continue;
			g->me = i;
			g->gen = (atomic_fetch_add_explicit(&m->gen, 1, memory_order_acq_rel) + 1) & GP_GROUP_GEN_MASK;
			set_held_gen(m, g->gen);
			atomic_store_explicit(&m->joined_ns, gp_clock_ns(CLOCK_REALTIME), memory_order_relaxed);
			atomic_store_explicit(&m->pidns, g->pidns, memory_order_release);
			return 0;
		}
		g->me = GP_GROUP_MEMBERS; /* no slot of ours to skip */
		if (round == 0 && gp_group_recover(g) == 0)
			break;
	}
	return -ENOSPC;
}

int gp_group_join(struct gp_group *g, const char *path, char *why, size_t cap)
{
	struct stat st;
	memset(g, 0, sizeof *g);
	if (cap)
		why[0] = '\0';
	uint64_t start;
	bool zombie;
	pid_t pid = getpid();
	if (gp_proc_start(pid, &start, &zombie) != 0 || (uint64_t)pid > PID_MASK) {
		say(why, cap, "%s", "/proc/self/stat cannot be read (a member is named by its pid and start time)");
		return -EIO;
	}
	int fd = open_checked(path, true, why, cap, &st);
	if (fd < 0)
		return fd;
	/* allocated, not sparse: a write to a hole of a full tmpfs would be a SIGBUS. Where the C
	 * library or the filesystem cannot reserve, the file is only sized (writing zeros could
	 * wipe what a member joining at the same moment has laid out) */
	int rc;
	while ((rc = posix_fallocate(fd, 0, (off_t)FILE_SIZE)) == EINTR)
		;
	if (rc == EOPNOTSUPP)
		rc = (size_t)st.st_size == FILE_SIZE || ftruncate(fd, (off_t)FILE_SIZE) == 0 ? 0 : errno;
	if (rc == 0 && fstat(fd, &st) == 0 && (size_t)st.st_size != FILE_SIZE)
		rc = EPROTO; /* grown by another writer meanwhile */
	if (rc) {
		if (rc == EPROTO && cap)
			snprintf(why, cap, "not a gpupool group file: %lld bytes, expected %zu", (long long)st.st_size,
				 FILE_SIZE);
		else
			say(why, cap, "cannot allocate it: %s", strerror(rc));
		close(fd);
		return -rc;
	}
	void *map = mmap(NULL, FILE_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	rc = map == MAP_FAILED ? -errno : 0;
	close(fd);
	if (rc) {
		say(why, cap, "cannot map it: %s", strerror(-rc));
		return rc;
	}
	struct gp_group_file *f = map;
	if (LOAD(&f->magic) == 0) {
		if (join_hook)
			join_hook(path);
		/* a layout that fails may have lost the race to another joiner, whose layout is
		 * then this one's: the header is judged again either way, not the failure */
		(void)lay_out(f);
	}
	if (!header_ok(f)) {
		say_layout(f, why, cap);
		munmap(map, FILE_SIZE);
		return -EPROTO;
	}
	g->f = f;
	g->id = (uint64_t)pid | start_ms_of(start) << GP_GROUP_PID_BITS;
	g->pidns = own_pidns();
	g->fdev = (uint64_t)st.st_dev;
	g->fino = (uint64_t)st.st_ino;
	g->me = GP_GROUP_MEMBERS;
	(void)gp_group_recover(g);
	if (claim_slot(g) != 0) {
		if (cap)
			snprintf(why, cap, "all %u member slots are held by live processes", GP_GROUP_MEMBERS);
		munmap(map, FILE_SIZE);
		memset(g, 0, sizeof *g);
		return -ENOSPC;
	}
	return 0;
}

static void uuid_words(const unsigned char uuid[GP_GROUP_UUID_LEN], uint64_t w[2])
{
	memcpy(w, uuid, GP_GROUP_UUID_LEN);
}

int gp_group_device(struct gp_group *g, const unsigned char uuid[GP_GROUP_UUID_LEN], uint64_t budget)
{
	struct gp_group_file *f = g->f;
	uint64_t key = gp_group_uuid_key(uuid), w[2];
	uuid_words(uuid, w);
	if (!f)
		return -ENOENT;
	for (unsigned i = 0; i < GP_GROUP_DEVICES; i++) {
		struct gp_group_dev_slot *s = &f->dev[i];
		uint64_t k = LOAD(&s->key);
		if (!k) {
			uint64_t zero = 0;
			if (atomic_compare_exchange_strong_explicit(&s->key, &zero, key, memory_order_acq_rel,
								    memory_order_acquire))
				k = key;
			else
				k = zero; /* another member's device, or this one's */
		}
		if (k != key)
			continue;
		/* the same bytes from every member of this device: writing them again is harmless */
		uint64_t u0 = LOAD(&s->uuid[0]), u1 = LOAD(&s->uuid[1]);
		if ((u0 || u1) && (u0 != w[0] || u1 != w[1]))
			continue; /* another device of the same key */
		atomic_store_explicit(&s->uuid[0], w[0], memory_order_relaxed);
		atomic_store_explicit(&s->uuid[1], w[1], memory_order_relaxed);
		uint64_t none = 0;
		if (budget)
			atomic_compare_exchange_strong_explicit(&s->budget, &none, budget, memory_order_acq_rel,
								memory_order_relaxed);
		return (int)i;
	}
	return -ENOSPC;
}

/* Adds `bytes` to this process's own holding on dev, which its slot's generation must still
 * be: -EIDRM otherwise (another member returned it for dead), or past the holding's bits. */
static int hold(struct gp_group *g, int dev, uint64_t bytes)
{
	_Atomic uint64_t *held = &g->f->member[g->me].held[dev];
	uint64_t h = RLOAD(held);
	do {
		if (h >> GP_GROUP_HELD_BITS != g->gen || bytes > GP_GROUP_HELD_MASK ||
		    (h & GP_GROUP_HELD_MASK) > GP_GROUP_HELD_MASK - bytes)
			return -EIDRM;
	} while (!atomic_compare_exchange_weak_explicit(held, &h, h + bytes, memory_order_acq_rel, memory_order_relaxed));
	return 0;
}

static void raise_peak(struct gp_group_dev_slot *s, uint64_t used)
{
	uint64_t peak = RLOAD(&s->peak);
	while (peak < used &&
	       !atomic_compare_exchange_weak_explicit(&s->peak, &peak, used, memory_order_relaxed, memory_order_relaxed))
		;
}

int gp_group_charge(struct gp_group *g, int dev, uint64_t bytes)
{
	struct gp_group_dev_slot *s = &g->f->dev[dev];
	if (bytes > GP_GROUP_HELD_MASK || hold(g, dev, bytes) != 0)
		return -EIDRM;
	/* the device's figure is the file's (another member may have written anything there):
	 * it stops at UINT64_MAX rather than wrap to a small number */
	uint64_t u = RLOAD(&s->used), n;
	do
		n = u > UINT64_MAX - bytes ? UINT64_MAX : u + bytes;
	while (!atomic_compare_exchange_weak_explicit(&s->used, &u, n, memory_order_acq_rel, memory_order_relaxed));
	raise_peak(s, n);
	return 0;
}

int gp_group_take(struct gp_group *g, int dev, uint64_t bytes)
{
	struct gp_group_dev_slot *s = &g->f->dev[dev];
	for (int attempt = 0;; attempt++) {
		uint64_t budget = LOAD(&s->budget), u = RLOAD(&s->used), cap = budget ? budget : GP_GROUP_HELD_MASK;
		bool fits;
		while ((fits = bytes <= cap && u <= cap - bytes) &&
		       !atomic_compare_exchange_weak_explicit(&s->used, &u, u + bytes, memory_order_acq_rel,
							      memory_order_relaxed))
			;
		if (fits) {
			raise_peak(s, u + bytes);
			break;
		}
		/* past the budget: dead members' shares first, then once more */
		uint64_t now = gp_clock_ns(CLOCK_MONOTONIC), last = RLOAD(&g->recover_ns);
		if (attempt || (last && now - last < RECOVER_EVERY_NS) ||
		    !atomic_compare_exchange_strong(&g->recover_ns, &last, now) || gp_group_recover(g) == 0)
			return -ENOMEM;
	}
	/* this process's own word: only a member that judged it dead changes it otherwise */
	if (hold(g, dev, bytes) != 0) {
		sub_clamped(&s->used, bytes);
		return -EIDRM;
	}
	return 0;
}

void gp_group_give(struct gp_group *g, int dev, uint64_t bytes)
{
	_Atomic uint64_t *held = &g->f->member[g->me].held[dev];
	uint64_t h = RLOAD(held), n;
	do {
		n = h & GP_GROUP_HELD_MASK;
		n = n < bytes ? n : bytes;
		if (h >> GP_GROUP_HELD_BITS != g->gen || !n)
			return; /* nothing of this process's left to give */
	} while (!atomic_compare_exchange_weak_explicit(held, &h, h - n, memory_order_acq_rel, memory_order_relaxed));
	sub_clamped(&g->f->dev[dev].used, n);
}

void gp_group_total(const struct gp_group *g, int dev, uint64_t *budget, uint64_t *used, uint64_t *mine)
{
	const struct gp_group_dev_slot *s = &g->f->dev[dev];
	uint64_t h = LOAD(&g->f->member[g->me].held[dev]);
	*budget = LOAD(&s->budget);
	*used = LOAD(&s->used);
	*mine = h >> GP_GROUP_HELD_BITS == g->gen ? h & GP_GROUP_HELD_MASK : 0;
}

void gp_group_leave(struct gp_group *g)
{
	struct gp_group_file *f = g->f;
	if (!f)
		return;
	struct gp_group_member_slot *m = &f->member[g->me];
	for (unsigned d = 0; d < GP_GROUP_DEVICES; d++)
		gp_group_give(g, (int)d, GP_GROUP_HELD_MASK);
	uint64_t id = g->id;
	atomic_compare_exchange_strong_explicit(&m->id, &id, 0, memory_order_acq_rel, memory_order_relaxed);
	munmap(f, FILE_SIZE);
	memset(g, 0, sizeof *g);
}

void gp_group_retire(struct gp_group *g)
{
	struct gp_group_file *f = g->f;
	if (!f)
		return;
	struct gp_group_member_slot *m = &f->member[g->me];
	/* each holding returned and marked with another generation in one exchange: a later hold
	 * of this process's then fails, so nothing is added to the slot after it is returned */
	uint64_t other = ((g->gen + 1) & GP_GROUP_GEN_MASK) << GP_GROUP_HELD_BITS;
	for (unsigned d = 0; d < GP_GROUP_DEVICES; d++) {
		uint64_t h = LOAD(&m->held[d]);
		while (h >> GP_GROUP_HELD_BITS == g->gen &&
		       !atomic_compare_exchange_weak_explicit(&m->held[d], &h, other, memory_order_acq_rel,
							      memory_order_acquire))
			;
		if (h >> GP_GROUP_HELD_BITS == g->gen)
			sub_clamped(&f->dev[d].used, h & GP_GROUP_HELD_MASK);
	}
	uint64_t id = g->id;
	atomic_compare_exchange_strong_explicit(&m->id, &id, 0, memory_order_acq_rel, memory_order_relaxed);
}

void gp_group_forget(struct gp_group *g)
{
	if (g->f)
		munmap(g->f, FILE_SIZE);
	memset(g, 0, sizeof *g);
}

/* ---- readers ---- */

static uint64_t rd64(const unsigned char *b, size_t off)
{
	uint64_t v;
	memcpy(&v, b + off, sizeof v);
	return v;
}

static uint32_t rd32(const unsigned char *b, size_t off)
{
	uint32_t v;
	memcpy(&v, b + off, sizeof v);
	return v;
}

#define DEV_OFF(i, field) (offsetof(struct gp_group_file, dev) + (size_t)(i) * sizeof(struct gp_group_dev_slot) + \
			   offsetof(struct gp_group_dev_slot, field))
#define MEM_OFF(i, field) (offsetof(struct gp_group_file, member) + \
			   (size_t)(i) * sizeof(struct gp_group_member_slot) + offsetof(struct gp_group_member_slot, field))

int gp_group_parse(const void *buf, size_t len, struct gp_group_view *v, char *why, size_t cap)
{
	const unsigned char *b = buf;
	memset(v, 0, sizeof *v);
	if (cap)
		why[0] = '\0';
	if (len != FILE_SIZE) {
		if (cap)
			snprintf(why, cap, "not a gpupool group file: %zu bytes, expected %zu", len, FILE_SIZE);
		return -EPROTO;
	}
	uint64_t magic = rd64(b, offsetof(struct gp_group_file, magic));
	uint32_t version = rd32(b, offsetof(struct gp_group_file, version)), size = rd32(b, offsetof(struct gp_group_file, size));
	uint32_t nd = rd32(b, offsetof(struct gp_group_file, ndevices)), nm = rd32(b, offsetof(struct gp_group_file, nmembers));
	if (magic != GP_GROUP_MAGIC || version != GP_GROUP_VERSION || size != FILE_SIZE || nd != GP_GROUP_DEVICES ||
	    nm != GP_GROUP_MEMBERS) {
		if (!cap)
			return -EPROTO;
		if (magic != GP_GROUP_MAGIC)
			snprintf(why, cap, "not a gpupool group file (magic 0x%016llx, expected 0x%016llx)%s",
				 (unsigned long long)magic, (unsigned long long)GP_GROUP_MAGIC,
				 magic ? "" : ": no member has laid it out yet");
		else
			snprintf(why, cap,
				 "a group file of another layout (version %u, %u bytes, %u devices, %u members; this "
				 "gpupool reads version %u, %zu bytes, %u devices, %u members)",
				 version, size, nd, nm, GP_GROUP_VERSION, FILE_SIZE, GP_GROUP_DEVICES, GP_GROUP_MEMBERS);
		return -EPROTO;
	}
	int map[GP_GROUP_DEVICES]; /* device slot -> view index, -1 for a free slot */
	for (unsigned i = 0; i < GP_GROUP_DEVICES; i++) {
		map[i] = -1;
		if (!rd64(b, DEV_OFF(i, key)))
			continue;
		struct gp_group_view_dev *d = &v->dev[v->ndevices];
		map[i] = (int)v->ndevices++;
		memcpy(d->uuid, b + DEV_OFF(i, uuid), GP_GROUP_UUID_LEN);
		d->budget = rd64(b, DEV_OFF(i, budget));
		d->used = rd64(b, DEV_OFF(i, used));
		d->peak = rd64(b, DEV_OFF(i, peak));
		d->recovered = rd64(b, DEV_OFF(i, recovered));
	}
	for (unsigned i = 0; i < GP_GROUP_MEMBERS; i++) {
		uint64_t id = rd64(b, MEM_OFF(i, id));
		if (!id)
			continue;
		struct gp_group_view_member *m = &v->member[v->nmembers++];
		uint64_t gen = rd64(b, MEM_OFF(i, gen)) & GP_GROUP_GEN_MASK;
		m->pid = (int)(id & PID_MASK);
		m->start_ms = id >> GP_GROUP_PID_BITS & START_MASK;
		m->joined_ns = rd64(b, MEM_OFF(i, joined_ns));
		m->alive = -1;
		for (unsigned d = 0; d < GP_GROUP_DEVICES; d++) {
			uint64_t h = rd64(b, MEM_OFF(i, held) + d * sizeof(uint64_t));
			/* a holding of an earlier owner of the slot is nobody's */
			if (map[d] >= 0 && h >> GP_GROUP_HELD_BITS == gen)
				m->held[map[d]] += h & GP_GROUP_HELD_MASK;
		}
	}
	return 0;
}

int gp_group_read(const char *path, struct gp_group_view *v, char *why, size_t cap)
{
	struct stat st;
	memset(v, 0, sizeof *v);
	int fd = open_checked(path, false, why, cap, &st);
	if (fd < 0)
		return fd;
	/* the file's size once (a reader, never in a hooked call: the stack of a program's thread
	 * is not asked for it) */
	unsigned char *buf = malloc(FILE_SIZE + 1);
	if (!buf) {
		close(fd);
		say(why, cap, "%s", strerror(ENOMEM));
		return -ENOMEM;
	}
	/* one byte more than the layout: a file grown meanwhile reads as the wrong size */
	size_t got = 0;
	while (got < FILE_SIZE + 1) {
		ssize_t r = pread(fd, buf + got, FILE_SIZE + 1 - got, (off_t)got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		got += (size_t)r;
	}
	close(fd);
	int rc = gp_group_parse(buf, got, v, why, cap);
	if (rc) {
		free(buf);
		return rc;
	}
	uint64_t ns = own_pidns();
	for (uint32_t i = 0, j = 0; i < GP_GROUP_MEMBERS && j < v->nmembers; i++) {
		uint64_t id = rd64(buf, MEM_OFF(i, id));
		if (!id)
			continue;
		if (ns && rd64(buf, MEM_OFF(i, pidns)) == ns)
			v->member[j].alive = id_alive(id, (uint64_t)st.st_dev, (uint64_t)st.st_ino);
		j++;
	}
	free(buf);
	return 0;
}
