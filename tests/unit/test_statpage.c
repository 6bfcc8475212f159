/* Tests of the statistics page (statpage.c): the header and mode of a new page, slots,
 * a forked writer driving pools on the fake backend while the parent checks every
 * snapshot, kill -9 -> stale -> cleaned, a reader fuzzed with thousands of corrupt,
 * truncated and odd files, and the release request round trip. Pages live in a private
 * GPUPOOL_SHM_DIR. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "stat_writer.h"
#include "format.h"
#include "statpage.h"
#include "stats.h"

static char dir[64];
static int dfd = -1;

static int group_setup(void **state)
{
	(void)state;
	snprintf(dir, sizeof dir, "/tmp/gp_statpage_XXXXXX");
	if (!mkdtemp(dir))
		return -1;
	setenv(GP_STATPAGE_DIR_ENV, dir, 1);
	dfd = open(dir, O_RDONLY | O_DIRECTORY);
	return dfd < 0 ? -1 : 0;
}

static int group_teardown(void **state)
{
	(void)state;
	char cmd[128];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	close(dfd);
	return system(cmd) == 0 ? 0 : -1;
}

static void page_name(char *buf, size_t cap, int pid) { snprintf(buf, cap, "gpupool.%d", pid); }

static void test_open_header(void **state)
{
	(void)state;
	struct gpupool_page *pg = gp_statpage_open();
	assert_non_null(pg);
	assert_null(gp_statpage_open()); /* one page per process */
	char name[32], comm[32] = {0};
	page_name(name, sizeof name, getpid());
	struct stat st;
	assert_int_equal(fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW), 0);
	assert_int_equal(st.st_mode & 07777, 0600);
	assert_true(S_ISREG(st.st_mode));
	assert_int_equal(st.st_size, sizeof(struct gpupool_page));
	assert_int_equal(pg->magic, GPUPOOL_PAGE_MAGIC);
	assert_int_equal(pg->version, GPUPOOL_PAGE_VERSION);
	assert_int_equal(pg->size, sizeof(struct gpupool_page));
	assert_int_equal(pg->pid, getpid());
	assert_int_equal(pg->ndevices, 0);
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	uint64_t ns = (uint64_t)now.tv_sec * 1000000000ull + (uint64_t)now.tv_nsec;
	assert_true(pg->start_time_ns <= ns && pg->start_time_ns + 5000000000ull > ns);
	FILE *f = fopen("/proc/self/comm", "r");
	assert_non_null(fgets(comm, sizeof comm, f));
	fclose(f);
	comm[strcspn(comm, "\n")] = '\0';
	assert_string_equal(pg->comm, comm);
	/* the writer's version, "MAJOR.MINOR.PATCH", NUL-terminated inside its slot */
	assert_true(pg->lib_version[0] >= '0' && pg->lib_version[0] <= '9');
	assert_non_null(memchr(pg->lib_version, '\0', sizeof pg->lib_version));

	struct gpupool_device_stats *a = gp_statpage_slot(pg, 3), *b = gp_statpage_slot(pg, 0);
	assert_non_null(a);
	assert_non_null(b);
	assert_ptr_equal(gp_statpage_slot(pg, 3), a);
	assert_null(gp_statpage_slot(pg, -1));
	assert_int_equal(pg->ndevices, 2);
	assert_int_equal(a->device, 3);
	assert_int_equal(a->active, 1);
	assert_int_equal(a->seq % 2, 0);

	struct gp_statpage_info *info = calloc(1, sizeof *info);
	char why[256];
	assert_int_equal(gp_statpage_read(dfd, name, geteuid(), 0, info, why, sizeof why), 0);
	assert_false(info->stale);
	assert_int_equal(info->page.ndevices, 2);
	assert_int_equal(info->page.dev[0].device, 3);
	/* not owned by that uid: one line, skipped */
	assert_int_equal(gp_statpage_read(dfd, name, 4242, 0, info, why, sizeof why), -EACCES);
	assert_non_null(strstr(why, "owned by uid"));
	/* clean keeps a live page */
	assert_int_equal(gp_statpage_clean_one(dfd, name, geteuid(), why, sizeof why), 0);
	free(info);

	gp_statpage_close(pg);
	assert_int_equal(fstatat(dfd, name, &st, 0), -1);
	assert_int_equal(errno, ENOENT);

	/* a leftover of a dead process with our pid is replaced; a slot table fills up */
	int fd = openat(dfd, name, O_CREAT | O_WRONLY, 0600);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "junk", 4), 4);
	close(fd);
	pg = gp_statpage_open();
	assert_non_null(pg);
	for (int d = 0; d < GPUPOOL_MAX_DEVICES; d++)
		assert_non_null(gp_statpage_slot(pg, d + 100));
	assert_null(gp_statpage_slot(pg, 7));
	gp_statpage_close(pg);
}

struct snapcheck {
	struct gpupool_device_stats prev[2];
	int n;
};

/* What must hold in every snapshot a reader takes of a pool's slot. */
static void check_slot(const struct gpupool_device_stats *s, struct gpupool_device_stats *prev)
{
	assert_int_equal(s->seq % 2, 0);
	assert_true(s->allocated_bytes <= s->reserved_bytes);
	assert_true(s->requested_bytes <= s->allocated_bytes);
	assert_true(s->largest_free_block <= s->reserved_bytes);
#define CHECK_GAUGE_(n, u, h)                                                                       \
	assert_true(s->n##_peak >= s->n);                                                           \
	assert_true(s->n##_peak >= prev->n##_peak);
#define CHECK_COUNTER_(n, u, h) assert_true(s->n >= prev->n);
	GPUPOOL_GAUGES(CHECK_GAUGE_)
	GPUPOOL_COUNTERS(CHECK_COUNTER_)
	assert_true(s->seq >= prev->seq);
	*prev = *s;
}

/* Forks a child that never outlives the test, even when it fails an assertion. In the
 * child: returns 0 with *fd the end to call child_ready on. In the parent: returns the
 * child's pid once it is ready, with *fd the other end (the caller closes it). */
static pid_t fork_ready(int *fd)
{
	int p[2];
	assert_int_equal(pipe(p), 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		alarm(60);
		close(p[0]);
		*fd = p[1];
		return 0;
	}
	close(p[1]);
	char c;
	assert_int_equal(read(p[0], &c, 1), 1);
	*fd = p[0];
	return pid;
}

static void child_ready(int fd)
{
	if (write(fd, "r", 1) != 1)
		_exit(4);
}

static pid_t spawn_writer(bool answer, int *ready_fd)
{
	pid_t pid = fork_ready(ready_fd);
	if (pid == 0) {
		struct gpupool_page *pg = gp_statpage_open();
		static struct gp_test_writer w;
		if (!pg || gp_test_writer_init(&w, pg, (unsigned)getpid()) != 0)
			_exit(3);
		w.answer_release = answer;
		for (int i = 0; i < 200; i++)
			gp_test_writer_step(&w, pg);
		child_ready(*ready_fd);
		for (long i = 0;; i++) {
			gp_test_writer_step(&w, pg);
			if (!answer && i > 1000) {
				struct timespec nap = {0, 1000000};
				nanosleep(&nap, NULL);
			}
		}
	}
	return pid;
}

static void test_writer_under_load(void **state)
{
	(void)state;
	int rfd;
	pid_t pid = spawn_writer(true, &rfd);
	char name[32], why[256];
	page_name(name, sizeof name, pid);
	struct gp_statpage_info *info = calloc(1, sizeof *info);
	struct gpupool_device_stats prev[2];
	memset(prev, 0, sizeof prev);
	uint64_t first_allocs = 0, last_allocs = 0;
	int reads = 0, busy = 0;
	struct timespec t0, t;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	do {
		assert_int_equal(gp_statpage_read(dfd, name, geteuid(), 0, info, why, sizeof why), 0);
		assert_false(info->stale);
		clock_gettime(CLOCK_MONOTONIC, &t);
		if (info->inconsistent) {
			/* the writer was preempted mid-update for longer than the reader waits
			 * (~10 ms): it happens on a loaded machine; the next read sees it again */
			busy++;
			continue;
		}
		assert_int_equal(info->page.ndevices, 2);
		for (int d = 0; d < 2; d++) {
			assert_int_equal(info->page.dev[d].device, d);
			check_slot(&info->page.dev[d], &prev[d]);
		}
		last_allocs = info->page.dev[0].allocs + info->page.dev[1].allocs;
		if (!reads)
			first_allocs = last_allocs;
		reads++;
	} while ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 < 1500);
	print_message("%d snapshots (%d more found the writer mid-update) while it made %llu allocations\n", reads,
		      busy, (unsigned long long)(last_allocs - first_allocs));
	assert_true(reads >= 10 && busy < reads);
	assert_true(last_allocs > first_allocs);
	assert_true(prev[0].segment_allocs > 0 && prev[1].hits > 0);

	/* kill -9 mid-run: a zombie already counts as stale, and clean removes the page */
	assert_int_equal(kill(pid, SIGKILL), 0);
	for (int i = 0; i < 1000; i++) {
		siginfo_t si;
		memset(&si, 0, sizeof si);
		assert_int_equal(waitid(P_PID, (id_t)pid, &si, WEXITED | WNOWAIT), 0);
		if (si.si_pid == pid)
			break;
	}
	int rc = gp_statpage_read(dfd, name, geteuid(), 0, info, why, sizeof why);
	assert_int_equal(rc, 0); /* a slot may be inconsistent if killed mid-update */
	assert_true(info->stale);
	assert_int_equal(waitpid(pid, NULL, 0), pid);
	assert_int_equal(gp_statpage_read(dfd, name, geteuid(), 0, info, why, sizeof why), 0);
	assert_true(info->stale);
	assert_int_equal(gp_statpage_clean_one(dfd, name, geteuid(), why, sizeof why), 1);
	assert_non_null(strstr(why, "removed"));
	assert_int_equal(gp_statpage_read(dfd, name, geteuid(), 0, info, why, sizeof why), -ENOENT);
	close(rfd);
	free(info);
}

static void test_inconsistent_slot(void **state)
{
	(void)state;
	static struct gpupool_page pg;
	memset(&pg, 0, sizeof pg);
	gp_statpage_init(&pg);
	pg.pid = 4000001; /* above any pid_max: dead */
	struct gpupool_device_stats *s = gp_statpage_slot(&pg, 0);
	gp_statpage_slot(&pg, 1)->allocs = 9;
	gp_stats_begin(s); /* the writer "died" here */
	int fd = openat(dfd, "gpupool.4000001", O_CREAT | O_WRONLY | O_TRUNC, 0600);
	assert_int_equal(write(fd, &pg, sizeof pg), (ssize_t)sizeof pg);
	close(fd);
	struct gp_statpage_info *info = calloc(1, sizeof *info);
	char why[256];
	assert_int_equal(gp_statpage_read(dfd, "gpupool.4000001", geteuid(), 0, info, why, sizeof why), 0);
	assert_int_equal(info->inconsistent, 1);
	assert_true(info->stale);
	assert_int_equal(info->page.dev[1].allocs, 9);
	char out[4096];
	struct gp_format_out o;
	struct gp_format_proc p = {.page = &info->page, .stale = info->stale, .inconsistent = info->inconsistent, .rates = NULL};
	gp_format_to_buf(&o, out, sizeof out);
	gp_format_table(&o, &p, 1);
	gp_format_flush(&o);
	assert_non_null(strstr(out, "inconsistent (writer died mid-update?)"));
	assert_int_equal(gp_statpage_clean_one(dfd, "gpupool.4000001", geteuid(), why, sizeof why), 1);
	free(info);
}

/* Runs the reader, the formatters and clean on whatever `name` is now. */
static int poke(const char *name, struct gp_statpage_info *info)
{
	char why[512], out[1 << 14];
	why[0] = '\0';
	int rc = gp_statpage_read(dfd, name, geteuid(), 0, info, why, sizeof why);
	if (rc == 0) {
		struct gp_format_proc p = {.page = &info->page, .stale = info->stale, .inconsistent = info->inconsistent, .rates = NULL};
		struct gp_format_out o;
		gp_format_to_buf(&o, out, sizeof out);
		gp_format_table(&o, &p, 1);
		gp_format_detail(&o, &p);
		gp_format_json(&o, &p, 1);
		gp_format_prometheus(&o, &p, 1, NULL, 0, "0.0.0", false);
		gp_format_report(&o, &info->page);
		gp_format_flush(&o);
		assert_true(info->page.ndevices <= GPUPOOL_MAX_DEVICES);
		assert_int_equal(info->page.magic, GPUPOOL_PAGE_MAGIC);
	} else {
		assert_true(rc < 0);
		assert_true(strlen(why) > 0);
		assert_null(strchr(why, '\n'));
	}
	return rc;
}

static void write_file(const char *name, const void *buf, size_t len)
{
	int fd = openat(dfd, name, O_CREAT | O_WRONLY | O_TRUNC | O_NOFOLLOW, 0600);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, buf, len), (ssize_t)len);
	close(fd);
}

static void test_fuzz_reader(void **state)
{
	(void)state;
	const int pid = 4000002;
	const char *name = "gpupool.4000002";
	size_t size = sizeof(struct gpupool_page);
	unsigned char *valid = calloc(1, size), *buf = malloc(2 * size + 16);
	struct gpupool_page *pg = (struct gpupool_page *)valid;
	gp_statpage_init(pg);
	pg->pid = pid;
	static struct gp_test_writer w;
	assert_int_equal(gp_test_writer_init(&w, pg, 7), 0);
	for (int i = 0; i < 500; i++)
		gp_test_writer_step(&w, pg);
	struct gp_statpage_info *info = calloc(1, sizeof *info);
	write_file(name, valid, size);
	assert_int_equal(poke(name, info), 0);
	assert_true(info->stale);

	unsigned seed = 12345;
	int ok = 0, bad = 0;
	for (int it = 0; it < 6000; it++) {
		unsigned r = (unsigned)rand_r(&seed);
		size_t len;
		switch (it % 4) {
		case 0: /* random bytes of a random length, sometimes exactly a layout's size */
			len = r % 3 == 0 ? size : r % 5 == 1 ? gp_statpage_size_of(2) : (size_t)rand_r(&seed) % (2 * size + 16);
			for (size_t i = 0; i < len; i++)
				buf[i] = (unsigned char)rand_r(&seed);
			if (len >= 8 && r % 2)
				memcpy(buf, &pg->magic, 8);
			break;
		case 1: /* bit flips of a valid page, header-heavy */
		case 2:
			len = size;
			memcpy(buf, valid, size);
			for (int k = 0, nflip = 1 + (int)(r % 8); k < nflip; k++) {
				size_t bit = (size_t)rand_r(&seed) % (it % 4 == 1 ? 64 * 8 : size * 8);
				buf[bit / 8] ^= (unsigned char)(1u << (bit % 8));
			}
			break;
		default: { /* every truncation length class */
			static const size_t classes[] = {0, 1, 7, 8, 9, 16, 24, 63, 64};
			size_t hdr = offsetof(struct gpupool_page, dev);
			size_t c = (size_t)it / 4 % 14;
			len = c < 9 ? classes[c] : c == 9 ? hdr - 1 : c == 10 ? hdr : c == 11 ? size - 1
			      : c == 12 ? size + 1 : (size_t)rand_r(&seed) % size;
			memcpy(buf, valid, size);
			memset(buf + size, 0xa5, size + 16);
			break;
		}
		}
		write_file(name, buf, len);
		if (poke(name, info) == 0)
			ok++;
		else
			bad++;
		char why[512];
		int rc = gp_statpage_clean_one(dfd, name, geteuid(), why, sizeof why);
		assert_int_equal(rc, 1); /* pid is dead: any regular file of ours goes */
	}
	print_message("fuzz: %d pages accepted, %d rejected\n", ok, bad);
	assert_true(ok > 100 && bad > 1000);

	/* things that are not regular files, and names that are not pages */
	char why[512];
	write_file("target", valid, size);
	assert_int_equal(symlinkat("target", dfd, name), 0);
	assert_int_equal(poke(name, info), -EINVAL);
	assert_int_equal(gp_statpage_clean_one(dfd, name, geteuid(), why, sizeof why), 0);
	assert_int_equal(unlinkat(dfd, name, 0), 0);
	assert_int_equal(symlinkat("/dev/zero", dfd, name), 0);
	assert_int_equal(poke(name, info), -EINVAL);
	assert_int_equal(unlinkat(dfd, name, 0), 0);
	assert_int_equal(mkdirat(dfd, name, 0700), 0);
	assert_int_equal(poke(name, info), -EINVAL);
	assert_int_equal(gp_statpage_clean_one(dfd, name, geteuid(), why, sizeof why), 0);
	assert_int_equal(unlinkat(dfd, name, AT_REMOVEDIR), 0);
	assert_int_equal(mkfifoat(dfd, name, 0600), 0);
	assert_int_equal(poke(name, info), -EINVAL); /* and never blocks opening it */
	assert_non_null(strstr(why, "") );
	assert_int_equal(unlinkat(dfd, name, 0), 0);
	int sk = socket(AF_UNIX, SOCK_STREAM, 0);
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	snprintf(sa.sun_path, sizeof sa.sun_path, "%s/%s", dir, name);
	assert_int_equal(bind(sk, (struct sockaddr *)&sa, sizeof sa), 0);
	assert_int_equal(poke(name, info), -EINVAL);
	close(sk);
	assert_int_equal(unlinkat(dfd, name, 0), 0);
	if (geteuid() == 0) { /* owned by nobody, of a dead pid: nobody can vouch for it */
		write_file(name, valid, size);
		assert_int_equal(fchownat(dfd, name, 65534, 65534, 0), 0);
		assert_int_equal(poke(name, info), -ESRCH);
		assert_int_equal(gp_statpage_read(dfd, name, 1000, 0, info, why, sizeof why), -EACCES);
		assert_non_null(strstr(why, "owned by uid 65534"));
		assert_int_equal(gp_statpage_clean_one(dfd, name, 1000, why, sizeof why), 0);
		assert_int_equal(unlinkat(dfd, name, 0), 0);
	}
	static const char *const names[] = {"gpupool.0", "gpupool.-1", "gpupool.012", "gpupool.99999999999",
					    "gpupool.", "gpupool.12x", "gpupool", "xgpupool.1"};
	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
		assert_int_equal(gp_statpage_name_pid(names[i]), -1);
		assert_int_equal(gp_statpage_read(dfd, names[i], 0, 0, info, why, sizeof why), -EINVAL);
	}
	assert_int_equal(gp_statpage_name_pid("gpupool.2147483647"), 2147483647);
	/* the pid in the page must match the name */
	write_file("gpupool.4000003", valid, size);
	assert_int_equal(poke("gpupool.4000003", info), -EBADMSG);
	assert_int_equal(unlinkat(dfd, "gpupool.4000003", 0), 0);
	unlinkat(dfd, "target", 0);
	free(info);
	free(valid);
	free(buf);
}

/* pg in an older layout, at most sizeof *pg bytes into out; returns its size: version 4's
 * (each slot's prefix before the version 5 fields), version 3's (its prefix before the
 * version 4 fields) or version 2's (that prefix less its uuid). */
static size_t to_older(const struct gpupool_page *pg, unsigned char *out, uint32_t version)
{
	size_t hdr = offsetof(struct gpupool_page, dev), head = offsetof(struct gpupool_device_stats, uuid);
	size_t v3 = offsetof(struct gpupool_device_stats, unpooled_bytes);
	size_t v4 = offsetof(struct gpupool_device_stats, waiting_bytes);
	size_t slot = version == 2 ? v3 - GPUPOOL_UUID_LEN : version == 3 ? v3 : v4;
	uint32_t size = (uint32_t)gp_statpage_size_of(version);
	assert_int_equal(size, hdr + GPUPOOL_MAX_DEVICES * slot);
	memset(out, 0, sizeof *pg);
	memcpy(out, pg, hdr);
	memcpy(out + offsetof(struct gpupool_page, version), &version, sizeof version);
	memcpy(out + offsetof(struct gpupool_page, size), &size, sizeof size);
	for (int i = 0; i < GPUPOOL_MAX_DEVICES; i++) {
		const char *d = (const char *)&pg->dev[i];
		if (version >= 3) {
			memcpy(out + hdr + (size_t)i * slot, d, slot);
			continue;
		}
		memcpy(out + hdr + (size_t)i * slot, d, head); /* the slot less its uuid */
		memcpy(out + hdr + (size_t)i * slot + head, d + head + GPUPOOL_UUID_LEN, slot - head);
	}
	return size;
}

/* The fields a slot of an older layout lacks, zeroed in `s`. */
static void zero_newer(struct gpupool_device_stats *s, uint32_t version)
{
	size_t since = version == 4 ? offsetof(struct gpupool_device_stats, waiting_bytes)
				    : offsetof(struct gpupool_device_stats, unpooled_bytes);
	memset((char *)s + since, 0, sizeof *s - since);
	if (version == 2)
		memset(s->uuid, 0, sizeof s->uuid);
}

/* The uuid of each slot (gp_statpage_set_uuid), and the layouts a reader takes: the current
 * one and version 2's (the same slots less their uuid), each only at its own size; other
 * versions are refused with a line that names them. */
static void test_uuid_and_layouts(void **state)
{
	(void)state;
	static struct gpupool_page pg, copy;
	static unsigned char v2[sizeof(struct gpupool_page)];
	static struct gp_statpage_info info;
	static struct gp_test_writer w;
	char why[512];
	unsigned char u[GPUPOOL_UUID_LEN];
	const size_t v2size = gp_statpage_size_of(2);
	assert_int_equal(gp_statpage_size_of(GPUPOOL_PAGE_VERSION), sizeof pg);
	assert_int_equal(v2size, gp_statpage_size_of(3) - GPUPOOL_MAX_DEVICES * GPUPOOL_UUID_LEN);
	assert_int_equal(gp_statpage_size_of(1), 0);
	assert_int_equal(gp_statpage_size_of(GPUPOOL_PAGE_VERSION + 1), 0);

	/* the writer's uuids, set under the slot's counter; a slot is activated for one */
	gp_statpage_init(&pg);
	pg.pid = 4000004;
	assert_int_equal(gp_test_writer_init(&w, &pg, 3), 0);
	for (int i = 0; i < 200; i++)
		gp_test_writer_step(&w, &pg);
	for (int d = 0; d < 2; d++) {
		gp_test_writer_uuid(d, u);
		assert_memory_equal(pg.dev[d].uuid, u, sizeof u);
		assert_int_equal(pg.dev[d].seq % 2, 0);
	}
	assert_int_equal(gp_statpage_set_uuid(&pg, 5, u), 0);
	assert_int_equal(pg.ndevices, 3);
	assert_int_equal(pg.dev[2].device, 5);
	assert_memory_equal(pg.dev[2].uuid, u, sizeof u);
	assert_int_equal(gp_statpage_set_uuid(NULL, 0, u), -EINVAL);
	assert_int_equal(gp_statpage_set_uuid(&pg, -1, u), -EINVAL);
	assert_int_equal(gp_statpage_set_uuid(&pg, 0, NULL), -EINVAL);
	for (int d = 0; d < GPUPOOL_MAX_DEVICES; d++)
		gp_statpage_slot(&pg, 100 + d);
	assert_int_equal(gp_statpage_set_uuid(&pg, 99, u), -ENOSPC);
	/* the device's name, cut to the field and NUL-terminated, under the slot's counter */
	assert_int_equal(gp_statpage_set_device_name(&pg, 0, "NVIDIA H100 80GB HBM3"), 0);
	assert_string_equal(pg.dev[0].device_name, "NVIDIA H100 80GB HBM3");
	assert_int_equal(pg.dev[0].seq % 2, 0);
	char longname[200];
	memset(longname, 'x', sizeof longname - 1);
	longname[sizeof longname - 1] = '\0';
	assert_int_equal(gp_statpage_set_device_name(&pg, 1, longname), 0);
	assert_int_equal(strnlen(pg.dev[1].device_name, GPUPOOL_DEVICE_NAME_LEN), GPUPOOL_DEVICE_NAME_LEN - 1);
	assert_int_equal(gp_statpage_set_device_name(&pg, 99, "x"), -ENOSPC);
	assert_int_equal(gp_statpage_set_device_name(&pg, 0, NULL), -EINVAL);
	/* the version 5 figures (the wait queue's) come back from a file like the others */
	pg.dev[0].waiting_bytes = 1u << 20;
	pg.dev[0].waits = 3;
	pg.dev[0].wait_started_ns = 12345;
	pg.dev[0].floor_bytes = 2u << 20;

	/* the current layout in a file: every byte comes back, uuids included */
	write_file("gpupool.4000004", &pg, sizeof pg);
	assert_int_equal(gp_statpage_read(dfd, "gpupool.4000004", geteuid(), 0, &info, why, sizeof why), 0);
	assert_memory_equal(&info.page, &pg, sizeof pg);

	/* the older layouts: the same figures, the fields they lack zero, the header as it is */
	for (uint32_t v = 2; v <= 4; v++) {
		size_t n = to_older(&pg, v2, v);
		write_file("gpupool.4000004", v2, n);
		assert_int_equal(gp_statpage_read(dfd, "gpupool.4000004", geteuid(), 0, &info, why, sizeof why), 0);
		assert_int_equal(info.page.version, v);
		assert_int_equal(info.page.size, n);
		assert_int_equal(info.page.ndevices, pg.ndevices);
		for (uint32_t d = 0; d < pg.ndevices; d++) {
			struct gpupool_device_stats want = pg.dev[d];
			zero_newer(&want, v);
			assert_memory_equal(&info.page.dev[d], &want, sizeof want);
			assert_int_equal(info.page.dev[d].allocs, pg.dev[d].allocs); /* a field after the uuid */
		}
		/* in memory, an image of exactly that size (a read past it is ASan's to see) */
		unsigned char *img = malloc(n);
		memcpy(img, v2, n);
		uint32_t bad;
		assert_int_equal(gp_statpage_validate(img, n, "gpupool.4000004", 0, &copy, &bad, why, sizeof why), 0);
		assert_memory_equal(&copy, &info.page, sizeof copy);
		assert_int_equal(gp_statpage_copy_image(img, n, &copy, 0), 0);
		assert_memory_equal(&copy, &info.page, sizeof copy);
		assert_int_equal(gp_statpage_copy_image(img, n - 8, &copy, 0), 0);
		assert_int_equal(copy.ndevices, 0); /* a length of no layout: no slot */
		free(img);
	}

	/* each layout only at its own size; versions 1 and 6 named */
	char want[160];
	const size_t v3size = gp_statpage_size_of(3);
	size_t n = to_older(&pg, v2, 2);
	write_file("gpupool.4000004", &pg, v2size);
	assert_int_equal(gp_statpage_read(dfd, "gpupool.4000004", geteuid(), 0, &info, why, sizeof why), -EBADMSG);
	snprintf(want, sizeof want, "page version %u in %zu bytes, expected %zu", GPUPOOL_PAGE_VERSION, v2size, sizeof pg);
	assert_non_null(strstr(why, want));
	memcpy(&copy, v2, offsetof(struct gpupool_page, dev));
	write_file("gpupool.4000004", &copy, sizeof copy);
	assert_int_equal(gp_statpage_read(dfd, "gpupool.4000004", geteuid(), 0, &info, why, sizeof why), -EBADMSG);
	snprintf(want, sizeof want, "page version 2 in %zu bytes, expected %zu", sizeof copy, v2size);
	assert_non_null(strstr(why, want));
	write_file("gpupool.4000004", &copy, v3size);
	assert_int_equal(gp_statpage_read(dfd, "gpupool.4000004", geteuid(), 0, &info, why, sizeof why), -EBADMSG);
	snprintf(want, sizeof want, "page version 2 in %zu bytes, expected %zu", v3size, v2size);
	assert_non_null(strstr(why, want));
	struct gpupool_page *h = (struct gpupool_page *)(void *)v2;
	h->version = 1;
	write_file("gpupool.4000004", v2, n);
	assert_int_equal(gp_statpage_read(dfd, "gpupool.4000004", geteuid(), 0, &info, why, sizeof why), -EPROTO);
	snprintf(want, sizeof want, "page version 1, this tool reads 2 to %u", GPUPOOL_PAGE_VERSION);
	assert_non_null(strstr(why, want));
	copy = pg;
	copy.version = GPUPOOL_PAGE_VERSION + 1;
	write_file("gpupool.4000004", &copy, sizeof copy);
	assert_int_equal(gp_statpage_read(dfd, "gpupool.4000004", geteuid(), 0, &info, why, sizeof why), -EPROTO);
	write_file("gpupool.4000004", &pg, v2size + 8);
	assert_int_equal(gp_statpage_read(dfd, "gpupool.4000004", geteuid(), 0, &info, why, sizeof why), -EBADMSG);
	snprintf(want, sizeof want, "wrong size (%zu bytes, expected %zu, or %zu/%zu/%zu for versions 4/3/2)",
		 v2size + 8, sizeof pg, gp_statpage_size_of(4), v3size, v2size);
	assert_non_null(strstr(why, want));
	assert_int_equal(unlinkat(dfd, "gpupool.4000004", 0), 0);

	/* a release request to a version 2 page (a process of an older library): our own pid */
	char name[32];
	struct gpupool_page *m = NULL;
	size_t mlen = 0;
	uint64_t req = 0;
	h->version = 2;
	h->pid = getpid();
	page_name(name, sizeof name, getpid());
	write_file(name, v2, n);
	assert_int_equal(gp_statpage_request_release(dfd, getpid(), geteuid(), &m, &mlen, &req, why, sizeof why), 0);
	assert_int_equal(mlen, v2size);
	assert_int_equal(req, 1);
	assert_int_equal(gp_statpage_copy_image(m, mlen, &copy, 0), 0);
	assert_int_equal(copy.release_request, 1);
	assert_int_equal(copy.dev[1].allocs, pg.dev[1].allocs);
	gp_statpage_unmap(m, mlen);
	assert_int_equal(unlinkat(dfd, name, 0), 0);
}

/* A valid page of `pid` (one active slot) at `name`, owned by the caller. */
static void write_page(const char *name, int pid)
{
	static struct gpupool_page pg;
	memset(&pg, 0, sizeof pg);
	gp_statpage_init(&pg);
	pg.pid = pid;
	gp_statpage_slot(&pg, 0)->reserved_bytes = 80ull << 30;
	write_file(name, &pg, sizeof pg);
}

static int read_rc(const char *name, uid_t uid, char *why, size_t wl)
{
	static struct gp_statpage_info info;
	why[0] = '\0';
	return gp_statpage_read(dfd, name, uid, 0, &info, why, wl);
}

/* A page counts only when its file's owner is the owner of the process its name gives
 * (fstat on the descriptor against /proc/<pid>); a page of a process that is gone counts
 * only when it is the reader's own file. As root, files are chowned to nobody to forge
 * them and a child runs as nobody; otherwise pid 1 (root's) is the other user's process. */
static void test_owner_rule(void **state)
{
	(void)state;
	char why[512], name[32];
	struct gpupool_page *m = NULL;
	size_t mlen = 0;
	uint64_t req;
	bool root = geteuid() == 0;
	const uid_t nobody = 65534;

	/* our own process: counts */
	page_name(name, sizeof name, getpid());
	write_page(name, getpid());
	assert_int_equal(read_rc(name, geteuid(), why, sizeof why), 0);
	if (root) { /* forged: owned by nobody, claiming this (root's) process */
		assert_int_equal(fchownat(dfd, name, nobody, nobody, 0), 0);
		assert_int_equal(read_rc(name, 0, why, sizeof why), -EPERM);
		assert_non_null(strstr(why, "not owned by the user of process"));
		assert_int_equal(gp_statpage_request_release(dfd, getpid(), 0, &m, &mlen, &req, why, sizeof why), -EPERM);
	}
	assert_int_equal(unlinkat(dfd, name, 0), 0);

	/* "init-forged": a page of ours claiming pid 1, which is root's */
	if (!root) {
		write_page("gpupool.1", 1);
		assert_int_equal(read_rc("gpupool.1", geteuid(), why, sizeof why), -EPERM);
		assert_non_null(strstr(why, "not owned by the user of process 1"));
		assert_int_equal(read_rc("gpupool.1", 0, why, sizeof why), -EPERM);
		assert_int_equal(gp_statpage_request_release(dfd, 1, geteuid(), &m, &mlen, &req, why, sizeof why), -EPERM);
		assert_int_equal(unlinkat(dfd, "gpupool.1", 0), 0);
	} else {
		/* a process of another user: root's file claiming it is forged, its user's is not */
		int fd;
		pid_t child = fork_ready(&fd);
		if (child == 0) {
			if (setgid(nobody) != 0 || setuid(nobody) != 0)
				_exit(3);
			/* setuid clears the dumpable flag, which makes /proc/<pid> root's */
			prctl(PR_SET_DUMPABLE, 1);
			child_ready(fd);
			pause();
			_exit(0);
		}
		close(fd);
		page_name(name, sizeof name, child);
		write_page(name, child);
		assert_int_equal(read_rc(name, 0, why, sizeof why), -EPERM);
		assert_int_equal(gp_statpage_request_release(dfd, child, 0, &m, &mlen, &req, why, sizeof why), -EPERM);
		assert_int_equal(fchownat(dfd, name, nobody, nobody, 0), 0);
		assert_int_equal(read_rc(name, 0, why, sizeof why), 0);
		assert_int_equal(gp_statpage_request_release(dfd, child, 0, &m, &mlen, &req, why, sizeof why), 0);
		gp_statpage_unmap(m, mlen);
		assert_int_equal(unlinkat(dfd, name, 0), 0);
		kill(child, SIGKILL);
		waitpid(child, NULL, 0);
	}

	/* a process that is gone: the reader's own leftover counts (stale); another user's
	 * file cannot be checked against anything and is skipped */
	write_page("gpupool.5000010", 5000010);
	assert_int_equal(read_rc("gpupool.5000010", geteuid(), why, sizeof why), 0);
	if (root) /* root reads it: the file must be root's */
		assert_int_equal(fchownat(dfd, "gpupool.5000010", nobody, nobody, 0), 0);
	assert_int_equal(read_rc("gpupool.5000010", 0, why, sizeof why), -ESRCH);
	assert_non_null(strstr(why, "process 5000010 is gone"));
	assert_int_equal(unlinkat(dfd, "gpupool.5000010", 0), 0);

	/* the reasons callers count */
	assert_int_equal(gp_statpage_skip_of(-EPERM), GP_SKIP_FOREIGN);
	assert_int_equal(gp_statpage_skip_of(-ESRCH), GP_SKIP_UNVERIFIED);
	assert_int_equal(gp_statpage_skip_of(-EACCES), GP_SKIP_OTHER_USER);
	assert_int_equal(gp_statpage_skip_of(-EBADMSG), GP_SKIP_INVALID);
	for (int r = 0; r < GP_SKIP_COUNT; r++) {
		const char *l = gp_statpage_skip_label((enum gp_statpage_skip)r);
		assert_true(strlen(l) > 0 && strspn(l, "abcdefghijklmnopqrstuvwxyz_") == strlen(l));
		assert_true(strlen(gp_statpage_skip_text((enum gp_statpage_skip)r)) > 0);
	}
}

static uint64_t mono_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000 + (uint64_t)t.tv_nsec / 1000000;
}

/* Names come live processes first, then by pid, all of them; a page whose slots stay odd
 * is waited for until the deadline when its process lives, not at all when it is gone. */
static void test_scan_and_deadline(void **state)
{
	(void)state;
	static struct gpupool_page pg;
	static struct gp_statpage_info info;
	char why[512], name[32];
	const int dead[] = {5000023, 5000021, 5000022}; /* above PID_MAX_LIMIT (2^22): never live */
	memset(&pg, 0, sizeof pg);
	gp_statpage_init(&pg);
	for (int d = 0; d < GPUPOOL_MAX_DEVICES; d++)
		gp_stats_begin(gp_statpage_slot(&pg, d)); /* every slot odd: a writer died mid-update */
	for (size_t i = 0; i < 3; i++) {
		page_name(name, sizeof name, dead[i]);
		pg.pid = dead[i];
		write_file(name, &pg, sizeof pg);
	}
	page_name(name, sizeof name, getpid());
	pg.pid = getpid();
	write_file(name, &pg, sizeof pg);
	write_file("gpupool.012", &pg, sizeof pg); /* not a page name */

	struct gp_statpage_name *names;
	assert_int_equal(gp_statpage_scan(dfd, 0, &names), 4);
	assert_int_equal(names[0].pid, getpid());
	assert_true(names[0].live);
	for (int i = 1; i < 4; i++) {
		assert_int_equal(names[i].pid, 5000020 + i);
		assert_false(names[i].live);
	}
	free(names);
	assert_int_equal(gp_statpage_scan(dfd, 5000022, &names), 1);
	assert_int_equal(names[0].pid, 5000022);
	free(names);
	assert_int_equal(gp_statpage_scan(dfd, 5000029, &names), 0);
	free(names);

	/* our own (live) page: waited for until the deadline, then reported inconsistent */
	uint64_t t0 = mono_ms();
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	uint64_t deadline = (uint64_t)now.tv_sec * 1000000000ull + (uint64_t)now.tv_nsec + 50000000ull;
	assert_int_equal(gp_statpage_read(dfd, name, geteuid(), deadline, &info, why, sizeof why), 0);
	uint64_t ms = mono_ms() - t0;
	assert_int_equal(info.inconsistent, 0xffff);
	assert_false(info.stale);
	assert_true(ms >= 50 && ms < 1000);
	t0 = mono_ms();
	assert_int_equal(gp_statpage_read(dfd, name, geteuid(), 0, &info, why, sizeof why), 0);
	ms = mono_ms() - t0;
	assert_true(ms >= GP_STATPAGE_PATIENCE_NS / 1000000 && ms < 1000);
	/* a dead writer's: no waiting at all */
	t0 = mono_ms();
	for (size_t i = 0; i < 3; i++) {
		page_name(name, sizeof name, dead[i]);
		assert_int_equal(gp_statpage_read(dfd, name, geteuid(), 0, &info, why, sizeof why), 0);
		assert_true(info.stale);
		assert_int_equal(info.inconsistent, 0xffff);
		assert_int_equal(unlinkat(dfd, name, 0), 0);
	}
	ms = mono_ms() - t0;
	print_message("3 stale pages with 16 odd slots each read in %llu ms\n", (unsigned long long)ms);
	assert_true(ms < 100); /* they cost ~0.5 s each when every slot was waited for */
	page_name(name, sizeof name, getpid());
	assert_int_equal(unlinkat(dfd, name, 0), 0);
	assert_int_equal(unlinkat(dfd, "gpupool.012", 0), 0);
}

static void test_release_round_trip(void **state)
{
	(void)state;
	char why[256];
	struct gpupool_page *m = NULL;
	size_t mlen = 0;
	uint64_t req = 0;
	assert_int_equal(gp_statpage_request_release(dfd, 4000009, 0, &m, &mlen, &req, why, sizeof why), -ENOENT);
	for (int answer = 1; answer >= 0; answer--) {
		int rfd;
		pid_t pid = spawn_writer(answer, &rfd);
		assert_int_equal(gp_statpage_request_release(dfd, pid, geteuid(), &m, &mlen, &req, why, sizeof why), 0);
		assert_int_equal(req, 1);
		assert_int_equal(mlen, sizeof(struct gpupool_page));
		struct timespec t0, t;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		long ms = 0;
		while (__atomic_load_n(&m->release_done, __ATOMIC_ACQUIRE) < req && ms < 1000) {
			struct timespec nap = {0, 100000};
			nanosleep(&nap, NULL);
			clock_gettime(CLOCK_MONOTONIC, &t);
			ms = (t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000;
		}
		if (answer) {
			assert_int_equal(m->release_done, req);
			assert_true(m->dev[0].releases + m->dev[1].releases > 0);
			print_message("release acknowledged after %ld ms\n", ms);
		} else {
			assert_int_equal(m->release_done, 0);
		}
		gp_statpage_unmap(m, mlen);
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		close(rfd);
		char name[32];
		page_name(name, sizeof name, pid);
		assert_int_equal(gp_statpage_request_release(dfd, pid, geteuid(), &m, &mlen, &req, why, sizeof why), -ESRCH);
		assert_int_equal(gp_statpage_clean_one(dfd, name, geteuid(), why, sizeof why), 1);
	}
}

static void test_forget_in_child(void **state)
{
	(void)state;
	struct gpupool_page *pg = gp_statpage_open();
	assert_non_null(pg);
	gp_statpage_slot(pg, 0)->allocs = 1;
	pid_t pid = fork();
	if (pid == 0) {
		gp_statpage_forget(pg);
		struct gpupool_page *mine = gp_statpage_open();
		int rc = mine && mine->pid == getpid() && mine->ndevices == 0 ? 0 : 1;
		gp_statpage_close(mine);
		_exit(rc);
	}
	int st;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	char name[32];
	struct stat sb;
	page_name(name, sizeof name, getpid());
	assert_int_equal(fstatat(dfd, name, &sb, 0), 0); /* the parent's page is still there */
	page_name(name, sizeof name, pid);
	assert_int_equal(fstatat(dfd, name, &sb, 0), -1); /* the child's is gone */
	assert_int_equal(pg->dev[0].allocs, 1);
	gp_statpage_close(pg);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_open_header),
		cmocka_unit_test(test_writer_under_load),
		cmocka_unit_test(test_inconsistent_slot),
		cmocka_unit_test(test_fuzz_reader),
		cmocka_unit_test(test_uuid_and_layouts),
		cmocka_unit_test(test_owner_rule),
		cmocka_unit_test(test_scan_and_deadline),
		cmocka_unit_test(test_release_round_trip),
		cmocka_unit_test(test_forget_in_child),
	};
	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
