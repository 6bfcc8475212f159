/* Fuzz harness of the knob parser (config.c): the input is the environment, up to four
 * '\n'-separated values of GPUPOOL_CONF, GPUPOOL_DISABLE, GPUPOOL_REPORT, GPUPOOL_LOG,
 * GPUPOOL_GROUP, CUDA_DEVICE_MEMORY_LIMIT and CUDA_DEVICE_MEMORY_LIMIT_0 (a missing one is unset). Every parse must end in a config within the bounds docs/knobs.md
 * states, from which the pool can be created on the fake backend and serve each size class. */
#include <errno.h>
#include <string.h>

#include "backend_fake.h"
#include "config.h"
#include "fuzz.h"
#include "log.h"
#include "pool.h"

#define MIB ((size_t)1 << 20)
#define SIZE_CAP ((size_t)1 << 48)    /* largest size a size knob takes (256T) */
#define LARGE_ROUND_CAP ((size_t)1 << 30)

static const char *const vars[] = {"GPUPOOL_CONF", "GPUPOOL_DISABLE", "GPUPOOL_REPORT", "GPUPOOL_LOG",
				   "GPUPOOL_GROUP", "CUDA_DEVICE_MEMORY_LIMIT", "CUDA_DEVICE_MEMORY_LIMIT_0"};
#define NVARS (sizeof vars / sizeof vars[0])

/* The values of the current input, NUL-terminated copies; NULL = unset. */
static char *values[NVARS];

static const char *lookup(const char *name)
{
	for (size_t i = 0; i < NVARS; i++)
		if (strcmp(name, vars[i]) == 0)
			return values[i];
	return NULL;
}

static int is_pow2(size_t v)
{
	return v && !(v & (v - 1));
}

static void check_bounds(const struct gp_config *c)
{
	FUZZ_CHECK(c->log_level >= GP_LOG_ERROR && c->log_level <= GP_LOG_DEBUG);
	FUZZ_CHECK(c->fence == GP_FENCE_THREAD || c->fence == GP_FENCE_INLINE || c->fence == GP_FENCE_SYNC);
	FUZZ_CHECK(c->report_format == GP_REPORT_TEXT || c->report_format == GP_REPORT_JSON);
	FUZZ_CHECK(memchr(c->report, '\0', sizeof c->report) && c->report[0]);
	FUZZ_CHECK(memchr(c->trace, '\0', sizeof c->trace));
	FUZZ_CHECK(c->fence_interval_us <= 1000000);
	FUZZ_CHECK(c->limit_percent <= 100);
	FUZZ_CHECK(!(c->limit_percent && c->limit_bytes));
	FUZZ_CHECK(c->limit_bytes <= SIZE_CAP);
	for (int d = 0; d < GP_CONFIG_MAX_DEVICES; d++)
		FUZZ_CHECK(c->limit_device[d] <= SIZE_CAP);
	FUZZ_CHECK(c->group_limit_percent <= 100);
	FUZZ_CHECK(!(c->group_limit_percent && c->group_limit_bytes));
	FUZZ_CHECK(c->group_limit_bytes <= SIZE_CAP);
	FUZZ_CHECK(memchr(c->group, '\0', sizeof c->group));
	FUZZ_CHECK(memchr(c->notes, '\0', sizeof c->notes));
	FUZZ_CHECK(is_pow2(c->round) && c->round >= 512 && c->round <= 2 * MIB);
	FUZZ_CHECK(c->small_max >= 1 && c->small_max <= c->small_segment && c->small_segment <= SIZE_CAP);
	FUZZ_CHECK(c->small_max <= c->medium_max);
	FUZZ_CHECK(c->medium_max >= 1 && c->medium_max <= c->medium_segment && c->medium_segment <= SIZE_CAP);
	FUZZ_CHECK(c->small_segment % c->round == 0 && c->medium_segment % c->round == 0);
	FUZZ_CHECK(is_pow2(c->large_round) && c->large_round >= c->round && c->large_round <= LARGE_ROUND_CAP);
	FUZZ_CHECK(c->max_split_size == SIZE_MAX || (c->max_split_size >= 20 * MIB && c->max_split_size <= SIZE_CAP));
	FUZZ_CHECK(c->release_threshold == SIZE_MAX || c->release_threshold <= SIZE_CAP);
}

/* The pool the config describes serves a request of each class and passes its checker. */
static void check_pool(const struct gp_config *c)
{
	static const size_t device_total = (size_t)80 << 30;
	struct gp_fake_backend fb;
	struct gpupool_device_stats st;
	struct gp_pool_params p;
	gp_pool *pool;
	uintptr_t addr[6];
	const size_t sizes[6] = {1, c->small_max, c->small_max + 1, c->medium_max - 1 ? c->medium_max - 1 : 1,
				 c->medium_max, 3 * c->medium_max + 1};

	size_t limit = gp_config_limit(c, device_total);
	FUZZ_CHECK(c->limit_percent ? limit <= device_total && limit >= device_total / 100 : limit == c->limit_bytes);
	gp_config_pool_params(c, device_total, &p);
	FUZZ_CHECK(p.limit == limit);
	gp_fake_backend_init(&fb, 0);
	memset(&st, 0, sizeof st);
	FUZZ_CHECK(gp_pool_create(&pool, 0, &p, &fb.be, &st) == 0);
	for (size_t i = 0; i < 6; i++) {
		int rc = gp_pool_alloc(pool, sizes[i], i % 2 ? 0 : GP_NO_STREAM, &addr[i]);
		FUZZ_CHECK(rc == 0 || (rc == -ENOMEM && p.limit));
		if (rc)
			addr[i] = 0;
	}
	FUZZ_CHECK(gp_pool_check(pool) == 0);
	for (size_t i = 0; i < 6; i++)
		if (addr[i])
			FUZZ_CHECK(gp_pool_free(pool, addr[i], i % 2 ? 0 : GP_NO_STREAM) == 0);
	FUZZ_CHECK(gp_pool_fence(pool) == 0);
	gp_pool_release(pool, 0);
	FUZZ_CHECK(gp_pool_check(pool) == 0);
	FUZZ_CHECK(st.requested_bytes == 0 && st.allocated_bytes == 0);
	gp_pool_destroy(pool);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t at = 0;
	for (size_t i = 0; i < NVARS; i++) {
		values[i] = NULL;
		if (at > size || (at == size && i > 0))
			continue; /* a missing value, or the empty one after a final '\n': unset */
		const uint8_t *nl = memchr(data + at, '\n', size - at);
		size_t len = nl ? (size_t)(nl - (data + at)) : size - at;
		values[i] = strndup((const char *)data + at, len); /* stops at a NUL, as getenv would */
		at += len + 1;
	}

	struct gp_config c;
	int rc = gp_config_parse(&c, lookup);
	FUZZ_CHECK(rc == (c.strict && c.bad ? -EINVAL : 0));
	check_bounds(&c);
	check_pool(&c);

	/* the size syntax alone, on the first value: a size has digits */
	size_t v;
	if (values[0] && gp_config_parse_size(values[0], &v) == 0)
		FUZZ_CHECK(strpbrk(values[0], "0123456789") != NULL);

	for (size_t i = 0; i < NVARS; i++)
		free(values[i]);
	return 0;
}
