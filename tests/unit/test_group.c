/* Tests of the group file (group.h) in a private directory: layout and refusals (junk, another
 * layout, a symbolic link, a fifo, a file every user may write, another user's file in a
 * sticky directory, a file with another hard link, one linked at the name only while it was
 * opened), device slots and budgets, take and give at the budget from many threads
 * and from several processes while a sampler checks that the group never holds more than its
 * budget, the share of a member killed with -9 returned (and of a slot whose pid now names
 * another process), and the reader. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "group.h"
#include "proc.h"

static char dir[64];
static char why[512];

static const char *at(const char *name)
{
	static char buf[4][128];
	static int i;
	char *b = buf[i++ % 4];
	snprintf(b, sizeof buf[0], "%s/%s", dir, name);
	return b;
}

static int setup(void **state)
{
	(void)state;
	snprintf(dir, sizeof dir, "/tmp/gp-group-XXXXXX");
	return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	char cmd[128];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	return system(cmd) == 0 ? 0 : -1;
}

static void uuid_of(unsigned n, unsigned char u[GP_GROUP_UUID_LEN])
{
	memset(u, 0, GP_GROUP_UUID_LEN);
	u[0] = 0x47;
	memcpy(u + 4, &n, sizeof n);
}

static void write_file(const char *path, const void *buf, size_t len, mode_t mode)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, mode);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, buf, len), (ssize_t)len);
	assert_int_equal(fchmod(fd, mode), 0);
	close(fd);
}

static void read_file(const char *path, void *buf, size_t len)
{
	int fd = open(path, O_RDONLY);
	assert_true(fd >= 0);
	assert_int_equal(read(fd, buf, len), (ssize_t)len);
	close(fd);
}

/* A new file: created 0600, laid out at its size; a second look reads it back. */
static void test_create(void **state)
{
	(void)state;
	struct gp_group g;
	struct stat st;
	const char *p = at("new");
	mode_t old = umask(0);
	assert_int_equal(gp_group_join(&g, p, why, sizeof why), 0);
	umask(old);
	assert_int_equal(stat(p, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);
	assert_int_equal((size_t)st.st_size, sizeof(struct gp_group_file));
	assert_int_equal(atomic_load(&g.f->magic), GP_GROUP_MAGIC);
	assert_int_equal(atomic_load(&g.f->member[g.me].id) & ((1u << GP_GROUP_PID_BITS) - 1), (uint64_t)getpid());
	gp_group_leave(&g);
	assert_null(g.f);
	/* a member that left leaves no trace but the device slots */
	static struct gp_group_view v;
	assert_int_equal(gp_group_read(p, &v, why, sizeof why), 0);
	assert_int_equal(v.nmembers, 0);
}

/* An empty file made by the user (0660 for a Unix group) is laid out and keeps its mode. */
static void test_empty_file(void **state)
{
	(void)state;
	struct gp_group g;
	struct stat st;
	const char *p = at("empty");
	write_file(p, "", 0, 0660);
	assert_int_equal(gp_group_join(&g, p, why, sizeof why), 0);
	assert_int_equal(stat(p, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0660);
	gp_group_leave(&g);
}

/* The race to lay a new file out, made to happen every time: between this joiner's look at
 * the magic (0) and its layout, another process joins and lays it out, taking a member slot.
 * This joiner finds a slot word set where a fresh file has none; it must take the file as
 * laid out, not refuse it ("a group file of another layout ... reads version 1"). */
static int race_go[2], race_done[2];
static pid_t race_kid;

static void join_first(const char *path)
{
	gp_group_set_join_hook(NULL); /* once, and never in the other joiner */
	race_kid = fork();
	assert_true(race_kid >= 0);
	if (race_kid == 0) {
		struct gp_group other;
		char w[256], c;
		int rc = gp_group_join(&other, path, w, sizeof w);
		if (write(race_go[1], rc == 0 ? "y" : "n", 1) != 1 || read(race_done[0], &c, 1) != 1)
			_exit(2);
		gp_group_leave(&other);
		_exit(rc == 0 ? 0 : 1);
	}
	char c = 0;
	assert_int_equal(read(race_go[0], &c, 1), 1);
	assert_int_equal(c, 'y'); /* the other joiner laid the file out and holds a slot */
}

static void test_join_race(void **state)
{
	(void)state;
	struct gp_group g;
	const char *p = at("race");
	assert_int_equal(pipe(race_go), 0);
	assert_int_equal(pipe(race_done), 0);
	gp_group_set_join_hook(join_first);
	int rc = gp_group_join(&g, p, why, sizeof why);
	if (rc)
		fprintf(stderr, "the joiner that lost the race: %s\n", why);
	static struct gp_group_view v;
	int read_rc = gp_group_read(p, &v, why, sizeof why);
	/* the other joiner goes before anything is asserted: a failed check leaves none behind */
	assert_int_equal(write(race_done[1], "y", 1), 1);
	int st;
	assert_int_equal(waitpid(race_kid, &st, 0), race_kid);
	close(race_go[0]), close(race_go[1]), close(race_done[0]), close(race_done[1]);
	assert_int_equal(rc, 0);
	assert_int_equal(read_rc, 0);
	assert_int_equal(v.nmembers, 2);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	gp_group_leave(&g);
}

/* Junk, another layout and a wrong size are refused with one line, and left as they were. */
static void test_refused_files(void **state)
{
	(void)state;
	struct gp_group g;
	size_t n = sizeof(struct gp_group_file);
	unsigned char *junk = malloc(n), *back = malloc(n);
	assert_non_null(junk);
	assert_non_null(back);
	for (size_t i = 0; i < n; i++)
		junk[i] = (unsigned char)(i * 131 + 7);
	write_file(at("junk"), junk, n, 0600);
	assert_int_equal(gp_group_join(&g, at("junk"), why, sizeof why), -EPROTO);
	assert_non_null(strstr(why, "not a gpupool group file"));
	assert_null(strchr(why, '\n'));
	read_file(at("junk"), back, n);
	assert_memory_equal(junk, back, n);

	/* zero magic but something in the body: not taken over */
	memset(junk, 0, n);
	junk[n - 1] = 1;
	write_file(at("body"), junk, n, 0600);
	assert_int_equal(gp_group_join(&g, at("body"), why, sizeof why), -EPROTO);
	read_file(at("body"), back, n);
	assert_memory_equal(junk, back, n);

	/* this magic, another version */
	memset(junk, 0, n);
	uint64_t magic = GP_GROUP_MAGIC;
	uint32_t version = 2;
	memcpy(junk, &magic, sizeof magic);
	memcpy(junk + offsetof(struct gp_group_file, version), &version, sizeof version);
	write_file(at("v2"), junk, n, 0600);
	assert_int_equal(gp_group_join(&g, at("v2"), why, sizeof why), -EPROTO);
	assert_non_null(strstr(why, "another layout (version 2"));
	static struct gp_group_view v;
	assert_int_equal(gp_group_read(at("v2"), &v, why, sizeof why), -EPROTO);

	/* a text file */
	write_file(at("text"), "hello\n", 6, 0600);
	assert_int_equal(gp_group_join(&g, at("text"), why, sizeof why), -EPROTO);
	assert_non_null(strstr(why, "6 bytes"));
	read_file(at("text"), back, 6);
	assert_memory_equal(back, "hello\n", 6);
	assert_null(g.f);
	free(junk);
	free(back);
}

/* A symbolic link is never followed (its target neither made nor written), a fifo never
 * opened (no hang), and a file every user may write is refused. */
static void test_refused_kinds(void **state)
{
	(void)state;
	struct gp_group g;
	struct stat st;
	assert_int_equal(symlink(at("target"), at("link")), 0);
	assert_int_equal(gp_group_join(&g, at("link"), why, sizeof why), -ELOOP);
	assert_non_null(strstr(why, "symbolic link"));
	assert_int_not_equal(stat(at("target"), &st), 0);
	write_file(at("target"), "x", 1, 0600);
	assert_int_equal(gp_group_join(&g, at("link"), why, sizeof why), -ELOOP);
	assert_int_equal(stat(at("target"), &st), 0);
	assert_int_equal(st.st_size, 1);
	static struct gp_group_view v;
	assert_int_equal(gp_group_read(at("link"), &v, why, sizeof why), -ELOOP);

	assert_int_equal(mkfifo(at("fifo"), 0600), 0);
	assert_int_equal(gp_group_join(&g, at("fifo"), why, sizeof why), -EINVAL);
	assert_int_equal(gp_group_join(&g, dir, why, sizeof why), -EINVAL);

	write_file(at("open"), "", 0, 0666);
	assert_int_equal(gp_group_join(&g, at("open"), why, sizeof why), -EACCES);
	assert_non_null(strstr(why, "writable by every user"));
	assert_int_equal(stat(at("open"), &st), 0);
	assert_int_equal(st.st_size, 0);
	assert_int_equal(gp_group_join(&g, at("missing/dir/file"), why, sizeof why), -ENOENT);
}

/* In a sticky directory others may write, a file owned by neither this user nor the
 * directory's owner is not joined (another user's, planted: it could be truncated under the
 * members) and left as it was; this user's file and the directory owner's are joined, and so
 * is another user's file in a directory that is not sticky. Root only (files of other users). */
static void test_planted_file(void **state)
{
	(void)state;
	if (geteuid() != 0)
		skip();
	struct gp_group g;
	struct stat st;
	assert_int_equal(mkdir(at("sticky"), 0755), 0);
	assert_int_equal(chmod(at("sticky"), 01777), 0);
	write_file(at("sticky/planted"), "", 0, 0600);
	assert_int_equal(chown(at("sticky/planted"), 65534, 65534), 0);
	assert_int_equal(gp_group_join(&g, at("sticky/planted"), why, sizeof why), -EACCES);
	assert_non_null(strstr(why, "owned by uid 65534, who is neither this user nor the owner of its sticky directory"));
	assert_null(g.f);
	assert_int_equal(stat(at("sticky/planted"), &st), 0);
	assert_int_equal(st.st_size, 0);
	assert_int_equal(gp_group_join(&g, at("sticky/mine"), why, sizeof why), 0);
	gp_group_leave(&g);

	assert_int_equal(chown(at("sticky"), 65534, 65534), 0); /* now the directory's owner's file */
	assert_int_equal(gp_group_join(&g, at("sticky/planted"), why, sizeof why), 0);
	gp_group_leave(&g);

	write_file(at("theirs"), "", 0, 0600);
	assert_int_equal(chown(at("theirs"), 65534, 65534), 0);
	assert_int_equal(gp_group_join(&g, at("theirs"), why, sizeof why), 0);
	gp_group_leave(&g);
}

/* A file with another hard link is not joined, under either name, and is left as it was:
 * joining would grow and lay out the file its other name names (a configuration file of
 * root's, linked into a sticky directory where fs.protected_hardlinks is 0). Linked here by
 * its owner, which the kernel allows whatever the sysctl says. With one name left it is
 * joined as any empty file. */
static void test_hard_link(void **state)
{
	(void)state;
	struct gp_group g;
	struct stat st;
	write_file(at("victim.conf"), "", 0, 0600);
	assert_int_equal(link(at("victim.conf"), at("linked")), 0);
	assert_int_equal(gp_group_join(&g, at("linked"), why, sizeof why), -EMLINK);
	assert_non_null(strstr(why, "it has 2 hard links"));
	assert_null(strchr(why, '\n'));
	assert_null(g.f);
	assert_int_equal(gp_group_join(&g, at("victim.conf"), why, sizeof why), -EMLINK);
	assert_int_equal(stat(at("victim.conf"), &st), 0);
	assert_int_equal(st.st_size, 0);
	assert_int_equal(st.st_nlink, 2);
	assert_int_equal(unlink(at("linked")), 0);
	assert_int_equal(gp_group_join(&g, at("victim.conf"), why, sizeof why), 0);
	gp_group_leave(&g);
}

/* The race a count of links alone loses, made to happen every time (the open hook): the
 * name is a second link of another file when it is opened, and that link is removed before
 * the descriptor is looked at, which then has one link, its own name elsewhere. Not joined,
 * and the file is left as it was; and so for a name replaced by another file meanwhile. */
static void unlink_after_open(const char *path)
{
	gp_group_set_open_hook(NULL); /* once */
	assert_int_equal(unlink(path), 0);
}

static void replace_after_open(const char *path)
{
	gp_group_set_open_hook(NULL);
	assert_int_equal(unlink(path), 0);
	write_file(path, "", 0, 0600);
}

static void test_link_race(void **state)
{
	(void)state;
	struct gp_group g;
	struct stat st;
	write_file(at("victim2.conf"), "", 0, 0600);
	assert_int_equal(link(at("victim2.conf"), at("raced")), 0);
	gp_group_set_open_hook(unlink_after_open);
	int rc = gp_group_join(&g, at("raced"), why, sizeof why);
	gp_group_set_open_hook(NULL);
	assert_int_equal(rc, -ESTALE);
	assert_non_null(strstr(why, "while it was being opened"));
	assert_null(g.f);
	assert_int_equal(stat(at("victim2.conf"), &st), 0);
	assert_int_equal(st.st_size, 0);

	assert_int_equal(link(at("victim2.conf"), at("replaced")), 0);
	gp_group_set_open_hook(replace_after_open);
	rc = gp_group_join(&g, at("replaced"), why, sizeof why);
	gp_group_set_open_hook(NULL);
	assert_int_equal(rc, -ESTALE);
	assert_int_equal(stat(at("victim2.conf"), &st), 0);
	assert_int_equal(st.st_size, 0);
	assert_int_equal(stat(at("replaced"), &st), 0);
	assert_int_equal(st.st_size, 0);
}

/* Device slots by UUID: the same UUID the same slot, the first budget wins, a full table. */
static void test_devices(void **state)
{
	(void)state;
	struct gp_group g;
	unsigned char u[GP_GROUP_UUID_LEN];
	uint64_t budget, used, mine;
	assert_int_equal(gp_group_join(&g, at("devices"), why, sizeof why), 0);
	uuid_of(0, u);
	int d0 = gp_group_device(&g, u, 1000);
	assert_int_equal(d0, 0);
	assert_int_equal(gp_group_device(&g, u, 5000), d0);
	gp_group_total(&g, d0, &budget, &used, &mine);
	assert_int_equal(budget, 1000);
	/* a device with no budget yet counts without a cap until a member sets one */
	uuid_of(1, u);
	int d1 = gp_group_device(&g, u, 0);
	assert_int_equal(d1, 1);
	assert_int_equal(gp_group_take(&g, d1, (uint64_t)1 << 40), 0);
	assert_int_equal(gp_group_device(&g, u, 4096), d1);
	gp_group_total(&g, d1, &budget, &used, &mine);
	assert_int_equal(budget, 4096);
	assert_int_equal(used, (uint64_t)1 << 40);
	assert_int_equal(gp_group_take(&g, d1, 1), -ENOMEM);
	gp_group_give(&g, d1, (uint64_t)1 << 40);
	for (unsigned i = 2; i < GP_GROUP_DEVICES; i++) {
		uuid_of(i, u);
		assert_int_equal(gp_group_device(&g, u, 1), (int)i);
	}
	uuid_of(GP_GROUP_DEVICES, u);
	assert_int_equal(gp_group_device(&g, u, 1), -ENOSPC);
	uuid_of(7, u);
	assert_int_equal(gp_group_device(&g, u, 1), 7);
	gp_group_leave(&g);
}

/* Take and give: exact at the budget, give never more than held, no figure below zero. */
static void test_take_give(void **state)
{
	(void)state;
	struct gp_group g;
	unsigned char u[GP_GROUP_UUID_LEN];
	uint64_t budget, used, mine;
	uuid_of(0, u);
	assert_int_equal(gp_group_join(&g, at("takegive"), why, sizeof why), 0);
	int d = gp_group_device(&g, u, 1000);
	assert_int_equal(gp_group_take(&g, d, 600), 0);
	assert_int_equal(gp_group_take(&g, d, 401), -ENOMEM);
	assert_int_equal(gp_group_take(&g, d, 400), 0);
	assert_int_equal(gp_group_take(&g, d, 1), -ENOMEM);
	assert_int_equal(gp_group_take(&g, d, UINT64_MAX), -ENOMEM);
	gp_group_total(&g, d, &budget, &used, &mine);
	assert_int_equal(used, 1000);
	assert_int_equal(mine, 1000);
	gp_group_give(&g, d, 5000); /* more than held: gives what it holds */
	gp_group_total(&g, d, &budget, &used, &mine);
	assert_int_equal(used, 0);
	assert_int_equal(mine, 0);
	/* a figure another member spoiled (used below this process's holding) stops at zero */
	assert_int_equal(gp_group_take(&g, d, 300), 0);
	atomic_store(&g.f->dev[d].used, 100);
	gp_group_give(&g, d, 300);
	gp_group_total(&g, d, &budget, &used, &mine);
	assert_int_equal(used, 0);
	/* a used above the budget (a hostile member) fails every take, wraps nothing */
	atomic_store(&g.f->dev[d].used, UINT64_MAX - 5);
	assert_int_equal(gp_group_take(&g, d, 10), -ENOMEM);
	atomic_store(&g.f->dev[d].used, 0);
	assert_int_equal(atomic_load(&g.f->dev[d].peak), 1000);
	/* a budget past what a holding can say (a hostile member): a take of more than a holding
	 * holds is refused, and this process's word keeps its generation */
	uint64_t held_before = atomic_load(&g.f->member[g.me].held[d]);
	atomic_store(&g.f->dev[d].budget, UINT64_MAX);
	assert_int_not_equal(gp_group_take(&g, d, GP_GROUP_HELD_MASK + 2), 0);
	assert_true(atomic_load(&g.f->member[g.me].held[d]) == held_before);
	/* a charge on a spoiled figure stops at UINT64_MAX, never wraps to a small one */
	atomic_store(&g.f->dev[d].used, UINT64_MAX - 5);
	assert_int_equal(gp_group_charge(&g, d, 10), 0);
	assert_true(atomic_load(&g.f->dev[d].used) == UINT64_MAX);
	gp_group_leave(&g);
}

/* This process's slot taken from it (judged dead by a member that could not see it): its
 * takes fail with -EIDRM and change nothing; its gives give nothing. */
static void test_slot_lost(void **state)
{
	(void)state;
	struct gp_group g;
	unsigned char u[GP_GROUP_UUID_LEN];
	uint64_t budget, used, mine;
	uuid_of(0, u);
	assert_int_equal(gp_group_join(&g, at("lost"), why, sizeof why), 0);
	int d = gp_group_device(&g, u, 1000);
	assert_int_equal(gp_group_take(&g, d, 100), 0);
	struct gp_group_member_slot *m = &g.f->member[g.me];
	/* what another member's return of this slot does, then a new owner */
	atomic_store(&m->held[d], atomic_load(&m->held[d]) & ~GP_GROUP_HELD_MASK);
	atomic_store(&g.f->dev[d].used, 0);
	atomic_store(&m->id, 12345);
	atomic_fetch_add(&m->gen, 1);
	atomic_store(&m->held[d], (atomic_load(&m->gen) & GP_GROUP_GEN_MASK) << GP_GROUP_HELD_BITS | 7);
	atomic_store(&g.f->dev[d].used, 7);
	assert_int_equal(gp_group_take(&g, d, 10), -EIDRM);
	gp_group_give(&g, d, 100);
	gp_group_total(&g, d, &budget, &used, &mine);
	assert_int_equal(used, 7);
	assert_int_equal(atomic_load(&m->held[d]) & GP_GROUP_HELD_MASK, 7);
	atomic_store(&m->id, 0);
	gp_group_forget(&g);
}

/* Retired at exit: everything returned, the slot free, later takes refused without a trace,
 * later gives giving nothing; the mapping still there for threads still running. */
static void test_retire(void **state)
{
	(void)state;
	struct gp_group g;
	unsigned char u[GP_GROUP_UUID_LEN];
	uint64_t budget, used, mine;
	uuid_of(0, u);
	assert_int_equal(gp_group_join(&g, at("retire"), why, sizeof why), 0);
	int d = gp_group_device(&g, u, 1000);
	assert_int_equal(gp_group_take(&g, d, 400), 0);
	gp_group_retire(&g);
	gp_group_total(&g, d, &budget, &used, &mine);
	assert_int_equal(used, 0);
	assert_int_equal(mine, 0);
	assert_int_equal(atomic_load(&g.f->member[g.me].id), 0);
	assert_int_equal(gp_group_take(&g, d, 10), -EIDRM);
	assert_int_equal(gp_group_charge(&g, d, 10), -EIDRM);
	gp_group_give(&g, d, 400);
	gp_group_total(&g, d, &budget, &used, &mine);
	assert_int_equal(used, 0);
	gp_group_forget(&g);
}

/* ---- many threads ---- */

#define THREADS 8
#define CHUNK 100
#define BUDGET 1000

static struct gp_group shared;
static int shared_dev;
static atomic_bool stop;
static atomic_ulong failures, successes;

static void *hammer(void *arg)
{
	unsigned seed = (unsigned)(uintptr_t)arg, held = 0;
	for (int i = 0; i < 20000; i++) {
		seed = seed * 1103515245u + 12345u;
		if ((seed >> 16) % 2 == 0 && held < 12) {
			if (gp_group_take(&shared, shared_dev, CHUNK) == 0) {
				held++;
				atomic_fetch_add(&successes, 1);
			} else {
				atomic_fetch_add(&failures, 1);
			}
		} else if (held) {
			gp_group_give(&shared, shared_dev, CHUNK);
			held--;
		}
	}
	while (held--)
		gp_group_give(&shared, shared_dev, CHUNK);
	return NULL;
}

static void *sampler(void *arg)
{
	uint64_t *max = arg;
	while (!atomic_load(&stop)) {
		uint64_t u = atomic_load(&shared.f->dev[shared_dev].used);
		if (u > *max)
			*max = u;
	}
	return NULL;
}

/* Eight threads want up to 1200 each of a 1000 budget: the group never holds more than 1000,
 * takes fail at the budget (one thread alone reaches it), and all is given back at the end. */
static void test_threads(void **state)
{
	(void)state;
	unsigned char u[GP_GROUP_UUID_LEN];
	uuid_of(3, u);
	assert_int_equal(gp_group_join(&shared, at("threads"), why, sizeof why), 0);
	shared_dev = gp_group_device(&shared, u, BUDGET);
	pthread_t t[THREADS], s;
	uint64_t max = 0;
	atomic_store(&stop, false);
	assert_int_equal(pthread_create(&s, NULL, sampler, &max), 0);
	for (uintptr_t i = 0; i < THREADS; i++)
		assert_int_equal(pthread_create(&t[i], NULL, hammer, (void *)(i + 1)), 0);
	for (int i = 0; i < THREADS; i++)
		pthread_join(t[i], NULL);
	atomic_store(&stop, true);
	pthread_join(s, NULL);
	uint64_t budget, used, mine;
	gp_group_total(&shared, shared_dev, &budget, &used, &mine);
	assert_int_equal(used, 0);
	assert_int_equal(mine, 0);
	assert_true(max <= BUDGET);
	assert_int_equal(atomic_load(&shared.f->dev[shared_dev].peak), BUDGET);
	assert_true(atomic_load(&failures) > 0);
	assert_true(atomic_load(&successes) > 0);
	gp_group_leave(&shared);
}

/* ---- processes ---- */

/* Four processes hammer one budget while this one samples the file: never above it. */
static void test_processes(void **state)
{
	(void)state;
	unsigned char u[GP_GROUP_UUID_LEN];
	uuid_of(4, u);
	const char *p = at("procs");
	struct gp_group g;
	assert_int_equal(gp_group_join(&g, p, why, sizeof why), 0);
	int d = gp_group_device(&g, u, BUDGET);
	pid_t kids[4];
	for (int k = 0; k < 4; k++) {
		kids[k] = fork();
		assert_true(kids[k] >= 0);
		if (kids[k] == 0) {
			gp_group_forget(&g);
			if (gp_group_join(&shared, p, why, sizeof why) != 0)
				_exit(2);
			shared_dev = gp_group_device(&shared, u, 1);
			hammer((void *)(uintptr_t)(k + 1));
			gp_group_leave(&shared);
			_exit(0);
		}
	}
	uint64_t max = 0;
	int left = 4;
	while (left) {
		uint64_t used = atomic_load(&g.f->dev[d].used);
		if (used > max)
			max = used;
		int st;
		pid_t w = waitpid(-1, &st, WNOHANG);
		if (w > 0) {
			assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
			left--;
		}
	}
	assert_true(max <= BUDGET);
	assert_true(atomic_load(&g.f->dev[d].peak) <= BUDGET);
	assert_int_equal(atomic_load(&g.f->dev[d].used), 0);
	gp_group_leave(&g);
}

/* A member killed with -9 while holding 700 of 1000: the next take that does not fit
 * returns its share, and the reader saw it dead before. */
static void test_killed_member(void **state)
{
	(void)state;
	unsigned char u[GP_GROUP_UUID_LEN];
	uuid_of(5, u);
	const char *p = at("killed");
	struct gp_group g;
	assert_int_equal(gp_group_join(&g, p, why, sizeof why), 0);
	int d = gp_group_device(&g, u, BUDGET);
	int ready[2];
	assert_int_equal(pipe(ready), 0);
	pid_t kid = fork();
	assert_true(kid >= 0);
	if (kid == 0) {
		struct gp_group k;
		gp_group_forget(&g);
		char c = gp_group_join(&k, p, why, sizeof why) == 0 &&
				 gp_group_take(&k, gp_group_device(&k, u, 0), 700) == 0 ? 'y' : 'n';
		if (write(ready[1], &c, 1) != 1)
			_exit(2);
		pause();
		_exit(0);
	}
	char c = 0;
	assert_int_equal(read(ready[0], &c, 1), 1);
	assert_int_equal(c, 'y');
	assert_int_equal(gp_group_take(&g, d, 300), 0);
	assert_int_equal(kill(kid, SIGKILL), 0);
	int st;
	assert_int_equal(waitpid(kid, &st, 0), kid);
	static struct gp_group_view v;
	assert_int_equal(gp_group_read(p, &v, why, sizeof why), 0);
	assert_int_equal(v.nmembers, 2);
	int dead = v.member[0].pid == kid ? 0 : 1;
	assert_int_equal(v.member[dead].pid, kid);
	assert_int_equal(v.member[dead].alive, 0);
	assert_int_equal(v.member[!dead].alive, 1);
	assert_int_equal(v.member[dead].held[0], 700);
	assert_int_equal(v.dev[0].used, 1000);
	/* the take that does not fit finds the dead member */
	assert_int_equal(gp_group_take(&g, d, 500), 0);
	uint64_t budget, used, mine;
	gp_group_total(&g, d, &budget, &used, &mine);
	assert_int_equal(used, 800);
	assert_int_equal(mine, 800);
	assert_int_equal(atomic_load(&g.f->dev[d].recovered), 700);
	assert_int_equal(gp_group_read(p, &v, why, sizeof why), 0);
	assert_int_equal(v.nmembers, 1);
	assert_int_equal(v.dev[0].recovered, 700);
	assert_int_equal(gp_group_take(&g, d, 500), -ENOMEM);
	gp_group_leave(&g);
	close(ready[0]);
	close(ready[1]);
}

/* A live process that maps the group file `p` (as a member does), until killed; its id. */
static pid_t mapper(const char *p, uint64_t *id)
{
	int ready[2];
	assert_int_equal(pipe(ready), 0);
	pid_t kid = fork();
	if (kid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL); /* none left behind by a failed assertion */
		int fd = open(p, O_RDONLY | O_CLOEXEC);
		void *m = fd < 0 ? MAP_FAILED : mmap(NULL, sizeof(struct gp_group_file), PROT_READ, MAP_SHARED, fd, 0);
		if (m == MAP_FAILED || write(ready[1], "y", 1) != 1)
			_exit(1);
		for (;;)
			pause();
	}
	char c;
	assert_int_equal(read(ready[0], &c, 1), 1);
	close(ready[0]);
	close(ready[1]);
	uint64_t start;
	bool zombie;
	assert_int_equal(gp_proc_start(kid, &start, &zombie), 0);
	*id = (uint64_t)kid | (start / 1000000u) << GP_GROUP_PID_BITS;
	return kid;
}

static void unmapper(pid_t kid)
{
	kill(kid, SIGKILL);
	waitpid(kid, NULL, 0);
}

/* A process that called exec (it runs at its start time but no longer maps the file): its
 * device memory went with its old image, its slot is dead. */
static void test_exec_member(void **state)
{
	(void)state;
	unsigned char u[GP_GROUP_UUID_LEN];
	uuid_of(7, u);
	const char *p = at("exec");
	struct gp_group g;
	assert_int_equal(gp_group_join(&g, p, why, sizeof why), 0);
	int d = gp_group_device(&g, u, BUDGET);
	pid_t pp = getppid(); /* runs, and maps no group file */
	uint64_t start;
	bool zombie;
	assert_int_equal(gp_proc_start(pp, &start, &zombie), 0);
	uint64_t execd = (uint64_t)pp | (start / 1000000u) << GP_GROUP_PID_BITS, live;
	pid_t kid = mapper(p, &live);
	uint64_t ids[2] = {execd, live};
	struct gp_group_member_slot *m[2] = {&g.f->member[20], &g.f->member[21]};
	for (int i = 0; i < 2; i++) {
		atomic_store(&m[i]->id, ids[i]);
		atomic_store(&m[i]->pidns, g.pidns);
		atomic_store(&m[i]->held[d], (atomic_load(&m[i]->gen) & GP_GROUP_GEN_MASK) << GP_GROUP_HELD_BITS | 300);
	}
	atomic_store(&g.f->dev[d].used, 600);
	assert_int_equal(gp_group_recover(&g), 1);
	assert_int_equal(atomic_load(&m[0]->id), 0);
	assert_int_equal(atomic_load(&m[1]->id), live);
	assert_int_equal(atomic_load(&g.f->dev[d].used), 300);
	atomic_store(&m[1]->id, 0);
	unmapper(kid);
	gp_group_leave(&g);
}

/* A slot whose pid now names another process (its start time differs) is dead; one that
 * names a live process at its start time is not; a joining member returns the first. */
static void test_reused_pid(void **state)
{
	(void)state;
	unsigned char u[GP_GROUP_UUID_LEN];
	uuid_of(6, u);
	const char *p = at("reused");
	struct gp_group g;
	assert_int_equal(gp_group_join(&g, p, why, sizeof why), 0);
	int d = gp_group_device(&g, u, BUDGET);
	uint64_t live;
	pid_t pp = mapper(p, &live);
	uint64_t reused = live + ((uint64_t)5000 << GP_GROUP_PID_BITS);
	uint64_t ids[2] = {live, reused};
	struct gp_group_member_slot *m[2] = {&g.f->member[10], &g.f->member[11]};
	for (int i = 0; i < 2; i++) {
		atomic_store(&m[i]->id, ids[i]);
		atomic_store(&m[i]->pidns, g.pidns);
		atomic_store(&m[i]->held[d], (atomic_load(&m[i]->gen) & GP_GROUP_GEN_MASK) << GP_GROUP_HELD_BITS | 200);
	}
	atomic_store(&g.f->dev[d].used, 400);
	/* a slot of another pid namespace is never judged */
	atomic_store(&g.f->member[12].id, reused);
	atomic_store(&g.f->member[12].pidns, g.pidns + 1);
	gp_group_leave(&g);
	assert_int_equal(gp_group_join(&g, p, why, sizeof why), 0); /* the join looks */
	assert_int_equal(atomic_load(&g.f->member[10].id), live);
	assert_int_equal(atomic_load(&g.f->member[11].id), 0);
	assert_int_equal(atomic_load(&g.f->member[12].id), reused);
	assert_int_equal(atomic_load(&g.f->dev[d].used), 200);
	assert_int_equal(gp_group_recover(&g), 0);
	atomic_store(&g.f->member[10].id, 0);
	atomic_store(&g.f->member[12].id, 0);
	unmapper(pp);
	gp_group_leave(&g);
}

/* Every member slot held by a live process: the join says so and changes nothing. */
static void test_full(void **state)
{
	(void)state;
	const char *p = at("full");
	struct gp_group g;
	assert_int_equal(gp_group_join(&g, p, why, sizeof why), 0);
	uint64_t live;
	pid_t pp = mapper(p, &live);
	for (unsigned i = 0; i < GP_GROUP_MEMBERS; i++) {
		if (i == g.me)
			continue;
		atomic_store(&g.f->member[i].id, live);
		atomic_store(&g.f->member[i].pidns, g.pidns);
	}
	struct gp_group h;
	pid_t kid = fork();
	if (kid == 0) {
		gp_group_forget(&g);
		_exit(gp_group_join(&h, p, why, sizeof why) == -ENOSPC && strstr(why, "member slots") ? 0 : 1);
	}
	int st;
	assert_int_equal(waitpid(kid, &st, 0), kid);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	for (unsigned i = 0; i < GP_GROUP_MEMBERS; i++)
		if (i != g.me)
			atomic_store(&g.f->member[i].id, 0);
	unmapper(pp);
	gp_group_leave(&g);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_create),
		cmocka_unit_test(test_empty_file),
		cmocka_unit_test(test_join_race),
		cmocka_unit_test(test_refused_files),
		cmocka_unit_test(test_refused_kinds),
		cmocka_unit_test(test_planted_file),
		cmocka_unit_test(test_hard_link),
		cmocka_unit_test(test_link_race),
		cmocka_unit_test(test_devices),
		cmocka_unit_test(test_take_give),
		cmocka_unit_test(test_slot_lost),
		cmocka_unit_test(test_retire),
		cmocka_unit_test(test_threads),
		cmocka_unit_test(test_processes),
		cmocka_unit_test(test_killed_member),
		cmocka_unit_test(test_reused_pid),
		cmocka_unit_test(test_full),
		cmocka_unit_test(test_exec_member),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
