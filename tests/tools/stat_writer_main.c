/* Helper process for the gpupool-stat CLI test: opens its page in $GPUPOOL_SHM_DIR, runs
 * N steps of pool work (tests/lib/stat_writer.h), prints "ready <pid>", then keeps answering release
 * requests (one step every 2 ms; "idle" as argv[2]: no steps, so requests time out;
 * "reclaimed": the SIGUSR1 reclaim below already done when it prints "ready"; "waiting": an
 * allocation on device 1 waits for 1 GiB from the start, as the wait queue shows one) until
 * SIGTERM, when it prints the exit report to stderr and unlinks its page. As the library's
 * release thread does, it writes each device's total and free memory about once a second
 * (80 GiB, free what its segments leave), the bytes it could release (the pool's decay pass,
 * handing nothing back), and memory held
 * outside its pools on device 1 (256 MiB of cuMemCreate memory); on SIGUSR1, one reclaim:
 * device 0 gives 2 GiB to another process and gives 1 GiB back idle (3 segments), device 1
 * receives 2 GiB after waiting 0.41 s; on SIGUSR2, a reclaim that found no one to ask: device 1
 * waits 0.05 s and receives nothing. The pool does not make these figures: the test sets
 * them, as pages of other versions would show them.
 * "forge even|odd NDEV PID...": writes a page for each PID instead (comm "forged", NDEV
 * devices with 80 GiB reserved each; "odd": every slot's counter left odd, as by a writer
 * that died mid-update) and exits. Test code only. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "format.h"
#include "proc.h"
#include "stat_writer.h"
#include "stats.h"

static volatile sig_atomic_t stop, reclaim, waited;

static void on_usr(int sig)
{
	if (sig == SIGUSR1)
		reclaim = 1;
	else
		waited = 1;
}

/* What the library's release thread and the reclaims would write (see the top); nobody: a
 * reclaim that found no one to ask. */
static void sharing_figures(struct gp_test_writer *w, struct gpupool_page *pg, bool reclaimed, bool nobody)
{
	for (uint32_t d = 0; d < 2 && d < pg->ndevices; d++) {
		struct gpupool_device_stats *s = &pg->dev[d];
		/* the pool's own pass (handing nothing back) sets releasable_bytes */
		gp_pool_decay(w->pools[d], gp_clock_ns(CLOCK_MONOTONIC), 0, 0, NULL);
		uint64_t total = 80ull << 30, used = s->reserved_bytes + s->unpooled_bytes + (1ull << 30);
		gp_stats_begin(s);
		s->device_total_bytes = total;
		s->device_free_bytes = used < total ? total - used : 0;
		s->device_seen_ns = gp_clock_ns(CLOCK_REALTIME);
		if (d == 1) {
			s->unpooled_bytes = s->unpooled_vmm_bytes = 256ull << 20;
			s->unpooled_bytes_peak = s->unpooled_vmm_bytes_peak = 512ull << 20;
			s->unpooled_allocs = 3;
			s->unpooled_frees = 1;
		}
		if (reclaimed && d == 0) {
			s->reclaims_served++;
			s->reclaim_given_bytes += 2ull << 30;
			s->decay_releases += 3;
			s->decayed_bytes += 1ull << 30;
		}
		if (reclaimed && d == 1) {
			s->reclaim_asks++;
			s->reclaim_answers++;
			s->reclaim_received_bytes += 2ull << 30;
			s->reclaim_wait_ns += 410000000ull;
		}
		if (nobody && d == 1)
			s->reclaim_wait_ns += 50000000ull;
		gp_stats_end(s);
	}
}

static void on_term(int sig)
{
	(void)sig;
	stop = 1;
}

static int forge(bool odd, int ndev, int npids, char **pids)
{
	static struct gpupool_page pg;
	for (int i = 0; i < npids; i++) {
		memset(&pg, 0, sizeof pg);
		gp_statpage_init(&pg);
		pg.pid = atoi(pids[i]);
		memcpy(pg.comm, "forged", 7);
		for (int d = 0; d < ndev && d < GPUPOOL_MAX_DEVICES; d++) {
			struct gpupool_device_stats *s = gp_statpage_slot(&pg, d);
			s->reserved_bytes = s->reserved_bytes_peak = 80ull << 30;
			if (odd)
				gp_stats_begin(s);
		}
		char path[4096];
		snprintf(path, sizeof path, "%s/%s%d", gp_statpage_dir(), GP_STATPAGE_NAME, (int)pg.pid);
		int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW, 0600);
		if (fd < 0 || write(fd, &pg, sizeof pg) != (ssize_t)sizeof pg) {
			fprintf(stderr, "stat_writer: %s: %s\n", path, strerror(errno));
			return 1;
		}
		close(fd);
	}
	return 0;
}

int main(int argc, char **argv)
{
	if (argc > 3 && strcmp(argv[1], "forge") == 0)
		return forge(strcmp(argv[2], "odd") == 0, atoi(argv[3]), argc - 4, argv + 4);
	long steps = argc > 1 ? atol(argv[1]) : 2000;
	bool idle = argc > 2 && strcmp(argv[2], "idle") == 0;
	bool reclaimed = argc > 2 && strcmp(argv[2], "reclaimed") == 0;
	bool waiting = argc > 2 && strcmp(argv[2], "waiting") == 0;
	signal(SIGTERM, on_term);
	signal(SIGINT, on_term);
	signal(SIGUSR1, on_usr);
	signal(SIGUSR2, on_usr);
	struct gpupool_page *pg = gp_statpage_open();
	static struct gp_test_writer w;
	if (!pg || gp_test_writer_init(&w, pg, 1) != 0) {
		fprintf(stderr, "stat_writer: cannot open page or pools\n");
		return 1;
	}
	for (long i = 0; i < steps; i++)
		gp_test_writer_step(&w, pg);
	sharing_figures(&w, pg, reclaimed, false);
	if (waiting) { /* what the wait queue writes while an allocation waits */
		struct gpupool_device_stats *s = &pg->dev[1];
		gp_stats_begin(s);
		s->waiting_bytes = s->waiting_bytes_peak = 1ull << 30;
		s->waits = 1;
		s->wait_started_ns = gp_clock_ns(CLOCK_REALTIME);
		gp_stats_end(s);
	}
	printf("ready %d\n", (int)getpid());
	fflush(stdout);
	for (unsigned tick = 1; !stop; tick++) {
		if (!idle)
			gp_test_writer_step(&w, pg);
		if (reclaim || waited || tick % 500 == 0) { /* about once a second, as the library */
			sharing_figures(&w, pg, reclaim, waited);
			reclaim = waited = 0;
		}
		struct timespec nap = {0, 2000000};
		nanosleep(&nap, NULL);
	}
	static struct gpupool_page snap;
	gp_statpage_copy(pg, &snap);
	struct gp_format_out o;
	gp_format_to_fd(&o, 2);
	gp_format_report(&o, &snap);
	gp_format_flush(&o);
	gp_statpage_close(pg);
	return 0;
}
