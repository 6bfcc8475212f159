/* The release thread: started with the first pool, so that an idle process answers too.
 * It listens on the process's share.h socket and answers at once: release requests from the
 * page (gpupool-stat --release, which wakes it), other processes' reclaim queries and asks
 * (reclaim.h). About once a second it runs the decay of idle cache (decay_ms), sets the
 * releasable gauge and records the device's total and free memory in the page. */
#ifndef GP_RELEASE_THREAD_H
#define GP_RELEASE_THREAD_H

#include <stdatomic.h>

/* Starts the thread once (a no-op after), and arms its stop at exit. Needs the registry
 * settled and a pool made: the call bodies' first pool starts it (calls/ladder.h). */
void gp_release_thread_start(void);

/* Exit (its own exit handler, before the registry's report): stops the thread's work (nothing reaches CUDA after this returns; bounded wait for
 * what is in flight: 2 s). */
void gp_release_thread_stop(void);

/* The flag an exit sets: a wait on the release thread (a framework's answer) ends with it. */
const atomic_bool *gp_release_thread_stopping(void);

/* In a forked child: the parent's thread is not here; its socket is the parent's. */
void gp_release_thread_after_fork(void);

#endif
