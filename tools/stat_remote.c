/* gpupool-stat's side of the status exchange (stat_remote.h): one asker socket, one query to
 * each process, the answers matched by the query's id and the kernel's name of the sender.
 * Depends on share.h and libc only; no page is opened. */
#include "stat_remote.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "proc.h"

/* The processes asked, by pid: where an answer goes. */
struct asked {
	int pid, at;
};

static int by_pid(const void *a, const void *b)
{
	const struct asked *x = a, *y = b;
	return (x->pid > y->pid) - (x->pid < y->pid);
}

int gp_stat_remote_ask(struct gp_stat_remote *r, int n, uint64_t deadline_ns)
{
	struct asked *asked = malloc(sizeof *asked * (size_t)(n > 0 ? n : 1));
	if (!asked)
		return -ENOMEM;
	int fd = gp_share_asker();
	if (fd < 0) {
		free(asked);
		return fd;
	}
	/* one id per listing: a late answer to another listing's query is not taken */
	uint64_t id = gp_clock_ns(CLOCK_MONOTONIC) ^ ((uint64_t)getpid() << 40);
	struct gp_share_msg q = gp_share_msg_make(GP_SHARE_STATUS, id, NULL);
	int k = 0, answered = 0;
	for (int i = 0; i < n; i++) {
		r[i].answered = false;
		r[i].count = 0;
		memset(r[i].dev, 0, sizeof r[i].dev);
		/* refused (nobody listens: gone, another library) or a full queue: not waited for */
		if (gp_share_send(fd, r[i].pid, &q) == 0)
			asked[k++] = (struct asked){r[i].pid, i};
	}
	qsort(asked, (size_t)k, sizeof *asked, by_pid);
	for (int waiting = k; waiting > 0;) {
		struct gp_share_msg m;
		struct gp_share_peer from;
		int rc = gp_share_wait(fd, &m, &from, deadline_ns);
		if (rc == -EBADMSG)
			continue;
		if (rc != 0)
			break; /* the deadline, or the socket failed */
		if (m.kind != GP_SHARE_STATUS_ANSWER || m.id != id)
			continue;
		struct asked key = {from.pid, 0};
		const struct asked *f = bsearch(&key, asked, (size_t)k, sizeof *asked, by_pid);
		if (!f)
			continue; /* not from a process asked: whoever sent it, not its answer */
		struct gp_stat_remote *t = &r[f->at];
		const struct gp_share_status *s = &m.status;
		if (t->answered || s->count > GPUPOOL_MAX_DEVICES || (s->count && s->index >= s->count))
			continue;
		t->uid = from.uid;
		unsigned have = 0;
		if (s->count) {
			t->dev[s->index] = *s;
			memcpy(t->uuid[s->index], m.uuid, GPUPOOL_UUID_LEN);
			for (unsigned i = 0; i < s->count; i++) /* each index once: a repeat is its own */
				have += t->dev[i].count == s->count;
		} else {
			t->dev[0] = *s; /* no device: its header only */
		}
		t->count = s->count;
		if (have == s->count) {
			t->answered = true;
			waiting--;
			answered++;
		}
	}
	free(asked);
	close(fd);
	return answered;
}

/* Text of the answer (maybe unterminated), NUL-terminated into dst of cap bytes. */
static void text(char *dst, const char *src, size_t cap)
{
	size_t n = strnlen(src, cap - 1);
	memcpy(dst, src, n);
	memset(dst + n, 0, cap - n);
}

void gp_stat_remote_page(const struct gp_stat_remote *r, struct gpupool_page *pg)
{
	memset(pg, 0, sizeof *pg);
	pg->magic = GPUPOOL_PAGE_MAGIC;
	pg->version = GPUPOOL_PAGE_VERSION;
	pg->size = sizeof *pg;
	pg->pid = r->pid;
	const struct gp_share_status *h = &r->dev[0];
	pg->start_time_ns = h->start_time_ns;
	text(pg->comm, h->comm, sizeof pg->comm);
	text(pg->lib_version, h->lib_version, sizeof pg->lib_version);
	unsigned n = r->count <= GPUPOOL_MAX_DEVICES ? r->count : GPUPOOL_MAX_DEVICES;
	pg->ndevices = n;
	for (unsigned d = 0; d < n; d++) {
		const struct gp_share_status *s = &r->dev[d];
		struct gpupool_device_stats *t = &pg->dev[d];
		t->device = s->device;
		t->active = 1;
		memcpy(t->uuid, r->uuid[d], GPUPOOL_UUID_LEN);
		text(t->device_name, s->device_name, sizeof t->device_name);
		t->reserved_bytes = s->reserved;
		t->unpooled_bytes = s->unpooled;
		t->allocated_bytes = s->allocated;
		t->cached_bytes = s->cached;
		t->releasable_bytes = s->releasable;
		t->waiting_bytes = s->waiting;
		t->wait_started_ns = s->wait_started_ns;
		t->limit_bytes = s->limit;
		t->floor_bytes = s->floor;
		t->device_total_bytes = s->device_total;
		t->device_free_bytes = s->device_free;
		t->device_seen_ns = s->device_seen_ns;
	}
}

void gp_stat_remote_overlay(const struct gp_stat_remote *r, struct gpupool_page *pg)
{
	for (unsigned i = 0; i < r->count && i < GPUPOOL_MAX_DEVICES; i++) {
		const struct gp_share_status *s = &r->dev[i];
		for (uint32_t d = 0; d < pg->ndevices && d < GPUPOOL_MAX_DEVICES; d++) {
			struct gpupool_device_stats *t = &pg->dev[d];
			if (!t->active || t->device != s->device || memcmp(t->uuid, r->uuid[i], GPUPOOL_UUID_LEN) != 0)
				continue;
			t->releasable_bytes = s->releasable;
			t->waiting_bytes = s->waiting;
			t->wait_started_ns = s->wait_started_ns;
			if (s->device_total && s->device_seen_ns >= t->device_seen_ns) {
				t->device_total_bytes = s->device_total;
				t->device_free_bytes = s->device_free;
				t->device_seen_ns = s->device_seen_ns;
			}
		}
	}
}
