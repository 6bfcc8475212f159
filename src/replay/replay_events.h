/* The replay's observer plumbing (replay.h, gp_replay_observer): turns the pool calls of a
 * replay into PyTorch-style allocator events in a consistent order (completions, then the
 * segments the call took or gave back, then the allocation itself), tracking cudaFree'd
 * blocks until a fence retires them. Internal to replay.c. Depends on replay.h and the pool. */
#ifndef GP_REPLAY_EVENTS_H
#define GP_REPLAY_EVENTS_H

#include "replay.h"

struct gp_replay_events;

/* NULL (*out) when opts has no observer: every other function is then not to be called.
 * `inner` is the backend the pools would use; the pools get gp_replay_events_backend's
 * instead, which forwards to it and records segment calls. `pools`: the replay's pools by
 * device (read when a fence completes: which cudaFree'd blocks it retired). 0 or -ENOMEM. */
int gp_replay_events_new(struct gp_replay_events **out, const struct gp_replay_opts *o,
			 const struct gp_backend *inner, gp_pool *const pools[GPUPOOL_MAX_DEVICES]);
const struct gp_backend *gp_replay_events_backend(struct gp_replay_events *e);
/* Nothing is reported after this (pool destruction gives segments back silently). */
void gp_replay_events_free(struct gp_replay_events *e);

/* The row whose pool calls follow: its trace time, line and op. */
void gp_replay_events_time(struct gp_replay_events *e, uint64_t t_ns, unsigned long line, int op);
/* After gp_pool_alloc returned addr: completions and segments the call made, then ALLOC. */
int gp_replay_events_alloc(struct gp_replay_events *e, gp_pool *p, const struct gpupool_device_stats *st,
			   int dev, uintptr_t addr, uint64_t requested, uint64_t stream);
/* Before gp_pool_free(addr): FREE_REQUESTED (the block's size from the pool). */
int gp_replay_events_free_begin(struct gp_replay_events *e, gp_pool *p, int dev, uintptr_t addr,
				uint64_t stream);
/* After it succeeded: FREE_COMPLETED now (stream_ordered) or at the fence that retires it,
 * then the segments the call gave back. */
int gp_replay_events_free_end(struct gp_replay_events *e, const struct gpupool_device_stats *st, int dev,
			      bool stream_ordered);
/* After any other pool call on dev (a modelled fence at trace time t_ns). */
int gp_replay_events_settle(struct gp_replay_events *e, const struct gpupool_device_stats *st, int dev,
			    uint64_t t_ns);
/* After a data row: ROW for every device with a pool. `st`: the pools' counters (st[d] is
 * device d's; the pools use them in place). */
int gp_replay_events_row(struct gp_replay_events *e, gp_pool *const pools[GPUPOOL_MAX_DEVICES],
			 const struct gpupool_device_stats st[GPUPOOL_MAX_DEVICES]);
/* After the last row: every observer's end. */
int gp_replay_events_end(struct gp_replay_events *e, gp_pool *const pools[GPUPOOL_MAX_DEVICES]);

#endif
