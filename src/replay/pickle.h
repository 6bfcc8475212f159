/* A small writer of Python pickles (protocol 4 opcodes, no frames, no memo) for dicts, lists,
 * 2-tuples, ints, floats, strings, booleans and None: what torch.cuda.memory._dump_snapshot
 * writes and what PyTorch's memory viewer (MemoryViz.js) and Python's pickle module read.
 * Containers are filled in batches of 1000 items (APPENDS/SETITEMS), as Python's pickler
 * does: the viewer spreads each batch into one call. Depends on libc only. */
#ifndef GP_PICKLE_H
#define GP_PICKLE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define GP_PICKLE_DEPTH 8
#define GP_PICKLE_BATCH 1000

struct gp_pickle {
	FILE *f;
	int err;                           /* first error: -EIO (a write failed), -EINVAL (misuse) */
	int depth;
	unsigned count[GP_PICKLE_DEPTH];   /* items in the open batch of each open container */
	bool is_dict[GP_PICKLE_DEPTH];
};

/* Starts a pickle on f (PROTO 4). */
void gp_pickle_begin(struct gp_pickle *pk, FILE *f);
/* STOP. Returns 0, or the first error (a container left open is -EINVAL). */
int gp_pickle_end(struct gp_pickle *pk);

/* A list or dict: open it, write its items (a dict: key then value), call _next after each
 * item (for a dict, after each value), close it. */
void gp_pickle_list_open(struct gp_pickle *pk);
void gp_pickle_dict_open(struct gp_pickle *pk);
void gp_pickle_next(struct gp_pickle *pk);
void gp_pickle_close(struct gp_pickle *pk);

void gp_pickle_int(struct gp_pickle *pk, int64_t v);
void gp_pickle_float(struct gp_pickle *pk, double v);
void gp_pickle_str(struct gp_pickle *pk, const char *s);
void gp_pickle_bool(struct gp_pickle *pk, bool v);
void gp_pickle_none(struct gp_pickle *pk);
/* The two values just written become a tuple. */
void gp_pickle_tuple2(struct gp_pickle *pk);
/* An empty list (a leaf value, e.g. "frames": []). */
void gp_pickle_empty_list(struct gp_pickle *pk);

/* Dict items: key and value, then gp_pickle_next. */
void gp_pickle_kv_int(struct gp_pickle *pk, const char *key, int64_t v);
void gp_pickle_kv_str(struct gp_pickle *pk, const char *key, const char *v);
void gp_pickle_kv_bool(struct gp_pickle *pk, const char *key, bool v);

#endif
