/* The non-blocking streams the process has created, per device: what a fence must also
 * mark besides the legacy stream (work on a non-blocking stream does not wait for it).
 * Fed by the stream-creation hooks of both layers (runtime and driver), drained by their
 * stream-destroy hooks. Thread-safe; no CUDA types; depends on backend.h (gp_stream) only. */
#ifndef GP_STREAMS_H
#define GP_STREAMS_H

#include <stddef.h>

#include "backend.h"

/* Remembers stream `s` (a non-blocking stream created on `device`). 0, -EINVAL (a device
 * beyond GPUPOOL_MAX_DEVICES, or GP_NO_STREAM), or -ENOMEM (the stream is not remembered). */
int gp_streams_add(int device, gp_stream s);

/* Forgets stream `s`, on whatever device it was remembered; a stream never added is ignored. */
void gp_streams_remove(gp_stream s);

/* Copies up to `cap` streams of `device` to out[]; returns how many `device` has (which may
 * exceed cap). */
size_t gp_streams_list(int device, gp_stream *out, size_t cap);

/* In a forked child: no stream of the parent's is the child's, and the lock may have been
 * held by a thread that does not exist here. */
void gp_streams_after_fork(void);

#endif
