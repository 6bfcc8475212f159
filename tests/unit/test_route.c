/* Unit tests of the routing decision both CUDA APIs share (src/calls/route.h), without
 * LD_PRELOAD or CUDA: every combination of the facts and the API's answers, checked against
 * the order route.h states, and that the API is asked only what the order needs (a call
 * into CUDA each). Depends on route.h only. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "route.h"

/* A fake API: its answers, and how often each question was asked. */
struct fake {
	int cap;      /* capturing(): 0, 1, or -1 (an invalid stream) */
	int dev;      /* device(): -1 none */
	bool served;  /* device(): the context is one the pools serve */
	bool has_pool;
	int asked_cap, asked_dev, asked_pool;
};

static char the_pool;

static int f_capturing(const void *c)
{
	struct fake *f = (struct fake *)c;
	f->asked_cap++;
	return f->cap;
}

static int f_device(const void *c, bool *served)
{
	struct fake *f = (struct fake *)c;
	f->asked_dev++;
	*served = f->served;
	return f->dev;
}

static void *f_pool(const void *c, int dev)
{
	struct fake *f = (struct fake *)c;
	f->asked_pool++;
	assert_int_equal(dev, f->dev);
	return f->has_pool ? &the_pool : NULL;
}

static const struct gp_route_ask ask = {f_capturing, f_device, f_pool};

/* The order of route.h, written out again as the specification. */
static enum gp_route expected(const struct gp_route_facts *x, const struct fake *f)
{
	if (x->off)
		return GP_ROUTE_PASS;
	if (!x->has_entry)
		return GP_ROUTE_ABSENT;
	if (x->refuse)
		return GP_ROUTE_REFUSE;
	if (!x->args_ok)
		return GP_ROUTE_PASS;
	if (f->cap < 0)
		return GP_ROUTE_PASS;
	if (f->cap > 0 || f->dev < 0 || !f->served || !f->has_pool)
		return GP_ROUTE_UNPOOLED;
	return GP_ROUTE_POOL;
}

static void every_combination(void **state)
{
	(void)state;
	int n = 0;
	for (unsigned bits = 0; bits < 16; bits++)
		for (int cap = -1; cap <= 1; cap++)
			for (int dev = -1; dev <= 1; dev++)
				for (int served = 0; served <= 1; served++)
					for (int has_pool = 0; has_pool <= 1; has_pool++) {
						struct gp_route_facts x = {bits & 1, bits & 2, bits & 4, bits & 8};
						struct fake f = {cap, dev, served, has_pool, 0, 0, 0};
						int d = 7;
						void *p = (void *)&d;
						enum gp_route r = gp_route_alloc(&x, &ask, &f, &d, &p);
						assert_int_equal(r, expected(&x, &f));
						bool early = x.off || !x.has_entry || x.refuse || !x.args_ok;
						/* no question into CUDA for a call decided by the facts */
						assert_int_equal(f.asked_cap, early ? 0 : 1);
						/* the device only where the stream is valid */
						assert_int_equal(f.asked_dev, early || cap < 0 ? 0 : 1);
						/* a pool only for a device the pools serve and no capture */
						assert_int_equal(f.asked_pool,
								 early || cap != 0 || dev < 0 || !served ? 0 : 1);
						assert_int_equal(d, f.asked_dev ? dev : -1);
						assert_ptr_equal(p, r == GP_ROUTE_POOL ? (void *)&the_pool : NULL);
						n++;
					}
	assert_int_equal(n, 16 * 3 * 3 * 2 * 2);
}

/* The cases the two APIs once ordered differently: strict mode refuses before the
 * arguments are looked at (a NULL pointer or size 0 is refused, not answered), and an
 * absent entry point is said before strict mode. */
static void refusal_before_arguments(void **state)
{
	(void)state;
	struct fake f = {0, 0, true, true, 0, 0, 0};
	int d;
	void *p;
	struct gp_route_facts x = {.off = false, .has_entry = true, .refuse = true, .args_ok = false};
	assert_int_equal(gp_route_alloc(&x, &ask, &f, &d, &p), GP_ROUTE_REFUSE);
	x.has_entry = false;
	assert_int_equal(gp_route_alloc(&x, &ask, &f, &d, &p), GP_ROUTE_ABSENT);
	x.off = true;
	assert_int_equal(gp_route_alloc(&x, &ask, &f, &d, &p), GP_ROUTE_PASS);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(every_combination),
		cmocka_unit_test(refusal_before_arguments),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
