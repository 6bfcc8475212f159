/* gpupool's dlsym: the process's dlsym calls come here first (LD_PRELOAD), so that a program
 * that looks a driver entry point up on libcuda's handle (or through RTLD_DEFAULT) gets
 * gpupool's (hooks_driver.c). The exported dlsym is the port layer's trampoline
 * (port/trampoline.h): it asks gp_dlsym_answer what to do and either returns its answer or
 * jumps, with the stack untouched, to the dlsym it names: the next one (another
 * interposer's, preloaded after gpupool, else glibc's; libcuda.h), or glibc's for gpupool's
 * own look-ups. Depends on the driver layer's libcuda.h, the shim's entry table and the port;
 * must not depend on the registry or the pool. */

#include <dlfcn.h>
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

/* What the trampoline does with a call dlsym(handle, name): jump to `jump` (a dlsym, called
 * with the program's arguments and return address), or, where `jump` is NULL, return
 * `value`. Two words, returned in two registers (rax:rdx, x0:x1). */
struct gp_dlsym_route {
	void *value;
	gp_dlsym_fn jump;
};

/* The route for dlsym(handle, name) called from `caller`. Only names of GP_DRIVER_HOOKED are
 * answered, and only on libcuda's handle, RTLD_DEFAULT or RTLD_NEXT: the cost for any other
 * name is two calls and a few compares. Hidden: called by the trampoline only. */
__attribute__((visibility("hidden"))) struct gp_dlsym_route gp_dlsym_answer(void *handle, const char *name,
									    const void *caller);
GP_PORT_EARLY struct gp_dlsym_route gp_dlsym_answer(void *handle, const char *name, const void *caller)
{
	struct gp_dlsyms d = gp_dlsyms();
	/* gpupool's own look-ups (the runtime layer's dlsym(RTLD_NEXT, "cudaMalloc"), ...):
	 * glibc's, with libgpupool.so as the caller. Another interposer's dlsym would call
	 * glibc's from its own code, and RTLD_NEXT would then search after it. */
	if (gp_dlsym_is_ours(caller))
		return (struct gp_dlsym_route){NULL, d.libc};
	struct gp_dlsym_route pass = {NULL, d.next};
	/* driver names are cu + a capital (cuMemAlloc_v2); the runtime's are cuda... */
	if (!name || name[0] != 'c' || name[1] != 'u' || name[2] < 'A' || name[2] > 'Z')
		return pass;
	if (!gp_entries_by_name(&gp_hooks_driver_entries, NULL, name))
		return pass;
	bool global = handle == RTLD_DEFAULT || handle == RTLD_NEXT;
	if (!global && !gp_libcuda_is_handle(handle))
		return pass;
	if (caller_is_runtime(caller)) {
		if (!global)
			return pass; /* the next dlsym on libcuda's handle: the driver's entry point */
		void *h = gp_libcuda_handle(); /* RTLD_DEFAULT would find gpupool's own exports */
		return (struct gp_dlsym_route){h ? gp_dlsym_real(h, name) : NULL, NULL};
	}
	/* only a name the loaded driver has: a program that probes for an entry point (a newer
	 * one, preferred where found) must not find one the driver would not give it */
	const struct gp_driver *drv = gp_libcuda_get();
	void *ours = gp_entries_by_name(&gp_hooks_driver_entries, drv, name);
	if (ours)
		return (struct gp_dlsym_route){ours, NULL};
	if (global && drv) {
		/* nor through RTLD_DEFAULT, where glibc would find gpupool's export of the name:
		 * the driver's answer (NULL, dlerror set) */
		void *h = gp_libcuda_handle();
		return (struct gp_dlsym_route){h ? gp_dlsym_real(h, name) : NULL, NULL};
	}
	return pass;
}

#include "trampoline.h"
