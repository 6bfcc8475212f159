/* The test library's statistics page writer (stat_writer.h). Test code only. */
#include "stat_writer.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

void gp_test_writer_uuid(int d, unsigned char uuid[GPUPOOL_UUID_LEN])
{
	static const unsigned char base[GPUPOOL_UUID_LEN] = {0x67, 0x70, 0x70, 0x6f, 0x6f, 0x6c, 0x74, 0x65,
							     0x73, 0x74, 0, 0, 0, 0, 0, 0};
	memcpy(uuid, base, GPUPOOL_UUID_LEN);
	uuid[GPUPOOL_UUID_LEN - 1] = (unsigned char)d;
}

int gp_test_writer_init(struct gp_test_writer *w, struct gpupool_page *pg, unsigned seed)
{
	struct gp_pool_params prm;
	memset(w, 0, sizeof *w);
	gp_fake_backend_init(&w->fb, 0);
	gp_pool_params_default(&prm);
	w->seed = seed;
	w->answer_release = true;
	for (int d = 0; d < 2; d++) {
		struct gpupool_device_stats *s = gp_statpage_slot(pg, d);
		unsigned char uuid[GPUPOOL_UUID_LEN];
		gp_test_writer_uuid(d, uuid);
		if (!s || gp_statpage_set_uuid(pg, d, uuid) != 0 || gp_statpage_set_device_name(pg, d, "fake GPU") != 0)
			return -ENOSPC;
		prm.limit = d ? (size_t)64 << 30 : 0;
		int rc = gp_pool_create(&w->pools[d], d, &prm, &w->fb.be, s);
		if (rc)
			return rc;
	}
	return 0;
}

void gp_test_writer_step(struct gp_test_writer *w, struct gpupool_page *pg)
{
	uint64_t req;
	if (w->answer_release && gp_statpage_release_pending(pg, &req)) {
		for (int d = 0; d < 2; d++) {
			gp_pool_fence(w->pools[d]);
			gp_pool_release(w->pools[d], 0);
		}
		gp_statpage_release_ack(pg, req);
	}
	unsigned r = (unsigned)rand_r(&w->seed);
	int d = r & 1, i = (int)((r >> 1) % 128);
	uintptr_t *slot = &w->live[d][i];
	if (*slot) {
		gp_stream s = (r >> 9) & 1 ? GP_NO_STREAM : (gp_stream)1;
		gp_pool_free(w->pools[d], *slot, s);
		*slot = 0;
	} else {
		size_t size = (r >> 10) % 4 == 0 ? ((size_t)(r >> 12) % 64 + 1) << 20 : (size_t)(r >> 12) % 65536 + 1;
		if (gp_pool_alloc(w->pools[d], size, (r >> 9) & 1 ? GP_NO_STREAM : (gp_stream)1, slot) != 0)
			*slot = 0;
	}
	if ((r >> 20) % 64 == 0)
		gp_pool_fence(w->pools[d]);
}
