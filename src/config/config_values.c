/* The syntax of one value as the knob table reads it: sizes, booleans, integers, percentages,
 * limits, log levels, paths; and a size written back as a user would. Pure: NUL-terminated
 * input, no messages, no allocation. Depends on log.h's level names only: never on the knob
 * table, the messages or the environment. */
#include "config_internal.h"

#include <ctype.h>
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "log.h"

/* ---- small parsers: NUL-terminated, already trimmed input; 0 or -EINVAL ---- */

bool gp_config_ieq(const char *a, const char *b)
{
	for (; *a && *b; a++, b++)
		if (tolower((unsigned char)*a) != tolower((unsigned char)*b))
			return false;
	return *a == *b;
}

int gp_config_parse_bool(const char *s, bool *out)
{
	static const char *const yes[] = {"1", "true", "yes", "on"};
	static const char *const no[] = {"0", "false", "no", "off"};
	for (size_t i = 0; i < 4; i++) {
		if (gp_config_ieq(s, yes[i])) {
			*out = true;
			return 0;
		}
		if (gp_config_ieq(s, no[i])) {
			*out = false;
			return 0;
		}
	}
	return -EINVAL;
}

int gp_config_parse_uint(const char *s, size_t max, size_t *out)
{
	size_t v = 0;
	if (!isdigit((unsigned char)*s))
		return -EINVAL;
	for (; isdigit((unsigned char)*s); s++) {
		size_t d = (size_t)(*s - '0');
		if (v > (max - d) / 10)
			return -EINVAL;
		v = v * 10 + d;
	}
	if (*s)
		return -EINVAL;
	*out = v;
	return 0;
}

int gp_config_parse_size(const char *s, size_t *out)
{
	if (!s)
		return -EINVAL;
	while (isspace((unsigned char)*s))
		s++;
	if (!isdigit((unsigned char)*s))
		return -EINVAL; /* empty, sign, leading '.', junk */
	size_t ip = 0;
	bool nonzero = false; /* a digit other than 0 was written */
	for (; isdigit((unsigned char)*s); s++) {
		size_t d = (size_t)(*s - '0');
		nonzero |= d != 0;
		if (ip > (SIZE_MAX - d) / 10)
			return -EINVAL;
		ip = ip * 10 + d;
	}
	/* Up to 6 fraction digits count; more are accepted and ignored (but a value they alone
	 * make non-zero is refused below). */
	unsigned long long num = 0, den = 1;
	if (*s == '.') {
		s++;
		if (!isdigit((unsigned char)*s))
			return -EINVAL;
		for (; isdigit((unsigned char)*s); s++) {
			nonzero |= *s != '0';
			if (den < 1000000) {
				num = num * 10 + (unsigned long long)(*s - '0');
				den *= 10;
			}
		}
	}
	unsigned shift = 0;
	switch (tolower((unsigned char)*s)) {
	case 'k': shift = 10; break;
	case 'm': shift = 20; break;
	case 'g': shift = 30; break;
	case 't': shift = 40; break;
	default: break;
	}
	if (shift) {
		s++;
		if (tolower((unsigned char)*s) == 'i') {
			s++;
			if (tolower((unsigned char)*s) != 'b')
				return -EINVAL;
		}
	}
	if (tolower((unsigned char)*s) == 'b')
		s++;
	while (isspace((unsigned char)*s))
		s++;
	if (*s)
		return -EINVAL;
	if (shift >= sizeof(size_t) * 8)
		return -EINVAL;
	if (!shift && num)
		return -EINVAL; /* a fraction of a byte */
	if (ip > (SIZE_MAX >> shift))
		return -EINVAL;
	size_t v = ip << shift;
	/* num < 10^6 and shift <= 40: the product fits in 64 bits. */
	unsigned long long frac = (num << shift) / den;
	if (frac > SIZE_MAX - v)
		return -EINVAL;
	if (nonzero && !v && !frac)
		return -EINVAL; /* not zero, but less than a byte: never taken as 0 (no limit) */
	*out = v + (size_t)frac;
	return 0;
}

/* "80%" -> 80; 1..1000 (a limit takes more than 100 as 100: gp_config_parse_limit). */
static int gp_config_parse_percent(const char *s, unsigned *out)
{
	size_t n = strlen(s), v;
	char digits[8];
	if (n < 2 || s[n - 1] != '%' || n - 1 >= sizeof digits)
		return -EINVAL;
	memcpy(digits, s, n - 1);
	digits[n - 1] = '\0';
	if (gp_config_parse_uint(digits, 1000, &v) || v < 1)
		return -EINVAL;
	*out = (unsigned)v;
	return 0;
}

int gp_config_parse_level(const char *s, int *out)
{
	for (int i = GP_LOG_ERROR; i <= GP_LOG_DEBUG; i++) {
		if (gp_config_ieq(s, gp_log_level_name(i))) {
			*out = i;
			return 0;
		}
	}
	if (gp_config_ieq(s, "warn")) {
		*out = GP_LOG_WARN;
		return 0;
	}
	return -EINVAL;
}

int gp_config_set_path(char *dst, const char *s)
{
	size_t n = strlen(s);
	if (n == 0 || n >= GP_PATH_MAX)
		return -EINVAL;
	for (size_t i = 0; i < n; i++)
		if (iscntrl((unsigned char)s[i]))
			return -EINVAL;
	memcpy(dst, s, n + 1);
	return 0;
}

int gp_config_parse_limit(const char *s, size_t max, size_t *bytes, unsigned *pct)
{
	size_t v;
	unsigned p;
	if (gp_config_ieq(s, "none")) {
		*bytes = 0;
		*pct = 0;
	} else if (strchr(s, '%')) {
		if (gp_config_parse_percent(s, &p))
			return -EINVAL;
		*bytes = 0;
		*pct = p > 100 ? 100 : p;
		if (p > 100)
			return -ERANGE; /* more than the device: the whole device, said by the caller */
	} else {
		if (gp_config_parse_size(s, &v) || v > max)
			return -EINVAL;
		*bytes = v;
		*pct = 0;
	}
	return 0;
}

const char *gp_config_fmt_size(size_t v, char buf[32])
{
	static const char suffix[] = "TGMK";
	if (v == SIZE_MAX) {
		snprintf(buf, 32, "none");
		return buf;
	}
	for (unsigned i = 0; i < 4; i++) {
		unsigned shift = 40 - 10 * i;
		if (shift < sizeof(size_t) * 8 && v && (v & (((size_t)1 << shift) - 1)) == 0) {
			snprintf(buf, 32, "%zu%c", v >> shift, suffix[i]);
			return buf;
		}
	}
	snprintf(buf, 32, "%zu", v);
	return buf;
}
