/* The port layer on Linux (port.h): waits and wakes on the futex syscall, which exists on
 * every Linux architecture. Depends on nothing of gpupool's. */
#include "port.h"

#include <linux/futex.h>
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
