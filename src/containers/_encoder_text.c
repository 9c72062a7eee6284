/* containers._encoder's text writers: the tree's records as JSON (`render`) and the
   header's tensor entries (`entries`), each the C twin of a Python writer that stays
   (json.dumps; Plan._layout_plain). The walk is _encoder.c. */

#include "_encoder.h"
#include <math.h>
#include <string.h>

/* --- render: the records as JSON text --------------------------------------------------

   `render(records)` is `json.dumps(records, separators=(",", ":"))` (ensure_ascii, as
   `Plan.header` writes the tree), or None for anything but what records hold: lists
   and tuples, dicts with str keys, exact str, int, bool, None and finite floats, at
   most RENDER_DEPTH levels deep; `Plan.header` then calls json.dumps, its plain twin
   (tests/test_serialize_compiled.py holds the two to the same text). json.dumps spends
   most of its time on a new str per escaped str and on its chunks' list; here the
   text goes into one buffer, and a str with nothing to escape is copied as it is. */

#define RENDER_DEPTH 64

typedef struct {
    char *data;
    size_t len, cap;
    int quoted; /* the text is written as the body of a JSON str: " and \ escaped */
} Text;

static int
text_room(Text *t, size_t more)
{
    if (t->len + more <= t->cap) {
        return 0;
    }
    size_t cap = t->cap ? t->cap : 1 << 16;
    while (cap < t->len + more) {
        cap *= 2;
    }
    char *data = PyMem_Realloc(t->data, cap);
    if (data == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    t->data = data;
    t->cap = cap;
    return 0;
}

static inline int
text_add(Text *t, const char *s, size_t n)
{
    if (text_room(t, n) < 0) {
        return -1;
    }
    memcpy(t->data + t->len, s, n);
    t->len += n;
    return 0;
}

/* A str as json's encode_basestring_ascii writes it. */
static int
render_str_plain(Text *t, PyObject *s)
{
    Py_ssize_t n = PyUnicode_GET_LENGTH(s);
    if (PyUnicode_IS_ASCII(s)) {
        const unsigned char *c = PyUnicode_1BYTE_DATA(s);
        Py_ssize_t j = 0;
        while (j < n && c[j] >= ' ' && c[j] <= '~' && c[j] != '"' && c[j] != '\\') {
            j++;
        }
        if (j == n) { /* nothing to escape */
            if (text_room(t, (size_t)n + 2) < 0) {
                return -1;
            }
            t->data[t->len++] = '"';
            memcpy(t->data + t->len, c, (size_t)n);
            t->len += (size_t)n;
            t->data[t->len++] = '"';
            return 0;
        }
    }
    static const char hex[] = "0123456789abcdef";
    if (text_room(t, 12 * (size_t)n + 2) < 0) { /* at most \uXXXX\uXXXX a character */
        return -1;
    }
    char *d = t->data + t->len;
    int kind = PyUnicode_KIND(s);
    const void *data = PyUnicode_DATA(s);
    *d++ = '"';
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_UCS4 c = PyUnicode_READ(kind, data, i);
        if (c >= ' ' && c <= '~' && c != '"' && c != '\\') {
            *d++ = (char)c;
            continue;
        }
        *d++ = '\\';
        switch (c) {
        case '"': *d++ = '"'; continue;
        case '\\': *d++ = '\\'; continue;
        case '\b': *d++ = 'b'; continue;
        case '\f': *d++ = 'f'; continue;
        case '\n': *d++ = 'n'; continue;
        case '\r': *d++ = 'r'; continue;
        case '\t': *d++ = 't'; continue;
        default: break;
        }
        if (c >= 0x10000) { /* a surrogate pair */
            Py_UCS4 v = c - 0x10000;
            Py_UCS4 hi = 0xd800 | ((v >> 10) & 0x3ff);
            *d++ = 'u';
            for (int k = 12; k >= 0; k -= 4) {
                *d++ = hex[(hi >> k) & 0xf];
            }
            *d++ = '\\';
            c = 0xdc00 | (v & 0x3ff);
        }
        *d++ = 'u';
        for (int k = 12; k >= 0; k -= 4) {
            *d++ = hex[(c >> k) & 0xf];
        }
    }
    *d++ = '"';
    t->len = (size_t)(d - t->data);
    return 0;
}

/* A str as render_str_plain writes it, into a quoted text: its quotes and backslashes
   escaped once more, as json.dumps of the whole text would. */
static int
render_str(Text *t, PyObject *s)
{
    if (!t->quoted) {
        return render_str_plain(t, s);
    }
    if (PyUnicode_IS_ASCII(s)) {
        const unsigned char *c = PyUnicode_1BYTE_DATA(s);
        Py_ssize_t n = PyUnicode_GET_LENGTH(s), j = 0;
        while (j < n && c[j] >= ' ' && c[j] <= '~' && c[j] != '"' && c[j] != '\\') {
            j++;
        }
        if (j == n) { /* nothing to escape: \"s\" */
            if (text_room(t, (size_t)n + 4) < 0) {
                return -1;
            }
            char *d = t->data + t->len;
            *d++ = '\\';
            *d++ = '"';
            memcpy(d, c, (size_t)n);
            d += n;
            *d++ = '\\';
            *d++ = '"';
            t->len = (size_t)(d - t->data);
            return 0;
        }
    }
    Text inner = {NULL, 0, 0, 0};
    if (render_str_plain(&inner, s) < 0 || text_room(t, 2 * inner.len) < 0) {
        PyMem_Free(inner.data);
        return -1;
    }
    char *d = t->data + t->len;
    for (size_t i = 0; i < inner.len; i++) {
        char c = inner.data[i];
        if (c == '"' || c == '\\') {
            *d++ = '\\';
        }
        *d++ = c;
    }
    t->len = (size_t)(d - t->data);
    PyMem_Free(inner.data);
    return 0;
}

/* repr(x) (an int or a float), appended; it is ASCII. */
static int
render_repr(Text *t, PyObject *x)
{
    PyObject *r = PyObject_Repr(x);
    if (r == NULL) {
        return -1;
    }
    int ok = PyUnicode_IS_ASCII(r)
                 ? text_add(t, (const char *)PyUnicode_1BYTE_DATA(r),
                            (size_t)PyUnicode_GET_LENGTH(r))
                 : 1;
    Py_DECREF(r);
    return ok;
}

/* 0: x appended; 1: x is not what records hold (render gives None); -1: an error. */
static int
render_value(Text *t, PyObject *x, int depth)
{
    PyTypeObject *type = Py_TYPE(x);
    if (type == &PyUnicode_Type) {
        return render_str(t, x);
    }
    if (type == &PyLong_Type || type == &PyFloat_Type) {
        if (type == &PyFloat_Type && !isfinite(PyFloat_AS_DOUBLE(x))) {
            return 1;
        }
        return render_repr(t, x);
    }
    if (x == Py_None) {
        return text_add(t, "null", 4);
    }
    if (x == Py_True) {
        return text_add(t, "true", 4);
    }
    if (x == Py_False) {
        return text_add(t, "false", 5);
    }
    if (depth >= RENDER_DEPTH) {
        return 1;
    }
    if (type == &PyList_Type || type == &PyTuple_Type) {
        if (text_add(t, "[", 1) < 0) {
            return -1;
        }
        /* a list's length is read at each step: nothing here runs Python code but
           repr of an int or float, which cannot change it */
        for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(x); i++) {
            if (i && text_add(t, ",", 1) < 0) {
                return -1;
            }
            int r = render_value(t, PySequence_Fast_GET_ITEM(x, i), depth + 1);
            if (r != 0) {
                return r;
            }
        }
        return text_add(t, "]", 1);
    }
    if (type == &PyDict_Type) {
        if (text_add(t, "{", 1) < 0) {
            return -1;
        }
        Py_ssize_t pos = 0;
        PyObject *key, *value;
        int first = 1;
        while (PyDict_Next(x, &pos, &key, &value)) {
            if (!PyUnicode_CheckExact(key)) {
                return 1;
            }
            if ((!first && text_add(t, ",", 1) < 0) || render_str(t, key) < 0 ||
                text_add(t, ":", 1) < 0) {
                return -1;
            }
            first = 0;
            int r = render_value(t, value, depth + 1);
            if (r != 0) {
                return r;
            }
        }
        return text_add(t, "}", 1);
    }
    return 1;
}

/* render(records, quoted): with quoted, the text as a JSON str (json.dumps(text)). */
PyObject *
encoder_render(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "render(records, quoted, /)");
        return NULL;
    }
    int quoted = PyObject_IsTrue(args[1]);
    if (quoted < 0) {
        return NULL;
    }
    Text t = {NULL, 0, 0, quoted};
    int r = (quoted && text_add(&t, "\"", 1) < 0) ? -1 : render_value(&t, args[0], 0);
    if (r == 0 && quoted) {
        r = text_add(&t, "\"", 1);
    }
    PyObject *out = NULL;
    if (r == 0) {
        out = PyUnicode_New((Py_ssize_t)t.len, 127);
        if (out != NULL) {
            memcpy(PyUnicode_1BYTE_DATA(out), t.data, t.len);
        }
    }
    else if (r == 1) {
        out = Py_NewRef(Py_None);
    }
    PyMem_Free(t.data);
    return out;
}


/* --- entries: the header's tensor entries -----------------------------------------------

   `entries(arrays, names, order, codes)` is `Plan.layout`'s text (its plain twin:
   `Plan._layout_plain`, json.dumps of each entry): for each index of order,
   `"name":{"dtype":"F32","shape":[4],"data_offsets":[begin,end]}`, joined by commas,
   or None when a name needs escapes or an array's buffer format is not in `codes`
   (format -> dtype code; bfloat16 has none), where the Python loop writes them. The dtype, shape and size come from the buffer protocol,
   not from Python attributes (a shape tuple and a size int per array); the text
   between name and offsets is written once per run of one format and shape. */

PyObject *
encoder_entries(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4 || !PyList_CheckExact(args[0]) || !PyList_CheckExact(args[1]) ||
        !PyList_CheckExact(args[2]) || !PyDict_CheckExact(args[3])) {
        PyErr_SetString(PyExc_TypeError, "entries(arrays, names, order, codes)");
        return NULL;
    }
    PyObject *arrays = args[0], *names = args[1], *order = args[2], *codes = args[3];
    Text t = {NULL, 0, 0, 0};
    char last_format[8] = "", middle[512];
    Py_ssize_t last_ndim = -1, last_shape[64];
    size_t middle_len = 0;
    long long pos = 0;
    int r = 0;
    for (Py_ssize_t k = 0; r == 0 && k < PyList_GET_SIZE(order); k++) {
        Py_ssize_t i = PyLong_AsSsize_t(PyList_GET_ITEM(order, k));
        if (i == -1 && PyErr_Occurred()) {
            r = -1;
            break;
        }
        if (i < 0 || i >= PyList_GET_SIZE(arrays) || i >= PyList_GET_SIZE(names)) {
            PyErr_SetString(PyExc_IndexError, "entries: an index out of range");
            r = -1;
            break;
        }
        PyObject *name = PyList_GET_ITEM(names, i);
        if (!PyUnicode_CheckExact(name) || !PyUnicode_IS_ASCII(name)) {
            r = 1;
            break;
        }
        const char *c = (const char *)PyUnicode_1BYTE_DATA(name);
        Py_ssize_t len = PyUnicode_GET_LENGTH(name);
        for (Py_ssize_t j = 0; j < len; j++) {
            if (c[j] < 0x20 || c[j] >= 0x7f || c[j] == '"' || c[j] == '\\') {
                r = 1; /* json's escapes: the other writers */
            }
        }
        Py_buffer view;
        if (r != 0 || PyObject_GetBuffer(PyList_GET_ITEM(arrays, i), &view,
                                         PyBUF_ND | PyBUF_FORMAT) < 0) {
            PyErr_Clear();
            r = 1;
            break;
        }
        const char *f = view.format == NULL ? "B" : view.format;
        int same = view.ndim <= 64 && strcmp(f, last_format) == 0 && view.ndim == last_ndim;
        for (int d = 0; same && d < view.ndim; d++) {
            same = view.shape[d] == last_shape[d];
        }
        if (!same) {
            PyObject *code = NULL;
            if (strlen(f) < sizeof last_format && view.ndim <= 64) {
                PyObject *key = PyUnicode_FromString(f);
                code = key == NULL ? NULL : PyDict_GetItemWithError(codes, key);
                Py_XDECREF(key);
            }
            if (code == NULL || !PyUnicode_CheckExact(code) || !PyUnicode_IS_ASCII(code) ||
                PyUnicode_GET_LENGTH(code) > 32) {
                r = PyErr_Occurred() ? -1 : 1;
                PyBuffer_Release(&view);
                break;
            }
            int n = snprintf(middle, sizeof middle, ":{\"dtype\":\"%s\",\"shape\":[",
                             (const char *)PyUnicode_1BYTE_DATA(code));
            for (int d = 0; d < view.ndim && n < 400; d++) {
                n += snprintf(middle + n, sizeof middle - (size_t)n, d ? ",%zd" : "%zd",
                              view.shape[d]);
                last_shape[d] = view.shape[d];
            }
            if (n >= 400) { /* a shape too long for the buffer: the other writers */
                r = 1;
                PyBuffer_Release(&view);
                break;
            }
            n += snprintf(middle + n, sizeof middle - (size_t)n, "],\"data_offsets\":[");
            middle_len = (size_t)n;
            strcpy(last_format, f);
            last_ndim = view.ndim;
        }
        long long begin = pos;
        pos += (long long)view.len;
        PyBuffer_Release(&view);
        /* ,"name" middle begin,end]} */
        if (text_room(&t, (size_t)len + middle_len + 64) < 0) {
            r = -1;
            break;
        }
        char *d = t.data + t.len;
        if (k) {
            *d++ = ',';
        }
        *d++ = '"';
        memcpy(d, c, (size_t)len);
        d += len;
        *d++ = '"';
        memcpy(d, middle, middle_len);
        d += middle_len;
        d = put_uint(d, (unsigned long long)begin);
        *d++ = ',';
        d = put_uint(d, (unsigned long long)pos);
        *d++ = ']';
        *d++ = '}';
        t.len = (size_t)(d - t.data);
    }
    PyObject *out = NULL;
    if (r == 0) {
        out = PyUnicode_New((Py_ssize_t)t.len, 127);
        if (out != NULL && t.len) {
            memcpy(PyUnicode_1BYTE_DATA(out), t.data, t.len);
        }
    }
    else if (r == 1) {
        out = Py_NewRef(Py_None);
    }
    PyMem_Free(t.data);
    return out;
}
