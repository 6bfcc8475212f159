/* The one routing decision of an allocation, for both CUDA APIs: serve it from the pool,
 * pass it through to the API's own entry point, answer "absent" (the process's CUDA lacks
 * the entry point), or refuse it (strict mode with a bad knob). Type-neutral: no CUDA types,
 * no error codes; the runtime's hook bodies (runtime_calls.c) and the driver's (driver_calls.c) each turn
 * the answer into their own (cudaError_t, CUresult). Depends on nothing but the C library;
 * inline, so that each caller's questions are inlined into its hot path.
 *
 * The order, the same for both APIs:
 *   1. the layer serves nothing                              -> pass (the API's own answer)
 *      (exit having begun, the hooks pass allocations through before asking: counted)
 *   2. the API lacks the call's entry point                -> absent
 *   3. strict mode refused the configuration                -> refuse
 *   4. no pointer to write to, or size 0                    -> pass (the API's own answer)
 *   5. the stream is invalid                                -> pass (the API's own error)
 *   6. the stream is capturing (the allocation belongs to
 *      a graph)                                              -> unpooled
 *   7. no device, a context the pools do not serve, or the
 *      device's pool cannot be made                          -> unpooled
 *   8. otherwise                                            -> pool
 * "Unpooled" is a pass that the API's counter of calls passed through counts. Steps 5-7 ask
 * the API (a call into CUDA each), and only when the steps before leave the call for the
 * pool. */
#ifndef GP_ROUTE_H
#define GP_ROUTE_H

#include <stdbool.h>

enum gp_route { GP_ROUTE_POOL, GP_ROUTE_PASS, GP_ROUTE_UNPOOLED, GP_ROUTE_ABSENT, GP_ROUTE_REFUSE };

/* What the decision knows without asking CUDA. */
struct gp_route_facts {
	bool off;        /* the layer serves nothing */
	bool has_entry;  /* the API has the entry point this call goes to */
	bool refuse;     /* strict mode refused the configuration */
	bool args_ok;    /* a pointer to write the address to, and a size > 0 */
};

/* The questions for the API, asked in the order above. `call`: the API's own description
 * of the call (its stream, its variant). */
struct gp_route_ask {
	/* The stream's capture state: 0 not capturing, 1 capturing, < 0 an invalid stream. */
	int (*capturing)(const void *call);
	/* The current device (-1: none, or beyond the pooled ones); *served: its context is
	 * one the pools serve. */
	int (*device)(const void *call, bool *served);
	/* The pool of `dev`, made on first use; NULL when it cannot be made. */
	void *(*pool)(const void *call, int dev);
};

/* The route of one allocation; *dev is the device asked (-1 when not asked, or none) and
 * *pool its pool where the route is GP_ROUTE_POOL. */
static inline enum gp_route gp_route_alloc(const struct gp_route_facts *f, const struct gp_route_ask *ask,
					   const void *call, int *dev, void **pool)
{
	*dev = -1;
	*pool = NULL;
	if (f->off)
		return GP_ROUTE_PASS;
	if (!f->has_entry)
		return GP_ROUTE_ABSENT;
	if (f->refuse)
		return GP_ROUTE_REFUSE;
	if (!f->args_ok)
		return GP_ROUTE_PASS;
	int cap = ask->capturing(call);
	if (cap < 0)
		return GP_ROUTE_PASS;
	bool served = false;
	*dev = ask->device(call, &served);
	if (cap > 0 || *dev < 0 || !served)
		return GP_ROUTE_UNPOOLED;
	*pool = ask->pool(call, *dev);
	return *pool ? GP_ROUTE_POOL : GP_ROUTE_UNPOOLED;
}

#endif
