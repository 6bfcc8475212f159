/* The fence thread (fence_thread.h): sleeps until a cudaFree wants a fence, records a
 * marker for the pools' new pending frees (or, without markers, fences them with a
 * device_sync), polls the markers outstanding until the device has passed them, backs off
 * while a capture or a sticky error refuses. Owns its thread and flags; depends on the pool
 * and the log only. */
#include "fence_thread.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <unistd.h>

#include "log.h"

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

/* Polling outstanding markers: the first poll this long after a marker, each next one twice
 * as late, up to POLL_MAX_US: quick to see a short queue drain, and a device that lags by
 * milliseconds costs a few wake-ups per marker, not a core. */
#define POLL_MIN_US 50
#define POLL_MAX_US 1000

static void *fence_main(void *arg)
{
	(void)arg;
	useconds_t backoff_us = 1000, poll_us = POLL_MIN_US;
	bool polling = false; /* markers are outstanding somewhere */
	for (;;) {
		pthread_mutex_lock(&lock);
		while (!atomic_load(&want) && !atomic_load(&exiting) && !polling)
			pthread_cond_wait(&cond, &lock);
		pthread_mutex_unlock(&lock);
		if (atomic_load(&exiting))
			break;
		if (atomic_load(&want)) {
			/* let a burst of frees gather behind one marker (or fence) */
			if (fence_interval_us)
				usleep(fence_interval_us);
			poll_us = POLL_MIN_US;
		} else {
			usleep(poll_us);
			if (poll_us < POLL_MAX_US)
				poll_us = poll_us * 2 < POLL_MAX_US ? poll_us * 2 : POLL_MAX_US;
		}
		bool mark = atomic_exchange(&want, 0) != 0;
		bool again = false;
		polling = false;
		for (int d = 0; d < fence_ndev && !atomic_load(&exiting); d++) {
			gp_pool *p = atomic_load(&fence_pools[d]);
			atomic_store(&fencing, 1);
			if (!atomic_load(&exiting) && p) {
				/* markers: record one for the new frees, retire what the device has
				 * passed; without: one device_sync for the new frees */
				int rc = gp_pool_fence_poll(p, mark);
				if (rc == -ENOTSUP)
					rc = mark && gp_pool_has_pending(p) ? gp_pool_fence(p) : 0;
				if (rc == 1)
					polling = true;
				else if (rc < 0)
					again = true; /* a capture is active, or the device failed */
			}
			atomic_store(&fencing, 0);
		}
		if (again) {
			/* back off: a capture may last long, a sticky error for ever */
			atomic_store(&want, 1);
			usleep(backoff_us);
			if (backoff_us < 100000)
				backoff_us *= 2;
		} else {
			backoff_us = 1000;
		}
	}
	return NULL;
}

void gp_fence_thread_start(_Atomic(gp_pool *) *pools, int ndev, unsigned interval_us)
{
	pthread_mutex_lock(&lock);
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
	pthread_mutex_unlock(&lock);
}

void gp_fence_thread_wake(void)
{
	if (!atomic_load_explicit(&started, memory_order_acquire))
		return;
	/* a plain read first: while a fence is already wanted, no write to a shared line */
	if (atomic_load_explicit(&want, memory_order_relaxed) == 0 && atomic_exchange(&want, 1) == 0) {
		pthread_mutex_lock(&lock);
		pthread_cond_signal(&cond);
		pthread_mutex_unlock(&lock);
	}
}

void gp_fence_thread_stop(void)
{
	atomic_store(&exiting, 1);
	if (!atomic_load(&started))
		return;
	pthread_mutex_lock(&lock);
	pthread_cond_signal(&cond);
	pthread_mutex_unlock(&lock);
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
