/* The two dlsym interposers of the end-to-end tests of a second interposer
 * (e2e_interposer.c): libe2e_tracer.so (e2e_tracer.c), shaped like a tracer or profiler, and
 * libe2e_vgpu.so (e2e_vgpu.c), shaped like HAMi-core's libvgpu.so. Each is preloaded with
 * libgpupool.so, before it or after it. The programs reach their control functions through
 * dlsym, never by linking to them. Test code only. */
#ifndef GP_E2E_INTERPOSERS_H
#define GP_E2E_INTERPOSERS_H

/* libe2e_tracer.so: how many look-ups of names beginning "e2e_probe" its dlsym saw. Not an
 * exported name: only the tracer's dlsym answers "e2e_tracer_seen" with it. */
typedef unsigned long (*e2e_tracer_seen_fn)(void);

/* libe2e_vgpu.so: calls that reached its hook of the driver entry point `name`
 * (cuMemAlloc_v2, cuMemFree_v2, cuMemcpyDtoH_v2). Exported. */
unsigned long e2e_vgpu_calls(const char *name);

#endif
