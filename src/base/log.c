/* Logging: see log.h. Depends on nothing but libc. */
#include "log.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <unistd.h>

static atomic_int log_level = GP_LOG_WARN;
static atomic_uint log_lines[GP_LOG_NKINDS];
static _Thread_local enum gp_log_kind log_kind = GP_LOG_GENERAL;

static const struct {
	unsigned max;
	const char *what; /* in "log limit reached for <what>" */
} kinds[GP_LOG_NKINDS] = {
	[GP_LOG_GENERAL] = {GP_LOG_MAX_LINES, "messages"},
	[GP_LOG_CONFIG] = {GP_LOG_MAX_CONFIG_LINES, "configuration messages"},
};

void gp_log_set_level(int level) { atomic_store(&log_level, level); }
const char *gp_log_level_name(int level)
{
	static const char *const names[] = {"error", "warning", "info", "debug"};
	return names[level < GP_LOG_ERROR ? GP_LOG_ERROR : level > GP_LOG_DEBUG ? GP_LOG_DEBUG : level];
}

enum gp_log_kind gp_log_kind_set(enum gp_log_kind kind)
{
	enum gp_log_kind old = log_kind;
	log_kind = kind < GP_LOG_NKINDS ? kind : GP_LOG_GENERAL;
	return old;
}

void gp_log(int level, const char *fmt, ...)
{
	char buf[512];
	if (level > atomic_load(&log_level))
		return;
	enum gp_log_kind k = log_kind;
	unsigned n = atomic_fetch_add(&log_lines[k], 1);
	if (n > kinds[k].max)
		return;
	int len;
	if (n == kinds[k].max) {
		len = snprintf(buf, sizeof buf, "gpupool: warning: log limit reached for %s, further ones dropped\n",
			       kinds[k].what);
	} else {
		len = snprintf(buf, sizeof buf, "gpupool: %s: ", gp_log_level_name(level));
		va_list ap;
		va_start(ap, fmt);
		int m = vsnprintf(buf + len, sizeof buf - (size_t)len - 1, fmt, ap);
		va_end(ap);
		if (m < 0)
			m = 0;
		len += m;
		if ((size_t)len > sizeof buf - 2)
			len = (int)sizeof buf - 2;
		buf[len++] = '\n';
	}
	ssize_t w = write(2, buf, (size_t)len);
	(void)w;
}
