/* Unit tests of the per-device budget (src/budget/budget.c) without LD_PRELOAD or CUDA: takes
 * stop exactly at the limit, every kind shares one total, gives never wrap (an inconsistency
 * is counted instead), a reset's drop of the pools' share leaves the rest, and threads taking
 * and giving at once never pass the limit. Depends on budget.c and the log. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "budget.h"
#include "gpupool/stats.h"

#define MIB ((size_t)1 << 20)

static int setup(void **state)
{
	(void)state;
	gp_budget_after_fork(); /* every figure and limit zero */
	return 0;
}

static void take_stops_at_the_limit(void **state)
{
	(void)state;
	gp_budget_set_limit(0, 10 * MIB);
	assert_int_equal(gp_budget_take(0, 6 * MIB, GP_BUDGET_POOL), 0);
	assert_int_equal(gp_budget_take(0, 4 * MIB, GP_BUDGET_VMM), 0); /* exactly at the limit */
	assert_int_equal(gp_budget_take(0, 1, GP_BUDGET_MANAGED), -ENOMEM);
	assert_int_equal(gp_budget_held(0, GP_BUDGET_MANAGED), 0); /* nothing taken by a refusal */
	assert_int_equal(gp_budget_held(0, GP_BUDGET_KINDS), 10 * MIB);
	gp_budget_give(0, 4 * MIB, GP_BUDGET_VMM);
	assert_int_equal(gp_budget_take(0, 4 * MIB, GP_BUDGET_PITCHED), 0);
	assert_int_equal(gp_budget_held(0, GP_BUDGET_PITCHED), 4 * MIB);
	assert_int_equal(gp_budget_held(0, GP_BUDGET_VMM), 0);
	/* another device has its own figures */
	assert_int_equal(gp_budget_take(1, 64 * MIB, GP_BUDGET_VMM), 0);
	assert_int_equal(gp_budget_held(0, GP_BUDGET_KINDS), 10 * MIB);
}

static void huge_requests_never_wrap(void **state)
{
	(void)state;
	gp_budget_set_limit(0, 10 * MIB);
	assert_int_equal(gp_budget_take(0, 8 * MIB, GP_BUDGET_POOL), 0);
	assert_int_equal(gp_budget_take(0, SIZE_MAX, GP_BUDGET_VMM), -ENOMEM);
	assert_int_equal(gp_budget_take(0, SIZE_MAX - 4 * MIB, GP_BUDGET_VMM), -ENOMEM);
	/* a limit lowered below what is held: refusals, not a wrapped room */
	gp_budget_set_limit(0, 4 * MIB);
	assert_int_equal(gp_budget_take(0, 1, GP_BUDGET_VMM), -ENOMEM);
	assert_int_equal(gp_budget_held(0, GP_BUDGET_KINDS), 8 * MIB);
}

static void no_limit_counts_everything(void **state)
{
	(void)state;
	assert_int_equal(gp_budget_limit(2), 0);
	assert_int_equal(gp_budget_take(2, SIZE_MAX / 2, GP_BUDGET_MANAGED), 0);
	assert_int_equal(gp_budget_held(2, GP_BUDGET_MANAGED), SIZE_MAX / 2);
	gp_budget_give(2, SIZE_MAX / 2, GP_BUDGET_MANAGED);
	assert_int_equal(gp_budget_held(2, GP_BUDGET_KINDS), 0);
}

/* With no limit, a take the figure cannot count (cuMemCreate(SIZE_MAX) with 32 MiB held) is
 * refused, not wrapped: the live 32 MiB stay counted, and no give is needed. A charge never
 * wraps a figure either. */
static void no_limit_never_wraps(void **state)
{
	(void)state;
	uint64_t before = gp_budget_inconsistencies();
	assert_int_equal(gp_budget_take(2, 32 * MIB, GP_BUDGET_VMM), 0);
	assert_int_equal(gp_budget_take(2, SIZE_MAX, GP_BUDGET_VMM), -ENOMEM);
	assert_int_equal(gp_budget_take(2, SIZE_MAX - 32 * MIB + 1, GP_BUDGET_POOL), -ENOMEM);
	assert_int_equal(gp_budget_held(2, GP_BUDGET_VMM), 32 * MIB);
	assert_int_equal(gp_budget_held(2, GP_BUDGET_KINDS), 32 * MIB);
	assert_int_equal(gp_budget_held(2, GP_BUDGET_POOL), 0);
	gp_budget_charge(2, SIZE_MAX, GP_BUDGET_MEMPOOL);
	assert_true(gp_budget_held(2, GP_BUDGET_KINDS) == UINT64_MAX);
	assert_true(gp_budget_held(2, GP_BUDGET_MEMPOOL) == UINT64_MAX); /* saturated, never wrapped */
	gp_budget_give(2, 32 * MIB, GP_BUDGET_VMM);
	assert_int_equal(gp_budget_held(2, GP_BUDGET_VMM), 0);
	assert_int_equal(gp_budget_inconsistencies(), before);
}

/* A closed device (a cap that cannot be applied) refuses every take, counts as capped, and
 * still takes gives; the others are untouched; a fork opens it again (its pools resolve their
 * limits anew). */
static void closed_refuses_every_take(void **state)
{
	(void)state;
	assert_int_equal(gp_budget_take(4, MIB, GP_BUDGET_VMM), 0);
	assert_false(gp_budget_capped(4));
	gp_budget_close(4);
	assert_true(gp_budget_closed(4) && gp_budget_capped(4));
	assert_int_equal(gp_budget_take(4, 1, GP_BUDGET_POOL), -ENOMEM);
	assert_int_equal(gp_budget_held(4, GP_BUDGET_KINDS), MIB);
	gp_budget_give(4, MIB, GP_BUDGET_VMM);
	assert_int_equal(gp_budget_held(4, GP_BUDGET_KINDS), 0);
	assert_int_equal(gp_budget_take(5, MIB, GP_BUDGET_VMM), 0);
	gp_budget_after_fork();
	assert_false(gp_budget_closed(4));
	assert_int_equal(gp_budget_take(4, 1, GP_BUDGET_POOL), 0);
}

static void over_give_clamps_and_counts(void **state)
{
	(void)state;
	gp_budget_set_limit(0, 10 * MIB);
	uint64_t before = gp_budget_inconsistencies();
	assert_int_equal(gp_budget_take(0, 2 * MIB, GP_BUDGET_VMM), 0);
	assert_int_equal(gp_budget_take(0, 3 * MIB, GP_BUDGET_POOL), 0);
	gp_budget_give(0, 5 * MIB, GP_BUDGET_VMM); /* more than the kind holds */
	assert_int_equal(gp_budget_held(0, GP_BUDGET_VMM), 0);
	/* only what the kind held left the total: the pools' share is intact */
	assert_int_equal(gp_budget_held(0, GP_BUDGET_KINDS), 3 * MIB);
	assert_int_equal(gp_budget_inconsistencies(), before + 1);
	gp_budget_give(0, 1, GP_BUDGET_MEMPOOL); /* nothing held at all */
	assert_int_equal(gp_budget_held(0, GP_BUDGET_KINDS), 3 * MIB);
	assert_int_equal(gp_budget_inconsistencies(), before + 2);
}

static void charge_passes_the_limit_and_is_counted(void **state)
{
	(void)state;
	gp_budget_set_limit(0, 4 * MIB);
	assert_int_equal(gp_budget_take(0, 3 * MIB, GP_BUDGET_MEMPOOL), 0);
	gp_budget_charge(0, 2 * MIB, GP_BUDGET_MEMPOOL); /* a program pool grew by a granule more */
	assert_int_equal(gp_budget_held(0, GP_BUDGET_MEMPOOL), 5 * MIB);
	assert_int_equal(gp_budget_take(0, 1, GP_BUDGET_VMM), -ENOMEM);
	gp_budget_give(0, 5 * MIB, GP_BUDGET_MEMPOOL);
	assert_int_equal(gp_budget_take(0, 4 * MIB, GP_BUDGET_VMM), 0);
}

static void pool_gone_keeps_the_rest(void **state)
{
	(void)state;
	gp_budget_set_limit(0, 100 * MIB);
	assert_int_equal(gp_budget_take(0, 40 * MIB, GP_BUDGET_POOL), 0);
	assert_int_equal(gp_budget_take(0, 20 * MIB, GP_BUDGET_VMM), 0);
	assert_int_equal(gp_budget_take(0, 10 * MIB, GP_BUDGET_MANAGED), 0);
	gp_budget_pool_gone(0);
	assert_int_equal(gp_budget_held(0, GP_BUDGET_POOL), 0);
	assert_int_equal(gp_budget_held(0, GP_BUDGET_KINDS), 30 * MIB);
	/* a segment of the killed pool given back later would be an inconsistency, never a wrap */
	gp_budget_give(0, 40 * MIB, GP_BUDGET_POOL);
	assert_int_equal(gp_budget_held(0, GP_BUDGET_KINDS), 30 * MIB);
}

static void bad_arguments(void **state)
{
	(void)state;
	assert_int_equal(gp_budget_take(-1, 1, GP_BUDGET_VMM), -EINVAL);
	assert_int_equal(gp_budget_take(GPUPOOL_MAX_DEVICES, 1, GP_BUDGET_VMM), -EINVAL);
	assert_int_equal(gp_budget_take(0, 1, GP_BUDGET_KINDS), -EINVAL);
	gp_budget_give(-1, 1, GP_BUDGET_VMM); /* ignored */
	assert_int_equal(gp_budget_held(-1, GP_BUDGET_KINDS), 0);
}

/* Threads take and give at once on one device; after every take the total is within the
 * limit, and at the end nothing is held. */
#define THREADS 8
#define ROUNDS 20000
static _Atomic int over;

static void *worker(void *arg)
{
	enum gp_budget_kind kind = (enum gp_budget_kind)((uintptr_t)arg % GP_BUDGET_KINDS);
	size_t n = ((uintptr_t)arg + 1) * MIB;
	for (int i = 0; i < ROUNDS; i++) {
		if (gp_budget_take(3, n, kind) != 0)
			continue;
		if (gp_budget_held(3, GP_BUDGET_KINDS) > 16 * MIB)
			atomic_fetch_add(&over, 1);
		gp_budget_give(3, n, kind);
	}
	return NULL;
}

static void threads_never_pass_the_limit(void **state)
{
	(void)state;
	gp_budget_set_limit(3, 16 * MIB);
	uint64_t before = gp_budget_inconsistencies();
	pthread_t t[THREADS];
	for (uintptr_t i = 0; i < THREADS; i++)
		assert_int_equal(pthread_create(&t[i], NULL, worker, (void *)i), 0);
	for (int i = 0; i < THREADS; i++)
		pthread_join(t[i], NULL);
	assert_int_equal(atomic_load(&over), 0);
	assert_int_equal(gp_budget_held(3, GP_BUDGET_KINDS), 0);
	for (int k = 0; k < GP_BUDGET_KINDS; k++)
		assert_int_equal(gp_budget_held(3, (enum gp_budget_kind)k), 0);
	assert_int_equal(gp_budget_inconsistencies(), before);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(take_stops_at_the_limit, setup),
		cmocka_unit_test_setup(huge_requests_never_wrap, setup),
		cmocka_unit_test_setup(no_limit_counts_everything, setup),
		cmocka_unit_test_setup(no_limit_never_wraps, setup),
		cmocka_unit_test_setup(closed_refuses_every_take, setup),
		cmocka_unit_test_setup(over_give_clamps_and_counts, setup),
		cmocka_unit_test_setup(charge_passes_the_limit_and_is_counted, setup),
		cmocka_unit_test_setup(pool_gone_keeps_the_rest, setup),
		cmocka_unit_test_setup(bad_arguments, setup),
		cmocka_unit_test_setup(threads_never_pass_the_limit, setup),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
