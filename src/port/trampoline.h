/* The dlsym trampoline, the port layer's only assembly: a function `dlsym` that asks
 * gp_dlsym_answer(handle, name, caller's return address) for a route, two words returned in
 * two registers: {value, jump}. Where `jump` is NULL it returns `value`; otherwise it jumps to
 * `jump` (a dlsym) with the stack and the arguments untouched, so the callee sees the
 * program's return address (RTLD_NEXT, and the caller's namespace, stay the program's).
 * The same code is also exported as dlsym@GLIBC_2.34, dlsym@GLIBC_2.2.5 and dlsym@GLIBC_2.17
 * (non-default versions, through a stub: ld drops an unversioned definition that shares its
 * address with a versioned one of its name), where an interposer preloaded before gpupool
 * looks for "the next dlsym" with dlvsym(RTLD_NEXT, "dlsym", V), which only a definition of
 * that version matches; the stub's own name is local (libgpupool.map). x86-64 and aarch64;
 * elsewhere a C wrapper whose caller glibc sees is libgpupool.so, and no versioned names.
 * Include it in exactly one file, which declares gp_dlsym_answer (hidden) and its route.
 * Depends on nothing of gpupool's. */
#ifndef GP_PORT_TRAMPOLINE_H
#define GP_PORT_TRAMPOLINE_H

#if defined(__x86_64__)
/* rdi = handle, rsi = name; the return address is at (%rsp) on entry. The route comes back
 * in rax (value) and rdx (jump). */
__asm__(".text\n"
	".globl dlsym\n"
	".type dlsym,@function\n"
	"dlsym:\n"
	".Lgp_dlsym_entry:\n"
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
	"	test %rdx, %rdx\n"
	"	jz 1f\n"
	"	jmp *%rdx\n"
	"1:	ret\n"
	".cfi_endproc\n"
	".size dlsym, .-dlsym\n"
	".globl gp_dlsym_versioned\n"
	".type gp_dlsym_versioned,@function\n"
	"gp_dlsym_versioned:\n"
	".cfi_startproc\n"
	"	jmp .Lgp_dlsym_entry\n"
	".cfi_endproc\n"
	".size gp_dlsym_versioned, .-gp_dlsym_versioned\n"
	".symver gp_dlsym_versioned, dlsym@GLIBC_2.34\n"
	".symver gp_dlsym_versioned, dlsym@GLIBC_2.2.5\n"
	".symver gp_dlsym_versioned, dlsym@GLIBC_2.17\n");
#elif defined(__aarch64__)
/* x0 = handle, x1 = name; the return address is in x30 on entry. The route comes back in x0
 * (value) and x1 (jump). `hint #34` is `bti c`, the landing pad a BTI-enforcing system
 * requires of a function called indirectly (a no-op elsewhere), and the tail branch goes
 * through x16, which may land on the real dlsym's own `bti c`: the compiler marks this
 * object BTI-compatible when built with -mbranch-protection, so the assembly must be. */
__asm__(".text\n"
	".globl dlsym\n"
	".type dlsym,%function\n"
	"dlsym:\n"
	".cfi_startproc\n"
	"	hint #34\n"
	".Lgp_dlsym_entry:\n"
	"	stp x29, x30, [sp, #-32]!\n"
	".cfi_def_cfa_offset 32\n"
	".cfi_offset 29, -32\n"
	".cfi_offset 30, -24\n"
	"	mov x29, sp\n"
	"	stp x0, x1, [sp, #16]\n"
	"	mov x2, x30\n"
	"	bl gp_dlsym_answer\n"
	"	mov x9, x0\n"
	"	mov x16, x1\n"
	"	ldp x0, x1, [sp, #16]\n"
	"	ldp x29, x30, [sp], #32\n"
	".cfi_restore 29\n"
	".cfi_restore 30\n"
	".cfi_def_cfa_offset 0\n"
	"	cbz x16, 1f\n"
	"	br x16\n"
	"1:	mov x0, x9\n"
	"	ret\n"
	".cfi_endproc\n"
	".size dlsym, .-dlsym\n"
	".globl gp_dlsym_versioned\n"
	".type gp_dlsym_versioned,%function\n"
	"gp_dlsym_versioned:\n"
	".cfi_startproc\n"
	"	hint #34\n"
	"	b .Lgp_dlsym_entry\n"
	".cfi_endproc\n"
	".size gp_dlsym_versioned, .-gp_dlsym_versioned\n"
	".symver gp_dlsym_versioned, dlsym@GLIBC_2.34\n"
	".symver gp_dlsym_versioned, dlsym@GLIBC_2.2.5\n"
	".symver gp_dlsym_versioned, dlsym@GLIBC_2.17\n");
#else
/* Elsewhere a C wrapper: glibc sees libgpupool.so as the caller, so dlsym(RTLD_NEXT, ...)
 * from a program searches after libgpupool.so rather than after the program. */
__attribute__((visibility("default"))) void *dlsym(void *handle, const char *name)
{
	struct gp_dlsym_route r = gp_dlsym_answer(handle, name, __builtin_return_address(0));
	return r.jump ? r.jump(handle, name) : r.value;
}
#endif

#endif
