/* The fakes' machine-wide devices (fakemachine.h): a file of fixed layout mapped shared by
 * every process of the fakes that names it, holding each physical device's capacity and, per
 * process, a slot of the bytes it holds. Included by fakecuda.c and fakecu.c (so each fake, and
 * each program that compiles one of them itself, gets its own static copy, no build change). No lock: a process only writes its own slot; an
 * allocation is admitted by a compare-and-swap on the device's version word (see fm_charge),
 * and a survivor reclaims a dead process's slot by compare-and-swap on its owner word. A
 * stopped process blocks nobody. Depends on nothing of the fakes. */
#include "fakemachine.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define FM_MAGIC 0x314843414d4b4647ull /* "GFKMACH1" */
#define FM_NSLOTS 128
#define FM_PID_BITS 22                  /* Linux's pid_max is at most 2^22 */
#define FM_PID_MASK ((UINT64_C(1) << FM_PID_BITS) - 1)
#define FM_START_MASK ((UINT64_C(1) << 41) - 1)
#define FM_RECLAIM (UINT64_C(1) << 63)  /* owner word: being reclaimed by the process named */

/* A process's memory: owner is 0 (free) or its pid and start time (clock ticks since boot, from
 * /proc/<pid>/stat) so that a reused pid is not taken for the dead process. */
struct fm_slot {
	uint64_t owner;
	uint64_t used[FM_MAXDEV];
};

struct fm_file {
	uint64_t magic;               /* written last by the creator */
	uint64_t size;                /* sizeof (struct fm_file) */
	uint64_t ndev;
	uint64_t capacity[FM_MAXDEV];
	uint64_t version[FM_MAXDEV];  /* bumped by each admitted allocation */
	struct fm_slot slot[FM_NSLOTS];
};

static struct fm_file *g_file;
static struct fm_slot *g_slot; /* this process's; NULL: off (none, or a child after fork) */
static uint64_t g_owner;
static const char *g_who = "fake";


FM_FN bool fm_on(void)
{
	return __atomic_load_n(&g_slot, __ATOMIC_ACQUIRE) != NULL;
}

/* State and start time of a process, from /proc/<pid>/stat; false when there is none. */
static bool fm_proc(long pid, char *state, uint64_t *start)
{
	char path[64], buf[1024];
	snprintf(path, sizeof path, "/proc/%ld/stat", pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	ssize_t n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n <= 0)
		return false;
	buf[n] = '\0';
	char *p = strrchr(buf, ')'); /* the command name may hold spaces and parentheses */
	if (!p || p[1] != ' ')
		return false;
	*state = p[2];
	p += 3;
	for (int field = 4; field <= 22 && p; field++) { /* p at field `field`; starttime is 22 */
		p = strchr(p, ' ');
		if (p)
			p++;
	}
	if (!p)
		return false;
	*start = strtoull(p, NULL, 10);
	return true;
}

/* A process holds device memory while it runs or is stopped; a zombie no longer does (the
 * driver frees a process's memory as it dies, before it is reaped). */
static bool fm_alive(uint64_t owner)
{
	char state;
	uint64_t start;
	owner &= ~FM_RECLAIM;
	if (!fm_proc((long)(owner & FM_PID_MASK), &state, &start))
		return false;
	return state != 'Z' && state != 'X' && (start & FM_START_MASK) == owner >> FM_PID_BITS;
}

/* Frees the slots of dead processes: the owner word goes to this process (marked reclaiming,
 * so the slot is not counted and nobody claims it), the counts to 0, then the slot is free. A
 * reclaimer that dies on the way is itself a dead owner. */
static void fm_reclaim(void)
{
	for (int i = 0; i < FM_NSLOTS; i++) {
		struct fm_slot *s = &g_file->slot[i];
		uint64_t o = __atomic_load_n(&s->owner, __ATOMIC_ACQUIRE);
		if (o == 0 || o == g_owner || fm_alive(o))
			continue;
		if (!__atomic_compare_exchange_n(&s->owner, &o, g_owner | FM_RECLAIM, false, __ATOMIC_ACQ_REL,
		                                 __ATOMIC_RELAXED))
			continue;
		for (int d = 0; d < FM_MAXDEV; d++)
			__atomic_store_n(&s->used[d], 0, __ATOMIC_RELEASE);
		__atomic_store_n(&s->owner, 0, __ATOMIC_RELEASE);
	}
}

/* Bytes of phys held by the slots of processes not known dead (a dead one counts until it is
 * reclaimed). */
static uint64_t fm_sum(int phys)
{
	uint64_t total = 0;
	for (int i = 0; i < FM_NSLOTS; i++) {
		const struct fm_slot *s = &g_file->slot[i];
		uint64_t o = __atomic_load_n(&s->owner, __ATOMIC_ACQUIRE);
		if (o && !(o & FM_RECLAIM))
			total += __atomic_load_n(&s->used[phys], __ATOMIC_ACQUIRE);
	}
	return total;
}

/* Admission without a lock: read the device's version, sum the slots, add to this process's
 * slot, and keep it only if the version did not move meanwhile. Another allocation admitted in
 * between bumped the version after adding its bytes, so the retry sees them: two processes
 * never both take the last bytes. */
FM_FN bool fm_charge(int phys, size_t bytes)
{
	struct fm_slot *me = __atomic_load_n(&g_slot, __ATOMIC_ACQUIRE);
	if (!me || phys < 0 || phys >= FM_MAXDEV)
		return false;
	bool reclaimed = false;
	for (;;) {
		uint64_t v = __atomic_load_n(&g_file->version[phys], __ATOMIC_SEQ_CST);
		uint64_t cap = __atomic_load_n(&g_file->capacity[phys], __ATOMIC_RELAXED);
		uint64_t used = fm_sum(phys);
		if (used > cap || bytes > cap - used) {
			if (reclaimed)
				return false;
			fm_reclaim();
			reclaimed = true;
			continue;
		}
		__atomic_add_fetch(&me->used[phys], bytes, __ATOMIC_SEQ_CST);
		if (__atomic_compare_exchange_n(&g_file->version[phys], &v, v + 1, false, __ATOMIC_SEQ_CST,
		                                __ATOMIC_SEQ_CST))
			return true;
		__atomic_sub_fetch(&me->used[phys], bytes, __ATOMIC_SEQ_CST);
	}
}

FM_FN void fm_uncharge(int phys, size_t bytes)
{
	struct fm_slot *me = __atomic_load_n(&g_slot, __ATOMIC_ACQUIRE);
	if (me && phys >= 0 && phys < FM_MAXDEV)
		__atomic_sub_fetch(&me->used[phys], bytes, __ATOMIC_SEQ_CST);
}

FM_FN size_t fm_used(int phys)
{
	if (!fm_on() || phys < 0 || phys >= FM_MAXDEV)
		return 0;
	fm_reclaim();
	return (size_t)fm_sum(phys);
}

FM_FN size_t fm_capacity(int phys)
{
	if (!g_file || phys < 0 || phys >= FM_MAXDEV)
		return 0;
	return (size_t)__atomic_load_n(&g_file->capacity[phys], __ATOMIC_RELAXED);
}

FM_FN void fm_set_capacity(int phys, size_t bytes)
{
	if (g_file && phys >= 0 && phys < FM_MAXDEV)
		__atomic_store_n(&g_file->capacity[phys], (uint64_t)bytes, __ATOMIC_RELAXED);
}

/* A child after fork shares the parent's slot through the mapping: it keeps to its own
 * capacity instead of writing the parent's counts. */
static void fm_atfork_child(void)
{
	__atomic_store_n(&g_slot, NULL, __ATOMIC_RELEASE);
}

/* At exit the process's memory goes back, as the driver frees a process's memory when it ends;
 * a thread still allocating then is not counted. */
__attribute__((destructor)) static void fm_fini(void)
{
	struct fm_slot *me = __atomic_exchange_n(&g_slot, NULL, __ATOMIC_ACQ_REL);
	if (!me)
		return;
	for (int d = 0; d < FM_MAXDEV; d++)
		__atomic_store_n(&me->used[d], 0, __ATOMIC_RELEASE);
	__atomic_store_n(&me->owner, 0, __ATOMIC_RELEASE);
}

static bool fm_bad(const char *path, const char *why)
{
	fprintf(stderr, "%s: FAKECUDA_MACHINE=%s: %s; using this process's own capacity\n", g_who, path, why);
	return false;
}

static bool fm_claim(void)
{
	for (int pass = 0; pass < 2; pass++) {
		for (int i = 0; i < FM_NSLOTS; i++) {
			struct fm_slot *s = &g_file->slot[i];
			uint64_t zero = 0;
			if (__atomic_compare_exchange_n(&s->owner, &zero, g_owner, false, __ATOMIC_ACQ_REL,
			                                __ATOMIC_RELAXED)) {
				for (int d = 0; d < FM_MAXDEV; d++)
					__atomic_store_n(&s->used[d], 0, __ATOMIC_RELEASE);
				__atomic_store_n(&g_slot, s, __ATOMIC_RELEASE);
				return true;
			}
		}
		fm_reclaim();
	}
	return false;
}

FM_FN bool fm_open(const char *who, int *nphys, size_t cap[FM_MAXDEV])
{
	g_who = who;
	const char *path = getenv("FAKECUDA_MACHINE");
	if (!path || !*path)
		return false;
	char state;
	uint64_t start;
	if (!fm_proc((long)getpid(), &state, &start))
		return fm_bad(path, "cannot read /proc/self/stat");
	g_owner = ((start & FM_START_MASK) << FM_PID_BITS) | ((uint64_t)getpid() & FM_PID_MASK);
	bool created = true;
	int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
	if (fd < 0 && errno == EEXIST) {
		created = false;
		fd = open(path, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
	}
	if (fd < 0)
		return fm_bad(path, errno == ELOOP ? "a symbolic link" : strerror(errno));
	struct stat st;
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return fm_bad(path, "not a regular file");
	}
	/* every user's processes share the machine, as they share a GPU: writable by all, whatever
	 * the umask (the fake is no security boundary) */
	if (created && (fchmod(fd, 0666) != 0 || ftruncate(fd, (off_t)sizeof(struct fm_file)) != 0)) {
		close(fd);
		unlink(path);
		return fm_bad(path, strerror(errno));
	}
	/* the creator may be between its open and its ftruncate: wait for the size a while */
	for (int i = 0; !created && st.st_size == 0 && i < 200; i++) {
		nanosleep(&(struct timespec){0, 10000000}, NULL);
		if (fstat(fd, &st) != 0)
			break;
	}
	if (!created && st.st_size != (off_t)sizeof(struct fm_file)) {
		close(fd);
		return fm_bad(path, "not a machine file of this version (wrong size)");
	}
	void *m = mmap(NULL, sizeof(struct fm_file), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (m == MAP_FAILED)
		return fm_bad(path, strerror(errno));
	struct fm_file *f = m;
	if (created) {
		f->size = sizeof *f;
		f->ndev = (uint64_t)*nphys;
		for (int d = 0; d < FM_MAXDEV; d++)
			f->capacity[d] = cap[d];
		__atomic_store_n(&f->magic, FM_MAGIC, __ATOMIC_RELEASE);
	} else {
		/* the creator may be filling it in: wait for the magic a while */
		for (int i = 0; __atomic_load_n(&f->magic, __ATOMIC_ACQUIRE) == 0 && i < 200; i++)
			nanosleep(&(struct timespec){0, 10000000}, NULL);
		if (__atomic_load_n(&f->magic, __ATOMIC_ACQUIRE) != FM_MAGIC || f->size != sizeof *f ||
		    f->ndev > FM_MAXDEV) {
			munmap(m, sizeof *f);
			return fm_bad(path, "not a machine file of this version (wrong magic)");
		}
	}
	g_file = f;
	if (!fm_claim()) {
		g_file = NULL;
		munmap(m, sizeof *f);
		return fm_bad(path, "no free process slot");
	}
	bool differ = f->ndev != (uint64_t)*nphys;
	for (int d = 0; d < FM_MAXDEV; d++) {
		differ |= d < *nphys && cap[d] != f->capacity[d];
		cap[d] = (size_t)f->capacity[d];
	}
	if (differ)
		fprintf(stderr, "%s: FAKECUDA_MACHINE=%s: the machine has %d device(s) of %llu bytes, set by the process "
		                "that made it; using those, not FAKECUDA_DEVICES/FAKECUDA_CAPACITY\n",
		        who, path, (int)f->ndev, (unsigned long long)f->capacity[0]);
	*nphys = (int)f->ndev;
	pthread_atfork(NULL, NULL, fm_atfork_child);
	return true;
}

/* The machine's name in its GPUs' UUIDs: FNV-1a (32 bits) of the FAKECUDA_MACHINE path as
 * given. The same in every process that names the file, whichever opened it first, whether
 * or not it has opened it yet. Without one, of FAKECUDA_HOST (set and empty: none), else of
 * GPUPOOL_SHM_DIR (the processes of one test share their page directory, those of two tests
 * run at once do not: their devices of their own are not taken for one GPU); 0 without any. */
static uint32_t fm_machine_id(void)
{
	const char *path = getenv("FAKECUDA_MACHINE");
	if (!path || !*path)
		path = getenv("FAKECUDA_HOST"); /* set and empty: none */
	if (!path)
		path = getenv("GPUPOOL_SHM_DIR");
	if (!path || !*path)
		return 0;
	uint32_t h = 2166136261u;
	for (const unsigned char *c = (const unsigned char *)path; *c; c++)
		h = (h ^ *c) * 16777619u;
	return h;
}

FM_FN void fm_uuid(int phys, unsigned char out[16])
{
	memset(out, 0, 16);
	memcpy(out, "fakegpu", 7);
	/* a machine-wide device (FAKECUDA_MACHINE) is another GPU than another machine file's,
	 * as two machines never share a GPU: bytes 8-11 name the machine (zero without one) */
	uint32_t id = fm_machine_id();
	for (int i = 0; i < 4; i++)
		out[8 + i] = (unsigned char)(id >> (8 * (3 - i)));
	out[15] = (unsigned char)(phys + 1);
}

/* Does entry e (without "GPU-") name physical device d: a prefix of its UUID's hex digits,
 * dashes ignored, as nvidia-smi -L prints them. */
static bool fm_uuid_prefix(const char *e, size_t len, int d)
{
	static const char hex[] = "0123456789abcdef";
	unsigned char u[16];
	char digits[33];
	fm_uuid(d, u);
	for (int i = 0; i < 16; i++) {
		digits[2 * i] = hex[u[i] >> 4];
		digits[2 * i + 1] = hex[u[i] & 15];
	}
	digits[32] = '\0';
	size_t k = 0;
	for (size_t i = 0; i < len; i++) {
		char c = e[i];
		if (c == '-')
			continue;
		if (c >= 'A' && c <= 'F')
			c = (char)(c - 'A' + 'a');
		if (k == 32 || digits[k] != c)
			return false;
		k++;
	}
	return k > 0;
}

FM_FN int fm_visible(int nphys, int phys[FM_MAXDEV])
{
	const char *v = getenv("CUDA_VISIBLE_DEVICES");
	if (!v) {
		for (int d = 0; d < nphys; d++)
			phys[d] = d;
		return nphys;
	}
	int n = 0;
	while (n < FM_MAXDEV) {
		while (*v == ' ')
			v++;
		size_t len = strcspn(v, ",");
		while (len && v[len - 1] == ' ')
			len--;
		int d = -1;
		if (len > 4 && strncmp(v, "GPU-", 4) == 0) {
			for (int i = 0; i < nphys; i++) {
				if (fm_uuid_prefix(v + 4, len - 4, i)) {
					if (d >= 0) { /* ambiguous prefix */
						d = -1;
						break;
					}
					d = i;
				}
			}
		} else if (len > 0 && len < 8 && strspn(v, "0123456789") == len) {
			d = atoi(v);
			if (d >= nphys)
				d = -1;
		}
		for (int i = 0; i < n && d >= 0; i++)
			if (phys[i] == d)
				d = -1; /* named twice */
		if (d < 0)
			break;
		phys[n++] = d;
		v += strcspn(v, ",");
		if (*v != ',')
			break;
		v++;
	}
	return n;
}
