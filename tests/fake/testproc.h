/* Child processes for the fakes' own tests of what processes share (FAKECUDA_MACHINE,
 * CUDA_VISIBLE_DEVICES): spawn a test program in a child mode with pipes to it, read its
 * lines, collect its exit; the machine files in a private directory. Static functions, for
 * tests only; uses cmocka's asserts. */
#ifndef GPFAKE_TESTPROC_H
#define GPFAKE_TESTPROC_H

#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

struct child {
	pid_t pid;
	int in, out, err; /* its stdin (write end), stdout and stderr (read ends) */
};

/* Runs prog as `prog --machine MODE A B` with env ("NAME=value", NULL-terminated) on top of an
 * environment cleared of the fakes' settings. */
static struct child spawn(const char *prog, const char *const *env, const char *mode, const char *a,
                          const char *b)
{
	int in[2], out[2], err[2];
	assert_int_equal(pipe(in), 0);
	assert_int_equal(pipe(out), 0);
	assert_int_equal(pipe(err), 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		dup2(in[0], 0);
		dup2(out[1], 1);
		dup2(err[1], 2);
		for (int i = 0; i < 2; i++) { /* or the child would hold its own stdin open */
			close(in[i]);
			close(out[i]);
			close(err[i]);
		}
		unsetenv("FAKECUDA_MACHINE");
		unsetenv("FAKECUDA_CAPACITY");
		unsetenv("FAKECUDA_DEVICES");
		unsetenv("FAKECUDA_FAIL");
		unsetenv("CUDA_VISIBLE_DEVICES");
		for (int i = 0; env[i]; i++)
			putenv((char *)(uintptr_t)env[i]);
		execl(prog, prog, "--machine", mode, a, b, (char *)NULL);
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	close(err[1]);
	/* later children must not inherit this one's ends */
	fcntl(in[1], F_SETFD, FD_CLOEXEC);
	fcntl(out[0], F_SETFD, FD_CLOEXEC);
	fcntl(err[0], F_SETFD, FD_CLOEXEC);
	return (struct child){ pid, in[1], out[0], err[0] };
}

/* One line (without its newline) from fd; "" at end of file. */
static void read_line(int fd, char *buf, size_t cap)
{
	size_t n = 0;
	while (n + 1 < cap && read(fd, &buf[n], 1) == 1 && buf[n] != '\n')
		n++;
	buf[n] = '\0';
}

/* Everything left on fd. */
static void read_all(int fd, char *buf, size_t cap)
{
	size_t n = 0;
	ssize_t r;
	while (n + 1 < cap && (r = read(fd, buf + n, cap - 1 - n)) > 0)
		n += (size_t)r;
	buf[n] = '\0';
}

static __attribute__((unused)) int lines(const char *s)
{
	int n = 0;
	for (; *s; s++)
		n += *s == '\n';
	return n;
}

/* Waits for the child; its exit status, or -signal. Collects stderr into err (if non-NULL). */
static int finish(struct child c, char *err, size_t cap)
{
	char dummy[4096];
	close(c.in);
	read_all(c.err, err ? err : dummy, err ? cap : sizeof dummy);
	close(c.out);
	close(c.err);
	int st = 0;
	assert_int_equal(waitpid(c.pid, &st, 0), c.pid);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -WTERMSIG(st);
}

/* Runs prog's child mode MODE A B (see spawn) to its end, which must be exit status 0: its
 * first line into line, its stderr into err (when non-NULL). */
static void run_child(const char *prog, const char *const *env, const char *mode, const char *a,
                      const char *b, char *line, size_t cap, char *err, size_t ecap)
{
	struct child c = spawn(prog, env, mode, a, b);
	read_line(c.out, line, cap);
	assert_int_equal(finish(c, err, ecap), 0);
}

/* The machine files of a test program: `name` in a private directory, made on first use. */
static char g_machine_dir[64];

static const char *machine_path(const char *name)
{
	static char path[128];
	if (!g_machine_dir[0]) {
		snprintf(g_machine_dir, sizeof g_machine_dir, "/tmp/fakemachine.XXXXXX");
		assert_non_null(mkdtemp(g_machine_dir));
	}
	snprintf(path, sizeof path, "%s/%s", g_machine_dir, name);
	return path;
}

/* Removes the files named (a NULL-terminated list) and the directory, if it was made. */
static void machine_cleanup(const char *const *names)
{
	if (!g_machine_dir[0])
		return;
	for (int i = 0; names[i]; i++)
		unlink(machine_path(names[i]));
	rmdir(g_machine_dir);
}

/* "6M", "4K", "4096": bytes. */
static size_t parse_size(const char *s)
{
	char *end;
	size_t v = strtoull(s, &end, 10);
	return *end == 'M' ? v << 20 : *end == 'K' ? v << 10 : v;
}

#endif
