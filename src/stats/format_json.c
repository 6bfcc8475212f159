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

/* ,"key":value, or ,"key":null where the listing does not know it (known false) */
static void json_u64(struct gp_format_out *o, const char *key, uint64_t v, bool known)
{
	if (known)
		gp_format_printf(o, ",\"%s\":%llu", key, (unsigned long long)v);
	else
		gp_format_printf(o, ",\"%s\":null", key);
}

/* ,"key":"text", or null for "" (not known) */
static void json_text(struct gp_format_out *o, const char *key, const char *s, size_t max)
{
	gp_format_printf(o, ",\"%s\":", key);
	if (s[0])
		json_string(o, s, max);
	else
		gp_format_puts(o, "null");
}

/* {"version":N,"processes":[...]: the document without its closing brace; listing: the
 * reader's facts too (uid, user, source) */
static void json_processes(struct gp_format_out *o, const struct gp_format_proc *procs, size_t n, bool listing)
{
	gp_format_printf(o, "{\"version\":%u,\"processes\":[", GP_FORMAT_JSON_VERSION);
	for (size_t i = 0; i < n; i++) {
		const struct gp_format_proc *p = &procs[i];
		const struct gpupool_page *pg = p->page;
		gp_format_printf(o, "%s\n{\"pid\":%d,\"comm\":", i ? "," : "", (int)pg->pid);
		json_string(o, pg->comm, GPUPOOL_COMM_LEN);
		if (listing) {
			json_u64(o, "uid", p->uid, p->uid_known);
			json_text(o, "user", p->user ? p->user : "", 64);
			gp_format_printf(o, ",\"source\":\"%s\"", p->remote ? "channel" : "page");
		}
		gp_format_puts(o, ",\"gpupool_version\":");
		json_string(o, pg->lib_version, GPUPOOL_VERSION_LEN);
		gp_format_printf(o, ",\"stale\":%s,\"start_time_ns\":%llu", p->stale ? "true" : "false",
				 (unsigned long long)pg->start_time_ns);
		json_u64(o, "release_request", pg->release_request, !p->remote);
		json_u64(o, "release_done", pg->release_done, !p->remote);
		gp_format_printf(o, ",\"ndevices\":%u,\"devices\":[", pg->ndevices);
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
				char uuid[GP_FORMAT_UUID_LEN], name[GPUPOOL_DEVICE_NAME_LEN];
				json_text(o, "uuid", gp_format_uuid(uuid, s), sizeof uuid);
				gp_format_safe_text(name, s->device_name, sizeof name);
				json_text(o, "device_name", name, sizeof name);
				gp_format_printf(o, ",\"limit_bytes\":%llu,\"floor_bytes\":%llu,\"wait_started_ns\":%llu",
						 (unsigned long long)s->limit_bytes, (unsigned long long)s->floor_bytes,
						 (unsigned long long)s->wait_started_ns);
				/* the driver's figures: 0 while the library has not looked */
				bool looked = s->device_total_bytes != 0;
				json_u64(o, "device_total_bytes", s->device_total_bytes, looked);
				json_u64(o, "device_free_bytes", s->device_free_bytes, looked);
				json_u64(o, "device_seen_ns", s->device_seen_ns, looked);
				for (size_t k = 0; k < GP_FORMAT_NMETRICS; k++) {
					const struct gp_format_metric *m = &gp_format_metrics[k];
					json_u64(o, m->name, gp_format_field(s, m->off), gp_format_known(p, m->off));
					if (m->gauge) {
						char peak[64];
						snprintf(peak, sizeof peak, "%s_peak", m->name);
						json_u64(o, peak, gp_format_field(s, m->peak_off),
							 gp_format_known(p, m->peak_off));
					}
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
	json_processes(o, procs, n, false);
	gp_format_puts(o, "}\n");
}

void gp_format_json_listing(struct gp_format_out *o, const struct gp_format_proc *procs, size_t n,
			    const struct gp_format_skip *skips, size_t nskips)
{
	json_processes(o, procs, n, true);
	struct gp_format_gpu gpus[GP_FORMAT_MAX_GPUS];
	size_t ng = gp_format_gpus(procs, n, gpus, GP_FORMAT_MAX_GPUS, NULL);
	gp_format_puts(o, ",\"gpus\":[");
	for (size_t g = 0; g < ng; g++) {
		const struct gp_format_gpu *u = &gpus[g];
		char uuid[GP_FORMAT_UUID_LEN];
		gp_format_printf(o, "%s\n{\"uuid\":\"%s\"", g ? "," : "", gp_format_gpu_uuid(uuid, u));
		if (u->index >= 0)
			gp_format_printf(o, ",\"index\":%d", u->index);
		else
			gp_format_puts(o, ",\"index\":null");
		json_text(o, "name", u->name, sizeof u->name);
		bool looked = u->total_bytes != 0;
		json_u64(o, "total_bytes", u->total_bytes, looked);
		json_u64(o, "free_bytes", u->free_bytes, looked);
		json_u64(o, "seen_ns", u->seen_ns, looked);
		gp_format_printf(o, ",\"figures_from_other_user\":%s", u->figures_other ? "true" : "false");
		gp_format_printf(o, ",\"held_bytes\":%llu,\"reclaimable_bytes\":%llu,\"waiting_bytes\":%llu,"
				 "\"processes\":%u}",
				 (unsigned long long)u->held_bytes, (unsigned long long)u->reclaimable_bytes,
				 (unsigned long long)u->waiting_bytes, u->processes);
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
