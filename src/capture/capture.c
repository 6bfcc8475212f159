/* Stream captures (capture.h): the count and the gate. Owns the gate and the count;
 * depends on the port's rank.h only. */
#include "capture.h"
#include "rank.h"

#include <pthread.h>

/* A device synchronize while any stream captures would invalidate the capture (global
 * mode) or is at least meaningless. Captures are counted by the capture hooks; the gate
 * makes "no capture is active" and the synchronize one step, so a capture cannot begin in
 * the middle of a fence (it waits for the fence to end instead). */
static pthread_mutex_t gate = PTHREAD_MUTEX_INITIALIZER;
static atomic_int captures;

void gp_capture_begin(void)
{
	gp_mutex_lock(&gate, GP_RANK_CAPTURE_GATE);
	atomic_fetch_add(&captures, 1);
	gp_mutex_unlock(&gate, GP_RANK_CAPTURE_GATE);
}

void gp_capture_end(void)
{
	if (atomic_fetch_sub(&captures, 1) <= 0)
		atomic_fetch_add(&captures, 1); /* an end without a begin we saw */
}

int gp_capture_count(void) { return atomic_load_explicit(&captures, memory_order_relaxed); }

const atomic_int *gp_capture_counter(void) { return &captures; }

bool gp_capture_gate_enter(void)
{
	gp_mutex_lock(&gate, GP_RANK_CAPTURE_GATE);
	if (atomic_load(&captures) > 0) {
		gp_mutex_unlock(&gate, GP_RANK_CAPTURE_GATE);
		return false;
	}
	return true;
}

void gp_capture_gate_leave(void) { gp_mutex_unlock(&gate, GP_RANK_CAPTURE_GATE); }

void gp_capture_after_fork(void)
{
	pthread_mutex_init(&gate, NULL);
	atomic_store(&captures, 0);
}
