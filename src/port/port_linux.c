/* The port layer on Linux (port.h): waits and wakes on the futex syscall, which exists on
 * every Linux architecture, and the asymmetric fence on membarrier (Linux 4.14 and later).
 * Depends on nothing of gpupool's. */
#include "port.h"

#include <errno.h>
#include <linux/futex.h>
#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>

void gp_port_wait(int *addr, int expected)
{
	syscall(SYS_futex, addr, FUTEX_WAIT_PRIVATE, expected, NULL, NULL, 0);
}

void gp_port_wake_one(int *addr)
{
	syscall(SYS_futex, addr, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

int gp_port_membarrier_init(void)
{
#ifdef SYS_membarrier
	long cmds = syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
	if (cmds > 0 && (cmds & MEMBARRIER_CMD_PRIVATE_EXPEDITED) &&
	    syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0)
		return 0;
#endif
	return -ENOSYS;
}

int gp_port_membarrier(void)
{
#ifdef SYS_membarrier
	if (syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) == 0)
		return 0;
#endif
	return -ENOSYS;
}
