/* containers._encoder's shared declarations: the walk (_encoder.c) and the text
   writers (_encoder_text.c), one extension module. */

#ifndef CONTAINERS_ENCODER_H
#define CONTAINERS_ENCODER_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

/* render(records, quoted, /) and entries(arrays, names, order, codes, /) */
PyObject *encoder_render(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
PyObject *encoder_entries(PyObject *module, PyObject *const *args, Py_ssize_t nargs);

/* The decimal digits of v >= 0 at d; returns the end (snprintf costs ~1,000
   instructions a call, most of an entry). */
static inline char *
put_uint(char *d, unsigned long long v)
{
    char tmp[24];
    int n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    while (n) {
        *d++ = tmp[--n];
    }
    return d;
}

#endif
