/* The dlsym trampoline, the port layer's only assembly: a function `dlsym` that asks
 * gp_dlsym_answer(handle, name, caller's return address) first and, when that answers NULL,
 * jumps to the function pointer gp_dlsym_next with the stack and the arguments untouched,
 * so the callee sees the program's return address (RTLD_NEXT, and the caller's namespace,
 * stay the program's). x86-64 and aarch64; elsewhere a C wrapper whose caller glibc sees is
 * libgpupool.so. Include it in exactly one file, which declares both names (hidden).
 * Depends on nothing of gpupool's. */
#ifndef GP_PORT_TRAMPOLINE_H
#define GP_PORT_TRAMPOLINE_H

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
	return a ? a : gp_dlsym_next(handle, name);
}
#endif

#endif
