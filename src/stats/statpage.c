/* The statistics page file: creation, slots, release requests and unlink for the writer;
 * validation, snapshots, staleness and cleanup for readers (see statpage.h).
 * Depends on libc, log.h and stats.h only: no CUDA, no pool, no stdio streams. Nothing in
 * the page is a lock; the only lock here is a process-local spin flag for slot activation. */
#include "statpage.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <sched.h>

#include "log.h"
#include "proc.h"
#include "stats.h"

/* A process started this long after a page was created cannot be the page's writer. */
#define GP_START_SLACK_NS (2 * GP_NS_PER_S)

static struct gpupool_page *open_page; /* the page gp_statpage_open made */
static pid_t open_pid;                 /* ...in this process */
static char open_path[PATH_MAX];
static atomic_flag slot_lock = ATOMIC_FLAG_INIT;
static atomic_bool open_logged;

static void why_set(char *why, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void why_set(char *why, size_t len, const char *fmt, ...)
{
	if (!why || !len)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, len, fmt, ap);
	va_end(ap);
}

/* What a file of mode `m` is, for a message ("a fifo"). */
static const char *kind_of(mode_t m)
{
	return S_ISLNK(m) ? "a symbolic link" : S_ISDIR(m) ? "a directory" : S_ISFIFO(m) ? "a fifo"
	       : S_ISSOCK(m) ? "a socket" : S_ISCHR(m) || S_ISBLK(m) ? "a device" : "not a regular file";
}

const char *gp_statpage_dir(void)
{
	const char *d = secure_getenv(GP_STATPAGE_DIR_ENV);
	return d && *d ? d : GP_STATPAGE_DIR_DEFAULT;
}

int gp_statpage_name_pid(const char *name)
{
	size_t pl = sizeof GP_STATPAGE_NAME - 1;
	if (strncmp(name, GP_STATPAGE_NAME, pl) != 0)
		return -1;
	const char *d = name + pl;
	if (*d < '1' || *d > '9')
		return -1;
	long v = 0;
	for (; *d; d++) {
		if (*d < '0' || *d > '9')
			return -1;
		v = v * 10 + (*d - '0');
		if (v > INT_MAX)
			return -1;
	}
	return (int)v;
}

/* The start time of `pid` as CLOCK_REALTIME ns (0 when unknown) and whether it is a zombie
 * (it has exited; its page will never be unlinked). */
static int proc_start(int pid, uint64_t *start_ns, bool *zombie)
{
	uint64_t since_boot;
	*start_ns = 0;
	int rc = gp_proc_start(pid, &since_boot, zombie);
	if (rc)
		return rc;
	uint64_t boot = gp_clock_ns(CLOCK_BOOTTIME), now = gp_clock_ns(CLOCK_REALTIME);
	if (!boot || !now || now < boot)
		return -EIO;
	*start_ns = now - boot + since_boot;
	return 0;
}

/* True when `pid` is gone or no longer the process that created a page at
 * start_time_ns (CLOCK_REALTIME): kill(pid, 0) == ESRCH or a later /proc start time. */
static bool gp_statpage_pid_stale(int pid, uint64_t start_time_ns)
{
	if (pid <= 0)
		return true;
	if (kill(pid, 0) != 0 && errno == ESRCH)
		return true;
	uint64_t st;
	bool zombie;
	if (proc_start(pid, &st, &zombie) != 0)
		return false; /* alive by kill(2); /proc hidden or another pid namespace */
	if (zombie)
		return true;
	return start_time_ns && st > start_time_ns && st - start_time_ns > GP_START_SLACK_NS;
}

/* ---- writer ---------------------------------------------------------------------- */

static void log_open_failure(const char *path, const char *what, const char *why)
{
	if (!atomic_exchange(&open_logged, true))
		gp_log(GP_LOG_INFO, "statistics page %s: %s: %s; counters stay private", path, what, why);
}

/* Gives the page's `len` bytes their blocks before the page is mapped. ftruncate alone
 * leaves a sparse file, and on a full filesystem (a full /dev/shm) the first store through
 * the mapping then faults: SIGBUS, which kills the program at its first cudaMalloc. With the
 * blocks reserved, every store lands. posix_fallocate is tried again when a signal
 * interrupts it (EINTR, a bounded number of times); where the filesystem or the C library
 * cannot reserve (EOPNOTSUPP, ENOSYS), writing zeros over the page allocates the same
 * blocks, and fails the same way on a full filesystem. 0, or the errno. */
static int reserve_blocks(int fd, off_t len)
{
	int rc = EINTR;
	for (int tries = 0; rc == EINTR && tries < 100; tries++)
		rc = posix_fallocate(fd, 0, len);
	if (rc != EOPNOTSUPP && rc != ENOSYS)
		return rc;
	static const char zeros[4096];
	for (off_t off = 0; off < len;) {
		size_t n = (size_t)(len - off) < sizeof zeros ? (size_t)(len - off) : sizeof zeros;
		ssize_t w = pwrite(fd, zeros, n, off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return w < 0 ? errno : EIO;
		off += w;
	}
	return 0;
}

/* Why a page could not be created at `path` with O_EXCL|O_NOFOLLOW (EEXIST) and was not
 * replaced (is_leftover said no): what is at the name, for the log. */
static const char *in_the_way(const char *path, char *buf, size_t len)
{
	struct stat st;
	if (lstat(path, &st) != 0)
		snprintf(buf, len, "the name was taken, and is gone again");
	else if (!S_ISREG(st.st_mode))
		snprintf(buf, len, "%s is in the way", kind_of(st.st_mode));
	else if (st.st_uid != geteuid())
		snprintf(buf, len, "a file of uid %u is in the way", (unsigned)st.st_uid);
	else
		snprintf(buf, len, "the page of a process with the same pid (another pid namespace?) is in the way");
	return buf;
}

void gp_statpage_init(struct gpupool_page *pg)
{
	pg->version = GPUPOOL_PAGE_VERSION;
	pg->size = (uint32_t)sizeof *pg;
	pg->pid = (int32_t)getpid();
	pg->start_time_ns = gp_clock_ns(CLOCK_REALTIME);
	memset(pg->comm, 0, sizeof pg->comm);
	int fd = open("/proc/self/comm", O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		ssize_t n = read(fd, pg->comm, sizeof pg->comm - 1);
		close(fd);
		if (n < 0)
			n = 0;
		pg->comm[n] = '\0';
		char *nl = strchr(pg->comm, '\n');
		if (nl)
			*nl = '\0';
	}
	snprintf(pg->lib_version, sizeof pg->lib_version, "%s", GP_VERSION);
	/* readers check the magic first: publish it after the rest of the header */
	__atomic_store_n(&pg->magic, GPUPOOL_PAGE_MAGIC, __ATOMIC_RELEASE);
}

/* True when the existing file at path is a page left by a dead process that had our pid:
 * a regular file we own whose header is not a valid page created after we started. */
static bool is_leftover(const char *path)
{
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (fd < 0)
		return false;
	struct stat st;
	struct gpupool_page hdr;
	bool left = false;
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid()) {
		uint64_t mine;
		bool z;
		ssize_t n = pread(fd, &hdr, offsetof(struct gpupool_page, dev), 0);
		if (n != (ssize_t)offsetof(struct gpupool_page, dev) || hdr.magic != GPUPOOL_PAGE_MAGIC)
			left = true;
		else if (proc_start(getpid(), &mine, &z) == 0 && hdr.start_time_ns + GP_START_SLACK_NS < mine)
			left = true;
	}
	close(fd);
	return left;
}

struct gpupool_page *gp_statpage_open(void)
{
	pid_t pid = getpid();
	char path[PATH_MAX];
	if (open_page && open_pid == pid) {
		log_open_failure("(this process)", "cannot open a second one", strerror(EBUSY));
		return NULL;
	}
	int len = snprintf(path, sizeof path, "%s/%s%d", gp_statpage_dir(), GP_STATPAGE_NAME, (int)pid);
	if (len < 0 || (size_t)len >= sizeof path) {
		log_open_failure(gp_statpage_dir(), "cannot name it", strerror(ENAMETOOLONG));
		return NULL;
	}
	int flags = O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC;
	int fd = open(path, flags, 0600);
	int err = fd < 0 ? errno : 0; /* before is_leftover's own calls change errno */
	if (fd < 0 && err == EEXIST && is_leftover(path)) {
		gp_log(GP_LOG_INFO, "replacing %s, left by a dead process", path);
		unlink(path);
		fd = open(path, flags, 0600);
		err = fd < 0 ? errno : 0;
	}
	if (fd < 0) {
		char buf[96];
		log_open_failure(path, "cannot create it",
				 err == EEXIST ? in_the_way(path, buf, sizeof buf) : strerror(err));
		return NULL;
	}
	struct gpupool_page *pg = MAP_FAILED;
	int rerr = 0;
	if (fchmod(fd, 0600) != 0 || ftruncate(fd, (off_t)sizeof *pg) != 0)
		err = errno;
	else if ((rerr = reserve_blocks(fd, (off_t)sizeof *pg)) != 0)
		err = rerr;
	else {
		pg = mmap(NULL, sizeof *pg, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		if (pg == MAP_FAILED)
			err = errno;
	}
	close(fd);
	if (err) {
		unlink(path);
		if (rerr) {
			/* a full /dev/shm, most likely: the program runs on, without a page; one warning,
			 * since unlike a name in the way it is the machine's state, not another user's */
			if (!atomic_exchange(&open_logged, true))
				gp_log(GP_LOG_WARN, "statistics page %s: cannot reserve its %zu bytes: %s; counters "
				       "stay private (gpupool-stat will not list this process)", path, sizeof *pg,
				       strerror(rerr));
		} else {
			log_open_failure(path, "cannot map it", strerror(err));
		}
		return NULL;
	}
	gp_statpage_init(pg);
	memcpy(open_path, path, (size_t)len + 1);
	open_pid = pid;
	open_page = pg;
	return pg;
}

struct gpupool_device_stats *gp_statpage_slot(struct gpupool_page *pg, int device)
{
	struct gpupool_device_stats *s = NULL;
	if (!pg || device < 0)
		return NULL;
	while (atomic_flag_test_and_set_explicit(&slot_lock, memory_order_acquire))
		sched_yield();
	uint32_t n = pg->ndevices;
	for (uint32_t i = 0; i < n && i < GPUPOOL_MAX_DEVICES; i++)
		if (pg->dev[i].active && pg->dev[i].device == device)
			s = &pg->dev[i];
	if (!s && n < GPUPOOL_MAX_DEVICES) {
		s = &pg->dev[n];
		gp_stats_begin(s);
		s->device = device;
		s->active = 1;
		gp_stats_end(s);
		/* a reader that sees the new count sees an initialised slot */
		__atomic_store_n(&pg->ndevices, n + 1, __ATOMIC_RELEASE);
	}
	atomic_flag_clear_explicit(&slot_lock, memory_order_release);
	return s;
}

void gp_statpage_unlink(struct gpupool_page *pg)
{
	if (pg && pg == open_page && open_pid == getpid())
		unlink(open_path);
}

void gp_statpage_close(struct gpupool_page *pg)
{
	if (!pg || pg != open_page)
		return;
	gp_statpage_unlink(pg);
	munmap(pg, sizeof *pg);
	open_page = NULL;
}

void gp_statpage_forget(struct gpupool_page *pg)
{
	/* the parent's threads may have held the flag at fork: nobody holds it here */
	atomic_flag_clear(&slot_lock);
	if (!pg || pg != open_page)
		return;
	munmap(pg, sizeof *pg);
	open_page = NULL;
}

bool gp_statpage_release_pending(const struct gpupool_page *pg, uint64_t *req)
{
	if (!pg)
		return false;
	uint64_t r = __atomic_load_n(&pg->release_request, __ATOMIC_ACQUIRE);
	if (r == __atomic_load_n(&pg->release_done, __ATOMIC_RELAXED))
		return false;
	*req = r;
	return true;
}

_Static_assert(GPUPOOL_UUID_LEN <= GPUPOOL_DEVICE_NAME_LEN && GPUPOOL_DEVICE_NAME_LEN % sizeof(gp_stats_word) == 0 &&
		       offsetof(struct gpupool_device_stats, device_name) % sizeof(gp_stats_word) == 0,
	       "the uuid and the name are written in whole words");

/* Writes `len` bytes (whole words, at most GPUPOOL_DEVICE_NAME_LEN) of src at offset `off` of
 * the slot of `device`, activated on first use, word by word under the slot's sequence
 * counter, as readers copy it. */
static int slot_write(struct gpupool_page *pg, int device, size_t off, const void *src, size_t len)
{
	if (!pg || !src || device < 0)
		return -EINVAL;
	struct gpupool_device_stats *s = gp_statpage_slot(pg, device);
	if (!s)
		return -ENOSPC;
	gp_stats_word w[GPUPOOL_DEVICE_NAME_LEN / sizeof(gp_stats_word)];
	memcpy(w, src, len);
	gp_stats_word *to = (gp_stats_word *)(void *)((char *)s + off);
	/* the same again (a device's pool made anew after a reset): not written, so that the
	 * threads that read it meanwhile, plainly, read a word nobody writes */
	bool same = true;
	for (size_t i = 0; i < len / sizeof w[0] && same; i++)
		same = __atomic_load_n(&to[i], __ATOMIC_RELAXED) == w[i];
	if (same)
		return 0;
	gp_stats_begin(s);
	for (size_t i = 0; i < len / sizeof w[0]; i++)
		__atomic_store_n(&to[i], w[i], __ATOMIC_RELAXED);
	gp_stats_end(s);
	return 0;
}

int gp_statpage_set_uuid(struct gpupool_page *pg, int device, const unsigned char uuid[GPUPOOL_UUID_LEN])
{
	return slot_write(pg, device, offsetof(struct gpupool_device_stats, uuid), uuid, GPUPOOL_UUID_LEN);
}

int gp_statpage_set_device_name(struct gpupool_page *pg, int device, const char *name)
{
	char buf[GPUPOOL_DEVICE_NAME_LEN] = "";
	if (name)
		memcpy(buf, name, strnlen(name, sizeof buf - 1));
	return slot_write(pg, device, offsetof(struct gpupool_device_stats, device_name), name ? buf : NULL, sizeof buf);
}

void gp_statpage_release_ack(struct gpupool_page *pg, uint64_t req)
{
	if (!pg)
		return;
	uint64_t done = __atomic_load_n(&pg->release_done, __ATOMIC_RELAXED);
	while (done < req && !__atomic_compare_exchange_n(&pg->release_done, &done, req, false, __ATOMIC_RELEASE,
							  __ATOMIC_RELAXED))
		;
}

/* Version 2's slot: version 3's without its uuid; the fields before it at the same offsets
 * (V2_HEAD bytes: seq, device, active, limit_bytes), those after it GPUPOOL_UUID_LEN bytes
 * earlier. Version 3's slot: the prefix of the current one up to the version 4 fields;
 * version 4's, the prefix up to the version 5 fields. */
#define V2_HEAD offsetof(struct gpupool_device_stats, uuid)
#define V4_SLOT_SIZE offsetof(struct gpupool_device_stats, waiting_bytes)
#define V3_SLOT_SIZE offsetof(struct gpupool_device_stats, unpooled_bytes)
#define V2_SLOT_SIZE (V3_SLOT_SIZE - GPUPOOL_UUID_LEN)
#define PAGE_SIZE_OF_SLOT(slot) (offsetof(struct gpupool_page, dev) + GPUPOOL_MAX_DEVICES * (slot))
#define V2_PAGE_SIZE PAGE_SIZE_OF_SLOT(V2_SLOT_SIZE)
#define V3_PAGE_SIZE PAGE_SIZE_OF_SLOT(V3_SLOT_SIZE)
#define V4_PAGE_SIZE PAGE_SIZE_OF_SLOT(V4_SLOT_SIZE)
_Static_assert(V2_HEAD % sizeof(gp_stats_word) == 0 && GPUPOOL_UUID_LEN % sizeof(gp_stats_word) == 0 &&
		       V3_SLOT_SIZE % sizeof(gp_stats_word) == 0 && V4_SLOT_SIZE % sizeof(gp_stats_word) == 0,
	       "older slots map word for word");

size_t gp_statpage_size_of(uint32_t version)
{
	switch (version) {
	case GPUPOOL_PAGE_VERSION:
		return sizeof(struct gpupool_page);
	case 4:
		return V4_PAGE_SIZE;
	case 3:
		return V3_PAGE_SIZE;
	case 2:
		return V2_PAGE_SIZE;
	default:
		return 0;
	}
}

/* The slot size of a page image of len bytes (a layout's size), else 0. */
static size_t slot_size_of(size_t len)
{
	return len == sizeof(struct gpupool_page) ? sizeof(struct gpupool_device_stats)
	       : len == V4_PAGE_SIZE		 ? V4_SLOT_SIZE
	       : len == V3_PAGE_SIZE		 ? V3_SLOT_SIZE
	       : len == V2_PAGE_SIZE		 ? V2_SLOT_SIZE
						 : 0;
}

/* gp_stats_snapshot of a slot of `bytes`: the current layout's, or an older one's (version
 * 4's V4_SLOT_SIZE, version 3's V3_SLOT_SIZE, version 2's V2_SLOT_SIZE), whose words go to the current fields of the
 * same names, the fields it lacks zero. */
static bool snapshot_bytes(const void *src, size_t bytes, struct gpupool_device_stats *dst, int tries)
{
	if (bytes == sizeof *dst)
		return gp_stats_snapshot(src, dst, tries);
	const gp_stats_word *from = src;
	gp_stats_word *to = (gp_stats_word *)dst;
	const size_t head = V2_HEAD / sizeof *to;
	const size_t gap = bytes == V2_SLOT_SIZE ? GPUPOOL_UUID_LEN / sizeof *to : 0;
	memset(dst, 0, sizeof *dst);
	while (tries-- > 0) {
		uint64_t a = __atomic_load_n(&from[0], __ATOMIC_ACQUIRE); /* seq */
		if (a & 1)
			continue;
		for (size_t i = 0; i < bytes / sizeof *to; i++)
			to[i < head ? i : i + gap] = __atomic_load_n(&from[i], __ATOMIC_RELAXED);
		GP_STATS_FENCE(memory_order_acquire);
		if (__atomic_load_n(&from[0], __ATOMIC_RELAXED) == a)
			return true;
	}
	return false;
}

/* A busy writer keeps its slot odd for most of each pool call: spin a little, then let it
 * run, until deadline_ns (CLOCK_MONOTONIC). A writer that died mid-update never settles. */
static bool settle(const void *s, size_t bytes, struct gpupool_device_stats *d, uint64_t deadline_ns)
{
	for (int round = 0;; round++) {
		if (snapshot_bytes(s, bytes, d, GP_STATPAGE_TRIES))
			return true;
		uint64_t now = gp_clock_ns(CLOCK_MONOTONIC);
		if (!now || now >= deadline_ns)
			return false;
		if (round < 10) {
			sched_yield();
		} else {
			struct timespec nap = {0, 20000};
			nanosleep(&nap, NULL);
		}
	}
}

bool gp_statpage_snapshot_until(const struct gpupool_device_stats *s, struct gpupool_device_stats *d,
				uint64_t deadline_ns)
{
	return settle(s, sizeof *s, d, deadline_ns);
}

uint32_t gp_statpage_copy(const struct gpupool_page *src, struct gpupool_page *dst)
{
	return gp_statpage_copy_until(src, dst, gp_clock_ns(CLOCK_MONOTONIC) + GP_STATPAGE_PATIENCE_NS);
}

uint32_t gp_statpage_copy_until(const struct gpupool_page *src, struct gpupool_page *dst,
				uint64_t deadline_ns)
{
	return gp_statpage_copy_image(src, sizeof *src, dst, deadline_ns);
}

uint32_t gp_statpage_copy_image(const void *src, size_t len, struct gpupool_page *dst, uint64_t deadline_ns)
{
	_Static_assert(offsetof(struct gpupool_device_stats, active) + sizeof(uint32_t) <= V2_HEAD,
		       "device and active at the same offsets in both layouts");
	const struct gpupool_page *hdr = src; /* the header is the same in every layout */
	size_t slot = slot_size_of(len);
	uint32_t bad = 0;
	uint32_t n = slot ? __atomic_load_n(&hdr->ndevices, __ATOMIC_ACQUIRE) : 0;
	memcpy(dst, src, offsetof(struct gpupool_page, dev));
	dst->comm[GPUPOOL_COMM_LEN - 1] = '\0';
	dst->lib_version[GPUPOOL_VERSION_LEN - 1] = '\0';
	if (n > GPUPOOL_MAX_DEVICES)
		n = GPUPOOL_MAX_DEVICES;
	dst->ndevices = n;
	memset(dst->dev, 0, sizeof dst->dev);
	for (uint32_t i = 0; i < n; i++) {
		const char *s = (const char *)src + offsetof(struct gpupool_page, dev) + i * slot;
		struct gpupool_device_stats *d = &dst->dev[i];
		/* device and active: at the same offsets in every layout */
		const int32_t *device = (const void *)(s + offsetof(struct gpupool_device_stats, device));
		const uint32_t *active = (const void *)(s + offsetof(struct gpupool_device_stats, active));
		if (!__atomic_load_n(active, __ATOMIC_ACQUIRE))
			continue;
		if (!settle(s, slot, d, deadline_ns)) {
			memset(d, 0, sizeof *d);
			d->device = __atomic_load_n(device, __ATOMIC_RELAXED);
			bad |= 1u << i;
		}
	}
	return bad;
}

/* ---- reader ---------------------------------------------------------------------- */

static const struct {
	const char *label, *text;
} skips[GP_SKIP_COUNT] = {
	[GP_SKIP_INVALID] = {"invalid", "not a valid page"},
	[GP_SKIP_OTHER_USER] = {"other_user", "owned by another user (only root reads every page)"},
	[GP_SKIP_FOREIGN] = {"foreign", "the file's owner is not the user of the process it names"},
	[GP_SKIP_UNVERIFIED] = {"unverified", "the process is gone and the file is another user's"},
	[GP_SKIP_LIMIT] = {"limit", "beyond the number of pages a listing keeps"},
};

enum gp_statpage_skip gp_statpage_skip_of(int rc)
{
	return rc == -EACCES ? GP_SKIP_OTHER_USER : rc == -EPERM ? GP_SKIP_FOREIGN
	       : rc == -ESRCH ? GP_SKIP_UNVERIFIED : GP_SKIP_INVALID;
}

const char *gp_statpage_skip_label(enum gp_statpage_skip r)
{
	return r < GP_SKIP_COUNT ? skips[r].label : "invalid";
}

const char *gp_statpage_skip_text(enum gp_statpage_skip r)
{
	return r < GP_SKIP_COUNT ? skips[r].text : skips[GP_SKIP_INVALID].text;
}

static bool known_size(long long size)
{
	return size > 0 && slot_size_of((size_t)size) != 0;
}

static int wrong_size(const char *name, long long size, char *why, size_t wl)
{
	why_set(why, wl, "skipped: %s truncated/wrong size (%lld bytes, expected %zu, or %zu/%zu/%zu for versions 4/3/2)%s",
		name, size, sizeof(struct gpupool_page), V4_PAGE_SIZE, V3_PAGE_SIZE, V2_PAGE_SIZE,
		size == 0 ? ", being created?" : "");
	return -EBADMSG;
}

/* Checks what `name` is before opening it (so a fifo or device is never opened), opens it
 * without following links, and checks again on the descriptor. Returns the fd (its owner
 * in *owner, its size, that of a known layout, in *size) or -errno. */
static int open_checked(int dirfd, const char *name, uid_t uid, int oflags, uid_t *owner, size_t *size,
			char *why, size_t wl)
{
	struct stat st, fst;
	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
		int e = errno;
		why_set(why, wl, "%s: %s", name, strerror(e));
		return -e;
	}
	if (!S_ISREG(st.st_mode)) {
		why_set(why, wl, "skipped: %s is %s", name, kind_of(st.st_mode));
		return -EINVAL;
	}
	if (uid != 0 && st.st_uid != uid) {
		why_set(why, wl, "skipped: %s owned by uid %u", name, (unsigned)st.st_uid);
		return -EACCES;
	}
	int fd = openat(dirfd, name, oflags | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (fd < 0) {
		int e = errno;
		why_set(why, wl, "skipped: %s: %s", name, strerror(e));
		return -e;
	}
	if (fstat(fd, &fst) != 0 || !S_ISREG(fst.st_mode) || fst.st_ino != st.st_ino ||
	    fst.st_dev != st.st_dev || (uid != 0 && fst.st_uid != uid)) {
		close(fd);
		why_set(why, wl, "skipped: %s changed while being opened", name);
		return -EAGAIN;
	}
	if (!known_size((long long)fst.st_size)) {
		close(fd);
		return wrong_size(name, (long long)fst.st_size, why, wl);
	}
	*owner = fst.st_uid;
	*size = (size_t)fst.st_size;
	return fd;
}

/* The ownership rule (statpage.h): a page whose file belongs to `file_uid` may speak for
 * process `pid` only when that process is file_uid's; a page of a process that is gone,
 * only when it is the reader's own file. 0 or -EPERM / -ESRCH with why[]. */
static int check_owner(const char *name, int pid, uid_t file_uid, uid_t uid, char *why, size_t wl)
{
	uid_t owner;
	if (gp_proc_owner(pid, &owner) == 0) {
		if (owner == file_uid)
			return 0;
		why_set(why, wl, "skipped: %s (uid %u) is not owned by the user of process %d (uid %u)", name,
			(unsigned)file_uid, pid, (unsigned)owner);
		return -EPERM;
	}
	if (file_uid == uid)
		return 0;
	why_set(why, wl, "skipped: %s (uid %u): process %d is gone and the file is not yours", name,
		(unsigned)file_uid, pid);
	return -ESRCH;
}

/* The header of a page file of `len` bytes (a known layout's size): its version must be
 * one this reader takes, of that size. */
static int check_header(const struct gpupool_page *h, size_t len, const char *name, int pid, char *why, size_t wl)
{
	if (h->magic != GPUPOOL_PAGE_MAGIC) {
		why_set(why, wl, "skipped: %s: bad magic 0x%016llx%s", name, (unsigned long long)h->magic,
			h->magic == 0 ? " (being created?)" : "");
		return -EBADMSG;
	}
	size_t want = gp_statpage_size_of(h->version);
	if (!want) {
		why_set(why, wl, "skipped: %s: page version %u, this tool reads %u to %u", name, h->version,
			GP_STATPAGE_OLDEST_VERSION, GPUPOOL_PAGE_VERSION);
		return -EPROTO;
	}
	if (want != len) {
		why_set(why, wl, "skipped: %s: page version %u in %zu bytes, expected %zu", name, h->version, len, want);
		return -EBADMSG;
	}
	if (h->size != want) {
		why_set(why, wl, "skipped: %s: header size %u, expected %zu", name, h->size, want);
		return -EBADMSG;
	}
	if (h->ndevices > GPUPOOL_MAX_DEVICES) {
		why_set(why, wl, "skipped: %s: %u devices, at most %d", name, h->ndevices, GPUPOOL_MAX_DEVICES);
		return -EBADMSG;
	}
	if (h->pid != pid) {
		why_set(why, wl, "skipped: %s: page names pid %d", name, (int)h->pid);
		return -EBADMSG;
	}
	return 0;
}

static int by_live_then_pid(const void *a, const void *b)
{
	const struct gp_statpage_name *x = a, *y = b;
	if (x->live != y->live)
		return x->live ? -1 : 1;
	return (x->pid > y->pid) - (x->pid < y->pid);
}

int gp_statpage_scan(int dirfd, int want_pid, struct gp_statpage_name **out)
{
	*out = NULL;
	int fd = fcntl(dirfd, F_DUPFD_CLOEXEC, 0);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	if (!d) {
		int e = errno;
		if (fd >= 0)
			close(fd);
		return -e;
	}
	rewinddir(d); /* the duplicate shares dirfd's offset */
	struct gp_statpage_name *v = NULL;
	size_t n = 0, cap = 0;
	int rc = 0;
	struct dirent *e;
	while ((e = readdir(d)) != NULL) {
		int pid = gp_statpage_name_pid(e->d_name);
		if (pid < 0 || (want_pid > 0 && pid != want_pid))
			continue;
		if (n == cap) {
			size_t ncap = cap ? 2 * cap : 64;
			struct gp_statpage_name *nv = n > (size_t)INT_MAX / 2 ? NULL : realloc(v, ncap * sizeof *v);
			if (!nv) {
				rc = -ENOMEM;
				break;
			}
			v = nv;
			cap = ncap;
		}
		v[n].pid = pid;
		v[n].live = kill(pid, 0) == 0 || errno == EPERM;
		n++;
	}
	closedir(d);
	if (rc) {
		free(v);
		return rc;
	}
	if (n)
		qsort(v, n, sizeof *v, by_live_then_pid);
	*out = v;
	return (int)n;
}

/* open_checked, then check_owner: a descriptor of page `name` (of `pid`) that `uid` may read,
 * or a negative errno with *why said. */
static int open_owned(int dirfd, const char *name, int pid, uid_t uid, int flags, size_t *size, uid_t *owner,
		      char *why, size_t whylen)
{
	int fd = open_checked(dirfd, name, uid, flags, owner, size, why, whylen);
	if (fd < 0)
		return fd;
	int rc = check_owner(name, pid, *owner, uid, why, whylen);
	if (rc != 0) {
		close(fd);
		return rc;
	}
	return fd;
}

int gp_statpage_read(int dirfd, const char *name, uid_t uid, uint64_t deadline_ns,
		     struct gp_statpage_info *out, char *why, size_t whylen)
{
	int pid = gp_statpage_name_pid(name);
	if (pid < 0) {
		why_set(why, whylen, "skipped: %s: not a page name", name);
		return -EINVAL;
	}
	size_t size;
	uid_t owner;
	int fd = open_owned(dirfd, name, pid, uid, O_RDONLY, &size, &owner, why, whylen);
	if (fd < 0)
		return fd;
	const struct gpupool_page *map = mmap(NULL, size, PROT_READ, MAP_SHARED, fd, 0);
	int e = errno;
	close(fd);
	if (map == MAP_FAILED) {
		why_set(why, whylen, "skipped: %s: mmap: %s", name, strerror(e));
		return -e;
	}
	memset(out, 0, sizeof *out);
	snprintf(out->name, sizeof out->name, "%s", name);
	out->pid = pid;
	out->owner = owner;
	/* first without waiting; a live writer caught mid-update then gets until the deadline
	 * (a writer that is gone will never finish its update) */
	int rc = gp_statpage_validate(map, size, name, 0, &out->page, &out->inconsistent, why, whylen);
	if (rc == 0) {
		out->stale = gp_statpage_pid_stale(pid, out->page.start_time_ns);
		if (out->inconsistent && !out->stale) {
			if (!deadline_ns)
				deadline_ns = gp_clock_ns(CLOCK_MONOTONIC) + GP_STATPAGE_PATIENCE_NS;
			rc = gp_statpage_validate(map, size, name, deadline_ns, &out->page, &out->inconsistent, why,
						  whylen);
		}
		out->read_ns = gp_clock_ns(CLOCK_MONOTONIC);
	}
	munmap((void *)map, size);
	return rc;
}

int gp_statpage_validate(const void *buf, size_t len, const char *name, uint64_t deadline_ns,
			 struct gpupool_page *out, uint32_t *inconsistent, char *why, size_t whylen)
{
	int pid = gp_statpage_name_pid(name);
	*inconsistent = 0;
	if (pid < 0) {
		why_set(why, whylen, "skipped: %s: not a page name", name);
		return -EINVAL;
	}
	if (!known_size((long long)len))
		return wrong_size(name, (long long)len, why, whylen);
	/* check a private copy of the header: the image may change under us */
	memcpy(out, buf, offsetof(struct gpupool_page, dev));
	int rc = check_header(out, len, name, pid, why, whylen);
	if (rc == 0) {
		*inconsistent = gp_statpage_copy_image(buf, len, out, deadline_ns);
		rc = check_header(out, len, name, pid, why, whylen); /* the header is copied again */
	}
	return rc;
}

int gp_statpage_clean_one(int dirfd, const char *name, uid_t uid, char *why, size_t whylen)
{
	int pid = gp_statpage_name_pid(name);
	if (pid < 0) {
		why_set(why, whylen, "%s: not a page name", name);
		return 0;
	}
	struct stat st;
	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
		int e = errno;
		why_set(why, whylen, "%s: %s", name, strerror(e));
		return -e;
	}
	if (!S_ISREG(st.st_mode)) {
		why_set(why, whylen, "kept %s: it is %s", name, kind_of(st.st_mode));
		return 0;
	}
	if (uid != 0 && st.st_uid != uid) {
		why_set(why, whylen, "kept %s: owned by uid %u", name, (unsigned)st.st_uid);
		return 0;
	}
	/* the start time only counts when the header is a valid page of this pid */
	uint64_t start = 0;
	char tmp[8];
	uid_t owner;
	size_t size;
	int fd = open_checked(dirfd, name, uid, O_RDONLY, &owner, &size, tmp, sizeof tmp);
	if (fd >= 0) {
		struct gpupool_page h;
		if (pread(fd, &h, offsetof(struct gpupool_page, dev), 0) ==
			    (ssize_t)offsetof(struct gpupool_page, dev) &&
		    check_header(&h, size, name, pid, tmp, sizeof tmp) == 0)
			start = h.start_time_ns;
		close(fd);
	}
	if (!gp_statpage_pid_stale(pid, start)) {
		why_set(why, whylen, "kept %s: pid %d is alive", name, pid);
		return 0;
	}
	if (unlinkat(dirfd, name, 0) != 0) {
		int e = errno;
		why_set(why, whylen, "cannot remove %s: %s", name, strerror(e));
		return -e;
	}
	why_set(why, whylen, "removed %s: pid %d is gone%s", name, pid,
		kill(pid, 0) == 0 ? " (pid reused or zombie)" : "");
	return 1;
}

int gp_statpage_request_release(int dirfd, int pid, uid_t uid, struct gpupool_page **map, size_t *len,
				uint64_t *req, char *why, size_t whylen)
{
	char name[32];
	snprintf(name, sizeof name, "%s%d", GP_STATPAGE_NAME, pid);
	if (pid <= 0) {
		why_set(why, whylen, "invalid pid %d", pid);
		return -EINVAL;
	}
	size_t size;
	uid_t owner;
	int fd = open_owned(dirfd, name, pid, uid, O_RDWR, &size, &owner, why, whylen);
	if (fd < 0)
		return fd;
	/* the file's own length (that of a known layout): gp_statpage_unmap unmaps that much */
	struct gpupool_page *m = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	int e = errno;
	close(fd);
	if (m == MAP_FAILED) {
		why_set(why, whylen, "%s: mmap: %s", name, strerror(e));
		return -e;
	}
	struct gpupool_page h;
	memcpy(&h, m, offsetof(struct gpupool_page, dev));
	int rc = check_header(&h, size, name, pid, why, whylen);
	if (rc == 0 && gp_statpage_pid_stale(pid, h.start_time_ns)) {
		why_set(why, whylen, "%s is stale: pid %d is gone", name, pid);
		rc = -ESRCH;
	}
	if (rc != 0) {
		munmap(m, size);
		return rc;
	}
	*req = __atomic_add_fetch(&m->release_request, 1, __ATOMIC_SEQ_CST);
	*map = m;
	*len = size;
	return 0;
}

void gp_statpage_unmap(struct gpupool_page *map, size_t len)
{
	if (map)
		munmap(map, len);
}

bool gp_statpage_uuid_known(const struct gpupool_device_stats *s)
{
	for (size_t i = 0; i < GPUPOOL_UUID_LEN; i++)
		if (s->uuid[i])
			return true;
	return false;
}
