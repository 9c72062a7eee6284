/* containers._speedups: fmap's child loops in C, an optional accelerator.

   `Loop.run(kids, depth)` does what the generated Python loop does
   (`_codegen.loop_source()`, its plain twin, used whenever this module is missing or
   CONTAINERS_PURE_PYTHON is set): map each child of one node and return the results
   as a list. A tuple of one to four immutable leaves is mapped in place; an immutable
   leaf goes to `f`; every other leaf goes to `f` through the identity cache (`results`
   by id, `keep` holding the objects), so sharing holds by construction; a node goes to
   its type's mapper in `direct`, or to `node`. `PairLoop.run(kids, ykids, depth)` is the same
   for fmap with one extra tree (`_codegen.pair_loop_source()`). Everything else
   (nodes, depth, errors and their paths) stays in Python, in `_fmap._Mode` and
   `_fmap._ManyMode`, which own the loops and set their per-call values with `bind`.

   Speed (benchmarks/instructions.py, W2 and W4): the type tests and calls of the
   Python loop cost about as many instructions in the interpreter as `f` itself; here
   they cost a few dozen. Calling a Python `f` from C costs a little more than from
   Python, far less than the bytecode it replaces.

   Both types share one layout: an array of references (the REF_* slots; each type
   uses some) and the identity cache's `use_prune`. A run takes its own references to
   all of them first, so that nothing `f` does (even re-initialising the loop) frees
   what the run is using.

   The module uses multi-phase initialisation (PEP 489) and keeps no Python object in
   a C static: its two types are heap types made by each module object, and its one
   constant lives in the module's state, so it can be imported in subinterpreters,
   each with its own GIL (3.12+). It needs the GIL: a loop's references are read and
   replaced without locks, so on a free-threaded build (3.13+) importing it turns the
   GIL back on. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#if defined(__linux__)
#include <pthread.h>
#endif

/* A tuple of at most this many immutable leaves is mapped without a call of its
   mapper (as `_codegen.UNROLLED_TUPLE_LENGTH` in the Python loop). */
#define UNROLLED 4

enum {
    REF_F,          /* the mapped function (bind) */
    REF_IMMUTABLE,  /* set of leaf types never cached */
    REF_LEAF_TYPES, /* set of all leaf types */
    REF_NODE,       /* Loop: node(x, depth); PairLoop: node(x, (y,), depth) */
    REF_DIRECT,     /* Loop: dict, type -> mapper(x, depth) */
    REF_RESULTS,    /* Loop: dict, id -> result, the identity cache (bind) */
    REF_KEEP,       /* Loop: list, the cached objects, kept alive (bind) */
    REF_PRUNE,      /* Loop: what a repeat becomes when use_prune (bind) */
    REF_LEAF,       /* PairLoop: leaf(x, (y,)), which owns the identity cache */
    REF_PAIR,       /* PairLoop: pair(x, y, depth), for a tuple */
    N_REFS
};

typedef struct {
    PyObject_HEAD
    PyObject *refs[N_REFS];
    int use_prune; /* Loop (bind) */
} LoopObject;

/* One run's view of a loop: its own references and scalars. */
typedef struct {
    PyObject *refs[N_REFS];
    int use_prune;
} Run;

static int
Loop_traverse(LoopObject *self, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(self)); /* a heap type: each instance holds a reference to it */
    for (int i = 0; i < N_REFS; i++) {
        Py_VISIT(self->refs[i]);
    }
    return 0;
}

static int
Loop_clear(LoopObject *self)
{
    for (int i = 0; i < N_REFS; i++) {
        Py_CLEAR(self->refs[i]);
    }
    return 0;
}

static void
Loop_dealloc(LoopObject *self)
{
    PyTypeObject *type = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    Loop_clear(self);
    type->tp_free((PyObject *)self);
    Py_DECREF(type);
}

/* Replace a slot's reference with a new one to value. */
static void
set_ref(LoopObject *self, int slot, PyObject *value)
{
    Py_INCREF(value);
    Py_XSETREF(self->refs[slot], value);
}

/* The checks common to both constructors; -1 with TypeError if one fails. */
static int
check_callables_and_sets(const char *type, const char *names, PyObject **callables, int n,
                         PyObject *immutable, PyObject *leaf_types)
{
    for (int i = 0; i < n; i++) {
        if (!PyCallable_Check(callables[i])) {
            PyErr_Format(PyExc_TypeError, "%s: %s must be callable", type, names);
            return -1;
        }
    }
    if (!PyAnySet_Check(immutable) || !PyAnySet_Check(leaf_types)) {
        PyErr_Format(PyExc_TypeError, "%s: immutable and leaf_types must be sets", type);
        return -1;
    }
    return 0;
}

static int
Loop_init(LoopObject *self, PyObject *args, PyObject *kwds)
{
    static char *names[] = {"node", "direct", "immutable", "leaf_types", NULL};
    PyObject *node, *direct, *immutable, *leaf_types;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OO!OO:Loop", names, &node, &PyDict_Type,
                                     &direct, &immutable, &leaf_types) ||
        check_callables_and_sets("Loop", "node", &node, 1, immutable, leaf_types) < 0) {
        return -1;
    }
    PyObject *results = PyDict_New();
    PyObject *keep = PyList_New(0);
    if (results == NULL || keep == NULL) {
        Py_XDECREF(results);
        Py_XDECREF(keep);
        return -1;
    }
    set_ref(self, REF_NODE, node);
    set_ref(self, REF_DIRECT, direct);
    set_ref(self, REF_IMMUTABLE, immutable);
    set_ref(self, REF_LEAF_TYPES, leaf_types);
    set_ref(self, REF_F, Py_None);
    Py_XSETREF(self->refs[REF_RESULTS], results);
    Py_XSETREF(self->refs[REF_KEEP], keep);
    set_ref(self, REF_PRUNE, Py_None);
    self->use_prune = 0;
    return 0;
}

static int
PairLoop_init(LoopObject *self, PyObject *args, PyObject *kwds)
{
    static char *names[] = {"leaf", "pair", "node", "immutable", "leaf_types", NULL};
    PyObject *callables[3], *immutable, *leaf_types;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOOOO:PairLoop", names, &callables[0],
                                     &callables[1], &callables[2], &immutable, &leaf_types) ||
        check_callables_and_sets("PairLoop", "leaf, pair and node", callables, 3, immutable,
                                 leaf_types) < 0) {
        return -1;
    }
    set_ref(self, REF_LEAF, callables[0]);
    set_ref(self, REF_PAIR, callables[1]);
    set_ref(self, REF_NODE, callables[2]);
    set_ref(self, REF_IMMUTABLE, immutable);
    set_ref(self, REF_LEAF_TYPES, leaf_types);
    set_ref(self, REF_F, Py_None);
    return 0;
}

static PyObject *
Loop_bind(LoopObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 5) {
        PyErr_Format(PyExc_TypeError, "bind() takes 5 arguments (%zd given)", nargs);
        return NULL;
    }
    if (!PyDict_Check(args[1]) || !PyList_Check(args[2])) {
        PyErr_SetString(PyExc_TypeError, "bind(f, results, keep, prune, use_prune): "
                                          "results must be a dict and keep a list");
        return NULL;
    }
    int use_prune = PyObject_IsTrue(args[4]);
    if (use_prune < 0) {
        return NULL;
    }
    set_ref(self, REF_F, args[0]);
    set_ref(self, REF_RESULTS, args[1]);
    set_ref(self, REF_KEEP, args[2]);
    set_ref(self, REF_PRUNE, args[3]);
    self->use_prune = use_prune;
    Py_RETURN_NONE;
}

static PyObject *
PairLoop_bind(LoopObject *self, PyObject *f)
{
    set_ref(self, REF_F, f);
    Py_RETURN_NONE;
}

/* f(x) for a leaf that is not a value: the cached result, or f's, stored. */
static PyObject *
map_cached(const Run *run, PyObject *x)
{
    PyObject *key = PyLong_FromVoidPtr(x); /* id(x) */
    if (key == NULL) {
        return NULL;
    }
    PyObject *r = PyDict_GetItemWithError(run->refs[REF_RESULTS], key); /* borrowed */
    if (r != NULL) {
        r = run->use_prune ? run->refs[REF_PRUNE] : r;
        Py_INCREF(r);
    }
    else if (!PyErr_Occurred()) {
        r = PyObject_CallOneArg(run->refs[REF_F], x);
        if (r != NULL && (PyDict_SetItem(run->refs[REF_RESULTS], key, r) < 0 ||
                          PyList_Append(run->refs[REF_KEEP], x) < 0)) {
            Py_CLEAR(r);
        }
    }
    Py_DECREF(key);
    return r;
}

/* The mapped tuple if x is a tuple of one to UNROLLED immutable leaves (f(a) for each,
   or f(a, b) with the tuple y of x's length when y is not NULL); NULL with no error set
   if it is not, NULL with an error set if f raised. */
static PyObject *
map_small_tuple(const Run *run, PyObject *x, PyObject *y)
{
    Py_ssize_t n = PyTuple_GET_SIZE(x), i;
    PyObject *values[UNROLLED];
    if (n < 1 || n > UNROLLED) {
        return NULL;
    }
    for (i = 0; i < n; i++) {
        PyObject *type = (PyObject *)Py_TYPE(PyTuple_GET_ITEM(x, i));
        int leaf = PySet_Contains(run->refs[REF_IMMUTABLE], type);
        if (leaf <= 0) {
            return NULL; /* not all immutable leaves, or an error (set) */
        }
    }
    for (i = 0; i < n; i++) {
        PyObject *argv[2] = {PyTuple_GET_ITEM(x, i), y ? PyTuple_GET_ITEM(y, i) : NULL};
        values[i] = PyObject_Vectorcall(run->refs[REF_F], argv, y ? 2 : 1, NULL);
        if (values[i] == NULL) {
            while (i--) {
                Py_DECREF(values[i]);
            }
            return NULL;
        }
    }
    PyObject *out = PyTuple_New(n);
    if (out == NULL) {
        for (i = 0; i < n; i++) {
            Py_DECREF(values[i]);
        }
        return NULL;
    }
    for (i = 0; i < n; i++) {
        PyTuple_SET_ITEM(out, i, values[i]);
    }
    return out;
}

/* Loop: the result for one child x. */
static PyObject *
map_child(const Run *run, PyObject *x, PyObject *y, PyObject *depth)
{
    PyObject *type = (PyObject *)Py_TYPE(x);
    if (Py_IS_TYPE(x, &PyTuple_Type)) {
        PyObject *r = map_small_tuple(run, x, NULL);
        if (r != NULL || PyErr_Occurred()) {
            return r;
        }
    }
    int is = PySet_Contains(run->refs[REF_IMMUTABLE], type);
    if (is < 0) {
        return NULL;
    }
    if (is) {
        return PyObject_CallOneArg(run->refs[REF_F], x);
    }
    is = PySet_Contains(run->refs[REF_LEAF_TYPES], type);
    if (is < 0) {
        return NULL;
    }
    if (is) {
        return map_cached(run, x);
    }
    PyObject *mapper = PyDict_GetItemWithError(run->refs[REF_DIRECT], type); /* borrowed */
    if (mapper == NULL) {
        if (PyErr_Occurred()) {
            return NULL;
        }
        mapper = run->refs[REF_NODE];
    }
    PyObject *argv[2] = {x, depth};
    Py_INCREF(mapper); /* the call may replace it in direct */
    PyObject *r = PyObject_Vectorcall(mapper, argv, 2, NULL);
    Py_DECREF(mapper);
    return r;
}

/* PairLoop: the result for the child x facing y. */
static PyObject *
map_pair_child(const Run *run, PyObject *x, PyObject *y, PyObject *depth)
{
    PyObject *type = (PyObject *)Py_TYPE(x);
    if (Py_IS_TYPE(x, &PyTuple_Type)) {
        if (Py_IS_TYPE(y, &PyTuple_Type) && PyTuple_GET_SIZE(x) == PyTuple_GET_SIZE(y)) {
            PyObject *r = map_small_tuple(run, x, y);
            if (r != NULL || PyErr_Occurred()) {
                return r;
            }
        }
        PyObject *argv[3] = {x, y, depth};
        return PyObject_Vectorcall(run->refs[REF_PAIR], argv, 3, NULL);
    }
    int is = PySet_Contains(run->refs[REF_IMMUTABLE], type);
    if (is < 0) {
        return NULL;
    }
    if (is) {
        PyObject *argv[2] = {x, y};
        return PyObject_Vectorcall(run->refs[REF_F], argv, 2, NULL);
    }
    is = PySet_Contains(run->refs[REF_LEAF_TYPES], type);
    if (is < 0) {
        return NULL;
    }
    PyObject *ys = PyTuple_Pack(1, y);
    if (ys == NULL) {
        return NULL;
    }
    PyObject *argv[3] = {x, ys, depth};
    PyObject *r = is ? PyObject_Vectorcall(run->refs[REF_LEAF], argv, 2, NULL)
                     : PyObject_Vectorcall(run->refs[REF_NODE], argv, 3, NULL);
    Py_DECREF(ys);
    return r;
}

typedef PyObject *(*map_one)(const Run *, PyObject *, PyObject *, PyObject *);

/* The loops recurse in C through the nodes' Python mappers, about 1 KB of C stack per
   level, down to the fast path's depth limit (_walk.MAX_FAST_DEPTH). A thread may have
   far less stack than that needs (threading.stack_size(64 * 1024)): when less than
   STACK_RESERVE bytes remain below a loop, it hands its children to their mappers with
   HANDOVER_DEPTH, past any depth limit, so that every node among them goes to the
   iterative engine (each mapper's `depth > max_depth` test) instead of one C level
   deeper. The reserve is what the engine, `f` and numpy need from there on. */
#define STACK_RESERVE (24 * 1024)

/* The module's state: a depth past every mapper's limit, as a Python int. */
typedef struct {
    PyObject *handover_depth;
} ModuleState;

#if defined(__linux__)
/* The lowest usable address of this thread's stack, found once per thread (NULL if
   unknown: then the loops never hand over early). */
static _Thread_local char *stack_low = NULL;
static _Thread_local int stack_checked = 0;

static int
stack_is_low(void)
{
    char here;
    if (!stack_checked) {
        stack_checked = 1;
        pthread_attr_t attr;
        void *addr;
        size_t size;
        if (pthread_getattr_np(pthread_self(), &attr) == 0) {
            if (pthread_attr_getstack(&attr, &addr, &size) == 0) {
                stack_low = (char *)addr;
            }
            pthread_attr_destroy(&attr);
        }
    }
    return stack_low != NULL && &here - stack_low < STACK_RESERVE;
}
#else
/* Elsewhere the depth limit alone bounds the recursion (it fits 128 KB stacks). */
static int
stack_is_low(void)
{
    return 0;
}
#endif

/* The list of map(run, x, y, depth) for the children x of kids, each facing the next
   child y of ykids when ykids is not NULL (as zip pairs them: the first tree's next
   child is read first, and the shorter tree ends the loop). */
static PyObject *
run_loop(LoopObject *self, const char *type, PyObject *kids, PyObject *ykids,
         PyObject *depth, map_one map)
{
    if (self->refs[REF_F] == NULL) {
        PyErr_Format(PyExc_TypeError, "%s.run: the loop was never initialised", type);
        return NULL;
    }
    PyObject *xs = PyObject_GetIter(kids);
    if (xs == NULL) {
        return NULL;
    }
    PyObject *ys = ykids == NULL ? NULL : PyObject_GetIter(ykids);
    PyObject *out = ykids != NULL && ys == NULL ? NULL : PyList_New(0);
    if (out == NULL) {
        Py_XDECREF(ys);
        Py_DECREF(xs);
        return NULL;
    }
    if (stack_is_low()) {
        /* the nodes below go to the iterative engine (the types cannot be subclassed,
           so self's type is the one its module made) */
        depth = ((ModuleState *)PyType_GetModuleState(Py_TYPE(self)))->handover_depth;
    }
    Run run = {.use_prune = self->use_prune};
    for (int i = 0; i < N_REFS; i++) {
        run.refs[i] = self->refs[i];
        Py_XINCREF(run.refs[i]);
    }
    PyObject *x;
    while ((x = PyIter_Next(xs)) != NULL) {
        PyObject *y = ys == NULL ? NULL : PyIter_Next(ys);
        if (ys != NULL && y == NULL) {
            Py_DECREF(x);
            break;
        }
        PyObject *r = map(&run, x, y, depth);
        Py_DECREF(x);
        Py_XDECREF(y);
        if (r == NULL || PyList_Append(out, r) < 0) {
            Py_XDECREF(r);
            Py_CLEAR(out);
            break;
        }
        Py_DECREF(r);
    }
    if (out != NULL && PyErr_Occurred()) {
        Py_CLEAR(out); /* an iterator raised */
    }
    for (int i = 0; i < N_REFS; i++) {
        Py_XDECREF(run.refs[i]);
    }
    Py_XDECREF(ys);
    Py_DECREF(xs);
    return out;
}

static PyObject *
Loop_run(LoopObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_Format(PyExc_TypeError, "run() takes 2 arguments (%zd given)", nargs);
        return NULL;
    }
    return run_loop(self, "Loop", args[0], NULL, args[1], map_child);
}

static PyObject *
PairLoop_run(LoopObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3) {
        PyErr_Format(PyExc_TypeError, "run() takes 3 arguments (%zd given)", nargs);
        return NULL;
    }
    return run_loop(self, "PairLoop", args[0], args[1], args[2], map_pair_child);
}

static PyMethodDef Loop_methods[] = {
    {"run", (PyCFunction)(void (*)(void))Loop_run, METH_FASTCALL,
     "run(kids, depth) -> list: each child of one node, mapped."},
    {"bind", (PyCFunction)(void (*)(void))Loop_bind, METH_FASTCALL,
     "bind(f, results, keep, prune, use_prune): the values of one fmap call."},
    {NULL, NULL, 0, NULL},
};

static PyMethodDef PairLoop_methods[] = {
    {"run", (PyCFunction)(void (*)(void))PairLoop_run, METH_FASTCALL,
     "run(kids, ykids, depth) -> list: each child of one node facing another's, mapped."},
    {"bind", (PyCFunction)PairLoop_bind, METH_O, "bind(f): the function of one fmap call."},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot Loop_slots[] = {
    {Py_tp_doc, (void *)PyDoc_STR("Loop(node, direct, immutable, leaf_types): fmap's child "
                                  "loop for one mode of _fmap._Mode.")},
    {Py_tp_new, PyType_GenericNew},
    {Py_tp_init, Loop_init},
    {Py_tp_dealloc, Loop_dealloc},
    {Py_tp_traverse, Loop_traverse},
    {Py_tp_clear, Loop_clear},
    {Py_tp_methods, Loop_methods},
    {0, NULL},
};

static PyType_Slot PairLoop_slots[] = {
    {Py_tp_doc, (void *)PyDoc_STR("PairLoop(leaf, pair, node, immutable, leaf_types): fmap's "
                                  "child loop with one extra tree, for _fmap._ManyMode.")},
    {Py_tp_new, PyType_GenericNew},
    {Py_tp_init, PairLoop_init},
    {Py_tp_dealloc, Loop_dealloc},
    {Py_tp_traverse, Loop_traverse},
    {Py_tp_clear, Loop_clear},
    {Py_tp_methods, PairLoop_methods},
    {0, NULL},
};

/* Heap types, one pair per module object; like the static types they replace, they
   cannot be subclassed or changed. */
#define LOOP_FLAGS (Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_IMMUTABLETYPE)

static PyType_Spec Loop_spec = {
    .name = "containers._speedups.Loop",
    .basicsize = sizeof(LoopObject),
    .flags = LOOP_FLAGS,
    .slots = Loop_slots,
};

static PyType_Spec PairLoop_spec = {
    .name = "containers._speedups.PairLoop",
    .basicsize = sizeof(LoopObject),
    .flags = LOOP_FLAGS,
    .slots = PairLoop_slots,
};

/* Make a type for this module object and add it; -1 on error. */
static int
add_type(PyObject *module, PyType_Spec *spec)
{
    PyObject *type = PyType_FromModuleAndSpec(module, spec, NULL);
    if (type == NULL) {
        return -1;
    }
    int r = PyModule_AddType(module, (PyTypeObject *)type);
    Py_DECREF(type);
    return r;
}

static int
speedups_exec(PyObject *module)
{
    ModuleState *state = PyModule_GetState(module);
    state->handover_depth = PyLong_FromLong(1L << 30);
    if (state->handover_depth == NULL || add_type(module, &Loop_spec) < 0 ||
        add_type(module, &PairLoop_spec) < 0 ||
        PyModule_AddIntConstant(module, "UNROLLED", UNROLLED) < 0) {
        return -1;
    }
    return 0;
}

static int
speedups_traverse(PyObject *module, visitproc visit, void *arg)
{
    Py_VISIT(((ModuleState *)PyModule_GetState(module))->handover_depth);
    return 0;
}

static int
speedups_clear(PyObject *module)
{
    Py_CLEAR(((ModuleState *)PyModule_GetState(module))->handover_depth);
    return 0;
}

static void
speedups_free(void *module)
{
    speedups_clear((PyObject *)module);
}

/* What the module declares: it runs in any interpreter, each with its own GIL (no
   Python object in C statics; the stack bound is per thread), and it needs the GIL. */
static PyModuleDef_Slot speedups_slots[] = {
    {Py_mod_exec, speedups_exec},
#if PY_VERSION_HEX >= 0x030C0000
    {Py_mod_multiple_interpreters, Py_MOD_PER_INTERPRETER_GIL_SUPPORTED},
#endif
#if PY_VERSION_HEX >= 0x030D0000
    {Py_mod_gil, Py_MOD_GIL_USED},
#endif
    {0, NULL},
};

static struct PyModuleDef speedups_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "containers._speedups",
    .m_doc = PyDoc_STR("fmap's child loops in C (optional; see _fmap._Mode and _fmap._ManyMode)."),
    .m_size = sizeof(ModuleState),
    .m_slots = speedups_slots,
    .m_traverse = speedups_traverse,
    .m_clear = speedups_clear,
    .m_free = speedups_free,
};

PyMODINIT_FUNC
PyInit__speedups(void)
{
    return PyModuleDef_Init(&speedups_module);
}
