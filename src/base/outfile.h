/* Files a user names for gpupool's output (the exit report, the trace), opened so that
 * writing them is safe in a directory other users can write to, such as /tmp. libc only;
 * no allocation, no lock: callable at exit. */
#ifndef GP_OUTFILE_H
#define GP_OUTFILE_H

#include <sys/types.h>

/* Opens `path` for writing: created with `mode` (less the umask), or truncated when it is
 * an existing regular file of this user (the effective uid) with no other hard link. Never
 * follows a symbolic link in the last component (another user's link would make this
 * process overwrite one of its own files) and never opens anything but a regular file (a
 * fifo would block, a device is not an output file): checked before opening and again on
 * the descriptor (opened O_NOFOLLOW|O_NONBLOCK, blocking again once checked). Returns an
 * O_CLOEXEC descriptor, or a negative errno: -ELOOP a symbolic link, -EINVAL not a regular
 * file, -EPERM another user's file, -EMLINK a file with other hard links, else open's or
 * ftruncate's. */
int gp_outfile_open(const char *path, mode_t mode);

/* Why gp_outfile_open failed, for a log line ("it is a symbolic link (not followed)",
 * "it belongs to another user", ...), else strerror(-err). */
const char *gp_outfile_strerror(int err);

/* A descriptor gpupool keeps for the life of the process (the trace, the share socket),
 * moved out of the low numbers a program closes and reuses (daemons close 3-1023 and open
 * their own files, which get the lowest free number): to 1024 or above when the descriptor
 * limit is at least 2048, else to the upper half of what it allows, close-on-exec. Returns
 * the descriptor to use (fd itself when it cannot be moved; closed when it was). Its owner
 * still checks it is its own before each use (fstat): a program may close any number. */
int gp_outfile_move_high(int fd);

#endif
