/* The trace format: the CSV header and the op column, shared by the recorder (trace.c),
 * the reader (tracefile.c) and the tools. Documented in docs/replay.md. Constants only:
 * depends on nothing. */
#ifndef GP_TRACE_FORMAT_H
#define GP_TRACE_FORMAT_H

#include <stddef.h>

/* The op column. */
enum gp_trace_op {
	GP_TRACE_MALLOC = 0,
	GP_TRACE_FREE = 1,
	GP_TRACE_MALLOC_ASYNC = 2,
	GP_TRACE_FREE_ASYNC = 3,
};

#define GP_TRACE_HEADER "t_ns,op,tid,dev,stream,size,ptr,dur_ns,err"

/* "malloc", "free", "malloc_async", "free_async"; NULL for anything else. */
static inline const char *gp_trace_op_name(int op)
{
	static const char *const names[] = {"malloc", "free", "malloc_async", "free_async"};
	return op >= 0 && op <= 3 ? names[op] : NULL;
}

#endif
