/* containers._encoder: save's walk over a tree, in C, an optional accelerator of
   `_serialize._encode` (the "many" tree of benchmarks/serialization.py: 100,000
   float32[4] arrays in 1,000 dicts and 10,000 floats, where the Python walk was most
   of serialize's time).

   `encode(tree, context)` returns `(records, names, arrays, crc_slots)`, exactly what
   the Python encoder (`_encode._Encoder.tree`, its plain twin) puts in a `Plan`, or
   raises `context`'s fallback exception for anything it does not decide itself; the
   caller then runs the Python encoder from the start, which writes the same file or
   raises the error with its path. tests/test_serialize_compiled.py holds the two to
   byte-identical files on Hypothesis trees (shared arrays and nodes, cycles, every
   scalar, classes with kept fields, register_node kinds).

   What is done here: tuples, lists, None, the scalars str, bool, int and float (a
   non-finite float or a big int by `scalar`, as `encode_scalar` writes it), and numpy
   arrays that are already as files store them (exact ndarray, C-contiguous, a buffer
   format of `formats`: a little-endian dtype of the file's table, bool excepted);
   every other value is handed to `classify(x)`, Python, which returns a node's
   `(kids, record, mutable, keys, tail)`, a scalar's record, or the array to store.

   Sharing is decided by construction, as in the Python walk: every array and every
   node of a mutable kind is noted with the index of its record in a table keyed by
   its address; a value met again is written as `["@", index]`. Every noted value is
   held (`keep`, or the arrays' list) until the walk ends, so no address is reused by
   another object during it. A noted node met again while it is still open (a cycle),
   a name met twice, a non-ASCII name, more than `limit` values or a tree deeper than
   MAX_DEPTH: the fallback, and the Python walk reports or handles it.

   The module's other functions, `render` (the tree's text) and `entries` (the tensor
   entries), are in _encoder_text.c.

   The module keeps no state (PEP 489; no Python object in a C static); it runs Python
   code (classify) and so keeps the GIL. */

#include "_encoder.h"
#include "_sorted_keys.h"
#include <math.h>
#include <stdint.h>
#include <string.h>

/* Deeper trees go to the Python walk, which is iterative. */
#define MAX_DEPTH 100

/* --- the identity table: address -> record index (open addressing) ------------------ */

typedef struct {
    uintptr_t *keys; /* 0: an empty slot */
    Py_ssize_t *values;
    size_t mask; /* slots - 1 */
    size_t used;
} Table;

static inline size_t
table_slot(const Table *t, uintptr_t key)
{
    uint64_t h = (uint64_t)key * 0x9E3779B97F4A7C15ull;
    size_t i = (size_t)(h ^ (h >> 32)) & t->mask;
    while (t->keys[i] != 0 && t->keys[i] != key) {
        i = (i + 1) & t->mask;
    }
    return i;
}

/* The record index noted for x, or -1. */
static inline Py_ssize_t
table_get(const Table *t, PyObject *x)
{
    if (t->keys == NULL) {
        return -1;
    }
    size_t i = table_slot(t, (uintptr_t)x);
    return t->keys[i] == 0 ? -1 : t->values[i];
}

/* Note x (not there yet) with value; -1 on a memory error. */
static int
table_put(Table *t, PyObject *x, Py_ssize_t value)
{
    if (t->keys == NULL || 2 * (t->used + 1) > t->mask + 1) {
        size_t size = t->keys == NULL ? 1024 : 2 * (t->mask + 1);
        Table bigger = {PyMem_Calloc(size, sizeof(uintptr_t)),
                        PyMem_Calloc(size, sizeof(Py_ssize_t)), size - 1, t->used};
        if (bigger.keys == NULL || bigger.values == NULL) {
            PyMem_Free(bigger.keys);
            PyMem_Free(bigger.values);
            PyErr_NoMemory();
            return -1;
        }
        for (size_t i = 0; t->keys != NULL && i <= t->mask; i++) {
            if (t->keys[i] != 0) {
                size_t j = table_slot(&bigger, t->keys[i]);
                bigger.keys[j] = t->keys[i];
                bigger.values[j] = t->values[i];
            }
        }
        PyMem_Free(t->keys);
        PyMem_Free(t->values);
        *t = bigger;
    }
    size_t i = table_slot(t, (uintptr_t)x);
    t->keys[i] = (uintptr_t)x;
    t->values[i] = value;
    t->used++;
    return 0;
}

/* --- the walk ------------------------------------------------------------------------ */

typedef struct {
    PyObject *records, *names, *arrays, *slots; /* the results (owned lists) */
    PyObject *keep;                              /* the noted values (owned list) */
    int rendered; /* a name holds a key rendered by classify (names may then clash) */
    PyObject *tags[7];                           /* "A" "S" "L" "T" "N" "@" "D" (owned) */
    PyObject *zeros;                             /* "00000000", the empty CRC32 slot */
    PyObject *classify, *scalar, *fallback, *formats; /* the context's (borrowed) */
    PyTypeObject *ndarray;
    char ok_format[8]; /* the last buffer format found in formats, or "" */
    int str_dicts;     /* dicts of str keys are read here (dict's kind is DICT) */
    Py_ssize_t count, limit;
    Table table;
    PyObject *open[MAX_DEPTH + 2]; /* the mutable nodes open on the walk (borrowed) */
    int n_open;
} Enc;

enum { TAG_A, TAG_S, TAG_L, TAG_T, TAG_N, TAG_AT, TAG_D };

static int walk(Enc *e, PyObject *x, PyObject *path, int depth);
static int fall_back(Enc *e);

static int
fall_back(Enc *e)
{
    PyErr_SetNone(e->fallback);
    return -1;
}

/* Append a new record [tag, value] (value borrowed; NULL: [tag]). */
static int
append_record(Enc *e, int tag, PyObject *value)
{
    PyObject *rec = PyList_New(value == NULL ? 1 : 2);
    if (rec == NULL) {
        return -1;
    }
    Py_INCREF(e->tags[tag]);
    PyList_SET_ITEM(rec, 0, e->tags[tag]);
    if (value != NULL) {
        Py_INCREF(value);
        PyList_SET_ITEM(rec, 1, value);
    }
    int r = PyList_Append(e->records, rec);
    Py_DECREF(rec);
    return r;
}

/* ["S", encode_scalar(x)], by the context's `scalar`. */
static int
append_scalar_call(Enc *e, PyObject *x)
{
    PyObject *form = PyObject_CallOneArg(e->scalar, x);
    if (form == NULL) {
        return -1;
    }
    int r = append_record(e, TAG_S, form);
    Py_DECREF(form);
    return r;
}

/* 1 and the record appended if x is a str, bool, int or float; 0 if it is not. */
static int
fast_scalar(Enc *e, PyObject *x)
{
    PyTypeObject *t = Py_TYPE(x);
    if (t == &PyFloat_Type) {
        return (isfinite(PyFloat_AS_DOUBLE(x)) ? append_record(e, TAG_S, x)
                                                : append_scalar_call(e, x)) < 0
                   ? -1
                   : 1;
    }
    if (t == &PyUnicode_Type || t == &PyBool_Type) {
        return append_record(e, TAG_S, x) < 0 ? -1 : 1;
    }
    if (t == &PyLong_Type) {
        int overflow = 0;
        long long v = PyLong_AsLongLongAndOverflow(x, &overflow);
        if (v == -1 && PyErr_Occurred()) {
            return -1;
        }
        /* JSON numbers are exact below 2**53; others by their tagged form */
        int safe = !overflow && v > -(1LL << 53) && v < (1LL << 53);
        return (safe ? append_record(e, TAG_S, x) : append_scalar_call(e, x)) < 0 ? -1 : 1;
    }
    return 0;
}

/* The alias of a value noted before: ["@", index] (a cycle, if it is open, falls back). */
static int
append_alias(Enc *e, PyObject *x, Py_ssize_t index)
{
    for (int i = 0; i < e->n_open; i++) {
        if (e->open[i] == x) {
            return fall_back(e); /* the Python walk names the cycle */
        }
    }
    PyObject *k = PyLong_FromSsize_t(index);
    if (k == NULL) {
        return -1;
    }
    int r = append_record(e, TAG_AT, k);
    Py_DECREF(k);
    return r;
}

/* Note x at the next record's index, holding it while the walk runs (hold: 0 if the
   arrays' list holds it already). */
static int
note(Enc *e, PyObject *x, int hold)
{
    if (table_put(&e->table, x, PyList_GET_SIZE(e->records)) < 0) {
        return -1;
    }
    return hold ? PyList_Append(e->keep, x) : 0;
}

/* The tensor `path` holding `a` (x normalized): ["A", path, "00000000"]. */
static int
add_array(Enc *e, PyObject *x, PyObject *a, PyObject *path)
{
    if (!PyUnicode_IS_ASCII(path)) {
        return fall_back(e); /* the Python walk escapes a lone surrogate */
    }
    if (note(e, x, x != a) < 0) {
        return -1;
    }
    PyObject *rec = PyList_New(3);
    if (rec == NULL) {
        return -1;
    }
    Py_INCREF(e->tags[TAG_A]);
    PyList_SET_ITEM(rec, 0, e->tags[TAG_A]);
    Py_INCREF(path);
    PyList_SET_ITEM(rec, 1, path);
    Py_INCREF(e->zeros);
    PyList_SET_ITEM(rec, 2, e->zeros);
    int r = PyList_Append(e->records, rec) < 0 || PyList_Append(e->names, path) < 0 ||
                    PyList_Append(e->arrays, a) < 0 || PyList_Append(e->slots, rec) < 0
                ? -1
                : 0;
    Py_DECREF(rec);
    return r;
}

/* An exact ndarray: stored as it is if the file can hold its bytes so, else as
   `classify` normalizes it. */
static int
array(Enc *e, PyObject *x, PyObject *path)
{
    Py_buffer view;
    int plain = 0;
    if (PyObject_GetBuffer(x, &view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) == 0) {
        const char *f = view.format == NULL ? "B" : view.format;
        /* most trees repeat one dtype: the last format found in the set is kept */
        plain = e->ok_format[0] != '\0' && strcmp(f, e->ok_format) == 0;
        if (!plain && strlen(f) < sizeof e->ok_format) {
            PyObject *format = PyUnicode_FromString(f);
            plain = format == NULL ? -1 : PySet_Contains(e->formats, format);
            Py_XDECREF(format);
            if (plain > 0) {
                strcpy(e->ok_format, f);
            }
        }
        PyBuffer_Release(&view);
        if (plain < 0) {
            return -1;
        }
    }
    else {
        PyErr_Clear(); /* not C-contiguous, or no buffer format: classify decides */
    }
    if (plain) {
        return add_array(e, x, x, path);
    }
    PyObject *a = PyObject_CallOneArg(e->classify, x);
    if (a == NULL) {
        return -1;
    }
    int r = Py_IS_TYPE(a, e->ndarray) ? add_array(e, x, a, path) : fall_back(e);
    Py_DECREF(a);
    return r;
}

/* path + "[" + text + "]" for an ASCII path and text (len bytes): a new str. */
static PyObject *
bracketed(PyObject *path, const char *text, size_t len, int quoted)
{
    Py_ssize_t n = PyUnicode_GET_LENGTH(path);
    PyObject *out = PyUnicode_New(n + (Py_ssize_t)len + 2 + 2 * quoted, 127);
    if (out == NULL) {
        return NULL;
    }
    char *d = (char *)PyUnicode_1BYTE_DATA(out);
    memcpy(d, PyUnicode_1BYTE_DATA(path), (size_t)n);
    d += n;
    *d++ = '[';
    if (quoted) {
        *d++ = '\'';
    }
    memcpy(d, text, len);
    d += len;
    if (quoted) {
        *d++ = '\'';
    }
    *d = ']';
    return out;
}

/* The path of child i: path + "[i]", path + "[repr(key)]" (keys: a tuple of str) or
   path + suffix (keys: a list of suffixes classify rendered). The usual cases (an
   ASCII path, a key repr would write between single quotes as it is) are written
   here; repr writes the others. */
static PyObject *
child_path(Enc *e, PyObject *path, PyObject *keys, Py_ssize_t i)
{
    int ascii = PyUnicode_IS_ASCII(path);
    if (keys == Py_None) {
        char digits[24];
        size_t len = (size_t)(put_uint(digits, (unsigned long long)i) - digits);
        return ascii ? bracketed(path, digits, len, 0)
                     : PyUnicode_FromFormat("%U[%zd]", path, i);
    }
    if (PyTuple_Check(keys)) {
        PyObject *key = PyTuple_GET_ITEM(keys, i);
        if (ascii && PyUnicode_IS_ASCII(key)) {
            const char *k = (const char *)PyUnicode_1BYTE_DATA(key);
            Py_ssize_t len = PyUnicode_GET_LENGTH(key), j = 0;
            while (j < len && k[j] >= 0x20 && k[j] < 0x7f && k[j] != '\'' && k[j] != '\\') {
                j++;
            }
            if (j == len) {
                return bracketed(path, k, (size_t)len, 1);
            }
        }
        return PyUnicode_FromFormat("%U[%R]", path, key);
    }
    e->rendered = 1;
    return PyUnicode_Concat(path, PyList_GET_ITEM(keys, i));
}

/* 0 if the tensor names are distinct, else the fallback (the Python walk names the
   clash). Names made of index keys and str keys alone are distinct by construction:
   each key is written as a token that ends where it can be read to end ("[digits]",
   or "[" and a quoted str as repr writes it, its quote escaped inside, and "]"), so a
   name is read back into its keys, and two places in a tree have different keys. A
   key classify rendered (".w", a register_node key) gives no such guarantee: the
   names are then counted once in a set. */
static int
distinct(Enc *e)
{
    if (!e->rendered) {
        return 0;
    }
    PyObject *set = PySet_New(e->names);
    if (set == NULL) {
        return -1;
    }
    int same = PySet_GET_SIZE(set) == PyList_GET_SIZE(e->names);
    Py_DECREF(set);
    return same ? 0 : fall_back(e);
}

/* A node's children (a tuple or list, held by the caller), keyed by keys. */
static int
children(Enc *e, PyObject *kids, PyObject *keys, PyObject *path, int depth)
{
    Py_ssize_t n = PySequence_Fast_GET_SIZE(kids);
    PyObject **items = PySequence_Fast_ITEMS(kids);
    if (keys != Py_None && (!(PyTuple_Check(keys) || PyList_Check(keys)) ||
                            PySequence_Fast_GET_SIZE(keys) != n)) {
        return fall_back(e);
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *kid = items[i];
        if (++e->count > e->limit) {
            return fall_back(e);
        }
        int r = fast_scalar(e, kid);
        if (r != 0) {
            if (r < 0) {
                return -1;
            }
            continue;
        }
        e->count--; /* walk counts it */
        PyObject *p = child_path(e, path, keys, i);
        if (p == NULL) {
            return -1;
        }
        r = walk(e, kid, p, depth + 1);
        Py_DECREF(p);
        if (r < 0) {
            return -1;
        }
    }
    return 0;
}

/* A tuple or list: ["T", n] or ["L", n], then its children (a list's as they are when
   it is reached: a snapshot, as the Python walk's flatten takes). */
static int
sequence(Enc *e, PyObject *x, PyObject *path, int depth, int is_list)
{
    PyObject *kids = is_list ? PyList_GetSlice(x, 0, PyList_GET_SIZE(x)) : Py_NewRef(x);
    if (kids == NULL) {
        return -1;
    }
    PyObject *n = PyLong_FromSsize_t(PySequence_Fast_GET_SIZE(kids));
    int r = n == NULL || (is_list && note(e, x, 1) < 0) ||
                    append_record(e, is_list ? TAG_L : TAG_T, n) < 0
                ? -1
                : 0;
    Py_XDECREF(n);
    if (r == 0) {
        if (is_list) {
            e->open[e->n_open++] = x;
        }
        r = children(e, kids, Py_None, path, depth);
        if (is_list) {
            e->n_open--;
        }
    }
    Py_DECREF(kids);
    return r;
}

/* A dict whose keys are all str, as the DICT kind reads it (`_kinds._dict_flatten`):
   children in sorted key order, ["D", sorted keys] and, when the insertion order
   differs, the position in the sorted keys of each key in insertion order (what
   `_Encoder.node_record` writes). Sorting str keys runs no Python code, and distinct
   str keys sort in strictly increasing order, as `sort_keys` requires. 1 if a key is
   not a str (classify then reads the dict), 0 done, -1 error. */
static int
str_dict(Enc *e, PyObject *x, PyObject *path, int depth)
{
    PyObject *keys, *order, *kids = NULL, *rec = NULL;
    int r = sorted_str_keys(x, &keys, &order);
    if (r != 0) {
        return r;
    }
    r = -1;
    Py_ssize_t n = PyList_GET_SIZE(keys);
    if ((kids = PyList_New(n)) == NULL) {
        goto done;
    }
    int same = 1;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *key = PyList_GET_ITEM(order, i);
        same &= key == PyList_GET_ITEM(keys, i);
        PyObject *kid = PyDict_GetItemWithError(x, key);
        if (kid == NULL) {
            if (!PyErr_Occurred()) {
                fall_back(e);
            }
            goto done;
        }
        Py_INCREF(kid);
        PyList_SET_ITEM(kids, i, kid);
    }
    rec = PyList_New(same ? 2 : 3);
    if (rec == NULL) {
        goto done;
    }
    Py_INCREF(e->tags[TAG_D]);
    PyList_SET_ITEM(rec, 0, e->tags[TAG_D]);
    Py_INCREF(order);
    PyList_SET_ITEM(rec, 1, order);
    if (!same) {
        /* the insertion order, as positions in the sorted keys */
        PyObject *at = PyDict_New(), *positions = PyList_New(n);
        if (positions != NULL) {
            PyList_SET_ITEM(rec, 2, positions);
        }
        int ok = at != NULL && positions != NULL;
        for (Py_ssize_t i = 0; ok && i < n; i++) {
            PyObject *index = PyLong_FromSsize_t(i);
            ok = index != NULL && PyDict_SetItem(at, PyList_GET_ITEM(order, i), index) == 0;
            Py_XDECREF(index);
        }
        for (Py_ssize_t i = 0; ok && i < n; i++) {
            PyObject *index = PyDict_GetItemWithError(at, PyList_GET_ITEM(keys, i));
            ok = index != NULL;
            if (ok) {
                Py_INCREF(index);
                PyList_SET_ITEM(positions, i, index);
            }
        }
        Py_XDECREF(at);
        if (!ok) {
            if (!PyErr_Occurred()) {
                fall_back(e);
            }
            goto done;
        }
    }
    /* a tuple of the keys: child_path renders them as [repr(key)] */
    PyObject *names = PyList_AsTuple(order);
    if (names == NULL || note(e, x, 1) < 0 || PyList_Append(e->records, rec) < 0) {
        Py_XDECREF(names);
        goto done;
    }
    e->open[e->n_open++] = x;
    r = children(e, kids, names, path, depth);
    e->n_open--;
    Py_DECREF(names);
done:
    Py_DECREF(keys);
    Py_XDECREF(order);
    Py_XDECREF(kids);
    Py_XDECREF(rec);
    return r;
}

/* Any other value, as `classify` answers: a scalar's record, an array to store, or a
   node `(kids, record, mutable, keys, tail)`. */
static int
other(Enc *e, PyObject *x, PyObject *path, int depth)
{
    PyObject *got = PyObject_CallOneArg(e->classify, x);
    if (got == NULL) {
        return -1;
    }
    int r;
    if (PyList_CheckExact(got)) {
        r = PyList_Append(e->records, got);
    }
    else if (Py_IS_TYPE(got, e->ndarray)) {
        r = add_array(e, x, got, path);
    }
    else if (PyTuple_CheckExact(got) && PyTuple_GET_SIZE(got) == 5) {
        PyObject *kids = PyTuple_GET_ITEM(got, 0), *record = PyTuple_GET_ITEM(got, 1);
        PyObject *keys = PyTuple_GET_ITEM(got, 3), *tail = PyTuple_GET_ITEM(got, 4);
        int mutable_ = PyObject_IsTrue(PyTuple_GET_ITEM(got, 2));
        if (mutable_ < 0 || !(PyTuple_CheckExact(kids) || PyList_CheckExact(kids))) {
            Py_DECREF(got);
            return mutable_ < 0 ? -1 : fall_back(e);
        }
        r = (mutable_ && note(e, x, 1) < 0) || PyList_Append(e->records, record) < 0 ? -1 : 0;
        if (r == 0) {
            if (mutable_) {
                e->open[e->n_open++] = x;
            }
            r = children(e, kids, keys, path, depth);
            if (mutable_) {
                e->n_open--;
            }
        }
        if (r == 0 && tail != Py_None) {
            /* kept values or register_node aux: plain data, encoded by classify */
            r = PyList_SetSlice(e->records, PY_SSIZE_T_MAX, PY_SSIZE_T_MAX, tail);
        }
    }
    else {
        r = fall_back(e);
    }
    Py_DECREF(got);
    return r;
}

static int
walk(Enc *e, PyObject *x, PyObject *path, int depth)
{
    if (++e->count > e->limit || depth > MAX_DEPTH) {
        return fall_back(e);
    }
    int r = fast_scalar(e, x);
    if (r != 0) {
        return r < 0 ? -1 : 0;
    }
    PyTypeObject *t = Py_TYPE(x);
    if (t == &PyTuple_Type) {
        return sequence(e, x, path, depth, 0);
    }
    if (x == Py_None) {
        return append_record(e, TAG_N, NULL);
    }
    Py_ssize_t k = table_get(&e->table, x);
    if (k >= 0) {
        return append_alias(e, x, k);
    }
    if (t == &PyList_Type) {
        return sequence(e, x, path, depth, 1);
    }
    if (t == e->ndarray) {
        return array(e, x, path);
    }
    if (t == &PyDict_Type && e->str_dicts) {
        r = str_dict(e, x, path, depth);
        if (r <= 0) {
            return r;
        }
    }
    return other(e, x, path, depth);
}

/* encode(tree, context): context is
   (classify, scalar, fallback, formats, ndarray, limit, str_dicts) */
static PyObject *
encoder_encode(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2 || !PyTuple_CheckExact(args[1]) || PyTuple_GET_SIZE(args[1]) != 7) {
        PyErr_SetString(PyExc_TypeError, "encode(tree, context): context is a 7-tuple");
        return NULL;
    }
    PyObject *ctx = args[1];
    Enc e = {0};
    e.classify = PyTuple_GET_ITEM(ctx, 0);
    e.scalar = PyTuple_GET_ITEM(ctx, 1);
    e.fallback = PyTuple_GET_ITEM(ctx, 2);
    e.formats = PyTuple_GET_ITEM(ctx, 3);
    PyObject *ndarray = PyTuple_GET_ITEM(ctx, 4);
    e.limit = PyLong_AsSsize_t(PyTuple_GET_ITEM(ctx, 5));
    e.str_dicts = PyObject_IsTrue(PyTuple_GET_ITEM(ctx, 6));
    if ((e.limit == -1 && PyErr_Occurred()) || e.str_dicts < 0) {
        return NULL;
    }
    if (!PyType_Check(ndarray) || !PyAnySet_Check(e.formats) ||
        !PyExceptionClass_Check(e.fallback)) {
        PyErr_SetString(PyExc_TypeError, "encode: a malformed context");
        return NULL;
    }
    e.ndarray = (PyTypeObject *)ndarray;
    static const char *const tags[7] = {"A", "S", "L", "T", "N", "@", "D"};
    PyObject *result = NULL, *root = NULL;
    for (int i = 0; i < 7; i++) {
        if ((e.tags[i] = PyUnicode_InternFromString(tags[i])) == NULL) {
            goto done;
        }
    }
    e.zeros = PyUnicode_FromString("00000000");
    e.records = PyList_New(0);
    e.names = PyList_New(0);
    e.arrays = PyList_New(0);
    e.slots = PyList_New(0);
    e.keep = PyList_New(0);
    root = PyUnicode_FromString("");
    if (e.zeros == NULL || e.records == NULL || e.names == NULL || e.arrays == NULL ||
        e.slots == NULL || e.keep == NULL || root == NULL) {
        goto done;
    }
    if (walk(&e, args[0], root, 0) == 0 && distinct(&e) == 0) {
        result = PyTuple_Pack(4, e.records, e.names, e.arrays, e.slots);
    }
done:
    Py_XDECREF(root);
    for (int i = 0; i < 7; i++) {
        Py_XDECREF(e.tags[i]);
    }
    Py_XDECREF(e.zeros);
    Py_XDECREF(e.records);
    Py_XDECREF(e.names);
    Py_XDECREF(e.arrays);
    Py_XDECREF(e.slots);
    Py_XDECREF(e.keep);
    PyMem_Free(e.table.keys);
    PyMem_Free(e.table.values);
    return result;
}


static PyMethodDef encoder_methods[] = {
    {"encode", (PyCFunction)(void (*)(void))encoder_encode, METH_FASTCALL,
     PyDoc_STR("encode(tree, context, /): (records, names, arrays, crc_slots), or the "
               "context's fallback exception (see _serialize._compiled).")},
    {"entries", (PyCFunction)(void (*)(void))encoder_entries, METH_FASTCALL,
     PyDoc_STR("entries(arrays, names, order, codes, /): Plan.layout's entries, or None "
               "(see _serialize._plan).")},
    {"render", (PyCFunction)(void (*)(void))encoder_render, METH_FASTCALL,
     PyDoc_STR("render(records, quoted, /): json.dumps(records, separators=(',', ':')) "
               "(with quoted, json.dumps of that), or None for values records do not hold.")},
    {NULL, NULL, 0, NULL},
};

static PyModuleDef_Slot encoder_slots[] = {
#if PY_VERSION_HEX >= 0x030C0000
    {Py_mod_multiple_interpreters, Py_MOD_PER_INTERPRETER_GIL_SUPPORTED},
#endif
#if PY_VERSION_HEX >= 0x030D0000
    {Py_mod_gil, Py_MOD_GIL_USED}, /* the walk runs Python code and reads the tree
                                      without locks, as _speedups does */
#endif
    {0, NULL},
};

static struct PyModuleDef encoder_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "containers._encoder",
    .m_doc = PyDoc_STR("save's walk over a tree in C (optional; see _serialize._compiled)."),
    .m_size = 0,
    .m_methods = encoder_methods,
    .m_slots = encoder_slots,
};

PyMODINIT_FUNC
PyInit__encoder(void)
{
    return PyModuleDef_Init(&encoder_module);
}
