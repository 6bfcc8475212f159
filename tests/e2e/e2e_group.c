/* The group budget through the interposer, on the fake runtime (DIR: the fake runtime built
 * on the fake driver, which names devices by UUID):
 *   e2e_group run DIR      a member holds 16 MiB of a 64 MiB group budget and is killed with
 *                          -9; then four processes hammer cudaMalloc/cudaFree in the group
 *                          while this one samples the group file: the group never holds more
 *                          than its budget, the killed member's share is returned by one of
 *                          them, and the members that exit return theirs at exit.
 *   e2e_group percent DIR  group_limit:25% sets a 64 MiB budget on a 256 MiB device.
 *   e2e_group exec DIR     a member takes 48 MiB of a 64 MiB group budget and calls exec
 *                          (the new image, gpupool loaded, never allocates): its device
 *                          memory went with the old image, so another member's 40 MiB fit.
 *   e2e_group fit DIR      a group's room smaller than a segment: twelve 2 MiB blocks fit
 *                          under group_limit:25M; and 2 MiB fit when another member holds 88
 *                          MiB of a 100 MiB group (the segment fitted to the group's room).
 *   e2e_group full DIR     the 257th member: every slot held by a live process, a process
 *                          naming the group cannot join it, and every allocation it makes is
 *                          refused (not run without the group's cap).
 *   e2e_group line DIR     a refusal under the group alone (no limit of the process's own)
 *                          names the group's budget, not a limit of 0 bytes.
 *   e2e_group sched MIB    the process's limit is MIB MiB: CUDA_DEVICE_MEMORY_LIMIT_0 (a
 *                          scheduler's), or gpupool's own limit, which wins over it.
 * This process never calls CUDA in `run`: it reads the file with the group layer's reader and
 * joins only at the end. */
#include <cuda_runtime_api.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>

#include "e2e_util.h"
#include "group.h"

#define MB ((size_t)1 << 20)
#define BUDGET (64 * MB)
#define HAMMERS 4

static char path[512];

/* One member: allocations of 4-16 MiB, up to 8 live, freed at random: about 80 MiB live on
 * average, more than the 64 MiB budget by itself, whatever the others hold and however tight
 * its pool packs them; out of memory is the group's answer at its budget. Exits 0 having seen
 * both. */
static int hammer(unsigned seed)
{
	void *live[8] = {0};
	unsigned ok = 0, oom = 0;
	for (int i = 0; i < 3000; i++) {
		seed = seed * 1103515245u + 12345u;
		unsigned k = (seed >> 8) % 8;
		if (live[k]) {
			CK(cudaFree(live[k]));
			live[k] = NULL;
			continue;
		}
		cudaError_t e = cudaMalloc(&live[k], (4 + (seed >> 16) % 13) * MB);
		if (e == cudaSuccess) {
			ok++;
		} else {
			CHECK(e == cudaErrorMemoryAllocation);
			CHECK(cudaGetLastError() == cudaErrorMemoryAllocation);
			live[k] = NULL;
			oom++;
			/* refused at once, it would run through its rounds while the others hold the
			 * budget (slow builds: ThreadSanitizer); a refusal releases its own cache, and
			 * the others' refusals theirs: give them the time */
			usleep(500);
		}
	}
	for (int k = 0; k < 8; k++)
		if (live[k])
			CK(cudaFree(live[k]));
	fprintf(stderr, "e2e_group: member %d: %u allocations, %u out of memory\n", (int)getpid(), ok, oom);
	return ok && oom ? 0 : 1;
}

/* A member that holds 16 MiB, says so on fd, and waits to be killed. */
static int holder(int fd)
{
	void *p = NULL;
	CK(cudaMalloc(&p, 16 * MB));
	CHECK(write(fd, "y", 1) == 1);
	for (;;)
		pause();
}

static pid_t spawn(const char *self, const char *mode, const char *arg)
{
	pid_t pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL); /* none left behind by a failed check */
		execl(self, self, mode, arg, (char *)NULL);
		_exit(127);
	}
	return pid;
}

static struct gp_group_view v;

/* The group's figures for the one device. */
static void look(uint64_t *used, uint64_t *budget)
{
	char why[256];
	CHECK(gp_group_read(path, &v, why, sizeof why) == 0);
	CHECK(v.ndevices == 1);
	*used = v.dev[0].used;
	*budget = v.dev[0].budget;
}

/* The members this process starts run the fake runtime on the fake driver in `ondriver`
 * (which knows each device's UUID, as the real runtime always has the driver loaded), in the
 * group of `path` with that group_limit. */
static void members_env(const char *ondriver, const char *group_limit)
{
	char conf[600], libs[4096];
	const char *old = getenv("LD_LIBRARY_PATH");
	snprintf(libs, sizeof libs, "%s:%s", ondriver, old ? old : "");
	setenv("LD_LIBRARY_PATH", libs, 1);
	snprintf(conf, sizeof conf, "group:%s,group_limit:%s", path, group_limit);
	setenv("GPUPOOL_CONF", conf, 1);
	setenv("FAKECUDA_HOST", "", 1); /* the fake's device UUIDs as this program writes them */
}

static int run(const char *self, const char *ondriver)
{
	uint64_t used, budget;
	char fd_text[16];
	members_env(ondriver, "64M");
	unlink(path);

	int ready[2];
	CHECK(pipe(ready) == 0);
	snprintf(fd_text, sizeof fd_text, "%d", ready[1]);
	pid_t hold = spawn(self, "hold", fd_text);
	char c;
	CHECK(read(ready[0], &c, 1) == 1);
	look(&used, &budget);
	CHECK(budget == BUDGET && used >= 16 * MB && v.nmembers == 1 && v.member[0].pid == hold);
	CHECK(kill(hold, SIGKILL) == 0);
	int st;
	CHECK(waitpid(hold, &st, 0) == hold && WIFSIGNALED(st));
	look(&used, &budget);
	CHECK(v.nmembers == 1 && v.member[0].alive == 0 && used >= 16 * MB); /* nobody has looked yet */
	uint64_t held_by_dead = v.member[0].held[0];

	for (int k = 0; k < HAMMERS; k++) {
		char seed[16];
		snprintf(seed, sizeof seed, "%d", k + 1);
		(void)spawn(self, "hammer", seed);
	}
	uint64_t max = 0, samples = 0;
	for (int left = HAMMERS; left;) {
		look(&used, &budget);
		CHECK(used <= BUDGET);
		max = used > max ? used : max;
		samples++;
		pid_t w = waitpid(-1, &st, WNOHANG);
		if (w > 0) {
			CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
			left--;
		}
	}
	fprintf(stderr, "e2e_group: %llu samples, the group held at most %llu MiB of %llu\n",
		(unsigned long long)samples, (unsigned long long)(max >> 20), (unsigned long long)(BUDGET >> 20));
	CHECK(max > BUDGET / 2);
	look(&used, &budget);
	CHECK(v.dev[0].peak <= BUDGET);
	/* the killed member's share was returned by a member whose take did not fit */
	CHECK(v.dev[0].recovered >= held_by_dead);
	/* the members that exited returned their shares at exit (the killed one could not) */
	CHECK(v.nmembers == 0 && used == 0);
	struct gp_group g;
	char why[256];
	CHECK(gp_group_join(&g, path, why, sizeof why) == 0);
	look(&used, &budget);
	CHECK(used == 0 && v.nmembers == 1);
	gp_group_leave(&g);
	unlink(path);
	return 0;
}

/* group_limit:25% of a 256 MiB device: 64 MiB for the group, asked of the device by the first
 * member (before any page figure has its size). */
static int percent(const char *self, const char *ondriver)
{
	members_env(ondriver, "25%");
	unlink(path);
	pid_t kid = spawn(self, "fill", "40");
	int st;
	CHECK(waitpid(kid, &st, 0) == kid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
	uint64_t used, budget;
	look(&used, &budget);
	CHECK(budget == 64 * MB);
	unlink(path);
	return 0;
}

/* Takes 48 MiB, then becomes a program that never allocates: says so on fd, and waits. */
static int execer(const char *self, const char *fd)
{
	void *p = NULL;
	CK(cudaMalloc(&p, 48 * MB));
	execl(self, self, "idle", fd, (char *)NULL);
	return 127;
}

static int idle(int fd)
{
	CHECK(write(fd, "y", 1) == 1);
	for (;;)
		pause();
}

static int exec_test(const char *self, const char *ondriver)
{
	uint64_t used, budget;
	char fd_text[16];
	members_env(ondriver, "64M");
	unlink(path);
	int ready[2];
	CHECK(pipe(ready) == 0);
	snprintf(fd_text, sizeof fd_text, "%d", ready[1]);
	pid_t ex = spawn(self, "exec1", fd_text);
	char c;
	CHECK(read(ready[0], &c, 1) == 1);
	look(&used, &budget);
	CHECK(budget == BUDGET && used >= 48 * MB && v.nmembers == 1 && v.member[0].pid == ex);
	fprintf(stderr, "e2e_group: pid %d called exec; the group still counts %llu MiB of it, alive=%d\n", (int)ex,
		(unsigned long long)(used >> 20), v.member[0].alive);
	pid_t f = spawn(self, "fill", "40");
	int st;
	CHECK(waitpid(f, &st, 0) == f);
	CHECK(kill(ex, SIGKILL) == 0 && waitpid(ex, NULL, 0) == ex);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0); /* 40 MiB fit: the old image's 48 came back */
	unlink(path);
	return 0;
}

/* Takes `mib` MiB, then as much again, which the group refuses: cudaMemGetInfo says as much
 * (less than that free, the group's budget at most in all). */
static int fill(size_t mib)
{
	void *a = NULL, *b = NULL;
	CK(cudaMalloc(&a, mib * MB));
	CKE(cudaMalloc(&b, mib * MB), cudaErrorMemoryAllocation);
	uint64_t used, budget;
	look(&used, &budget);
	size_t f = 0, t = 0;
	CK(cudaMemGetInfo(&f, &t));
	CHECK(f < mib * MB && t <= budget);
	return 0;
}

/* A group's room smaller than a segment: twelve 2 MiB blocks under group_limit:25M all fit
 * (a 20 MiB segment, then one of exactly 2 MiB twice, as under limit:25M), and the 13th is
 * refused. */
static int twelve(void)
{
	void *p[13];
	for (int i = 0; i < 12; i++)
		CK(cudaMalloc(&p[i], 2 * MB));
	CKE(cudaMalloc(&p[12], 2 * MB), cudaErrorMemoryAllocation);
	uint64_t used, budget;
	look(&used, &budget);
	CHECK(budget == 25 * MB && used == 24 * MB);
	for (int i = 0; i < 12; i++)
		CK(cudaFree(p[i]));
	return 0;
}

/* Another member holds 88 MiB of the 100 MiB group: 2 MiB fit in the 12 MiB left. */
static int two(void)
{
	void *p = NULL;
	CK(cudaMalloc(&p, 2 * MB));
	uint64_t used, budget;
	look(&used, &budget);
	CHECK(budget == 100 * MB && used == 90 * MB);
	CK(cudaFree(p));
	return 0;
}

/* A member of the group named in GPUPOOL_CONF (group_limit `conf_limit`), run as `mode`. */
static int fit_member(const char *self, const char *ondriver, const char *conf_limit, const char *mode)
{
	members_env(ondriver, conf_limit);
	pid_t kid = spawn(self, mode, "0");
	int st;
	CHECK(waitpid(kid, &st, 0) == kid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
	return 0;
}

static int fit(const char *self, const char *ondriver)
{
	unlink(path);
	fit_member(self, ondriver, "25M", "twelve");
	/* this process the other member: 88 MiB of 100 held on the fake's physical device 0 */
	unlink(path);
	struct gp_group g;
	char why[256];
	unsigned char uuid[GP_GROUP_UUID_LEN] = {'f', 'a', 'k', 'e', 'g', 'p', 'u'};
	uuid[GP_GROUP_UUID_LEN - 1] = 1;
	CHECK(gp_group_join(&g, path, why, sizeof why) == 0);
	int d = gp_group_device(&g, uuid, 100 * MB);
	CHECK(d >= 0 && gp_group_take(&g, d, 88 * MB) == 0);
	fit_member(self, ondriver, "100M", "two");
	gp_group_leave(&g);
	unlink(path);
	return 0;
}

/* A process that could not join its group: every allocation refused, pooled or not. */
static int refused_member(void)
{
	void *p = NULL;
	CKE(cudaMalloc(&p, MB), cudaErrorMemoryAllocation);
	CKE(cudaMallocManaged(&p, MB, cudaMemAttachGlobal), cudaErrorMemoryAllocation);
	return 0;
}

/* Holds 48 MiB of the group's 64, then asks for 32 MiB of managed memory (counted, never
 * pooled): refused, and the line says the group's budget refused it, with its figures. */
static int line_member(void)
{
	void *a = NULL, *b = NULL;
	CK(cudaMalloc(&a, 48 * MB));
	struct e2e_stderr c = e2e_stderr_begin();
	cudaError_t e = cudaMallocManaged(&b, 32 * MB, cudaMemAttachGlobal);
	char log[2048], want[1024];
	e2e_stderr_end(c, log, sizeof log);
	fputs(log, stderr);
	CHECK(e == cudaErrorMemoryAllocation);
	snprintf(want, sizeof want,
		 "device 0: cudaMallocManaged of 33554432 bytes refused by its group's budget (group %s: budget 64.0 MiB, "
		 "the group holds 48.0 MiB, this process 48.0 MiB); returning cudaErrorMemoryAllocation",
		 path);
	CHECK(strstr(log, want) != NULL);
	CHECK(strstr(log, "limit (0 bytes)") == NULL);
	CK(cudaFree(a));
	return 0;
}

static int line(const char *self, const char *ondriver)
{
	unlink(path);
	fit_member(self, ondriver, "64M", "line1");
	unlink(path);
	return 0;
}

/* The 257th member: this process holds every member slot (its own id in each: a live process
 * that maps the file), so a process that names the group cannot join it, and takes nothing
 * rather than run without the group's cap. */
static int full(const char *self, const char *ondriver)
{
	members_env(ondriver, "64M");
	unlink(path);
	struct gp_group g;
	char why[256];
	CHECK(gp_group_join(&g, path, why, sizeof why) == 0);
	for (unsigned i = 0; i < GP_GROUP_MEMBERS; i++)
		if (i != g.me) {
			atomic_store(&g.f->member[i].pidns, g.pidns);
			atomic_store(&g.f->member[i].id, g.id);
		}
	pid_t kid = spawn(self, "refused", "0");
	int st;
	CHECK(waitpid(kid, &st, 0) == kid);
	for (unsigned i = 0; i < GP_GROUP_MEMBERS; i++)
		if (i != g.me)
			atomic_store(&g.f->member[i].id, 0);
	gp_group_leave(&g);
	unlink(path);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	return 0;
}

/* The process's limit on device 0 is `mib` MiB (from a scheduler's variable, or gpupool's own
 * limit that wins over it): mib - 8 fit, 16 more do not. */
static int sched(size_t mib)
{
	void *a = NULL, *b = NULL;
	CK(cudaMalloc(&a, (mib - 8) * MB));
	CKE(cudaMalloc(&b, 16 * MB), cudaErrorMemoryAllocation);
	CKE(cudaGetLastError(), cudaErrorMemoryAllocation);
	struct gpupool_device_stats s = e2e_stats(0);
	CHECK(s.limit_bytes == mib * MB);
	size_t f = 0, t = 0;
	CK(cudaMemGetInfo(&f, &t));
	CHECK(t == s.limit_bytes);
	CK(cudaFree(a));
	return 0;
}

int main(int argc, char **argv)
{
	const char *dir = getenv("GPUPOOL_SHM_DIR");
	CHECK(argc >= 2 && dir);
	snprintf(path, sizeof path, "%s.group", dir); /* beside the test's page directory */
	/* the driver loaded before the first allocation, as the real runtime has it from its first
	 * call (the fake one loads it at its first allocation): it names the device by UUID */
	if (strcmp(argv[1], "hammer") == 0 || strcmp(argv[1], "hold") == 0 || strcmp(argv[1], "fill") == 0 ||
	    strcmp(argv[1], "exec1") == 0 || strcmp(argv[1], "twelve") == 0 || strcmp(argv[1], "two") == 0 ||
	    strcmp(argv[1], "refused") == 0 || strcmp(argv[1], "line1") == 0)
		CHECK(dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL) != NULL);
	if (strcmp(argv[1], "twelve") == 0)
		return twelve();
	if (strcmp(argv[1], "two") == 0)
		return two();
	if (strcmp(argv[1], "refused") == 0)
		return refused_member();
	if (strcmp(argv[1], "line1") == 0)
		return line_member();
	if (strcmp(argv[1], "hammer") == 0 && argc == 3)
		return hammer((unsigned)atoi(argv[2]));
	if (strcmp(argv[1], "fill") == 0 && argc == 3)
		return fill((size_t)atoi(argv[2]));
	if (strcmp(argv[1], "hold") == 0 && argc == 3)
		return holder(atoi(argv[2]));
	if (strcmp(argv[1], "exec1") == 0 && argc == 3)
		return execer("/proc/self/exe", argv[2]);
	if (strcmp(argv[1], "idle") == 0 && argc == 3)
		return idle(atoi(argv[2]));
	e2e_shm_dir();
	if (strcmp(argv[1], "run") == 0 && argc == 3)
		return run("/proc/self/exe", argv[2]);
	if (strcmp(argv[1], "exec") == 0 && argc == 3)
		return exec_test("/proc/self/exe", argv[2]);
	if (strcmp(argv[1], "percent") == 0 && argc == 3)
		return percent("/proc/self/exe", argv[2]);
	if (strcmp(argv[1], "full") == 0 && argc == 3)
		return full("/proc/self/exe", argv[2]);
	if (strcmp(argv[1], "fit") == 0 && argc == 3)
		return fit("/proc/self/exe", argv[2]);
	if (strcmp(argv[1], "line") == 0 && argc == 3)
		return line("/proc/self/exe", argv[2]);
	if (strcmp(argv[1], "sched") == 0 && argc == 3)
		return sched((size_t)atoi(argv[2]));
	fprintf(stderr, "usage: e2e_group run|exec|percent|fit|full|line ONDRIVER_DIR | sched MIB\n");
	return 2;
}
