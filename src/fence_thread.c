/* The fence thread (fence_thread.h): sleeps until a cudaFree wants a fence, fences the
 * pools that have pending frees, backs off while a capture or a sticky error refuses the
 * fence. Owns its thread and flags; depends on the pool and the log only. */
#include "fence_thread.h"

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

static void *fence_main(void *arg)
{
	(void)arg;
	useconds_t backoff_us = 1000;
	for (;;) {
		pthread_mutex_lock(&lock);
		while (!atomic_load(&want) && !atomic_load(&exiting))
			pthread_cond_wait(&cond, &lock);
		pthread_mutex_unlock(&lock);
		if (atomic_load(&exiting))
			break;
		/* let a burst of frees gather behind one fence */
		if (fence_interval_us)
			usleep(fence_interval_us);
		atomic_store(&want, 0);
		bool again = false;
		for (int d = 0; d < fence_ndev && !atomic_load(&exiting); d++) {
			gp_pool *p = atomic_load(&fence_pools[d]);
			atomic_store(&fencing, 1);
			if (!atomic_load(&exiting) && p && gp_pool_has_pending(p) && gp_pool_fence(p) != 0)
				again = true; /* a capture is active, or the sync failed */
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
