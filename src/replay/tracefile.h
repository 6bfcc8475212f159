/* The trace reader: parses and validates the CSV format of docs/replay.md,
 * plain or gzip'd (zlib reads both), one row at a time in bounded memory. Every error
 * names the file and the line. Depends on zlib, libc and trace_format.h only. */
#ifndef GP_TRACEFILE_H
#define GP_TRACEFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "trace_format.h"

/* Longest line accepted, in bytes without the newline (a real row is < 160). */
#define GP_TRACEFILE_LINE_MAX 512
/* Largest size accepted in the size column: 2^48 bytes (256 TiB). */
#define GP_TRACEFILE_SIZE_MAX (1ull << 48)
/* Largest device ordinal accepted in the dev column. */
#define GP_TRACEFILE_DEV_MAX 1023
/* Largest sort window (rows held in memory to restore t_ns order). */
#define GP_TRACEFILE_WINDOW_MAX (1u << 20)

/* The name standard input (path "-") goes by in messages. */
#define GP_TRACEFILE_STDIN "<stdin>"

struct gp_trace_row {
	uint64_t t_ns;      /* ns since the process started */
	uint64_t size;      /* bytes requested; 0 on frees */
	uint64_t dur_ns;    /* native duration of the call */
	uintptr_t stream;   /* stream handle (0 for the sync calls) */
	uintptr_t ptr;      /* device pointer returned or freed */
	int32_t tid;        /* OS thread id */
	int32_t dev;        /* device ordinal, 0..GP_TRACEFILE_DEV_MAX */
	int32_t err;        /* cudaError_t, >= 0 */
	int32_t op;         /* enum gp_trace_op */
	unsigned long line; /* line number in the file (1 = header) */
};

struct gp_tracefile;

/* Opens `path` ("-": standard input, read from a duplicate of descriptor 0 and named
 * GP_TRACEFILE_STDIN in messages) and checks the header line. Plain or gzip'd by the first
 * two bytes (gzip's magic), not by the name. A gzip file is one or more whole gzip members
 * and nothing else: one that ends early, fails its CRC or is followed by other bytes is an
 * error (-EIO, from gp_tracefile_next or, before the header's end, from here).
 * `sort_window` rows are buffered to hand rows out in t_ns order (stable: equal times keep
 * file order); 0 = file order. A row that is older than one already handed out is still
 * returned (counted by gp_tracefile_out_of_order). Returns 0, -ENOMEM, -EINVAL (bad header or window: the
 * message is in err), -EIO, or the negative errno of open. `err` (may be NULL) receives a
 * one-line message on failure. */
int gp_tracefile_open(struct gp_tracefile **out, const char *path, size_t sort_window,
		      char *err, size_t errlen);

/* Reads the next row. Returns 1 and *row, 0 at the end of the file, or -EINVAL (malformed
 * line), -EIO (read or gzip error: a truncated or corrupt stream, bytes after its end); the
 * message, with the line number, is in gp_tracefile_error. After an error every later call
 * fails the same way. */
int gp_tracefile_next(struct gp_tracefile *tf, struct gp_trace_row *row);

/* The last error as "PATH:LINE: what is wrong", or "" when none. */
const char *gp_tracefile_error(const struct gp_tracefile *tf);
/* Line number of the last line read (1 = header); the line an error names. */
unsigned long gp_tracefile_line(const struct gp_tracefile *tf);
/* Rows returned with a t_ns below an earlier returned row's (window too small). */
uint64_t gp_tracefile_out_of_order(const struct gp_tracefile *tf);

void gp_tracefile_close(struct gp_tracefile *tf);

/* Parses one data line (no newline) into *row. Returns 0, or -EINVAL with a message
 * (without file or line) in why. Pure; used by gp_tracefile_next and the tests. */
int gp_tracefile_parse_line(const char *line, size_t len, struct gp_trace_row *row,
			    char *why, size_t whylen);

#endif
