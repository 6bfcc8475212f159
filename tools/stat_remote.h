/* gpupool-stat's side of the status exchange (share.h's GP_SHARE_STATUS): every process asked
 * at once, the answers gathered until a deadline, each answer kept only from the process that
 * was asked (the kernel names the sender). What a reader learns of a process whose page it may
 * not open (another user's), and fresher figures for a page it read (the whole free segments
 * counted now, the driver's free memory looked at now). No page is opened here. */
#ifndef GP_STAT_REMOTE_H
#define GP_STAT_REMOTE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "gpupool/stats.h"
#include "share.h"

/* One process asked. */
struct gp_stat_remote {
	int pid;         /* in: the process to ask */
	bool answered;   /* out: every answer of its came (count of them) */
	uid_t uid;       /* the sender's uid, as the kernel gives it */
	unsigned count;  /* devices in its answer */
	struct gp_share_status dev[GPUPOOL_MAX_DEVICES];
	unsigned char uuid[GPUPOOL_MAX_DEVICES][GPUPOOL_UUID_LEN];
};

/* Asks each of r[0..n) for its status on every GPU, and gathers the answers until all came
 * or deadline_ns (CLOCK_MONOTONIC). A process that does not listen (gone, another library, a
 * page of the test writer) refuses at once and is not waited for. Returns how many answered,
 * or a negative errno when no socket could be made (nothing asked). */
int gp_stat_remote_ask(struct gp_stat_remote *r, int n, uint64_t deadline_ns);

/* A page of one remote process made from its answer (the fields the answer has; the others
 * zero): the header (magic, version, size, pid, ndevices, start time, comm, lib_version) and
 * one active slot per device. */
void gp_stat_remote_page(const struct gp_stat_remote *r, struct gpupool_page *pg);

/* The answer's fresh figures laid over a page read from its file (the same process): each
 * slot of the same device and UUID takes the answer's releasable bytes, waiting bytes and
 * wait start, and the driver's figures when the answer's look is newer. */
void gp_stat_remote_overlay(const struct gp_stat_remote *r, struct gpupool_page *pg);

#endif
