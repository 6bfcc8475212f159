/* gpupool's own driver entry points as a table, for the ways a program finds them besides
 * the dynamic linker: dlsym on libcuda's handle, cuGetProcAddress, and the runtime's
 * cudaGetDriverEntryPoint(ByVersion). The type and the look-ups are the calls layer's; the
 * rows are the hooks layer's (hooks_driver.c), which passes them down with each look-up, so
 * nothing here refers to the layer above. Depends on libcuda.h only. */
#ifndef GP_ENTRIES_H
#define GP_ENTRIES_H

#include <stdbool.h>
#include <stddef.h>

#include "libcuda.h"

struct gp_entry {
	const char *name;     /* a name of GP_DRIVER_HOOKED */
	void (*ours)(void);   /* gpupool's exported entry point of that name */
	size_t real_off;      /* of the real entry point in struct gp_driver */
};

struct gp_entries {
	const struct gp_entry *rows;
	size_t n;
};

/* gpupool's entry point named `name`, or NULL when it is not one of the table's or when
 * the loaded driver `d` lacks the real one (a name the driver does not have is not found,
 * as natively). `d` NULL: no driver loaded yet, the name alone decides. */
void *gp_entries_by_name(const struct gp_entries *t, const struct gp_driver *d, const char *name);

/* gpupool's entry point that stands for the real driver entry point `real` (the address the
 * driver `d` gave for one of the table's names), or NULL when it is not one of them. */
void *gp_entries_for_real(const struct gp_entries *t, const struct gp_driver *d, const void *real);

/* gpupool's entry point in place of `answer`, the address the driver `d` handed out
 * (through cuGetProcAddress, or through a runtime that asked it) for a look-up of `symbol`
 * (a base name, as those calls are asked: "cuMemAlloc") at `version` (1000 * major + 10 *
 * minor), with the per-thread default stream variants asked for or not: matched by address,
 * or, where the driver hands out another address than its exported symbol's, by the name it
 * must have picked for that version and variant. NULL: `answer` stands for no interposed
 * name, and is to be handed out as it is. */
void *gp_entries_for_answer(const struct gp_entries *t, const struct gp_driver *d, const char *symbol,
			    const void *answer, int version, bool per_thread);

#endif
