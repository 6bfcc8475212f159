/* What the knobs make of one device: its pool's parameters, its limit and its group's budget
 * (a percentage resolved against its size), and the segment geometry fitted to the memory it
 * has free when its pool is made. Pure: no environment, no log. Depends on pool.h's parameters
 * and config_values.c's size writer: never on the knob table. */
#include "config_internal.h"

#include <string.h>

#include "pool.h"

#define GIB ((size_t)1 << 30)

void gp_config_pool_params(const struct gp_config *c, size_t device_total, struct gp_pool_params *p)
{
	gp_pool_params_default(p);
	p->round = c->round;
	p->small_max = c->small_max;
	p->small_segment = c->small_segment;
	p->medium_max = c->medium_max;
	p->medium_segment = c->medium_segment;
	p->large_round = c->large_round;
	p->max_split_size = c->max_split_size;
	p->release_threshold = c->release_threshold;
	p->segments = c->segments;
	p->sync_free = c->fence == GP_FENCE_SYNC;
	p->fence_marker = c->fence_marker;
	p->check = c->check;
	p->limit = gp_config_limit(c, device_total);
}

/* A segment size for a class whose own does not fit `room` bytes: the default `def` when it
 * fits, else the largest multiple of `unit` that does (at least `unit`). */
static size_t gp_config_fit_size(size_t def, size_t room, size_t unit)
{
	if (def <= room)
		return def;
	size_t v = room / unit * unit;
	return v ? v : unit;
}

/* Appends "name:value" to a comma-separated list in buf (cap bytes). */
static void gp_config_list_add(char *buf, size_t cap, const char *name, size_t v)
{
	char t[32];
	size_t n = strnlen(buf, cap);
	if (n < cap)
		snprintf(buf + n, cap - n, "%s%s:%s", n ? ", " : "", name, gp_config_fmt_size(v, t));
}

bool gp_config_fit_device(struct gp_pool_params *p, int device, size_t device_free, char *msg, size_t cap)
{
	if (!device_free)
		return false;
	/* A segment of all the free memory would be the device's only one: half of it leaves
	 * the other classes room. Small requests have no exact-size fallback under the limit
	 * (medium and large ones do): their segment must fit the limit too. */
	size_t room = device_free / 2;
	size_t small_room = p->limit && p->limit < room ? p->limit : room;
	char was[160] = "", now[200] = "";
	unsigned n = 0;
	if (p->small_segment > small_room) {
		gp_config_list_add(was, sizeof was, "small_segment", p->small_segment);
		p->small_segment = gp_config_fit_size((size_t)GP_POOL_DEFAULT_SMALL_SEGMENT_MIB << 20, small_room, p->round);
		gp_config_list_add(now, sizeof now, "small_segment", p->small_segment);
		n++;
	}
	if (p->medium_segment > room) {
		gp_config_list_add(was, sizeof was, "medium_segment", p->medium_segment);
		p->medium_segment = gp_config_fit_size((size_t)GP_POOL_DEFAULT_MEDIUM_SEGMENT_MIB << 20, room, p->round);
		gp_config_list_add(now, sizeof now, "medium_segment", p->medium_segment);
		n++;
	}
	if (p->large_round > room) {
		gp_config_list_add(was, sizeof was, "large_round", p->large_round);
		size_t v = (size_t)GP_POOL_DEFAULT_LARGE_ROUND_MIB << 20; /* a power of two, as the knob */
		while (v > room && v > p->round)
			v >>= 1;
		p->large_round = v < p->round ? p->round : v;
		gp_config_list_add(now, sizeof now, "large_round", p->large_round);
		n++;
	}
	if (!n)
		return false;
	/* the classes' bounds follow their segments (gp_pool_params_check) */
	if (p->small_max > p->small_segment) {
		p->small_max = p->small_segment;
		gp_config_list_add(now, sizeof now, "small_max", p->small_max);
	}
	if (p->medium_max > p->medium_segment) {
		p->medium_max = p->medium_segment;
		gp_config_list_add(now, sizeof now, "medium_max", p->medium_max);
	}
	if (p->small_max > p->medium_max) {
		p->small_max = p->medium_max;
		gp_config_list_add(now, sizeof now, "small_max", p->small_max);
	}
	char lim[64] = "";
	if (small_room < room) {
		char t[32];
		snprintf(lim, sizeof lim, ", a small one at most the limit, %s", gp_config_fmt_size(p->limit, t));
	}
	snprintf(msg, cap,
		 "GPUPOOL_CONF: %s %s not fit device %d (a segment may take at most half of the %.1f GiB free when "
		 "its pool was made%s), and every request of that class would fail; using %s instead",
		 was, n > 1 ? "do" : "does", device, (double)device_free / (double)GIB, lim, now);
	return true;
}

size_t gp_config_device_limit(const struct gp_config *c, int device, size_t device_total)
{
	if (device >= 0 && device < GP_CONFIG_MAX_DEVICES && c->limit_device[device])
		return c->limit_device[device];
	return gp_config_limit(c, device_total);
}

size_t gp_config_reserve(const struct gp_config *c, size_t device_total)
{
	if (c->reserve_percent)
		return device_total / 100 * c->reserve_percent + device_total % 100 * c->reserve_percent / 100;
	return c->reserve_bytes;
}

size_t gp_config_group_limit(const struct gp_config *c, size_t device_total)
{
	if (c->group_limit_percent && device_total)
		return device_total / 100 * c->group_limit_percent + device_total % 100 * c->group_limit_percent / 100;
	return c->group_limit_bytes;
}

size_t gp_config_limit(const struct gp_config *c, size_t device_total)
{
	if (c->limit_percent && device_total) /* in two parts: no overflow near SIZE_MAX */
		return device_total / 100 * c->limit_percent + device_total % 100 * c->limit_percent / 100;
	return c->limit_bytes;
}
