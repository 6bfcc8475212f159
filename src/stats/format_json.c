/* The JSON documents (see format.h, docs/json.md): the exit report's and a reader's listing.
 * Every device field comes from the one list of fields (format_internal.h). Runs at process
 * exit: fixed buffers only, no malloc, no locks. Depends on format_internal.h and libc only:
 * never on the text views. */
#include "format_internal.h"

static void json_string(struct gp_format_out *o, const char *s, size_t max)
{
	gp_format_puts(o, "\"");
	for (size_t i = 0; i < max && s[i]; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c == '"' || c == '\\')
			gp_format_printf(o, "\\%c", c);
		else if (c < 0x20)
			gp_format_printf(o, "\\u%04x", c);
		else if (c >= 0x7f) /* not necessarily UTF-8: keep the document valid */
			gp_format_puts(o, "?");
		else
			gp_format_write(o, (const char *)&s[i], 1);
	}
	gp_format_puts(o, "\"");
}

/* {"version":N,"processes":[...]: the document without its closing brace */
static void json_processes(struct gp_format_out *o, const struct gp_format_proc *procs, size_t n)
{
	gp_format_printf(o, "{\"version\":%u,\"processes\":[", GP_FORMAT_JSON_VERSION);
	for (size_t i = 0; i < n; i++) {
		const struct gpupool_page *pg = procs[i].page;
		gp_format_printf(o, "%s\n{\"pid\":%d,\"comm\":", i ? "," : "", (int)pg->pid);
		json_string(o, pg->comm, GPUPOOL_COMM_LEN);
		gp_format_puts(o, ",\"gpupool_version\":");
		json_string(o, pg->lib_version, GPUPOOL_VERSION_LEN);
		gp_format_printf(o, ",\"stale\":%s,\"start_time_ns\":%llu,\"release_request\":%llu,"
				 "\"release_done\":%llu,\"ndevices\":%u,\"devices\":[",
				 procs[i].stale ? "true" : "false", (unsigned long long)pg->start_time_ns,
				 (unsigned long long)pg->release_request, (unsigned long long)pg->release_done,
				 pg->ndevices);
		bool first = true;
		for (uint32_t d = 0; d < pg->ndevices && d < GPUPOOL_MAX_DEVICES; d++) {
			const struct gpupool_device_stats *s = &pg->dev[d];
			bool bad = procs[i].inconsistent & (1u << d);
			if (!bad && !s->active)
				continue;
			gp_format_printf(o, "%s{\"device\":%d,\"consistent\":%s", first ? "" : ",",
					 (int)s->device, bad ? "false" : "true");
			first = false;
			if (!bad) {
				char uuid[GP_FORMAT_UUID_LEN];
				gp_format_printf(o, ",\"uuid\":\"%s\",\"limit_bytes\":%llu", gp_format_uuid(uuid, s),
						 (unsigned long long)s->limit_bytes);
				gp_format_printf(o, ",\"device_total_bytes\":%llu,\"device_free_bytes\":%llu,"
						 "\"device_seen_ns\":%llu",
						 (unsigned long long)s->device_total_bytes,
						 (unsigned long long)s->device_free_bytes,
						 (unsigned long long)s->device_seen_ns);
				for (size_t k = 0; k < GP_FORMAT_NMETRICS; k++) {
					const struct gp_format_metric *m = &gp_format_metrics[k];
					gp_format_printf(o, ",\"%s\":%llu", m->name,
							 (unsigned long long)gp_format_field(s, m->off));
					if (m->gauge)
						gp_format_printf(o, ",\"%s_peak\":%llu", m->name,
								 (unsigned long long)gp_format_field(s, m->peak_off));
				}
			}
			gp_format_puts(o, "}");
		}
		gp_format_puts(o, "]}");
	}
	gp_format_puts(o, "\n]");
}

void gp_format_json(struct gp_format_out *o, const struct gp_format_proc *procs, size_t n)
{
	json_processes(o, procs, n);
	gp_format_puts(o, "}\n");
}

void gp_format_json_listing(struct gp_format_out *o, const struct gp_format_proc *procs, size_t n,
			    const struct gp_format_skip *skips, size_t nskips)
{
	json_processes(o, procs, n);
	struct gp_format_gpu gpus[GP_FORMAT_MAX_GPUS];
	size_t ng = gp_format_gpus(procs, n, gpus, GP_FORMAT_MAX_GPUS, NULL);
	gp_format_puts(o, ",\"gpus\":[");
	for (size_t g = 0; g < ng; g++) {
		char uuid[GP_FORMAT_UUID_LEN];
		gp_format_printf(o, "%s\n{\"uuid\":\"%s\",\"total_bytes\":%llu,\"free_bytes\":%llu,\"seen_ns\":%llu,"
				 "\"held_bytes\":%llu,\"reclaimable_bytes\":%llu,\"processes\":%u}",
				 g ? "," : "", gp_format_gpu_uuid(uuid, &gpus[g]), (unsigned long long)gpus[g].total_bytes,
				 (unsigned long long)gpus[g].free_bytes, (unsigned long long)gpus[g].seen_ns,
				 (unsigned long long)gpus[g].held_bytes, (unsigned long long)gpus[g].reclaimable_bytes,
				 gpus[g].processes);
	}
	gp_format_puts(o, ng ? "\n]" : "]");
	unsigned long long total = 0;
	for (size_t k = 0; k < nskips; k++)
		total += skips[k].count;
	gp_format_printf(o, ",\"skipped_pages\":%llu,\"skipped\":{", total);
	for (size_t k = 0; k < nskips; k++) {
		gp_format_puts(o, k ? "," : "");
		json_string(o, skips[k].reason, 64);
		gp_format_printf(o, ":%lu", skips[k].count);
	}
	gp_format_puts(o, "}}\n");
}
