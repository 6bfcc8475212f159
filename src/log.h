/* One log function for the whole library: "gpupool: <level>: message\n" formatted into a
 * stack buffer and written to stderr with write(2), so it is safe at exit, after fork and
 * with locks held. Capped in count so a broken program cannot flood its own stderr.
 * Base layer: depends on libc only. */
#ifndef GP_LOG_H
#define GP_LOG_H

enum gp_log_level { GP_LOG_ERROR = 0, GP_LOG_WARN = 1, GP_LOG_INFO = 2, GP_LOG_DEBUG = 3 };

/* Messages above this level are dropped. Default GP_LOG_WARN. */
void gp_log_set_level(int level);
/* "error", "warning", "info", "debug" (levels out of range are clamped). */
const char *gp_log_level_name(int level);
void gp_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define GP_LOG_MAX_LINES 200

#endif
