/* The lock-rank check (rank.h), in builds with assertions only: per thread, how many locks
 * of each rank it holds. Depends on nothing of gpupool's; writes its one message with
 * write(2) before aborting (the log layer is above the port). */
#include "rank.h"

#ifdef GP_INVARIANTS
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *const names[GP_RANK_COUNT] = {
	[GP_RANK_NONE] = "none",
	[GP_RANK_REGISTRY_INIT] = "registry init",
	[GP_RANK_RUNTIME_TABLE] = "runtime table",
	[GP_RANK_LIBCUDA_TABLE] = "driver table",
	[GP_RANK_POOLS] = "pools",
	[GP_RANK_FENCE_THREAD] = "fence thread",
	[GP_RANK_CAPTURE_GATE] = "capture gate",
	[GP_RANK_POOL] = "pool",
	[GP_RANK_UNPOOLED] = "unpooled records",
	[GP_RANK_WAITQ] = "wait line",
	[GP_RANK_RESET_GATE] = "reset gate",
	[GP_RANK_STREAMS] = "streams",
	[GP_RANK_PRIMARY_RETAIN] = "primary retain",
	[GP_RANK_TRACE_FILE] = "trace file",
	[GP_RANK_TRACE_BUFFER] = "trace buffer",
};

static _Thread_local unsigned char held[GP_RANK_COUNT];

void gp_rank_take(enum gp_rank r)
{
	for (int k = GP_RANK_COUNT - 1; k >= (int)r; k--) {
		if (!held[k])
			continue;
		char msg[160];
		int n = snprintf(msg, sizeof msg, "gpupool: lock order: taking the %s lock while holding the %s lock\n",
				 names[r], names[k]);
		if (n > 0)
			(void)!write(2, msg, (size_t)n < sizeof msg ? (size_t)n : sizeof msg - 1);
		abort();
	}
	held[r]++;
}

void gp_rank_give(enum gp_rank r)
{
	if (held[r])
		held[r]--;
}
#else
/* ISO C forbids an empty translation unit */
typedef int gp_rank_unused;
#endif
