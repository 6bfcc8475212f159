/* After fork, the child starts clean: the one fork handler, and the one ordered list of
 * what each module resets (DESIGN contract 11: no inherited locks held, no pools, its own
 * page). It resets every layer, so it sits at the top, beside the call bodies. Owns nothing
 * but the list; depends on each module's after_fork only. */
#include <pthread.h>

#include "backend_cuda.h"
#include "backend_driver.h"
#include "backend_vmm.h"
#include "capture.h"
#include "fence_thread.h"
#include "framework.h"
#include "libcuda.h"
#include "registry_internal.h"
#include "reclaim.h"
#include "release_thread.h"
#include "runtime.h"
#include "waitq.h"
#include "driver_calls.h"

/* The child's reset, lowest layer first:
 *   1. the runtime table's lock (runtime.c), maybe held by a thread looking for it; the
 *      driver table's (libcuda.c), the driver backend's retained contexts likewise;
 *   2. the capture gate and count (capture.c): no capture of the parent's is the child's;
 *   3. the fence thread (process/fence_thread.c): gone with the fork, its lock maybe held;
 *      the release thread (sharing/release_thread.c): gone too, its socket the parent's;
 *      reclaim's floors and figures (sharing/reclaim.c), the parent's copy of each GPU's
 *      wait line (sharing/waitq.c) and its framework thread (sharing/framework.c);
 *   4. the streams and markers of the CUDA backend (backend_cuda.c): the parent's;
 *   5. the driver calls' cache of primary contexts and the records of unpooled memory
 *      (driver_calls.c, unpooled.c): the parent's;
 *   6. the registry: the lock of finding the runtime (init.c); pools, page slots, page and
 *      trace (pools.c); killed and parked pools, the fence thread's sentinel, the readers'
 *      records and the reset gates (lifecycle.c).
 * No reset reads another module's state, so the order is a convention, not a constraint;
 * every module is reset before the child's first call can start the fence thread again or
 * take the gate. A module with state to reset after a fork adds its line here, never a
 * pthread_atfork of its own. */
static void at_fork_child(void)
{
	gp_runtime_after_fork();
	gp_libcuda_after_fork();
	gp_driver_backend_after_fork();
	gp_vmm_backend_after_fork();
	gp_capture_after_fork();
	gp_fence_thread_after_fork();
	gp_release_thread_after_fork();
	gp_reclaim_after_fork();
	gp_waitq_after_fork();
	gp_framework_after_fork();
	gp_cuda_backend_after_fork();
	gp_calls_driver_after_fork();
	gp_registry_init_after_fork();
	gp_registry_pools_after_fork();
	gp_registry_lifecycle_after_fork();
}

/* Armed when the library is loaded, before any thread of gpupool's can hold a lock: a
 * registration, nothing else (no CUDA call, no thread, no file: DESIGN contract 9). In the
 * child of a process that never used gpupool each reset finds its module as it started. */
__attribute__((constructor)) static void arm(void) { (void)pthread_atfork(NULL, NULL, at_fork_child); }
