/* C++ exceptions thrown from C through the Itanium C++ ABI entry points of the process's
 * C++ runtime: __cxa_allocate_exception, std::runtime_error's constructor from const char*,
 * __cxa_throw. Looked up once in libstdc++.so.6 when it is already loaded (PyTorch always
 * loads it) or else in the global scope; a process without one never throws. */
#include "cxx_error.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stddef.h>
#include <string.h>

/* sizeof(std::runtime_error) is 16 in libstdc++ (vtable pointer and a reference-counted
 * string); the object gets room to spare. */
#define GP_CXX_OBJ_SIZE 64

static struct {
	void *(*allocate_exception)(size_t);
	void (*throw_)(void *, void *, void (*)(void *));
	void (*ctor)(void *, const char *);
	void (*dtor)(void *);
	void *typeinfo;
	bool ok;
} X;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void *sym(void *h, const char *name)
{
	void *s = h ? dlsym(h, name) : NULL;
	return s ? s : dlsym(RTLD_DEFAULT, name);
}

#define GP_CXX_SET(field, h, name)                   \
	do {                                         \
		void *s_ = sym(h, name);             \
		memcpy(&(field), &s_, sizeof(field)); \
	} while (0)

static void resolve(void)
{
	void *h = dlopen("libstdc++.so.6", RTLD_NOW | RTLD_NOLOAD); /* only if already there */
	GP_CXX_SET(X.allocate_exception, h, "__cxa_allocate_exception");
	GP_CXX_SET(X.throw_, h, "__cxa_throw");
	GP_CXX_SET(X.ctor, h, "_ZNSt13runtime_errorC1EPKc");
	GP_CXX_SET(X.dtor, h, "_ZNSt13runtime_errorD1Ev");
	X.typeinfo = sym(h, "_ZTISt13runtime_error");
	X.ok = X.allocate_exception && X.throw_ && X.ctor && X.dtor && X.typeinfo;
	if (h)
		dlclose(h); /* RTLD_NOLOAD took a reference; the library stays loaded */
}

bool gp_cxx_available(void)
{
	pthread_once(&once, resolve);
	return X.ok;
}

void gp_cxx_throw(const char *msg)
{
	if (!gp_cxx_available())
		return;
	void *obj = X.allocate_exception(GP_CXX_OBJ_SIZE); /* terminates rather than fail */
	memset(obj, 0, GP_CXX_OBJ_SIZE);
	X.ctor(obj, msg); /* copies msg */
	X.throw_(obj, X.typeinfo, X.dtor);
}
