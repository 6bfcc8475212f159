/* The group behind the budget (group_budget.h): joining the group file once, leaving it as
 * the process ends, each device's slot by its UUID, and what a process says about both (one
 * line each). Lock-free but for the join, which one thread does while the others wait for it
 * (it touches only this process's state and the file: no other process can hold it up). What
 * it knows of a device (its UUID, its size) the registry tells it (gp_group_budget_install).
 * Must not depend on the registry or the call bodies. */
#include "group_budget.h"

#include <errno.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "budget.h"
#include "format.h"
#include "group.h"
#include "log.h"

enum { JOIN_NONE, JOIN_BUSY, JOIN_DONE, JOIN_OFF };
/* A device's group slot: SLOT_UNKNOWN until its first take, SLOT_NONE when it has none. */
#define SLOT_UNKNOWN (-2)
#define SLOT_NONE (-1)

static const struct gp_config *cfg; /* the process's, set once by the initialisation */
static gp_group_budget_facts facts;
static struct gp_group group;
static atomic_int state = JOIN_NONE;
static atomic_bool lost; /* not counted in the group any more: every take refused */
static atomic_bool retired; /* the process is ending and has left the group (lost too) */
static atomic_int slot[GPUPOOL_MAX_DEVICES];
static atomic_bool slots_set;
/* Bytes taken on a device before its UUID could be read (a runtime that loads the driver
 * only at its first allocation): counted into the group when the UUID is known. */
static _Atomic uint64_t early[GPUPOOL_MAX_DEVICES];

static void reset_slots(void)
{
	for (int d = 0; d < GPUPOOL_MAX_DEVICES; d++) {
		atomic_store_explicit(&slot[d], SLOT_UNKNOWN, memory_order_relaxed);
		atomic_store_explicit(&early[d], 0, memory_order_relaxed);
	}
	atomic_store_explicit(&slots_set, true, memory_order_release);
}

/* As the process ends: its share goes back to the group. A destructor of libgpupool.so, not
 * an exit handler: the C library runs the objects' destructors after every exit handler
 * (atexit), wherever it was registered, so what the program's handlers allocate is counted
 * until they are done. Whatever is asked after this (a thread still running, a destructor of
 * a library that ends after gpupool) is refused: the process is not counted any more, and a
 * take it passed would be memory the group never sees. Never leaves at a fork's or an exec's
 * image change (no destructor runs); a killed process's share is returned by the next
 * member that looks (group.h). No CUDA, no lock. */
__attribute__((destructor)) static void leave_at_end(void)
{
	if (atomic_load(&state) == JOIN_DONE && !atomic_exchange(&retired, true)) {
		atomic_store(&lost, true); /* before the share goes: a take from now on is refused */
		gp_group_retire(&group);
	}
}

/* Joins once; true when this process is a member (false: no group, or it could not join:
 * gp_group_budget_take refuses then). */
static bool joined(void)
{
	int s = atomic_load_explicit(&state, memory_order_acquire);
	if (__builtin_expect(s == JOIN_DONE, 1))
		return !atomic_load_explicit(&lost, memory_order_relaxed);
	if (s == JOIN_OFF)
		return false;
	if (s == JOIN_NONE && atomic_compare_exchange_strong(&state, &s, JOIN_BUSY)) {
		char why[400];
		reset_slots();
		int rc = gp_group_join(&group, cfg->group, why, sizeof why);
		/* a cap that cannot be applied as asked is not dropped: without a member slot the
		 * process cannot be counted, so it takes nothing (docs/security.md) */
		if (rc)
			gp_log(GP_LOG_ERROR, "group %s: %s; this process cannot be counted in the group, so every allocation "
					     "is refused (out of memory) rather than run without its cap (group:none runs "
					     "without a group)",
			       cfg->group, why);
		else
			gp_log(GP_LOG_INFO, "group %s: joined (member slot %u)", cfg->group, group.me);
		atomic_store_explicit(&state, rc ? JOIN_OFF : JOIN_DONE, memory_order_release);
		return rc == 0;
	}
	while ((s = atomic_load_explicit(&state, memory_order_acquire)) == JOIN_BUSY)
		sched_yield(); /* another thread of this process joins: a few system calls */
	return s == JOIN_DONE;
}

/* "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx", as nvidia-smi prints a UUID. */
static void uuid_text(char out[GP_FORMAT_UUID_LEN], const unsigned char uuid[GP_GROUP_UUID_LEN])
{
	struct gpupool_device_stats st = {0};
	memcpy(st.uuid, uuid, sizeof st.uuid);
	gp_format_uuid(out, &st);
}

/* The group slot of `device`, found on first use; SLOT_UNKNOWN while its UUID cannot be read
 * (looked for again at the next call). */
static int device_slot(int device)
{
	int s = atomic_load_explicit(&slot[device], memory_order_acquire);
	if (__builtin_expect(s != SLOT_UNKNOWN, 1))
		return s;
	unsigned char uuid[GP_GROUP_UUID_LEN];
	size_t total = 0;
	/* a percentage needs the device's size */
	int known = facts(device, uuid, &total, cfg->group_limit_percent != 0);
	size_t want = gp_config_group_limit(cfg, total);
	if (known != 0)
		return SLOT_UNKNOWN; /* not known yet: counted early, and looked for again */
	if (cfg->group_limit_percent && !total) {
		/* a budget this process cannot say: not set in the file as none */
		gp_log(GP_LOG_ERROR, "group %s: device %d: group_limit:%u%% cannot be resolved (the device's size is not "
				     "known); every allocation on it is refused rather than run without the group's cap",
		       cfg->group, device, cfg->group_limit_percent);
		s = SLOT_NONE;
	} else if ((s = gp_group_device(&group, uuid, want)) < 0) {
		gp_log(GP_LOG_ERROR, "group %s: device %d: the file has no room for another device (%u); every allocation "
				     "on it is refused (out of memory) rather than run without the group's cap",
		       cfg->group, device, GP_GROUP_DEVICES);
		s = SLOT_NONE;
	} else {
		uint64_t budget, used, mine;
		char b[32], w[32], h[32];
		gp_group_total(&group, s, &budget, &used, &mine);
		char u[GP_FORMAT_UUID_LEN];
		uuid_text(u, uuid);
		if (want && budget != want)
			gp_log(GP_LOG_INFO, "group %s: device %d (%s): the group's budget is %s, set by the member that "
					    "first used it; this process's group_limit (%s) is not used",
			       cfg->group, device, u, gp_format_bytes(b, sizeof b, budget),
			       gp_format_bytes(w, sizeof w, want));
		else
			gp_log(GP_LOG_INFO, "group %s: device %d (%s): budget %s, the group holds %s", cfg->group, device,
			       u, budget ? gp_format_bytes(b, sizeof b, budget) : "none", gp_format_bytes(h, sizeof h, used));
	}
	int unknown = SLOT_UNKNOWN;
	if (atomic_compare_exchange_strong(&slot[device], &unknown, s) && s >= 0) {
		uint64_t before = atomic_exchange(&early[device], 0);
		if (before && gp_group_charge(&group, s, before) == -EIDRM)
			atomic_store(&lost, true);
	}
	return atomic_load_explicit(&slot[device], memory_order_acquire);
}

/* The group slot of `device` for this call: SLOT_NONE (no group), SLOT_REFUSE (a group this
 * process is not counted in: it could not join, another member took its slot, or the file
 * has no slot for the device), SLOT_UNKNOWN (its UUID not known yet), or the slot. */
#define SLOT_REFUSE (-3)
static int slot_of(int device)
{
	if (__builtin_expect(!cfg || !cfg->group[0], 1) || device < 0 || device >= GPUPOOL_MAX_DEVICES)
		return SLOT_NONE;
	if (!joined())
		return SLOT_REFUSE; /* not counted: it could not join, was taken for dead, or has left */
	int s = device_slot(device);
	return s == SLOT_NONE ? SLOT_REFUSE : s;
}

static void slot_lost(void)
{
	if (!atomic_exchange(&lost, true) && !atomic_load(&retired))
		gp_log(GP_LOG_ERROR, "group %s: another member took this process for dead and returned its share; this "
				     "process is no longer counted in the group, so every allocation it makes from now on "
				     "is refused (out of memory)",
		       cfg->group);
}

int gp_group_budget_take(int device, size_t bytes)
{
	int s = slot_of(device);
	if (s == SLOT_REFUSE)
		return -ENOMEM;
	if (s == SLOT_UNKNOWN)
		atomic_fetch_add(&early[device], bytes);
	if (s < 0)
		return 0;
	int rc = gp_group_take(&group, s, bytes);
	if (rc == -EIDRM) {
		slot_lost();
		return -ENOMEM; /* no longer counted: nothing more taken, as the process ends too */
	}
	return rc;
}

void gp_group_budget_charge(int device, size_t bytes)
{
	int s = slot_of(device);
	if (s == SLOT_UNKNOWN)
		atomic_fetch_add(&early[device], bytes);
	if (s >= 0 && gp_group_charge(&group, s, bytes) == -EIDRM)
		slot_lost();
}

void gp_group_budget_give(int device, size_t bytes)
{
	if (atomic_load_explicit(&state, memory_order_acquire) != JOIN_DONE || device < 0 ||
	    device >= GPUPOOL_MAX_DEVICES || !atomic_load_explicit(&slots_set, memory_order_acquire))
		return;
	int s = atomic_load_explicit(&slot[device], memory_order_acquire);
	if (s >= 0) {
		gp_group_give(&group, s, bytes);
	} else if (s == SLOT_UNKNOWN) {
		uint64_t e = atomic_load(&early[device]);
		while (e && !atomic_compare_exchange_weak(&early[device], &e, e > bytes ? e - bytes : 0))
			;
	}
}

void gp_group_budget_install(const struct gp_config *c, gp_group_budget_facts f)
{
	static const struct gp_budget_group calls = {
		.take = gp_group_budget_take,
		.give = gp_group_budget_give,
		.charge = gp_group_budget_charge,
		.after_fork = gp_group_budget_after_fork,
	};
	cfg = c;
	facts = f;
	if (c->group[0])
		gp_budget_set_group(&calls);
}

void gp_group_budget_after_fork(void)
{
	if (atomic_load(&state) == JOIN_DONE)
		gp_group_forget(&group);
	atomic_store(&state, JOIN_NONE);
	atomic_store(&lost, false);
	atomic_store(&retired, false);
	atomic_store(&slots_set, false);
}

size_t gp_group_budget_describe(int device, char *buf, size_t cap)
{
	if (cap)
		buf[0] = '\0';
	if (device < 0 || device >= GPUPOOL_MAX_DEVICES || !cfg || !cfg->group[0] || atomic_load(&state) == JOIN_NONE)
		return 0;
	int s = atomic_load(&state) == JOIN_DONE && !atomic_load(&lost) ? atomic_load_explicit(&slot[device], memory_order_acquire)
									 : SLOT_REFUSE;
	if (atomic_load(&retired)) {
		int n = snprintf(buf, cap, "group %s: this process left it as it ended, so it takes nothing more", cfg->group);
		return n > 0 ? (size_t)n : 0;
	}
	if (s == SLOT_REFUSE || s == SLOT_NONE) {
		int n = snprintf(buf, cap, "group %s: this process is not counted in it (the error above), so it takes nothing",
				 cfg->group);
		return n > 0 ? (size_t)n : 0;
	}
	if (s < 0)
		return 0;
	uint64_t budget = 0, used = 0, mine = 0;
	gp_group_total(&group, s, &budget, &used, &mine);
	char b[3][32];
	int n = snprintf(buf, cap, "group %s: budget %s, the group holds %s, this process %s", cfg->group,
			 gp_format_bytes(b[0], sizeof b[0], budget), gp_format_bytes(b[1], sizeof b[1], used),
			 gp_format_bytes(b[2], sizeof b[2], mine));
	return n > 0 ? (size_t)n : 0;
}

void gp_group_budget_clamp(int device, size_t cached, size_t *free_bytes, size_t *total_bytes)
{
	if (device < 0 || device >= GPUPOOL_MAX_DEVICES || atomic_load(&state) != JOIN_DONE || atomic_load(&lost))
		return;
	int s = atomic_load_explicit(&slot[device], memory_order_acquire);
	if (s < 0)
		return;
	uint64_t budget = 0, used = 0, mine = 0;
	gp_group_total(&group, s, &budget, &used, &mine);
	if (!budget)
		return;
	if (*total_bytes > budget)
		*total_bytes = (size_t)budget;
	/* what this process could still get: the group's room, and its own cache (counted in
	 * the group already) */
	uint64_t can = (used < budget ? budget - used : 0) + cached;
	if (*free_bytes > can)
		*free_bytes = (size_t)can;
	if (*free_bytes > *total_bytes)
		*free_bytes = *total_bytes;
}
