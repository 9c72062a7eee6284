#include "_speedups.h"

/* --- Loop and PairLoop: fmap's child loops ------------------------------------------ */

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

/* The per-call values of a loop no call has bound: no function, no table. */
static void
set_unbound(LoopObject *self)
{
    set_ref(self, REF_F, Py_None);
    set_ref(self, REF_TABLE, Py_None);
    set_ref(self, REF_PRUNE, Py_None);
    self->use_prune = 0;
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
    static char *names[] = {"node",       "direct",     "immutable",   "leaf_types",
                            "value_leaf", "cached_leaf", "max_depth", NULL};
    PyObject *callables[3], *direct, *immutable, *leaf_types;
    Py_ssize_t max_depth;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OO!OOOOn:Loop", names, &callables[0],
                                     &PyDict_Type, &direct, &immutable, &leaf_types,
                                     &callables[1], &callables[2], &max_depth) ||
        check_callables_and_sets("Loop", "node, value_leaf and cached_leaf", callables, 3,
                                 immutable, leaf_types) < 0) {
        return -1;
    }
    self->max_depth = max_depth;
    /* the types cannot be subclassed, so self's type is the one its module made */
    self->node_type = ((ModuleState *)PyType_GetModuleState(Py_TYPE(self)))->node_type;
    set_ref(self, REF_NODE, callables[0]);
    set_ref(self, REF_VALUE_LEAF, callables[1]);
    set_ref(self, REF_CACHED_LEAF, callables[2]);
    set_ref(self, REF_DIRECT, direct);
    set_ref(self, REF_IMMUTABLE, immutable);
    set_ref(self, REF_LEAF_TYPES, leaf_types);
    set_unbound(self);
    return 0;
}

static int
PairLoop_init(LoopObject *self, PyObject *args, PyObject *kwds)
{
    static char *names[] = {"pair", "node", "immutable", "leaf_types", NULL};
    PyObject *callables[2], *immutable, *leaf_types;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOOO:PairLoop", names, &callables[0],
                                     &callables[1], &immutable, &leaf_types) ||
        check_callables_and_sets("PairLoop", "pair and node", callables, 2, immutable,
                                 leaf_types) < 0) {
        return -1;
    }
    set_ref(self, REF_PAIR, callables[0]);
    set_ref(self, REF_NODE, callables[1]);
    set_ref(self, REF_IMMUTABLE, immutable);
    set_ref(self, REF_LEAF_TYPES, leaf_types);
    set_unbound(self);
    return 0;
}

static PyObject *
Loop_bind(LoopObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4) {
        PyErr_Format(PyExc_TypeError, "bind() takes 4 arguments (%zd given)", nargs);
        return NULL;
    }
    /* the types cannot be subclassed, so self's type is the one its module made */
    ModuleState *state = PyType_GetModuleState(Py_TYPE(self));
    if (args[1] != Py_None && !Py_IS_TYPE(args[1], state->table_type)) {
        PyErr_Format(PyExc_TypeError, "bind(f, table, prune, use_prune): table must be an "
                                      "IdTable of this module, or None, not '%.100s'",
                     Py_TYPE(args[1])->tp_name);
        return NULL;
    }
    int use_prune = PyObject_IsTrue(args[3]);
    if (use_prune < 0) {
        return NULL;
    }
    set_ref(self, REF_F, args[0]);
    set_ref(self, REF_TABLE, args[1]);
    set_ref(self, REF_PRUNE, args[2]);
    self->use_prune = use_prune;
    Py_RETURN_NONE;
}

/* f(x), or f(x, y) when y is not NULL, for a leaf that is not a value: the cached
   result (or prune), or f's, stored. Without a table, f's. */
static PyObject *
map_cached(const Run *run, PyObject *x, PyObject *y)
{
    IdTableObject *table = run->refs[REF_TABLE] == Py_None
                               ? NULL
                               : (IdTableObject *)run->refs[REF_TABLE];
    Probe probe = {0, 0, 0};
    if (table != NULL) {
        PyObject *r = table_probe(table, x, &probe);
        if (r != NULL) {
            return Py_NewRef(run->use_prune ? run->refs[REF_PRUNE] : r);
        }
    }
    PyObject *argv[2] = {x, y};
    PyObject *r = PyObject_Vectorcall(run->refs[REF_F], argv, y ? 2 : 1, NULL);
    if (r != NULL && table != NULL && table_fill(table, &probe, x, r) < 0) {
        Py_CLEAR(r);
    }
    return r;
}

/* The index of the child (or tuple element) whose mapping raised, appended to
   the trail of the exception being raised (its attribute `_containers_trail`, a list:
   _loops.TRAIL), as the Python fast tiers' `except` clauses do; fmap's fast path turns
   the trail into the key path of its note once, at the top (_relocate.trail_note). Called
   only on the error path: nothing is paid until f raises. A failure here is dropped
   (the note is then missing or shorter), never raised instead of the error. */
void
trail_index(Py_ssize_t i)
{
#if PY_VERSION_HEX >= 0x030C0000
    PyObject *exc = PyErr_GetRaisedException();
#else
    PyObject *type, *exc, *tb;
    PyErr_Fetch(&type, &exc, &tb);
    PyErr_NormalizeException(&type, &exc, &tb);
    if (exc != NULL && tb != NULL) {
        PyException_SetTraceback(exc, tb);
    }
    Py_XDECREF(type);
    Py_XDECREF(tb);
#endif
    if (exc == NULL) {
        return;
    }
    PyObject *index = PyLong_FromSsize_t(i), *trail = NULL;
    if (index != NULL) {
        trail = PyObject_GetAttrString(exc, "_containers_trail");
        if (trail == NULL) {
            PyErr_Clear();
            trail = PyList_New(0);
            if (trail != NULL && PyObject_SetAttrString(exc, "_containers_trail", trail) < 0) {
                Py_CLEAR(trail);
            }
        }
        if (trail != NULL && PyList_Check(trail)) {
            (void)PyList_Append(trail, index);
        }
    }
    PyErr_Clear();
    Py_XDECREF(trail);
    Py_XDECREF(index);
#if PY_VERSION_HEX >= 0x030C0000
    PyErr_SetRaisedException(exc);
#else
    PyErr_Restore(Py_NewRef(Py_TYPE(exc)), exc, PyException_GetTraceback(exc));
#endif
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
            trail_index(i);
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

static PyObject *map_str_dict(const Run *run, PyObject *x, PyObject *depth);

/* For a type direct does not know: its leaf marker, recorded in direct, if the type
   is a leaf; else node (borrowed, all three); NULL on error. A leaf type is recorded
   once, so that each later leaf costs one lookup, as a node does. */
static PyObject *
leaf_marker(const Run *run, PyObject *type)
{
    int is = PySet_Contains(run->refs[REF_IMMUTABLE], type);
    PyObject *marker = run->refs[REF_VALUE_LEAF];
    if (is == 0) {
        is = PySet_Contains(run->refs[REF_LEAF_TYPES], type);
        marker = run->refs[REF_CACHED_LEAF];
    }
    if (is < 0) {
        return NULL;
    }
    if (is == 0) {
        return run->refs[REF_NODE];
    }
    return PyDict_SetItem(run->refs[REF_DIRECT], type, marker) < 0 ? NULL : marker;
}

/* Loop: the result for one child x (y, NULL, is there for the map_one signature). */
PyObject *
map_child(const Run *run, PyObject *x, PyObject *y, PyObject *depth)
{
    (void)y;
    PyObject *type = (PyObject *)Py_TYPE(x);
    if (Py_IS_TYPE(x, &PyTuple_Type)) {
        PyObject *r = map_small_tuple(run, x, NULL);
        if (r != NULL || PyErr_Occurred()) {
            return r;
        }
    }
    /* Tested before the leaf-type sets: dict is never in them (the registry never
       removes a builtin kind, so `dict` cannot be read as a leaf). */
    else if (Py_IS_TYPE(x, &PyDict_Type)) {
        PyObject *r = map_str_dict(run, x, depth);
        if (r != NULL || PyErr_Occurred()) {
            return r;
        }
    }
    PyObject *mapper = PyDict_GetItemWithError(run->refs[REF_DIRECT], type); /* borrowed */
    if (mapper == NULL) {
        if (PyErr_Occurred() || (mapper = leaf_marker(run, type)) == NULL) {
            return NULL;
        }
    }
    if (mapper == run->refs[REF_VALUE_LEAF]) {
        return PyObject_CallOneArg(run->refs[REF_F], x);
    }
    if (mapper == run->refs[REF_CACHED_LEAF]) {
        return map_cached(run, x, NULL);
    }
    if (Py_IS_TYPE(mapper, run->node_type)) {
        return map_declared(run, mapper, x, depth);
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
    if (is) {
        return map_cached(run, x, y);
    }
    PyObject *ys = PyTuple_Pack(1, y);
    if (ys == NULL) {
        return NULL;
    }
    PyObject *argv[3] = {x, ys, depth};
    PyObject *r = PyObject_Vectorcall(run->refs[REF_NODE], argv, 3, NULL);
    Py_DECREF(ys);
    return r;
}

typedef PyObject *(*map_one)(const Run *, PyObject *, PyObject *, PyObject *);

/* Loop: a dict whose keys are all exact str, mapped here as `_Mode.map_dict` (its
   plain twin, `direct[dict]`) maps it, without its Python frame, `sort_keys` and the
   rebuild (benchmarks/instructions.py, W6id: a dict of small dicts of arrays). The
   result is a new dict with x's keys in x's order; the values are mapped in sorted key
   order, so f is called in the same order. Distinct str are totally ordered by `<`
   (code points), so `sort_keys` returns `sorted(keys)`, which the order here equals.
   The dict goes through the identity cache as map_dict's does (looked up first,
   stored last, prune for a repeat); a repeat is returned here whatever its keys.

   Its values are read as map_dict reads them, with Python's errors: in key order from
   the dict itself (as `x.values()` iterates: "dictionary changed size during
   iteration" if f changes its size), else by key (`x[key]`: KeyError if f removed it).

   NULL with no error set when it does not take x: a key that is not an exact str (the
   fallback order of `sort_keys` is not `<`), a depth past max_depth, or the thread's
   stack running low. The caller then calls map_dict, which does the same (or hands x
   to the iterative engine). */
#define SMALL_DICT 8

static PyObject *
map_str_dict(const Run *run, PyObject *x, PyObject *depth)
{
    Py_ssize_t d = PyLong_AsSsize_t(depth);
    if (d == -1 && PyErr_Occurred()) {
        return NULL;
    }
    if (d > run->max_depth || stack_is_low()) {
        return NULL;
    }
    PyObject *table = run->refs[REF_TABLE];
    Probe probe = {0, 0, 0};
    if (table != Py_None) {
        PyObject *r = table_probe((IdTableObject *)table, x, &probe); /* borrowed */
        if (r != NULL) {
            return Py_NewRef(run->use_prune ? run->refs[REF_PRUNE] : r);
        }
    }
    Py_ssize_t n = PyDict_GET_SIZE(x), pos = 0, i;
    PyObject *small[2 * SMALL_DICT], **keys = small, *key, *value, *out = NULL;
    if (n > SMALL_DICT) {
        keys = PyMem_New(PyObject *, 3 * n);
        if (keys == NULL) {
            return PyErr_NoMemory();
        }
    }
    /* keys[0:n]: x's keys in its order (held, as `list(x)`); keys[n:2n]: the same
       keys in sorted order (borrowed from the first half); in a larger dict,
       keys[2n:3n]: its values as they are now (neither held nor read: addresses for
       table_prefetch, which reads nothing) */
    PyObject **order = keys + n, **ahead = n > SMALL_DICT ? keys + 2 * n : NULL;
    /* the values' home slots are hinted here in a small dict, one child ahead in a
       larger one (table_prefetch), from the addresses read here: a second pass over
       the dict's entries to read the next one at each child cost more than the hint
       saved (benchmarks/run.py, W6id's dict of 50,000 layers at 100k) */
    const IdTableObject *hint = table == Py_None ? NULL : (const IdTableObject *)table;
    for (i = 0; PyDict_Next(x, &pos, &key, &value); i++) {
        if (!PyUnicode_CheckExact(key)) {
            break; /* no Python code has run: x is as it was */
        }
        Py_INCREF(key);
        keys[i] = order[i] = key;
        if (ahead != NULL) {
            ahead[i] = value;
        }
        else if (hint != NULL) {
            table_prefetch(hint, value);
        }
    }
    Py_ssize_t held = i;
    if (held < n) {
        goto done; /* not taken */
    }
    int sorted = 1;
    for (i = 1; i < n && sorted; i++) {
        int c = PyUnicode_Compare(keys[i - 1], keys[i]);
        if (c == -1 && PyErr_Occurred()) {
            goto done;
        }
        sorted = c < 0;
    }
    if (!sorted && n <= SMALL_DICT) { /* insertion sort */
        for (i = 1; i < n; i++) {
            PyObject *k = order[i];
            Py_ssize_t j = i;
            for (; j > 0; j--) {
                int c = PyUnicode_Compare(order[j - 1], k);
                if (c == -1 && PyErr_Occurred()) {
                    goto done;
                }
                if (c < 0) {
                    break;
                }
                order[j] = order[j - 1];
            }
            order[j] = k;
        }
    }
    else if (!sorted) {
        PyObject *list = PyList_New(n);
        if (list == NULL) {
            goto done;
        }
        for (i = 0; i < n; i++) {
            Py_INCREF(keys[i]);
            PyList_SET_ITEM(list, i, keys[i]);
        }
        if (PyList_Sort(list) < 0) {
            Py_DECREF(list);
            goto done;
        }
        for (i = 0; i < n; i++) {
            order[i] = PyList_GET_ITEM(list, i); /* still held by keys */
        }
        Py_DECREF(list);
    }
    PyObject *kid_depth = PyLong_FromSsize_t(d + 1);
    out = kid_depth == NULL ? NULL : PyDict_New();
    if (out == NULL) {
        Py_XDECREF(kid_depth);
        goto done;
    }
    if (sorted) {
        /* as `dict(zip(keys, loop(x.values(), depth + 1)))` */
        Py_ssize_t left = n;
        pos = 0;
        for (i = 0;; i++) {
            if (PyDict_GET_SIZE(x) != n) {
                PyErr_SetString(PyExc_RuntimeError, "dictionary changed size during iteration");
                break;
            }
            if (!PyDict_Next(x, &pos, &key, &value)) {
                break;
            }
            if (left-- == 0) {
                PyErr_SetString(PyExc_RuntimeError, "dictionary keys changed during iteration");
                break;
            }
            if (hint != NULL && ahead != NULL && i + 1 < n) {
                table_prefetch(hint, ahead[i + 1]); /* a hint: ahead[i + 1] is not read */
            }
            Py_INCREF(value);
            PyObject *r = map_child(run, value, NULL, kid_depth);
            Py_DECREF(value);
            if (r == NULL) {
                trail_index(i);
            }
            if (r == NULL || PyDict_SetItem(out, keys[i], r) < 0) {
                Py_XDECREF(r);
                break;
            }
            Py_DECREF(r);
        }
    }
    else {
        /* as `dict.fromkeys(keys)`, then updated from
           `zip(order, loop(map(x.__getitem__, order), depth + 1))` */
        for (i = 0; i < n; i++) {
            if (PyDict_SetItem(out, keys[i], Py_None) < 0) {
                break;
            }
        }
        for (i = 0; i < n && !PyErr_Occurred(); i++) {
            value = PyDict_GetItemWithError(x, order[i]); /* borrowed */
            if (value == NULL) {
                if (!PyErr_Occurred()) {
                    PyErr_SetObject(PyExc_KeyError, order[i]);
                }
                break;
            }
            Py_INCREF(value);
            PyObject *r = map_child(run, value, NULL, kid_depth);
            Py_DECREF(value);
            if (r == NULL) {
                trail_index(i);
            }
            if (r == NULL || PyDict_SetItem(out, order[i], r) < 0) {
                Py_XDECREF(r);
                break;
            }
            Py_DECREF(r);
        }
    }
    Py_DECREF(kid_depth);
    if (PyErr_Occurred() ||
        (table != Py_None && table_fill((IdTableObject *)table, &probe, x, out) < 0)) {
        Py_CLEAR(out);
    }
done:
    for (i = 0; i < held; i++) {
        Py_DECREF(keys[i]);
    }
    if (keys != small) {
        PyMem_Free(keys);
    }
    return out;
}

/* The list of map(run, x, y, depth) for the children x of kids, each facing the next
   child y of ykids when ykids is not NULL (as zip pairs them: the first tree's next
   child is read first, and the shorter tree ends the loop). */
static PyObject *
run_loop(LoopObject *self, const char *what, PyObject *kids, PyObject *ykids,
         PyObject *depth, map_one map)
{
    Run run;
    if (run_take(self, what, &run) < 0) {
        return NULL;
    }
    PyObject *xs = PyObject_GetIter(kids);
    if (xs == NULL) {
        run_release(&run);
        return NULL;
    }
    PyObject *ys = ykids == NULL ? NULL : PyObject_GetIter(ykids);
    PyObject *out = ykids != NULL && ys == NULL ? NULL : PyList_New(0);
    if (out == NULL) {
        Py_XDECREF(ys);
        Py_DECREF(xs);
        run_release(&run);
        return NULL;
    }
    if (stack_is_low()) {
        /* the nodes below go to the iterative engine (the types cannot be subclassed,
           so self's type is the one its module made) */
        depth = ((ModuleState *)PyType_GetModuleState(Py_TYPE(self)))->handover_depth;
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
        if (r == NULL) {
            trail_index(PyList_GET_SIZE(out));
        }
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
    run_release(&run);
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
    return run_loop(self, "Loop.run", args[0], NULL, args[1], map_child);
}

/* map_child for one value: what `_Mode.run` does for the root of a tree (a
   dict of str keys mapped here too, without map_dict's Python frame:
   benchmarks/instructions.py, W6id). */
static PyObject *
Loop_child(LoopObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    Run run;
    if (nargs != 2) {
        PyErr_Format(PyExc_TypeError, "child() takes 2 arguments (%zd given)", nargs);
        return NULL;
    }
    if (run_take(self, "Loop.child", &run) < 0) {
        return NULL;
    }
    PyObject *r = map_child(&run, args[0], NULL, args[1]);
    run_release(&run);
    return r;
}

static PyObject *
PairLoop_run(LoopObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3) {
        PyErr_Format(PyExc_TypeError, "run() takes 3 arguments (%zd given)", nargs);
        return NULL;
    }
    return run_loop(self, "PairLoop.run", args[0], args[1], args[2], map_pair_child);
}

/* f(x) through the identity cache, for a leaf that is not a value: the generated
   mappers' call (`_loops.map_child`), so that they share the loop's table and cost
   one call per leaf (benchmarks/run.py, W3id). */
static PyObject *
cached_leaf(LoopObject *self, const char *what, PyObject *x, PyObject *y)
{
    /* the run holds only what map_cached reads (a full run_take costs as much as the
       probe: benchmarks/instructions.py, W3id) */
    static const int used[] = {REF_F, REF_TABLE, REF_PRUNE};
    Run run = {{NULL}, self->use_prune, self->max_depth, NULL}; /* a leaf: no nodes */
    if (self->refs[REF_F] == NULL) {
        PyErr_Format(PyExc_TypeError, "%s: the loop was never initialised", what);
        return NULL;
    }
    for (size_t i = 0; i < sizeof used / sizeof used[0]; i++) {
        run.refs[used[i]] = self->refs[used[i]];
        Py_INCREF(run.refs[used[i]]);
    }
    PyObject *r = map_cached(&run, x, y);
    run_release(&run);
    return r;
}

static PyObject *
Loop_leaf(LoopObject *self, PyObject *x)
{
    return cached_leaf(self, "Loop.leaf", x, NULL);
}

/* f(x, y) through the identity cache (keyed by x), for the generated pair mappers
   (`_loops.map_child(..., other)`), as Loop.leaf is for the one-tree mappers
   (benchmarks/run.py, W4c). */
static PyObject *
PairLoop_leaf(LoopObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_Format(PyExc_TypeError, "leaf() takes 2 arguments (%zd given)", nargs);
        return NULL;
    }
    return cached_leaf(self, "PairLoop.leaf", args[0], args[1]);
}

static PyMethodDef Loop_methods[] = {
    {"run", (PyCFunction)(void (*)(void))Loop_run, METH_FASTCALL,
     "run(kids, depth) -> list: each child of one node, mapped."},
    {"child", (PyCFunction)(void (*)(void))Loop_child, METH_FASTCALL,
     "child(x, depth): x mapped as run maps each child (the root of a tree)."},
    {"leaf", (PyCFunction)Loop_leaf, METH_O,
     "leaf(x): f(x) through the identity cache (a leaf that is not a value)."},
    {"bind", (PyCFunction)(void (*)(void))Loop_bind, METH_FASTCALL,
     "bind(f, table, prune, use_prune): the values of one fmap call (table: an IdTable, "
     "or None without a cache)."},
    {NULL, NULL, 0, NULL},
};

static PyMethodDef PairLoop_methods[] = {
    {"run", (PyCFunction)(void (*)(void))PairLoop_run, METH_FASTCALL,
     "run(kids, ykids, depth) -> list: each child of one node facing another's, mapped."},
    {"leaf", (PyCFunction)(void (*)(void))PairLoop_leaf, METH_FASTCALL,
     "leaf(x, y): f(x, y) through the identity cache, keyed by x (a leaf that is not a "
     "value)."},
    {"bind", (PyCFunction)(void (*)(void))Loop_bind, METH_FASTCALL,
     "bind(f, table, prune, use_prune): the values of one fmap call (table: an IdTable, "
     "or None without a cache)."},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot Loop_slots[] = {
    {Py_tp_doc, (void *)PyDoc_STR("Loop(node, direct, immutable, leaf_types, value_leaf, "
                                  "cached_leaf, max_depth): fmap's child loop for one "
                                  "mode of _fast._Mode.")},
    {Py_tp_new, PyType_GenericNew},
    {Py_tp_init, Loop_init},
    {Py_tp_dealloc, Loop_dealloc},
    {Py_tp_traverse, Loop_traverse},
    {Py_tp_clear, Loop_clear},
    {Py_tp_methods, Loop_methods},
    {0, NULL},
};

static PyType_Slot PairLoop_slots[] = {
    {Py_tp_doc, (void *)PyDoc_STR("PairLoop(pair, node, immutable, leaf_types): fmap's "
                                  "child loop with one extra tree, for _fast._Mode over several trees.")},
    {Py_tp_new, PyType_GenericNew},
    {Py_tp_init, PairLoop_init},
    {Py_tp_dealloc, Loop_dealloc},
    {Py_tp_traverse, Loop_traverse},
    {Py_tp_clear, Loop_clear},
    {Py_tp_methods, PairLoop_methods},
    {0, NULL},
};

PyType_Spec Loop_spec = {
    .name = "containers._engine._speedups.Loop",
    .basicsize = sizeof(LoopObject),
    .flags = LOOP_FLAGS,
    .slots = Loop_slots,
};

PyType_Spec PairLoop_spec = {
    .name = "containers._engine._speedups.PairLoop",
    .basicsize = sizeof(LoopObject),
    .flags = LOOP_FLAGS,
    .slots = PairLoop_slots,
};
