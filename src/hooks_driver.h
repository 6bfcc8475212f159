/* The driver entry points hooks_driver.c exports, as a table for the two ways a program
 * finds them besides the dynamic linker: dlsym (dlsym.c) and cuGetProcAddress (driver.c).
 * Depends on libcuda.h only. */
#ifndef GP_HOOKS_DRIVER_H
#define GP_HOOKS_DRIVER_H

/* gpupool's entry point named `name` (a name of GP_DRIVER_HOOKED), or NULL. */
void *gp_hooks_driver_by_name(const char *name);

/* gpupool's entry point that stands for the real driver entry point `real` (the address the
 * driver gave for one of the GP_DRIVER_HOOKED names), or NULL when it is not one of them. */
void *gp_hooks_driver_for_real(const void *real);

#endif
