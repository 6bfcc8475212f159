/* /proc/<pid>/stat, /proc/<pid>'s owner and the clocks, read one way for the whole library
 * (proc.h). Base layer: depends on libc only. */
#include "proc.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

uint64_t gp_clock_ns(clockid_t c)
{
	struct timespec ts;
	if (clock_gettime(c, &ts) != 0)
		return 0;
	return (uint64_t)ts.tv_sec * GP_NS_PER_S + (uint64_t)ts.tv_nsec;
}

int gp_proc_start(int pid, uint64_t *since_boot_ns, bool *zombie)
{
	char path[64], buf[1024];
	*since_boot_ns = 0;
	*zombie = false;
	snprintf(path, sizeof path, "/proc/%d/stat", pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	ssize_t n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n <= 0)
		return -EIO;
	buf[n] = '\0';
	char *p = strrchr(buf, ')'); /* comm may hold spaces and parentheses */
	if (!p || p[1] != ' ')
		return -EIO;
	p += 2;
	*zombie = (*p == 'Z' || *p == 'X');
	/* field 3 is the state; starttime is field 22 */
	for (int field = 3; field < 22; field++) {
		p = strchr(p, ' ');
		if (!p)
			return -EIO;
		p++;
	}
	char *end;
	errno = 0;
	unsigned long long ticks = strtoull(p, &end, 10);
	long hz = sysconf(_SC_CLK_TCK);
	if (errno || end == p || hz <= 0)
		return -EIO;
	*since_boot_ns = (uint64_t)ticks / (uint64_t)hz * GP_NS_PER_S +
			 (uint64_t)ticks % (uint64_t)hz * GP_NS_PER_S / (uint64_t)hz;
	return 0;
}

int gp_proc_owner(int pid, uid_t *uid)
{
	char path[32];
	struct stat st;
	snprintf(path, sizeof path, "/proc/%d", pid);
	if (pid <= 0 || stat(path, &st) != 0)
		return pid <= 0 ? -ENOENT : -errno;
	*uid = st.st_uid;
	return 0;
}
