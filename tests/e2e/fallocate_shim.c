/* Preloaded after libgpupool.so by e2e_full_shm.sh: posix_fallocate as a C library or a
 * filesystem without it answers, after two calls interrupted by a signal (EINTR), then
 * "not supported" (EOPNOTSUPP), so that gpupool's page takes its fallback path (writing the
 * zeros itself). Each call is said on stderr ("fallocate_shim: EINTR"). Both names: with
 * _FILE_OFFSET_BITS=64 callers reach posix_fallocate64. */
#undef _FILE_OFFSET_BITS
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#define SHIM_EXPORT __attribute__((visibility("default")))

static int calls;

SHIM_EXPORT int posix_fallocate(int fd, off_t offset, off_t len)
{
	(void)fd;
	(void)offset;
	(void)len;
	const char *what = ++calls <= 2 ? "fallocate_shim: EINTR\n" : "fallocate_shim: EOPNOTSUPP\n";
	if (write(2, what, strlen(what)) < 0)
		return EIO;
	return calls <= 2 ? EINTR : EOPNOTSUPP;
}

SHIM_EXPORT int posix_fallocate64(int fd, off64_t offset, off64_t len)
{
	return posix_fallocate(fd, (off_t)offset, (off_t)len);
}
