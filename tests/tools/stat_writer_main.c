/* Helper process for the gpupool-stat CLI test: opens its page in $GPUPOOL_SHM_DIR, runs
 * N steps of pool work (tests/lib/stat_writer.h), prints "ready <pid>", then keeps answering release
 * requests (one step every 2 ms; "idle" as argv[2]: no steps, so requests time out) until
 * SIGTERM, when it prints the exit report to stderr and unlinks its page. Test code only. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "format.h"
#include "stat_writer.h"

static volatile sig_atomic_t stop;

static void on_term(int sig)
{
	(void)sig;
	stop = 1;
}

int main(int argc, char **argv)
{
	long steps = argc > 1 ? atol(argv[1]) : 2000;
	bool idle = argc > 2 && strcmp(argv[2], "idle") == 0;
	signal(SIGTERM, on_term);
	signal(SIGINT, on_term);
	struct gpupool_page *pg = gp_statpage_open();
	static struct gp_test_writer w;
	if (!pg || gp_test_writer_init(&w, pg, 1) != 0) {
		fprintf(stderr, "stat_writer: cannot open page or pools\n");
		return 1;
	}
	for (long i = 0; i < steps; i++)
		gp_test_writer_step(&w, pg);
	printf("ready %d\n", (int)getpid());
	fflush(stdout);
	while (!stop) {
		if (!idle)
			gp_test_writer_step(&w, pg);
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
