/* containers._encoder's shared declarations: the walk (_encoder.c) and the text
   writers (_encoder_text.c), one extension module. */

#ifndef CONTAINERS_ENCODER_H
#define CONTAINERS_ENCODER_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

/* render(records, quoted, /) and entries(arrays, names, order, codes, /) */
PyObject *encoder_render(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
PyObject *encoder_entries(PyObject *module, PyObject *const *args, Py_ssize_t nargs);

#endif
