#include "_speedups.h"

/* --- leaf_paths: the key path of every leaf of a Structure ------------------------

   `leaf_paths(records, context)` is `_record_paths.ranked_paths(records, None, 0)[0]` in C,
   its plain twin (used whenever this module is missing or CONTAINERS_PURE_PYTHON is
   set): one linear pass over a Structure's pre-order records `(kind, aux, n, mask)`
   with a stack of open nodes, as a Python loop would, so any depth. Each node's keys
   are `kind.keys(aux, n)`, called in record order as the twin calls them; a leaf's
   path is the tuple of the keys above it and its own. `context` is
   `_flatten.PATHS_CONTEXT`: (tuple_kind, list_kind, "keys"). The keys of a tuple or
   list depend on n alone (`_registry._no_keys`), so one call serves a run of
   sequences of one length.

   Speed (benchmarks/run.py, flatten_with_path): the Python loop spends most of a
   leaf's time on the bytecode of its stack and mask tests; here a leaf costs one tuple. */

typedef struct {
    PyObject *keys;   /* the node's keys: a tuple, owned */
    PyObject *mask;   /* None, True or a tuple of booleans, borrowed from the records */
    Py_ssize_t i;     /* the next child */
} PathFrame;

typedef struct {
    PyObject *records;                            /* a tuple, owned */
    PyObject *tuple_kind, *list_kind, *keys_name; /* borrowed from the context */
    Py_ssize_t seq_n;                             /* the length seq_keys are for */
    PyObject *seq_keys;                           /* owned, or NULL */
} Paths;

/* The keys of the j-th record as a new tuple, its mask borrowed in *mask; NULL with
   an error set if the record is malformed or `keys` raised. */
static PyObject *
paths_keys(Paths *p, Py_ssize_t j, PyObject **mask)
{
    PyObject *record = PyTuple_GET_ITEM(p->records, j);
    if (!PyTuple_Check(record) || PyTuple_GET_SIZE(record) != 4) {
        PyErr_SetString(PyExc_TypeError,
                        "leaf_paths: a record must be a tuple (kind, aux, n, mask)");
        return NULL;
    }
    PyObject *kind = PyTuple_GET_ITEM(record, 0), *n = PyTuple_GET_ITEM(record, 2);
    *mask = PyTuple_GET_ITEM(record, 3);
    int seq = kind == p->tuple_kind || kind == p->list_kind;
    Py_ssize_t length = -1;
    if (seq) {
        length = PyLong_AsSsize_t(n);
        if (length == -1 && PyErr_Occurred()) {
            return NULL;
        }
        if (p->seq_keys != NULL && length == p->seq_n) {
            return Py_NewRef(p->seq_keys);
        }
    }
    PyObject *argv[3] = {kind, PyTuple_GET_ITEM(record, 1), n};
    PyObject *keys = PyObject_VectorcallMethod(
        p->keys_name, argv, 3 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
    if (keys != NULL && !PyTuple_CheckExact(keys)) {
        Py_SETREF(keys, PySequence_Tuple(keys));
    }
    if (keys != NULL && seq) {
        Py_XSETREF(p->seq_keys, Py_NewRef(keys));
        p->seq_n = length;
    }
    return keys;
}

/* 1 if child i of a node with this mask is a node, 0 if a leaf, -1 on error. */
static int
paths_is_node(PyObject *mask, Py_ssize_t i)
{
    if (mask == Py_None) {
        return 0;
    }
    if (mask == Py_True) {
        return 1;
    }
    PyObject *item = PySequence_GetItem(mask, i);
    if (item == NULL) {
        return -1;
    }
    int r = PyObject_IsTrue(item);
    Py_DECREF(item);
    return r;
}

/* The tuple of the keys in above[0:depth] and key. */
static PyObject *
paths_path(PyObject **above, Py_ssize_t depth, PyObject *key)
{
    PyObject *path = PyTuple_New(depth + 1);
    if (path == NULL) {
        return NULL;
    }
    for (Py_ssize_t k = 0; k < depth; k++) {
        PyTuple_SET_ITEM(path, k, Py_NewRef(above[k]));
    }
    PyTuple_SET_ITEM(path, depth, Py_NewRef(key));
    return path;
}

PyObject *
speedups_leaf_paths(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_Format(PyExc_TypeError, "leaf_paths() takes 2 arguments (%zd given)", nargs);
        return NULL;
    }
    Paths p = {.seq_n = -1, .seq_keys = NULL};
    if (!PyTuple_Check(args[0]) && !PyList_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "leaf_paths: records must be a tuple or a list");
        return NULL;
    }
    if (!PyTuple_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "leaf_paths: context must be a tuple");
        return NULL;
    }
    if (!PyArg_ParseTuple(args[1], "OOU:leaf_paths context", &p.tuple_kind, &p.list_kind,
                          &p.keys_name)) {
        return NULL;
    }
    /* a tuple, so that a kind's keys, which may run any Python code, cannot change the
       records being read (a Structure's records are one already) */
    p.records = PySequence_Tuple(args[0]);
    if (p.records == NULL) {
        return NULL;
    }
    Py_ssize_t n_records = PyTuple_GET_SIZE(p.records);
    if (n_records == 0) {
        Py_DECREF(p.records);
        return Py_BuildValue("[()]"); /* the tree is one leaf */
    }
    /* The open nodes, and the key of each under its parent: above[d] is the key of
       stack[d + 1], so a leaf in the top frame has the path above[0:top] + its key. */
    Py_ssize_t cap = 16, top = -1, next = 1;
    PathFrame *stack = PyMem_Malloc(cap * sizeof(PathFrame));
    PyObject **above = PyMem_Malloc(cap * sizeof(PyObject *));
    PyObject *out = PyList_New(0);
    if (stack == NULL || above == NULL || out == NULL) {
        if (out != NULL) {
            PyErr_NoMemory();
        }
        goto error;
    }
    stack[0].keys = paths_keys(&p, 0, &stack[0].mask);
    if (stack[0].keys == NULL) {
        goto error;
    }
    stack[0].i = 0;
    top = 0;
    while (top >= 0) {
        PathFrame *fr = &stack[top];
        if (fr->i == PyTuple_GET_SIZE(fr->keys)) {
            Py_DECREF(fr->keys);
            top--;
            continue;
        }
        Py_ssize_t i = fr->i++;
        PyObject *key = PyTuple_GET_ITEM(fr->keys, i);
        int node = paths_is_node(fr->mask, i);
        if (node < 0) {
            goto error;
        }
        if (!node) {
            PyObject *path = paths_path(above, top, key);
            if (path == NULL || PyList_Append(out, path) < 0) {
                Py_XDECREF(path);
                goto error;
            }
            Py_DECREF(path);
            continue;
        }
        if (next >= n_records) {
            PyErr_SetString(PyExc_IndexError, "leaf_paths: the records end inside a node");
            goto error;
        }
        if (top + 1 == cap) {
            cap *= 2;
            PathFrame *grown = PyMem_Realloc(stack, cap * sizeof(PathFrame));
            if (grown == NULL) {
                PyErr_NoMemory();
                goto error;
            }
            stack = grown;
            PyObject **grown_above = PyMem_Realloc(above, cap * sizeof(PyObject *));
            if (grown_above == NULL) {
                PyErr_NoMemory();
                goto error;
            }
            above = grown_above;
        }
        above[top] = key; /* borrowed: fr->keys holds it while the child is open */
        PathFrame *child = &stack[top + 1];
        child->keys = paths_keys(&p, next++, &child->mask);
        if (child->keys == NULL) {
            goto error;
        }
        child->i = 0;
        top++;
    }
    PyMem_Free(stack);
    PyMem_Free(above);
    Py_XDECREF(p.seq_keys);
    Py_DECREF(p.records);
    return out;
error:
    for (; top >= 0; top--) {
        Py_DECREF(stack[top].keys);
    }
    PyMem_Free(stack);
    PyMem_Free(above);
    Py_XDECREF(p.seq_keys);
    Py_DECREF(p.records);
    Py_XDECREF(out);
    return NULL;
}

/* --- KeyHash: the hash of a key, read in C -------------------------------------------

   The base of `AttrKey` and `IndexKey` (`_paths._HashedKey` is its plain twin, the base
   when this module is missing or CONTAINERS_PURE_PYTHON is set): one field, `_hash`,
   which the key's `__init__` sets once to `hash((type, raw))`, and a `tp_hash` that
   returns it. A dict keyed by key paths (the parts of `split` and `state`, `merge`'s
   lookups) hashes every key of every path; a Python `__hash__` costs a call into the
   interpreter per key, this one a load (benchmarks/split.py). `__eq__` stays the key
   class's own: a dict compares keys only on a hash match, and a path built once and
   looked up again is found by identity first. */

typedef struct {
    PyObject_HEAD
    Py_hash_t hash;
} KeyHashObject;

static Py_hash_t
keyhash_hash(PyObject *self)
{
    Py_hash_t h = ((KeyHashObject *)self)->hash;
    return h == -1 ? -2 : h; /* -1 says "error" to the caller; hash() never gives it */
}

static PyMemberDef KeyHash_members[] = {
    {"_hash", Py_T_PYSSIZET, offsetof(KeyHashObject, hash), 0,
     "the key's hash, set once by its __init__"},
    {NULL, 0, 0, 0, NULL},
};

static PyType_Slot KeyHash_slots[] = {
    {Py_tp_hash, keyhash_hash},
    {Py_tp_members, KeyHash_members},
    {Py_tp_doc, "KeyHash(): the base of AttrKey and IndexKey, whose hash is their _hash "
                "field, read in C (plain twin: containers._paths._HashedKey)."},
    {0, NULL},
};

PyType_Spec KeyHash_spec = {
    .name = "containers._engine._speedups.KeyHash",
    .basicsize = sizeof(KeyHashObject),
    .itemsize = 0,
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .slots = KeyHash_slots,
};

/* --- same_records: two Structures' records made of the same objects ----------------

   `same_records(a, b)` is `_structure.same_records_plain(a, b)` in C, its plain twin:
   True when the tuples a and b have records that are the same objects, or made of the
   same objects: kinds identical, n equal ints, masks identical or tuples of identical
   items, every aux None or a tuple of identical items each a str, int, float, bool,
   bytes, None or a tuple of those (a dict's keys), compared the same way (so that no
   object that could have been changed in place is trusted). Then the paths, and the tag ranks, read from a and b
   are the same, and a plan computed from a serves b (`_tags.tag_plan`, benchmarks/
   split.py), as do the checks `combine` makes. No Python code runs: an aux's `__eq__`
   is never called. False says nothing (the caller computes what it would have reused). */

static int
same_scalar(PyObject *x)
{
    return x == Py_None || PyUnicode_CheckExact(x) || PyLong_CheckExact(x) ||
           PyFloat_CheckExact(x) || PyBool_Check(x) || PyBytes_CheckExact(x);
}

/* 1 if x and y are the same object or tuples of the same objects, else 0. With
   scalars, x must be None or a tuple whose items are scalars or tuples of scalars
   (a dict's aux: its keys and its default factory), the inner tuples compared the same
   way: nothing in it can have changed in place. */
static int
same_items(PyObject *x, PyObject *y, int scalars)
{
    if (!PyTuple_CheckExact(x) || !PyTuple_CheckExact(y)) {
        return x == y && (!scalars || x == Py_None);
    }
    Py_ssize_t n = PyTuple_GET_SIZE(x);
    if (PyTuple_GET_SIZE(y) != n) {
        return 0;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PyTuple_GET_ITEM(x, i), *other = PyTuple_GET_ITEM(y, i);
        if (scalars == 1 && PyTuple_CheckExact(item)) {
            if (!same_items(item, other, 2)) {
                return 0;
            }
        }
        else if (item != other || (scalars && !same_scalar(item))) {
            return 0;
        }
    }
    return 1;
}

static int
same_count(PyObject *x, PyObject *y)
{
    if (x == y) {
        return 1;
    }
    if (!PyLong_CheckExact(x) || !PyLong_CheckExact(y)) {
        return 0;
    }
    int overflow_x, overflow_y;
    long long a = PyLong_AsLongLongAndOverflow(x, &overflow_x);
    long long b = PyLong_AsLongLongAndOverflow(y, &overflow_y);
    if ((a == -1 || b == -1) && PyErr_Occurred()) {
        PyErr_Clear();
        return 0;
    }
    if (overflow_x || overflow_y) { /* exact ints: their == runs no Python code */
        int r = PyObject_RichCompareBool(x, y, Py_EQ);
        if (r < 0) {
            PyErr_Clear();
            return 0;
        }
        return r;
    }
    return a == b;
}

PyObject *
speedups_same_records(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_Format(PyExc_TypeError, "same_records() takes 2 arguments (%zd given)", nargs);
        return NULL;
    }
    PyObject *a = args[0], *b = args[1];
    if (!PyTuple_CheckExact(a) || !PyTuple_CheckExact(b)) {
        PyErr_SetString(PyExc_TypeError, "same_records: records must be tuples");
        return NULL;
    }
    Py_ssize_t n = PyTuple_GET_SIZE(a);
    if (PyTuple_GET_SIZE(b) != n) {
        Py_RETURN_FALSE;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *ra = PyTuple_GET_ITEM(a, i), *rb = PyTuple_GET_ITEM(b, i);
        if (!PyTuple_CheckExact(ra) || !PyTuple_CheckExact(rb) || PyTuple_GET_SIZE(ra) != 4 ||
            PyTuple_GET_SIZE(rb) != 4) {
            Py_RETURN_FALSE;
        }
        if (PyTuple_GET_ITEM(ra, 0) != PyTuple_GET_ITEM(rb, 0) ||
            !same_count(PyTuple_GET_ITEM(ra, 2), PyTuple_GET_ITEM(rb, 2)) ||
            !same_items(PyTuple_GET_ITEM(ra, 3), PyTuple_GET_ITEM(rb, 3), 0) ||
            !same_items(PyTuple_GET_ITEM(ra, 1), PyTuple_GET_ITEM(rb, 1), 1)) {
            Py_RETURN_FALSE;
        }
    }
    Py_RETURN_TRUE;
}

/* --- fill_part: a part of split from a kept plan -------------------------------------

   `fill_part(keys, hashes, leaves, picks)` is `_tags.fill_part_plain` in C, its plain
   twin: the dict `{keys[i]: leaves[picks[i]]}` in order, each key inserted with
   `hashes[i]`, which the plan computed once as `hash(keys[i])` (`_tags.TagPlan`): a
   key path's hash is fixed when its keys are made (`AttrKey`, `IndexKey`, a
   `DictKey` of a str, int, float, bool, bytes or None: what `same_records` trusts),
   so the dict is the one `dict(zip(...))` would build, without hashing a path
   (benchmarks/split.py). A part is filled at every split or state of a model.
   `hashes` and `picks` are `array('q')`s (8 bytes an entry, kept by the plan). */

PyObject *
speedups_fill_part(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4) {
        PyErr_Format(PyExc_TypeError, "fill_part() takes 4 arguments (%zd given)", nargs);
        return NULL;
    }
    PyObject *keys = args[0], *leaves = args[2];
    if (!PyList_CheckExact(keys) || !PyList_CheckExact(leaves)) {
        PyErr_SetString(PyExc_TypeError, "fill_part: keys and leaves must be lists");
        return NULL;
    }
    Py_buffer hashes, picks;
    if (PyObject_GetBuffer(args[1], &hashes, PyBUF_FORMAT | PyBUF_C_CONTIGUOUS) < 0) {
        return NULL;
    }
    if (PyObject_GetBuffer(args[3], &picks, PyBUF_FORMAT | PyBUF_C_CONTIGUOUS) < 0) {
        PyBuffer_Release(&hashes);
        return NULL;
    }
    PyObject *part = NULL;
    Py_ssize_t n = PyList_GET_SIZE(keys);
    if (hashes.itemsize != 8 || picks.itemsize != 8 || hashes.format == NULL ||
        picks.format == NULL || strcmp(hashes.format, "q") != 0 ||
        strcmp(picks.format, "q") != 0) {
        PyErr_SetString(PyExc_TypeError, "fill_part: hashes and picks must be array('q')s");
        goto done;
    }
    if (hashes.len / 8 != n || picks.len / 8 != n) {
        PyErr_SetString(PyExc_ValueError, "fill_part: keys, hashes and picks differ in length");
        goto done;
    }
    const long long *hash_at = hashes.buf, *pick_at = picks.buf;
#if PY_VERSION_HEX < 0x030D0000
    part = _PyDict_NewPresized(n);
#else
    part = PyDict_New();
#endif
    for (Py_ssize_t i = 0; part != NULL && i < n; i++) {
        /* re-read per step: a key's __eq__ (on a hash match) may run Python code */
        Py_ssize_t at = (Py_ssize_t)pick_at[i];
        if (i >= PyList_GET_SIZE(keys) || at < 0 || at >= PyList_GET_SIZE(leaves)) {
            PyErr_SetString(PyExc_IndexError, "fill_part: a pick is not a leaf's index");
            Py_CLEAR(part);
            break;
        }
        PyObject *key = Py_NewRef(PyList_GET_ITEM(keys, i));
        PyObject *leaf = Py_NewRef(PyList_GET_ITEM(leaves, at));
#if PY_VERSION_HEX < 0x030D0000
        int r = _PyDict_SetItem_KnownHash(part, key, leaf, (Py_hash_t)hash_at[i]);
#else
        (void)hash_at;
        int r = PyDict_SetItem(part, key, leaf);
#endif
        Py_DECREF(key);
        Py_DECREF(leaf);
        if (r < 0) {
            Py_CLEAR(part);
        }
    }
done:
    PyBuffer_Release(&hashes);
    PyBuffer_Release(&picks);
    return part;
}
