/* The frameworks' caches (framework.h): CPython's C API found with dlsym in the process
 * (the stable names: PyGILState_Ensure, PyRun_String, ...), one short script run in a
 * namespace of its own, on a thread of this file's with a Python thread's stack. Depends on
 * libdl, the clock and the log only: no pool, no CUDA. */
#include "framework.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "libcuda.h" /* gp_dlsyms: glibc's dlsym, not gpupool's hook */
#include "log.h"
#include "proc.h"

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
	unsigned long long (*Long_AsUnsignedLongLong)(PyObject *);
	PyObject *(*List_GetItem)(PyObject *, long); /* borrowed */
	long (*List_Size)(PyObject *);
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

static pthread_mutex_t find_lock = PTHREAD_MUTEX_INITIALIZER; /* a leaf: dlsym only under it */
static atomic_bool found;

/* Looks the API up until it is found: an interpreter can be loaded at any time (a C program
 * that embeds one late), and once loaded it stays (libpython is never unloaded). Any thread. */
static bool find_api(void)
{
	if (atomic_load_explicit(&found, memory_order_acquire))
		return true;
	pthread_mutex_lock(&find_lock);
	if (!atomic_load_explicit(&found, memory_order_relaxed)) {
		LOOK(py.IsInitialized, "Py_IsInitialized");
		if (py.IsInitialized) {
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
			LOOK(py.Long_AsUnsignedLongLong, "PyLong_AsUnsignedLongLong");
			LOOK(py.List_GetItem, "PyList_GetItem");
			LOOK(py.List_Size, "PyList_Size");
			LOOK(py.Unicode_AsUTF8, "PyUnicode_AsUTF8");
			LOOK(py.DecRef, "Py_DecRef");
			LOOK(py.Err_Clear, "PyErr_Clear");
			atomic_store_explicit(&found,
					      py.GILState_Ensure && py.GILState_Release && py.Dict_New &&
						      py.Dict_SetItemString && py.Dict_GetItemString &&
						      py.Eval_GetBuiltins && py.Run_String && py.Long_AsLong &&
						      py.Long_AsUnsignedLongLong && py.List_GetItem && py.List_Size &&
						      py.Unicode_AsUTF8 && py.DecRef && py.Err_Clear,
					      memory_order_release);
		}
	}
	pthread_mutex_unlock(&find_lock);
	return atomic_load_explicit(&found, memory_order_relaxed);
}

/* The interpreter runs, and is not finalising: taking its lock would then hang this thread
 * for good (3.12 and later), or end it (3.11: PyGILState_Ensure calls pthread_exit). Checked
 * again under the lock. */
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
 * the other from emptying. `idle` is what PyTorch holds reserved and unused on each of its
 * devices after the empty (expandable segments included: their pages are unmapped and
 * released by the empty), by CUDA index. */
#define SCRIPT_BODY \
	"import sys\n" \
	"n = 0\n" \
	"msg = ''\n" \
	"idle = []\n" \
	"t = sys.modules.get('torch')\n" \
	"try:\n" \
	"    if t is not None and t.cuda.is_initialized():\n" \
	"        if empty:\n" \
	"            t.cuda.empty_cache()\n" \
	"            n += 1\n" \
	"        for d in range(t.cuda.device_count()):\n" \
	"            idle.append(max(0, t.cuda.memory_reserved(d) - t.cuda.memory_allocated(d)))\n" \
	"except BaseException as e:\n" \
	"    msg += 'torch: %s: %s; ' % (type(e).__name__, e)\n" \
	"c = sys.modules.get('cupy')\n" \
	"try:\n" \
	"    if c is not None and empty:\n" \
	"        c.get_default_memory_pool().free_all_blocks()\n" \
	"        n += 1\n" \
	"except BaseException as e:\n" \
	"    msg += 'cupy: %s: %s; ' % (type(e).__name__, e)\n" \
	"del t, c\n"
static const char empty_script[] = "empty = True\n" SCRIPT_BODY;
static const char measure_script[] = "empty = False\n" SCRIPT_BODY;

/* ---- the framework thread ----------------------------------------------------------------
 * The program's Python runs here, never on the release thread: a thread of its own with the
 * stack a Python thread gets (the default attributes: RLIMIT_STACK's size, where a 256 KiB
 * stack once ended a deep recursion in SIGSEGV), and one nobody joins: should CPython end it
 * (3.11 during finalisation) or hang it (3.12 and later), nobody waits for it: the release
 * thread posts a job and goes on, the job's answer comes back through its callback, and exit
 * never waits for it at all. One job at a time. */

static pthread_mutex_t job_lock = PTHREAD_MUTEX_INITIALIZER; /* a leaf */
static pthread_cond_t job_cond = PTHREAD_COND_INITIALIZER;
static struct {
	uint64_t posted, done;        /* job numbers: a job is in flight while posted > done */
	bool empty;                   /* empty the caches (else only measure) */
	struct gp_framework_still still;
	gp_framework_done done_cb;    /* told the answer, on the framework's thread */
	bool queued;                  /* an empty posted while another job ran: next */
	struct gp_framework_still queued_still;
	gp_framework_done queued_done;
	int n;                        /* its answer: caches emptied, or -ENOSYS */
	char what[192];
	uint64_t idle[GP_FRAMEWORK_DEVICES];
	unsigned nidle;
} job;
static bool thread_alive; /* under job_lock */
static uint64_t idle_seen[GP_FRAMEWORK_DEVICES]; /* under job_lock: the last measure */
static uint64_t idle_seen_ns;

/* One job with the interpreter's lock held; the answer into job.* (under job_lock after). */
static void run_job(bool empty, const struct gp_framework_still *still, int *n_out, char *what, size_t cap,
		    uint64_t *idle, unsigned *nidle)
{
	*n_out = -ENOSYS;
	*nidle = 0;
	what[0] = '\0';
	if (!gp_framework_present())
		return;
	int g = py.GILState_Ensure();
	if (running() && empty && still->check && !still->check(still)) {
		*n_out = 0;
		snprintf(what, cap, "the interpreter's lock came too late, nothing emptied");
	} else if (running()) {
		PyObject *ns = py.Dict_New();
		if (ns && py.Dict_SetItemString(ns, "__builtins__", py.Eval_GetBuiltins()) == 0) {
			PyObject *r = py.Run_String(empty ? empty_script : measure_script, PY_FILE_INPUT, ns, ns);
			if (r) {
				py.DecRef(r);
				PyObject *k = py.Dict_GetItemString(ns, "n");
				*n_out = k ? (int)py.Long_AsLong(k) : 0;
				PyObject *m = py.Dict_GetItemString(ns, "msg");
				const char *s = m ? py.Unicode_AsUTF8(m) : NULL;
				if (s)
					snprintf(what, cap, "%s", s);
				PyObject *l = py.Dict_GetItemString(ns, "idle");
				long len = l ? py.List_Size(l) : 0;
				for (long i = 0; i < len && i < GP_FRAMEWORK_DEVICES; i++) {
					PyObject *v = py.List_GetItem(l, i);
					idle[i] = v ? (uint64_t)py.Long_AsUnsignedLongLong(v) : 0;
					*nidle = (unsigned)i + 1;
				}
			} else {
				*n_out = 0;
				snprintf(what, cap, "the script itself raised");
			}
			py.Err_Clear(); /* nothing is left pending for the program's next call */
		}
		if (ns)
			py.DecRef(ns);
	}
	py.GILState_Release(g);
}

/* The thread ended inside Python (pthread_exit from PyGILState_Ensure): the next job starts
 * a new one, and a waiter for this one stops waiting. */
static void thread_ended(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&job_lock);
	thread_alive = false;
	pthread_cond_broadcast(&job_cond);
	pthread_mutex_unlock(&job_lock);
}

static void *framework_main(void *arg)
{
	(void)arg;
	pthread_cleanup_push(thread_ended, NULL);
	pthread_mutex_lock(&job_lock);
	for (;;) {
		while (job.done >= job.posted)
			pthread_cond_wait(&job_cond, &job_lock);
		uint64_t id = job.posted;
		bool empty = job.empty;
		struct gp_framework_still still = job.still;
		gp_framework_done done = job.done_cb;
		pthread_mutex_unlock(&job_lock);
		int n;
		char what[sizeof job.what];
		uint64_t idle[GP_FRAMEWORK_DEVICES] = {0};
		unsigned nidle = 0;
		run_job(empty, &still, &n, what, sizeof what, idle, &nidle);
		pthread_mutex_lock(&job_lock);
		job.n = n;
		memcpy(job.what, what, sizeof what);
		memcpy(job.idle, idle, sizeof idle);
		job.nidle = nidle;
		if (nidle) {
			memcpy(idle_seen, idle, sizeof idle);
			idle_seen_ns = gp_clock_ns(CLOCK_MONOTONIC);
		}
		pthread_mutex_unlock(&job_lock);
		if (done)
			done(&still, n, what, idle, nidle);
		pthread_mutex_lock(&job_lock);
		job.done = id;
		if (job.queued) {
			job.queued = false;
			++job.posted;
			job.empty = true;
			job.still = job.queued_still;
			job.done_cb = job.queued_done;
		}
		pthread_cond_broadcast(&job_cond);
	}
	pthread_cleanup_pop(0); /* never reached: the loop ends only with the thread */
	return NULL;
}

/* Under job_lock: the thread, started if it is not there. */
static bool thread_ready(void)
{
	if (thread_alive)
		return true;
	pthread_attr_t a;
	pthread_attr_init(&a);
	pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
	pthread_t t;
	/* a job of a thread that ended is lost: its number is done */
	job.done = job.posted;
	job.queued = false;
	thread_alive = pthread_create(&t, &a, framework_main, NULL) == 0;
	pthread_attr_destroy(&a);
	if (!thread_alive)
		gp_log(GP_LOG_WARN, "cannot start the thread that empties frameworks' caches: none is emptied");
	return thread_alive;
}

int gp_framework_post(bool empty, const struct gp_framework_still *still, gp_framework_done done)
{
	if (!gp_framework_present())
		return -ENOSYS;
	pthread_mutex_lock(&job_lock);
	int rc = 0;
	if (job.posted > job.done && thread_alive) {
		/* the last one still runs in the interpreter: an empty waits in the one slot
		 * behind it (a later one takes the slot), a measure is not needed twice */
		if (empty) {
			job.queued = true;
			job.queued_done = done;
			if (still)
				job.queued_still = *still;
			else
				memset(&job.queued_still, 0, sizeof job.queued_still);
		} else {
			rc = -EBUSY;
		}
	} else if (!thread_ready()) {
		rc = -ENOSYS;
	} else {
		++job.posted;
		job.empty = empty;
		job.done_cb = done;
		if (still)
			job.still = *still;
		else
			memset(&job.still, 0, sizeof job.still);
		pthread_cond_broadcast(&job_cond);
	}
	pthread_mutex_unlock(&job_lock);
	return rc;
}

uint64_t gp_framework_idle(int device, uint64_t *seen_ns)
{
	pthread_mutex_lock(&job_lock);
	uint64_t v = device >= 0 && device < GP_FRAMEWORK_DEVICES ? idle_seen[device] : 0;
	if (seen_ns)
		*seen_ns = idle_seen_ns;
	pthread_mutex_unlock(&job_lock);
	return v;
}

void gp_framework_after_fork(void)
{
	/* the parent's thread is not here, and its locks may have been held */
	pthread_mutex_init(&job_lock, NULL);
	pthread_cond_init(&job_cond, NULL);
	pthread_mutex_init(&find_lock, NULL);
	thread_alive = false;
	job.done = job.posted;
	job.queued = false;
	memset(idle_seen, 0, sizeof idle_seen);
	idle_seen_ns = 0;
}
