/* The driver entry points hooks_driver.c exports, as the shim's table (entries.h) for the
 * two ways a program finds them besides the dynamic linker: dlsym (dlsym.c) and
 * cuGetProcAddress. Depends on entries.h only. */
#ifndef GP_HOOKS_DRIVER_H
#define GP_HOOKS_DRIVER_H

#include "entries.h"

extern const struct gp_entries gp_hooks_driver_entries;

#endif
