/* A plain dict's keys as the DICT kind orders them (`_kinds.sort_keys`), in C, shared
   by the compiled flatten (_engine/_speedups_flatten.c) and the compiled encoder
   (_encoder.c). Header-only: each extension compiles its own copy. */
#ifndef CONTAINERS_SORTED_KEYS_H
#define CONTAINERS_SORTED_KEYS_H

#include <Python.h>

/* The keys of x, an exact dict whose keys are all exact strs: *keys in insertion
   order and *order sorted (new lists), 0; 1 with nothing made when a key is not an
   exact str (the kind's Python flatten decides, with its fallback order for keys that
   do not compare); -1 on error. No Python code runs: exact strs sort and compare in
   C, and the distinct keys of a dict sort strictly, as `sort_keys` checks. */
static inline int
sorted_str_keys(PyObject *x, PyObject **keys, PyObject **order)
{
    *keys = PyDict_Keys(x);
    if (*keys == NULL) {
        return -1;
    }
    Py_ssize_t n = PyList_GET_SIZE(*keys);
    for (Py_ssize_t i = 0; i < n; i++) {
        if (!PyUnicode_CheckExact(PyList_GET_ITEM(*keys, i))) {
            Py_CLEAR(*keys);
            return 1;
        }
    }
    *order = PyList_GetSlice(*keys, 0, n);
    if (*order == NULL || PyList_Sort(*order) < 0) {
        Py_CLEAR(*order);
        Py_CLEAR(*keys);
        return -1;
    }
    return 0;
}

#endif
