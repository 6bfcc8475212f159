/* The dlsym interposition (dlsym.h). The exported dlsym is a few instructions of assembly
 * (x86-64, aarch64) that ask gp_dlsym_answer first and otherwise jump to the real dlsym with
 * the stack untouched, so glibc sees the program's return address (RTLD_NEXT, and the
 * caller's namespace, stay the program's). Depends on libcuda.h and hooks_driver.h only. */
#include "dlsym.h"

#include <dlfcn.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>

#include "hooks_driver.h"
#include "libcuda.h"
#include "log.h"

typedef void *(*dlsym_fn)(void *, const char *);

/* A sanitizer runtime preloaded ahead of gpupool (the test builds' ASan and TSan) resolves
 * its interceptors with dlsym before it has initialised itself: the code on that path must
 * not be instrumented (its shadow memory does not exist yet). */
#if defined(__has_attribute)
#if __has_attribute(no_sanitize)
#define GP_EARLY __attribute__((no_sanitize("address", "thread", "undefined")))
#endif
#endif
#ifndef GP_EARLY
#define GP_EARLY
#endif

/* The real dlsym; read by the trampoline below (hidden, so no GOT). */
__attribute__((visibility("hidden"))) dlsym_fn gp_dlsym_next;

GP_EARLY static void *no_dlsym(void *handle, const char *name)
{
	(void)handle, (void)name;
	return NULL;
}

/* glibc 2.34 moved dlsym into libc under a new version; older glibc (and programs built
 * against it) have it at GLIBC_2.2.5 (x86-64) or GLIBC_2.17 (aarch64). */
GP_EARLY static dlsym_fn next_dlsym(void)
{
	dlsym_fn f = __atomic_load_n(&gp_dlsym_next, __ATOMIC_ACQUIRE);
	if (__builtin_expect(f != NULL, 1))
		return f;
	static const char *const versions[] = {"GLIBC_2.34", "GLIBC_2.2.5", "GLIBC_2.17"};
	void *s = NULL;
	for (size_t i = 0; !s && i < sizeof versions / sizeof versions[0]; i++)
		s = dlvsym(RTLD_NEXT, "dlsym", versions[i]);
	if (s)
		memcpy(&f, &s, sizeof f);
	else
		f = no_dlsym; /* never seen: every glibc has one of them */
	__atomic_store_n(&gp_dlsym_next, f, __ATOMIC_RELEASE);
	return f;
}

void *gp_dlsym_real(void *handle, const char *name) { return next_dlsym()(handle, name); }

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
 * call and two compares. */
__attribute__((visibility("hidden"))) void *gp_dlsym_answer(void *handle, const char *name, const void *caller);
GP_EARLY void *gp_dlsym_answer(void *handle, const char *name, const void *caller)
{
	(void)next_dlsym();
	/* driver names are cu + a capital (cuMemAlloc_v2); the runtime's are cuda... */
	if (!name || name[0] != 'c' || name[1] != 'u' || name[2] < 'A' || name[2] > 'Z')
		return NULL;
	void *ours = gp_hooks_driver_by_name(name);
	if (!ours)
		return NULL;
	bool global = handle == RTLD_DEFAULT || handle == RTLD_NEXT;
	if (!global && !gp_driver_is_handle(handle))
		return NULL;
	if (caller_is_runtime(caller)) {
		if (!global)
			return NULL; /* the real dlsym on libcuda's handle: the real entry point */
		void *h = gp_driver_handle(); /* RTLD_DEFAULT would find gpupool's own exports */
		return h ? gp_dlsym_real(h, name) : NULL;
	}
	return ours;
}

#if defined(__x86_64__)
/* rdi = handle, rsi = name; the return address is at (%rsp) on entry. */
__asm__(".text\n"
	".globl dlsym\n"
	".type dlsym,@function\n"
	"dlsym:\n"
	".cfi_startproc\n"
	"	push %rdi\n"
	".cfi_adjust_cfa_offset 8\n"
	"	push %rsi\n"
	".cfi_adjust_cfa_offset 8\n"
	"	sub $8, %rsp\n"
	".cfi_adjust_cfa_offset 8\n"
	"	mov 24(%rsp), %rdx\n"
	"	call gp_dlsym_answer\n"
	"	add $8, %rsp\n"
	".cfi_adjust_cfa_offset -8\n"
	"	pop %rsi\n"
	".cfi_adjust_cfa_offset -8\n"
	"	pop %rdi\n"
	".cfi_adjust_cfa_offset -8\n"
	"	test %rax, %rax\n"
	"	jz 1f\n"
	"	ret\n"
	"1:	jmp *gp_dlsym_next(%rip)\n"
	".cfi_endproc\n"
	".size dlsym, .-dlsym\n");
#elif defined(__aarch64__)
/* x0 = handle, x1 = name; the return address is in x30 on entry. `hint #34` is `bti c`, the
 * landing pad a BTI-enforcing system requires of a function called indirectly (a no-op
 * elsewhere), and the tail branch goes through x16, which may land on the real dlsym's own
 * `bti c`: the compiler marks this object BTI-compatible when built with
 * -mbranch-protection, so the assembly must be. */
__asm__(".text\n"
	".globl dlsym\n"
	".type dlsym,%function\n"
	"dlsym:\n"
	".cfi_startproc\n"
	"	hint #34\n"
	"	stp x29, x30, [sp, #-32]!\n"
	".cfi_def_cfa_offset 32\n"
	".cfi_offset 29, -32\n"
	".cfi_offset 30, -24\n"
	"	mov x29, sp\n"
	"	stp x0, x1, [sp, #16]\n"
	"	mov x2, x30\n"
	"	bl gp_dlsym_answer\n"
	"	mov x9, x0\n"
	"	ldp x0, x1, [sp, #16]\n"
	"	ldp x29, x30, [sp], #32\n"
	".cfi_restore 29\n"
	".cfi_restore 30\n"
	".cfi_def_cfa_offset 0\n"
	"	cbz x9, 1f\n"
	"	mov x0, x9\n"
	"	ret\n"
	"1:	adrp x16, gp_dlsym_next\n"
	"	ldr x16, [x16, :lo12:gp_dlsym_next]\n"
	"	br x16\n"
	".cfi_endproc\n"
	".size dlsym, .-dlsym\n");
#else
/* Elsewhere a C wrapper: glibc sees libgpupool.so as the caller, so dlsym(RTLD_NEXT, ...)
 * from a program searches after libgpupool.so rather than after the program. */
__attribute__((visibility("default"))) void *dlsym(void *handle, const char *name)
{
	void *a = gp_dlsym_answer(handle, name, __builtin_return_address(0));
	return a ? a : gp_dlsym_real(handle, name);
}
#endif
