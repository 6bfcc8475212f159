/* A statistics page writer for the stats tests: two pools (devices 0 and 1) on the fake
 * backend, driven with a random alloc/free mix, counters kept in a page's slots, release
 * requests answered between operations. Part of the test library (tests/lib), shared by
 * test_statpage and the CLI test's helper process. Test code only. */
#ifndef GP_TEST_STAT_WRITER_H
#define GP_TEST_STAT_WRITER_H

#include <stdbool.h>
#include <stdint.h>

#include "backend_fake.h"
#include "pool.h"
#include "statpage.h"

struct gp_test_writer {
	struct gp_fake_backend fb;
	gp_pool *pools[2];
	uintptr_t live[2][128];
	unsigned seed;
	bool answer_release;
};

/* The uuid the writer gives device d: GPU-6770706f-6f6c-7465-7374-00000000000<d>. */
void gp_test_writer_uuid(int d, unsigned char uuid[GPUPOOL_UUID_LEN]);
/* Two pools whose counters live in slots 0 and 1 of pg, each device with its uuid
 * (gp_test_writer_uuid); 0 or a negative errno. */
int gp_test_writer_init(struct gp_test_writer *w, struct gpupool_page *pg, unsigned seed);
/* One allocation call's worth of work, as the shim does it: first the release request,
 * then an alloc or free on a random device. */
void gp_test_writer_step(struct gp_test_writer *w, struct gpupool_page *pg);

#endif
