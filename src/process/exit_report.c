/* The exit report (exit_report.h): the fence thread stopped, the trace closed, the report
 * printed from a copy of the page, the page unlinked. Depends on the fence thread, the
 * trace, the page and the formatter; never on CUDA or the registry. */
#include "exit_report.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "fence_thread.h"
#include "format.h"
#include "log.h"
#include "outfile.h"
#include "statpage.h"
#include "trace.h"

/* The report of `snap` to `dest` ("stderr", "stdout" or a file path). A file is opened
 * with gp_outfile_open and created for this user only (0600): the report holds the same
 * figures as the page, which is 0600 too. What cannot be opened goes to stderr instead,
 * with one line saying why; a report that cannot be written out is lost, with one line. */
static void write_report(const struct gp_config *cfg, const char *dest, const struct gpupool_page *snap)
{
	struct gp_format_out o;
	int fd = !strcmp(dest, "stdout") ? 1 : 2;
	bool file = strcmp(dest, "stderr") != 0 && strcmp(dest, "stdout") != 0;
	if (file) {
		int rc = gp_outfile_open(dest, 0600);
		if (rc < 0) {
			gp_log(GP_LOG_WARN, "cannot write the report to %s: %s; writing it to stderr", dest,
			       gp_outfile_strerror(rc));
			file = false;
		}
		fd = rc < 0 ? 2 : rc;
	}
	gp_format_to_fd(&o, fd);
	if (cfg->report_format == GP_REPORT_JSON) {
		struct gp_format_proc pr = {.page = snap};
		gp_format_json(&o, &pr, 1);
	} else {
		gp_format_report(&o, snap);
		/* the knobs in effect, as jemalloc's stats print its options: what a reader of the
		 * figures needs to know to reproduce them */
		char knobs[1024];
		size_t n = gp_config_describe(cfg, knobs, sizeof knobs);
		gp_format_printf(&o, "  knobs: %s%s\n", n ? knobs : "all at their defaults (no limit)",
				 n >= sizeof knobs ? "..." : "");
	}
	errno = 0;
	int rc = gp_format_flush(&o);
	int err = errno; /* the failed write's, most likely; 0 when unknown */
	if (file && close(fd) != 0 && !rc) {
		rc = -EIO;
		err = errno;
	}
	if (rc)
		gp_log(GP_LOG_WARN, "writing the report to %s failed (%s); the report is lost", dest,
		       err ? strerror(err) : "a write error");
}

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
	if (strcmp(dest, "none") != 0)
		write_report(cfg, dest, &snap);
	/* unlink only: other threads may still be inside the pool, whose counters live in the
	 * page; unmapping it here would crash them. The mapping goes with the process. */
	if (page_shared)
		gp_statpage_unlink(page);
}
