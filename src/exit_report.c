/* The exit report (exit_report.h): the fence thread stopped, the trace closed, the report
 * printed from a copy of the page, the page unlinked. Depends on the fence thread, the
 * trace, the page and the formatter; never on CUDA or the registry. */
#include "exit_report.h"

#include <stdio.h>
#include <string.h>

#include "fence_thread.h"
#include "format.h"
#include "log.h"
#include "statpage.h"
#include "trace.h"

void gp_exit_report(const struct gp_config *cfg, struct gpupool_page *page, bool page_shared, bool tracing)
{
	/* first, even without a page: the fence thread must not start another fence */
	gp_fence_thread_stop();
	if (!page)
		return; /* a forked child that never allocated */
	if (tracing)
		gp_trace_close();
	struct gpupool_page snap;
	(void)gp_statpage_copy(page, &snap);
	const char *dest = cfg->report;
	if (strcmp(dest, "none") != 0) {
		struct gp_format_out o;
		FILE *f = NULL;
		if (!strcmp(dest, "stderr") || !strcmp(dest, "stdout")) {
			gp_format_to_fd(&o, !strcmp(dest, "stdout") ? 1 : 2);
		} else {
			f = fopen(dest, "w");
			if (!f)
				gp_log(GP_LOG_WARN, "cannot write the report to %s; writing it to stderr", dest);
			if (f)
				gp_format_to_file(&o, f);
			else
				gp_format_to_fd(&o, 2);
		}
		if (cfg->report_format == GP_REPORT_JSON) {
			struct gp_format_proc pr = {.page = &snap};
			gp_format_json(&o, &pr, 1);
		} else {
			gp_format_report(&o, &snap);
		}
		gp_format_flush(&o);
		if (f)
			fclose(f);
	}
	/* unlink only: other threads may still be inside the pool, whose counters live in the
	 * page; unmapping it here would crash them. The mapping goes with the process. */
	if (page_shared)
		gp_statpage_unlink(page);
}
