/* containers._scan: the header and the tree of a file as containers writes them,
   parsed in one pass each, an optional accelerator of ct.load and ct.deserialize.

   `header(text, data_size, max_tensors, max_ndim, dtypes, tensor)` is the columnar
   fast path of `_layout` (`_column_layout`, its plain twin) in C: the header must be
   `{"__metadata__":{...},` then the tensor entries exactly as `Plan.layout` renders
   them (no whitespace, keys in order, offsets contiguous in header order, no empty
   tensor), then `}` and at most 64 spaces. It returns `(metadata, tensors)` (the
   `Layout`'s two dicts, the entries made as `tensor` tuples) or None for anything
   else, valid or not, which the Python tiers then decide (and report).

   `records(text, max_nodes, ctx)` is `_recparse._records_usual` in C for a tree
   string as `_encode` writes it (no whitespace; the records A, S with a plain JSON
   value, N, L, T, D with string keys, C, and @): it returns `(recs, names, crcs,
   targets)`, the fields of `Records`, or None for anything else, which the Python
   tiers then decide.

   Both accept a subset of what their plain twins accept and build equal results:
   tests/test_serialize_fuzz.py compares them on valid, unusual and 20,000 mutated
   files. Every number is bounded before it is used (at most 18 digits: below 2**63),
   every string is ASCII (any other character: None), and nothing is allocated past
   what the text describes (each tensor and record is at least a few bytes of it).
   The module keeps no state and can be imported in any interpreter. */

#define _GNU_SOURCE  /* memmem */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <math.h>
#include <string.h>

/* --- a cursor over ASCII text ------------------------------------------------------- */

typedef struct {
    const unsigned char *s;
    Py_ssize_t i, n;
} Cur;

static inline int
lit(Cur *c, const char *word, Py_ssize_t len)
{
    if (c->n - c->i < len || memcmp(c->s + c->i, word, (size_t)len) != 0)
        return 0;
    c->i += len;
    return 1;
}

#define LIT(c, w) lit((c), (w), (Py_ssize_t)(sizeof(w) - 1))

static inline int
ch(Cur *c, unsigned char x)
{
    if (c->i < c->n && c->s[c->i] == x) {
        c->i++;
        return 1;
    }
    return 0;
}

/* A non-negative JSON integer of at most 18 digits, without leading zeros: 1 and its
   value, or 0 (nothing consumed that matters: the caller gives up). */
static int
uint18(Cur *c, int64_t *out)
{
    Py_ssize_t i = c->i, k = 0;
    int64_t v = 0;
    if (i >= c->n || c->s[i] < '0' || c->s[i] > '9')
        return 0;
    if (c->s[i] == '0') {
        c->i = i + 1;
        *out = 0;
        return !(c->i < c->n && c->s[c->i] >= '0' && c->s[c->i] <= '9');
    }
    while (i < c->n && c->s[i] >= '0' && c->s[i] <= '9') {
        if (++k > 18)
            return 0;
        v = v * 10 + (c->s[i] - '0');
        i++;
    }
    c->i = i;
    *out = v;
    return 1;
}

/* A JSON string at the cursor (after its opening quote has NOT been consumed): the
   str, or NULL with no error set when it is not one this module reads (a character
   outside ASCII or a control character, an escape giving one), or NULL with an error
   set (memory). Escapes: \" \\ \/ \b \f \n \r \t and \uXXXX below 0x80. */
static PyObject *
string(Cur *c)
{
    Py_ssize_t i, start, len = 0;
    int escaped = 0;
    if (!ch(c, '"'))
        return NULL;
    start = c->i;
    for (i = start; i < c->n; i++) {
        unsigned char x = c->s[i];
        if (x == '"')
            break;
        if (x < 0x20 || x > 0x7f)
            return NULL;
        if (x == '\\') {
            escaped = 1;
            if (i + 1 >= c->n)
                return NULL;
            if (c->s[i + 1] == 'u') {
                if (i + 5 >= c->n)
                    return NULL;
                i += 5;
            }
            else
                i += 1;
        }
        len++;
    }
    if (i >= c->n)
        return NULL;
    c->i = i + 1;
    if (!escaped)
        return PyUnicode_FromKindAndData(PyUnicode_1BYTE_KIND, c->s + start, len);
    PyObject *out = PyUnicode_New(len, 127);
    if (out == NULL)
        return NULL;
    Py_UCS1 *w = PyUnicode_1BYTE_DATA(out);
    Py_ssize_t k = 0;
    for (i = start; k < len; i++) {
        unsigned char x = c->s[i];
        if (x != '\\') {
            w[k++] = x;
            continue;
        }
        x = c->s[++i];
        switch (x) {
        case '"': case '\\': case '/': w[k++] = x; break;
        case 'b': w[k++] = '\b'; break;
        case 'f': w[k++] = '\f'; break;
        case 'n': w[k++] = '\n'; break;
        case 'r': w[k++] = '\r'; break;
        case 't': w[k++] = '\t'; break;
        case 'u': {
            unsigned v = 0;
            for (int d = 1; d <= 4; d++) {
                unsigned char h = c->s[i + d];
                v <<= 4;
                if (h >= '0' && h <= '9') v |= (unsigned)(h - '0');
                else if (h >= 'a' && h <= 'f') v |= (unsigned)(h - 'a' + 10);
                else if (h >= 'A' && h <= 'F') v |= (unsigned)(h - 'A' + 10);
                else { Py_DECREF(out); return NULL; }
            }
            if (v > 0x7f) { Py_DECREF(out); return NULL; }
            w[k++] = (Py_UCS1)v;
            i += 4;
            break;
        }
        default:
            Py_DECREF(out);
            return NULL;
        }
    }
    return out;
}

/* Give up (None) unless an error is set. */
static PyObject *
give_up(void)
{
    if (PyErr_Occurred())
        return NULL;
    Py_RETURN_NONE;
}

/* A tuple of a namedtuple class (a tuple subtype), its items stolen. */
static PyObject *
named(PyTypeObject *type, Py_ssize_t n, PyObject **items)
{
    PyObject *t = type->tp_alloc(type, n);
    if (t == NULL) {
        for (Py_ssize_t k = 0; k < n; k++)
            Py_XDECREF(items[k]);
        return NULL;
    }
    for (Py_ssize_t k = 0; k < n; k++)
        PyTuple_SET_ITEM(t, k, items[k]);
    return t;
}

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
scan_header(PyObject *self, PyObject *args)
{
    PyObject *text, *dtypes;
    PyTypeObject *tensor;
    long long data_size;
    Py_ssize_t max_tensors, max_ndim;
    if (!PyArg_ParseTuple(args, "ULnnO!O!:header", &text, &data_size, &max_tensors, &max_ndim,
                          &PyDict_Type, &dtypes, &PyType_Type, &tensor))
        return NULL;
    if (!PyType_IsSubtype(tensor, &PyTuple_Type)) {
        PyErr_SetString(PyExc_TypeError, "header: tensor must be a tuple subclass");
        return NULL;
    }
    if (!PyUnicode_IS_ASCII(text))
        Py_RETURN_NONE;
    Cur c = {PyUnicode_1BYTE_DATA(text), 0, PyUnicode_GET_LENGTH(text)};
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

/* --- records -------------------------------------------------------------------------- */

/* A JSON value of an S record: a number (int: at most 18 digits; float: finite), a
   string, true, false or null. NULL without an error: not one this module reads. */
static PyObject *
scalar(Cur *c)
{
    if (c->i >= c->n)
        return NULL;
    unsigned char x = c->s[c->i];
    if (x == '"')
        return string(c);
    if (LIT(c, "true"))
        Py_RETURN_TRUE;
    if (LIT(c, "false"))
        Py_RETURN_FALSE;
    if (LIT(c, "null"))
        Py_RETURN_NONE;
    /* -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? */
    Py_ssize_t start = c->i, i = c->i;
    int is_float = 0;
    if (i < c->n && c->s[i] == '-')
        i++;
    if (i >= c->n || c->s[i] < '0' || c->s[i] > '9')
        return NULL;
    if (c->s[i] == '0')
        i++;
    else
        while (i < c->n && c->s[i] >= '0' && c->s[i] <= '9')
            i++;
    if (i < c->n && c->s[i] == '.') {
        is_float = 1;
        i++;
        Py_ssize_t d = i;
        while (i < c->n && c->s[i] >= '0' && c->s[i] <= '9')
            i++;
        if (i == d)
            return NULL;
    }
    if (i < c->n && (c->s[i] == 'e' || c->s[i] == 'E')) {
        is_float = 1;
        i++;
        if (i < c->n && (c->s[i] == '+' || c->s[i] == '-'))
            i++;
        Py_ssize_t d = i;
        while (i < c->n && c->s[i] >= '0' && c->s[i] <= '9')
            i++;
        if (i == d)
            return NULL;
    }
    if (i - start > 40)  /* longer numbers: left to the strict decoder */
        return NULL;
    char buf[48];
    memcpy(buf, c->s + start, (size_t)(i - start));
    buf[i - start] = '\0';
    c->i = i;
    if (!is_float) {
        if (i - start > 19)
            return NULL;
        return PyLong_FromString(buf, NULL, 10);
    }
    char *stop;
    double v = PyOS_string_to_double(buf, &stop, NULL);
    if (v == -1.0 && PyErr_Occurred())
        return NULL;
    if (*stop != '\0' || !isfinite(v))
        return NULL;
    return PyFloat_FromDouble(v);
}

/* A JSON list of strings: a list, or NULL (no error set: not one). */
static PyObject *
strings(Cur *c)
{
    if (!ch(c, '['))
        return NULL;
    PyObject *out = PyList_New(0);
    if (out == NULL)
        return NULL;
    if (ch(c, ']'))
        return out;
    for (;;) {
        PyObject *s = string(c);
        if (s == NULL || PyList_Append(out, s) < 0) {
            Py_XDECREF(s);
            Py_DECREF(out);
            return NULL;
        }
        Py_DECREF(s);
        if (ch(c, ']'))
            return out;
        if (!ch(c, ',')) {
            Py_DECREF(out);
            return NULL;
        }
    }
}

/* Whether the strings of `keys` (and `more`, if not NULL) are distinct, and (dict keys
   only) their hashes do not collide past `few` as `_recparse._keys` refuses: 1 yes,
   0 no, -1 error. */
static int
distinct(PyObject *keys, PyObject *more, Py_ssize_t few)
{
    Py_ssize_t n = PyList_GET_SIZE(keys) + (more ? PyList_GET_SIZE(more) : 0);
    PyObject *set = PySet_New(keys);
    if (set == NULL)
        return -1;
    if (more != NULL) {
        for (Py_ssize_t k = 0; k < PyList_GET_SIZE(more); k++)
            if (PySet_Add(set, PyList_GET_ITEM(more, k)) < 0) {
                Py_DECREF(set);
                return -1;
            }
    }
    int ok = PySet_GET_SIZE(set) == n;
    Py_DECREF(set);
    if (!ok || more != NULL || n <= few)
        return ok;
    PyObject *hashes = PySet_New(NULL);
    if (hashes == NULL)
        return -1;
    for (Py_ssize_t k = 0; k < n; k++) {
        Py_hash_t h = PyObject_Hash(PyList_GET_ITEM(keys, k));
        PyObject *hv = h == -1 ? NULL : PyLong_FromSsize_t(h);
        if (hv == NULL || PySet_Add(hashes, hv) < 0) {
            Py_XDECREF(hv);
            Py_DECREF(hashes);
            return -1;
        }
        Py_DECREF(hv);
    }
    ok = n - PySet_GET_SIZE(hashes) <= few;
    Py_DECREF(hashes);
    return ok;
}

static inline int
hexval(unsigned char h)
{
    if (h >= '0' && h <= '9')
        return h - '0';
    if (h >= 'a' && h <= 'f')
        return h - 'a' + 10;
    return -1;
}

/* --- the tree's structure, for `_records.build` --------------------------------------

   While the records are parsed, a tree of dicts, lists, tuples, Nones, arrays and
   scalars (no class record, no alias to a node, which `_decode.build` handles) is also
   turned into the records of a `Structure` (`(kind, aux, n, mask)` in pre-order) and
   its leaves: a tensor's name where an array goes (`at`: those positions), else the
   scalar. One stack of open nodes, each with its children's node bits. */

typedef struct {
    Py_ssize_t index;  /* its record in srecs */
    Py_ssize_t n, seen, nodes;
    PyObject *kind, *aux;  /* borrowed kind, owned aux */
    char *bits;
    Py_ssize_t cap;
} Frame;

typedef struct {
    int ok, done;
    Py_ssize_t depth, cap, max_depth;
    Frame *stack;
    PyObject *srecs, *leaves, *at;
    PyObject *last;  /* the last record made (borrowed from srecs), or NULL */
} Plain;

/* The record (kind, aux, n, mask), stolen aux and mask: the last one made when it is
   equal (a list of Nones, of empty lists or of 1-tuples shares one record, as the
   parsed records share theirs: memory of the order of the file), else a new one. */
static PyObject *
plain_record(Plain *p, PyObject *kind, PyObject *aux, Py_ssize_t n, PyObject *mask)
{
    PyObject *last = p->last;
    if (last != NULL && PyTuple_GET_ITEM(last, 0) == kind &&
        PyTuple_GET_ITEM(last, 3) == mask && (mask == Py_None || mask == Py_True) &&
        PyLong_AsSsize_t(PyTuple_GET_ITEM(last, 2)) == n) {
        PyObject *was = PyTuple_GET_ITEM(last, 1);
        int same = was == aux;
        if (!same && PyTuple_Check(was) && PyTuple_Check(aux)) {
            same = PyObject_RichCompareBool(was, aux, Py_EQ);
            if (same < 0) {
                Py_DECREF(aux);
                Py_DECREF(mask);
                return NULL;
            }
        }
        if (same) {
            Py_DECREF(aux);
            Py_DECREF(mask);
            return Py_NewRef(last);
        }
    }
    PyObject *count = PyLong_FromSsize_t(n);
    PyObject *rec = count == NULL ? NULL : PyTuple_Pack(4, kind, aux, count, mask);
    Py_XDECREF(count);
    Py_DECREF(aux);
    Py_DECREF(mask);
    if (rec != NULL)
        p->last = rec;  /* the caller puts it in srecs */
    return rec;
}

static void
plain_stop(Plain *p)
{
    for (Py_ssize_t k = 0; k < p->depth; k++) {
        PyMem_Free(p->stack[k].bits);
        Py_XDECREF(p->stack[k].aux);
    }
    p->depth = 0;
    p->ok = 0;
}

/* A value of the tree: a leaf (kind NULL: `leaf` goes to the leaves, `is_array` says
   whether it is a tensor's name), or a node (`kind`, `aux` stolen, `n` children). -1:
   an error is set. */
static int
plain_value(Plain *p, PyObject *kind, PyObject *aux, Py_ssize_t n, PyObject *leaf, int is_array)
{
    if (!p->ok) {
        Py_XDECREF(aux);
        return 0;
    }
    if (p->done) {  /* a record after the end of the tree: _decode.build says so */
        Py_XDECREF(aux);
        plain_stop(p);
        return 0;
    }
    int is_node = kind != NULL;
    if (p->depth) {
        Frame *top = &p->stack[p->depth - 1];
        if (top->seen == top->cap) {
            Py_ssize_t cap = top->cap ? 2 * top->cap : 8;
            char *bits = PyMem_Realloc(top->bits, (size_t)cap);
            if (bits == NULL) {
                Py_XDECREF(aux);
                PyErr_NoMemory();
                return -1;
            }
            top->bits = bits;
            top->cap = cap;
        }
        top->bits[top->seen++] = (char)is_node;
        top->nodes += is_node;
    }
    if (!is_node) {
        if (is_array) {
            PyObject *k = PyLong_FromSsize_t(PyList_GET_SIZE(p->leaves));
            if (k == NULL || PyList_Append(p->at, k) < 0) {
                Py_XDECREF(k);
                return -1;
            }
            Py_DECREF(k);
        }
        if (PyList_Append(p->leaves, leaf) < 0)
            return -1;
    }
    else {
        Py_ssize_t index = PyList_GET_SIZE(p->srecs);
        if (n) {
            if (p->depth >= p->max_depth) {  /* too deep: _decode.build says so */
                Py_DECREF(aux);
                plain_stop(p);
                return 0;
            }
            if (p->depth == p->cap) {
                Py_ssize_t cap = p->cap ? 2 * p->cap : 16;
                Frame *stack = PyMem_Realloc(p->stack, (size_t)cap * sizeof(Frame));
                if (stack == NULL) {
                    Py_DECREF(aux);
                    PyErr_NoMemory();
                    return -1;
                }
                p->stack = stack;
                p->cap = cap;
            }
            if (PyList_Append(p->srecs, Py_None) < 0) {
                Py_DECREF(aux);
                return -1;
            }
            Frame f = {index, n, 0, 0, kind, aux, NULL, 0};
            p->stack[p->depth++] = f;
            return 0;
        }
        PyObject *rec = plain_record(p, kind, aux, 0, Py_NewRef(Py_None));
        if (rec == NULL || PyList_Append(p->srecs, rec) < 0) {
            Py_XDECREF(rec);
            return -1;
        }
        Py_DECREF(rec);
    }
    /* close the nodes this value completes */
    while (p->depth) {
        Frame *top = &p->stack[p->depth - 1];
        if (top->seen < top->n)
            return 0;
        PyObject *mask;
        if (top->nodes == 0)
            mask = Py_NewRef(Py_None);
        else if (top->nodes == top->n)
            mask = Py_NewRef(Py_True);
        else {
            mask = PyTuple_New(top->n);
            if (mask == NULL)
                return -1;
            for (Py_ssize_t k = 0; k < top->n; k++)
                PyTuple_SET_ITEM(mask, k, Py_NewRef(top->bits[k] ? Py_True : Py_False));
        }
        PyObject *aux = top->aux;
        top->aux = NULL;
        PyObject *rec = plain_record(p, top->kind, aux, top->n, mask);
        if (rec == NULL)
            return -1;
        PyList_SetItem(p->srecs, top->index, rec);  /* steals rec */
        PyMem_Free(top->bits);
        p->depth--;
    }
    p->done = 1;
    return 0;
}

/* ctx: (Rec, none_rec, seq_recs, empty_dict_rec, few_keys, dict_kind, list_kind,
   tuple_kind, none_kind, max_depth, columns): with `columns` false, no Structure
   records are made (inspect and the template loads read the records only). */
static PyObject *
scan_records(PyObject *self, PyObject *args)
{
    PyObject *text, *none_rec, *seq_recs, *empty_dict_rec;
    PyObject *dict_kind, *list_kind, *tuple_kind, *none_kind;
    PyTypeObject *rec_type;
    Py_ssize_t max_nodes, few, max_depth;
    int want_columns;
    if (!PyArg_ParseTuple(args, "Un(O!OO!OnOOOOnp):records", &text, &max_nodes, &PyType_Type,
                          &rec_type, &none_rec, &PyDict_Type, &seq_recs, &empty_dict_rec, &few,
                          &dict_kind, &list_kind, &tuple_kind, &none_kind, &max_depth,
                          &want_columns))
        return NULL;
    if (!PyType_IsSubtype(rec_type, &PyTuple_Type)) {
        PyErr_SetString(PyExc_TypeError, "records: Rec must be a tuple subclass");
        return NULL;
    }
    if (!PyUnicode_IS_ASCII(text))
        Py_RETURN_NONE;
    Cur c = {PyUnicode_1BYTE_DATA(text), 0, PyUnicode_GET_LENGTH(text)};
    if (!ch(&c, '['))
        Py_RETURN_NONE;
    PyObject *recs = PyList_New(0), *names = PyList_New(0), *crcs = PyList_New(0);
    PyObject *targets = PySet_New(NULL);
    PyObject *tags[7] = {NULL};
    PyObject *last = NULL, *last_rec = NULL;  /* borrowed: the previous plain scalar */
    static const char *tag_text[7] = {"A", "S", "N", "L", "T", "D", "C"};
    for (int k = 0; k < 7; k++)
        tags[k] = PyUnicode_InternFromString(tag_text[k]);
    PyObject *at_tag = PyUnicode_InternFromString("@");
    Plain plain = {want_columns, 0, 0, 0, max_depth, NULL, PyList_New(0), PyList_New(0),
                   PyList_New(0), NULL};
    if (plain.srecs == NULL || plain.leaves == NULL || plain.at == NULL)
        goto no;
    if (recs == NULL || names == NULL || crcs == NULL || targets == NULL || at_tag == NULL)
        goto no;
    for (int k = 0; k < 7; k++)
        if (tags[k] == NULL)
            goto no;
    Py_ssize_t j = 0;
    for (;; j++) {
        if (j >= max_nodes)
            goto no;
        PyObject *rec = NULL;
        if (!LIT(&c, "[\"") || c.i + 2 > c.n || c.s[c.i + 1] != '"')
            goto no;
        unsigned char tag = c.s[c.i];
        c.i += 2;
        if (tag == 'A') {
            PyObject *name = NULL;
            if (ch(&c, ','))
                name = string(&c);
            if (name == NULL)
                goto no;
            if (!LIT(&c, ",\"") || c.n - c.i < 10 || c.s[c.i + 8] != '"' || c.s[c.i + 9] != ']') {
                Py_DECREF(name);
                goto no;
            }
            uint32_t v = 0;
            for (int d = 0; d < 8; d++) {
                int h = hexval(c.s[c.i + d]);
                if (h < 0) {
                    Py_DECREF(name);
                    goto no;
                }
                v = (v << 4) | (uint32_t)h;
            }
            c.i += 10;
            PyObject *crc = PyLong_FromUnsignedLong(v);
            if (crc == NULL || PyList_Append(crcs, crc) < 0 || PyList_Append(names, name) < 0) {
                Py_XDECREF(crc);
                Py_DECREF(name);
                goto no;
            }
            Py_DECREF(crc);
            if (plain_value(&plain, NULL, NULL, 0, name, 1) < 0) {
                Py_DECREF(name);
                goto no;
            }
            PyObject *zero = PyLong_FromLong(0);
            Py_INCREF(tags[0]);
            PyObject *items[3] = {tags[0], zero, name};
            rec = named(rec_type, 3, items);
        }
        else if (tag == 'S') {
            PyObject *v = NULL;
            if (ch(&c, ','))
                v = scalar(&c);
            if (v == NULL || !ch(&c, ']') || plain_value(&plain, NULL, NULL, 0, v, 0) < 0) {
                Py_XDECREF(v);
                goto no;
            }
            if (v == last) {
                Py_DECREF(v);
                Py_INCREF(last_rec);
                rec = last_rec;
            }
            else {
                PyObject *zero = PyLong_FromLong(0);
                Py_INCREF(tags[1]);
                PyObject *items[3] = {tags[1], zero, v};
                rec = named(rec_type, 3, items);
                last = v;  /* held by rec */
                last_rec = rec;
            }
        }
        else if (tag == 'N') {
            if (!ch(&c, ']') || plain_value(&plain, none_kind, Py_NewRef(Py_None), 0, NULL, 0) < 0)
                goto no;
            Py_INCREF(none_rec);
            rec = none_rec;
        }
        else if (tag == 'L' || tag == 'T') {
            int64_t n;
            if (!ch(&c, ',') || !uint18(&c, &n) || !ch(&c, ']'))
                goto no;
            PyObject *t = tags[tag == 'L' ? 3 : 4];
            if (n > PY_SSIZE_T_MAX / 2) {
                plain_stop(&plain);
            }
            else if (plain_value(&plain, tag == 'L' ? list_kind : tuple_kind, Py_NewRef(Py_None),
                                 (Py_ssize_t)n, NULL, 0) < 0)
                goto no;
            PyObject *count = PyLong_FromLongLong(n);
            if (count == NULL)
                goto no;
            PyObject *key = PyTuple_Pack(2, t, count);
            if (key == NULL) {
                Py_DECREF(count);
                goto no;
            }
            rec = PyDict_GetItemWithError(seq_recs, key);
            Py_DECREF(key);
            if (rec != NULL) {
                Py_INCREF(rec);
                Py_DECREF(count);
            }
            else if (PyErr_Occurred()) {
                Py_DECREF(count);
                goto no;
            }
            else {
                Py_INCREF(t);
                Py_INCREF(Py_None);
                PyObject *items[3] = {t, count, Py_None};
                rec = named(rec_type, 3, items);
            }
        }
        else if (tag == 'D') {
            if (!ch(&c, ','))
                goto no;
            PyObject *keys = strings(&c);
            if (keys == NULL)
                goto no;
            if (!ch(&c, ']')) {
                Py_DECREF(keys);
                goto no;
            }
            if (plain.ok) {
                PyObject *kt = PyList_AsTuple(keys);
                PyObject *aux = kt == NULL ? NULL : PyTuple_Pack(2, kt, Py_None);
                Py_XDECREF(kt);
                if (aux == NULL ||
                    plain_value(&plain, dict_kind, aux, PyList_GET_SIZE(keys), NULL, 0) < 0) {
                    Py_DECREF(keys);
                    goto no;
                }
            }
            if (PyList_GET_SIZE(keys) == 0) {
                Py_DECREF(keys);
                Py_INCREF(empty_dict_rec);
                rec = empty_dict_rec;
            }
            else {
                int ok = distinct(keys, NULL, few);
                if (ok != 1) {
                    Py_DECREF(keys);
                    goto no;
                }
                PyObject *count = PyLong_FromSsize_t(PyList_GET_SIZE(keys));
                PyObject *data = PyTuple_Pack(2, keys, Py_None);
                Py_DECREF(keys);
                if (count == NULL || data == NULL) {
                    Py_XDECREF(count);
                    Py_XDECREF(data);
                    goto no;
                }
                Py_INCREF(tags[5]);
                PyObject *items[3] = {tags[5], count, data};
                rec = named(rec_type, 3, items);
            }
        }
        else if (tag == 'C') {
            PyObject *name = NULL, *kids = NULL, *kept = NULL;
            int64_t version = 0;
            if (ch(&c, ','))
                name = string(&c);
            if (name == NULL)
                goto no;
            if (ch(&c, ',') && uint18(&c, &version) && version >= 1 && ch(&c, ','))
                kids = strings(&c);
            if (kids != NULL && ch(&c, ','))
                kept = strings(&c);
            if (kept == NULL || !ch(&c, ']') || distinct(kids, kept, few) != 1) {
                Py_DECREF(name);
                Py_XDECREF(kids);
                Py_XDECREF(kept);
                goto no;
            }
            PyObject *count =
                PyLong_FromSsize_t(PyList_GET_SIZE(kids) + PyList_GET_SIZE(kept));
            PyObject *ver = PyLong_FromLongLong(version);
            PyObject *data = NULL;
            if (count != NULL && ver != NULL)
                data = PyTuple_Pack(4, name, ver, kids, kept);
            Py_DECREF(name);
            Py_DECREF(kids);
            Py_DECREF(kept);
            Py_XDECREF(ver);
            if (data == NULL) {
                Py_XDECREF(count);
                goto no;
            }
            plain_stop(&plain);  /* a class: _decode.build fits its fields */
            Py_INCREF(tags[6]);
            PyObject *items[3] = {tags[6], count, data};
            rec = named(rec_type, 3, items);
        }
        else if (tag == '@') {
            int64_t k;
            if (!ch(&c, ',') || !uint18(&c, &k) || !ch(&c, ']') || k >= j)
                goto no;
            PyObject *target = PyList_GET_ITEM(recs, (Py_ssize_t)k);
            PyObject *ttag = PyTuple_GET_ITEM(target, 0);
            /* an alias to a scalar, a tuple, None or an alias: left to _parse's message */
            if (ttag == tags[1] || ttag == tags[4] || ttag == tags[2] || ttag == at_tag)
                goto no;
            if (ttag == tags[0]) {  /* a shared array: the same name, the same array */
                if (plain_value(&plain, NULL, NULL, 0, PyTuple_GET_ITEM(target, 2), 1) < 0)
                    goto no;
            }
            else  /* a shared node: _decode.build keeps it shared */
                plain_stop(&plain);
            PyObject *kv = PyLong_FromLongLong(k);
            if (kv == NULL || PySet_Add(targets, kv) < 0) {
                Py_XDECREF(kv);
                goto no;
            }
            PyObject *zero = PyLong_FromLong(0);
            Py_INCREF(at_tag);
            PyObject *items[3] = {at_tag, zero, kv};
            rec = named(rec_type, 3, items);
        }
        else
            goto no;
        if (rec == NULL || PyList_Append(recs, rec) < 0) {
            Py_XDECREF(rec);
            goto no;
        }
        Py_DECREF(rec);
        if (ch(&c, ']'))
            break;
        if (!ch(&c, ','))
            goto no;
    }
    if (c.i != c.n)
        goto no;
    for (int k = 0; k < 7; k++)
        Py_DECREF(tags[k]);
    Py_DECREF(at_tag);
    PyObject *columns = Py_None;
    if (plain.ok && plain.done) {  /* a list: _decode.build takes the leaves out */
        columns = PyList_New(3);
        if (columns != NULL) {
            PyList_SET_ITEM(columns, 0, Py_NewRef(plain.srecs));
            PyList_SET_ITEM(columns, 1, Py_NewRef(plain.leaves));
            PyList_SET_ITEM(columns, 2, Py_NewRef(plain.at));
        }
    }
    else
        Py_INCREF(columns);
    plain_stop(&plain);
    PyMem_Free(plain.stack);
    Py_DECREF(plain.srecs);
    Py_DECREF(plain.leaves);
    Py_DECREF(plain.at);
    if (columns == NULL)
        goto no_plain;
    PyObject *out = PyTuple_Pack(5, recs, names, crcs, targets, columns);
    Py_DECREF(columns);
    Py_DECREF(recs);
    Py_DECREF(names);
    Py_DECREF(crcs);
    Py_DECREF(targets);
    return out;
no:
    for (int k = 0; k < 7; k++)
        Py_XDECREF(tags[k]);
    Py_XDECREF(at_tag);
    plain_stop(&plain);
    PyMem_Free(plain.stack);
    Py_XDECREF(plain.srecs);
    Py_XDECREF(plain.leaves);
    Py_XDECREF(plain.at);
no_plain:
    Py_XDECREF(recs);
    Py_XDECREF(names);
    Py_XDECREF(crcs);
    Py_XDECREF(targets);
    return give_up();
}

/* --- bound_json's counts -------------------------------------------------------------- */

/* `_layout._tree_span` in one pass: the span of the tree string's content in a header
   (between `"containers.tree":"` and the first `]"` after it, kept only when every
   quote in it is escaped and no backslash is escaped before a quote), or (0, 0);
   None for a text outside ASCII (the plain twin decides). */
static PyObject *
scan_tree_span(PyObject *self, PyObject *arg)
{
    static const char at_text[] = "\"containers.tree\":\"";
    if (!PyUnicode_Check(arg)) {
        PyErr_SetString(PyExc_TypeError, "tree_span: a str");
        return NULL;
    }
    if (!PyUnicode_IS_ASCII(arg))
        Py_RETURN_NONE;
    const unsigned char *s = PyUnicode_1BYTE_DATA(arg);
    Py_ssize_t n = PyUnicode_GET_LENGTH(arg), m = (Py_ssize_t)sizeof(at_text) - 1;
    const unsigned char *hit = memmem(s, (size_t)n, at_text, (size_t)m);
    if (hit == NULL)
        return Py_BuildValue("(nn)", (Py_ssize_t)0, (Py_ssize_t)0);
    Py_ssize_t a = hit - s + m, b = -1;
    for (Py_ssize_t i = a; i + 1 < n; i++) {
        if (s[i] == ']' && s[i + 1] == '"') {
            b = i + 1;
            break;
        }
    }
    if (b < 0)
        return Py_BuildValue("(nn)", (Py_ssize_t)0, (Py_ssize_t)0);
    /* every quote in [a, b) escaped, none after an escaped backslash (str.count's
       occurrences lie wholly inside the span) */
    for (Py_ssize_t i = a; i < b; i++) {
        if (s[i] != '"')
            continue;
        if (i == a || s[i - 1] != '\\' || (i - 2 >= a && s[i - 2] == '\\'))
            return Py_BuildValue("(nn)", (Py_ssize_t)0, (Py_ssize_t)0);
    }
    return Py_BuildValue("(nn)", a, b);
}

/* The counts of `[` and `{`, `,`, `:` and `"` in a text outside [a, b): what
   `_strictjson.bound_json` first counts with `str.count` (its plain twin), in one
   pass. None for a text outside ASCII. */
static PyObject *
scan_counts(PyObject *self, PyObject *args)
{
    PyObject *text;
    Py_ssize_t a, b;
    if (!PyArg_ParseTuple(args, "Unn:counts", &text, &a, &b))
        return NULL;
    if (!PyUnicode_IS_ASCII(text))
        Py_RETURN_NONE;
    const unsigned char *s = PyUnicode_1BYTE_DATA(text);
    Py_ssize_t n = PyUnicode_GET_LENGTH(text);
    if (a < 0) a = 0;
    if (a > n) a = n;
    if (b < a) b = a;
    if (b > n) b = n;
    Py_ssize_t counts[4] = {0, 0, 0, 0};
    Py_ssize_t ranges[2][2] = {{0, a}, {b, n}};
    for (int r = 0; r < 2; r++) {
        Py_ssize_t opens = 0, commas = 0, colons = 0, quotes = 0;
        for (Py_ssize_t i = ranges[r][0]; i < ranges[r][1]; i++) {
            unsigned char x = s[i];
            opens += (x == '[') | (x == '{');
            commas += x == ',';
            colons += x == ':';
            quotes += x == '"';
        }
        counts[0] += opens;
        counts[1] += commas;
        counts[2] += colons;
        counts[3] += quotes;
    }
    return Py_BuildValue("(nnnn)", counts[0], counts[1], counts[2], counts[3]);
}

/* --- the write side: a header's tensor entries ------------------------------------------ */

static char *
put_int(char *w, int64_t v)
{
    char buf[24];
    int k = 0;
    do {
        buf[k++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    while (k)
        *w++ = buf[--k];
    return w;
}

static Py_ssize_t
int_len(int64_t v)
{
    Py_ssize_t k = 1;
    while (v >= 10) {
        v /= 10;
        k++;
    }
    return k;
}

/* `Plan.layout`'s entries in one pass: for each index of `order`, the array's name
   (printable ASCII, no quote or backslash: else None, and the plain twin
   renders them with json's escapes), the text `middle(array)` gives for its dtype and
   shape (asked again only when they change), and its offsets; joined by commas. */
static PyObject *
scan_entries(PyObject *self, PyObject *args)
{
    PyObject *arrays, *names, *order, *middle;
    if (!PyArg_ParseTuple(args, "O!O!O!O:entries", &PyList_Type, &arrays, &PyList_Type, &names,
                          &PyList_Type, &order, &middle))
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(order), total = 0, k;
    PyObject **mids = PyMem_Calloc((size_t)(n ? n : 1), sizeof(PyObject *));
    PyObject **nms = PyMem_Calloc((size_t)(n ? n : 1), sizeof(PyObject *));
    int64_t *ends = PyMem_Calloc((size_t)(n ? n : 1), sizeof(int64_t));
    PyObject *last_dtype = NULL, *last_shape = NULL, *last_mid = NULL, *out = NULL;
    int64_t pos = 0;
    int none = 0;
    if (mids == NULL || nms == NULL || ends == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (k = 0; k < n; k++) {
        Py_ssize_t i = PyLong_AsSsize_t(PyList_GET_ITEM(order, k));
        if (i == -1 && PyErr_Occurred())
            goto done;
        if (i < 0 || i >= PyList_GET_SIZE(arrays) || i >= PyList_GET_SIZE(names)) {
            PyErr_SetString(PyExc_IndexError, "entries: an index out of range");
            goto done;
        }
        PyObject *a = PyList_GET_ITEM(arrays, i), *name = PyList_GET_ITEM(names, i);
        if (!PyUnicode_Check(name) || !PyUnicode_IS_ASCII(name)) {
            none = 1;
            goto done;
        }
        const unsigned char *t = PyUnicode_1BYTE_DATA(name);
        Py_ssize_t len = PyUnicode_GET_LENGTH(name);
        for (Py_ssize_t j = 0; j < len; j++)
            if (t[j] < 0x20 || t[j] >= 0x7f || t[j] == '"' || t[j] == '\\') {
                none = 1;
                goto done;
            }
        PyObject *dtype = PyObject_GetAttrString(a, "dtype");
        PyObject *shape = dtype == NULL ? NULL : PyObject_GetAttrString(a, "shape");
        PyObject *nbytes = shape == NULL ? NULL : PyObject_GetAttrString(a, "nbytes");
        if (nbytes == NULL) {
            Py_XDECREF(dtype);
            Py_XDECREF(shape);
            goto done;
        }
        long long size = PyLong_AsLongLong(nbytes);
        Py_DECREF(nbytes);
        int same = 0;
        if (last_dtype == dtype) {
            same = PyObject_RichCompareBool(last_shape, shape, Py_EQ);
            if (same < 0) {
                Py_DECREF(dtype);
                Py_DECREF(shape);
                goto done;
            }
        }
        if (!same) {
            PyObject *mid = PyObject_CallOneArg(middle, a);
            if (mid == NULL || !PyUnicode_Check(mid) || !PyUnicode_IS_ASCII(mid)) {
                if (mid != NULL && !PyErr_Occurred())
                    PyErr_SetString(PyExc_TypeError, "entries: middle() must give ASCII text");
                Py_XDECREF(mid);
                Py_DECREF(dtype);
                Py_DECREF(shape);
                goto done;
            }
            Py_XSETREF(last_mid, mid);
            Py_XSETREF(last_dtype, Py_NewRef(dtype));
            Py_XSETREF(last_shape, Py_NewRef(shape));
        }
        Py_DECREF(dtype);
        Py_DECREF(shape);
        if ((size == -1 && PyErr_Occurred()) || size < 0)
            goto done;
        mids[k] = Py_NewRef(last_mid);
        nms[k] = name;
        int64_t begin = pos;
        pos += size;
        ends[k] = pos;
        total += len + 2 + PyUnicode_GET_LENGTH(last_mid) + int_len(begin) + 1 + int_len(pos) + 2;
        total += k > 0;  /* the comma before it */
    }
    out = PyUnicode_New(total, 127);
    if (out == NULL)
        goto done;
    char *w = (char *)PyUnicode_1BYTE_DATA(out);
    pos = 0;
    for (k = 0; k < n; k++) {
        if (k)
            *w++ = ',';
        *w++ = '"';
        Py_ssize_t len = PyUnicode_GET_LENGTH(nms[k]);
        memcpy(w, PyUnicode_1BYTE_DATA(nms[k]), (size_t)len);
        w += len;
        *w++ = '"';
        len = PyUnicode_GET_LENGTH(mids[k]);
        memcpy(w, PyUnicode_1BYTE_DATA(mids[k]), (size_t)len);
        w += len;
        w = put_int(w, pos);
        *w++ = ',';
        w = put_int(w, ends[k]);
        *w++ = ']';
        *w++ = '}';
        pos = ends[k];
    }
done:
    if (mids != NULL)
        for (k = 0; k < n; k++)
            Py_XDECREF(mids[k]);
    PyMem_Free(mids);
    PyMem_Free(nms);
    PyMem_Free(ends);
    Py_XDECREF(last_dtype);
    Py_XDECREF(last_shape);
    Py_XDECREF(last_mid);
    if (out == NULL && none && !PyErr_Occurred())
        Py_RETURN_NONE;
    return out;
}

static PyMethodDef scan_methods[] = {
    {"entries", scan_entries, METH_VARARGS,
     "entries(arrays, names, order, middle) -> str | None"},
    {"tree_span", scan_tree_span, METH_O, "tree_span(text) -> (a, b) | None"},
    {"counts", scan_counts, METH_VARARGS,
     "counts(text, a, b) -> (opens, commas, colons, quotes) | None"},
    {"header", scan_header, METH_VARARGS,
     "header(text, data_size, max_tensors, max_ndim, dtypes, tensor) -> (metadata, "
     "tensors) | None"},
    {"records", scan_records, METH_VARARGS,
     "records(text, max_nodes, (Rec, none_rec, seq_recs, empty_dict_rec, few_keys, dict_kind, "
     "list_kind, tuple_kind, none_kind, max_depth, columns)) -> (recs, names, crcs, targets, "
     "columns) | None"},
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
