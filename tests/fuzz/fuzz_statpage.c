/* libFuzzer harness for the statistics-page reader. Each input is a page image: checked
 * in memory by gp_statpage_validate, then written as a page file in a private directory
 * and read back by gp_statpage_read; the two must agree (verdict and copy), and every
 * formatter (table, detail, both in a terminal's box with rates, JSON, listing JSON,
 * Prometheus, exit report) runs on what passes and must print only printable ASCII and
 * newlines. Pages of either layout a reader takes (version 2, the current one) are valid. A finding aborts. Linked with
 * -fsanitize=fuzzer by a fuzzing build, and with run_corpus.c over corpus/statpage in
 * the plain suite. Test code only. */
#include "fuzz_statpage.h"

#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "format.h"
#include "statpage.h"

static int dir_fd = -1;
static char dir_path[64];

static void remove_dir(void)
{
	unlinkat(dir_fd, GP_FUZZ_STATPAGE_NAME, 0);
	close(dir_fd);
	rmdir(dir_path);
}

/* The harness's own directory, made on the first input and removed at exit. */
static int private_dir(void)
{
	if (dir_fd >= 0)
		return dir_fd;
	snprintf(dir_path, sizeof dir_path, "/tmp/gp_fuzz_statpage_XXXXXX");
	if (!mkdtemp(dir_path))
		abort();
	dir_fd = open(dir_path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dir_fd < 0)
		abort();
	atexit(remove_dir);
	return dir_fd;
}

static void write_page_file(int dfd, const uint8_t *data, size_t size)
{
	int fd = openat(dfd, GP_FUZZ_STATPAGE_NAME, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		abort();
	while (size) {
		ssize_t w = write(fd, data, size);
		if (w <= 0)
			abort();
		data += w;
		size -= (size_t)w;
	}
	close(fd);
}

static void check_why(const char *why)
{
	if (!why[0] || strchr(why, '\n'))
		abort();
}

/* A copy that passed: the header of either layout (version 2's, or the current one), and a
 * version 2 page's uuids zero. */
static void check_page(const struct gpupool_page *pg, size_t len)
{
	if (pg->magic != GPUPOOL_PAGE_MAGIC || gp_statpage_size_of(pg->version) != len || pg->size != len ||
	    pg->pid != GP_FUZZ_STATPAGE_PID || pg->ndevices > GPUPOOL_MAX_DEVICES)
		abort();
	static const char zero[GPUPOOL_UUID_LEN];
	for (int d = 0; d < GPUPOOL_MAX_DEVICES && pg->version == 2; d++)
		if (memcmp(pg->dev[d].uuid, zero, sizeof zero) != 0)
			abort();
}

/* Every view of one page, stale and live, into a buffer: printable ASCII and '\n' only. */
static void format_all(const struct gpupool_page *pg, uint32_t inconsistent)
{
	static char out[1 << 20];
	static const struct gp_format_skip skips[] = {{"invalid", 1}, {"foreign", 2}, {"limit", 0}};
	/* rates from the page's own counters, as if a second ago they had been zero: any value */
	struct gp_format_rate rates[GPUPOOL_MAX_DEVICES];
	for (int d = 0; d < GPUPOOL_MAX_DEVICES; d++)
		rates[d] = (struct gp_format_rate){d % 3 != 2, (double)pg->dev[d].allocs,
						   (double)pg->dev[d].requested_bytes_total};
	for (int stale = 0; stale < 2; stale++) {
		struct gp_format_proc p = {.page = pg, .stale = stale, .inconsistent = inconsistent, .rates = NULL};
		struct gp_format_out o;
		gp_format_to_buf(&o, out, sizeof out);
		gp_format_table(&o, &p, 1);
		gp_format_detail(&o, &p);
		p.rates = rates;
		gp_format_table_box(&o, &p, 1, 80, 24);
		gp_format_detail_box(&o, &p, 80, 24);
		gp_format_detail_box(&o, &p, 3, 2);
		p.rates = NULL;
		gp_format_json(&o, &p, 1);
		gp_format_json_listing(&o, &p, 1, skips, sizeof skips / sizeof skips[0]);
		gp_format_prometheus(&o, &p, 1, skips, sizeof skips / sizeof skips[0], "0.0.0", false);
		gp_format_prometheus(&o, &p, 1, skips, sizeof skips / sizeof skips[0], "0.0.0", true);
		gp_format_report(&o, pg);
		if (gp_format_flush(&o) != 0 || strlen(out) != o.len)
			abort();
		for (size_t i = 0; i < o.len; i++) {
			unsigned char c = (unsigned char)out[i];
			if (c != '\n' && (c < 0x20 || c > 0x7e))
				abort();
		}
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct gpupool_page page;
	static struct gp_statpage_info info;
	char why[512];
	uint32_t inconsistent;
	/* an image of a layout's size (the current layout's, or version 2's) in aligned memory of
	 * exactly that size, any other as it came: a read past its end is the sanitizer's to see */
	const void *img = data;
	void *copy = NULL;
	if ((size == sizeof page || (size && size == gp_statpage_size_of(2))) && (copy = malloc(size)))
		img = memcpy(copy, data, size);
	why[0] = '\0';
	int rc = gp_statpage_validate(img, size, GP_FUZZ_STATPAGE_NAME, 0, &page, &inconsistent, why, sizeof why);
	if (rc == 0) {
		check_page(&page, size);
		format_all(&page, inconsistent);
	} else {
		check_why(why);
	}

	int dfd = private_dir();
	write_page_file(dfd, data, size);
	why[0] = '\0';
	int frc = gp_statpage_read(dfd, GP_FUZZ_STATPAGE_NAME, geteuid(), 0, &info, why, sizeof why);
	if ((frc == 0) != (rc == 0))
		abort(); /* the file and the memory image must get the same verdict */
	if (frc == 0) {
		/* the same bytes: the same copy, so the formatters have seen it already */
		if (!info.stale || info.inconsistent != inconsistent || info.pid != GP_FUZZ_STATPAGE_PID ||
		    memcmp(&info.page, &page, sizeof page) != 0)
			abort();
	} else {
		check_why(why);
	}
	free(copy);
	return 0;
}
