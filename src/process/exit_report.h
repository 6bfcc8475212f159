/* The exit report: what happens at the process's exit once gpupool has served an
 * allocation. Counters only: must not call CUDA (the runtime may be gone by then) and must
 * not depend on the registry, which hands it what it reads. */
#ifndef GP_EXIT_REPORT_H
#define GP_EXIT_REPORT_H

#include <stdbool.h>

#include "config.h"
#include "gpupool/stats.h"

/* Stops the fence thread, closes the trace (`tracing`), prints the report of `page` where
 * cfg->report says in cfg->report_format, and unlinks the page when it is shared (it stays
 * mapped: other threads may still be inside the pool). `page` NULL (a forked child that
 * never allocated): stops the fence thread and nothing else. Takes no lock but the fence
 * thread's. */
void gp_exit_report(const struct gp_config *cfg, struct gpupool_page *page, bool page_shared, bool tracing);

#endif
