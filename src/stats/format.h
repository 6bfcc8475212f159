/* The one formatter of statistics pages (table, detail, JSON, Prometheus, exit report) for
 * the library at exit and gpupool-stat, through a fixed-buffer writer (an fd with write(2):
 * safe at exit; a FILE*; memory). Reads only the page copies it is given. Depends on
 * gpupool/stats.h and libc only: no CUDA, no pool, no locks. */
#ifndef GP_FORMAT_H
#define GP_FORMAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "gpupool/stats.h"

struct gp_format_out {
	int fd;      /* >= 0: write(2) to it */
	FILE *fp;    /* else, when set: fwrite to it */
	char *dst;   /* else: append to dst (NUL-terminated, truncated at cap) */
	size_t cap, len;
	bool truncated; /* dst was too small, or a write failed */
	size_t n;       /* bytes staged in buf */
	char buf[4096];
};

void gp_format_to_fd(struct gp_format_out *o, int fd);
void gp_format_to_file(struct gp_format_out *o, FILE *fp);
void gp_format_to_buf(struct gp_format_out *o, char *dst, size_t cap);
void gp_format_printf(struct gp_format_out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Pushes staged bytes out; call once at the end. Returns 0 or -EIO (truncated). */
int gp_format_flush(struct gp_format_out *o);

/* How fast one device slot allocated between two snapshots of it (gpupool-stat --watch: the
 * counters' differences over the time between the reads). */
struct gp_format_rate {
	bool known;          /* false: no earlier snapshot of this slot (the first refresh, a new
			      * device or process, a counter that went back) */
	double allocs_per_s; /* allocations served by the pool (the counter allocs) per second */
	double bytes_per_s;  /* bytes asked for (the counter requested_bytes_total) per second */
};

/* One process as the formatters see it: a consistent page copy (gp_statpage_copy or
 * gp_statpage_read) plus what the reader learnt about it. */
struct gp_format_proc {
	const struct gpupool_page *page;
	bool stale;            /* writer is gone: shown as stale, left out of Prometheus */
	uint32_t inconsistent; /* slots without a consistent snapshot */
	/* NULL: no rates (not watching); else one per slot of page->dev, for the table (ALLOCS/S,
	 * BYTES/S) and the detail view; JSON and Prometheus leave them out */
	const struct gp_format_rate *rates;
	/* What a reader learnt beside the page (zero: not known; the exit report knows none). */
	bool remote;     /* not a page: the figures the process gave on the channel (share.h's status
			  * answer) in a page of their own; only the fields gp_format_known names are
			  * known, the others are shown as unknown (JSON null, "-", no sample) */
	bool uid_known;  /* uid: the process's user (its page file's owner, or the kernel's word for
			  * the sender of its answer) */
	uint32_t uid;
	const char *user; /* the uid's name; NULL: the number is shown */
	/* written by a user who is neither the reader's nor root (another user's answer on the
	 * channel, or page): its word about itself only. Its slots are its own rows and count in
	 * its GPU's held, idle and waiting bytes and processes, but never set the GPU's driver
	 * figures (MEMORY, FREE), and name the GPU only where no other process does */
	bool other_user;
	/* NULL, or one per slot of page->dev: the index of the slot's GPU as nvidia-smi numbers it
	 * (the order of the PCI bus ids, from the driver's /proc files), -1 where not known */
	const int *gpu_index;
};

/* True when the figure at `off` (offsetof(struct gpupool_device_stats, ...), a gauge's peak
 * included) of p's slots is known: every one of a page; of a remote process, those its answer
 * carries (reserved, allocated, cached, unpooled, releasable and waiting bytes, the limit, the
 * floor, the start of a wait, the driver's figures, uuid and name). */
bool gp_format_known(const struct gp_format_proc *p, size_t off);

/* How a text view is drawn (gpupool-stat's table, GPU lines, PID view). Zero: no bounds, no
 * ages, no colour. */
struct gp_format_row {
	uint32_t proc, slot; /* procs[proc].page->dev[slot] */
	uint32_t gpu_;       /* the formatter's sort key beside it */
	int32_t pid_, device_;
	uint64_t held_;
};
struct gp_format_view {
	unsigned width, rows; /* bounds in characters and lines; 0: none */
	uint64_t now_ns;      /* CLOCK_REALTIME now, for ages (a wait's, the driver's figures',
			       * a process's start); 0: no ages */
	bool color;           /* ANSI colours (a terminal that wants them) */
	bool cut;             /* lines cut at width (a terminal's box) */
	/* room to sort the table's rows (GPU, then memory held, largest first); without room for
	 * them all the rows come in page order, grouped by GPU */
	struct gp_format_row *scratch;
	size_t scratch_cap;
};

/* Pages the reader left out for one reason (reason: [a-z_]+, e.g. "foreign"). */
struct gp_format_skip {
	const char *reason;
	unsigned long count;
};

/* The "version" of the JSON documents (gp_format_json, gp_format_json_listing): bumped when a
 * field is removed or renamed or changes meaning, type or unit; never for an added field
 * (docs/json.md). Independent of the page layout's GPUPOOL_PAGE_VERSION. */
#define GP_FORMAT_JSON_VERSION 2

/* "1.5 GiB", "512 B": binary units, one decimal. Returns buf. */
const char *gp_format_bytes(char *buf, size_t cap, uint64_t bytes);
/* The slot's uuid as nvidia-smi and dcgm-exporter print it,
 * "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" (lowercase hex), or "" while it is not known (all
 * zero). buf holds GP_FORMAT_UUID_LEN bytes. Returns buf. */
#define GP_FORMAT_UUID_LEN 41
const char *gp_format_uuid(char buf[GP_FORMAT_UUID_LEN], const struct gpupool_device_stats *s);

/* One row per live (or gone: STATE "gone") process and active device, with a header line,
 * every column; LIMIT and %LIM (held / limit) only when some slot has a limit, WAITING when
 * some process waits, UNPOOLED when some holds memory outside the pools. Rows by GPU (the
 * order of the GPU lines), then by memory held, largest first (gp_format_view's scratch), then
 * pid. SEGS counts real cudaMalloc calls (segment allocations). A line after the rows counts
 * the processes that are gone. */
void gp_format_table(struct gp_format_out *o, const struct gp_format_proc *procs, size_t n);
/* The table drawn as v says (gp_format_table_box with v's width and rows, ages and colour). */
void gp_format_table_view(struct gp_format_out *o, const struct gp_format_proc *procs, size_t n,
			  const struct gp_format_view *v);
/* The line under the table that says what its main columns mean (cut at v->width). */
void gp_format_legend(struct gp_format_out *o, const struct gp_format_view *v);
/* The line of a listing that has no process at all: "no gpupool processes". */
void gp_format_none(struct gp_format_out *o);
/* The same, rows at most `width` characters (0: no bound): the columns that matter least give
 * way first (docs/stats.md lists which); PID, COMMAND, DEV and STATE always stay. ALLOCS/S
 * and BYTES/S (after ALLOCATED) when some process has rates. */
void gp_format_table_fit(struct gp_format_out *o, const struct gp_format_proc *procs, size_t n, unsigned width);
/* gp_format_table_fit in at most `rows` lines too (a terminal; 0: no bound): the header, the
 * first rows, and in the last line the number of rows left out. */
void gp_format_table_box(struct gp_format_out *o, const struct gp_format_proc *procs, size_t n, unsigned width,
			 unsigned rows);
/* One GPU as the pages of the processes using it show it (gpupool-stat's lines above the
 * table, "gpus" in the JSON listing, gpupool_gpu_* in Prometheus): the live, consistent,
 * active slots whose UUID is known, summed by UUID (sums saturate); its driver's figures
 * only from pages the reader trusts (gp_format_proc's other_user). */
struct gp_format_gpu {
	unsigned char uuid[GPUPOOL_UUID_LEN];
	/* its index as nvidia-smi numbers it (gp_format_proc's gpu_index); where no process's
	 * reader knows it, the CUDA index every process on it gives it, when they agree and no
	 * other GPU of the listing has that number; else -1 */
	int index;
	char name[GPUPOOL_DEVICE_NAME_LEN]; /* the name a page gives it (one not of other_user's
					     * first); "" while none does */
	/* the driver's figures (device_total_bytes, device_free_bytes) from the page whose look
	 * is the freshest among those not of other_user, free never above total; seen_ns its
	 * device_seen_ns (CLOCK_REALTIME); total 0 while no such page has one */
	uint64_t total_bytes, free_bytes, seen_ns;
	uint64_t held_bytes;        /* reserved + unpooled bytes of those processes */
	uint64_t reclaimable_bytes; /* their releasable_bytes */
	uint64_t waiting_bytes;     /* their waiting_bytes */
	unsigned processes;
	int32_t last_pid; /* the last process counted (a process counts once per GPU) */
	int32_t ordinal_;  /* the CUDA index its slots give it so far; -2 none yet, -1 they differ */
	bool name_other_;  /* name came from a page of other_user */
	/* no trusted page has looked at the device: total_bytes, free_bytes and seen_ns are the
	 * freshest look of other users' pages, their word only (the table marks them "?", the
	 * JSON says "figures_from_other_user", Prometheus leaves them out) */
	bool figures_other;
};
/* At most this many GPUs in one listing (distinct UUIDs); the slots of more are counted. */
#define GP_FORMAT_MAX_GPUS 64
/* The text view notes the age of the driver's figures from this age on. */
#define GP_FORMAT_GPU_STALE_NS (5 * 1000000000ull)
/* The GPUs of procs into gpus[cap], sorted by index (those without one last), then UUID;
 * *left_out (when not NULL) the slots of GPUs beyond cap. Returns the count. No allocation. */
size_t gp_format_gpus(const struct gp_format_proc *procs, size_t n, struct gp_format_gpu *gpus, size_t cap,
		      size_t *left_out);
/* gp_format_uuid of a gp_format_gpu. */
const char *gp_format_gpu_uuid(char buf[GP_FORMAT_UUID_LEN], const struct gp_format_gpu *g);
/* A line per GPU of procs, a header before them and a blank line after: its index and name,
 * total and free memory as the driver reported them (with their age when
 * GP_FORMAT_GPU_STALE_NS or older at now_ns, CLOCK_REALTIME), held by gpupool processes, idle
 * (what they can give back now), waited for (when some process waits), the number of
 * processes, and its UUID where `width` (0: no bound) has room for it (whole, or its first
 * group). Lines cut at width when cut. Returns the lines written, 0 (nothing written) when no
 * GPU is known. */
unsigned gp_format_gpu_lines(struct gp_format_out *o, const struct gp_format_proc *procs, size_t n, uint64_t now_ns,
			     unsigned width, bool cut);
/* The same, drawn as v says (colour, width, cut). */
unsigned gp_format_gpu_lines_view(struct gp_format_out *o, const struct gp_format_proc *procs, size_t n,
				  const struct gp_format_view *v);
/* Every gauge (current, peak), every counter, the limit and the uuid of one process, and its
 * rates per second when p->rates. */
void gp_format_detail(struct gp_format_out *o, const struct gp_format_proc *p);
/* The same as v says: dates and ages against v->now_ns (its start, the driver's look, a
 * wait), in a box of v->width and v->rows. */
void gp_format_detail_view(struct gp_format_out *o, const struct gp_format_proc *p, const struct gp_format_view *v);
/* gp_format_detail in a box of `width` columns and `rows` lines (a terminal; 0: no bound):
 * what matters most stays (the process's line; each device's line with its limit and
 * uuid, the rates, reserved and allocated bytes; then requested, cached and the largest
 * free block, OOMs and the hit rate), the other lines as room allows, in their order; the
 * last line says how many rows were left out. Lines longer than width are cut. */
void gp_format_detail_box(struct gp_format_out *o, const struct gp_format_proc *p, unsigned width, unsigned rows);
/* {"version":GP_FORMAT_JSON_VERSION,"processes":[{..., "devices":[{...raw integers...}]}]}:
 * the exit report's JSON. Every field is listed in docs/json.md (a test keeps them equal). */
void gp_format_json(struct gp_format_out *o, const struct gp_format_proc *procs, size_t n);
/* A reader's listing: gp_format_json plus "skipped_pages":N (the sum) and
 * "skipped":{"<reason>":count,...} for the nskips entries of skips[]. */
void gp_format_json_listing(struct gp_format_out *o, const struct gp_format_proc *procs, size_t n,
			    const struct gp_format_skip *skips, size_t nskips);
/* Prometheus text exposition format 0.0.4, or OpenMetrics 1.0.0 when openmetrics (families
 * named without _total, UNIT lines, "# EOF" last); stale processes and inconsistent slots
 * left out. One family per name, the unit last, _total on counters only (docs/stats.md).
 * Labels pid, comm, device, and UUID (dcgm-exporter's name) where the slot's uuid is known;
 * gpupool_limit_bytes only where a limit is set.
 * First gpupool_build_info{version="<version>"} 1 unless version is NULL; last
 * gpupool_skipped_pages{reason="..."}, one sample per entry of skips[]. */
void gp_format_prometheus(struct gp_format_out *o, const struct gp_format_proc *procs, size_t n,
			  const struct gp_format_skip *skips, size_t nskips, const char *version, bool openmetrics);
/* The exit report of one process: a short table per active device. Counters only. */
void gp_format_report(struct gp_format_out *o, const struct gpupool_page *page);

#endif
