/* Tests of gp_outfile_open (outfile.h) in a private directory: a new file is created with
 * the mode asked for, an existing regular file is truncated, and a symbolic link (to a file
 * or dangling), a fifo, a directory and a second hard link are refused without being
 * written or blocking. (Another user's file needs two users: not tested here.) */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "outfile.h"

static char dir[64];

static const char *at(const char *name)
{
	static char buf[4][128];
	static int i;
	char *b = buf[i++ % 4];
	snprintf(b, sizeof buf[0], "%s/%s", dir, name);
	return b;
}

static void put(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	assert_int_equal(fclose(f), 0);
}

static off_t size_of(const char *path)
{
	struct stat st;
	assert_int_equal(lstat(path, &st), 0);
	return st.st_size;
}

static int setup(void **state)
{
	(void)state;
	snprintf(dir, sizeof dir, "/tmp/gp-outfile-XXXXXX");
	return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	char cmd[128];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	return system(cmd) == 0 ? 0 : -1;
}

static void test_new_file_mode(void **state)
{
	(void)state;
	mode_t old = umask(022);
	int fd = gp_outfile_open(at("new"), 0600);
	umask(old);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "abc", 3), 3);
	assert_false(fcntl(fd, F_GETFL) & O_NONBLOCK);
	assert_true(fcntl(fd, F_GETFD) & FD_CLOEXEC);
	close(fd);
	struct stat st;
	assert_int_equal(stat(at("new"), &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);
	assert_int_equal(st.st_size, 3);
}

static void test_existing_truncated(void **state)
{
	(void)state;
	put(at("old"), "a longer text than what comes next\n");
	int fd = gp_outfile_open(at("old"), 0600);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "x", 1), 1);
	close(fd);
	assert_int_equal(size_of(at("old")), 1);
}

static void test_refused(void **state)
{
	(void)state;
	put(at("victim"), "precious\n");
	assert_int_equal(symlink(at("victim"), at("link")), 0);
	assert_int_equal(symlink(at("nowhere"), at("dangling")), 0);
	assert_int_equal(mkfifo(at("fifo"), 0600), 0);
	assert_int_equal(mkdir(at("dir"), 0700), 0);
	assert_int_equal(gp_outfile_open(at("link"), 0600), -ELOOP);
	assert_int_equal(gp_outfile_open(at("dangling"), 0600), -ELOOP);
	assert_int_equal(gp_outfile_open(at("fifo"), 0600), -EINVAL); /* and did not block */
	assert_int_equal(gp_outfile_open(at("dir"), 0600), -EINVAL);
	assert_int_equal(gp_outfile_open(at("missing/x"), 0600), -ENOENT);
	assert_int_equal(link(at("victim"), at("hardlink")), 0);
	assert_int_equal(gp_outfile_open(at("hardlink"), 0600), -EMLINK);
	assert_int_equal(size_of(at("victim")), 9);
	assert_int_equal(access(at("nowhere"), F_OK), -1); /* the dangling link made nothing */
	assert_non_null(strstr(gp_outfile_strerror(-ELOOP), "symbolic link"));
	assert_non_null(strstr(gp_outfile_strerror(-EINVAL), "not a regular file"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_new_file_mode),
		cmocka_unit_test(test_existing_truncated),
		cmocka_unit_test(test_refused),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
