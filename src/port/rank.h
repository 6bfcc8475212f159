/* Lock ranks: every lock of gpupool has a rank, and a thread takes locks in increasing rank
 * only (docs/architecture.md, "Locks", has the table and why each order holds; jemalloc's
 * witness is the model). Builds with assertions (-Dinvariants: debug and test builds)
 * check it on every take, per thread, and abort naming both locks; the builds users run
 * compile the checks away. Depends on nothing of gpupool's. */
#ifndef GP_PORT_RANK_H
#define GP_PORT_RANK_H

#include <pthread.h>

/* Outermost first. Two locks of one rank are never held together. */
enum gp_rank {
	GP_RANK_NONE = 0,
	GP_RANK_REGISTRY_INIT,  /* process/init.c: finding the runtime or the driver */
	GP_RANK_POOLS,          /* process/pools.c: creating and removing pools */
	GP_RANK_FENCE_THREAD,   /* process/fence_thread.c: the fence thread's start and sleep */
	GP_RANK_POOL,           /* port/lock.h: each pool's lock */
	GP_RANK_RESET_GATE,     /* process/lifecycle.c: a device's pools' backend calls (read) against its
				 * reset (write, taken with no other lock held) */
	GP_RANK_CAPTURE_GATE,   /* capture/capture.c: no capture begins during a device sync */
	GP_RANK_STREAMS,        /* runtime/backend_cuda.c: streams and fence markers */
	GP_RANK_PRIMARY_RETAIN, /* driver/backend_driver.c: retaining a primary context */
	GP_RANK_RUNTIME_TABLE,  /* runtime/runtime.c: resolving the runtime's entry points */
	GP_RANK_LIBCUDA_TABLE,  /* driver/libcuda.c: resolving the driver's entry points */
	GP_RANK_TRACE_BUFFER,   /* trace/trace.c: one thread's trace buffer, flushed into the file */
	GP_RANK_TRACE_FILE,     /* trace/trace.c: the trace file */
	GP_RANK_UNPOOLED,       /* calls/unpooled.c: the records of memory held outside the pools; a
				 * leaf: nothing is taken under it */
	GP_RANK_WAITQ,          /* sharing/waitq.c: this process's copy of each GPU's wait line; a
				 * leaf, taken by the gate under a pool's lock */
	GP_RANK_COUNT
};

#ifdef GP_INVARIANTS
/* Before taking a lock of rank `r`: aborts when the thread holds one of rank >= r. */
void gp_rank_take(enum gp_rank r);
/* After giving a lock of rank `r` back. */
void gp_rank_give(enum gp_rank r);
#else
static inline void gp_rank_take(enum gp_rank r) { (void)r; }
static inline void gp_rank_give(enum gp_rank r) { (void)r; }
#endif

/* pthread_mutex_lock/unlock of a lock of rank `r`, checked where assertions are in. */
static inline void gp_mutex_lock(pthread_mutex_t *m, enum gp_rank r)
{
	gp_rank_take(r);
	pthread_mutex_lock(m);
}

static inline void gp_mutex_unlock(pthread_mutex_t *m, enum gp_rank r)
{
	pthread_mutex_unlock(m);
	gp_rank_give(r);
}

#endif
