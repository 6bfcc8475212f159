/* Writes the seed corpus of the group-file harness into the directory given
 * (tests/fuzz/corpus/group): an empty file, a laid-out file with members and devices, the
 * same truncated, in another version, retired instead of left, with a used figure past its budget, with holdings of a
 * slot's earlier owner, with every member slot and device slot taken, all zeros, and junk.
 * Rerun when struct gp_group_file changes. Test code only. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "group.h"

static int put(const char *dir, const char *name, const void *buf, size_t len)
{
	char path[4096];
	snprintf(path, sizeof path, "%s/%s", dir, name);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0 || write(fd, buf, len) != (ssize_t)len) {
		fprintf(stderr, "seeds_group: %s: %s\n", path, strerror(errno));
		return 1;
	}
	close(fd);
	return 0;
}

static void header(struct gp_group_file *f)
{
	atomic_store(&f->magic, GP_GROUP_MAGIC);
	atomic_store(&f->version, GP_GROUP_VERSION);
	atomic_store(&f->size, (uint32_t)sizeof *f);
	atomic_store(&f->ndevices, GP_GROUP_DEVICES);
	atomic_store(&f->nmembers, GP_GROUP_MEMBERS);
}

static void device(struct gp_group_file *f, unsigned i, uint64_t budget, uint64_t used)
{
	unsigned char u[GP_GROUP_UUID_LEN];
	for (int b = 0; b < GP_GROUP_UUID_LEN; b++)
		u[b] = (unsigned char)(0x10 * i + (unsigned)b);
	atomic_store(&f->dev[i].key, gp_group_uuid_key(u));
	memcpy((void *)f->dev[i].uuid, u, sizeof u);
	atomic_store(&f->dev[i].budget, budget);
	atomic_store(&f->dev[i].used, used);
	atomic_store(&f->dev[i].peak, used);
}

/* A member of pid `pid` (above any live pid: 4194303 is PID_MAX_LIMIT - 1) holding `held` on
 * device slot 0 in generation gen. */
static void member(struct gp_group_file *f, unsigned i, uint64_t pid, uint64_t gen, uint64_t held)
{
	atomic_store(&f->member[i].id, pid | (uint64_t)1234567 << GP_GROUP_PID_BITS);
	atomic_store(&f->member[i].pidns, 4026531836u);
	atomic_store(&f->member[i].gen, gen);
	atomic_store(&f->member[i].joined_ns, 1700000000ull * 1000000000ull);
	for (unsigned d = 0; d < GP_GROUP_DEVICES; d++)
		atomic_store(&f->member[i].held[d], (gen & GP_GROUP_GEN_MASK) << GP_GROUP_HELD_BITS | (d ? 0 : held));
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: seeds_group DIR\n");
		return 2;
	}
	size_t n = sizeof(struct gp_group_file);
	struct gp_group_file *f = calloc(1, n), *g = calloc(1, n);
	unsigned char *junk = malloc(n);
	if (!f || !g || !junk)
		return 1;
	int rc = put(argv[1], "empty", "", 0) | put(argv[1], "zeros", f, n);
	header(f);
	device(f, 0, (uint64_t)40 << 30, (uint64_t)12 << 30);
	device(f, 1, 0, 0);
	member(f, 0, 4194303, 1, (uint64_t)8 << 30);
	member(f, 3, 4194302, 7, (uint64_t)4 << 30);
	rc |= put(argv[1], "valid", f, n) | put(argv[1], "truncated", f, n - 100) | put(argv[1], "header_only", f, 64);
	/* the harness retires (as at exit) instead of leaving when the last byte is odd: here, the
	 * top byte of the last member slot's last holding, a free slot's */
	memcpy(g, f, n);
	((unsigned char *)g)[n - 1] = 1;
	rc |= put(argv[1], "valid_retired", g, n);

	memcpy(g, f, n);
	atomic_store(&g->version, 2);
	rc |= put(argv[1], "version2", g, n);
	memcpy(g, f, n);
	atomic_store(&g->dev[0].used, UINT64_MAX - 3);
	atomic_store(&g->dev[0].budget, 100);
	rc |= put(argv[1], "used_past_budget", g, n);
	((unsigned char *)g)[n - 1] = 1;
	rc |= put(argv[1], "used_past_budget_retired", g, n);
	memcpy(g, f, n);
	atomic_store(&g->member[0].gen, 2); /* its holdings are of generation 1: nobody's */
	rc |= put(argv[1], "earlier_owner", g, n);
	memcpy(g, f, n);
	for (unsigned i = 0; i < GP_GROUP_MEMBERS; i++)
		member(g, i, 4194303 - i, i, i);
	for (unsigned i = 0; i < GP_GROUP_DEVICES; i++)
		device(g, i, i * 1000, i * 999);
	rc |= put(argv[1], "all_slots_taken", g, n);
	for (size_t i = 0; i < n; i++)
		junk[i] = (unsigned char)(i * 2654435761u >> 13);
	rc |= put(argv[1], "junk", junk, n);
	free(f);
	free(g);
	free(junk);
	return rc;
}
