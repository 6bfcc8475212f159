/* The per-device sets of non-blocking streams (streams.h): a growable array per device under
 * one mutex; adds and removes are as rare as stream creation. Depends on backend.h only. */
#include "streams.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

#include "gpupool/stats.h"

struct stream_set {
	gp_stream *v;
	size_t n, cap;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct stream_set sets[GPUPOOL_MAX_DEVICES];

int gp_streams_add(int device, gp_stream s)
{
	if (device < 0 || device >= GPUPOOL_MAX_DEVICES || s == GP_NO_STREAM)
		return -EINVAL;
	int rc = 0;
	pthread_mutex_lock(&lock);
	struct stream_set *t = &sets[device];
	if (t->n == t->cap) {
		size_t nc = t->cap ? t->cap * 2 : 16;
		gp_stream *nv = realloc(t->v, nc * sizeof *nv);
		if (!nv) {
			rc = -ENOMEM;
			goto out;
		}
		t->v = nv;
		t->cap = nc;
	}
	t->v[t->n++] = s;
out:
	pthread_mutex_unlock(&lock);
	return rc;
}

void gp_streams_remove(gp_stream s)
{
	pthread_mutex_lock(&lock);
	for (int d = 0; d < GPUPOOL_MAX_DEVICES; d++) {
		struct stream_set *t = &sets[d];
		for (size_t i = 0; i < t->n; i++) {
			if (t->v[i] == s) {
				t->v[i] = t->v[--t->n];
				goto out;
			}
		}
	}
out:
	pthread_mutex_unlock(&lock);
}

size_t gp_streams_list(int device, gp_stream *out, size_t cap)
{
	if (device < 0 || device >= GPUPOOL_MAX_DEVICES)
		return 0;
	pthread_mutex_lock(&lock);
	const struct stream_set *t = &sets[device];
	for (size_t i = 0; i < t->n && i < cap; i++)
		out[i] = t->v[i];
	size_t n = t->n;
	pthread_mutex_unlock(&lock);
	return n;
}

void gp_streams_after_fork(void)
{
	pthread_mutex_init(&lock, NULL);
	for (int d = 0; d < GPUPOOL_MAX_DEVICES; d++)
		sets[d].n = 0; /* the arrays are kept for the child's own streams */
}
