/* The exit report of one process in text (see format.h): a short table per active device,
 * counters only. Runs at process exit: fixed buffers only, write(2) for fds, no malloc, no
 * locks. Depends on format_internal.h (the writer and the shared helpers) and libc only:
 * never on gpupool-stat's views. */
#include "format_internal.h"

/* Seconds of a nanosecond counter, for a line ("0.52 s"). */
static void seconds_text(char *buf, size_t cap, uint64_t ns)
{
	snprintf(buf, cap, "%.2f s", (double)ns / 1e9);
}

/* The report's rows for memory held outside the pools (in all, then by kind), under peak and
 * final, only where not all zero: the common report stays short. */
static void report_unpooled(struct gp_format_out *o, const struct gpupool_device_stats *s)
{
	static const struct {
		const char *label;
		size_t off, peak_off;
	} kinds[] = {
		{"  vmm", offsetof(struct gpupool_device_stats, unpooled_vmm_bytes),
		 offsetof(struct gpupool_device_stats, unpooled_vmm_bytes_peak)},
		{"  memory pools", offsetof(struct gpupool_device_stats, unpooled_mempool_bytes),
		 offsetof(struct gpupool_device_stats, unpooled_mempool_bytes_peak)},
		{"  managed", offsetof(struct gpupool_device_stats, unpooled_managed_bytes),
		 offsetof(struct gpupool_device_stats, unpooled_managed_bytes_peak)},
		{"  pitched", offsetof(struct gpupool_device_stats, unpooled_pitched_bytes),
		 offsetof(struct gpupool_device_stats, unpooled_pitched_bytes_peak)},
	};
	char a[16], b[16];
	if (s->unpooled_bytes || s->unpooled_bytes_peak) {
		gp_format_printf(o, "  %-16s %14s %14s\n", "unpooled", gp_format_bytes(a, sizeof a, s->unpooled_bytes_peak),
				 gp_format_bytes(b, sizeof b, s->unpooled_bytes));
		for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
			uint64_t cur = gp_format_field(s, kinds[k].off), pk = gp_format_field(s, kinds[k].peak_off);
			if (cur || pk)
				gp_format_printf(o, "  %-16s %14s %14s\n", kinds[k].label, gp_format_bytes(a, sizeof a, pk),
						 gp_format_bytes(b, sizeof b, cur));
		}
	}
}

/* The report's lines for the calls held outside the pools, reclaims and the decay, each
 * only where its figures are not all zero. */
static void report_sharing(struct gp_format_out *o, const struct gpupool_device_stats *s)
{
	char a[16], c[24];
	if (s->unpooled_allocs || s->unpooled_frees || s->unpooled_refusals)
		gp_format_printf(o, "  unpooled calls: %llu allocation%s, %llu free%s, %llu refused at the limit\n",
				 (unsigned long long)s->unpooled_allocs, s->unpooled_allocs == 1 ? "" : "s",
				 (unsigned long long)s->unpooled_frees, s->unpooled_frees == 1 ? "" : "s",
				 (unsigned long long)s->unpooled_refusals);
	if (s->reclaim_asks || s->reclaim_answers || s->reclaim_received_bytes || s->reclaim_wait_ns) {
		seconds_text(c, sizeof c, s->reclaim_wait_ns);
		gp_format_printf(o, "  reclaims asked %llu, answered %llu: received %s, waited %s\n",
				 (unsigned long long)s->reclaim_asks, (unsigned long long)s->reclaim_answers,
				 gp_format_bytes(a, sizeof a, s->reclaim_received_bytes), c);
	}
	if (s->reclaims_served || s->reclaims_refused || s->reclaim_given_bytes || s->framework_empties)
		gp_format_printf(o, "  reclaims served %llu, refused %llu: gave %s; framework caches emptied %llu\n",
				 (unsigned long long)s->reclaims_served, (unsigned long long)s->reclaims_refused,
				 gp_format_bytes(a, sizeof a, s->reclaim_given_bytes),
				 (unsigned long long)s->framework_empties);
	if (s->decay_releases || s->decayed_bytes)
		gp_format_printf(o, "  decay: %llu segment%s, %s given back after sitting unused\n",
				 (unsigned long long)s->decay_releases, s->decay_releases == 1 ? "" : "s",
				 gp_format_bytes(a, sizeof a, s->decayed_bytes));
	if (s->waits || s->wait_ns || s->waits_served || s->waits_timed_out) {
		seconds_text(c, sizeof c, s->wait_ns);
		gp_format_printf(o, "  waits for memory %llu: %llu served, %llu timed out, %s in all\n",
				 (unsigned long long)s->waits, (unsigned long long)s->waits_served,
				 (unsigned long long)s->waits_timed_out, c);
	}
	if (s->floor_bytes)
		gp_format_printf(o, "  floor: %s kept cached whatever others asked\n",
				 gp_format_bytes(a, sizeof a, s->floor_bytes));
}

void gp_format_report(struct gp_format_out *o, const struct gpupool_page *pg)
{
	char comm[GPUPOOL_COMM_LEN], version[GPUPOOL_VERSION_LEN + 1];
	gp_format_safe_comm(comm, pg);
	gp_format_safe_text(version, pg->lib_version, GPUPOOL_VERSION_LEN + 1);
	gp_format_printf(o, "gpupool: report for pid %d (%s)%s%s%s\n", (int)pg->pid, comm,
			 version[0] ? ", gpupool " : "", version, pg->ndevices ? "" : ": no device memory was allocated");
	for (uint32_t d = 0; d < pg->ndevices && d < GPUPOOL_MAX_DEVICES; d++) {
		const struct gpupool_device_stats *s = &pg->dev[d];
		if (!s->active)
			continue;
		char a[16], b[16], h[16], saved[24];
		gp_format_printf(o, "  device %-3d %19s %14s\n", (int)s->device, "peak", "final");
		gp_format_printf(o, "  %-16s %14s %14s\n", "reserved", gp_format_bytes(a, sizeof a, s->reserved_bytes_peak),
				 gp_format_bytes(b, sizeof b, s->reserved_bytes));
		gp_format_printf(o, "  %-16s %14s %14s\n", "allocated", gp_format_bytes(a, sizeof a, s->allocated_bytes_peak),
				 gp_format_bytes(b, sizeof b, s->allocated_bytes));
		report_unpooled(o, s);
		gp_format_printf(o, "  %-16s %14s %14s\n", "", "cudaMalloc", "cudaFree");
		gp_format_printf(o, "  %-16s %14llu %14llu\n", "real calls", (unsigned long long)s->segment_allocs,
				 (unsigned long long)s->segment_frees);
		gp_format_printf(o, "  %-16s %14llu %14llu\n", "pool requests", (unsigned long long)s->allocs,
				 (unsigned long long)s->frees);
		double hr = gp_format_hit_rate(s);
		if (hr < 0)
			snprintf(h, sizeof h, "-");
		else
			snprintf(h, sizeof h, "%.1f%%", hr);
		gp_format_calls_saved(saved, sizeof saved, s);
		gp_format_printf(o, "  driver calls saved %s, hit rate %s, largest free block %s\n", saved, h,
				 gp_format_bytes(a, sizeof a, s->largest_free_block));
		gp_format_printf(o, "  fences %llu, OOMs %llu (retried %llu), invalid frees %llu\n",
				 (unsigned long long)s->fences, (unsigned long long)s->ooms,
				 (unsigned long long)s->oom_retries, (unsigned long long)s->invalid_frees);
		/* the log says the first out of memory of a device; the others are counted here */
		if (s->ooms > 1)
			gp_format_printf(o, "  out of memory %llu times: the first logged as a warning, each one at "
					    "GPUPOOL_LOG=info\n",
					 (unsigned long long)s->ooms);
		if (s->driver_allocs || s->driver_frees || s->driver_passthrough_allocs)
			gp_format_printf(o, "  by layer: runtime %llu requests, driver API %llu (%llu passed to the driver)\n",
					 (unsigned long long)(s->allocs >= s->driver_allocs ? s->allocs - s->driver_allocs : 0),
					 (unsigned long long)s->driver_allocs,
					 (unsigned long long)s->driver_passthrough_allocs);
		report_sharing(o, s);
	}
}
