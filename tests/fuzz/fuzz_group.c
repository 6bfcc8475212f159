/* libFuzzer harness for the group file (group.h). Each input is a file image: checked in
 * memory by gp_group_parse, written as a file in a private directory and read back by
 * gp_group_read (the same verdict, the same copy), then joined by gp_group_join as a member
 * would, and used: a device slot, takes and gives whose sizes come from the input, a
 * recovery, and a leave or (as at exit) a retirement. A hostile file must give one line of
 * refusal or a membership whose takes never lift the group past a budget, whose gives never
 * underflow, and that leaves its slot free. A finding aborts. Built with -fsanitize=fuzzer by
 * a fuzzing build, and with run_corpus.c over corpus/group in the plain suite. Test code only. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fuzz.h"
#include "group.h"

static char dir_path[64], file_path[96];

static void remove_dir(void)
{
	unlink(file_path);
	rmdir(dir_path);
}

static const char *private_file(void)
{
	if (!dir_path[0]) {
		snprintf(dir_path, sizeof dir_path, "/tmp/gp_fuzz_group_XXXXXX");
		if (!mkdtemp(dir_path))
			abort();
		snprintf(file_path, sizeof file_path, "%s/group", dir_path);
		atexit(remove_dir);
	}
	return file_path;
}

static void write_file(const char *path, const uint8_t *data, size_t size)
{
	unlink(path);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
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
	FUZZ_CHECK(why[0] && !strchr(why, '\n'));
}

static void check_view(const struct gp_group_view *v)
{
	FUZZ_CHECK(v->ndevices <= GP_GROUP_DEVICES && v->nmembers <= GP_GROUP_MEMBERS);
	for (uint32_t i = 0; i < v->nmembers; i++) {
		const struct gp_group_view_member *m = &v->member[i];
		FUZZ_CHECK(m->pid >= 0 && m->pid < (1 << GP_GROUP_PID_BITS));
		FUZZ_CHECK(m->alive >= -1 && m->alive <= 1);
		for (uint32_t d = 0; d < GP_GROUP_DEVICES; d++)
			FUZZ_CHECK(d < v->ndevices ? m->held[d] <= GP_GROUP_HELD_MASK : m->held[d] == 0);
	}
}

/* The next few bytes of the input as a number (0 past its end). */
static uint64_t take_bytes(const uint8_t *data, size_t size, size_t *at, size_t n)
{
	uint64_t v = 0;
	for (size_t i = 0; i < n && *at < size; i++)
		v = v << 8 | data[(*at)++];
	return v;
}

static void use_membership(struct gp_group *g, const uint8_t *data, size_t size)
{
	unsigned char uuid[GP_GROUP_UUID_LEN] = {0};
	memcpy(uuid, data, size < sizeof uuid ? size : sizeof uuid);
	size_t at = 0;
	uint64_t budget = take_bytes(data, size, &at, 3);
	int dev = gp_group_device(g, uuid, budget);
	FUZZ_CHECK(dev == -ENOSPC || (dev >= 0 && dev < (int)GP_GROUP_DEVICES));
	if (dev < 0)
		return;
	uint64_t mine = 0;
	for (int op = 0; op < 16; op++) {
		uint64_t n = take_bytes(data, size, &at, 2) + 1, b, used, held;
		gp_group_total(g, dev, &b, &used, &held);
		FUZZ_CHECK(held == mine);
		if (op % 3 != 2) {
			int rc = gp_group_take(g, dev, n);
			FUZZ_CHECK(rc == 0 || rc == -ENOMEM);
			uint64_t after;
			gp_group_total(g, dev, &b, &after, &held);
			if (rc == 0) {
				mine += n;
				/* a take never lifts the group past its budget (another member's hostile
				 * figure aside, none runs here) */
				FUZZ_CHECK(!b || after <= b);
			}
		} else {
			gp_group_give(g, dev, n);
			mine -= n < mine ? n : mine;
			gp_group_total(g, dev, &b, &used, &held);
		}
	}
	(void)gp_group_recover(g);
	uint64_t b, before, after, held;
	gp_group_total(g, dev, &b, &before, &held);
	gp_group_give(g, dev, held);
	gp_group_total(g, dev, &b, &after, &held);
	FUZZ_CHECK(held == 0 && after <= before); /* clamped at zero, never wrapped */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct gp_group_view mem, file;
	char why[512];
	why[0] = '\0';
	int rc = gp_group_parse(data, size, &mem, why, sizeof why);
	if (rc == 0)
		check_view(&mem);
	else
		check_why(why);

	const char *path = private_file();
	write_file(path, data, size);
	why[0] = '\0';
	int frc = gp_group_read(path, &file, why, sizeof why);
	FUZZ_CHECK((frc == 0) == (rc == 0));
	if (frc == 0) {
		check_view(&file);
		for (uint32_t i = 0; i < file.nmembers; i++)
			file.member[i].alive = -1; /* the reader's own look; the rest must be the same */
		FUZZ_CHECK(memcmp(&file, &mem, sizeof mem) == 0);
	} else {
		check_why(why);
	}

	struct gp_group g;
	why[0] = '\0';
	int jrc = gp_group_join(&g, path, why, sizeof why);
	FUZZ_CHECK(jrc == 0 || jrc == -EPROTO || jrc == -ENOSPC);
	if (jrc != 0) {
		check_why(why);
		FUZZ_CHECK(g.f == NULL);
		FUZZ_CHECK(rc != 0 || jrc == -ENOSPC); /* a file the reader takes, a member takes */
		return 0;
	}
	/* only an empty file, or one of the layout's size that is all zeros, is laid out */
	FUZZ_CHECK(rc == 0 || size == 0 || size == sizeof(struct gp_group_file));
	uint64_t id = g.id;
	use_membership(&g, data, size);
	if (size && data[size - 1] & 1) { /* as at exit: returned and freed, the mapping kept */
		gp_group_retire(&g);
		int trc = gp_group_take(&g, 0, 1); /* -ENOMEM where the file's figure is past its budget */
		FUZZ_CHECK(trc == -EIDRM || trc == -ENOMEM);
		gp_group_forget(&g);
	} else {
		gp_group_leave(&g);
	}
	FUZZ_CHECK(gp_group_read(path, &file, why, sizeof why) == 0);
	check_view(&file);
	/* the slot it left is free: no member of this pid namespace has its pid and start time
	 * (the file may name them in a slot of another namespace, alive -1: another process, never
	 * judged, as a pid means nothing across namespaces) */
	for (uint32_t i = 0; i < file.nmembers; i++)
		FUZZ_CHECK(!(file.member[i].pid == (int)(id & ((1u << GP_GROUP_PID_BITS) - 1)) &&
			     file.member[i].start_ms == id >> GP_GROUP_PID_BITS && file.member[i].alive != -1));
	return 0;
}
