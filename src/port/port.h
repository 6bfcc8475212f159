/* The port layer: the few things the core needs from the CPU and the kernel that C11 does
 * not give, behind one small contract. Linux: futex (port_linux.c, the only implementation
 * of the waits: gpupool runs on Linux alone); x86: pause; aarch64: yield; on any other CPU
 * the relax hint is a no-op. Depends on nothing of gpupool's. */
#ifndef GP_PORT_H
#define GP_PORT_H

/* Code that may run before a preloaded sanitizer runtime (the test builds' ASan and TSan)
 * has initialised itself, which resolves its interceptors with dlsym: it must not be
 * instrumented (its shadow memory does not exist yet). */
#if defined(__has_attribute)
#if __has_attribute(no_sanitize)
#define GP_PORT_EARLY __attribute__((no_sanitize("address", "thread", "undefined")))
#endif
#endif
#ifndef GP_PORT_EARLY
#define GP_PORT_EARLY
#endif

/* A hint to the CPU inside a spin loop: lets the sibling hyperthread run (x86 pause) or
 * the core relax (aarch64 yield); a no-op elsewhere. */
static inline void gp_port_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield" ::: "memory");
#endif
}

/* Sleeps while *addr == expected (a spurious or early return is allowed; the caller loops);
 * private to the process. */
void gp_port_wait(int *addr, int expected);
/* Wakes one thread sleeping in gp_port_wait(addr). */
void gp_port_wake_one(int *addr);

/* An asymmetric fence (Linux membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED): once
 * gp_port_membarrier returns 0, every thread of the process that was running has passed a
 * full memory barrier, so a thread that orders its accesses with a compiler barrier only is
 * ordered against the caller as if both had fenced. gp_port_membarrier_init registers the
 * process for it (once, before the first use): 0, or -ENOSYS where the kernel (or a
 * seccomp filter, or valgrind) refuses, in which case the other side must fence itself. */
int gp_port_membarrier_init(void);
int gp_port_membarrier(void);

#endif
