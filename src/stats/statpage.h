/* The statistics page: the writer's side (create /dev/shm/gpupool.<pid>, hand out device
 * slots, answer release requests, unlink at exit) and the reader's side used by
 * gpupool-stat and the tests (validate and snapshot one page file, find stale pages).
 * CUDA-free, no locks in shared memory; depends on libc, log.h and stats.h only. */
#ifndef GP_STATPAGE_H
#define GP_STATPAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "gpupool/stats.h"

/* Environment variable naming the directory of pages, for the writer and the reader
 * alike (tests point it at a private directory). Default "/dev/shm". */
#define GP_STATPAGE_DIR_ENV "GPUPOOL_SHM_DIR"
#define GP_STATPAGE_DIR_DEFAULT "/dev/shm"
#define GP_STATPAGE_NAME "gpupool."

/* ---- writer ---------------------------------------------------------------------- */

/* Creates and maps this process's page (mode 0600, O_EXCL: a leftover file of a dead
 * process with the same pid, owned by us, is replaced). NULL on failure, logged once
 * at info level; the caller then keeps its counters in a private page (gp_statpage_init).
 * One page per process: a second call before close/forget returns NULL. */
struct gpupool_page *gp_statpage_open(void);
/* Fills the header of a zeroed page (magic last). Usable on private memory. */
void gp_statpage_init(struct gpupool_page *pg);
/* The slot of `device`, activated on first use (device, active, ndevices). Thread-safe;
 * NULL when device is out of range or all slots are taken. Works on a private page too. */
struct gpupool_device_stats *gp_statpage_slot(struct gpupool_page *pg, int device);
/* Unlinks and unmaps the page opened by gp_statpage_open (normal exit). A private page
 * (not from gp_statpage_open) is left alone. */
void gp_statpage_close(struct gpupool_page *pg);
/* Removes the file of the page opened by gp_statpage_open and keeps the mapping (at exit:
 * other threads may still be writing their counters into it). Safe at exit: no locks. */
void gp_statpage_unlink(struct gpupool_page *pg);
/* In a forked child: unmaps the parent's page without unlinking it and forgets it, so
 * the child can open its own. */
void gp_statpage_forget(struct gpupool_page *pg);
/* True when a reader asked for a cache release not yet acknowledged; *req is the
 * request to acknowledge once the cache is released. Two loads: cheap per call. */
bool gp_statpage_release_pending(const struct gpupool_page *pg, uint64_t *req);
/* Acknowledges request `req`: release_done becomes req unless it is already at or past it
 * (a thread that answered an older request late never moves it back). Thread-safe. */
void gp_statpage_release_ack(struct gpupool_page *pg, uint64_t req);
/* True when the slot's UUID is known (not all zero). */
bool gp_statpage_uuid_known(const struct gpupool_device_stats *s);
/* Records the UUID of `device` (GPUPOOL_UUID_LEN raw bytes, as cudaDeviceProp.uuid or
 * cuDeviceGetUuid give them) in its slot, activated on first use as by gp_statpage_slot,
 * under the slot's sequence counter. The caller is the slot's one writer for that moment:
 * before the device's pool is created, or holding its lock. Works on a private page too.
 * Returns 0, -EINVAL (no page or uuid, device < 0) or -ENOSPC (no slot left). */
int gp_statpage_set_uuid(struct gpupool_page *pg, int device, const unsigned char uuid[GPUPOOL_UUID_LEN]);
/* Records the name of `device` (cudaDeviceProp.name, cuDeviceGetName), cut to
 * GPUPOOL_DEVICE_NAME_LEN - 1 bytes, in its slot, as gp_statpage_set_uuid records the UUID
 * (same writer rule, same answers). */
int gp_statpage_set_device_name(struct gpupool_page *pg, int device, const char *name);

/* How long one page's slots are waited for, at most, when they are mid-update (a busy
 * writer keeps a slot odd for a few microseconds per pool call; a dead one forever). */
#define GP_STATPAGE_PATIENCE_NS (20 * 1000 * 1000ull)

/* A consistent copy of one slot (gp_stats_snapshot), retried while it is mid-update
 * (spinning, yielding, then 20 us naps) until deadline_ns (CLOCK_MONOTONIC; 0 or past: one
 * round of GP_STATPAGE_TRIES tries). False when it never settled. No locks, no allocation. */
bool gp_statpage_snapshot_until(const struct gpupool_device_stats *s, struct gpupool_device_stats *d,
				uint64_t deadline_ns);
/* A consistent copy of `src` into `dst` (header by value, each active slot through
 * gp_stats_snapshot). A slot found mid-update is retried (spinning, yielding, then 20 us
 * naps) until deadline_ns (CLOCK_MONOTONIC; 0 or past: one round of tries, no waiting).
 * Returns the mask of active slots that never settled (their copy in dst is zero but for
 * the device). Safe at exit: no locks, no allocation. */
uint32_t gp_statpage_copy_until(const struct gpupool_page *src, struct gpupool_page *dst,
				uint64_t deadline_ns);
/* gp_statpage_copy_until with GP_STATPAGE_PATIENCE_NS from now. */
uint32_t gp_statpage_copy(const struct gpupool_page *src, struct gpupool_page *dst);

/* The oldest page layout the readers here take: version 2, the layout before each slot's
 * uuid (the same header; each slot without the uuid, its figures GPUPOOL_UUID_LEN bytes
 * earlier). Version 3's slot is version 4's without the fields version 4 added at its end,
 * version 4's is version 5's without the fields version 5 added at its end.
 * Pages of older libraries keep being read after an upgrade, their missing fields zero. */
#define GP_STATPAGE_OLDEST_VERSION 2u
/* The size of a page file of layout `version`: sizeof(struct gpupool_page) for
 * GPUPOOL_PAGE_VERSION, the shorter slots' sizes for versions 4, 3 and 2, 0 for any other. */
size_t gp_statpage_size_of(uint32_t version);
/* gp_statpage_copy_until of an image of `len` bytes, any layout by its size (the caller
 * has checked it: gp_statpage_size_of); an older image's slots are copied with the fields
 * it lacks zero (a version 2 image's uuid too), its header as it is (its version). Any other len copies no slot (ndevices 0). */
uint32_t gp_statpage_copy_image(const void *src, size_t len, struct gpupool_page *dst, uint64_t deadline_ns);

/* ---- reader ---------------------------------------------------------------------- */

/* The directory of pages: $GPUPOOL_SHM_DIR or /dev/shm. */
const char *gp_statpage_dir(void);
/* pid from a canonical "gpupool.<digits>" name (no sign, no leading zero), else -1. */
int gp_statpage_name_pid(const char *name);

struct gp_statpage_info {
	char name[32];          /* directory entry, "gpupool.<pid>" */
	int pid;
	bool stale;             /* the process is gone, or its pid now names another process */
	uint32_t inconsistent;  /* active slots with no consistent snapshot (writer died mid-update?) */
	uint64_t read_ns;       /* CLOCK_MONOTONIC when the snapshots were taken (rates between two) */
	uid_t owner;            /* the page file's owner: the process's user (the ownership rule) */
	bool remote;            /* not read from a file: a reader made it from what the process told
				 * it (gpupool-stat, share.h's status answer); only some fields known */
	struct gpupool_page page; /* header and consistent slot snapshots */
};

/* Snapshot attempts per slot in one round of gp_statpage_copy_until. */
#define GP_STATPAGE_TRIES 200

/* A page name found by gp_statpage_scan: its pid, and whether that process exists. */
struct gp_statpage_name {
	int pid;
	bool live;
};

/* The page names in dirfd ("gpupool.<pid>"; want_pid > 0: that pid's only), live
 * processes first (kill(pid, 0) finds them), then by pid: the order in which a listing
 * that keeps a limited number of pages reads them, so that pages of dead pids never push
 * a live process out. Nothing is opened; no limit on the count. Returns the count with
 * *out malloc'd (the caller frees it), or a negative errno. */
int gp_statpage_scan(int dirfd, int want_pid, struct gp_statpage_name **out);

/* Why a reader left a page out. gp_statpage_read's error codes map onto these. */
enum gp_statpage_skip {
	GP_SKIP_INVALID,    /* not a regular file, wrong size, bad header, vanished */
	GP_SKIP_OTHER_USER, /* -EACCES: another user's file, and the reader is not root */
	GP_SKIP_FOREIGN,    /* -EPERM: the file's owner is not the owner of the process it names */
	GP_SKIP_UNVERIFIED, /* -ESRCH: that process is gone (or hidden) and the file is not the
			     * reader's own: nothing to check its owner against */
	GP_SKIP_LIMIT,      /* beyond the number of pages the listing keeps */
	GP_SKIP_COUNT
};
enum gp_statpage_skip gp_statpage_skip_of(int rc);
/* "foreign": a name for JSON keys and Prometheus labels ([a-z_]+). */
const char *gp_statpage_skip_label(enum gp_statpage_skip r);
/* "the file's owner is not the user of the process it names": for a line on stderr. */
const char *gp_statpage_skip_text(enum gp_statpage_skip r);

/* Reads and validates one page file in directory `dirfd`, for a reader whose effective
 * uid is `uid`: a regular file (never follows links, never opens fifos or devices), owned
 * by uid unless uid is 0 (-EACCES), of the exact size of a layout it takes (version 2 or
 * GPUPOOL_PAGE_VERSION: out->page.version says which; a version 2 page's uuids are zero),
 * with the right magic/version/size/ndevices and the pid of its name. Its owner, from
 * fstat on the open descriptor and checked before anything is read, must be the owner of
 * /proc/<pid> (-EPERM: forged, or the pid now names another user's process); when the
 * process is gone the page counts (as stale) only when the file is uid's own (-ESRCH
 * otherwise).
 * Slots mid-update are waited for until deadline_ns (gp_statpage_copy_until; 0:
 * GP_STATPAGE_PATIENCE_NS from now), those of a stale page not at all (its writer will
 * never finish). Returns 0 and fills *out, or a negative errno with a one-line reason in
 * why[] (nothing printed). Never crashes on a corrupt file; a file truncated *while*
 * mapped can raise SIGBUS, which callers that must survive that (the CLI) catch. */
int gp_statpage_read(int dirfd, const char *name, uid_t uid, uint64_t deadline_ns,
		     struct gp_statpage_info *out, char *why, size_t whylen);
/* Checks a page image of len bytes that claims to be file `name` ("gpupool.<pid>") and
 * copies it into *out: the exact size of a layout (gp_statpage_size_of; nothing is read
 * otherwise), magic, the version of that size, header size, ndevices and the pid of the
 * name, checked on a private copy of the header before and after the slots are copied with
 * gp_statpage_copy_image(deadline_ns). buf is aligned
 * for struct gpupool_page (a mapping, or malloc'd) and may change while being read (a live
 * writer's page). Returns 0 with *inconsistent the slots that never settled, or a negative
 * errno with a one-line reason in why[]. No I/O: gp_statpage_read's checks of content, and
 * the fuzzing harness's entry point. */
int gp_statpage_validate(const void *buf, size_t len, const char *name, uint64_t deadline_ns,
			 struct gpupool_page *out, uint32_t *inconsistent, char *why, size_t whylen);
/* Removes `name` from dirfd when it is a page file of a dead process owned by `uid`
 * (any content: corrupt leftovers go too). Returns 1 removed, 0 kept (live, not ours,
 * not a regular file), or a negative errno; why[] says which. */
int gp_statpage_clean_one(int dirfd, const char *name, uid_t uid, char *why, size_t whylen);

/* Opens `pid`'s page in dir read-write and increments its release request, under the
 * checks and the ownership rule of gp_statpage_read (a page of a process that is gone:
 * -ESRCH). Returns 0 with *req the request to wait for, *map the mapping of the whole file (unmap
 * with gp_statpage_unmap) and *len the file's size (copy it with gp_statpage_copy_image: either
 * layout), or a negative errno with why[]. */
int gp_statpage_request_release(int dirfd, int pid, uid_t uid, struct gpupool_page **map, size_t *len,
				uint64_t *req, char *why, size_t whylen);
/* Unmaps what gp_statpage_request_release mapped (len: its *len). */
void gp_statpage_unmap(struct gpupool_page *map, size_t len);

#endif
