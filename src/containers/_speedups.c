/* containers._speedups: fmap's child loops in C, an optional accelerator.

   `Loop.run(kids, depth)` does what the generated Python loop does
   (`_codegen.loop_source()`, its plain twin, used whenever this module is missing or
   CONTAINERS_PURE_PYTHON is set): map each child of one node and return the results
   as a list. A tuple of one to four immutable leaves is mapped in place; an immutable
   leaf goes to `f`; another leaf goes to `f` through the identity cache unless its
   reference count shows that its parent alone holds it; a node goes to its type's
   mapper in `direct`, or to `node`. `PairLoop.run(kids, ykids, depth)` is the same
   for fmap with one extra tree (`_codegen.pair_loop_source()`). Everything else
   (nodes, depth, errors and their paths) stays in Python, in `_fmap._Mode` and
   `_fmap._ManyMode`, which own the loops and set their per-call values with `bind`.

   Speed (benchmarks/instructions.py, W2 and W4): the type tests and calls of the
   Python loop cost about as many instructions in the interpreter as `f` itself; here
   they cost a few dozen. Calling a Python `f` from C costs a little more than from
   Python, far less than the bytecode it replaces. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>

/* A tuple of at most this many immutable leaves is mapped without a call of its
   mapper (as `_codegen.UNROLLED_TUPLE_LENGTH` in the Python loop). */
#define UNROLLED 4

/* The reference count of a child that its parent alone holds, as this loop sees it:
   the parent's reference and the one the iterator hands out. */
#define HELD_BY_PARENT 2

typedef struct {
    PyObject_HEAD
    /* Fixed for the mode that owns the loop. */
    PyObject *node;       /* node(x, depth): the general mapper */
    PyObject *direct;     /* dict: type -> mapper(x, depth) */
    PyObject *immutable;  /* set of leaf types never cached */
    PyObject *leaf_types; /* set of all leaf types */
    Py_ssize_t unshared;  /* HELD_BY_PARENT, or 0 to cache every mutable leaf */
    /* Per call (bind). */
    PyObject *f;
    PyObject *results;    /* dict: id -> result, the identity cache */
    PyObject *keep;       /* list: the cached objects, kept alive */
    PyObject *prune;
    int use_prune;
} LoopObject;

static int
Loop_traverse(LoopObject *self, visitproc visit, void *arg)
{
    Py_VISIT(self->node);
    Py_VISIT(self->direct);
    Py_VISIT(self->immutable);
    Py_VISIT(self->leaf_types);
    Py_VISIT(self->f);
    Py_VISIT(self->results);
    Py_VISIT(self->keep);
    Py_VISIT(self->prune);
    return 0;
}

static int
Loop_clear(LoopObject *self)
{
    Py_CLEAR(self->node);
    Py_CLEAR(self->direct);
    Py_CLEAR(self->immutable);
    Py_CLEAR(self->leaf_types);
    Py_CLEAR(self->f);
    Py_CLEAR(self->results);
    Py_CLEAR(self->keep);
    Py_CLEAR(self->prune);
    return 0;
}

static void
Loop_dealloc(LoopObject *self)
{
    PyObject_GC_UnTrack(self);
    Loop_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* Replace *slot with a new reference to value. */
static void
set_ref(PyObject **slot, PyObject *value)
{
    PyObject *old = *slot;
    Py_INCREF(value);
    *slot = value;
    Py_XDECREF(old);
}

static int
Loop_init(LoopObject *self, PyObject *args, PyObject *kwds)
{
    static char *names[] = {"node", "direct", "immutable", "leaf_types", "shortcut", NULL};
    PyObject *node, *direct, *immutable, *leaf_types;
    int shortcut;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OO!OOp:Loop", names, &node, &PyDict_Type,
                                     &direct, &immutable, &leaf_types, &shortcut)) {
        return -1;
    }
    if (!PyCallable_Check(node)) {
        PyErr_SetString(PyExc_TypeError, "Loop: node must be callable");
        return -1;
    }
    if (!PyAnySet_Check(immutable) || !PyAnySet_Check(leaf_types)) {
        PyErr_SetString(PyExc_TypeError, "Loop: immutable and leaf_types must be sets");
        return -1;
    }
    PyObject *results = PyDict_New();
    PyObject *keep = PyList_New(0);
    if (results == NULL || keep == NULL) {
        Py_XDECREF(results);
        Py_XDECREF(keep);
        return -1;
    }
    set_ref(&self->node, node);
    set_ref(&self->direct, direct);
    set_ref(&self->immutable, immutable);
    set_ref(&self->leaf_types, leaf_types);
    self->unshared = shortcut ? HELD_BY_PARENT : 0;
    set_ref(&self->f, Py_None);
    Py_XSETREF(self->results, results);
    Py_XSETREF(self->keep, keep);
    set_ref(&self->prune, Py_None);
    self->use_prune = 0;
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
    set_ref(&self->f, args[0]);
    set_ref(&self->results, args[1]);
    set_ref(&self->keep, args[2]);
    set_ref(&self->prune, args[3]);
    self->use_prune = use_prune;
    Py_RETURN_NONE;
}

/* One run's view of the loop: strong references to its values, taken when the run
   starts, so that nothing f does (even re-initialising the loop) frees them mid-run. */
typedef struct {
    PyObject *node, *direct, *immutable, *leaf_types, *f, *results, *keep, *prune;
    Py_ssize_t unshared;
    int use_prune;
} Run;

static void
hold(PyObject **refs, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        Py_INCREF(refs[i]);
    }
}

static void
release(PyObject **refs, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        Py_DECREF(refs[i]);
    }
}

/* f(x) for a leaf that may occur twice: the cached result, or f's, stored. */
static PyObject *
map_cached(const Run *run, PyObject *x)
{
    PyObject *key = PyLong_FromVoidPtr(x); /* id(x) */
    if (key == NULL) {
        return NULL;
    }
    PyObject *r = PyDict_GetItemWithError(run->results, key); /* borrowed */
    if (r != NULL) {
        r = run->use_prune ? run->prune : r;
        Py_INCREF(r);
    }
    else if (!PyErr_Occurred()) {
        r = PyObject_CallOneArg(run->f, x);
        if (r != NULL &&
            (PyDict_SetItem(run->results, key, r) < 0 || PyList_Append(run->keep, x) < 0)) {
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
map_small_tuple(PyObject *x, PyObject *y, PyObject *f, PyObject *immutable)
{
    Py_ssize_t n = PyTuple_GET_SIZE(x), i;
    PyObject *values[UNROLLED];
    if (n < 1 || n > UNROLLED) {
        return NULL;
    }
    for (i = 0; i < n; i++) {
        int leaf = PySet_Contains(immutable, (PyObject *)Py_TYPE(PyTuple_GET_ITEM(x, i)));
        if (leaf <= 0) {
            return NULL; /* not all immutable leaves, or an error (set) */
        }
    }
    for (i = 0; i < n; i++) {
        PyObject *argv[2] = {PyTuple_GET_ITEM(x, i), y ? PyTuple_GET_ITEM(y, i) : NULL};
        values[i] = PyObject_Vectorcall(f, argv, y ? 2 : 1, NULL);
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

/* The result for one child x. */
static PyObject *
map_child(const Run *run, PyObject *x, PyObject *depth)
{
    PyObject *type = (PyObject *)Py_TYPE(x);
    if (Py_IS_TYPE(x, &PyTuple_Type)) {
        PyObject *r = map_small_tuple(x, NULL, run->f, run->immutable);
        if (r != NULL || PyErr_Occurred()) {
            return r;
        }
    }
    int is = PySet_Contains(run->immutable, type);
    if (is < 0) {
        return NULL;
    }
    if (is) {
        return PyObject_CallOneArg(run->f, x);
    }
    is = PySet_Contains(run->leaf_types, type);
    if (is < 0) {
        return NULL;
    }
    if (is) {
        if (Py_REFCNT(x) <= run->unshared) {
            return PyObject_CallOneArg(run->f, x);
        }
        return map_cached(run, x);
    }
    PyObject *mapper = PyDict_GetItemWithError(run->direct, type); /* borrowed */
    if (mapper == NULL) {
        if (PyErr_Occurred()) {
            return NULL;
        }
        mapper = run->node;
    }
    PyObject *argv[2] = {x, depth};
    Py_INCREF(mapper); /* the call may replace it in direct */
    PyObject *r = PyObject_Vectorcall(mapper, argv, 2, NULL);
    Py_DECREF(mapper);
    return r;
}

static PyObject *
Loop_run(LoopObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_Format(PyExc_TypeError, "run() takes 2 arguments (%zd given)", nargs);
        return NULL;
    }
    if (self->f == NULL) {
        PyErr_SetString(PyExc_TypeError, "Loop.run: the loop was never initialised");
        return NULL;
    }
    PyObject *it = PyObject_GetIter(args[0]);
    if (it == NULL) {
        return NULL;
    }
    PyObject *out = PyList_New(0);
    if (out == NULL) {
        Py_DECREF(it);
        return NULL;
    }
    Run run = {self->node, self->direct, self->immutable, self->leaf_types, self->f,
               self->results, self->keep, self->prune, self->unshared, self->use_prune};
    PyObject *refs[] = {run.node, run.direct,  run.immutable, run.leaf_types,
                        run.f,    run.results, run.keep,      run.prune};
    hold(refs, sizeof(refs) / sizeof(refs[0]));
    PyObject *x;
    while ((x = PyIter_Next(it)) != NULL) {
        PyObject *r = map_child(&run, x, args[1]);
        Py_DECREF(x);
        if (r == NULL || PyList_Append(out, r) < 0) {
            Py_XDECREF(r);
            Py_CLEAR(out);
            break;
        }
        Py_DECREF(r);
    }
    if (out != NULL && PyErr_Occurred()) {
        Py_CLEAR(out); /* the iterator raised */
    }
    release(refs, sizeof(refs) / sizeof(refs[0]));
    Py_DECREF(it);
    return out;
}

static PyMethodDef Loop_methods[] = {
    {"run", (PyCFunction)(void (*)(void))Loop_run, METH_FASTCALL,
     "run(kids, depth) -> list: each child of one node, mapped."},
    {"bind", (PyCFunction)(void (*)(void))Loop_bind, METH_FASTCALL,
     "bind(f, results, keep, prune, use_prune): the values of one fmap call."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject LoopType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "containers._speedups.Loop",
    .tp_doc = PyDoc_STR("Loop(node, direct, immutable, leaf_types, shortcut): fmap's child "
                        "loop for one mode of _fmap._Mode."),
    .tp_basicsize = sizeof(LoopObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Loop_init,
    .tp_dealloc = (destructor)Loop_dealloc,
    .tp_traverse = (traverseproc)Loop_traverse,
    .tp_clear = (inquiry)Loop_clear,
    .tp_methods = Loop_methods,
};

/* PairLoop: the child loop of fmap with one extra tree (`_codegen.pair_loop_source()`,
   its plain twin), for _fmap._ManyMode. Children of x and of y are read in parallel
   (as zip does): a tuple of one to UNROLLED immutable leaves facing a tuple of its
   length is mapped in place, another tuple goes to `pair`, an immutable leaf to `f`,
   another leaf to `leaf` (which owns the identity cache), a node to `node`. */

typedef struct {
    PyObject_HEAD
    PyObject *leaf;       /* leaf(x, (y,)) */
    PyObject *pair;       /* pair(x, y, depth): a tuple */
    PyObject *node;       /* node(x, (y,), depth) */
    PyObject *immutable;
    PyObject *leaf_types;
    PyObject *f;          /* per call (bind) */
} PairLoopObject;

static int
PairLoop_traverse(PairLoopObject *self, visitproc visit, void *arg)
{
    Py_VISIT(self->leaf);
    Py_VISIT(self->pair);
    Py_VISIT(self->node);
    Py_VISIT(self->immutable);
    Py_VISIT(self->leaf_types);
    Py_VISIT(self->f);
    return 0;
}

static int
PairLoop_clear(PairLoopObject *self)
{
    Py_CLEAR(self->leaf);
    Py_CLEAR(self->pair);
    Py_CLEAR(self->node);
    Py_CLEAR(self->immutable);
    Py_CLEAR(self->leaf_types);
    Py_CLEAR(self->f);
    return 0;
}

static void
PairLoop_dealloc(PairLoopObject *self)
{
    PyObject_GC_UnTrack(self);
    PairLoop_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int
PairLoop_init(PairLoopObject *self, PyObject *args, PyObject *kwds)
{
    static char *names[] = {"leaf", "pair", "node", "immutable", "leaf_types", NULL};
    PyObject *leaf, *pair, *node, *immutable, *leaf_types;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOOOO:PairLoop", names, &leaf, &pair,
                                     &node, &immutable, &leaf_types)) {
        return -1;
    }
    if (!PyCallable_Check(leaf) || !PyCallable_Check(pair) || !PyCallable_Check(node)) {
        PyErr_SetString(PyExc_TypeError, "PairLoop: leaf, pair and node must be callable");
        return -1;
    }
    if (!PyAnySet_Check(immutable) || !PyAnySet_Check(leaf_types)) {
        PyErr_SetString(PyExc_TypeError, "PairLoop: immutable and leaf_types must be sets");
        return -1;
    }
    set_ref(&self->leaf, leaf);
    set_ref(&self->pair, pair);
    set_ref(&self->node, node);
    set_ref(&self->immutable, immutable);
    set_ref(&self->leaf_types, leaf_types);
    set_ref(&self->f, Py_None);
    return 0;
}

static PyObject *
PairLoop_bind(PairLoopObject *self, PyObject *f)
{
    set_ref(&self->f, f);
    Py_RETURN_NONE;
}

/* The result for the child x facing y; refs are the run's: leaf, pair, node, immutable,
   leaf_types, f. */
static PyObject *
map_pair_child(PyObject *const *refs, PyObject *x, PyObject *y, PyObject *depth)
{
    PyObject *leaf = refs[0], *pair = refs[1], *node = refs[2], *immutable = refs[3],
             *leaf_types = refs[4], *f = refs[5];
    PyObject *type = (PyObject *)Py_TYPE(x);
    if (Py_IS_TYPE(x, &PyTuple_Type)) {
        if (Py_IS_TYPE(y, &PyTuple_Type) && PyTuple_GET_SIZE(x) == PyTuple_GET_SIZE(y)) {
            PyObject *r = map_small_tuple(x, y, f, immutable);
            if (r != NULL || PyErr_Occurred()) {
                return r;
            }
        }
        PyObject *argv[3] = {x, y, depth};
        return PyObject_Vectorcall(pair, argv, 3, NULL);
    }
    int is = PySet_Contains(immutable, type);
    if (is < 0) {
        return NULL;
    }
    if (is) {
        PyObject *argv[2] = {x, y};
        return PyObject_Vectorcall(f, argv, 2, NULL);
    }
    is = PySet_Contains(leaf_types, type);
    if (is < 0) {
        return NULL;
    }
    PyObject *ys = PyTuple_Pack(1, y);
    if (ys == NULL) {
        return NULL;
    }
    PyObject *argv[3] = {x, ys, depth};
    PyObject *r = is ? PyObject_Vectorcall(leaf, argv, 2, NULL)
                     : PyObject_Vectorcall(node, argv, 3, NULL);
    Py_DECREF(ys);
    return r;
}

static PyObject *
PairLoop_run(PairLoopObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3) {
        PyErr_Format(PyExc_TypeError, "run() takes 3 arguments (%zd given)", nargs);
        return NULL;
    }
    if (self->f == NULL) {
        PyErr_SetString(PyExc_TypeError, "PairLoop.run: the loop was never initialised");
        return NULL;
    }
    PyObject *xs = PyObject_GetIter(args[0]);
    if (xs == NULL) {
        return NULL;
    }
    PyObject *ys = PyObject_GetIter(args[1]);
    PyObject *out = ys ? PyList_New(0) : NULL;
    if (out == NULL) {
        Py_XDECREF(ys);
        Py_DECREF(xs);
        return NULL;
    }
    PyObject *refs[] = {self->leaf, self->pair, self->node, self->immutable,
                        self->leaf_types, self->f};
    hold(refs, sizeof(refs) / sizeof(refs[0]));
    PyObject *x, *y;
    while ((x = PyIter_Next(xs)) != NULL) { /* zip: the first tree's next child first */
        y = PyIter_Next(ys);
        if (y == NULL) {
            Py_DECREF(x);
            break;
        }
        PyObject *r = map_pair_child(refs, x, y, args[2]);
        Py_DECREF(x);
        Py_DECREF(y);
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
    release(refs, sizeof(refs) / sizeof(refs[0]));
    Py_DECREF(ys);
    Py_DECREF(xs);
    return out;
}

static PyMethodDef PairLoop_methods[] = {
    {"run", (PyCFunction)(void (*)(void))PairLoop_run, METH_FASTCALL,
     "run(kids, ykids, depth) -> list: each child of one node facing another's, mapped."},
    {"bind", (PyCFunction)PairLoop_bind, METH_O, "bind(f): the function of one fmap call."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject PairLoopType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "containers._speedups.PairLoop",
    .tp_doc = PyDoc_STR("PairLoop(leaf, pair, node, immutable, leaf_types): fmap's child "
                        "loop with one extra tree, for _fmap._ManyMode."),
    .tp_basicsize = sizeof(PairLoopObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)PairLoop_init,
    .tp_dealloc = (destructor)PairLoop_dealloc,
    .tp_traverse = (traverseproc)PairLoop_traverse,
    .tp_clear = (inquiry)PairLoop_clear,
    .tp_methods = PairLoop_methods,
};

static struct PyModuleDef speedups_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "containers._speedups",
    .m_doc = PyDoc_STR("fmap's child loops in C (optional; see _fmap._Mode and _fmap._ManyMode)."),
    .m_size = -1,
};

PyMODINIT_FUNC
PyInit__speedups(void)
{
    if (PyType_Ready(&LoopType) < 0 || PyType_Ready(&PairLoopType) < 0) {
        return NULL;
    }
    PyObject *module = PyModule_Create(&speedups_module);
    if (module == NULL) {
        return NULL;
    }
    Py_INCREF(&LoopType);
    if (PyModule_AddObject(module, "Loop", (PyObject *)&LoopType) < 0) {
        Py_DECREF(&LoopType);
        Py_DECREF(module);
        return NULL;
    }
    Py_INCREF(&PairLoopType);
    if (PyModule_AddObject(module, "PairLoop", (PyObject *)&PairLoopType) < 0) {
        Py_DECREF(&PairLoopType);
        Py_DECREF(module);
        return NULL;
    }
    if (PyModule_AddIntConstant(module, "UNROLLED", UNROLLED) < 0) {
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
