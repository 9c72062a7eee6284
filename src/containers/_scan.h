/* The cursor over ASCII text and the helpers that containers._scan's files share
   (_scan.c: the header, the counts, the write side and the module; _scan_records.c:
   the tree string; _scan_fit.c: a template's arrays). See _scan.c for what the module
   parses and accepts. */

#ifndef CONTAINERS_SCAN_H
#define CONTAINERS_SCAN_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <math.h>
#include <string.h>

#if defined(__GNUC__)
#define SCAN_HIDDEN __attribute__((visibility("hidden")))
#else
#define SCAN_HIDDEN
#endif

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
static inline int
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
static inline PyObject *
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

/* The characters of a text: an ASCII str's, or bytes' (taken as they are: the caller
   has checked that they are ASCII, or each byte outside it is refused where it is
   read). 1, or 0 for a str outside ASCII (the caller gives up); -1 with TypeError for
   anything else. */
static inline int
text_of(PyObject *o, const unsigned char **s, Py_ssize_t *n, const char *fname)
{
    if (PyBytes_Check(o)) {
        *s = (const unsigned char *)PyBytes_AS_STRING(o);
        *n = PyBytes_GET_SIZE(o);
        return 1;
    }
    if (!PyUnicode_Check(o)) {
        PyErr_Format(PyExc_TypeError, "%s: a str or bytes", fname);
        return -1;
    }
    if (!PyUnicode_IS_ASCII(o))
        return 0;
    *s = PyUnicode_1BYTE_DATA(o);
    *n = PyUnicode_GET_LENGTH(o);
    return 1;
}

/* Give up (None) unless an error is set. */
static inline PyObject *
give_up(void)
{
    if (PyErr_Occurred())
        return NULL;
    Py_RETURN_NONE;
}

/* A tuple of a namedtuple class (a tuple subtype), its items stolen. */
static inline PyObject *
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


/* _scan_records.c: `records(text, max_nodes, ctx)`, the tree string in one pass. */
SCAN_HIDDEN PyObject *scan_records(PyObject *self, PyObject *args);

/* _scan_fit.c: a file's leaves against a template's arrays (load(like=)). */
SCAN_HIDDEN PyObject *scan_arrays_fit(PyObject *self, PyObject *args);
SCAN_HIDDEN PyObject *scan_array_head(PyObject *self, PyObject *args);

#endif /* CONTAINERS_SCAN_H */
