/* The PyTorch memory snapshot of a replay: the pickle torch.cuda.memory._dump_snapshot
 * writes ("segments", "device_traces", "allocator_settings"), made from the replay's events
 * (replay.h, gp_replay_observer) and the pools' final layout (gp_pool_walk), for PyTorch's
 * memory viewer (pytorch.org/memory_viz) and torch.cuda._memory_viz. Depends on the replay's
 * contract, the pool's, pickle.h and outfile.h; no Python, no CUDA. */
#ifndef GP_SNAPSHOT_H
#define GP_SNAPSHOT_H

#include <stddef.h>
#include <stdint.h>

#include "replay.h"

/* Events kept per device by default: the newest, as PyTorch's max_entries keeps them. */
#define GP_SNAPSHOT_MAX_ENTRIES 1000000u

struct gp_snapshot_opts {
	const char *trace_path;   /* named in each event's frame ("TRACE:LINE:cudaMalloc") */
	const char *conf;         /* the knobs, recorded under "gpupool" ("" for the defaults) */
	size_t max_split_size;    /* the pool's (SIZE_MAX: none, written -1 as PyTorch does) */
	uint64_t max_entries;     /* events kept per device (the newest); 0: the default */
};

struct gp_snapshot;

/* Opens `out_path` (gp_outfile_open: created 0644 or truncated, never through a link) so that
 * a path that cannot be written fails before the replay. 0, -ENOMEM or the open's error. */
int gp_snapshot_new(struct gp_snapshot **out, const char *out_path, const struct gp_snapshot_opts *o);
/* The observer to put in gp_replay_opts.observers; its end writes the pickle. */
const struct gp_replay_observer *gp_snapshot_observer(struct gp_snapshot *s);
/* Events dropped because a device had more than max_entries. */
uint64_t gp_snapshot_dropped(const struct gp_snapshot *s);
/* Closes the file and frees everything: 0, or -EIO when the close failed. A snapshot whose
 * replay failed is left incomplete: the caller removes it. */
int gp_snapshot_close(struct gp_snapshot *s);

#endif
