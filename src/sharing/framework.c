/* The frameworks' caches (framework.h): CPython's C API found with dlsym in the process
 * (the stable names: PyGILState_Ensure, PyRun_String, ...), one short script run in a
 * namespace of its own. Depends on libdl and the log only: no pool, no CUDA. */
#include "framework.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "libcuda.h" /* gp_dlsyms: glibc's dlsym, not gpupool's hook */

typedef void PyObject;
/* CPython's start symbol of a module's statements (Include/compile.h: Py_file_input) */
#define PY_FILE_INPUT 257

static struct {
	int (*IsInitialized)(void);
	int (*IsFinalizing)(void); /* Py_IsFinalizing (3.13) or _Py_IsFinalizing (3.7..3.12) */
	int (*GILState_Ensure)(void);
	void (*GILState_Release)(int);
	PyObject *(*Dict_New)(void);
	int (*Dict_SetItemString)(PyObject *, const char *, PyObject *);
	PyObject *(*Dict_GetItemString)(PyObject *, const char *); /* borrowed */
	PyObject *(*Eval_GetBuiltins)(void);                       /* borrowed */
	PyObject *(*Run_String)(const char *, int, PyObject *, PyObject *);
	long (*Long_AsLong)(PyObject *);
	const char *(*Unicode_AsUTF8)(PyObject *);
	void (*DecRef)(PyObject *);
	void (*Err_Clear)(void);
} py;

/* An entry point by name into a function pointer (ISO C converts no object pointer to one). */
#define LOOK(var, name)                                                         \
	do {                                                                    \
		void *s_ = gp_dlsyms().libc(RTLD_DEFAULT, name);               \
		_Static_assert(sizeof(var) == sizeof s_, "a function pointer"); \
		memcpy(&(var), &s_, sizeof s_);                                 \
	} while (0)

/* Looks the API up until it is found: an interpreter can be loaded at any time (a C program
 * that embeds one late), and once loaded it stays (libpython is never unloaded). */
static bool find_api(void)
{
	static bool found; /* the release thread's alone */
	if (found)
		return true;
	LOOK(py.IsInitialized, "Py_IsInitialized");
	if (!py.IsInitialized)
		return false;
	LOOK(py.IsFinalizing, "Py_IsFinalizing");
	if (!py.IsFinalizing)
		LOOK(py.IsFinalizing, "_Py_IsFinalizing");
	LOOK(py.GILState_Ensure, "PyGILState_Ensure");
	LOOK(py.GILState_Release, "PyGILState_Release");
	LOOK(py.Dict_New, "PyDict_New");
	LOOK(py.Dict_SetItemString, "PyDict_SetItemString");
	LOOK(py.Dict_GetItemString, "PyDict_GetItemString");
	LOOK(py.Eval_GetBuiltins, "PyEval_GetBuiltins");
	LOOK(py.Run_String, "PyRun_String");
	LOOK(py.Long_AsLong, "PyLong_AsLong");
	LOOK(py.Unicode_AsUTF8, "PyUnicode_AsUTF8");
	LOOK(py.DecRef, "Py_DecRef");
	LOOK(py.Err_Clear, "PyErr_Clear");
	found = py.GILState_Ensure && py.GILState_Release && py.Dict_New && py.Dict_SetItemString &&
		py.Dict_GetItemString && py.Eval_GetBuiltins && py.Run_String && py.Long_AsLong &&
		py.Unicode_AsUTF8 && py.DecRef && py.Err_Clear;
	return found;
}

/* The interpreter runs, and is not finalising: taking its lock would then hang this thread
 * for good (3.12 and later), or crash (older). Checked again under the lock. */
static bool running(void)
{
	return py.IsInitialized() && !(py.IsFinalizing && py.IsFinalizing());
}

bool gp_framework_present(void)
{
	return find_api() && running();
}

/* Only modules already imported, only CUDA already initialised: nothing is loaded or
 * started for the request. Each framework in its own try: one that raises does not keep
 * the other from emptying. */
static const char script[] =
	"import sys\n"
	"n = 0\n"
	"msg = ''\n"
	"t = sys.modules.get('torch')\n"
	"try:\n"
	"    if t is not None and t.cuda.is_initialized():\n"
	"        t.cuda.empty_cache()\n"
	"        n += 1\n"
	"except BaseException as e:\n"
	"    msg += 'torch: %s: %s; ' % (type(e).__name__, e)\n"
	"c = sys.modules.get('cupy')\n"
	"try:\n"
	"    if c is not None:\n"
	"        c.get_default_memory_pool().free_all_blocks()\n"
	"        n += 1\n"
	"except BaseException as e:\n"
	"    msg += 'cupy: %s: %s; ' % (type(e).__name__, e)\n"
	"del t, c\n";

int gp_framework_empty(char *what, size_t cap, bool (*still)(void *), void *arg)
{
	if (cap)
		what[0] = '\0';
	if (!gp_framework_present())
		return -ENOSYS;
	int g = py.GILState_Ensure();
	int n = -ENOSYS;
	if (running() && still && !still(arg)) {
		n = 0;
		if (cap)
			snprintf(what, cap, "; the interpreter's lock came too late, nothing emptied");
	} else if (running()) {
		PyObject *ns = py.Dict_New();
		if (ns && py.Dict_SetItemString(ns, "__builtins__", py.Eval_GetBuiltins()) == 0) {
			PyObject *r = py.Run_String(script, PY_FILE_INPUT, ns, ns);
			if (r) {
				py.DecRef(r);
				PyObject *k = py.Dict_GetItemString(ns, "n");
				n = k ? (int)py.Long_AsLong(k) : 0;
				PyObject *m = py.Dict_GetItemString(ns, "msg");
				const char *s = m ? py.Unicode_AsUTF8(m) : NULL;
				if (s && cap)
					snprintf(what, cap, "%s", s);
			} else {
				n = 0;
				if (cap)
					snprintf(what, cap, "the script itself raised");
			}
			py.Err_Clear(); /* nothing is left pending for the program's next call */
		}
		if (ns)
			py.DecRef(ns);
	}
	py.GILState_Release(g);
	return n;
}
