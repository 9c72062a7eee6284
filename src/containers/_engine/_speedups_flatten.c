#include "_speedups.h"
#include "../_sorted_keys.h"

/* --- flatten's sharing check: `flatten(x, kind, leaf_types, records, context, immutable)`

   With a sixth argument, `immutable` (the set of value leaf types, IMMUTABLE_LEAVES),
   flatten returns `(leaves, once)`: once is True when no value that fmap's identity
   cache keeps (a node whose kind is `mutable`, a leaf whose type is not in immutable)
   was met twice, so that the records rebuilt with `f` of each leaf are `fmap(f, x)`:
   the executor maps' one walk (`_parallel`, benchmarks/parallel.py, light). Sharing
   holds by construction: every such value's address goes in a table of its own,
   which holds no reference, so an address met twice is a value met twice or one freed
   while Python code ran and another made at its address: both say False, never a
   wrong True. A subtree handed to `deep` is not looked at: False. Plain twin:
   `_flat.flatten_once`. */
typedef struct {
    int once;                 /* no address met twice so far */
    uintptr_t *slots;         /* the addresses met (0: an empty slot), open addressing */
    size_t mask;              /* the number of slots - 1 */
    size_t used;              /* the addresses stored */
    PyObject *immutable;      /* set: the value leaf types */
    PyTypeObject *value_type; /* the last leaf type found in immutable, or NULL */
    PyObject *kind;           /* the last node kind asked for `mutable` (owned), or NULL */
    int kind_mutable;         /* its answer */
} Seen;

/* Store key in slots (mask + 1 of them, a power of two): 1 if stored, 0 if there. */
static inline int
seen_put(uintptr_t *slots, size_t mask, uintptr_t key)
{
    uint64_t h = (uint64_t)key * 0x9E3779B97F4A7C15ull;
    size_t i = (size_t)(h ^ (h >> 32)) & mask;
    while (slots[i] != 0) {
        if (slots[i] == key) {
            return 0;
        }
        i = (i + 1) & mask;
    }
    slots[i] = key;
    return 1;
}

/* Note x's address (once becomes 0 if it is there already); -1 on a memory error. */
static int
seen_add(Seen *s, PyObject *x)
{
    if (s->slots == NULL || 2 * (s->used + 1) > s->mask + 1) {
        size_t size = s->slots == NULL ? 64 : 2 * (s->mask + 1);
        uintptr_t *slots = PyMem_Calloc(size, sizeof *slots);
        if (slots == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        for (size_t i = 0; s->slots != NULL && i <= s->mask; i++) {
            if (s->slots[i] != 0) {
                seen_put(slots, size - 1, s->slots[i]);
            }
        }
        PyMem_Free(s->slots);
        s->slots = slots;
        s->mask = size - 1;
    }
    if (seen_put(s->slots, s->mask, (uintptr_t)x)) {
        s->used++;
    }
    else {
        s->once = 0;
    }
    return 0;
}

/* The node x of kind (NULL: unknown, counted as mutable): noted if its kind is
   mutable (a list always, a tuple never, another kind by its `mutable`). */
static int
seen_node(Seen *s, PyObject *x, PyObject *kind, PyObject *tuple_kind, PyObject *list_kind)
{
    if (!s->once || kind == tuple_kind) {
        return 0;
    }
    if (kind != NULL && kind != list_kind) {
        if (kind != s->kind) {
            Py_INCREF(kind);
            /* a slot of NodeKind: reading it runs no Python code (no flat_forget) */
            PyObject *flag = PyObject_GetAttrString(kind, "mutable");
            int mutable_ = flag == NULL ? -1 : PyObject_IsTrue(flag);
            Py_XDECREF(flag);
            Py_XSETREF(s->kind, kind); /* the reference taken above */
            if (mutable_ < 0) {
                Py_CLEAR(s->kind);
                return -1;
            }
            s->kind_mutable = mutable_;
        }
        if (!s->kind_mutable) {
            return 0;
        }
    }
    return seen_add(s, x);
}

/* Every leaf whose type is not in immutable, noted. */
static int
seen_leaves(Seen *s, PyObject *leaves)
{
    for (Py_ssize_t i = 0; s->once && i < PyList_GET_SIZE(leaves); i++) {
        PyObject *leaf = PyList_GET_ITEM(leaves, i);
        PyTypeObject *type = Py_TYPE(leaf);
        if (type == s->value_type) {
            continue;
        }
        Py_INCREF(leaf);
        int value = PySet_Contains(s->immutable, (PyObject *)type);
        int r = value < 0 ? -1 : value ? 0 : seen_add(s, leaf);
        if (value > 0 && Py_IS_TYPE(type, &PyType_Type)) {
            s->value_type = type; /* (as flat_is_leaf_type keeps its answers) */
        }
        Py_DECREF(leaf);
        if (r < 0) {
            return -1;
        }
    }
    return 0;
}

/* --- flatten: flatten's recursive walk ---------------------------------------------

   `flatten(x, kind, leaf_types, records, context)` is `_flat.flatten_fast` in C, its
   plain twin (used whenever this module is missing or CONTAINERS_PURE_PYTHON is set):
   the leaves of x, as a new list, and its pre-order records `(kind, aux, n, mask)`
   appended to `records` unless it is None (`leaves`, which builds none). It makes the
   same calls in the same order as the Python function, so that even a node's
   `flatten` with side effects sees no difference: a child is a leaf if its exact type
   is in leaf_types, else a node of the kind `kinds[type(child)]`, else of the kind
   `kind_of(child)` returns (None: a leaf). A tuple or list is walked here; every other
   node is taken apart by its kind's attribute named by the context's last item
   (`flatten`, or `flatten_snapshot` for a Structure's records).

   Speed (benchmarks/run.py, W1f and W5): the Python walk spends most of its time on
   the bytecode of its type tests, appends and record tuples; here each leaf costs one
   set lookup and one append.

   `context` is `_flat.C_CONTEXT`, what does not change between calls:
   (kinds, kind_of, tuple_kind, list_kind, dict_kind, deep, run, min_run, max_depth,
   flatten_name);
   `_flat.C_SNAPSHOT_CONTEXT` is the same for a Structure's records.
   `deep(x, leaves, records, leaf_types)` is the plain walk, for a node past max_depth
   (or where the thread's stack runs low): the C recursion stays under max_depth levels
   of a few hundred bytes each, and depth is unlimited. A cycle goes there too, and
   the plain walk reports it. `run(kind, aux, kids, leaf_types, leaves, records)` is
   `_flat._flatten_run`, for a node of at least min_run children that are nodes of one
   kind with leaf children only (a list of layers); it returns whether it took them.

   Python code runs inside (a kind's `flatten`, `kind_of`, `deep`, `run`), and may
   change a list being walked, as it may in the Python walk: the loops re-read a list's
   length at each step and hold each child while they use it, as a Python `for`
   does, and a node's record reads the length when it is made. */

/* One call's values: borrowed from the call's arguments, which outlive it; and the
   answers of the last leaf-type tests. */
typedef struct {
    PyObject *leaves;     /* the new list of leaves */
    PyObject *records;    /* list, or NULL for `leaves` */
    PyObject *leaf_types; /* set */
    PyObject *kinds;      /* dict: exact type -> NodeKind */
    PyObject *kind_of;
    PyObject *tuple_kind;
    PyObject *list_kind;
    PyObject *dict_kind;
    PyObject *deep;
    PyObject *run;
    PyObject *flatten_name; /* "flatten" or "flatten_snapshot": the context's last item */
    int snapshot;           /* whether it is "flatten_snapshot" */
    Py_ssize_t min_run;
    Py_ssize_t max_depth;
    PyTypeObject *leaf_type; /* the last type found in leaf_types, or NULL */
    PyTypeObject *node_type; /* the last type found not in it, or NULL */
    size_t ran;              /* counts the calls into Python code (flat_forget) */
    PyObject *recent[3];     /* the last record made of a tuple, of a list, of another
                                kind (owned, or NULL): flat_record */
    Seen *seen;              /* the sharing check, or NULL */
} Flat;

static int flat_node(Flat *w, PyObject *x, PyObject *kind, Py_ssize_t depth);

/* 1 if x's exact type is in leaf_types, 0 if not, -1 on error.

   A set lookup costs about 100 instructions, as much as the rest of a leaf's walk
   (benchmarks/instructions.py, W1f and W5), and most trees repeat one leaf type and
   one node type: the last answer for each is kept. It stays true only while no Python
   code runs, since Python code may register a leaf type: `flat_forget` drops both
   after every call that may run some. A type whose metaclass is not `type` is never
   kept, since hashing it may itself run Python code. (A finalizer the garbage
   collector runs may run at any allocation, here or in the Python walk, at different
   points: what it registers is seen from some point on in either, never exactly.) */
static inline int
flat_is_leaf_type(Flat *w, PyObject *x)
{
    PyTypeObject *type = Py_TYPE(x);
    if (type == w->leaf_type) {
        return 1;
    }
    if (type == w->node_type) {
        return 0;
    }
    int leaf = PySet_Contains(w->leaf_types, (PyObject *)type);
    if (leaf >= 0 && Py_IS_TYPE(type, &PyType_Type)) {
        *(leaf ? &w->leaf_type : &w->node_type) = type;
    }
    return leaf;
}

/* After Python code may have run (a call, or the release of an object the tree does
   not hold): forget the leaf-type answers. */
static inline void
flat_forget(Flat *w)
{
    w->leaf_type = w->node_type = NULL;
    w->ran++;
}

/* x's node kind (a new reference), Py_None (new) if x is a leaf by `kind_of`, NULL on
   error: `KINDS.get(type(x)) or kind_of(x)`, for x whose type is no leaf type. */
static PyObject *
flat_kind(Flat *w, PyObject *x)
{
    PyObject *kind = PyDict_GetItemWithError(w->kinds, (PyObject *)Py_TYPE(x));
    if (kind != NULL) {
        Py_INCREF(kind); /* the walk below it may re-register the type */
        return kind;
    }
    if (PyErr_Occurred()) {
        return NULL;
    }
    kind = PyObject_CallOneArg(w->kind_of, x);
    flat_forget(w);
    return kind;
}

/* Whether record is (kind, aux, n, mask) with the same objects but n. */
static int
flat_same_record(PyObject *record, PyObject *kind, PyObject *aux, Py_ssize_t n,
                 PyObject *mask)
{
    return record != NULL && PyTuple_GET_ITEM(record, 0) == kind &&
           PyTuple_GET_ITEM(record, 1) == aux && PyTuple_GET_ITEM(record, 3) == mask &&
           PyLong_AsSsize_t(PyTuple_GET_ITEM(record, 2)) == n; /* n fit when it was made */
}

/* Append the record (kind, aux, n, mask) to records, or store it at slot if slot >= 0
   (IndexError if Python code shortened records, as `records[slot] = ...` raises).

   A record of the same objects as the last one made for a node of the same sort (a
   tuple, a list, another kind) is that record again: the tuples of a tree of many
   small nodes, such as 25,000 `(TUPLE, None, 4, None)` in a 100,000-leaf tree, are
   mostly equal, and making each anew was a third of flatten's time and most of a
   Structure's memory (benchmarks/run.py, W1f and W1). Records are tuples of the same
   objects either way, so they compare, hash and pickle as the plain walk's do. */
static int
flat_record(Flat *w, Py_ssize_t slot, PyObject *kind, PyObject *aux, Py_ssize_t n,
            PyObject *mask)
{
    PyObject **recent =
        &w->recent[kind == w->tuple_kind ? 0 : kind == w->list_kind ? 1 : 2];
    PyObject *record;
    if (flat_same_record(*recent, kind, aux, n, mask)) {
        record = Py_NewRef(*recent);
    }
    else {
        PyObject *count = PyLong_FromSsize_t(n);
        if (count == NULL) {
            return -1;
        }
        record = PyTuple_Pack(4, kind, aux, count, mask);
        Py_DECREF(count);
        if (record == NULL) {
            return -1;
        }
        Py_XSETREF(*recent, Py_NewRef(record));
    }
    if (slot < 0) {
        int r = PyList_Append(w->records, record);
        Py_DECREF(record);
        return r;
    }
    return PyList_SetItem(w->records, slot, record); /* steals record */
}

/* `kids, aux = kind.flatten(x)` (or `kind.flatten_snapshot(x)`), with kids made an exact list or tuple (a list of its
   items, for any other sized iterable); -1 on error, as the unpacking raises. */
static int
flat_split(Flat *w, PyObject *x, PyObject *kind, PyObject **kids, PyObject **aux)
{
    PyObject *flatten = PyObject_GetAttr(kind, w->flatten_name);
    if (flatten == NULL) {
        return -1;
    }
    PyObject *pair = PyObject_CallOneArg(flatten, x);
    Py_DECREF(flatten);
    flat_forget(w); /* also for what follows: iterating kids, releasing pair */
    if (pair == NULL) {
        return -1;
    }
    if (Py_TYPE(pair)->tp_iter == NULL && !PySequence_Check(pair)) {
        PyErr_Format(PyExc_TypeError, "cannot unpack non-iterable %.200s object",
                     Py_TYPE(pair)->tp_name); /* as the interpreter says it */
        Py_DECREF(pair);
        return -1;
    }
    PyObject *items = PySequence_Tuple(pair); /* pair itself when it is a tuple */
    Py_DECREF(pair);
    if (items == NULL) {
        return -1;
    }
    if (PyTuple_GET_SIZE(items) != 2) {
        if (PyTuple_GET_SIZE(items) < 2) {
            PyErr_Format(PyExc_ValueError,
                         "not enough values to unpack (expected 2, got %zd)",
                         PyTuple_GET_SIZE(items));
        }
        else {
            PyErr_SetString(PyExc_ValueError, "too many values to unpack (expected 2)");
        }
        Py_DECREF(items);
        return -1;
    }
    *kids = PyTuple_GET_ITEM(items, 0);
    *aux = PyTuple_GET_ITEM(items, 1);
    if (PyList_CheckExact(*kids) || PyTuple_CheckExact(*kids)) {
        Py_INCREF(*kids);
    }
    else {
        /* iterated, then measured, as the Python walk does: an iterator is no sequence
           of children, and raises TypeError there too */
        PyObject *list = PySequence_List(*kids);
        if (list == NULL || PyObject_Size(*kids) < 0) {
            Py_XDECREF(list);
            Py_DECREF(items);
            return -1;
        }
        *kids = list;
    }
    Py_INCREF(*aux);
    Py_DECREF(items);
    return 0;
}

/* 1 if every child in kids (an exact list or tuple) has a leaf type, 0 if not. */
static int
flat_all_leaves(Flat *w, PyObject *kids)
{
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(kids); i++) {
        int leaf = flat_is_leaf_type(w, PySequence_Fast_GET_ITEM(kids, i));
        if (leaf <= 0) {
            return leaf;
        }
    }
    return 1;
}

/* `leaves.extend(kids)`: appended one by one, which costs half of PyList_SetSlice's
   setup for the usual few children (benchmarks/instructions.py, W5). */
static int
flat_extend(Flat *w, PyObject *kids)
{
    Py_ssize_t n = PySequence_Fast_GET_SIZE(kids);
    for (Py_ssize_t i = 0; i < n; i++) {
        if (PyList_Append(w->leaves, PySequence_Fast_GET_ITEM(kids, i)) < 0) {
            return -1;
        }
    }
    return 0;
}

/* The declared container kind k's children names, when `_flat._flatten_run` reads
   its nodes by their fields (a spec, more than one child, and no kept field to
   snapshot into records): a new reference to the tuple, Py_None (new) if not, NULL on
   error. *keep is set to a new reference to the kept field names when records want
   them (else NULL). Reads slots of the kind and its spec only: no Python code runs. */
static PyObject *
flat_run_fields(Flat *w, PyObject *k, PyObject **keep)
{
    *keep = NULL;
    PyObject *spec = PyObject_GetAttrString(k, "spec");
    if (spec == NULL || spec == Py_None) {
        return spec;
    }
    PyObject *names = PyObject_GetAttrString(spec, "children");
    PyObject *kept = names == NULL ? NULL : PyObject_GetAttrString(spec, "keep");
    Py_DECREF(spec);
    if (kept == NULL) {
        Py_XDECREF(names);
        return NULL;
    }
    if (!PyTuple_CheckExact(names) || PyTuple_GET_SIZE(names) <= 1 ||
        !PyTuple_CheckExact(kept) ||
        (PyTuple_GET_SIZE(kept) && w->records != NULL && w->snapshot)) {
        Py_DECREF(names);
        Py_DECREF(kept);
        Py_RETURN_NONE;
    }
    if (PyTuple_GET_SIZE(kept) && w->records != NULL) {
        *keep = kept;
    }
    else {
        Py_DECREF(kept);
    }
    return names;
}

/* Read the attributes `names` of each of kids into values, node by node, as
   attrgetter(*names) reads them: 1 if read, 0 at an unset one (an AttributeError,
   cleared: the node-by-node walk names it), -1 on another error. */
static int
flat_read_fields(Flat *w, PyObject *kids, PyObject *names, PyObject *values)
{
    Py_ssize_t m = PyTuple_GET_SIZE(names);
    for (Py_ssize_t n = 0; n < PySequence_Fast_GET_SIZE(kids); n++) {
        PyObject *kid = Py_NewRef(PySequence_Fast_GET_ITEM(kids, n));
        for (Py_ssize_t j = 0; j < m; j++) {
            PyObject *value = PyObject_GetAttr(kid, PyTuple_GET_ITEM(names, j));
            if (value == NULL || PyList_Append(values, value) < 0) {
                Py_XDECREF(value);
                Py_DECREF(kid);
                flat_forget(w);
                if (PyErr_ExceptionMatches(PyExc_AttributeError)) {
                    PyErr_Clear();
                    return 0;
                }
                return -1;
            }
            Py_DECREF(value);
        }
        Py_DECREF(kid);
    }
    flat_forget(w); /* an attribute read may run Python code (a property) */
    return 1;
}

/* Append the records of a run's n nodes of kind k, m children each: (k, aux, m, None),
   aux the node's kept values read into kept (q per node), or () without keep. A node
   whose kept values are the previous node's objects gets the previous record object:
   records are compared by value (the Python run makes equal tuples). */
static int
flat_run_records(Flat *w, PyObject *k, Py_ssize_t n, Py_ssize_t m, PyObject *keep,
                 PyObject *kept)
{
    Py_ssize_t q = keep == NULL ? 0 : PyTuple_GET_SIZE(keep);
    PyObject *size = PyLong_FromSsize_t(m);
    if (size == NULL) {
        return -1;
    }
    PyObject *node = NULL; /* the last record made */
    PyObject **last = NULL;
    int r = 0;
    for (Py_ssize_t i = 0; r == 0 && i < n; i++) {
        PyObject **vals = q ? &PyList_GET_ITEM(kept, i * q) : NULL;
        int same = node != NULL;
        for (Py_ssize_t j = 0; same && j < q; j++) {
            same = vals[j] == last[j];
        }
        if (!same) {
            PyObject *aux = PyTuple_New(q);
            for (Py_ssize_t j = 0; aux != NULL && j < q; j++) {
                PyTuple_SET_ITEM(aux, j, Py_NewRef(vals[j]));
            }
            Py_XDECREF(node);
            node = aux == NULL ? NULL : PyTuple_Pack(4, k, aux, size, Py_None);
            Py_XDECREF(aux);
            last = vals;
        }
        if (node == NULL || PyList_Append(w->records, node) < 0) {
            r = -1;
        }
    }
    Py_XDECREF(node);
    Py_DECREF(size);
    return r;
}

/* `_flat._flatten_run` in C for a list of layers read by their fields (flat_run_fields
   gave names, and keep where records want kept values): the same calls in the same
   order (the kind's flatten of the first node, then each node's fields read as
   attrgetter reads them, then its kept fields), the same answers (0, having appended
   nothing, where it returns False) and the same records and leaves appended. Saves the
   Python run's passes over the nodes and their fields (benchmarks/split.py: half of a
   list of layers' flatten; benchmarks/serialization.py, the classes tree's template
   in load(like=)). */
static int
flat_run_read(Flat *w, PyObject *kind, PyObject *aux, PyObject *kids, PyObject *k,
              PyObject *names, PyObject *keep)
{
    PyObject *first = PySequence_Fast_GET_ITEM(kids, 0);
    PyTypeObject *t = Py_TYPE(first);
    Py_INCREF(first);
    PyObject *head = PyObject_CallMethodOneArg(k, w->flatten_name, first);
    Py_DECREF(first);
    flat_forget(w);
    if (head == NULL) {
        return -1;
    }
    /* leaf_types.issuperset(map(type, head[0])) */
    PyObject *head_kids = PySequence_GetItem(head, 0);
    Py_DECREF(head);
    PyObject *fast = head_kids == NULL ? NULL : PySequence_Fast(head_kids, "flatten");
    Py_XDECREF(head_kids);
    if (fast == NULL) {
        return -1;
    }
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(fast); i++) {
        int leaf = flat_is_leaf_type(w, PySequence_Fast_GET_ITEM(fast, i));
        if (leaf <= 0) {
            Py_DECREF(fast);
            return leaf;
        }
    }
    Py_DECREF(fast);
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(kids); i++) {
        if (Py_TYPE(PySequence_Fast_GET_ITEM(kids, i)) != t) {
            return 0;
        }
    }
    PyObject *values = PyList_New(0);
    PyObject *kept = keep == NULL || values == NULL ? NULL : PyList_New(0);
    if (values == NULL || (keep != NULL && kept == NULL)) {
        Py_XDECREF(values);
        return -1;
    }
    int r = flat_read_fields(w, kids, names, values);
    if (r > 0 && keep != NULL) {
        r = flat_read_fields(w, kids, keep, kept);
    }
    for (Py_ssize_t i = 0; r > 0 && i < PyList_GET_SIZE(values); i++) {
        r = flat_is_leaf_type(w, PyList_GET_ITEM(values, i));
    }
    if (r > 0 && w->records != NULL) {
        /* as the Python run: the node's length now, a record per node read (a
           property may have changed the list meanwhile: zip stops at the shorter) */
        Py_ssize_t m = PyTuple_GET_SIZE(names);
        Py_ssize_t n = PyList_GET_SIZE(values) / m;
        if (keep != NULL && PyList_GET_SIZE(kept) / PyTuple_GET_SIZE(keep) < n) {
            n = PyList_GET_SIZE(kept) / PyTuple_GET_SIZE(keep);
        }
        PyObject *record = Py_BuildValue("(OOnO)", kind, aux, PySequence_Fast_GET_SIZE(kids),
                                         Py_True);
        if (record == NULL || PyList_Append(w->records, record) < 0 ||
            flat_run_records(w, k, n, m, keep, kept) < 0) {
            r = -1;
        }
        Py_XDECREF(record);
    }
    if (r > 0) {
        Py_ssize_t at = PyList_GET_SIZE(w->leaves);
        r = PyList_SetSlice(w->leaves, at, at, values) < 0 ? -1 : 1;
    }
    Py_DECREF(values);
    Py_XDECREF(kept);
    return r;
}

/* 1 if run took a node's children (a list of layers), 0 if not, -1 on error. The
   test before the call is the first one run makes, which has no side effect: most
   nodes (a list of tuples) are not a run, and pay no call. */
static int
flat_try_run(Flat *w, PyObject *kind, PyObject *aux, PyObject *kids)
{
    PyObject *first = PySequence_Fast_GET_ITEM(kids, 0);
    PyObject *k = PyDict_GetItemWithError(w->kinds, (PyObject *)Py_TYPE(first));
    if (k == NULL) {
        return PyErr_Occurred() ? -1 : 0;
    }
    if (k == w->tuple_kind || k == w->list_kind || k == w->dict_kind) {
        return 0; /* flat_node takes them apart in C */
    }
    int leaf = flat_is_leaf_type(w, first);
    if (leaf != 0) {
        return leaf < 0 ? -1 : 0;
    }
    PyObject *keep;
    PyObject *names = flat_run_fields(w, k, &keep);
    if (names == NULL) {
        return -1;
    }
    int r;
    if (names != Py_None) {
        Py_INCREF(k); /* Python code runs: the registry may drop the kind */
        r = flat_run_read(w, kind, aux, kids, k, names, keep);
        Py_DECREF(k);
        Py_XDECREF(keep);
    }
    else {
        PyObject *records = w->records ? w->records : Py_None;
        PyObject *argv[6] = {kind, aux, kids, w->leaf_types, w->leaves, records};
        PyObject *took = PyObject_Vectorcall(w->run, argv, 6, NULL);
        flat_forget(w);
        if (took == NULL) {
            Py_DECREF(names);
            return -1;
        }
        r = PyObject_IsTrue(took);
        Py_DECREF(took);
    }
    Py_DECREF(names);
    for (Py_ssize_t i = 0; r > 0 && w->seen && i < PySequence_Fast_GET_SIZE(kids); i++) {
        PyObject *kid = PySequence_Fast_GET_ITEM(kids, i); /* a node it took */
        PyObject *kid_kind = PyDict_GetItemWithError(w->kinds, (PyObject *)Py_TYPE(kid));
        Py_XINCREF(kid_kind);
        if ((kid_kind == NULL && PyErr_Occurred()) ||
            seen_node(w->seen, kid, kid_kind, w->tuple_kind, w->list_kind) < 0) {
            r = -1;
        }
        Py_XDECREF(kid_kind);
    }
    return r;
}

/* The mask of a node mixing leaf and node children, read again from kids when the
   record is made, as the Python walk does: a tuple of bools. */
static PyObject *
flat_mask(Flat *w, PyObject *kids)
{
    PyObject *mask = PyList_New(0);
    for (Py_ssize_t i = 0; mask != NULL && i < PySequence_Fast_GET_SIZE(kids); i++) {
        PyObject *kid = PySequence_Fast_GET_ITEM(kids, i);
        Py_INCREF(kid);
        int node = flat_is_leaf_type(w, kid);
        if (node == 0) {
            PyObject *kind = flat_kind(w, kid);
            node = kind == NULL ? -1 : kind != Py_None;
            Py_XDECREF(kind);
        }
        else if (node == 1) {
            node = 0;
        }
        Py_DECREF(kid);
        flat_forget(w); /* (as in flat_children) a mixed node is rare: no count kept */
        if (node < 0 || PyList_Append(mask, node ? Py_True : Py_False) < 0) {
            Py_CLEAR(mask);
        }
    }
    if (mask == NULL) {
        return NULL;
    }
    Py_SETREF(mask, PyList_AsTuple(mask));
    return mask;
}

/* One child of a node at depth: appended if a leaf, walked if a node (counted in
   *nodes); -1 on error. */
static int
flat_child(Flat *w, PyObject *kid, Py_ssize_t depth, Py_ssize_t *nodes)
{
    int leaf = flat_is_leaf_type(w, kid);
    if (leaf != 0) {
        return leaf < 0 ? -1 : PyList_Append(w->leaves, kid);
    }
    if (PyTuple_CheckExact(kid) || PyList_CheckExact(kid)) {
        /* (the Python walk tests a tuple or list of leaves inline: the same records) */
        ++*nodes;
        return flat_node(w, kid, PyTuple_CheckExact(kid) ? w->tuple_kind : w->list_kind,
                         depth + 1);
    }
    PyObject *kind = flat_kind(w, kid);
    if (kind == NULL) {
        return -1;
    }
    int r;
    if (kind == Py_None) {
        r = PyList_Append(w->leaves, kid);
    }
    else {
        ++*nodes;
        r = flat_node(w, kid, kind, depth + 1);
    }
    Py_DECREF(kind);
    return r;
}

/* The node x of kind, taken apart into kids and aux, at depth. */
static int
flat_children(Flat *w, PyObject *x, PyObject *kind, PyObject *kids, PyObject *aux,
              Py_ssize_t depth)
{
    int all = flat_all_leaves(w, kids);
    if (all != 0) {
        /* all children leaves: one extend, one record (benchmarks/run.py, W1, W5) */
        if (all < 0 || flat_extend(w, kids) < 0) {
            return -1;
        }
        return w->records == NULL
                   ? 0
                   : flat_record(w, -1, kind, aux, PySequence_Fast_GET_SIZE(kids), Py_None);
    }
    if (depth > w->max_depth || stack_is_low()) {
        if (w->seen != NULL) {
            w->seen->once = 0; /* the plain walk's nodes are not looked at */
        }
        PyObject *records = w->records ? w->records : Py_None;
        PyObject *argv[4] = {x, w->leaves, records, w->leaf_types};
        PyObject *r = PyObject_Vectorcall(w->deep, argv, 4, NULL);
        Py_XDECREF(r);
        flat_forget(w);
        return r == NULL ? -1 : 0;
    }
    if (PySequence_Fast_GET_SIZE(kids) >= w->min_run && PySequence_Fast_GET_SIZE(kids) > 0) {
        int took = flat_try_run(w, kind, aux, kids);
        if (took != 0) {
            return took < 0 ? -1 : 0;
        }
    }
    Py_ssize_t slot = -1, nodes = 0; /* the record's place, filled when the node is left */
    if (w->records != NULL) {
        slot = PyList_GET_SIZE(w->records);
        if (PyList_Append(w->records, Py_None) < 0) {
            return -1;
        }
    }
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(kids); i++) {
        PyObject *kid = PySequence_Fast_GET_ITEM(kids, i);
        size_t ran = w->ran;
        Py_INCREF(kid);
        int r = flat_child(w, kid, depth, &nodes);
        Py_DECREF(kid);
        if (w->ran != ran) {
            flat_forget(w); /* Python code may have taken kid out of kids: released */
        }
        if (r < 0) {
            return -1;
        }
    }
    if (w->records == NULL) {
        return 0;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(kids);
    if (nodes == 0 || nodes == n) {
        return flat_record(w, slot, kind, aux, n, nodes ? Py_True : Py_None);
    }
    PyObject *mask = flat_mask(w, kids);
    if (mask == NULL) {
        return -1;
    }
    int r = flat_record(w, slot, kind, aux, PySequence_Fast_GET_SIZE(kids), mask);
    Py_DECREF(mask);
    return r;
}

/* flat_dict_split for a dict whose keys, all exact strs, were inserted in sorted
   order (a dict built from sorted keys, or read from a file): its keys as aux's tuple
   and its values as kids, made in one pass over the dict, 0; 1 with nothing made when
   a key is not an exact str or not greater than the one before (then sorting decides);
   -1 on error. The same kids and aux as sorting them: exact strs compare in C
   (PyUnicode_Compare is `<` on strs), and no Python code runs. Copying, sorting and
   comparing the keys' list cost a 100-key dict more than its values' walk (a template's
   flatten in load(like=), benchmarks/serialization.py, "many"). */
static int
flat_dict_sorted(PyObject *x, PyObject **kids, PyObject **aux)
{
    Py_ssize_t n = PyDict_GET_SIZE(x);
    PyObject *keys = PyTuple_New(n);
    PyObject *values = keys == NULL ? NULL : PyList_New(n);
    if (values == NULL) {
        Py_XDECREF(keys);
        return -1;
    }
    Py_ssize_t pos = 0, i = 0;
    PyObject *key, *value, *prev = NULL;
    while (i < n && PyDict_Next(x, &pos, &key, &value)) {
        if (!PyUnicode_CheckExact(key) || (prev != NULL && PyUnicode_Compare(prev, key) >= 0)) {
            break;
        }
        PyTuple_SET_ITEM(keys, i, Py_NewRef(key));
        PyList_SET_ITEM(values, i, Py_NewRef(value));
        prev = key;
        i++;
    }
    if (i < n) { /* the unset items are NULL: the tuple and the list release the rest */
        Py_DECREF(keys);
        Py_DECREF(values);
        return 1;
    }
    *aux = PyTuple_Pack(2, keys, Py_None);
    Py_DECREF(keys);
    if (*aux == NULL) {
        Py_DECREF(values);
        return -1;
    }
    *kids = values;
    return 0;
}

/* DICT's flatten (`_kinds._dict_flatten`) of x, an exact dict whose keys are all exact
   strs (`sorted_str_keys`): kids and aux as it makes them (its values in sorted key
   order; aux `(sorted keys, None)`, or `(sorted keys, keys in insertion order)` when
   the two orders differ), 0; 1 with nothing made when a key is not an exact str (the
   kind's flatten decides); -1 on error. The Python flatten costs a 100-key dict about
   8 us: most of a template's flatten in load(like=) (benchmarks/serialization.py,
   "many"). */
static int
flat_dict_split(PyObject *x, PyObject **kids, PyObject **aux)
{
    int sorted = flat_dict_sorted(x, kids, aux);
    if (sorted != 1) {
        return sorted;
    }
    PyObject *keys, *order;
    int r = sorted_str_keys(x, &keys, &order);
    if (r != 0) {
        return r;
    }
    Py_ssize_t n = PyList_GET_SIZE(keys);
    int same = 1;
    for (Py_ssize_t i = 0; i < n && same; i++) {
        same = PyList_GET_ITEM(order, i) == PyList_GET_ITEM(keys, i);
    }
    PyObject *sorted_keys = PyList_AsTuple(order);
    PyObject *insertion = sorted_keys == NULL ? NULL
                          : same              ? Py_NewRef(Py_None)
                                              : PyList_AsTuple(keys);
    Py_DECREF(keys);
    *aux = insertion == NULL ? NULL : PyTuple_Pack(2, sorted_keys, insertion);
    Py_XDECREF(sorted_keys);
    Py_XDECREF(insertion);
    if (*aux == NULL) {
        Py_DECREF(order);
        return -1;
    }
    if (same) {
        Py_DECREF(order);
        *kids = PyDict_Values(x);
    }
    else { /* each key's place in order takes its value */
        for (Py_ssize_t i = 0; i < n; i++) {
            PyObject *key = PyList_GET_ITEM(order, i);
            PyObject *value = PyDict_GetItemWithError(x, key); /* borrowed */
            if (value == NULL) {
                if (!PyErr_Occurred()) {
                    PyErr_SetObject(PyExc_KeyError, key);
                }
                Py_CLEAR(order);
                break;
            }
            PyList_SET_ITEM(order, i, Py_NewRef(value));
            Py_DECREF(key); /* aux's tuple and the dict hold it */
        }
        *kids = order;
    }
    if (*kids == NULL) {
        Py_CLEAR(*aux);
        return -1;
    }
    return 0;
}

/* The node x of kind at depth: its leaves and records. */
static int
flat_node(Flat *w, PyObject *x, PyObject *kind, Py_ssize_t depth)
{
    if (w->seen != NULL && seen_node(w->seen, x, kind, w->tuple_kind, w->list_kind) < 0) {
        return -1;
    }
    PyObject *kids, *aux;
    int split = !((kind == w->tuple_kind || kind == w->list_kind) &&
                  (PyTuple_CheckExact(x) || PyList_CheckExact(x)));
    int by_kind = split;
    if (!split) {
        kids = Py_NewRef(x); /* held: Python code may drop x's last other reference */
        aux = Py_NewRef(Py_None);
    }
    else if (kind == w->dict_kind && PyDict_CheckExact(x) &&
             (by_kind = flat_dict_split(x, &kids, &aux)) < 0) {
        return -1;
    }
    if (by_kind > 0 && flat_split(w, x, kind, &kids, &aux) < 0) {
        return -1;
    }
    int r = flat_children(w, x, kind, kids, aux, depth);
    Py_DECREF(kids);
    Py_DECREF(aux);
    if (split) {
        flat_forget(w); /* kids and aux may have held the last references to objects */
    }
    return r;
}

PyObject *
speedups_flatten(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 5 && nargs != 6) {
        PyErr_Format(PyExc_TypeError, "flatten() takes 5 or 6 arguments (%zd given)", nargs);
        return NULL;
    }
    PyObject *x = args[0], *kind = args[1], *context = args[4];
    Flat w = {.leaf_types = args[2], .records = args[3] == Py_None ? NULL : args[3]};
    Seen seen = {.once = 1, .immutable = nargs == 6 ? args[5] : NULL};
    if (nargs == 6) {
        if (!PyAnySet_Check(seen.immutable)) {
            PyErr_SetString(PyExc_TypeError, "flatten: immutable must be a set");
            return NULL;
        }
        w.seen = &seen;
    }
    if (!PyAnySet_Check(w.leaf_types) || (w.records != NULL && !PyList_Check(w.records))) {
        PyErr_SetString(PyExc_TypeError,
                        "flatten(x, kind, leaf_types, records, context): leaf_types must "
                        "be a set, records a list or None");
        return NULL;
    }
    PyObject *min_run, *max_depth;
    if (!PyTuple_Check(context) ||
        !PyArg_ParseTuple(context, "O!OOOOOOO!O!U:flatten context", &PyDict_Type, &w.kinds,
                          &w.kind_of, &w.tuple_kind, &w.list_kind, &w.dict_kind, &w.deep,
                          &w.run,
                          &PyLong_Type, &min_run, &PyLong_Type, &max_depth,
                          &w.flatten_name)) {
        if (!PyErr_Occurred()) {
            PyErr_SetString(PyExc_TypeError, "flatten: context must be a tuple");
        }
        return NULL;
    }
    w.snapshot = PyUnicode_CompareWithASCIIString(w.flatten_name, "flatten_snapshot") == 0;
    w.min_run = PyLong_AsSsize_t(min_run);
    w.max_depth = PyLong_AsSsize_t(max_depth);
    if ((w.min_run == -1 || w.max_depth == -1) && PyErr_Occurred()) {
        return NULL;
    }
    w.leaves = PyList_New(0);
    if (w.leaves == NULL) {
        return NULL;
    }
    if (flat_node(&w, x, kind, 0) < 0 || (w.seen && seen_leaves(&seen, w.leaves) < 0)) {
        Py_CLEAR(w.leaves);
    }
    for (size_t i = 0; i < sizeof w.recent / sizeof w.recent[0]; i++) {
        Py_XDECREF(w.recent[i]);
    }
    PyMem_Free(seen.slots);
    Py_XDECREF(seen.kind);
    if (w.seen == NULL || w.leaves == NULL) {
        return w.leaves;
    }
    return Py_BuildValue("(NO)", w.leaves, seen.once ? Py_True : Py_False);
}
