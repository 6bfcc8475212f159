/* Tests of the pool lock (lock.h, lock.c) and the port layer under it (port/port.h): a
 * plain counter incremented under the lock by several threads comes out exact; waiters
 * that went to sleep in the kernel are woken by gp_lock_give, one hand-off at a time, and
 * none is lost. Every wait is bounded: a lost wake-up fails the test instead of hanging. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#include <cmocka.h>

#include "lock.h"
#include "port.h"

#define THREADS 4
/* enough to interleave the threads thousands of times, short enough for qemu-user */
#define ITERS 100000
/* how long any one bounded wait may take before the test calls it a lost wake-up (ns) */
#define DEADLINE_NS (20ull * 1000000000ull)

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void sleep_us(long us)
{
	struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
	nanosleep(&ts, NULL);
}

/* Waits until *n reaches want or the deadline passes; returns the last value seen. */
static int wait_count(const int *n, int want)
{
	uint64_t end = now_ns() + DEADLINE_NS;
	int v;
	while ((v = __atomic_load_n(n, __ATOMIC_ACQUIRE)) < want && now_ns() < end)
		sleep_us(1000);
	return v;
}

/* Joins t, or leaves it where a lost wake-up left it: joining would hang. The shared state
 * of a failed run is never freed, since such a thread may still wake and touch it. */
static void join_if(pthread_t t, int finished)
{
	if (finished)
		pthread_join(t, NULL);
	else
		pthread_detach(t);
}

/* Zero-initialised is unlocked; the uncontended take and give leave no waiter mark. */
static void test_uncontended(void **state)
{
	(void)state;
	gp_lock l = {0};
	gp_lock_take(&l);
	assert_int_equal(__atomic_load_n(&l.v, __ATOMIC_RELAXED), 1);
	gp_lock_give(&l);
	assert_int_equal(__atomic_load_n(&l.v, __ATOMIC_RELAXED), 0);
	gp_lock_take(&l);
	gp_lock_give(&l);
	assert_int_equal(__atomic_load_n(&l.v, __ATOMIC_RELAXED), 0);
}

/* The port contract: a wait on a value that already changed returns at once; a wake with
 * nobody waiting is harmless. */
static void test_port_contract(void **state)
{
	(void)state;
	int word = 0;
	uint64_t t0 = now_ns();
	gp_port_wait(&word, 1);
	assert_true(now_ns() - t0 < 1000000000ull);
	gp_port_wake_one(&word);
	gp_port_cpu_relax();
	assert_int_equal(word, 0);
}

struct counting {
	gp_lock lock;
	long counter; /* plain on purpose: only the lock keeps the increments apart */
	int hold_us;  /* > 0: every 1024th turn, a thread sleeps this long holding the lock */
	int done;     /* threads finished */
};

static void *count_thread(void *arg)
{
	struct counting *c = arg;
	for (int i = 0; i < ITERS; i++) {
		gp_lock_take(&c->lock);
		c->counter++;
		if (c->hold_us > 0 && (i & 1023) == 0)
			sleep_us(c->hold_us);
		gp_lock_give(&c->lock);
	}
	__atomic_add_fetch(&c->done, 1, __ATOMIC_RELEASE);
	return NULL;
}

static void run_counting(int hold_us)
{
	struct counting *c = calloc(1, sizeof *c);
	assert_non_null(c);
	c->hold_us = hold_us;
	pthread_t t[THREADS];
	for (int i = 0; i < THREADS; i++)
		assert_int_equal(pthread_create(&t[i], NULL, count_thread, c), 0);
	int finished = wait_count(&c->done, THREADS);
	for (int i = 0; i < THREADS; i++)
		join_if(t[i], finished == THREADS);
	assert_int_equal(finished, THREADS);
	assert_int_equal(c->counter, (long)THREADS * ITERS);
	assert_int_equal(c->lock.v, 0);
	free(c);
}

/* Short critical sections: mostly the spinning path. */
static void test_counter_exact(void **state)
{
	(void)state;
	run_counting(0);
}

/* A holder that sleeps now and then (like one inside a slow cudaMalloc): the others go
 * to sleep in gp_port_wait and must be woken. */
static void test_counter_exact_with_sleepers(void **state)
{
	(void)state;
	run_counting(200);
}

struct handoff {
	gp_lock lock;
	int started; /* waiters that are about to take the lock */
	int through; /* waiters that got it (and gave it back) */
};

static void *waiter_thread(void *arg)
{
	struct handoff *h = arg;
	__atomic_add_fetch(&h->started, 1, __ATOMIC_RELEASE);
	gp_lock_take(&h->lock);
	__atomic_add_fetch(&h->through, 1, __ATOMIC_RELEASE);
	gp_lock_give(&h->lock);
	return NULL;
}

/* The main thread holds the lock until every waiter is asleep on it (the lock word says
 * "held with waiters" and stays so for a while), then gives it once: each give must wake
 * the next sleeper, so all of them get through. Repeated to catch a lost wake-up. */
static void test_give_wakes_sleepers(void **state)
{
	(void)state;
	enum { WAITERS = 3, ROUNDS = 20 };
	for (int round = 0; round < ROUNDS; round++) {
		struct handoff *h = calloc(1, sizeof *h);
		assert_non_null(h);
		gp_lock_take(&h->lock);
		pthread_t t[WAITERS];
		for (int i = 0; i < WAITERS; i++)
			assert_int_equal(pthread_create(&t[i], NULL, waiter_thread, h), 0);
		assert_int_equal(wait_count(&h->started, WAITERS), WAITERS);
		uint64_t end = now_ns() + DEADLINE_NS;
		while (__atomic_load_n(&h->lock.v, __ATOMIC_RELAXED) != 2 && now_ns() < end)
			sleep_us(100);
		assert_int_equal(__atomic_load_n(&h->lock.v, __ATOMIC_RELAXED), 2);
		/* the first waiter done spinning marked the word 2 and sleeps; 20 ms is far
		 * longer than the spin phase, so after it the others sleep too */
		sleep_us(20000);
		assert_int_equal(__atomic_load_n(&h->through, __ATOMIC_ACQUIRE), 0);
		gp_lock_give(&h->lock);
		int through = wait_count(&h->through, WAITERS);
		for (int i = 0; i < WAITERS; i++)
			join_if(t[i], through == WAITERS);
		assert_int_equal(through, WAITERS);
		assert_int_equal(h->lock.v, 0);
		free(h);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_uncontended),
		cmocka_unit_test(test_port_contract),
		cmocka_unit_test(test_counter_exact),
		cmocka_unit_test(test_counter_exact_with_sleepers),
		cmocka_unit_test(test_give_wakes_sleepers),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
