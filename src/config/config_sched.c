/* A scheduler's variables: HAMi-core's CUDA_DEVICE_MEMORY_LIMIT (every device) and
 * CUDA_DEVICE_MEMORY_LIMIT_<n> (device n), read as HAMi-core reads them into gpupool's limits,
 * with a note of what they set. Depends on the knob table's limit row, the messages and
 * config_values.c: never on GPUPOOL_CONF's items. */
#include "config_internal.h"

#include <ctype.h>
#include <errno.h>
#include <string.h>

/* CUDA_DEVICE_MEMORY_LIMIT_<n> is looked for up to this n (exclusive): those from
 * GP_CONFIG_MAX_DEVICES on are for devices gpupool has no limit for, and said so. */
#define SCHED_PROBE_MAX 256

int gp_config_parse_hami_size(const char *s, size_t *out)
{
	size_t n = s ? strlen(s) : 0, v = 0;
	unsigned shift = 0;
	if (!n)
		return -EINVAL;
	switch (tolower((unsigned char)s[n - 1])) {
	case 'k': shift = 10; n--; break;
	case 'm': shift = 20; n--; break;
	case 'g': shift = 30; n--; break;
	default: break;
	}
	/* HAMi-core reads the number with strtoul(s, .., 0): a leading 0 would be octal there */
	if (!n || (s[0] == '0' && n > 1))
		return -EINVAL;
	for (size_t i = 0; i < n; i++) {
		if (!isdigit((unsigned char)s[i]))
			return -EINVAL;
		v = v * 10 + (size_t)(s[i] - '0');
		if (v > GP_CONFIG_SIZE_CAP)
			return -EINVAL;
	}
	if (!v || v > GP_CONFIG_SIZE_CAP >> shift)
		return -EINVAL; /* 0: HAMi-core's "no limit", said as a bad value there too */
	*out = v << shift;
	return 0;
}

/* One scheduler's variable: its limit in *out, or a bad value said. True when it set *out. */
static bool gp_config_sched_value(struct gp_config_ctx *c, const char *name, const char *val, size_t *out)
{
	char q[GP_CONFIG_QUOTE_MAX + 4];
	if (gp_config_parse_hami_size(val, out) == 0)
		return true;
	snprintf(c->var, sizeof c->var, "%s", name);
	gp_config_bad(c, "no limit from it",
		      "%s=%s: expected bytes, or a number with k, m or g (e.g. 4096m, 4g), from 1 to 262144g, as HAMi-core "
		      "reads it",
		      name, gp_config_quote(val, q));
	return false;
}

void gp_config_parse_sched(struct gp_config_ctx *c, gp_getenv_fn get, bool limit_given)
{
	struct gp_config *cfg = c->cfg;
	const char *vals[GP_CONFIG_MAX_DEVICES + 1];
	char names[GP_CONFIG_MAX_DEVICES + 1][sizeof GP_CONFIG_SCHED_VAR + 4], t[32];
	int first = -1;
	for (int i = 0; i <= GP_CONFIG_MAX_DEVICES; i++) {
		/* index 0 is the variable for every device, i the one for device i - 1 */
		if (i)
			snprintf(names[i], sizeof names[i], "%s_%d", GP_CONFIG_SCHED_VAR, i - 1);
		else
			snprintf(names[i], sizeof names[i], "%s", GP_CONFIG_SCHED_VAR);
		vals[i] = get(names[i]);
		if (vals[i] && !*vals[i])
			vals[i] = NULL; /* empty: unset, as HAMi-core takes it */
		if (vals[i] && first < 0)
			first = i;
	}
	if (first < 0)
		return;
	if (limit_given) {
		char q[GP_CONFIG_QUOTE_MAX + 4], lim[64];
		gp_config_knob_text(gp_config_find("limit"), cfg, lim, sizeof lim);
		gp_config_note(cfg, "%s=%s (a scheduler's limit): limit:%s in GPUPOOL_CONF wins", names[first],
			       gp_config_quote(vals[first], q), lim);
		return;
	}
	size_t v;
	if (vals[0] && gp_config_sched_value(c, names[0], vals[0], &v)) {
		cfg->limit_bytes = v;
		cfg->limit_percent = 0;
		cfg->limit_sched = true;
		gp_config_note(cfg, "%s=%s: every device's limit is %s (as limit:%s)", names[0], vals[0],
			       gp_config_fmt_size(v, t), t);
	}
	for (int d = 0; d < GP_CONFIG_MAX_DEVICES; d++) {
		if (vals[d + 1] && gp_config_sched_value(c, names[d + 1], vals[d + 1], &v)) {
			cfg->limit_device[d] = v;
			gp_config_note(cfg, "%s=%s: device %d's limit is %s", names[d + 1], vals[d + 1], d,
				       gp_config_fmt_size(v, t));
		}
	}
}

void gp_config_sched_beyond(struct gp_config_ctx *c, gp_getenv_fn get)
{
	char name[sizeof GP_CONFIG_SCHED_VAR + 8], q[GP_CONFIG_QUOTE_MAX + 4], instead[48];
	for (int d = GP_CONFIG_MAX_DEVICES; d < SCHED_PROBE_MAX; d++) {
		snprintf(name, sizeof name, "%s_%d", GP_CONFIG_SCHED_VAR, d);
		const char *v = get(name);
		if (!v || !*v)
			continue;
		snprintf(c->var, sizeof c->var, "%s", name);
		snprintf(instead, sizeof instead, "device %d gets no limit from it", d);
		gp_config_bad(c, instead, "%s=%s: expected a device index from 0 to %d after %s_", name,
			      gp_config_quote(v, q), GP_CONFIG_MAX_DEVICES - 1, GP_CONFIG_SCHED_VAR);
	}
}
