/* gpupool's dlsym: the process's dlsym calls come here first (LD_PRELOAD), so that a program
 * that looks a driver entry point up on libcuda's handle (or through RTLD_DEFAULT) gets
 * gpupool's (hooks_driver.c). Everything else goes to the real dlsym with the caller's own
 * return address, so RTLD_NEXT keeps meaning "after the caller". Depends on libcuda.h and
 * hooks_driver.h; must not depend on the registry or the pool. */
#ifndef GP_DLSYM_H
#define GP_DLSYM_H

/* The real dlsym (glibc's), for gpupool's own look-ups: never answered by gpupool. With
 * RTLD_NEXT it searches after libgpupool.so. Callable before any initialisation. */
void *gp_dlsym_real(void *handle, const char *name);

#endif
