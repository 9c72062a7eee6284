#include "_speedups.h"

/* --- build: unflatten's rebuild ----------------------------------------------------

   `build(records, leaves, context)` is `_records.build` in C, its plain twin (used
   whenever this module is missing or CONTAINERS_PURE_PYTHON is set): the tree of the
   pre-order records `(kind, aux, n, mask)` of a Structure (a tuple) with `leaves` in
   place. It makes the same calls `kind.<name>(aux, children)` in the same order (a
   node's when its last child is built; children as a new list), so that even a
   kind's `unflatten` with side effects sees no difference; `name` is the context's:
   `unflatten_fresh` for a Structure (mutable kept values copied), `unflatten` for the
   executor maps' one walk (kept values kept, as fmap keeps them). A tuple, a list and a plain
   dict are built here, as jax builds its own node types in C++; every other node by
   its kind's `unflatten`, one Python call each.

   Speed (benchmarks/instructions.py, W1u and W1): the Python loop spends most of its
   time on the bytecode of a record's unpacking, its tests and the stack, and a dict
   costs it a Python call; here a record costs a few dozen instructions, a leaf two
   references (the copy's and the node's), a dict no call. W1u at N = 2,000: 593
   instructions per leaf in the Python loop, 148 here (jax 271, optree 216).

   `context` is `_records.C_BUILD_CONTEXT` (or `C_LIVE_BUILD_CONTEXT`), what does not
   change between calls: (tuple_kind, list_kind, dict_kind, dict_unflatten, plain,
   name), dict_unflatten being dict_kind's attribute `name` as imported and plain the
   twin that calls the same method. A record of dict_kind is
   built here as `_registry._dict_build` builds it (`dict(zip(keys, children))` with
   aux `(keys, None)`, keys in sorted order; else first `dict.fromkeys(insertion)`,
   the insertion order, then updated in the sorted order), but only while dict_kind's
   `unflatten` is dict_unflatten and aux has that shape: otherwise its `unflatten` is
   called, as for any kind. `plain(records, leaves)` is `_build` itself, for what is
   not a Structure's records and leaves (no exact tuple of records, leaves no exact
   list or tuple) or records that are not what flatten makes (a Structure unpickled
   from altered bytes): all records are checked first, before any call, and such ones
   are handed over whole, so that the plain twin raises its own errors.

   Records are flat, so this is one loop with a stack in two arrays, no C recursion:
   any depth. A list of leaves is first copied (the plain twin copies it too), so that a
   kind's `unflatten` that changes the caller's list changes nothing here; a tuple
   cannot change. The copy, each record's n and the two stacks share one block of
   memory, reused by the next call (scratch_take). */

/* A finished build leaves its block to the next build of the module, so that unflatten
   repeated over trees of one size reuses memory it has already touched. A new block of
   a few MB each call comes from fresh pages: unflatten of a 100,000-leaf tree faulted
   in about 200 pages per call for its copy of the leaves alone, besides the pages of
   the tree it builds, which any rebuild has: 2 to 4 ns per leaf where a fault costs 1
   to 2 us, as on a VM (benchmarks/run.py, W1u and W1 at 100k). Only blocks at most
   this large are kept (about 250,000 leaves' worth), so that the memory held between
   calls stays small. */
#define SCRATCH_MAX_BYTES ((size_t)8 << 20)

/* A block of at least size bytes: the module's spare if large enough, else a new one;
   mem NULL with MemoryError. */
static Scratch
scratch_take(ModuleState *state, size_t size)
{
    Scratch block = state->scratch;
    if (block.mem != NULL && block.size >= size) {
        state->scratch = (Scratch){NULL, 0};
        return block;
    }
    block.mem = PyMem_Malloc(size > 0 ? size : 1);
    block.size = size;
    if (block.mem == NULL) {
        PyErr_NoMemory();
    }
    return block;
}

/* Give a block back: kept as the module's spare if small enough and larger than the
   spare it has (a build run inside another's, by a kind's unflatten, may have put one
   back meanwhile), else freed. */
static void
scratch_put(ModuleState *state, Scratch block)
{
    if (block.mem == NULL) {
        return;
    }
    if (block.size <= SCRATCH_MAX_BYTES && block.size > state->scratch.size) {
        PyMem_Free(state->scratch.mem);
        state->scratch = block;
        return;
    }
    PyMem_Free(block.mem);
}

/* An open node: its record's index, and where its children start on the value stack. */
typedef struct {
    Py_ssize_t record;
    Py_ssize_t base;
} Open;

/* One call's values: borrowed from the call's arguments (and the copy of the leaves),
   which outlive it; and the arrays it owns. */
typedef struct {
    PyObject *records;        /* exact tuple of exact 4-tuples, checked by build_check */
    PyObject *const *leaves;  /* the items of the copy of the leaves */
    PyObject *tuple_kind;
    PyObject *list_kind;
    PyObject *dict_kind;      /* NULL while its unflatten is not dict_unflatten */
    PyObject *unflatten_name; /* the context's: "unflatten_fresh" or "unflatten" */
    Py_ssize_t *ns;           /* each record's n, read by build_check */
    Open *open;               /* the open nodes, innermost last */
    PyObject **values;        /* the open nodes' children built so far (owned) */
} Build;

#define RECORD_KIND(r) PyTuple_GET_ITEM((r), 0)
#define RECORD_AUX(r) PyTuple_GET_ITEM((r), 1)
#define RECORD_N(r) PyTuple_GET_ITEM((r), 2)
#define RECORD_MASK(r) PyTuple_GET_ITEM((r), 3)

/* 1 if the records are what flatten makes, 0 if not, -1 on error. Each record must be
   an exact tuple (kind, aux, n, mask) with n an exact int >= 0 and mask None, True
   with n > 0, or an exact tuple of n bools with a True in it (where the plain twin's
   scan for a node child stops); a tuple's or a list's aux None (the plain twin
   compares such records with ==, which then runs no Python code); and the records
   together one tree in pre-order with exactly nleaves leaves. Each n goes to b->ns.
   No Python code runs here. */
static int
build_check(Build *b, Py_ssize_t nrecords, Py_ssize_t nleaves)
{
    Py_ssize_t pending = 1; /* nodes still to come: the root */
    Py_ssize_t leaves = 0;
    for (Py_ssize_t j = 0; j < nrecords; j++) {
        PyObject *record = PyTuple_GET_ITEM(b->records, j);
        if (pending == 0 || !PyTuple_CheckExact(record) || PyTuple_GET_SIZE(record) != 4 ||
            !PyLong_CheckExact(RECORD_N(record))) {
            return 0;
        }
        Py_ssize_t n = PyLong_AsSsize_t(RECORD_N(record));
        if (n < 0) {
            if (PyErr_Occurred()) {
                if (!PyErr_ExceptionMatches(PyExc_OverflowError)) {
                    return -1;
                }
                PyErr_Clear(); /* too large for any tree: not flatten's */
            }
            return 0;
        }
        PyObject *kind = RECORD_KIND(record), *mask = RECORD_MASK(record);
        if ((kind == b->tuple_kind || kind == b->list_kind) && RECORD_AUX(record) != Py_None) {
            return 0;
        }
        Py_ssize_t nodes = 0;
        if (mask == Py_True) {
            nodes = n;
        }
        else if (mask != Py_None) {
            if (!PyTuple_CheckExact(mask) || PyTuple_GET_SIZE(mask) != n) {
                return 0;
            }
            for (Py_ssize_t i = 0; i < n; i++) {
                PyObject *node = PyTuple_GET_ITEM(mask, i);
                if (node == Py_True) {
                    nodes++;
                }
                else if (node != Py_False) {
                    return 0;
                }
            }
        }
        if ((mask != Py_None && nodes == 0) || nodes > nrecords - j - pending ||
            n - nodes > nleaves - leaves) {
            return 0; /* no node child; more nodes or leaves than there are */
        }
        pending += nodes - 1;
        leaves += n - nodes;
        b->ns[j] = n;
    }
    return pending == 0 && leaves == nleaves;
}

/* Drop the references to n items. */
static void
build_release(PyObject *const *items, Py_ssize_t n)
{
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_DECREF(items[i]);
    }
}

/* The dict `_registry._dict_build(aux, children)` builds, with aux already found to be
   (keys, insertion), both exact tuples (insertion may be None); the same insertions
   in the same order, so that keys whose hash or == runs Python code see no
   difference. */
static PyObject *
build_dict(PyObject *keys, PyObject *insertion, PyObject *const *items, Py_ssize_t n)
{
    PyObject *d = PyDict_New();
    if (d == NULL) {
        return NULL;
    }
    if (insertion != Py_None) { /* dict.fromkeys(insertion) */
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(insertion); i++) {
            if (PyDict_SetItem(d, PyTuple_GET_ITEM(insertion, i), Py_None) < 0) {
                Py_DECREF(d);
                return NULL;
            }
        }
    }
    Py_ssize_t m = PyTuple_GET_SIZE(keys) < n ? PyTuple_GET_SIZE(keys) : n; /* as zip */
    for (Py_ssize_t i = 0; i < m; i++) {
        if (PyDict_SetItem(d, PyTuple_GET_ITEM(keys, i), items[i]) < 0) {
            Py_DECREF(d);
            return NULL;
        }
    }
    return d;
}

/* The node of kind and aux with the n children items (new references taken, or the
   items' own stolen if steal, on error too); NULL on error. */
static PyObject *
build_node(Build *b, PyObject *kind, PyObject *aux, PyObject *const *items, Py_ssize_t n,
           int steal)
{
    if (kind == b->tuple_kind) {
        PyObject *tuple = PyTuple_New(n);
        if (tuple == NULL) {
            goto fail;
        }
        for (Py_ssize_t i = 0; i < n; i++) {
            PyTuple_SET_ITEM(tuple, i, steal ? items[i] : Py_NewRef(items[i]));
        }
        return tuple;
    }
    if (kind == b->dict_kind && PyTuple_CheckExact(aux) && PyTuple_GET_SIZE(aux) == 2 &&
        PyTuple_CheckExact(PyTuple_GET_ITEM(aux, 0)) &&
        (PyTuple_GET_ITEM(aux, 1) == Py_None || PyTuple_CheckExact(PyTuple_GET_ITEM(aux, 1)))) {
        /* the dict kind's unflatten in C, without a Python call per dict */
        PyObject *d = build_dict(PyTuple_GET_ITEM(aux, 0), PyTuple_GET_ITEM(aux, 1), items, n);
        if (steal) {
            build_release(items, n);
        }
        return d;
    }
    PyObject *list = PyList_New(n);
    if (list == NULL) {
        goto fail;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyList_SET_ITEM(list, i, steal ? items[i] : Py_NewRef(items[i]));
    }
    if (kind == b->list_kind) {
        return list;
    }
    PyObject *argv[3] = {kind, aux, list}; /* kind.<unflatten_name>(aux, list) */
    PyObject *node = PyObject_VectorcallMethod(b->unflatten_name, argv, 3, NULL);
    Py_DECREF(list);
    return node;
fail:
    if (steal) {
        build_release(items, n);
    }
    return NULL;
}

/* The tree of the checked records: one pass, the open nodes on b->open, their
   children so far on b->values. */
static PyObject *
build_tree(Build *b, Py_ssize_t nrecords)
{
    Py_ssize_t pos = 0; /* the next leaf */
    Py_ssize_t top = 0; /* the open nodes */
    Py_ssize_t sp = 0;  /* the values held */
    for (Py_ssize_t j = 0; j < nrecords; j++) {
        PyObject *record = PyTuple_GET_ITEM(b->records, j);
        PyObject *mask = RECORD_MASK(record);
        Py_ssize_t n = b->ns[j];
        if (mask != Py_None) { /* a node with node children: open it */
            b->open[top].record = j;
            b->open[top].base = sp;
            top++;
            for (Py_ssize_t i = 0; mask != Py_True && PyTuple_GET_ITEM(mask, i) == Py_False;
                 i++) {
                b->values[sp++] = Py_NewRef(b->leaves[pos++]);
            }
            continue;
        }
        /* a node whose children are all leaves: built from the leaves in place */
        PyObject *value =
            build_node(b, RECORD_KIND(record), RECORD_AUX(record), b->leaves + pos, n, 0);
        pos += n;
        while (value != NULL) { /* attach value to the open node; close those it completes */
            if (top == 0) {
                return value; /* the root: the last record, by build_check */
            }
            b->values[sp++] = value;
            Open *node = &b->open[top - 1];
            PyObject *parent = PyTuple_GET_ITEM(b->records, node->record);
            PyObject *pmask = RECORD_MASK(parent);
            Py_ssize_t pn = b->ns[node->record];
            Py_ssize_t i = sp - node->base;
            while (i < pn && pmask != Py_True && PyTuple_GET_ITEM(pmask, i) == Py_False) {
                b->values[sp++] = Py_NewRef(b->leaves[pos++]);
                i++;
            }
            if (i < pn) {
                break;
            }
            top--;
            sp = node->base; /* its children, stolen by build_node */
            value = build_node(b, RECORD_KIND(parent), RECORD_AUX(parent), b->values + sp, pn,
                               1);
        }
        if (value == NULL) {
            build_release(b->values, sp);
            return NULL;
        }
    }
    PyErr_SetString(PyExc_SystemError, "build: records checked but left open");
    build_release(b->values, sp);
    return NULL;
}

PyObject *
speedups_build(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3) {
        PyErr_Format(PyExc_TypeError, "build() takes 3 arguments (%zd given)", nargs);
        return NULL;
    }
    PyObject *records = args[0], *leaves = args[1], *context = args[2];
    PyObject *dict_unflatten, *plain;
    Build b = {.records = records};
    if (!PyTuple_Check(context) ||
        !PyArg_ParseTuple(context, "OOOOOU:build context", &b.tuple_kind, &b.list_kind,
                          &b.dict_kind, &dict_unflatten, &plain, &b.unflatten_name)) {
        if (!PyErr_Occurred()) {
            PyErr_SetString(PyExc_TypeError, "build: context must be a tuple");
        }
        return NULL;
    }
    if (!PyTuple_CheckExact(records) || !(PyList_CheckExact(leaves) || PyTuple_CheckExact(leaves))) {
        return PyObject_CallFunctionObjArgs(plain, records, leaves, NULL);
    }
    Py_ssize_t nrecords = PyTuple_GET_SIZE(records);
    if (nrecords == 0) {
        return PySequence_GetItem(leaves, 0); /* a leaf: leaves[0] */
    }
    ModuleState *state = PyModule_GetState(module);
    PyObject *current = PyObject_GetAttr(b.dict_kind, b.unflatten_name);
    if (current == NULL) {
        return NULL;
    }
    if (current != dict_unflatten) {
        b.dict_kind = NULL; /* replaced: called as any kind's */
    }
    Py_DECREF(current);
    Py_ssize_t nleaves = PySequence_Fast_GET_SIZE(leaves);
    int copying = PyList_CheckExact(leaves);
    if (nleaves > PY_SSIZE_T_MAX / 64 || nrecords > PY_SSIZE_T_MAX / 64) {
        return PyErr_NoMemory(); /* no tree this large fits in memory */
    }
    /* the block: ns, open, values (room for every leaf and node), then the copy */
    size_t ns_size = (size_t)nrecords * sizeof(Py_ssize_t);
    size_t open_size = (size_t)nrecords * sizeof(Open);
    size_t values_size = (size_t)(nleaves + nrecords) * sizeof(PyObject *);
    size_t copy_size = copying ? (size_t)nleaves * sizeof(PyObject *) : 0;
    Scratch block = scratch_take(state, ns_size + open_size + values_size + copy_size);
    if (block.mem == NULL) {
        return NULL;
    }
    char *mem = block.mem;
    b.ns = (Py_ssize_t *)mem;
    b.open = (Open *)(mem + ns_size);
    b.values = (PyObject **)(mem + ns_size + open_size);
    PyObject *tree;
    int checked = build_check(&b, nrecords, nleaves);
    if (checked <= 0) {
        scratch_put(state, block);
        return checked == 0 ? PyObject_CallFunctionObjArgs(plain, records, leaves, NULL) : NULL;
    }
    if (copying) {
        PyObject **copy = (PyObject **)(mem + ns_size + open_size + values_size);
        for (Py_ssize_t i = 0; i < nleaves; i++) {
            copy[i] = Py_NewRef(PyList_GET_ITEM(leaves, i)); /* no Python code runs */
        }
        b.leaves = copy;
        tree = build_tree(&b, nrecords);
        build_release(copy, nleaves);
    }
    else {
        Py_INCREF(leaves); /* the tuple's items are the leaves while it lives */
        b.leaves = PySequence_Fast_ITEMS(leaves);
        tree = build_tree(&b, nrecords);
        Py_DECREF(leaves);
    }
    /* the releases may have run a nested build, which took a block of its own */
    scratch_put(state, block);
    return tree;
}
