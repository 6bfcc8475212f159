/* The fence thread (fence_thread.h): sleeps until a cudaFree wants a fence, records a
 * marker for the pools' new pending frees (or, without markers, fences them with a
 * device_sync), polls the markers outstanding until the device has passed them, backs off
 * while a capture or a sticky error refuses. When it does which is the pool layer's
 * fence_schedule.h, stepped on CLOCK_MONOTONIC: this file only acts and sleeps on it. Owns
 * its thread and flags; depends on the pool, fence_schedule.h, the log and the clock only. */
#include "fence_thread.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <time.h>
#include <unistd.h>

#include "fence_schedule.h"
#include "log.h"
#include "proc.h"
#include "rank.h"

static pthread_t thread;
/* Set under `lock`; read without it by gp_fence_thread_wake, which a thread may call as soon as
 * it sees the first pool, before the registry has started this thread. */
static atomic_bool started;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static atomic_int want;
static atomic_int fencing; /* the thread is inside a fence (a CUDA call) */
static atomic_int exiting;
/* what to fence; set before the thread starts */
static _Atomic(gp_pool *) *fence_pools;
static int fence_ndev;
static unsigned fence_interval_us;
static void (*_Atomic after_action)(void); /* set again by each pool's creation: atomic */

/* The time fence_schedule.h's steps are taken at. */
static uint64_t now_ns(void) { return gp_clock_ns(CLOCK_MONOTONIC); }

/* Sleeps until clock time t, or while no free asks for a fence when t is GP_FENCE_NEVER.
 * False when the process is exiting. */
static bool sleep_until(uint64_t t)
{
	if (t == GP_FENCE_NEVER) {
		gp_mutex_lock(&lock, GP_RANK_FENCE_THREAD);
		while (!atomic_load(&want) && !atomic_load(&exiting))
			pthread_cond_wait(&cond, &lock);
		gp_mutex_unlock(&lock, GP_RANK_FENCE_THREAD);
	} else {
		struct timespec ts = {.tv_sec = (time_t)(t / GP_NS_PER_S), .tv_nsec = (long)(t % GP_NS_PER_S)};
		while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
			;
	}
	return !atomic_load(&exiting);
}

/* One action of the schedule on every pool: with markers, retire what the device has
 * passed and (mark) record one for the new frees; without, one device_sync for them.
 * Answers the outcome (GP_FENCE_EV_OUTSTANDING, GP_FENCE_EV_REFUSED bits). */
static unsigned act(bool mark)
{
	unsigned out = 0;
	for (int d = 0; d < fence_ndev && !atomic_load(&exiting); d++) {
		gp_pool *p = atomic_load(&fence_pools[d]);
		atomic_store(&fencing, 1);
		if (!atomic_load(&exiting) && p) {
			int rc = gp_pool_fence_poll(p, mark);
			if (rc == -ENOTSUP)
				rc = mark && gp_pool_has_pending(p) ? gp_pool_fence(p) : 0;
			if (rc == 1)
				out |= GP_FENCE_EV_OUTSTANDING;
			else if (rc < 0)
				out |= GP_FENCE_EV_REFUSED; /* a capture is active, or the device failed */
		}
		atomic_store(&fencing, 0);
	}
	return out;
}

static void *fence_main(void *arg)
{
	(void)arg;
	struct gp_fence_schedule s;
	gp_fence_schedule_init(&s, (uint64_t)fence_interval_us * 1000u);
	unsigned events = 0;
	for (;;) {
		/* a free asked and no action has taken it yet: the flag stays set until an
		 * action takes it, so that frees meanwhile do not signal again */
		if (atomic_load(&want))
			events |= GP_FENCE_EV_FREED;
		struct gp_fence_step st = gp_fence_schedule_next(&s, now_ns(), events);
		events = 0;
		if (st.action != GP_FENCE_SLEEP) {
			/* a free since the step above is covered by this action's marker */
			bool mark = atomic_exchange(&want, 0) || st.action == GP_FENCE_MARK;
			events = act(mark);
			void (*fn)(void) = atomic_load_explicit(&after_action, memory_order_acquire);
			if (fn)
				fn();
		} else if (!sleep_until(st.next_wake_ns)) {
			break;
		}
		if (atomic_load(&exiting))
			break;
	}
	return NULL;
}

void gp_fence_thread_start(_Atomic(gp_pool *) *pools, int ndev, unsigned interval_us)
{
	gp_mutex_lock(&lock, GP_RANK_FENCE_THREAD);
	if (!atomic_load_explicit(&started, memory_order_relaxed)) {
		fence_pools = pools;
		fence_ndev = ndev;
		fence_interval_us = interval_us;
		pthread_attr_t a;
		pthread_attr_init(&a);
		pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
		pthread_attr_setstacksize(&a, 256 * 1024); /* the runtime and driver run on it */
		if (pthread_create(&thread, &a, fence_main, NULL) == 0)
			atomic_store(&started, true);
		else
			gp_log(GP_LOG_WARN, "cannot start the fence thread; allocations fence inline instead");
		pthread_attr_destroy(&a);
	}
	gp_mutex_unlock(&lock, GP_RANK_FENCE_THREAD);
}

void gp_fence_thread_after_action(void (*fn)(void)) { atomic_store_explicit(&after_action, fn, memory_order_release); }

void gp_fence_thread_wake(void)
{
	if (!atomic_load_explicit(&started, memory_order_acquire))
		return;
	/* a plain read first: while a fence is already wanted, no write to a shared line */
	if (atomic_load_explicit(&want, memory_order_relaxed) == 0 && atomic_exchange(&want, 1) == 0) {
		gp_mutex_lock(&lock, GP_RANK_FENCE_THREAD);
		pthread_cond_signal(&cond);
		gp_mutex_unlock(&lock, GP_RANK_FENCE_THREAD);
	}
}

void gp_fence_thread_stop(void)
{
	atomic_store(&exiting, 1);
	if (!atomic_load(&started))
		return;
	gp_mutex_lock(&lock, GP_RANK_FENCE_THREAD);
	pthread_cond_signal(&cond);
	gp_mutex_unlock(&lock, GP_RANK_FENCE_THREAD);
	/* the runtime tears itself down after this handler: let a fence that is inside
	 * cudaDeviceSynchronize finish first (bounded: 2 s) */
	for (int i = 0; i < 2000 && atomic_load(&fencing); i++)
		usleep(1000);
}

void gp_fence_thread_after_fork(void)
{
	atomic_store(&fencing, 0);
	pthread_mutex_init(&lock, NULL);
	pthread_cond_init(&cond, NULL);
	atomic_store(&want, 0);
	atomic_store(&started, false);
}
