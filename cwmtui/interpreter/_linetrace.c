/* The tracer's hot path in C: a frame's local trace function that records line events.
 *
 * child.run_job's Python function `local` handles every event; this object stands in for it
 * as a frame's trace function and does the common case itself: a "line" event below the next
 * checkpoint whose locals are all plain immutable values (child.SIMPLE_TYPES). It records
 * (LINE, lineno, names, values) for the parent to repr, and counts the frame in the
 * `count` cell `local` shares with the rest of run_job. Anything else (another event, a
 * checkpoint, a value to repr) goes to `local` unchanged; the parent turns both kinds of record into the same frames.
 *
 * Built as an optional extension: without a C compiler cwmtui falls back to `local` alone.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>
#include <frameobject.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <unistd.h>

/* child.py loads this module only when its ABI is the one it was written for: a stale build
 * (the .so is rebuilt by `pip install -e .`, not by editing this file) is left unused. */
#define LINETRACE_ABI 6

/* child.MAX_VALUE: a longer str or bytes is no plain value (`local` reprs it, cut) */
#define MAX_VALUE (1 << 16)

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *fallback;   /* run_job's `local(frame, event, arg)` */
    PyObject *records;    /* the Recorder's list */
    PyObject *count;      /* cell: frames recorded so far */
    PyObject *next_check; /* cell: the count at which `local` must run (flush, frame limit) */
    PyObject *line_kind;  /* child.LINE */
    PyObject *line_event; /* the interned "line" CPython passes as the event */
    PyObject *last_keys;  /* the names tuple of the last record made here */
    Py_ssize_t handled;   /* line events recorded here (for tests and benchmarks) */
} LineTracer;

static int
is_simple(PyObject *value)
{
    PyTypeObject *t = Py_TYPE(value);
    if (t == &PyUnicode_Type) {
        return PyUnicode_GET_LENGTH(value) <= MAX_VALUE;
    }
    if (t == &PyBytes_Type) {
        return PyBytes_GET_SIZE(value) <= MAX_VALUE;
    }
    return t == &PyLong_Type || t == &PyFloat_Type || t == &PyBool_Type || value == Py_None
        || t == &PyComplex_Type;
}

static PyObject *
call_fallback(LineTracer *self, PyObject *const *args, size_t nargsf)
{
    PyObject *result = PyObject_Vectorcall(self->fallback, args, nargsf, NULL);
    if (result == NULL) {
        return NULL;
    }
    if (result == Py_None) {  /* `local` let go of the frame */
        return result;
    }
    Py_DECREF(result);
    Py_INCREF(self);
    return (PyObject *)self;
}

/* The count cell's value, or -1 when it is not a plain int. */
static long long
cell_count(PyObject *cell)
{
    PyObject *value = PyCell_GET(cell);
    if (value == NULL || !PyLong_CheckExact(value)) {
        return -1;
    }
    int overflow = 0;
    long long n = PyLong_AsLongLongAndOverflow(value, &overflow);
    if (overflow || n < 0) {
        PyErr_Clear();
        return -1;
    }
    return n;
}

/* Record the line event here; 1: done, 0: `local` must handle it, -1: error.
 *
 * Everything that allocates a GC-tracked object (and so may run a collection, finalizers, and
 * through them any code, the frame's locals included) happens before the pass over the locals
 * or is followed by a check that the locals are still what was read. */
static int
record_line(LineTracer *self, PyObject *frame)
{
    long long now = cell_count(self->count);
    long long check = cell_count(self->next_check);
    if (now < 0 || check < 0 || now + 1 >= check) {
        return 0;
    }
    PyObject *locals = PyFrame_GetLocals((PyFrameObject *)frame);
    if (locals == NULL) {
        return -1;
    }
    if (!PyDict_CheckExact(locals)) {
        Py_DECREF(locals);
        return 0;
    }
    Py_ssize_t size = PyDict_GET_SIZE(locals);
    PyObject *values = PyTuple_New(size);
    PyObject *record = PyTuple_New(4);
    PyObject *lineno = PyLong_FromLong(PyFrame_GetLineNumber((PyFrameObject *)frame));
    PyObject *next = PyLong_FromLongLong(now + 1);
    PyObject *keys = NULL;
    int result = -1;
    if (values == NULL || record == NULL || lineno == NULL || next == NULL) {
        goto done;
    }
    result = 0;
    /* no allocation in this pass: the dict cannot change under it */
    PyObject *last = self->last_keys;
    int same = last != NULL && PyTuple_GET_SIZE(last) == size;
    Py_ssize_t pos = 0, i = 0;
    PyObject *key, *value;
    while (PyDict_Next(locals, &pos, &key, &value)) {
        if (i >= size || !is_simple(value)) {
            goto done;
        }
        if (same && PyTuple_GET_ITEM(last, i) != key) {
            same = 0;
        }
        Py_INCREF(value);
        PyTuple_SET_ITEM(values, i, value);
        i++;
    }
    if (i != size) {
        goto done;
    }
    if (same) {
        keys = last;
        Py_INCREF(keys);
    }
    else {
        keys = PyTuple_New(size);  /* may collect: check the locals still hold these values */
        if (keys == NULL) {
            result = -1;
            goto done;
        }
        pos = 0;
        i = 0;
        while (PyDict_Next(locals, &pos, &key, &value)) {
            if (i >= size || PyTuple_GET_ITEM(values, i) != value) {
                goto done;
            }
            Py_INCREF(key);
            PyTuple_SET_ITEM(keys, i, key);
            i++;
        }
        if (i != size) {
            goto done;
        }
        Py_INCREF(keys);
        Py_XSETREF(self->last_keys, keys);
    }
    if (cell_count(self->count) != now) {  /* a finalizer traced a line in between */
        goto done;
    }
    Py_INCREF(self->line_kind);
    PyTuple_SET_ITEM(record, 0, self->line_kind);
    PyTuple_SET_ITEM(record, 1, lineno);
    PyTuple_SET_ITEM(record, 2, keys);
    PyTuple_SET_ITEM(record, 3, values);
    lineno = keys = values = NULL;  /* the record holds them */
    if (PyList_Append(self->records, record) < 0) {
        result = -1;
        goto done;
    }
    if (PyCell_Set(self->count, next) < 0) {
        result = -1;
        goto done;
    }
    self->handled++;
    result = 1;
done:
    Py_DECREF(locals);
    Py_XDECREF(values);
    Py_XDECREF(record);
    Py_XDECREF(lineno);
    Py_XDECREF(next);
    Py_XDECREF(keys);
    return result;
}

static PyObject *
LineTracer_vectorcall(PyObject *callable, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    LineTracer *self = (LineTracer *)callable;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (kwnames == NULL && nargs == 3 && args[1] == self->line_event && PyFrame_Check(args[0])) {
        int done = record_line(self, args[0]);
        if (done < 0) {  /* out of memory, say: `local` meets it again and ends the trace its way */
            PyErr_Clear();
        }
        else if (done) {
            Py_INCREF(self);
            return (PyObject *)self;
        }
    }
    if (kwnames != NULL) {
        PyErr_SetString(PyExc_TypeError, "LineTracer takes no keyword arguments");
        return NULL;
    }
    return call_fallback(self, args, nargsf);
}

static PyObject *
LineTracer_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    static char *names[] = {"fallback", "records", "count", "next_check", "line_kind", NULL};
    PyObject *fallback, *records, *count, *next_check, *line_kind;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO!O!O!O:LineTracer", names, &fallback, &PyList_Type, &records,
                                     &PyCell_Type, &count, &PyCell_Type, &next_check, &line_kind)) {
        return NULL;
    }
    if (!PyCallable_Check(fallback)) {
        PyErr_SetString(PyExc_TypeError, "fallback must be callable");
        return NULL;
    }
    LineTracer *self = (LineTracer *)type->tp_alloc(type, 0);
    if (self == NULL) {
        return NULL;
    }
    self->line_event = PyUnicode_InternFromString("line");
    if (self->line_event == NULL) {
        Py_DECREF(self);
        return NULL;
    }
    self->vectorcall = LineTracer_vectorcall;
    Py_INCREF(fallback);
    self->fallback = fallback;
    Py_INCREF(records);
    self->records = records;
    Py_INCREF(count);
    self->count = count;
    Py_INCREF(next_check);
    self->next_check = next_check;
    Py_INCREF(line_kind);
    self->line_kind = line_kind;
    self->handled = 0;
    return (PyObject *)self;
}

static int
LineTracer_traverse(LineTracer *self, visitproc visit, void *arg)
{
    Py_VISIT(self->fallback);
    Py_VISIT(self->records);
    Py_VISIT(self->count);
    Py_VISIT(self->next_check);
    Py_VISIT(self->line_kind);
    Py_VISIT(self->last_keys);
    return 0;
}

static int
LineTracer_clear(LineTracer *self)
{
    Py_CLEAR(self->fallback);
    Py_CLEAR(self->records);
    Py_CLEAR(self->count);
    Py_CLEAR(self->next_check);
    Py_CLEAR(self->line_kind);
    Py_CLEAR(self->line_event);
    Py_CLEAR(self->last_keys);
    return 0;
}

static void
LineTracer_dealloc(LineTracer *self)
{
    PyObject_GC_UnTrack(self);
    LineTracer_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *
LineTracer_get_handled(LineTracer *self, void *closure)
{
    return PyLong_FromSsize_t(self->handled);
}

static PyGetSetDef LineTracer_getset[] = {
    {"handled", (getter)LineTracer_get_handled, NULL, "line events recorded in C", NULL},
    {NULL},
};

static PyTypeObject LineTracerType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "cwmtui.interpreter._linetrace.LineTracer",
    .tp_basicsize = sizeof(LineTracer),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "A frame's trace function: records plain line events, hands the rest to `fallback`.",
    .tp_new = LineTracer_new,
    .tp_dealloc = (destructor)LineTracer_dealloc,
    .tp_traverse = (traverseproc)LineTracer_traverse,
    .tp_clear = (inquiry)LineTracer_clear,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(LineTracer, vectorcall),
    .tp_getset = LineTracer_getset,
};

/* A crash (a segfault in a ctypes call, say) would lose the records not yet flushed. On a fatal
 * signal, this handler calls the recorder's flush once, then lets the signal take the process as
 * it would have. Running Python in a signal handler is a last resort, so it is bounded: the
 * handler runs on its own stack (a C stack overflow faults again at once otherwise), a second
 * fault meets the default action (SA_RESETHAND), and if the flush cannot finish (the GIL or a
 * lock held by another thread, a heap in ruins) an alarm re-raises the original signal, whatever
 * the program did with SIGALRM. */
static PyObject *fatal_flush = NULL;
static volatile sig_atomic_t fatal_signal = 0;
static const int fatal_signals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL};
static char *fatal_stack = NULL;

static void
fatal_timeout(int unused)
{
    signal(fatal_signal, SIG_DFL);
    raise(fatal_signal);
    _exit(128 + fatal_signal);
}

static void
fatal_handler(int sig)
{
    if (!fatal_signal && fatal_flush != NULL) {
        fatal_signal = sig;
        struct sigaction timeout;
        memset(&timeout, 0, sizeof(timeout));
        timeout.sa_handler = fatal_timeout;
        sigemptyset(&timeout.sa_mask);
        sigaction(SIGALRM, &timeout, NULL);
        sigset_t alarm_only;
        sigemptyset(&alarm_only);
        sigaddset(&alarm_only, SIGALRM);
        pthread_sigmask(SIG_UNBLOCK, &alarm_only, NULL);
        alarm(2);
        PyGILState_Ensure();  /* never released: the process ends below */
        PyObject *result = PyObject_CallNoArgs(fatal_flush);
        Py_XDECREF(result);
        PyErr_Clear();
    }
    signal(sig, SIG_DFL);
    raise(sig);
}

static PyObject *
flush_on_fatal_signal(PyObject *module, PyObject *callable)
{
    struct sigaction action;
    memset(&action, 0, sizeof(action));
    sigemptyset(&action.sa_mask);
    if (callable == Py_None) {  /* disarm (a forked child of the program) */
        Py_CLEAR(fatal_flush);
        action.sa_handler = SIG_DFL;
    }
    else {
        if (!PyCallable_Check(callable)) {
            PyErr_SetString(PyExc_TypeError, "flush_on_fatal_signal takes a callable or None");
            return NULL;
        }
        if (fatal_stack == NULL) {
            size_t size = SIGSTKSZ > 65536 ? SIGSTKSZ : 65536;
            fatal_stack = PyMem_RawMalloc(size);
            if (fatal_stack == NULL) {
                return PyErr_NoMemory();
            }
            stack_t stack = {.ss_sp = fatal_stack, .ss_size = size, .ss_flags = 0};
            if (sigaltstack(&stack, NULL) != 0) {
                return PyErr_SetFromErrno(PyExc_OSError);
            }
        }
        Py_INCREF(callable);
        Py_XSETREF(fatal_flush, callable);
        action.sa_handler = fatal_handler;
        action.sa_flags = SA_RESETHAND | SA_NODEFER | SA_ONSTACK;
    }
    for (size_t i = 0; i < sizeof(fatal_signals) / sizeof(fatal_signals[0]); i++) {
        if (sigaction(fatal_signals[i], &action, NULL) != 0) {
            return PyErr_SetFromErrno(PyExc_OSError);
        }
    }
    Py_RETURN_NONE;
}

/* The parent's side of a plain record: {name: repr} for names and values (tuples) of a frame
 * whose values are all plain immutable values. With the previous plain record's names, values
 * and result: where the names are the same, a value that is the very object at the same place
 * in the previous record (marshal keeps one object per object within a batch, and the previous
 * record is held, so its objects cannot share an address with new ones) takes the repr already
 * made: equal value and type, equal repr. S5-like traces change two of seven values a line.
 * None when a repr fails or may hold an address (" at 0x"): the caller's Python path takes
 * those. */
static PyObject *address_mark = NULL;

static PyObject *
plain_locals(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 5 || !PyTuple_CheckExact(args[0]) || !PyTuple_CheckExact(args[1])
        || PyTuple_GET_SIZE(args[0]) != PyTuple_GET_SIZE(args[1])) {
        PyErr_SetString(PyExc_TypeError,
                        "plain_locals(names, values, previous names, previous values, previous locals)");
        return NULL;
    }
    PyObject *keys = args[0], *values = args[1];
    Py_ssize_t size = PyTuple_GET_SIZE(keys);
    PyObject *prev_values = NULL, *prev_locals = NULL;
    if (PyTuple_CheckExact(args[2]) && PyTuple_CheckExact(args[3]) && PyDict_CheckExact(args[4])
        && PyTuple_GET_SIZE(args[3]) == size) {
        int same = args[2] == keys;
        if (!same) {
            same = PyObject_RichCompareBool(args[2], keys, Py_EQ);
            if (same < 0) {
                PyErr_Clear();
                same = 0;
            }
        }
        if (same) {
            prev_values = args[3];
            prev_locals = args[4];
        }
    }
    PyObject *out = PyDict_New();
    if (out == NULL) {
        return NULL;
    }
    for (Py_ssize_t i = 0; i < size; i++) {
        PyObject *key = PyTuple_GET_ITEM(keys, i);
        PyObject *value = PyTuple_GET_ITEM(values, i);
        PyObject *text = NULL;
        if (prev_values != NULL && PyTuple_GET_ITEM(prev_values, i) == value) {
            text = PyDict_GetItemWithError(prev_locals, key);
            if (text == NULL && PyErr_Occurred()) {
                goto give_up;
            }
            Py_XINCREF(text);
        }
        if (text == NULL) {
            text = PyObject_Repr(value);
            if (text == NULL) {
                goto give_up;
            }
            if ((PyUnicode_CheckExact(value) || PyBytes_CheckExact(value))
                && PyUnicode_Find(text, address_mark, 0, PyUnicode_GET_LENGTH(text), 1) != -1) {
                Py_DECREF(text);
                goto give_up;
            }
        }
        int failed = PyDict_SetItem(out, key, text);
        Py_DECREF(text);
        if (failed) {
            goto give_up;
        }
    }
    return out;
give_up:
    PyErr_Clear();
    Py_DECREF(out);
    Py_RETURN_NONE;
}

/* A lower bound on len(repr(value)), looked for no further than `limit`: a str, bytes or
 * bytearray counts its length, a list, tuple, dict, set or frozenset (exact types) its items and
 * separators, anything else one character. Deeper than REPR_DEPTH (or a cycle) counts as over the
 * limit: child._bounded_repr builds those, exactly, as repr does. C speed, so the tracer can ask
 * it of every container on every line: a list holding a few 64 MiB bytearrays is a few steps. */
#define REPR_DEPTH 48

static Py_ssize_t
repr_floor(PyObject *value, Py_ssize_t limit, int depth)
{
    PyTypeObject *t = Py_TYPE(value);
    if (t == &PyUnicode_Type) {
        return PyUnicode_GET_LENGTH(value) + 2;
    }
    if (t == &PyBytes_Type) {
        return PyBytes_GET_SIZE(value) + 3;
    }
    if (t == &PyByteArray_Type) {
        return PyByteArray_GET_SIZE(value) + 14;
    }
    PyObject **items;
    Py_ssize_t n;
    if (t == &PyList_Type) {
        items = ((PyListObject *)value)->ob_item;
        n = PyList_GET_SIZE(value);
    }
    else if (t == &PyTuple_Type) {
        items = ((PyTupleObject *)value)->ob_item;
        n = PyTuple_GET_SIZE(value);
    }
    else if (t == &PyDict_Type || t == &PySet_Type || t == &PyFrozenSet_Type) {
        items = NULL;
        n = t == &PyDict_Type ? PyDict_GET_SIZE(value) : PySet_GET_SIZE(value);
    }
    else {
        return 1;
    }
    Py_ssize_t total = 2 + (n > 0 ? 2 * (n - 1) : 0);
    if (n == 0 || total > limit) {
        return total;
    }
    if (depth >= REPR_DEPTH) {
        return limit + 1;
    }
    if (items != NULL) {
        for (Py_ssize_t i = 0; i < n && total <= limit; i++) {
            total += repr_floor(items[i], limit - total, depth + 1);
        }
    }
    else if (t == &PyDict_Type) {
        Py_ssize_t pos = 0;
        PyObject *k, *v;
        while (total <= limit && PyDict_Next(value, &pos, &k, &v)) {
            total += 2 + repr_floor(k, limit - total, depth + 1);
            total += repr_floor(v, limit - total, depth + 1);
        }
    }
    else {
        PyObject *iterator = PyObject_GetIter(value);  /* (a set's own iteration: no private API) */
        if (iterator == NULL) {
            PyErr_Clear();
            return limit + 1;
        }
        PyObject *k;
        while (total <= limit && (k = PyIter_Next(iterator)) != NULL) {
            total += repr_floor(k, limit - total, depth + 1);
            Py_DECREF(k);
        }
        Py_DECREF(iterator);
        if (PyErr_Occurred()) {
            PyErr_Clear();
            return limit + 1;
        }
    }
    return total;
}

static PyObject *
any_repr_over(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2 || !PyList_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "any_repr_over(values: list, limit: int)");
        return NULL;
    }
    Py_ssize_t limit = PyLong_AsSsize_t(args[1]);
    if (limit == -1 && PyErr_Occurred()) {
        return NULL;
    }
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(args[0]); i++) {
        if (repr_floor(PyList_GET_ITEM(args[0], i), limit, 0) > limit) {
            Py_RETURN_TRUE;
        }
    }
    Py_RETURN_FALSE;
}

static PyMethodDef linetrace_methods[] = {
    {"any_repr_over", (PyCFunction)(void (*)(void))any_repr_over, METH_FASTCALL,
     "any_repr_over(values, limit) -> True when the repr of some value is surely longer than limit"},
    {"plain_locals", (PyCFunction)(void (*)(void))plain_locals, METH_FASTCALL,
     "plain_locals(names, values, previous names, previous values, previous locals) -> {name: repr} or None"},
    {"flush_on_fatal_signal", flush_on_fatal_signal, METH_O,
     "Call `flush()` once when the process gets SIGSEGV, SIGBUS, SIGFPE or SIGILL, then die of it "
     "(None: back to the default action)."},
    {NULL},
};

static struct PyModuleDef linetrace_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "cwmtui.interpreter._linetrace",
    .m_doc = "The tracer's line-event hot path (optional; cwmtui runs without it).",
    .m_size = -1,
    .m_methods = linetrace_methods,
};

PyMODINIT_FUNC
PyInit__linetrace(void)
{
    address_mark = PyUnicode_InternFromString(" at 0x");
    if (address_mark == NULL) {
        return NULL;
    }
    if (PyType_Ready(&LineTracerType) < 0) {
        return NULL;
    }
    PyObject *module = PyModule_Create(&linetrace_module);
    if (module == NULL) {
        return NULL;
    }
    if (PyModule_AddIntConstant(module, "ABI", LINETRACE_ABI) < 0) {
        Py_DECREF(module);
        return NULL;
    }
    Py_INCREF(&LineTracerType);
    if (PyModule_AddObject(module, "LineTracer", (PyObject *)&LineTracerType) < 0) {
        Py_DECREF(&LineTracerType);
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
