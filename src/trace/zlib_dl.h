/* zlib, loaded at run time (dlopen of libz.so.1) by the trace recorder when a .gz trace is
 * written, so that the preloaded library has no load-time dependency on it. The tools and
 * the trace reader link zlib as usual. Depends on libdl; zlib.h for the types only. */
#ifndef GP_ZLIB_DL_H
#define GP_ZLIB_DL_H

#include <zlib.h>

struct gp_zlib {
	gzFile (*gzdopen)(int fd, const char *mode);
	int (*gzbuffer)(gzFile f, unsigned size);
	int (*gzwrite)(gzFile f, voidpc buf, unsigned len);
	const char *(*gzerror)(gzFile f, int *errnum);
	int (*gzclose)(gzFile f);
	int (*gzflush)(gzFile f, int flush);
};

/* The table, loaded on the first call (thread-safe); NULL when libz.so.1 or one of its
 * entry points cannot be found (logged once). */
const struct gp_zlib *gp_zlib_get(void);

#endif
