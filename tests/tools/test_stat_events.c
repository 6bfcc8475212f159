/* Tests of gpupool-stat --watch's event lines (tools/stat_events.c) on synthetic pages: the
 * lines each counter gives, summed per process; none on a first sight of a process older than
 * the watch, a counter that went back, a gone process or an inconsistent slot; a process new
 * since the watch began counted from zero, once; how long they are kept; the cut. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "stat_events.h"
#include "statpage.h"

#define S 1000000000ull
#define G (1ull << 30)

static struct gpupool_page pages[2];
static struct gp_format_proc procs[2];
static struct gp_stat_events ev;
static char out[1 << 16];
/* 2026-12-04 18:52:20 UTC */
static const time_t WALL = 1796410340;

static int setup(void **state)
{
	(void)state;
	setenv("TZ", "UTC", 1);
	memset(pages, 0, sizeof pages);
	for (int p = 0; p < 2; p++) {
		gp_statpage_init(&pages[p]);
		pages[p].pid = p ? 456 : 123;
		pages[p].start_time_ns = (WALL - 60) * S; /* a minute before the watch */
		memcpy(pages[p].comm, p ? "train" : "python", p ? 6 : 7);
		assert_non_null(gp_statpage_slot(&pages[p], 0));
		assert_non_null(gp_statpage_slot(&pages[p], 1));
		procs[p] = (struct gp_format_proc){.page = &pages[p], .stale = false, .inconsistent = 0, .rates = NULL};
	}
	gp_stat_events_reset(&ev);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	gp_stat_events_reset(&ev);
	return 0;
}

static const char *lines(unsigned max, unsigned cut)
{
	struct gp_format_out o;
	gp_format_to_buf(&o, out, sizeof out);
	gp_stat_events_print(&ev, &o, max, cut);
	assert_int_equal(gp_format_flush(&o), 0);
	return out;
}

/* The lines of one refresh: each counter, summed over a process's devices. */
static void test_lines(void **state)
{
	(void)state;
	assert_int_equal(gp_stat_events_update(&ev, procs, 2, WALL * S, 1 * S), 0);
	assert_string_equal(lines(10, 0), ""); /* a first sight tells no difference */
	struct gpupool_device_stats *a0 = &pages[0].dev[0], *a1 = &pages[0].dev[1], *b1 = &pages[1].dev[1];
	a0->reclaims_served = 1;
	a0->reclaim_given_bytes = 60 * G;
	a1->reclaim_given_bytes = 20 * G; /* the other device's share of the same answer */
	a1->decay_releases = 2;
	a1->decayed_bytes = 2 * G;
	b1->reclaim_asks = 1;
	b1->reclaim_answers = 1;
	b1->reclaim_received_bytes = 80 * G;
	b1->reclaim_wait_ns = 520000000;
	assert_int_equal(gp_stat_events_update(&ev, procs, 2, WALL * S, 2 * S), 0);
	assert_string_equal(lines(10, 0), "18:52:20 pid 123 (python) gave 80.0 GiB for a reclaim\n"
					  "18:52:20 pid 123 (python) gave back 2.0 GiB that sat unused (2 segments)\n"
					  "18:52:20 pid 456 (train) received 80.0 GiB after waiting 0.52 s\n");
	assert_int_equal(gp_stat_events_fresh(&ev), 3);
	/* no change: the same lines, none added, none fresh */
	assert_int_equal(gp_stat_events_update(&ev, procs, 2, (WALL + 1) * S, 3 * S), 0);
	assert_int_equal(ev.nev, 3);
	assert_int_equal(gp_stat_events_fresh(&ev), 0);
	/* more than one, refusals, a framework's cache, an ask that got nothing */
	a0->reclaims_served = 3;
	a0->reclaim_given_bytes += 1 * G;
	a0->reclaims_refused = 1;
	a0->framework_empties = 1;
	b1->reclaim_asks = 3;
	b1->reclaim_wait_ns += 1500000000;
	assert_int_equal(gp_stat_events_update(&ev, procs, 2, (WALL + 2) * S, 4 * S), 0);
	assert_string_equal(lines(2, 0),
			    "18:52:22 pid 123 (python) gave 1.0 GiB for 2 reclaims, refused 1, emptied its framework's cache\n"
			    "18:52:22 pid 456 (train) asked other processes for memory 2 times, waited 1.50 s, received nothing\n");
	a0->reclaims_refused = 3;
	assert_int_equal(gp_stat_events_update(&ev, procs, 2, (WALL + 3) * S, 5 * S), 0);
	assert_string_equal(lines(1, 0), "18:52:23 pid 123 (python) refused 2 reclaims\n");
	a0->framework_empties = 2;
	assert_int_equal(gp_stat_events_update(&ev, procs, 2, (WALL + 4) * S, 6 * S), 0);
	assert_string_equal(lines(1, 0), "18:52:24 pid 123 (python) emptied its framework's cache for a reclaim\n");
	assert_int_equal(gp_stat_events_fresh(&ev), 1);
	/* cut at a width */
	lines(1, 20);
	assert_string_equal(out, "18:52:24 pid 123 (py\n");
	/* a round that found no one to ask: its wait only */
	b1->reclaim_wait_ns += 50000000;
	assert_int_equal(gp_stat_events_update(&ev, procs, 2, (WALL + 5) * S, 7 * S), 0);
	assert_string_equal(lines(1, 0), "18:52:25 pid 456 (train) waited 0.05 s for a reclaim and received nothing\n");
	/* an answer of nothing is still an answer */
	b1->reclaim_answers++;
	b1->reclaim_wait_ns += 10000000;
	assert_int_equal(gp_stat_events_update(&ev, procs, 2, (WALL + 6) * S, 8 * S), 0);
	assert_string_equal(lines(1, 0), "18:52:26 pid 456 (train) received 0 B after waiting 0.01 s\n");
}

/* No line where the counters are not the same process's, or not readable. */
static void test_no_lines(void **state)
{
	(void)state;
	assert_int_equal(gp_stat_events_update(&ev, procs, 2, WALL * S, 1 * S), 0);
	/* a counter that went back (another process got the pid): nothing, even where others grew */
	pages[0].dev[0].decay_releases = 5;
	pages[0].dev[0].decayed_bytes = 5 * G;
	assert_int_equal(gp_stat_events_update(&ev, procs, 2, WALL * S, 2 * S), 0);
	assert_int_equal(ev.nev, 1);
	pages[0].dev[0].decay_releases = 1;
	pages[0].dev[0].decayed_bytes = 9 * G;
	assert_int_equal(gp_stat_events_update(&ev, procs, 2, WALL * S, 3 * S), 0);
	assert_int_equal(ev.nev, 1);
	/* a new start time, still before the watch, is another process: nothing */
	pages[1].start_time_ns += 1;
	pages[1].dev[0].reclaims_served = 1;
	assert_int_equal(gp_stat_events_update(&ev, procs, 2, WALL * S, 4 * S), 0);
	assert_int_equal(ev.nev, 1);
	/* gone, or its slot inconsistent: left out */
	procs[1].stale = true;
	pages[1].dev[0].reclaims_served = 2;
	assert_int_equal(gp_stat_events_update(&ev, procs, 2, WALL * S, 5 * S), 0);
	procs[1].stale = false;
	procs[1].inconsistent = 1u << 0;
	pages[1].dev[0].reclaims_served = 3;
	assert_int_equal(gp_stat_events_update(&ev, procs, 2, WALL * S, 6 * S), 0);
	assert_int_equal(ev.nev, 1);
	/* a process no longer listed, then back with higher counters: new to the reader */
	assert_int_equal(gp_stat_events_update(&ev, procs, 1, WALL * S, 7 * S), 0);
	procs[1].inconsistent = 0;
	pages[1].dev[0].reclaims_served = 4;
	assert_int_equal(gp_stat_events_update(&ev, procs, 2, WALL * S, 8 * S), 0);
	assert_int_equal(ev.nev, 1);
	/* then it counts */
	pages[1].dev[1].reclaims_served = 1;
	assert_int_equal(gp_stat_events_update(&ev, procs, 2, WALL * S, 9 * S), 0);
	assert_int_equal(ev.nev, 2);
}

/* A process whose page was made after the watch began: its counters from zero when first
 * seen, whenever that is; after a refresh where its slot could not be read, only what moved
 * since it was last read. An older one first seen tells nothing of its history. */
static void test_new_process(void **state)
{
	(void)state;
	struct gpupool_device_stats *a0 = &pages[0].dev[0], *b0 = &pages[1].dev[0], *b1 = &pages[1].dev[1];
	assert_int_equal(gp_stat_events_update(&ev, procs, 0, WALL * S, 1 * S), 0); /* nothing listed */
	a0->reclaims_served = 4; /* the history of a process older than the watch */
	a0->reclaim_given_bytes = 8 * G;
	pages[1].start_time_ns = WALL * S + 1; /* started just after the watch began */
	b1->reclaim_asks = 1;
	b1->reclaim_answers = 1;
	b1->reclaim_received_bytes = 40 * G;
	b1->reclaim_wait_ns = 300000000;
	b0->decay_releases = 1;
	b0->decayed_bytes = G;
	assert_int_equal(gp_stat_events_update(&ev, procs, 2, (WALL + 2) * S, 3 * S), 0);
	assert_string_equal(lines(10, 0), "18:52:22 pid 456 (train) received 40.0 GiB after waiting 0.30 s\n"
					  "18:52:22 pid 456 (train) gave back 1.0 GiB that sat unused (1 segment)\n");
	/* the same counters: no line again */
	assert_int_equal(gp_stat_events_update(&ev, procs, 2, (WALL + 3) * S, 4 * S), 0);
	assert_int_equal(gp_stat_events_fresh(&ev), 0);
	/* unreadable for a refresh, moved meanwhile: then the difference only, not its history */
	procs[1].inconsistent = 1u << 1;
	b1->reclaim_asks = 2;
	b1->reclaim_answers = 2;
	b1->reclaim_received_bytes = 42 * G;
	b1->reclaim_wait_ns = 400000000;
	assert_int_equal(gp_stat_events_update(&ev, procs, 2, (WALL + 4) * S, 5 * S), 0);
	assert_int_equal(gp_stat_events_fresh(&ev), 0);
	procs[1].inconsistent = 0;
	assert_int_equal(gp_stat_events_update(&ev, procs, 2, (WALL + 5) * S, 6 * S), 0);
	assert_string_equal(lines(1, 0), "18:52:25 pid 456 (train) received 2.0 GiB after waiting 0.10 s\n");
	/* gone (its page left behind): no line, though its counters moved */
	procs[1].stale = true;
	b0->decay_releases = 2;
	assert_int_equal(gp_stat_events_update(&ev, procs, 2, (WALL + 6) * S, 7 * S), 0);
	assert_int_equal(gp_stat_events_fresh(&ev), 0);
}

/* A line stays until both GP_STAT_EVENTS_KEEP_REFRESHES refreshes and GP_STAT_EVENTS_KEEP_NS
 * have passed; at most GP_STAT_EVENTS_MAX lines, the oldest going first. */
static void test_keep(void **state)
{
	(void)state;
	uint64_t t = 1 * S;
	assert_int_equal(gp_stat_events_update(&ev, procs, 1, WALL * S, t), 0);
	pages[0].dev[0].reclaims_served = 1;
	assert_int_equal(gp_stat_events_update(&ev, procs, 1, WALL * S, t), 0);
	/* fast refreshes: kept for 10 s whatever their number */
	for (int i = 0; i < 50; i++) {
		t += S / 10;
		assert_int_equal(gp_stat_events_update(&ev, procs, 1, WALL * S, t), 0);
	}
	assert_int_equal(ev.nev, 1);
	t = 1 * S + GP_STAT_EVENTS_KEEP_NS;
	assert_int_equal(gp_stat_events_update(&ev, procs, 1, WALL * S, t), 0);
	assert_int_equal(ev.nev, 0);
	/* slow refreshes: kept for 5 of them */
	pages[0].dev[0].reclaims_served = 2;
	assert_int_equal(gp_stat_events_update(&ev, procs, 1, WALL * S, t), 0);
	for (int i = 1; i < GP_STAT_EVENTS_KEEP_REFRESHES; i++) {
		t += 60 * S;
		assert_int_equal(gp_stat_events_update(&ev, procs, 1, WALL * S, t), 0);
		assert_int_equal(ev.nev, 1);
	}
	t += 60 * S;
	assert_int_equal(gp_stat_events_update(&ev, procs, 1, WALL * S, t), 0);
	assert_int_equal(ev.nev, 0);
	/* many at once: the newest GP_STAT_EVENTS_MAX */
	for (unsigned i = 0; i < GP_STAT_EVENTS_MAX + 5; i++) {
		pages[0].dev[0].decay_releases++;
		pages[0].dev[0].decayed_bytes += i;
		assert_int_equal(gp_stat_events_update(&ev, procs, 1, WALL * S, t), 0);
	}
	assert_int_equal(ev.nev, GP_STAT_EVENTS_MAX);
	assert_non_null(strstr(ev.ev[0].text, "gave back 5 B "));
	assert_non_null(strstr(ev.ev[GP_STAT_EVENTS_MAX - 1].text, "gave back 68 B "));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_lines, setup, teardown),
		cmocka_unit_test_setup_teardown(test_no_lines, setup, teardown),
		cmocka_unit_test_setup_teardown(test_new_process, setup, teardown),
		cmocka_unit_test_setup_teardown(test_keep, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
