/* The memory timeline of a replay: a CSV of requested, allocated and reserved bytes per
 * device over trace time, one row per change, or at most max_rows rows (each then the peak
 * of the changes it stands for). Fed by the replay's ROW events (replay.h). Depends on the
 * replay's contract and outfile.h. */
#ifndef GP_TIMELINE_H
#define GP_TIMELINE_H

#include <stdint.h>

#include "replay.h"

#define GP_TIMELINE_MAX_ROWS 10000u
#define GP_TIMELINE_HEADER "time_ms,device,requested_bytes,allocated_bytes,reserved_bytes"

struct gp_timeline;

/* Opens `out_path` (gp_outfile_open, 0644). max_rows: data rows at most (0: every change),
 * shared equally by the devices, at least 2 each (the peaks, then the last point as it is).
 * 0, -ENOMEM or the open's error. */
int gp_timeline_new(struct gp_timeline **out, const char *out_path, uint64_t max_rows);
/* The observer for gp_replay_opts.observers; its end writes the CSV. */
const struct gp_replay_observer *gp_timeline_observer(struct gp_timeline *t);
/* Closes the file and frees everything: 0, or -EIO when the close failed. */
int gp_timeline_close(struct gp_timeline *t);

#endif
