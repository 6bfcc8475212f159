/* One log function for the whole library: "gpupool: <level>: message\n" formatted into a
 * stack buffer and written to stderr with write(2), so it is safe at exit, after fork and
 * with locks held. Capped in count, per kind of message, so a broken program cannot flood
 * its own stderr and one kind cannot silence another. Base layer: depends on libc only. */
#ifndef GP_LOG_H
#define GP_LOG_H

enum gp_log_level { GP_LOG_ERROR = 0, GP_LOG_WARN = 1, GP_LOG_INFO = 2, GP_LOG_DEBUG = 3 };

/* Kinds of message, each with its own budget of lines: a GPUPOOL_CONF with hundreds of bad
 * items must not use up the lines of a later out-of-memory warning. */
enum gp_log_kind {
	GP_LOG_GENERAL, /* everything else: GP_LOG_MAX_LINES */
	GP_LOG_CONFIG,  /* the environment's knobs: GP_LOG_MAX_CONFIG_LINES */
	GP_LOG_NKINDS
};

/* Messages above this level are dropped. Default GP_LOG_WARN. */
void gp_log_set_level(int level);
/* "error", "warning", "info", "debug" (levels out of range are clamped). */
const char *gp_log_level_name(int level);
void gp_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The kind of the calling thread's messages from now on (GP_LOG_GENERAL until set): returns
 * the kind it had, for the caller to set back. Thread-local; no lock. */
enum gp_log_kind gp_log_kind_set(enum gp_log_kind kind);

#define GP_LOG_MAX_LINES 200
#define GP_LOG_MAX_CONFIG_LINES 50

#endif
