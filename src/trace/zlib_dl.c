/* zlib loaded at run time (zlib_dl.h): the process's own copy when it has one, else
 * libz.so.1 from the library path. Never unloaded. Depends on libdl and log.h. */
#include "zlib_dl.h"

#include <dlfcn.h>
#include <pthread.h>
#include <string.h>

#include "log.h"

static struct gp_zlib z;
static const struct gp_zlib *z_ok;
static pthread_once_t z_once = PTHREAD_ONCE_INIT;

static void load(void)
{
	void *h = dlopen("libz.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		gp_log(GP_LOG_WARN, "cannot load zlib (libz.so.1) to write a .gz trace: %s", dlerror());
		return;
	}
#define SYM(name)                                                                      \
	do {                                                                           \
		void *s_ = dlsym(h, #name);                                            \
		if (!s_) {                                                             \
			gp_log(GP_LOG_WARN, "zlib (libz.so.1) lacks %s", #name);       \
			return;                                                        \
		}                                                                      \
		memcpy(&z.name, &s_, sizeof s_);                                       \
	} while (0)
	SYM(gzdopen);
	SYM(gzbuffer);
	SYM(gzwrite);
	SYM(gzerror);
	SYM(gzclose);
	SYM(gzflush);
#undef SYM
	z_ok = &z;
}

const struct gp_zlib *gp_zlib_get(void)
{
	pthread_once(&z_once, load);
	return z_ok;
}
