/* The two halves of e2e_group_exit (e2e-group-after-exit-capped): the program
 * (e2e_group_exit.c) and a library it needs (e2e_group_exit_fini.c), which ends after
 * libgpupool.so and so sees the process once gpupool has left its group. A failed check ends
 * the process with status 3 (exit is running: exit() again would not do). Test code only. */
#ifndef GP_E2E_GROUP_EXIT_H
#define GP_E2E_GROUP_EXIT_H

#include <stddef.h>
#include <stdio.h>
#include <unistd.h>

#define MiB ((size_t)1 << 20)
#define E2E_GROUP_EXIT_API __attribute__((visibility("default"))) /* the library's, for the program */

static inline void expect(int ok, const char *what)
{
	if (!ok) {
		fprintf(stderr, "e2e_group_exit: %s\n", what);
		fflush(stderr);
		_exit(3);
	}
}

/* The group file the test names (GPUPOOL_SHM_DIR's path with ".group"), and the bytes of the
 * group's budget on its one device that no member holds. */
E2E_GROUP_EXIT_API const char *e2e_group_exit_path(void);
E2E_GROUP_EXIT_API size_t e2e_group_exit_room(void);

/* Starts the thread that asks for 1 MiB pieces until the library's destructor stops it, and
 * returns once the group has refused it (`room` bytes were left for it). */
E2E_GROUP_EXIT_API void e2e_group_exit_thread(size_t room);

#endif
