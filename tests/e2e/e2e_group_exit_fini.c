/* The library half of e2e_group_exit (e2e_group_exit.h): the thread that asks for memory
 * while the process exits, and a destructor that runs once gpupool has left the group. The
 * program needs this library and libgpupool.so does not, so the C library ends it after
 * libgpupool.so (a preloaded object ends before the program's libraries, which end in the
 * order they were loaded). Its destructor checks that the process has left the group by then,
 * and that every take from then on is refused, its own and the thread's: the process is no
 * longer counted in the group, so nothing more may pass. */
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "e2e_group_exit.h"
#include "group.h"

static char path[4096];
static struct gp_group_view view;
static pthread_t thread;
static bool started;
static size_t room;
static atomic_bool stop, left;
static atomic_size_t served, served_after, asked_after, refused;

const char *e2e_group_exit_path(void)
{
	const char *d = getenv("GPUPOOL_SHM_DIR");
	expect(d && strlen(d) < sizeof path - 8, "GPUPOOL_SHM_DIR is not set");
	snprintf(path, sizeof path, "%s.group", d);
	return path;
}

size_t e2e_group_exit_room(void)
{
	char why[256];
	expect(gp_group_read(e2e_group_exit_path(), &view, why, sizeof why) == 0 && view.ndevices == 1,
	       "the group file cannot be read");
	return view.dev[0].used < view.dev[0].budget ? (size_t)(view.dev[0].budget - view.dev[0].used) : 0;
}

static bool member(pid_t pid)
{
	(void)e2e_group_exit_room();
	for (uint32_t i = 0; i < view.nmembers; i++)
		if (view.member[i].pid == pid)
			return true;
	return false;
}

static void sleep_ms(long ms)
{
	struct timespec ts = {0, ms * 1000000L};
	nanosleep(&ts, NULL);
}

/* 1 MiB pieces, kept, until stopped; what is served after the group was left is counted
 * apart (the flag read before the call: a call that began before is not). */
static void *asker(void *arg)
{
	(void)arg;
	while (!atomic_load(&stop)) {
		bool after = atomic_load(&left);
		void *p = NULL;
		if (cudaMalloc(&p, MiB) == cudaSuccess) {
			atomic_fetch_add(&served, MiB);
			if (after)
				atomic_fetch_add(&served_after, MiB);
		} else {
			atomic_fetch_add(&refused, 1);
		}
		if (after)
			atomic_fetch_add(&asked_after, 1);
	}
	return NULL;
}

void e2e_group_exit_thread(size_t bytes)
{
	room = bytes;
	expect(pthread_create(&thread, NULL, asker, NULL) == 0, "pthread_create");
	started = true;
	for (int i = 0; i < 10000 && !atomic_load(&refused); i++)
		sleep_ms(1);
	expect(atomic_load(&refused) > 0, "the thread was never refused");
}

__attribute__((destructor)) static void after_gpupool_left(void)
{
	if (!started)
		return;
	expect(!member(getpid()), "gpupool had not left the group when a library that ends after it ended");
	void *p = NULL;
	expect(cudaMalloc(&p, MiB) == cudaErrorMemoryAllocation, "a cudaMalloc after the group was left was served");
	atomic_store(&left, true);
	for (int i = 0; i < 10000 && atomic_load(&asked_after) < 3; i++)
		sleep_ms(1);
	atomic_store(&stop, true);
	expect(pthread_join(thread, NULL) == 0, "pthread_join");
	fprintf(stderr, "e2e_group_exit: the thread got %zu MiB of the %zu MiB left; after the group was left it "
			"asked %zu times and got %zu MiB\n",
		atomic_load(&served) / MiB, room / MiB, atomic_load(&asked_after), atomic_load(&served_after) / MiB);
	expect(atomic_load(&asked_after) >= 3, "the thread stopped asking");
	expect(atomic_load(&served_after) == 0, "the thread was served after the group was left");
	expect(atomic_load(&served) == room, "the thread did not get exactly what the group had left");
}
