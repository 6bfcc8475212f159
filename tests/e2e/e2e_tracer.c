/* A dlsym interposer shaped like a typical tracer or profiler (libe2e_tracer.so): an
 * unversioned dlsym (no version script) that counts the look-ups of names beginning
 * "e2e_probe", answers its own name "e2e_tracer_seen" (which no library defines), and
 * forwards everything else to the next dlsym, found with dlvsym(RTLD_NEXT, "dlsym",
 * "GLIBC_2.34") (then GLIBC_2.2.5, GLIBC_2.17), from its own code, not as a tail call (it
 * counts what was found), so the dlsym it forwards to sees the tracer as the caller. Asked for
 * a driver name (cu...), it first asks the process's dlsym for the same name itself, once per
 * thread at a time, as a tracer that checks what the rest of the process answers would: with
 * gpupool preloaded first, that call comes back into gpupool's dlsym while gpupool may be
 * resolving its driver table through this very dlsym. Built without sanitizers, and its
 * dlsym calls no string function of the C library: the sanitizer runtime's own look-ups pass
 * through here before it has initialised (and before its interceptors of them work). */
#include <dlfcn.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>

#include "e2e_interposers.h"

typedef void *(*dlsym_fn)(void *, const char *);

static _Atomic(dlsym_fn) next;
static atomic_ulong probes, found;
static _Thread_local bool inside;
/* the process's dlsym, the first in the search order (through the GOT: a plain call of dlsym
 * from here may be bound to this very function by the compiler) */
static void *(*volatile process_dlsym)(void *, const char *) = dlsym;

static unsigned long seen(void) { return atomic_load(&probes); }

/* `s` begins with `prefix` (whole: `s` equals it) */
static bool begins(const char *s, const char *prefix, bool whole)
{
	while (*prefix && *s == *prefix)
		s++, prefix++;
	return !*prefix && (!whole || !*s);
}

static dlsym_fn next_dlsym(void)
{
	dlsym_fn f = atomic_load(&next);
	static const char *const versions[] = {"GLIBC_2.34", "GLIBC_2.2.5", "GLIBC_2.17"};
	for (size_t i = 0; !f && i < sizeof versions / sizeof versions[0]; i++) {
		union {
			void *p;
			dlsym_fn f;
		} u = {dlvsym(RTLD_NEXT, "dlsym", versions[i])};
		f = u.f;
	}
	atomic_store(&next, f);
	return f;
}

__attribute__((visibility("default"))) void *dlsym(void *handle, const char *name)
{
	dlsym_fn f = next_dlsym();
	if (!f)
		return NULL;
	if (begins(name, "e2e_probe", false))
		atomic_fetch_add(&probes, 1);
	if (begins(name, "e2e_tracer_seen", true)) {
		e2e_tracer_seen_fn s = seen;
		void *p;
		memcpy(&p, &s, sizeof p);
		return p;
	}
	if (name[0] == 'c' && name[1] == 'u' && !inside) {
		inside = true;
		(void)process_dlsym(handle, name);
		inside = false;
	}
	void *r = f(handle, name);
	if (r)
		atomic_fetch_add(&found, 1);
	return r;
}
