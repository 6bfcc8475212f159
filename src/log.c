/* Logging: see log.h. Depends on nothing but libc. */
#include "log.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <unistd.h>

static atomic_int log_level = GP_LOG_WARN;
static atomic_uint log_lines;

void gp_log_set_level(int level) { atomic_store(&log_level, level); }
const char *gp_log_level_name(int level)
{
	static const char *const names[] = {"error", "warning", "info", "debug"};
	return names[level < GP_LOG_ERROR ? GP_LOG_ERROR : level > GP_LOG_DEBUG ? GP_LOG_DEBUG : level];
}

void gp_log(int level, const char *fmt, ...)
{
	char buf[512];
	if (level > atomic_load(&log_level))
		return;
	unsigned n = atomic_fetch_add(&log_lines, 1);
	if (n > GP_LOG_MAX_LINES)
		return;
	int len;
	if (n == GP_LOG_MAX_LINES) {
		len = snprintf(buf, sizeof buf, "gpupool: warning: log limit reached, further messages dropped\n");
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
