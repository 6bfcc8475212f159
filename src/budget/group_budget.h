/* The group behind the per-device budget (budget.h): this process's membership of the group
 * file that the knob `group` names (group.h), joined at the first take and left as the
 * process ends (after the program's exit handlers), and each device's slot in it, found by
 * the device's UUID. The budget calls these (through the table
 * gp_group_budget_install gives it) after its own limit check; with no group, nothing is
 * installed. Must not depend on the hook bodies. */
#ifndef GP_GROUP_BUDGET_H
#define GP_GROUP_BUDGET_H

#include <stdbool.h>
#include <stddef.h>

#include "config.h"

/* Takes `bytes` of device `device`'s group budget: 0 (also with no group), or -ENOMEM when
 * the group would pass its budget or this process is not counted in it (it could not join,
 * another member took it for dead, the file has no slot for the device, or it has left the
 * group as it ends: a take is never passed uncounted). Any thread, any lock held: the first
 * call joins the group (opens and maps its file once). */
int gp_group_budget_take(int device, size_t bytes);

/* Counts `bytes` without the check (memory the device already handed out). */
void gp_group_budget_charge(int device, size_t bytes);

/* Gives back `bytes` taken on `device`. */
void gp_group_budget_give(int device, size_t bytes);

/* "group FILE: budget 1.0 GiB, the group holds 700.0 MiB, this process 0 B" for the
 * out-of-memory message, into buf; "" (returns 0) when the process is in no group there. */
size_t gp_group_budget_describe(int device, char *buf, size_t cap);

/* cudaMemGetInfo/cuMemGetInfo as a member sees them: total at most the group's budget on
 * `device`, free at most the group's room plus `cached` (this process's own cache, counted
 * in the group already). Left alone with no group there. No lock, no CUDA. */
void gp_group_budget_clamp(int device, size_t cached, size_t *free_bytes, size_t *total_bytes);

/* In a forked child: the parent's membership is not the child's (it joins anew). */
void gp_group_budget_after_fork(void);

/* What the group asks of the registry about `device`: its UUID (the physical GPU, the same in
 * every process) into uuid, and its size in bytes into *total (0: unknown; asked of the device
 * only when need_total). 0, or nonzero while the UUID is not known yet (asked again at the
 * next take). Called with any lock held, as a segment's backend call. */
typedef int (*gp_group_budget_facts)(int device, unsigned char uuid[16], size_t *total, bool need_total);

/* Puts the group behind the per-device budget (gp_budget_set_group) when the knob `group`
 * names a file; the registry's initialisation calls it once, with the process's
 * configuration (kept: it outlives the process's calls) and its facts. */
void gp_group_budget_install(const struct gp_config *cfg, gp_group_budget_facts facts);

#endif
