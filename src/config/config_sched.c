/* A scheduler's variables: HAMi-core's CUDA_DEVICE_MEMORY_LIMIT (every device) and
 * CUDA_DEVICE_MEMORY_LIMIT_<n> (device n), read as HAMi-core reads them into gpupool's limits,
 * with a note of what they set. Depends on the knob table's limit row, the messages and
 * config_values.c: never on GPUPOOL_CONF's items. */
#include "config_internal.h"

#include <ctype.h>
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "log.h"

/* CUDA_DEVICE_MEMORY_LIMIT_<n> is looked for up to this n (exclusive): those from
 * GP_CONFIG_MAX_DEVICES on are for devices gpupool has no limit for, and said so. */
#define SCHED_PROBE_MAX 256

/* C's strtoul(s, NULL, 0) on a 64-bit unsigned long, which HAMi-core reads the number with:
 * blanks and a sign skipped, 0x hexadecimal, a leading 0 octal, up to the first character
 * that is not a digit of the base; past 2^64 - 1 it is 2^64 - 1 (ERANGE); a minus sign
 * negates modulo 2^64. *digits: whether any digit was read. */
static uint64_t gp_config_strtoul0(const char *s, bool *digits)
{
	while (isspace((unsigned char)*s))
		s++;
	bool neg = *s == '-';
	if (*s == '+' || *s == '-')
		s++;
	unsigned base = 10;
	if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X') && isxdigit((unsigned char)s[2])) {
		base = 16;
		s += 2;
	} else if (s[0] == '0') {
		base = 8;
	}
	uint64_t v = 0;
	bool over = false;
	*digits = false;
	for (;; s++) {
		int c = tolower((unsigned char)*s);
		unsigned d = isdigit(c) ? (unsigned)(c - '0') : c >= 'a' && c <= 'f' ? (unsigned)(c - 'a' + 10) : 99;
		if (d >= base)
			break;
		*digits = true;
		if (v > (UINT64_MAX - d) / base)
			over = true;
		else
			v = v * base + d;
	}
	if (over)
		return UINT64_MAX;
	return neg ? (uint64_t)0 - v : v;
}

int gp_config_parse_hami_size(const char *s, size_t *out, bool *canonical)
{
	size_t n = s ? strlen(s) : 0;
	unsigned shift = 0;
	*canonical = false;
	if (!n)
		return -EINVAL;
	switch (tolower((unsigned char)s[n - 1])) {
	case 'k': shift = 10; break;
	case 'm': shift = 20; break;
	case 'g': shift = 30; break;
	default: break;
	}
	bool digits;
	uint64_t v = gp_config_strtoul0(s, &digits);
	/* HAMi-core: a product of 0 is "invalid", one that wraps is an overflow; no limit from
	 * either. Past 2^48 bytes no device holds it (a negative number is one). */
	if (!digits || !v || v > (UINT64_MAX >> shift) || v << shift > GP_CONFIG_SIZE_CAP)
		return -EINVAL;
	*out = (size_t)(v << shift);
	/* plain digits (no leading 0) and the suffix: what a scheduler writes */
	size_t i = 0, end = n - (shift ? 1 : 0);
	while (i < end && isdigit((unsigned char)s[i]))
		i++;
	*canonical = s[0] != '0' && i == end;
	return 0;
}

/* One scheduler's variable: its limit in *out, or a bad value said. True when it set *out. */
static bool gp_config_sched_value(struct gp_config_ctx *c, const char *name, const char *val, size_t *out)
{
	char q[GP_CONFIG_QUOTE_MAX + 4], t[32];
	bool canonical;
	if (gp_config_parse_hami_size(val, out, &canonical) == 0) {
		/* the limit HAMi-core applies from the same text, said where it may surprise */
		if (!canonical)
			gp_log(GP_LOG_WARN, "%s=%s: taken as HAMi-core reads it: %s%s", name, gp_config_quote(val, q),
			       gp_config_fmt_size(*out, t), *out < ((size_t)1 << 20) ? " (bytes: no allocation fits)" : "");
		return true;
	}
	snprintf(c->var, sizeof c->var, "%s", name);
	gp_config_bad_cap(c,
			  "%s=%s: expected bytes, or a number with k, m or g (e.g. 4096m, 4g), from 1 to 262144g, as "
			  "HAMi-core reads it",
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
	char name[sizeof GP_CONFIG_SCHED_VAR + 8], q[GP_CONFIG_QUOTE_MAX + 4];
	for (int d = GP_CONFIG_MAX_DEVICES; d < SCHED_PROBE_MAX; d++) {
		snprintf(name, sizeof name, "%s_%d", GP_CONFIG_SCHED_VAR, d);
		const char *v = get(name);
		if (!v || !*v)
			continue;
		snprintf(c->var, sizeof c->var, "%s", name);
		/* device d's limit, which gpupool cannot hold: not no limit for it */
		gp_config_bad_cap(c, "%s=%s: expected a device index from 0 to %d after %s_", name, gp_config_quote(v, q),
				  GP_CONFIG_MAX_DEVICES - 1, GP_CONFIG_SCHED_VAR);
	}
}
