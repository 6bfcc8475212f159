/* gpupool-stat's numbers for the GPUs (tools/stat_gpus.c): a folder laid out as the NVIDIA
 * driver's /proc/driver/nvidia/gpus, each GPU's index its place in PCI bus order (what
 * nvidia-smi shows), found by UUID; a GPU without a UUID line keeps its place; junk and a
 * missing folder give nothing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "stat_gpus.h"

static char dir[] = "/tmp/gp-stat-gpus-XXXXXX";

/* A GPU's folder with its information file (NULL: none), as the driver writes it. */
static void gpu(const char *bus, const char *uuid)
{
	char path[256];
	snprintf(path, sizeof path, "%s/%s", dir, bus);
	assert_int_equal(mkdir(path, 0755), 0);
	if (!uuid)
		return;
	snprintf(path, sizeof path, "%s/%s/information", dir, bus);
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fprintf(f, "Model: \t\t NVIDIA H100 80GB HBM3\nIRQ:   \t\t 123\nGPU UUID: \t %s\nVideo BIOS: \t ??.??.??.??.??\n"
		   "Bus Type: \t PCIe\nDMA Size: \t 52 bits\nBus Location: \t %s\nDevice Minor: \t 0\n",
		uuid, bus);
	fclose(f);
}

static void test_read(void **state)
{
	(void)state;
	assert_non_null(mkdtemp(dir));
	/* made out of order: the index follows the bus ids, not the folder's age */
	gpu("0000:c1:00.0", "GPU-33333333-3333-3333-3333-333333333333");
	gpu("0000:18:00.0", "GPU-6770706f-6f6c-7465-7374-000000000000");
	gpu("0000:2A:00.0", NULL); /* the driver has not filled it in: it still counts */
	gpu("0000:9a:00.0", "GPU-junk");
	char junk[300];
	snprintf(junk, sizeof junk, "%s/not-a-gpu", dir);
	assert_int_equal(mkdir(junk, 0755), 0);
	struct gp_stat_gpu g[8];
	int n = gp_stat_gpus_read(dir, g, 8);
	assert_int_equal(n, 4);
	assert_string_equal(g[0].bus, "0000:18:00.0");
	assert_string_equal(g[1].bus, "0000:2A:00.0");
	assert_string_equal(g[3].bus, "0000:c1:00.0");
	unsigned char u[GPUPOOL_UUID_LEN];
	assert_int_equal(gp_stat_gpus_parse_uuid("GPU-6770706f-6f6c-7465-7374-000000000000", u), 0);
	assert_int_equal(gp_stat_gpus_index(g, n, u), 0);
	assert_int_equal(gp_stat_gpus_parse_uuid(" GPU-33333333-3333-3333-3333-333333333333\n", u), 0);
	assert_int_equal(gp_stat_gpus_index(g, n, u), 3);
	memset(u, 0, sizeof u); /* not known: no index, even though a UUID-less GPU is all zero */
	assert_int_equal(gp_stat_gpus_index(g, n, u), -1);
	u[0] = 1;
	assert_int_equal(gp_stat_gpus_index(g, n, u), -1);
	assert_int_equal(gp_stat_gpus_parse_uuid("GPU-6770706f-6f6c-7465-7374-00000000000", u), -1); /* short */
	assert_int_equal(gp_stat_gpus_parse_uuid("MIG-6770706f-6f6c-7465-7374-000000000000", u), -1);
	assert_int_equal(gp_stat_gpus_parse_uuid("GPU-6770706f-6f6c-7465-7374-0000000000000", u), -1); /* long */
	/* room for two: the first two in bus order */
	assert_int_equal(gp_stat_gpus_read(dir, g, 2), 2);
	/* no folder (no NVIDIA driver): nothing */
	assert_int_equal(gp_stat_gpus_read("/nonexistent/gpus", g, 8), 0);
	char cmd[300];
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	assert_int_equal(system(cmd), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {cmocka_unit_test(test_read)};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
