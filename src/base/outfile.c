/* Output files named by the user (outfile.h). libc only. */
#include "outfile.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

/* What is at `path` when it is not a regular file: -ELOOP, -EINVAL, or 0. */
static int not_regular(const struct stat *st)
{
	return S_ISLNK(st->st_mode) ? -ELOOP : S_ISREG(st->st_mode) ? 0 : -EINVAL;
}

/* An open regular file that is not this user's alone to write: another user's (who could
 * read what is written, or planted it), or one with other hard links (writing it would
 * write the file they name). -EPERM, -EMLINK, or 0. */
static int not_ours(const struct stat *st)
{
	return st->st_uid != geteuid() ? -EPERM : st->st_nlink > 1 ? -EMLINK : 0;
}

int gp_outfile_open(const char *path, mode_t mode)
{
	struct stat st;
	/* a fifo or a device is not even opened (opening one may block or act) */
	if (lstat(path, &st) == 0 && not_regular(&st))
		return not_regular(&st);
	int fd = open(path, O_WRONLY | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC, mode);
	if (fd < 0) {
		int e = errno;
		/* replaced since the first look */
		return lstat(path, &st) == 0 && not_regular(&st) ? not_regular(&st) : -e;
	}
	int rc = fstat(fd, &st) != 0 ? -errno : not_regular(&st) ? not_regular(&st) : not_ours(&st);
	int fl = rc ? -1 : fcntl(fd, F_GETFL);
	if (!rc && (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0 || ftruncate(fd, 0) != 0))
		rc = -errno;
	if (rc) {
		close(fd);
		return rc;
	}
	return fd;
}

const char *gp_outfile_strerror(int err)
{
	return err == -ELOOP ? "it is a symbolic link (not followed)"
	       : err == -EINVAL ? "it is not a regular file"
	       : err == -EPERM ? "it belongs to another user"
	       : err == -EMLINK ? "it has other hard links" : strerror(err < 0 ? -err : err);
}

int gp_outfile_move_high(int fd)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
		return fd;
	rlim_t cur = rl.rlim_cur;
	int lo = cur >= 2048 ? 1024 : (int)(cur / 2);
	if (fd >= lo)
		return fd;
	int hi = fcntl(fd, F_DUPFD_CLOEXEC, lo);
	if (hi < 0)
		return fd;
	close(fd);
	return hi;
}
