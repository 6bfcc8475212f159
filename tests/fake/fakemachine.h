/* The fakes' machine: physical devices and their capacity, shared by every process of the
 * fake runtime and the fake driver that names one file (FAKECUDA_MACHINE), and the devices
 * CUDA_VISIBLE_DEVICES shows. Static functions: fakemachine.c is included by each fake, after
 * this header; depends on nothing of theirs. For tests only: the file trusts every process
 * that maps it. */
#ifndef GPFAKE_FAKEMACHINE_H
#define GPFAKE_FAKEMACHINE_H

#include <stdbool.h>
#include <stddef.h>

#define FM_MAXDEV 16
/* a fake may leave some of them unused (the runtime on the driver has no machine file) */
#define FM_FN static __attribute__((unused))

/* Joins the machine of FAKECUDA_MACHINE, when set: *nphys and cap[0..FM_MAXDEV) are this
 * process's settings on entry, the machine's on return (a one-line warning on stderr when they
 * differ). A bad file (wrong size or magic, a symlink, not a regular file, no free slot) gets a
 * one-line message and leaves the settings as they are. `who` prefixes messages. Returns
 * fm_on(). Call once, before any other fm_ function. */
FM_FN bool fm_open(const char *who, int *nphys, size_t cap[FM_MAXDEV]);
/* This process counts its device memory in the machine (false without one, and in a child
 * after fork, which keeps to its own capacity). */
FM_FN bool fm_on(void);
/* Takes `bytes` of physical device `phys` for this process, if the machine-wide use of live
 * processes leaves room (dead processes' memory is reclaimed first when it does not). */
FM_FN bool fm_charge(int phys, size_t bytes);
/* Gives back bytes this process took with fm_charge. */
FM_FN void fm_uncharge(int phys, size_t bytes);
/* Bytes of `phys` held by live processes (dead ones reclaimed first), and its capacity. */
FM_FN size_t fm_used(int phys);
FM_FN size_t fm_capacity(int phys);
FM_FN void fm_set_capacity(int phys, size_t bytes);

/* The UUID of physical device `phys`, the same in every process: "fakegpu", zeros, phys + 1
 * in the last byte. */
FM_FN void fm_uuid(int phys, unsigned char out[16]);
/* The devices CUDA_VISIBLE_DEVICES shows among nphys physical ones, as the real runtime and
 * driver read it: a comma list of indices or "GPU-<uuid>" (a unique prefix of the hex UUID),
 * up to the first invalid entry; unset: all. phys[i] gets visible device i's physical index.
 * Returns how many. */
FM_FN int fm_visible(int nphys, int phys[FM_MAXDEV]);

#endif
