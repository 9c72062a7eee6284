/* containers._scan, the tree string: `records(text, max_nodes, ctx)`, the records of a
   tree string as `_encode` writes it, parsed in one pass (`_recparse._records_usual`
   is its plain twin), and for a tree of builtins the records of its `Structure`. What
   the module accepts and guarantees is said in _scan.c. */

#include "_scan.h"

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
   scalars (no alias to a node, which `_decode.build` handles) is also turned into the
   records of a `Structure` (`(kind, aux, n, mask)` in pre-order) and its leaves: a
   tensor's name where an array goes (`at`: those positions), else the scalar. One
   stack of open nodes, each with its children's node bits.

   Declared containers too, when the caller passes `resolve` (`_evolve.exact_kind`):
   called once per class name met, with the first record's (name, version, children,
   kept), it gives the class's NodeKind when `_decode.build` would rebuild such a
   record at once (`_exact`: a registered container at today's version and fields),
   else None. A class record then makes a node of its children whose aux is the tuple
   of its kept values, which must be scalars (a kept node or array, a record of the
   name with other fields, or None from `resolve`: no columns, `_decode.build` goes
   record by record and says what is wrong). */

typedef struct {
    Py_ssize_t index;  /* its record in srecs */
    Py_ssize_t n, seen, nodes;
    PyObject *kind, *aux;  /* borrowed kind, owned aux */
    char *bits;
    Py_ssize_t cap;
    Py_ssize_t kept;  /* a class: its last `kept` values are its aux; else -1 */
} Frame;

typedef struct {
    int ok, done;
    Py_ssize_t depth, cap, max_depth;
    Frame *stack;
    PyObject *srecs, *leaves, *at;
    PyObject *last;  /* the last record made (borrowed from srecs), or NULL */
    PyObject *resolve;  /* borrowed: `_evolve.exact_kind`, or NULL (a class: no columns) */
    PyObject *classes;  /* name -> (version, children, kept, kind or None), or NULL */
} Plain;

/* Whether the kept values `a` and `b` (tuples) are the same for a rebuild: item by
   item the same object, or equal str (1 == True == 1.0 and 0.0 == -0.0 are not). */
static int
same_kept(PyObject *a, PyObject *b)
{
    Py_ssize_t n = PyTuple_GET_SIZE(a);
    if (PyTuple_GET_SIZE(b) != n)
        return 0;
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *x = PyTuple_GET_ITEM(a, k), *y = PyTuple_GET_ITEM(b, k);
        if (x != y && !(PyUnicode_CheckExact(x) && PyUnicode_CheckExact(y) &&
                        PyUnicode_Compare(x, y) == 0))
            return 0;
    }
    return 1;
}

/* The record (kind, aux, n, mask), stolen aux and mask: the last one made when it is
   equal (a list of Nones, of empty lists or of 1-tuples shares one record, as the
   parsed records share theirs: memory of the order of the file), else a new one. */
static PyObject *
plain_record(Plain *p, PyObject *kind, PyObject *aux, Py_ssize_t n, PyObject *mask, int is_class)
{
    PyObject *last = p->last;
    if (last != NULL && PyTuple_GET_ITEM(last, 0) == kind &&
        PyTuple_GET_ITEM(last, 3) == mask && (mask == Py_None || mask == Py_True) &&
        PyLong_AsSsize_t(PyTuple_GET_ITEM(last, 2)) == n) {
        PyObject *was = PyTuple_GET_ITEM(last, 1);
        int same = was == aux;
        if (!same && is_class)
            same = same_kept(was, aux);
        else if (!same && PyTuple_Check(was) && PyTuple_Check(aux)) {
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

/* items, a buffer of *cap items of size bytes, reallocated twice as long (first items
   when empty; *cap updated); NULL with MemoryError set when that fails (items is then
   unchanged). */
static void *
grow(void *items, Py_ssize_t *cap, Py_ssize_t first, size_t size)
{
    Py_ssize_t n = *cap ? 2 * *cap : first;
    void *more = PyMem_Realloc(items, (size_t)n * size);
    if (more == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    *cap = n;
    return more;
}

/* A value of the tree: a leaf (kind NULL: `leaf` goes to the leaves, `is_array` says
   whether it is a tensor's name), or a node (`kind`, `aux` stolen, `n` children, of
   which the last `kept` are a class's kept values, or -1: not a class). -1: an error
   is set. */
static int
plain_value(Plain *p, PyObject *kind, PyObject *aux, Py_ssize_t n, PyObject *leaf, int is_array,
            Py_ssize_t kept)
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
            char *bits = grow(top->bits, &top->cap, 8, 1);
            if (bits == NULL) {
                Py_XDECREF(aux);
                return -1;
            }
            top->bits = bits;
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
                Py_XDECREF(aux);
                plain_stop(p);
                return 0;
            }
            if (p->depth == p->cap) {
                Frame *stack = grow(p->stack, &p->cap, 16, sizeof(Frame));
                if (stack == NULL) {
                    Py_XDECREF(aux);
                    return -1;
                }
                p->stack = stack;
            }
            if (PyList_Append(p->srecs, Py_None) < 0) {
                Py_XDECREF(aux);
                return -1;
            }
            Frame f = {index, n, 0, 0, kind, aux, NULL, 0, kept};
            p->stack[p->depth++] = f;
            return 0;
        }
        PyObject *rec = plain_record(p, kind, aux, 0, Py_NewRef(Py_None), kept >= 0);
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
        Py_ssize_t n = top->n;
        if (top->kept >= 0) {  /* a class: its kept values, the last leaves, are its aux */
            Py_ssize_t kept = top->kept, end = PyList_GET_SIZE(p->leaves);
            n -= kept;
            Py_ssize_t n_at = PyList_GET_SIZE(p->at);
            int scalars = 1;
            for (Py_ssize_t k = n; k < top->n; k++)
                scalars &= !top->bits[k];
            if (scalars && kept && n_at) {  /* no array among them */
                Py_ssize_t last = PyLong_AsSsize_t(PyList_GET_ITEM(p->at, n_at - 1));
                if (last == -1 && PyErr_Occurred())
                    return -1;
                scalars = last < end - kept;
            }
            if (!scalars) {
                plain_stop(p);
                return 0;
            }
            PyObject *values = PyList_GetSlice(p->leaves, end - kept, end);
            PyObject *aux = values == NULL ? NULL : PyList_AsTuple(values);
            Py_XDECREF(values);
            if (aux == NULL || PyList_SetSlice(p->leaves, end - kept, end, NULL) < 0) {
                Py_XDECREF(aux);
                return -1;
            }
            Py_XSETREF(top->aux, aux);
        }
        PyObject *mask;
        if (top->nodes == 0)
            mask = Py_NewRef(Py_None);
        else if (top->nodes == n)
            mask = Py_NewRef(Py_True);
        else {
            mask = PyTuple_New(n);
            if (mask == NULL)
                return -1;
            for (Py_ssize_t k = 0; k < n; k++)
                PyTuple_SET_ITEM(mask, k, Py_NewRef(top->bits[k] ? Py_True : Py_False));
        }
        PyObject *aux = top->aux;
        top->aux = NULL;
        PyObject *rec = plain_record(p, top->kind, aux, n, mask, top->kept >= 0);
        if (rec == NULL)
            return -1;
        PyList_SetItem(p->srecs, top->index, rec);  /* steals rec */
        PyMem_Free(top->bits);
        p->depth--;
    }
    p->done = 1;
    return 0;
}

/* A record's text after its tag, up to its closing bracket: where it starts, its length. */
typedef struct {
    Py_ssize_t at, len;
} Text;

/* Whether the text at the cursor repeats `t` (then passed over): a record with the same
   text after the same tag is the same record, so it shares that record's objects, as
   equal scalars do (a list of containers: one C record and one kept str for all).
   Texts are self-delimiting: the one parse of `t` ended at its closing bracket. */
static inline int
repeats(Cur *c, Text t)
{
    if (t.len == 0 || c->n - c->i < t.len || memcmp(c->s + c->i, c->s + t.at, (size_t)t.len) != 0)
        return 0;
    c->i += t.len;
    return 1;
}

/* An S record made new, its text and value: a later S record of that text is it. */
#define RECENT 8
typedef struct {
    Text text;
    PyObject *value, *rec;
} Recent;

/* A class record (its data: name, version, children, kept) as a node of the
   Structure, when `resolve` vouches for its fields (see Plain); else no columns.
   -1: an error is set. */
static int
plain_class(Plain *p, PyObject *data)
{
    if (!p->ok)
        return 0;
    if (p->resolve == NULL) {  /* a class: _decode.build fits its fields */
        plain_stop(p);
        return 0;
    }
    PyObject *name = PyTuple_GET_ITEM(data, 0), *version = PyTuple_GET_ITEM(data, 1);
    PyObject *kids = PyTuple_GET_ITEM(data, 2), *kept = PyTuple_GET_ITEM(data, 3);
    if (p->classes == NULL && (p->classes = PyDict_New()) == NULL)
        return -1;
    PyObject *known = PyDict_GetItemWithError(p->classes, name);  /* borrowed */
    if (known == NULL) {
        if (PyErr_Occurred())
            return -1;
        PyObject *kind = PyObject_CallFunctionObjArgs(p->resolve, name, version, kids, kept, NULL);
        if (kind == NULL)
            return -1;
        known = PyTuple_Pack(4, version, kids, kept, kind);
        Py_DECREF(kind);
        if (known == NULL)
            return -1;
        int bad = PyDict_SetItem(p->classes, name, known);
        Py_DECREF(known);  /* held by classes */
        if (bad < 0)
            return -1;
    }
    else {  /* only one set of fields can be today's */
        for (int k = 0; k < 3; k++) {
            int same = PyObject_RichCompareBool(PyTuple_GET_ITEM(known, k),
                                                PyTuple_GET_ITEM(data, k + 1), Py_EQ);
            if (same < 0)
                return -1;
            if (!same) {
                plain_stop(p);
                return 0;
            }
        }
    }
    PyObject *kind = PyTuple_GET_ITEM(known, 3);
    if (kind == Py_None) {
        plain_stop(p);
        return 0;
    }
    Py_ssize_t nk = PyList_GET_SIZE(kids), nkept = PyList_GET_SIZE(kept);
    PyObject *aux = nk + nkept ? NULL : PyTuple_New(0);
    if (nk + nkept == 0 && aux == NULL)
        return -1;
    return plain_value(p, kind, aux, nk + nkept, NULL, 0, nkept);
}

/* The name of an A record at the cursor (its opening quote not consumed), taken from
   `known` (a dict whose keys are the file's tensor names in file order; `*pos` its
   PyDict_Next position) when the next key's text is there as it stands (no escape,
   quote or control character in it, a quote after it): the same str object as the
   layout's, so that comparing the tree's names to the file's (`_wants`, `build`) and
   looking them up find identical objects. Else `string`'s answer. */
static PyObject *
tensor_name(Cur *c, PyObject *known, Py_ssize_t *pos)
{
    PyObject *key;
    if (known != NULL && c->i < c->n && c->s[c->i] == '"' && PyDict_Next(known, pos, &key, NULL) &&
        PyUnicode_Check(key) && PyUnicode_IS_ASCII(key)) {
        Py_ssize_t len = PyUnicode_GET_LENGTH(key), at = c->i + 1;
        const unsigned char *k = PyUnicode_1BYTE_DATA(key);
        if (c->n - at > len && c->s[at + len] == '"' && memcmp(c->s + at, k, (size_t)len) == 0) {
            Py_ssize_t i = 0;
            while (i < len && k[i] >= 0x20 && k[i] != '"' && k[i] != '\\')
                i++;
            if (i == len) {
                c->i = at + len + 1;
                return Py_NewRef(key);
            }
        }
    }
    return string(c);
}

/* ctx: (Rec, none_rec, seq_recs, empty_dict_rec, few_keys, dict_kind, list_kind,
   tuple_kind, none_kind, max_depth, columns): with `columns` false, no Structure
   records are made (inspect and the template loads read the records only). `known`
   (optional): a dict whose keys are the file's tensor names in file order, or None
   (`tensor_name`). `resolve` (optional): `_evolve.exact_kind`, for the columns of a
   tree of declared containers (see Plain), or None. */
SCAN_HIDDEN PyObject *
scan_records(PyObject *Py_UNUSED(self), PyObject *args)
{
    PyObject *text, *none_rec, *seq_recs, *empty_dict_rec;
    PyObject *dict_kind, *list_kind, *tuple_kind, *none_kind, *known = Py_None;
    PyObject *resolve = Py_None;
    PyTypeObject *rec_type;
    Py_ssize_t max_nodes, few, max_depth, known_pos = 0;
    int want_columns;
    if (!PyArg_ParseTuple(args, "Un(O!OO!OnOOOOnp)|OO:records", &text, &max_nodes, &PyType_Type,
                          &rec_type, &none_rec, &PyDict_Type, &seq_recs, &empty_dict_rec, &few,
                          &dict_kind, &list_kind, &tuple_kind, &none_kind, &max_depth,
                          &want_columns, &known, &resolve))
        return NULL;
    if (known != Py_None && !PyDict_CheckExact(known)) {
        PyErr_SetString(PyExc_TypeError, "records: known must be a dict or None");
        return NULL;
    }
    if (known == Py_None)
        known = NULL;
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
    PyObject *last_class = NULL;              /* borrowed: the previous new C record */
    Text class_text = {0, 0};                 /* its text (after the tag) */
    Recent recent[RECENT];                    /* the last new S records (borrowed) */
    int n_recent = 0, next_recent = 0;
    static const char *tag_text[7] = {"A", "S", "N", "L", "T", "D", "C"};
    for (int k = 0; k < 7; k++)
        tags[k] = PyUnicode_InternFromString(tag_text[k]);
    PyObject *at_tag = PyUnicode_InternFromString("@");
    Plain plain = {want_columns, 0, 0, 0, max_depth, NULL, PyList_New(0), PyList_New(0),
                   PyList_New(0), NULL, resolve == Py_None ? NULL : resolve, NULL};
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
                name = tensor_name(&c, known, &known_pos);
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
            if (plain_value(&plain, NULL, NULL, 0, name, 1, -1) < 0) {
                Py_DECREF(name);
                goto no;
            }
            PyObject *zero = PyLong_FromLong(0);
            Py_INCREF(tags[0]);
            PyObject *items[3] = {tags[0], zero, name};
            rec = named(rec_type, 3, items);
        }
        else if (tag == 'S') {
            Py_ssize_t at = c.i;
            int k = 0;
            while (k < n_recent && !repeats(&c, recent[k].text))
                k++;
            if (k < n_recent) {  /* the text of a recent S record: that record */
                if (plain_value(&plain, NULL, NULL, 0, recent[k].value, 0, -1) < 0)
                    goto no;
                rec = Py_NewRef(recent[k].rec);
            }
            else {
                PyObject *v = NULL;
                if (ch(&c, ','))
                    v = scalar(&c);
                if (v == NULL || !ch(&c, ']') ||
                    plain_value(&plain, NULL, NULL, 0, v, 0, -1) < 0) {
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
                    if (rec != NULL) {
                        recent[next_recent] = (Recent){{at, c.i - at}, v, rec};
                        next_recent = (next_recent + 1) % RECENT;
                        n_recent += n_recent < RECENT;
                    }
                }
            }
        }
        else if (tag == 'N') {
            if (!ch(&c, ']'))
                goto no;
            Frame *top = plain.ok && plain.depth ? &plain.stack[plain.depth - 1] : NULL;
            if (top != NULL && top->kept >= 0 && top->seen >= top->n - top->kept) {
                /* a class's kept None: a value of its aux */
                if (plain_value(&plain, NULL, NULL, 0, Py_None, 0, -1) < 0)
                    goto no;
            }
            else if (plain_value(&plain, none_kind, Py_NewRef(Py_None), 0, NULL, 0, -1) < 0)
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
                                 (Py_ssize_t)n, NULL, 0, -1) < 0)
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
                    plain_value(&plain, dict_kind, aux, PyList_GET_SIZE(keys), NULL, 0, -1) < 0) {
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
        else if (tag == 'C' && last_class != NULL && repeats(&c, class_text)) {
            /* the last class record's text: its record (a list of containers) */
            if (plain_class(&plain, PyTuple_GET_ITEM(last_class, 2)) < 0)
                goto no;
            rec = Py_NewRef(last_class);
        }
        else if (tag == 'C') {
            Py_ssize_t at = c.i;
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
            if (plain_class(&plain, data) < 0) {
                Py_DECREF(data);
                Py_XDECREF(count);
                goto no;
            }
            Py_INCREF(tags[6]);
            PyObject *items[3] = {tags[6], count, data};
            rec = named(rec_type, 3, items);
            last_class = rec;  /* held by recs */
            class_text = (Text){at, c.i - at};
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
                if (plain_value(&plain, NULL, NULL, 0, PyTuple_GET_ITEM(target, 2), 1, -1) < 0)
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
    Py_XDECREF(plain.classes);
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
    Py_XDECREF(plain.classes);
no_plain:
    Py_XDECREF(recs);
    Py_XDECREF(names);
    Py_XDECREF(crcs);
    Py_XDECREF(targets);
    return give_up();
}

