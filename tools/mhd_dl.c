/* libmicrohttpd loaded at run time (mhd_dl.h), as src/trace/zlib_dl.c loads zlib: the file named
 * by $GPUPOOL_MICROHTTPD, else libmicrohttpd.so.12 from the library path. Never unloaded.
 * Depends on libdl only. */
#include "mhd_dl.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct gp_mhd m;
static const struct gp_mhd *m_ok;

const struct gp_mhd *gp_mhd_load(char *why, size_t wl)
{
	if (m_ok)
		return m_ok;
	const char *name = getenv(GP_MHD_ENV);
	if (!name || !*name)
		name = GP_MHD_SONAME;
	void *h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		const char *e = dlerror();
		snprintf(why, wl, "%s", e ? e : name);
		return NULL;
	}
#define SYM(field, symbol)                                                                      \
	do {                                                                                    \
		void *s_ = dlsym(h, #symbol);                                                   \
		if (!s_) {                                                                      \
			snprintf(why, wl, "%s lacks %s", name, #symbol);                          \
			dlclose(h);                                                             \
			return NULL;                                                            \
		}                                                                               \
		memcpy(&m.field, &s_, sizeof s_);                                               \
	} while (0)
	SYM(start_daemon, MHD_start_daemon);
	SYM(stop_daemon, MHD_stop_daemon);
	SYM(get_daemon_info, MHD_get_daemon_info);
	SYM(get_connection_info, MHD_get_connection_info);
	SYM(lookup_connection_value, MHD_lookup_connection_value);
	SYM(create_response_from_buffer, MHD_create_response_from_buffer);
	SYM(add_response_header, MHD_add_response_header);
	SYM(queue_response, MHD_queue_response);
	SYM(destroy_response, MHD_destroy_response);
#undef SYM
	m_ok = &m;
	return m_ok;
}
