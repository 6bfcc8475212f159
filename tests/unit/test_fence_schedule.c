/* Unit tests of the fence thread's schedule (fence_schedule.h) on a fake clock: the delay
 * after a burst of frees, the polls' growing delays and their cap, a new burst starting the
 * polls over, a free noticed at a poll's wake-up, the backoff while a capture refuses and
 * its reset, an interval of 0, an early wake-up, and that a step is a pure function of the
 * state, the clock and the events. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "fence_schedule.h"

#define US ((uint64_t)1000)
#define MS ((uint64_t)1000000)
#define INTERVAL (50 * US)

enum { FREED = GP_FENCE_EV_FREED, OUT = GP_FENCE_EV_OUTSTANDING, REFUSED = GP_FENCE_EV_REFUSED };

/* One step at `now`, which must answer `action` and (for GP_FENCE_SLEEP) a wake-up at `wake`. */
static void step(struct gp_fence_schedule *s, uint64_t now, unsigned ev, enum gp_fence_action action, uint64_t wake)
{
	struct gp_fence_step st = gp_fence_schedule_next(s, now, ev);
	assert_int_equal(st.action, action);
	assert_int_equal(st.next_wake_ns, action == GP_FENCE_SLEEP ? wake : now);
}

/* A schedule that a free at clock 0 woke, taken to its first marker: answers the clock then. */
static uint64_t to_first_marker(struct gp_fence_schedule *s)
{
	gp_fence_schedule_init(s, INTERVAL);
	step(s, 0, FREED, GP_FENCE_SLEEP, INTERVAL); /* the burst gathers for the interval */
	step(s, INTERVAL, 0, GP_FENCE_MARK, 0);
	return INTERVAL;
}

static void test_idle_without_frees(void **state)
{
	(void)state;
	struct gp_fence_schedule s;
	gp_fence_schedule_init(&s, INTERVAL);
	step(&s, 0, 0, GP_FENCE_SLEEP, GP_FENCE_NEVER);
	step(&s, 5 * MS, 0, GP_FENCE_SLEEP, GP_FENCE_NEVER);
}

static void test_burst_then_polls_slow_down(void **state)
{
	(void)state;
	struct gp_fence_schedule s;
	uint64_t t = to_first_marker(&s);
	/* markers outstanding: polls 50 us later, then twice as late each time, up to 1 ms */
	const uint64_t delays[] = {50 * US, 100 * US, 200 * US, 400 * US, 800 * US, 1000 * US, 1000 * US};
	for (size_t i = 0; i < sizeof delays / sizeof delays[0]; i++) {
		step(&s, t, OUT, GP_FENCE_SLEEP, t + delays[i]);
		t += delays[i];
		step(&s, t, 0, GP_FENCE_POLL, 0);
	}
	/* none left: asleep until the next free */
	step(&s, t, 0, GP_FENCE_SLEEP, GP_FENCE_NEVER);
	step(&s, t + 3 * MS, FREED, GP_FENCE_SLEEP, t + 3 * MS + INTERVAL);
}

static void test_new_frees_start_over(void **state)
{
	(void)state;
	struct gp_fence_schedule s;
	uint64_t t = to_first_marker(&s);
	step(&s, t, OUT, GP_FENCE_SLEEP, t + 50 * US);
	t += 50 * US;
	step(&s, t, 0, GP_FENCE_POLL, 0);
	step(&s, t, OUT, GP_FENCE_SLEEP, t + 100 * US);
	t += 100 * US;
	/* a free noticed at a poll's wake-up: that action records a marker, and the polls keep
	 * slowing down (the thread slept through the free: fence_thread.c sleeps, it does not
	 * wait on its condition variable, while markers are outstanding) */
	step(&s, t, FREED, GP_FENCE_MARK, 0);
	step(&s, t, OUT, GP_FENCE_SLEEP, t + 200 * US);
	t += 200 * US;
	step(&s, t, 0, GP_FENCE_POLL, 0);
	/* a free while the action ran: a new burst, the interval, and polls from 50 us again */
	step(&s, t, OUT | FREED, GP_FENCE_SLEEP, t + INTERVAL);
	t += INTERVAL;
	step(&s, t, FREED, GP_FENCE_MARK, 0);
	step(&s, t, OUT, GP_FENCE_SLEEP, t + 50 * US);
}

static void test_backoff_while_refused(void **state)
{
	(void)state;
	struct gp_fence_schedule s;
	uint64_t t = to_first_marker(&s);
	/* a capture refuses: the marker again after the backoff and the interval, the backoff
	 * doubling while under 100 ms (so up to 128 ms), frees meanwhile or not */
	uint64_t backoff = 1 * MS;
	for (int i = 0; i < 10; i++) {
		step(&s, t, REFUSED | (i & 1 ? FREED : 0), GP_FENCE_SLEEP, t + backoff + INTERVAL);
		t += backoff + INTERVAL;
		step(&s, t, 0, GP_FENCE_MARK, 0);
		if (backoff < 100 * MS)
			backoff *= 2;
	}
	assert_int_equal(backoff, 128 * MS);
	/* the capture ended: outstanding markers are polled as usual, and the next refusal
	 * backs off from 1 ms again */
	step(&s, t, OUT, GP_FENCE_SLEEP, t + 50 * US);
	t += 50 * US;
	step(&s, t, 0, GP_FENCE_POLL, 0);
	step(&s, t, REFUSED, GP_FENCE_SLEEP, t + 1 * MS + INTERVAL);
}

static void test_interval_zero_and_early_wake(void **state)
{
	(void)state;
	struct gp_fence_schedule s;
	gp_fence_schedule_init(&s, 0);
	/* no interval: the free's marker at once, and again for a free while it was recorded */
	step(&s, 7 * US, FREED, GP_FENCE_MARK, 0);
	step(&s, 9 * US, OUT | FREED, GP_FENCE_MARK, 0);
	step(&s, 9 * US, OUT, GP_FENCE_SLEEP, 59 * US);
	/* woken before the poll is due: nothing yet; the free is remembered for that action */
	step(&s, 20 * US, FREED, GP_FENCE_SLEEP, 59 * US);
	step(&s, 59 * US, 0, GP_FENCE_MARK, 0);

	gp_fence_schedule_init(&s, INTERVAL);
	step(&s, 0, FREED, GP_FENCE_SLEEP, INTERVAL);
	step(&s, 10 * US, 0, GP_FENCE_SLEEP, INTERVAL);
	step(&s, INTERVAL + 3 * US, 0, GP_FENCE_MARK, 0); /* late: acts at once */
}

/* The clock saturates instead of wrapping: a step near its end never answers a wake-up in
 * the past, nor GP_FENCE_NEVER for a time that is due. */
static void test_clock_end(void **state)
{
	(void)state;
	struct gp_fence_schedule s;
	gp_fence_schedule_init(&s, INTERVAL);
	uint64_t t = UINT64_MAX - 10 * US;
	struct gp_fence_step st = gp_fence_schedule_next(&s, t, FREED);
	assert_int_equal(st.action, GP_FENCE_SLEEP);
	assert_true(st.next_wake_ns > t && st.next_wake_ns != GP_FENCE_NEVER);
	step(&s, st.next_wake_ns, 0, GP_FENCE_MARK, 0);
}

/* Pure: the same state, clock and events give the same answer and the same next state. */
static void test_pure(void **state)
{
	(void)state;
	struct gp_fence_schedule a, b;
	gp_fence_schedule_init(&a, INTERVAL);
	const struct {
		uint64_t now;
		unsigned ev;
	} script[] = {{0, FREED}, {INTERVAL, 0}, {INTERVAL, OUT}, {INTERVAL + 50 * US, FREED},
		      {INTERVAL + 50 * US, REFUSED}, {3 * MS, 0}, {3 * MS, OUT}};
	for (size_t i = 0; i < sizeof script / sizeof script[0]; i++) {
		b = a;
		struct gp_fence_step x = gp_fence_schedule_next(&a, script[i].now, script[i].ev);
		struct gp_fence_step y = gp_fence_schedule_next(&b, script[i].now, script[i].ev);
		assert_int_equal(x.action, y.action);
		assert_int_equal(x.next_wake_ns, y.next_wake_ns);
		assert_memory_equal(&a, &b, sizeof a);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_idle_without_frees),
		cmocka_unit_test(test_burst_then_polls_slow_down),
		cmocka_unit_test(test_new_frees_start_over),
		cmocka_unit_test(test_backoff_while_refused),
		cmocka_unit_test(test_interval_zero_and_early_wake),
		cmocka_unit_test(test_clock_end),
		cmocka_unit_test(test_pure),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
