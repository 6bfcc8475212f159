/* The per-device budget: the one place where the process's `limit` (per device) is checked,
 * for the pools' segments and for every allocation path gpupool does not pool (the driver's
 * virtual memory API, pools the program made, managed and pitched memory). Lock-free (one
 * compare-and-swap per take); no CUDA types, no I/O. Must not depend on the registry or the
 * call bodies; a group budget (several processes under one cap) plugs in here, behind take and give. */
#ifndef GP_BUDGET_H
#define GP_BUDGET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend.h"

/* What a figure holds. GP_BUDGET_POOL: the pools' segments (reserved bytes); the others are
 * unpooled, each with its gauge in the page (unpooled_vmm_bytes, ...). */
enum gp_budget_kind {
	GP_BUDGET_POOL,    /* the pools' whole segments: a device reset frees them */
	GP_BUDGET_CHUNKS,  /* chunks mapped into the pools' virtual-memory segments: they outlive
			    * a device reset, until the pool the reset killed gives them back */
	GP_BUDGET_VMM,     /* physical memory from cuMemCreate, until its last release and unmap */
	GP_BUDGET_MEMPOOL, /* bytes reserved by memory pools the program made */
	GP_BUDGET_MANAGED, /* cudaMallocManaged, cuMemAllocManaged */
	GP_BUDGET_PITCHED, /* cudaMallocPitch, cudaMalloc3D, cuMemAllocPitch */
	GP_BUDGET_LATE,    /* cudaMalloc and cuMemAlloc (and their stream-ordered forms) passed
			    * to CUDA once exit has begun: counted until the process ends */
	GP_BUDGET_KINDS
};

/* Takes `bytes` of device `device`'s budget for `kind`: 0, or -ENOMEM when the device's
 * figures (every kind together) would pass its limit (nothing taken then), or -EBUSY when
 * the gate refuses (an earlier waiter on the GPU needs the memory: gp_budget_set_gate). No
 * limit and no gate: always 0, and the bytes are counted. -EINVAL for a device out of range.
 * Any thread, any lock held (the pool's included): atomics only, but for the gate's own
 * leaf lock while anyone waits. */
int gp_budget_take(int device, size_t bytes, enum gp_budget_kind kind);

/* The calling thread's last refused take was refused by the limit or the group (not the
 * gate): what other processes free cannot change that (the wait queue does not wait for
 * it). Reset by a take that succeeds. */
bool gp_budget_refused_last(void);

/* Gives back `bytes` taken for `kind`. More than the kind holds is an inconsistency: the
 * figure goes to zero (never wraps) and gp_budget_inconsistencies counts it. */
void gp_budget_give(int device, size_t bytes, enum gp_budget_kind kind);

/* Counts `bytes` for `kind` without the limit check: memory the device already handed out
 * (a program's pool that grew by more than was taken for it). */
void gp_budget_charge(int device, size_t bytes, enum gp_budget_kind kind);

/* What `kind` holds on `device` now (bytes); GP_BUDGET_KINDS: every kind together. */
uint64_t gp_budget_held(int device, enum gp_budget_kind kind);

/* The device's limit as the budget applies it (bytes; 0: none), and setting it. The registry
 * sets it as it makes the device's pool (struct gp_pool_params.limit, the slot's
 * limit_bytes), before anything is taken on the device: every path makes the pool first. */
uint64_t gp_budget_limit(int device);
void gp_budget_set_limit(int device, uint64_t bytes);

/* Closes `device`'s budget (-1: every device's): from now on every take is refused, with no
 * figure changed; gives still give. For a cap that cannot be applied as asked (docs/security.md,
 * "Caps that cannot be applied"): a configuration that names one (every device, for the
 * process's life, a forked child's too), or a percentage limit whose device's size is not
 * known (that device, until a fork). */
void gp_budget_close(int device);
/* Whether `device`'s budget is closed (gp_budget_close). */
bool gp_budget_closed(int device);

/* Whether anything caps `device`: its limit, a group, or a closed budget
 * (gp_budget_close). Without a cap, a take refused is one that no figure can count (more bytes
 * than UINT64_MAX less what is held): no device has them. */
bool gp_budget_capped(int device);

/* Gives back more than was held, counted since the process started (each one logged once). */
uint64_t gp_budget_inconsistencies(void);

/* A device reset destroyed every whole segment of the device's pool (the pool is killed):
 * its GP_BUDGET_POOL figure goes to zero. Its virtual-memory chunks (GP_BUDGET_CHUNKS) stay
 * counted until the killed pool unmaps them. Called inside the reset gate, where no segment
 * grows. */
void gp_budget_pool_gone(int device);

/* (budget_backend.c) `in` with its segment calls going through the budget (GP_BUDGET_POOL): a segment the
 * budget refuses fails with -EDQUOT (backend.h) before the device is asked. `in` must outlive the
 * answer; the same `in` gets the same answer. */
const struct gp_backend *gp_budget_backend(const struct gp_backend *in);

/* A group budget behind this one (group_budget.c): asked after the device's own limit, told
 * of every give and charge, and of a fork. None until set (and in tests of the budget alone). */
struct gp_budget_group {
	int (*take)(int device, size_t bytes);    /* 0, or -ENOMEM: the group is full */
	void (*give)(int device, size_t bytes);
	void (*charge)(int device, size_t bytes);
	void (*after_fork)(void);
};
void gp_budget_set_group(const struct gp_budget_group *group);

/* A gate before each take of device memory (every kind but managed memory), once set: the
 * wait queue of the GPU (sharing's waitq.h) answers 0, or -EBUSY when the memory must stay
 * for an earlier waiter. Called before the limit's check, with any lock held; cheap (one
 * load) while nobody waits on the device. */
struct gp_budget_gate {
	int (*take)(int device, size_t bytes);
};
void gp_budget_set_gate(const struct gp_budget_gate *gate);

/* In a forked child: every figure is zero (the parent's memory is not the child's). */
void gp_budget_after_fork(void);

#endif
