/* Configuration: GPUPOOL_CONF (key:value,...) and the standalone GPUPOOL_* switches parsed
 * into struct gp_config through the knob table (config_knobs.c); the geometry checked, then a
 * scheduler's variables (config_sched.c). Pure: env through a lookup function, no allocation,
 * no exit, bounded work on any input. Depends on the other config files, log.h and pool.h. */
#include "config_internal.h"

#include <ctype.h>
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <strings.h>

#include "log.h"
#include "pool.h"

/* Longest GPUPOOL_CONF read; a longer one is ignored as a whole (said in one line). */
#define GP_CONFIG_MAX_LEN 4096

static char *gp_config_trim(char *s, char *end)
{
	while (s < end && isspace((unsigned char)*s))
		s++;
	while (end > s && isspace((unsigned char)end[-1]))
		end--;
	*end = '\0';
	return s;
}

/* Splits the next item off *cur (a ',' separated list in a writable buffer): *key and
 * *val are trimmed and NUL-terminated, *val is NULL when there was no ':'. Returns false
 * at the end of the list. Empty items come back with an empty key and *val NULL. */
static bool gp_config_next_item(char **cur, char **key, char **val)
{
	char *s = *cur;
	if (!s)
		return false;
	char *comma = strchr(s, ',');
	char *end = comma ? comma : s + strlen(s);
	*cur = comma ? comma + 1 : NULL;
	char *colon = memchr(s, ':', (size_t)(end - s));
	if (colon) {
		*val = gp_config_trim(colon + 1, end);
		*key = gp_config_trim(s, colon);
	} else {
		*val = NULL;
		*key = gp_config_trim(s, end);
	}
	return true;
}

/* Strict mode must be known before the first bad item is reported, wherever it appears. */
static bool gp_config_prescan_strict(const char *conf)
{
	char buf[GP_CONFIG_MAX_LEN + 1], *cur = buf, *key, *val;
	bool strict = false, b;
	memcpy(buf, conf, strlen(conf) + 1);
	while (gp_config_next_item(&cur, &key, &val))
		if (val && strcmp(key, "strict") == 0 && gp_config_parse_bool(val, &b) == 0)
			strict = b;
	return strict;
}

/* "limt:1G": an unknown key, with the knob it is a typo of where there is one. A typo of a
 * cap (limit, group, group_limit) is a cap that cannot be applied as asked. */
static void gp_config_unknown_key(struct gp_config_ctx *c, const char *key, const char *val)
{
	char q[GP_CONFIG_QUOTE_MAX + 4], q2[GP_CONFIG_QUOTE_MAX + 4];
	const struct gp_config_knob *near = gp_config_suggest(key);
	if (near && gp_config_is_cap(near)) {
		gp_config_bad_cap(c, "GPUPOOL_CONF: %s:%s: unknown key; did you mean %s?", gp_config_quote(key, q),
				  gp_config_quote(val, q2), near->name);
	} else if (near) {
		char instead[64];
		snprintf(instead, sizeof instead, "ignoring this item (%s keeps its value)", near->name);
		gp_config_bad(c, instead, "GPUPOOL_CONF: %s:%s: unknown key; did you mean %s?", gp_config_quote(key, q),
			      gp_config_quote(val, q2), near->name);
	} else {
		char keys[320];
		gp_config_list_keys(keys, sizeof keys);
		gp_config_bad(c, "ignoring this item", "GPUPOOL_CONF: %s:%s: unknown key, expected one of %s",
			      gp_config_quote(key, q), gp_config_quote(val, q2), keys);
	}
}

/* An item with no ':' ("limit=40G", "limit 40G"): a cap's name before the '=' or a blank,
 * or one that is a typo of a cap's, is a cap that cannot be applied as asked. */
static void gp_config_item_without_value(struct gp_config_ctx *c, const char *item)
{
	char q[GP_CONFIG_QUOTE_MAX + 4], name[40];
	size_t n = strcspn(item, "= \t");
	snprintf(name, sizeof name, "%.*s", (int)(n < sizeof name ? n : sizeof name - 1), item);
	const struct gp_config_knob *k = gp_config_find(name);
	if (!k)
		k = gp_config_suggest(name);
	/* "limit40G": a cap's name and its value run together (the longest name that fits) */
	static const char *const caps[] = {"group_limit", "limit", "group"};
	for (size_t i = 0; !gp_config_is_cap(k) && i < sizeof caps / sizeof caps[0]; i++)
		if (strncasecmp(item, caps[i], strlen(caps[i])) == 0)
			k = gp_config_find(caps[i]);
	if (gp_config_is_cap(k))
		gp_config_bad_cap(c, "GPUPOOL_CONF: %s: expected key:value (e.g. %s:40G)", gp_config_quote(item, q),
				  k->name);
	else
		gp_config_bad(c, "ignoring this item", "GPUPOOL_CONF: %s: expected key:value (e.g. limit:40G)",
			      gp_config_quote(item, q));
}

static void gp_config_parse_conf(struct gp_config_ctx *c, const char *conf)
{
	char buf[GP_CONFIG_MAX_LEN + 1], *cur = buf, *key, *val;
	char q[GP_CONFIG_QUOTE_MAX + 4];
	size_t len = strnlen(conf, GP_CONFIG_MAX_LEN + 1);
	if (len > GP_CONFIG_MAX_LEN) {
		/* what it held cannot be told apart: a cap in it is not dropped */
		if (strstr(conf, "limit") || strstr(conf, "group"))
			gp_config_bad_cap(c, "GPUPOOL_CONF: %s: longer than %d characters, with a limit or a group in it",
					  gp_config_quote(conf, q), GP_CONFIG_MAX_LEN);
		else
			gp_config_bad(c, "ignoring GPUPOOL_CONF: every knob keeps its default",
				      "GPUPOOL_CONF: %s: longer than %d characters", gp_config_quote(conf, q),
				      GP_CONFIG_MAX_LEN);
		return;
	}
	c->strict = gp_config_prescan_strict(conf);
	memcpy(buf, conf, len + 1);
	while (gp_config_next_item(&cur, &key, &val)) {
		if (!val) {
			if (*key)
				gp_config_item_without_value(c, key);
			continue; /* empty items (a:1,,b:2 or a trailing comma) are harmless */
		}
		const struct gp_config_knob *k = gp_config_find(key);
		if (!k) {
			gp_config_unknown_key(c, key, val);
			continue;
		}
		uint64_t bit = (uint64_t)1 << gp_config_knob_index(k);
		if (c->seen & bit)
			gp_log(GP_LOG_WARN, "GPUPOOL_CONF: %s given more than once; the last one wins (%s:%s)", k->name,
			       k->name, gp_config_quote(val, q));
		c->seen |= bit;
		int rc = gp_config_knob_set(k, val, c->cfg);
		if (rc == -ERANGE) { /* a percentage past the device: the whole device */
			char instead[64];
			snprintf(instead, sizeof instead, "using %s:100%% (the whole device) instead", k->name);
			gp_config_bad(c, instead, "GPUPOOL_CONF: %s:%s: more than the device's memory; expected %s", k->name,
				      gp_config_quote(val, q), k->range);
		} else if (rc != 0) {
			gp_config_knob_default(k, c->cfg);
			gp_config_bad_value(c, "GPUPOOL_CONF", k, val);
		} else if (k->type == GP_KNOB_FORMAT) {
			c->format_set = true;
		}
	}
}

static void gp_config_reset(struct gp_config *cfg, const char *const *names)
{
	for (; *names; names++)
		gp_config_knob_default(gp_config_find(*names), cfg);
}

/* "using the default (large_round:2M)", or "using the defaults (small_max:1M, ...)" for
 * several knobs: what gp_config_reset(names) puts back, from the table. */
static const char *gp_config_defaults_text(const char *const *names, char *buf, size_t size)
{
	int used = snprintf(buf, size, "using the default%s (", names[1] ? "s" : "");
	for (size_t i = 0; names[i] && used >= 0 && (size_t)used < size; i++)
		used += snprintf(buf + used, size - (size_t)used, "%s%s:%s", i ? ", " : "", names[i],
				 gp_config_find(names[i])->def);
	if (used >= 0 && (size_t)used < size)
		snprintf(buf + used, size - (size_t)used, ")");
	return buf;
}

/* The geometry rules (gp_pool_params_check) that cfg breaks as it stands. */
static unsigned gp_config_geometry(const struct gp_config *cfg)
{
	struct gp_pool_params prm;
	gp_config_pool_params(cfg, 0, &prm);
	return gp_pool_params_check(&prm);
}

/* Segment geometry: the pool's rules (gp_pool_params_check), checked group by group in
 * this order, each on the values the groups before it left. A conflict is one line and
 * puts its group back to the defaults. round cannot break its rule (its knob takes powers
 * of two only), so no group resets it. */
static void gp_config_check_geometry(struct gp_config_ctx *c)
{
	static const char *const small[] = {"small_max", "small_segment", NULL};
	static const char *const medium[] = {"medium_max", "medium_segment", NULL};
	static const char *const both[] = {"small_max", "small_segment", "medium_max", "medium_segment", NULL};
	static const char *const large[] = {"large_round", NULL};
	struct gp_config *g = c->cfg;
	char a[32], b[32], r[32], instead[128];

	if (gp_config_geometry(g) & GP_GEOMETRY_SMALL) {
		gp_config_bad(c, gp_config_defaults_text(small, instead, sizeof instead),
			      "GPUPOOL_CONF: small_max:%s, small_segment:%s, round:%s: expected small_max <= small_segment "
			      "and small_segment a multiple of round",
			      gp_config_fmt_size(g->small_max, a), gp_config_fmt_size(g->small_segment, b),
			      gp_config_fmt_size(g->round, r));
		gp_config_reset(g, small);
	}
	if (gp_config_geometry(g) & GP_GEOMETRY_MEDIUM) {
		gp_config_bad(c, gp_config_defaults_text(medium, instead, sizeof instead),
			      "GPUPOOL_CONF: medium_max:%s, medium_segment:%s, round:%s: expected medium_max <= "
			      "medium_segment and medium_segment a multiple of round",
			      gp_config_fmt_size(g->medium_max, a), gp_config_fmt_size(g->medium_segment, b),
			      gp_config_fmt_size(g->round, r));
		gp_config_reset(g, medium);
	}
	if (gp_config_geometry(g) & GP_GEOMETRY_CLASSES) {
		gp_config_bad(c, gp_config_defaults_text(both, instead, sizeof instead),
			      "GPUPOOL_CONF: small_max:%s, medium_max:%s: expected small_max <= medium_max",
			      gp_config_fmt_size(g->small_max, a), gp_config_fmt_size(g->medium_max, b));
		gp_config_reset(g, both);
	}
	if (gp_config_geometry(g) & GP_GEOMETRY_LARGE) {
		gp_config_bad(c, gp_config_defaults_text(large, instead, sizeof instead),
			      "GPUPOOL_CONF: large_round:%s, round:%s: expected large_round a multiple of round",
			      gp_config_fmt_size(g->large_round, a), gp_config_fmt_size(g->round, r));
		gp_config_reset(g, large);
	}
}

/* A standalone variable: unset or empty means "not given". Returns true when it set cfg. */
static bool gp_config_parse_var(struct gp_config_ctx *c, gp_getenv_fn get, const char *name)
{
	const struct gp_config_knob *k = gp_config_find_var(name);
	const char *v = get(name);
	char buf[GP_PATH_MAX + 1];
	if (!v)
		return false;
	snprintf(c->var, sizeof c->var, "%s", name);
	size_t n = strnlen(v, GP_PATH_MAX + 1);
	if (n > GP_PATH_MAX) {
		gp_config_bad_value(c, name, k, v);
		return false;
	}
	memcpy(buf, v, n + 1);
	char *s = gp_config_trim(buf, buf + n);
	if (!*s)
		return false;
	/* Parse into a copy so a bad value leaves the GPUPOOL_CONF value or default alone. */
	struct gp_config tmp = *c->cfg;
	if (gp_config_knob_set(k, s, &tmp) != 0) {
		gp_config_bad_value(c, name, k, s);
		return false;
	}
	*c->cfg = tmp;
	return true;
}

/* group_limit is a group's budget: without a group it applies to nothing, and says so. Not a
 * bad value: the same GPUPOOL_CONF may be shared by processes that get GPUPOOL_GROUP. */
static void gp_config_check_group(const struct gp_config *cfg)
{
	if (cfg->group[0] || (!cfg->group_limit_bytes && !cfg->group_limit_percent))
		return;
	char t[64];
	gp_config_knob_text(gp_config_find("group_limit"), cfg, t, sizeof t);
	gp_log(GP_LOG_WARN, "GPUPOOL_CONF: group_limit:%s has no group to apply to; set group:FILE or GPUPOOL_GROUP", t);
}

static bool gp_config_ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), m = strlen(suffix);
	return n >= m && gp_config_ieq(s + n - m, suffix);
}

int gp_config_parse(struct gp_config *cfg, gp_getenv_fn get)
{
	struct gp_config_ctx c = {.cfg = cfg};
	gp_config_defaults(cfg);

	const char *conf = get("GPUPOOL_CONF");
	snprintf(c.var, sizeof c.var, "GPUPOOL_CONF");
	if (conf)
		gp_config_parse_conf(&c, conf);
	cfg->strict = c.strict;
	gp_config_check_geometry(&c);

	gp_config_parse_var(&c, get, "GPUPOOL_DISABLE");
	gp_config_parse_var(&c, get, "GPUPOOL_LOG");
	gp_config_parse_var(&c, get, "GPUPOOL_REPORT");
	gp_config_parse_var(&c, get, "GPUPOOL_GROUP");
	bool limit_given = c.seen & (uint64_t)1 << gp_config_knob_index(gp_config_find("limit"));
	gp_config_parse_sched(&c, get, limit_given);
	if (!limit_given) /* an explicit limit wins over every scheduler's variable, this one too */
		gp_config_sched_beyond(&c, get);
	gp_config_check_group(cfg);
	if (!c.format_set && gp_config_ends_with(cfg->report, ".json"))
		cfg->report_format = GP_REPORT_JSON;

	return cfg->strict && cfg->bad ? -EINVAL : 0;
}
