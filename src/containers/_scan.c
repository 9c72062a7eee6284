/* containers._scan: the header and the tree of a file as containers writes them,
   parsed in one pass each, an optional accelerator of ct.load and ct.deserialize.

   `header(text, data_size, max_tensors, max_ndim, dtypes, tensor)` is the columnar
   fast path of `_layout_fast` (`_column_layout`, its plain twin) in C: the header must be
   `{"__metadata__":{...},` then the tensor entries exactly as `Plan.layout` renders
   them (no whitespace, keys in order, offsets contiguous in header order, no empty
   tensor), then `}` and at most 64 spaces. It returns `(metadata, tensors)` (the
   `Layout`'s two dicts, the entries made as `tensor` tuples) or None for anything
   else, valid or not, which the Python tiers then decide (and report). The text may
   be the header's bytes (every byte outside ASCII is refused where it is read), so
   that a usual header is never decoded into a str (`_layout_fast._scanned_ascii`).

   `records(text, max_nodes, ctx[, known, resolve])` is `_recparse._records_usual` in
   C for a tree string as `_encode` writes it (no whitespace; the records A, S with a
   plain JSON value, N, L, T, D with string keys, C, and @): it returns `(recs, names,
   crcs, targets)`, the fields of `Records`, or None for anything else, which the
   Python tiers then decide. An A record's name equal to the next of `known`'s keys
   (the layout's tensor names in file order) is that key's object. `resolve`
   (`_evolve.exact_kind`) is called once per class name, to put declared containers
   in a tree's `Structure` records (_scan_records.c, Plain).

   `arrays_fit` and `array_head` (_scan_fit.c) check a file's leaves against a
   template's arrays for load(like=) (`_positional`).

   The two parsers accept a subset of what their plain twins accept and build equal
   results: tests/test_serialize_fuzz.py compares them on valid, unusual and 20,000
   mutated files. Every number is bounded before it is used (at most 18 digits: below
   2**63), every string is ASCII (any other character: None), and nothing is allocated
   past what the text describes (each tensor and record is at least a few bytes of it).
   The module keeps no state and can be imported in any interpreter. */

#define _GNU_SOURCE  /* memmem */
#include "_scan.h"

/* --- header --------------------------------------------------------------------------- */

typedef struct {
    const unsigned char *at;  /* the spec text: code","shape":[dims */
    Py_ssize_t len;
    PyObject *code, *shape, *dtype;  /* borrowed from `specs` (owned there) */
    int64_t size;
} Spec;

/* The spec (code and dims) of the entry at the cursor, just after `{"dtype":"`: found
   in `specs` (a dict of spec text -> (code, shape, dtype, size)) or made and added. */
static int
spec_at(Cur *c, PyObject *specs, PyObject *dtypes, Py_ssize_t max_ndim, Spec *last)
{
    Py_ssize_t start = c->i;
    while (c->i < c->n && ((c->s[c->i] >= 'A' && c->s[c->i] <= 'Z') ||
                           (c->s[c->i] >= '0' && c->s[c->i] <= '9') || c->s[c->i] == '_'))
        c->i++;
    Py_ssize_t code_end = c->i;
    if (code_end == start || !LIT(c, "\",\"shape\":["))
        return 0;
    Py_ssize_t dims_start = c->i;
    int64_t dims[64];
    Py_ssize_t ndim = 0;
    if (c->i < c->n && c->s[c->i] != ']') {
        for (;;) {
            int64_t d;
            if (!uint18(c, &d) || ndim >= 64)
                return 0;
            dims[ndim++] = d;
            if (!ch(c, ','))
                break;
        }
    }
    Py_ssize_t end = c->i;
    if (!ch(c, ']'))
        return 0;
    if (last->at != NULL && last->len == end - start &&
        memcmp(last->at, c->s + start, (size_t)(end - start)) == 0)
        return 1;
    PyObject *key = PyUnicode_FromKindAndData(PyUnicode_1BYTE_KIND, c->s + start, end - start);
    if (key == NULL)
        return -1;
    PyObject *row = PyDict_GetItemWithError(specs, key);
    if (row == NULL) {
        if (PyErr_Occurred())
            goto fail;
        if (ndim > max_ndim)
            goto no;
        PyObject *code = PyUnicode_FromKindAndData(PyUnicode_1BYTE_KIND, c->s + start,
                                                   code_end - start);
        if (code == NULL)
            goto fail;
        PyObject *dtype = PyDict_GetItemWithError(dtypes, code);
        if (dtype == NULL) {
            Py_DECREF(code);
            if (PyErr_Occurred())
                goto fail;
            goto no;
        }
        PyObject *isz = PyObject_GetAttrString(dtype, "itemsize");
        if (isz == NULL) {
            Py_DECREF(code);
            goto fail;
        }
        long long size = PyLong_AsLongLong(isz);
        Py_DECREF(isz);
        if (size == -1 && PyErr_Occurred()) {
            Py_DECREF(code);
            goto fail;
        }
        /* 0 < size < 2**62, in exact arithmetic: give up at the first step past it */
        for (Py_ssize_t k = 0; k < ndim; k++) {
            if (dims[k] == 0 || size > ((int64_t)1 << 62) / dims[k]) {
                size = 0;
                break;
            }
            size *= dims[k];
        }
        if (!(0 < size && size < ((int64_t)1 << 62))) {
            Py_DECREF(code);
            goto no;
        }
        PyObject *shape = PyTuple_New(ndim);
        if (shape == NULL) {
            Py_DECREF(code);
            goto fail;
        }
        for (Py_ssize_t k = 0; k < ndim; k++) {
            PyObject *d = PyLong_FromLongLong(dims[k]);
            if (d == NULL) {
                Py_DECREF(code);
                Py_DECREF(shape);
                goto fail;
            }
            PyTuple_SET_ITEM(shape, k, d);
        }
        PyObject *sz = PyLong_FromLongLong(size);
        if (sz == NULL) {
            Py_DECREF(code);
            Py_DECREF(shape);
            goto fail;
        }
        Py_INCREF(dtype);
        row = PyTuple_Pack(4, code, shape, dtype, sz);
        Py_DECREF(code);
        Py_DECREF(shape);
        Py_DECREF(dtype);
        Py_DECREF(sz);
        if (row == NULL || PyDict_SetItem(specs, key, row) < 0) {
            Py_XDECREF(row);
            goto fail;
        }
        Py_DECREF(row);  /* specs holds it */
    }
    Py_DECREF(key);
    last->at = c->s + start;
    last->len = end - start;
    last->code = PyTuple_GET_ITEM(row, 0);
    last->shape = PyTuple_GET_ITEM(row, 1);
    last->dtype = PyTuple_GET_ITEM(row, 2);
    last->size = PyLong_AsLongLong(PyTuple_GET_ITEM(row, 3));
    (void)dims_start;
    return 1;
no:
    Py_DECREF(key);
    return 0;
fail:
    Py_DECREF(key);
    return -1;
}

/* A tensor name: ASCII, no quote, backslash or control character (as `_ENTRY`). */
static PyObject *
plain_name(Cur *c)
{
    if (!ch(c, '"'))
        return NULL;
    Py_ssize_t start = c->i;
    while (c->i < c->n) {
        unsigned char x = c->s[c->i];
        if (x == '"')
            break;
        if (x < 0x20 || x > 0x7f || x == '\\')
            return NULL;
        c->i++;
    }
    if (c->i >= c->n)
        return NULL;
    PyObject *name = PyUnicode_FromKindAndData(PyUnicode_1BYTE_KIND, c->s + start, c->i - start);
    c->i++;
    return name;
}

static PyObject *
scan_header(PyObject *Py_UNUSED(self), PyObject *args)
{
    PyObject *text, *dtypes;
    PyTypeObject *tensor;
    long long data_size;
    Py_ssize_t max_tensors, max_ndim;
    if (!PyArg_ParseTuple(args, "OLnnO!O!:header", &text, &data_size, &max_tensors, &max_ndim,
                          &PyDict_Type, &dtypes, &PyType_Type, &tensor))
        return NULL;
    if (!PyType_IsSubtype(tensor, &PyTuple_Type)) {
        PyErr_SetString(PyExc_TypeError, "header: tensor must be a tuple subclass");
        return NULL;
    }
    Cur c = {NULL, 0, 0};
    int ok = text_of(text, &c.s, &c.n, "header");
    if (ok <= 0)
        return ok < 0 ? NULL : Py_NewRef(Py_None);
    /* the closing brace, then at most 64 spaces */
    Py_ssize_t close = c.n;
    while (close > 0 && c.s[close - 1] == ' ')
        close--;
    if (c.n - close > 64 || close == 0 || c.s[close - 1] != '}')
        Py_RETURN_NONE;
    c.n = close - 1;
    if (!LIT(&c, "{\"__metadata__\":{"))
        Py_RETURN_NONE;
    PyObject *metadata = PyDict_New(), *tensors = NULL, *specs = NULL, *meta_key = NULL;
    PyObject *pos_obj = NULL;  /* the previous entry's end: the next one's begin */
    if (metadata == NULL)
        return NULL;
    if (!ch(&c, '}')) {
        for (;;) {
            PyObject *k = string(&c);
            if (k == NULL)
                goto no;
            PyObject *v = NULL;
            if (ch(&c, ':'))
                v = string(&c);
            if (v == NULL) {
                Py_DECREF(k);
                goto no;
            }
            Py_ssize_t before = PyDict_GET_SIZE(metadata);
            int bad = PyDict_SetItem(metadata, k, v);
            Py_DECREF(k);
            Py_DECREF(v);
            if (bad < 0)
                goto no;
            if (PyDict_GET_SIZE(metadata) == before)  /* a duplicate key */
                goto no;
            if (ch(&c, '}'))
                break;
            if (!ch(&c, ','))
                goto no;
        }
    }
    if (!ch(&c, ','))
        goto no;
    tensors = PyDict_New();
    specs = PyDict_New();
    meta_key = PyUnicode_InternFromString("__metadata__");
    if (tensors == NULL || specs == NULL || meta_key == NULL)
        goto no;
    Spec last = {NULL, 0, NULL, NULL, NULL, 0};
    int64_t pos = 0;
    Py_ssize_t count = 0;
    for (;;) {
        PyObject *name = plain_name(&c);
        if (name == NULL)
            goto no;
        int64_t begin, end;
        int ok = LIT(&c, ":{\"dtype\":\"");
        if (ok)
            ok = spec_at(&c, specs, dtypes, max_ndim, &last);
        if (ok == 1)
            ok = LIT(&c, ",\"data_offsets\":[") && uint18(&c, &begin) && ch(&c, ',') &&
                 uint18(&c, &end) && LIT(&c, "]}");
        if (ok != 1 || begin != pos || end - begin != last.size || ++count > max_tensors) {
            Py_DECREF(name);
            goto no;
        }
        pos = end;
        PyObject *items[6];
        items[0] = pos_obj != NULL ? pos_obj : PyLong_FromLongLong(begin);
        items[1] = PyLong_FromLongLong(end);
        pos_obj = items[1] == NULL ? NULL : Py_NewRef(items[1]);
        items[2] = name;
        Py_INCREF(last.code);
        items[3] = last.code;
        Py_INCREF(last.shape);
        items[4] = last.shape;
        Py_INCREF(last.dtype);
        items[5] = last.dtype;
        if (items[0] == NULL || items[1] == NULL) {
            for (int k = 0; k < 6; k++)
                Py_XDECREF(items[k]);
            goto no;
        }
        PyObject *t = named(tensor, 6, items);
        if (t == NULL)
            goto no;
        Py_ssize_t before = PyDict_GET_SIZE(tensors);
        int bad = PyDict_SetItem(tensors, name, t);
        Py_DECREF(t);
        if (bad < 0 || PyDict_GET_SIZE(tensors) == before)  /* a duplicate name */
            goto no;
        if (c.i == c.n)
            break;
        if (!ch(&c, ',') || c.i == c.n)
            goto no;
    }
    Py_CLEAR(pos_obj);
    if (pos != data_size)
        goto no;
    int has_meta = PyDict_Contains(tensors, meta_key);
    if (has_meta != 0)
        goto no;
    Py_DECREF(specs);
    Py_DECREF(meta_key);
    PyObject *out = PyTuple_Pack(2, metadata, tensors);
    Py_DECREF(metadata);
    Py_DECREF(tensors);
    return out;
no:
    Py_XDECREF(pos_obj);
    Py_XDECREF(metadata);
    Py_XDECREF(tensors);
    Py_XDECREF(specs);
    Py_XDECREF(meta_key);
    return give_up();
}

/* --- bound_json's counts -------------------------------------------------------------- */

/* `_layout_fast._tree_span` in one pass: the span of the tree string's content in a header
   (between `"containers.tree":"` and the first `]"` after it, kept only when every
   quote in it is escaped and no backslash is escaped before a quote), or (0, 0);
   None for a str outside ASCII (the plain twin decides). Bytes are read as they are
   (`text_of`: the caller checked that they are ASCII). */
static PyObject *
scan_tree_span(PyObject *Py_UNUSED(self), PyObject *arg)
{
    static const char at_text[] = "\"containers.tree\":\"";
    const unsigned char *s;
    Py_ssize_t n, m = (Py_ssize_t)sizeof(at_text) - 1;
    int ok = text_of(arg, &s, &n, "tree_span");
    if (ok <= 0)
        return ok < 0 ? NULL : Py_NewRef(Py_None);
    const unsigned char *hit = memmem(s, (size_t)n, at_text, (size_t)m);
    if (hit == NULL)
        return Py_BuildValue("(nn)", (Py_ssize_t)0, (Py_ssize_t)0);
    Py_ssize_t a = hit - s + m, b = -1;
    /* the first `]"`: blocks of 256 bytes tested without a branch (vectorized; memmem
       stops at every `]`, one a record), then the block that has it byte by byte */
    for (Py_ssize_t i = a; i + 1 < n && b < 0;) {
        Py_ssize_t stop = n - 1 - i < 256 ? n - 1 : i + 256;
        unsigned char found = 0;
        for (Py_ssize_t k = i; k < stop; k++)
            found |= (unsigned char)((s[k] == ']') & (s[k + 1] == '"'));
        for (Py_ssize_t k = i; found && k < stop; k++) {
            if (s[k] == ']' && s[k + 1] == '"') {
                b = k + 1;
                break;
            }
        }
        i = stop;
    }
    if (b < 0)
        return Py_BuildValue("(nn)", (Py_ssize_t)0, (Py_ssize_t)0);
    /* every quote in [a, b) escaped, none after an escaped backslash (str.count's
       occurrences lie wholly inside the span). s[a - 1] is the opening quote, so no
       test of i == a or i - 2 >= a is needed; blocks of 256 bytes without a branch,
       which the compiler vectorizes. */
    for (Py_ssize_t i = a; i < b;) {
        Py_ssize_t stop = b - i < 256 ? b : i + 256;
        unsigned char bad = 0;
        for (; i < stop; i++)
            bad |= (unsigned char)((s[i] == '"') & ((s[i - 1] != '\\') | (s[i - 2] == '\\')));
        if (bad)
            return Py_BuildValue("(nn)", (Py_ssize_t)0, (Py_ssize_t)0);
    }
    return Py_BuildValue("(nn)", a, b);
}

/* The counts of `[` and `{`, `,`, `:` and `"` in a text outside [a, b): what
   `_strictjson.bound_json` first counts with `str.count` (its plain twin), in one
   pass. None for a str outside ASCII; bytes as `tree_span` reads them. */
static PyObject *
scan_counts(PyObject *Py_UNUSED(self), PyObject *args)
{
    PyObject *text;
    Py_ssize_t a, b;
    if (!PyArg_ParseTuple(args, "Onn:counts", &text, &a, &b))
        return NULL;
    const unsigned char *s;
    Py_ssize_t n;
    int ok = text_of(text, &s, &n, "counts");
    if (ok <= 0)
        return ok < 0 ? NULL : Py_NewRef(Py_None);
    if (a < 0) a = 0;
    if (a > n) a = n;
    if (b < a) b = a;
    if (b > n) b = n;
    Py_ssize_t counts[4] = {0, 0, 0, 0};
    Py_ssize_t ranges[2][2] = {{0, a}, {b, n}};
    for (int r = 0; r < 2; r++) {
        /* blocks of at most 255 bytes counted in bytes, which the compiler vectorizes
           (16 or 32 bytes a step; a count per byte kept in 64 bits does not) */
        for (Py_ssize_t i = ranges[r][0]; i < ranges[r][1];) {
            Py_ssize_t m = ranges[r][1] - i < 255 ? ranges[r][1] - i : 255;
            const unsigned char *p = s + i;
            unsigned char opens = 0, commas = 0, colons = 0, quotes = 0;
            for (Py_ssize_t k = 0; k < m; k++) {
                unsigned char x = p[k];
                opens += (unsigned char)((x == '[') | (x == '{'));
                commas += (unsigned char)(x == ',');
                colons += (unsigned char)(x == ':');
                quotes += (unsigned char)(x == '"');
            }
            counts[0] += opens;
            counts[1] += commas;
            counts[2] += colons;
            counts[3] += quotes;
            i += m;
        }
    }
    return Py_BuildValue("(nnnn)", counts[0], counts[1], counts[2], counts[3]);
}

static PyMethodDef scan_methods[] = {
    {"tree_span", scan_tree_span, METH_O, "tree_span(text) -> (a, b) | None"},
    {"counts", scan_counts, METH_VARARGS,
     "counts(text, a, b) -> (opens, commas, colons, quotes) | None"},
    {"header", scan_header, METH_VARARGS,
     "header(text, data_size, max_tensors, max_ndim, dtypes, tensor) -> (metadata, "
     "tensors) | None"},
    {"records", scan_records, METH_VARARGS,
     "records(text, max_nodes, (Rec, none_rec, seq_recs, empty_dict_rec, few_keys, dict_kind, "
     "list_kind, tuple_kind, none_kind, max_depth, columns)[, known, resolve]) -> (recs, names, crcs, "
     "targets, columns) | None"},
    {"arrays_fit", scan_arrays_fit, METH_VARARGS,
     "arrays_fit(values, wants, ndarray[, tensor, dtypes, convert]) -> set of types | None"},
    {"array_head", scan_array_head, METH_VARARGS,
     "array_head(a, ndarray) -> (shape, dtype) read from numpy's array struct"},
    {NULL, NULL, 0, NULL},
};

static PyModuleDef_Slot scan_slots[] = {
#if PY_VERSION_HEX >= 0x030C0000
    {Py_mod_multiple_interpreters, Py_MOD_PER_INTERPRETER_GIL_SUPPORTED},
#endif
    {0, NULL},
};

static struct PyModuleDef scan_module = {
    PyModuleDef_HEAD_INIT, "containers._scan",
    "The header and tree of a containers file parsed in C (optional; see _layout, "
    "_recparse).",
    0, scan_methods, scan_slots, NULL, NULL, NULL,
};

PyMODINIT_FUNC
PyInit__scan(void)
{
    return PyModuleDef_Init(&scan_module);
}
