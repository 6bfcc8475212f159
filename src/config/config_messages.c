/* What a parse says: the warning for a bad value (one line: the variable, the value, what was
 * expected, what happens instead, or strict mode's), the list of bad variables, and the info
 * notes kept in the config for the caller to log. Depends on log.h and the knob's struct
 * (config_internal.h) only: never on the knob table's rows or the environment. */
#include "config_internal.h"

#include <stdarg.h>
#include <string.h>

#include "log.h"

const char *gp_config_quote(const char *s, char buf[GP_CONFIG_QUOTE_MAX + 4])
{
	size_t n = strnlen(s, GP_CONFIG_QUOTE_MAX + 1);
	if (n <= GP_CONFIG_QUOTE_MAX)
		return s;
	memcpy(buf, s, GP_CONFIG_QUOTE_MAX);
	memcpy(buf + GP_CONFIG_QUOTE_MAX, "...", 4);
	return buf;
}

/* Adds `var` to cfg->bad_vars once; ", ..." ends a list that is full. */
static void gp_config_add_bad_var(struct gp_config *cfg, const char *var)
{
	char *b = cfg->bad_vars;
	size_t n = strnlen(b, sizeof cfg->bad_vars), m = strlen(var);
	for (const char *p = b; (p = strstr(p, var)) != NULL; p += m)
		if ((p == b || p[-1] == ' ') && (p[m] == ',' || !p[m]))
			return;
	if (n >= 5 && strcmp(b + n - 5, ", ...") == 0)
		return;
	if (n + (n ? 2 : 0) + m + 5 < sizeof cfg->bad_vars)
		snprintf(b + n, sizeof cfg->bad_vars - n, "%s%s", n ? ", " : "", var);
	else
		snprintf(b + n, sizeof cfg->bad_vars - n, ", ...");
}

static void gp_config_vbad(struct gp_config_ctx *c, const char *instead, const char *fmt, va_list ap)
	__attribute__((format(printf, 3, 0)));
static void gp_config_vbad(struct gp_config_ctx *c, const char *instead, const char *fmt, va_list ap)
{
	char msg[448];
	vsnprintf(msg, sizeof msg, fmt, ap);
	c->cfg->bad = true;
	gp_config_add_bad_var(c->cfg, c->var);
	if (c->strict)
		gp_log(GP_LOG_WARN, "%s; strict mode: the pool is disabled and every hooked CUDA allocation call will fail",
		       msg);
	else
		gp_log(GP_LOG_WARN, "%s; %s", msg, instead);
}

void gp_config_bad(struct gp_config_ctx *c, const char *instead, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	gp_config_vbad(c, instead, fmt, ap);
	va_end(ap);
}

/* What a cap that cannot be applied leads to, in the line that says so. */
#define GP_CAP_REFUSED                                                                                      \
	"a cap that cannot be applied as asked is not dropped: every allocation is refused until it is fixed " \
	"(docs/security.md)"

void gp_config_bad_cap(struct gp_config_ctx *c, const char *fmt, ...)
{
	c->cfg->cap_refused = true;
	va_list ap;
	va_start(ap, fmt);
	gp_config_vbad(c, GP_CAP_REFUSED, fmt, ap);
	va_end(ap);
}

void gp_config_bad_value(struct gp_config_ctx *c, const char *var, const struct gp_config_knob *k, const char *val)
{
	char q[GP_CONFIG_QUOTE_MAX + 4], instead[96];
	if (gp_config_is_cap(k)) {
		if (strcmp(var, k->name) == 0)
			gp_config_bad_cap(c, "%s=%s: expected %s", var, gp_config_quote(val, q), k->range);
		else
			gp_config_bad_cap(c, "%s: %s:%s: expected %s", var, k->name, gp_config_quote(val, q), k->range);
		return;
	}
	snprintf(instead, sizeof instead, "using the default (%s)", k->def);
	if (strcmp(var, k->name) == 0) /* a standalone variable */
		gp_config_bad(c, instead, "%s=%s: expected %s", var, gp_config_quote(val, q), k->range);
	else
		gp_config_bad(c, instead, "%s: %s:%s: expected %s", var, k->name, gp_config_quote(val, q), k->range);
}

void gp_config_note(struct gp_config *cfg, const char *fmt, ...)
{
	size_t n = strnlen(cfg->notes, sizeof cfg->notes);
	if (n + 2 >= sizeof cfg->notes)
		return;
	if (n)
		cfg->notes[n++] = '\n';
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(cfg->notes + n, sizeof cfg->notes - n, fmt, ap);
	va_end(ap);
}

void gp_config_log_notes(const struct gp_config *cfg)
{
	const char *p = cfg->notes, *end = p + strnlen(cfg->notes, sizeof cfg->notes);
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		int len = (int)((nl ? nl : end) - p);
		gp_log(GP_LOG_INFO, "%.*s", len, p);
		p += len + 1;
	}
}
