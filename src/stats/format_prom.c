/* Prometheus text exposition 0.0.4 and OpenMetrics 1.0.0 (see format.h, docs/stats.md): a
 * family per field of the one list (format_internal.h), its name built by one rule, and the
 * GPUs summed. Fixed buffers only, no malloc, no locks. Depends on format_internal.h and libc
 * only: never on the text views or JSON. */
#include "format_internal.h"

#include <string.h>

static bool ends_with(const char *s, const char *suffix)
{
	size_t a = strlen(s), b = strlen(suffix);
	return a >= b && memcmp(s + a - b, suffix, b) == 0;
}

/* A counter whose family would have a gauge's name takes another stem: the gauge
 * requested_bytes (live) and the counter requested_bytes_total (summed) would both be the
 * family gpupool_requested_bytes, which parsers reject ("Clashing name"). */
static const struct {
	const char *field, *stem;
} prom_stems[] = {{"requested_bytes_total", "alloc_requested"}};

/* The family name of a field (docs/stats.md): gpupool_<stem>[_peak][_bytes], the stem being
 * the field's name less "_total" and "_bytes", so that the unit comes last; a counter's
 * samples add "_total" to it. */
static void prom_family_name(char *buf, size_t cap, const struct gp_format_metric *m, bool peak)
{
	char stem[64];
	snprintf(stem, sizeof stem, "%s", m->name);
	for (size_t i = 0; i < sizeof prom_stems / sizeof prom_stems[0]; i++)
		if (!m->gauge && strcmp(m->name, prom_stems[i].field) == 0)
			snprintf(stem, sizeof stem, "%s", prom_stems[i].stem);
	if (ends_with(stem, "_total"))
		stem[strlen(stem) - 6] = '\0';
	if (ends_with(stem, "_bytes"))
		stem[strlen(stem) - 6] = '\0';
	if (ends_with(stem, "_ns"))
		stem[strlen(stem) - 3] = '\0';
	snprintf(buf, cap, "gpupool_%s%s%s", stem, peak ? "_peak" : "",
		 gp_format_is_bytes(m) ? "_bytes" : gp_format_is_ns(m) ? "_seconds" : "");
}

/* A label value: backslash, double quote and newline escaped; bytes outside printable ASCII
 * (the program's comm need not be UTF-8) become '?'. */
static void prom_label_value(struct gp_format_out *o, const char *s, size_t max)
{
	for (size_t i = 0; i < max && s[i]; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c == '\\' || c == '"')
			gp_format_printf(o, "\\%c", c);
		else if (c == '\n')
			gp_format_puts(o, "\\n");
		else
			gp_format_write(o, c >= 0x20 && c < 0x7f ? &s[i] : "?", 1);
	}
}

static void prom_labels(struct gp_format_out *o, const struct gp_format_proc *p, const struct gpupool_device_stats *s)
{
	const struct gpupool_page *pg = p->page;
	gp_format_printf(o, "{pid=\"%d\",comm=\"", (int)pg->pid);
	prom_label_value(o, pg->comm, GPUPOOL_COMM_LEN - 1);
	if (p->user) { /* the process's user, where the reader knows the name */
		gp_format_puts(o, "\",user=\"");
		prom_label_value(o, p->user, 64);
	}
	char uuid[GP_FORMAT_UUID_LEN];
	if (s && gp_format_uuid(uuid, s)[0]) /* dcgm-exporter's label name: joins on(UUID) */
		gp_format_printf(o, "\",device=\"%d\",UUID=\"%s\"}", (int)s->device, uuid);
	else if (s)
		gp_format_printf(o, "\",device=\"%d\"}", (int)s->device);
	else
		gp_format_puts(o, "\"}");
}

static bool prom_slot_ok(const struct gp_format_proc *p, uint32_t d)
{
	return !p->stale && !(p->inconsistent & (1u << d)) && p->page->dev[d].active;
}

/* The metadata of one family. The text format 0.0.4 names a counter's family by its sample
 * name (with _total) and has no UNIT line; OpenMetrics names the family without _total and
 * gives the unit (the family name then ends in it). */
static void prom_meta(struct gp_format_out *o, bool om, const char *family, const char *type, const char *unit,
		      const char *help_prefix, const char *help)
{
	const char *total = !om && strcmp(type, "counter") == 0 ? "_total" : "";
	gp_format_printf(o, "# HELP %s%s %s%s\n# TYPE %s%s %s\n", family, total, help_prefix, help, family, total,
			 type);
	if (om && unit)
		gp_format_printf(o, "# UNIT %s %s\n", family, unit);
}

/* One family with one sample per live, consistent, active device slot: the field at off
 * (but for a zero when skip_zero). */
static void prom_device_family(struct gp_format_out *o, bool om, const struct gp_format_proc *procs, size_t n,
			       const char *family, const char *type, const char *unit, const char *help_prefix,
			       const char *help, size_t off, bool skip_zero)
{
	prom_meta(o, om, family, type, unit, help_prefix, help);
	const char *total = strcmp(type, "counter") == 0 ? "_total" : "";
	for (size_t i = 0; i < n; i++) {
		const struct gpupool_page *pg = procs[i].page;
		for (uint32_t d = 0; d < pg->ndevices && d < GPUPOOL_MAX_DEVICES; d++) {
			if (!prom_slot_ok(&procs[i], d) || (skip_zero && !gp_format_field(&pg->dev[d], off)) ||
			    !gp_format_known(&procs[i], off))
				continue;
			gp_format_printf(o, "%s%s", family, total);
			prom_labels(o, &procs[i], &pg->dev[d]);
			uint64_t v = gp_format_field(&pg->dev[d], off);
			if (unit && strcmp(unit, "seconds") == 0) /* a field in nanoseconds */
				gp_format_printf(o, " %llu.%09llu\n", (unsigned long long)(v / 1000000000u),
						 (unsigned long long)(v % 1000000000u));
			else
				gp_format_printf(o, " %llu\n", (unsigned long long)v);
		}
	}
}

/* The GPUs (gp_format_gpus), one family per figure, labelled UUID alone: sums over the
 * processes, which a per-process series cannot give without a query. The driver's figures
 * only for GPUs that have them (a 0 would read as a GPU without memory). */
static void prom_gpus(struct gp_format_out *o, bool om, const struct gp_format_proc *procs, size_t n)
{
	static const struct {
		const char *family, *unit, *help;
		bool driver;
	} fams[] = {
		{"gpupool_gpu_total_bytes", "bytes", "the GPU's memory, as the driver reported it (cudaMemGetInfo)", true},
		{"gpupool_gpu_free_bytes", "bytes", "the GPU's free memory, as the driver reported it at its last look",
		 true},
		{"gpupool_gpu_seen_timestamp_seconds", "seconds", "when the driver's figures were taken (unix time)", true},
		{"gpupool_gpu_held_bytes", "bytes", "bytes held by gpupool processes: reserved plus unpooled, summed",
		 false},
		{"gpupool_gpu_reclaimable_bytes", "bytes", "bytes gpupool processes can give back (releasable, summed)",
		 false},
		{"gpupool_gpu_waiting_bytes", "bytes", "bytes allocations of gpupool processes wait for, summed", false},
		{"gpupool_gpu_processes", NULL, "gpupool processes using the GPU", false},
	};
	struct gp_format_gpu gpus[GP_FORMAT_MAX_GPUS];
	size_t k = gp_format_gpus(procs, n, gpus, GP_FORMAT_MAX_GPUS, NULL);
	for (size_t f = 0; f < sizeof fams / sizeof fams[0]; f++) {
		prom_meta(o, om, fams[f].family, "gauge", fams[f].unit, "", fams[f].help);
		for (size_t g = 0; g < k; g++) {
			const struct gp_format_gpu *u = &gpus[g];
			if (fams[f].driver && (!u->total_bytes || u->figures_other))
				continue;
			char uuid[GP_FORMAT_UUID_LEN];
			gp_format_printf(o, "%s{UUID=\"%s\"} ", fams[f].family, gp_format_gpu_uuid(uuid, u));
			switch (f) {
			case 0: gp_format_printf(o, "%llu\n", (unsigned long long)u->total_bytes); break;
			case 1: gp_format_printf(o, "%llu\n", (unsigned long long)u->free_bytes); break;
			case 2:
				gp_format_printf(o, "%llu.%03llu\n", (unsigned long long)(u->seen_ns / 1000000000ull),
						 (unsigned long long)(u->seen_ns / 1000000ull % 1000ull));
				break;
			case 3: gp_format_printf(o, "%llu\n", (unsigned long long)u->held_bytes); break;
			case 4: gp_format_printf(o, "%llu\n", (unsigned long long)u->reclaimable_bytes); break;
			case 5: gp_format_printf(o, "%llu\n", (unsigned long long)u->waiting_bytes); break;
			default: gp_format_printf(o, "%u\n", u->processes); break;
			}
		}
	}
	/* what names a GPU for a dashboard: its index and name (an info family) */
	prom_meta(o, om, om ? "gpupool_gpu" : "gpupool_gpu_info", om ? "info" : "gauge", NULL, "",
		  "the GPU's index (as nvidia-smi numbers it, where known) and name");
	for (size_t g = 0; g < k; g++) {
		char uuid[GP_FORMAT_UUID_LEN];
		gp_format_printf(o, "gpupool_gpu_info{UUID=\"%s\"", gp_format_gpu_uuid(uuid, &gpus[g]));
		if (gpus[g].index >= 0)
			gp_format_printf(o, ",index=\"%d\"", gpus[g].index);
		if (gpus[g].name[0]) {
			gp_format_puts(o, ",name=\"");
			prom_label_value(o, gpus[g].name, sizeof gpus[g].name);
			gp_format_puts(o, "\"");
		}
		gp_format_puts(o, "} 1\n");
	}
}

void gp_format_prometheus(struct gp_format_out *o, const struct gp_format_proc *procs, size_t n,
			  const struct gp_format_skip *skips, size_t nskips, const char *version, bool om)
{
	if (version) {
		/* an info family: gpupool_build in OpenMetrics, a gauge gpupool_build_info in 0.0.4 */
		prom_meta(o, om, om ? "gpupool_build" : "gpupool_build_info", om ? "info" : "gauge", NULL, "",
			  "the version of gpupool-stat that exported these figures");
		gp_format_puts(o, "gpupool_build_info{version=\"");
		prom_label_value(o, version, 64);
		gp_format_puts(o, "\"} 1\n");
	}
	char name[96];
	for (size_t k = 0; k < GP_FORMAT_NMETRICS; k++) {
		const struct gp_format_metric *m = &gp_format_metrics[k];
		const char *unit = gp_format_is_bytes(m) ? "bytes" : gp_format_is_ns(m) ? "seconds" : NULL;
		prom_family_name(name, sizeof name, m, false);
		prom_device_family(o, om, procs, n, name, m->gauge ? "gauge" : "counter", unit, "", m->help, m->off,
				   false);
		if (m->gauge) {
			prom_family_name(name, sizeof name, m, true);
			prom_device_family(o, om, procs, n, name, "gauge", unit, "peak of: ", m->help, m->peak_off,
					   false);
		}
	}
	/* no sample where there is no limit: a 0 would read as a limit of nothing */
	prom_device_family(o, om, procs, n, "gpupool_limit_bytes", "gauge", "bytes", "",
			   "configured limit on reserved bytes (no sample: no limit)",
			   offsetof(struct gpupool_device_stats, limit_bytes), true);
	prom_device_family(o, om, procs, n, "gpupool_floor_bytes", "gauge", "bytes", "",
			   "memory the process keeps cached whatever others ask (no sample: none)",
			   offsetof(struct gpupool_device_stats, floor_bytes), true);
	prom_device_family(o, om, procs, n, "gpupool_wait_started_timestamp_seconds", "gauge", "seconds", "",
			   "when the oldest wait for memory in progress began (unix time; no sample: none)",
			   offsetof(struct gpupool_device_stats, wait_started_ns), true);
	prom_meta(o, om, "gpupool_process_start_time_seconds", "gauge", "seconds", "",
		  "when the process started using gpupool (unix time)");
	for (size_t i = 0; i < n; i++) {
		if (procs[i].stale)
			continue;
		const struct gpupool_page *pg = procs[i].page;
		gp_format_puts(o, "gpupool_process_start_time_seconds");
		prom_labels(o, &procs[i], NULL);
		gp_format_printf(o, " %llu.%03llu\n", (unsigned long long)(pg->start_time_ns / 1000000000ull),
				 (unsigned long long)(pg->start_time_ns / 1000000ull % 1000ull));
	}
	prom_gpus(o, om, procs, n);
	prom_meta(o, om, "gpupool_skipped_pages", "gauge", NULL, "",
		  "statistics pages the reader left out, by reason");
	for (size_t k = 0; k < nskips; k++)
		gp_format_printf(o, "gpupool_skipped_pages{reason=\"%s\"} %lu\n", skips[k].reason, skips[k].count);
	if (om)
		gp_format_puts(o, "# EOF\n");
}
