/* The machine's NVIDIA GPUs from the driver's /proc files (stat_gpus.h). Depends on libc only:
 * readdir, one small read per GPU, no CUDA. Files it cannot read are skipped. */
#include "stat_gpus.h"

#include <dirent.h>
#include <stdbool.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

static int hexval(int c)
{
	return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

int gp_stat_gpus_parse_uuid(const char *t, unsigned char out[GPUPOOL_UUID_LEN])
{
	while (*t == ' ' || *t == '\t')
		t++;
	if (strncmp(t, "GPU-", 4) != 0)
		return -1;
	t += 4;
	int n = 0;
	for (; *t && n < 2 * GPUPOOL_UUID_LEN; t++) {
		if (*t == '-')
			continue;
		int h = hexval((unsigned char)*t);
		if (h < 0)
			return -1;
		if (n % 2 == 0)
			out[n / 2] = (unsigned char)(h << 4);
		else
			out[n / 2] |= (unsigned char)h;
		n++;
	}
	while (*t == ' ' || *t == '\t' || *t == '\n' || *t == '\r')
		t++;
	return n == 2 * GPUPOOL_UUID_LEN && !*t ? 0 : -1;
}

static int by_bus(const void *a, const void *b)
{
	return strcasecmp(((const struct gp_stat_gpu *)a)->bus, ((const struct gp_stat_gpu *)b)->bus);
}

/* The UUID line of a GPU's information file; false when there is none. */
static bool read_uuid(int dfd, const char *bus, unsigned char uuid[GPUPOOL_UUID_LEN])
{
	char path[96];
	snprintf(path, sizeof path, "%s/information", bus);
	int fd = openat(dfd, path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	if (fd < 0)
		return false;
	char buf[4096];
	ssize_t k = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (k <= 0)
		return false;
	buf[k] = '\0';
	for (char *line = buf, *next; line && *line; line = next) {
		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		if (strncmp(line, "GPU UUID:", 9) == 0)
			return gp_stat_gpus_parse_uuid(line + 9, uuid) == 0;
	}
	return false;
}

int gp_stat_gpus_read(const char *dir, struct gp_stat_gpu *out, int cap)
{
	int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return 0;
	int dup = fcntl(dfd, F_DUPFD_CLOEXEC, 0);
	DIR *d = dup >= 0 ? fdopendir(dup) : NULL;
	if (!d) {
		if (dup >= 0)
			close(dup);
		close(dfd);
		return 0;
	}
	int n = 0;
	struct dirent *e;
	while ((e = readdir(d)) != NULL && n < cap) {
		/* domain:bus:device.function, e.g. 0000:18:00.0 */
		if (e->d_name[0] == '.' || strlen(e->d_name) >= sizeof out[n].bus || !strchr(e->d_name, ':'))
			continue;
		memset(&out[n], 0, sizeof out[n]);
		memcpy(out[n].bus, e->d_name, strlen(e->d_name) + 1); /* shorter than bus: checked above */
		n++;
	}
	closedir(d);
	qsort(out, (size_t)n, sizeof *out, by_bus);
	for (int i = 0; i < n; i++) {
		out[i].index = i;
		if (!read_uuid(dfd, out[i].bus, out[i].uuid))
			memset(out[i].uuid, 0, sizeof out[i].uuid);
	}
	close(dfd);
	return n;
}

int gp_stat_gpus_index(const struct gp_stat_gpu *gpus, int n, const unsigned char uuid[GPUPOOL_UUID_LEN])
{
	static const unsigned char zero[GPUPOOL_UUID_LEN];
	if (memcmp(uuid, zero, sizeof zero) == 0)
		return -1;
	for (int i = 0; i < n; i++)
		if (memcmp(gpus[i].uuid, uuid, GPUPOOL_UUID_LEN) == 0)
			return gpus[i].index;
	return -1;
}
