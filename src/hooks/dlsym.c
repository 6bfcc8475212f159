/* gpupool's dlsym: the process's dlsym calls come here first (LD_PRELOAD), so that a program
 * that looks a driver entry point up on libcuda's handle (or through RTLD_DEFAULT) gets
 * gpupool's (hooks_driver.c). The exported dlsym is the port layer's trampoline
 * (port/trampoline.h): it asks gp_dlsym_answer first and otherwise jumps to the real dlsym
 * (libcuda.h) with the stack untouched. Depends on the driver layer's libcuda.h, the shim's
 * entry table and the port; must not depend on the registry or the pool. */

#include <dlfcn.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>

#include "entries.h"
#include "hooks_driver.h"
#include "libcuda.h"
#include "port.h"

/* Is `caller` code of a dynamic CUDA runtime (libcudart.so.*) or of the driver itself
 * (libcuda.so.*)? The runtime is served by gpupool's runtime layer: it must get the real
 * driver, or every allocation it makes for a pool segment would come back into the pool
 * through the driver layer. The driver looks its own names up on some systems (WSL2): it
 * gets its own entry points. */
static bool caller_is_runtime(const void *caller)
{
	Dl_info info;
	if (!caller || !dladdr(caller, &info) || !info.dli_fname)
		return false;
	const char *base = strrchr(info.dli_fname, '/');
	base = base ? base + 1 : info.dli_fname;
	return strncmp(base, "libcudart.so", 12) == 0 || strncmp(base, "libcuda.so", 10) == 0;
}

/* What the trampoline asks: gpupool's answer for dlsym(handle, name) called from `caller`,
 * or NULL to let the real dlsym answer. Only names of GP_DRIVER_HOOKED are answered, and
 * only on libcuda's handle, RTLD_DEFAULT or RTLD_NEXT: the cost for any other name is a
 * call and two compares. Hidden: called by the trampoline only. */
__attribute__((visibility("hidden"))) void *gp_dlsym_answer(void *handle, const char *name, const void *caller);
GP_PORT_EARLY void *gp_dlsym_answer(void *handle, const char *name, const void *caller)
{
	gp_dlsym_real_resolve();
	/* driver names are cu + a capital (cuMemAlloc_v2); the runtime's are cuda... */
	if (!name || name[0] != 'c' || name[1] != 'u' || name[2] < 'A' || name[2] > 'Z')
		return NULL;
	if (!gp_entries_by_name(&gp_hooks_driver_entries, NULL, name))
		return NULL;
	bool global = handle == RTLD_DEFAULT || handle == RTLD_NEXT;
	if (!global && !gp_libcuda_is_handle(handle))
		return NULL;
	if (caller_is_runtime(caller)) {
		if (!global)
			return NULL; /* the real dlsym on libcuda's handle: the real entry point */
		void *h = gp_libcuda_handle(); /* RTLD_DEFAULT would find gpupool's own exports */
		return h ? gp_dlsym_real(h, name) : NULL;
	}
	/* only a name the loaded driver has: a program that probes for an entry point (a newer
	 * one, preferred where found) must not find one the driver would not give it */
	return gp_entries_by_name(&gp_hooks_driver_entries, gp_libcuda_get(), name);
}

#include "trampoline.h"
