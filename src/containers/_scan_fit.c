/* containers._scan's check of a file's leaves against a template's arrays, for
   load(like=) (`_positional`): `arrays_fit`, whose plain twin is
   `_positional.arrays_fit_plain`, and `array_head`, what it reads of a numpy array.

   A numpy array's shape and dtype are read from the array object itself, as numpy's
   own C macros (PyArray_NDIM, PyArray_DIMS, PyArray_DESCR) read them, without
   compiling against numpy's headers (numpy is no build requirement of the optional
   extensions). Reading `.shape` instead builds a tuple per array: for 100,000 small
   arrays the reads cost more than a tenth of a load of them (benchmarks/
   serialization.py, "many"). The struct's start is part of numpy's ABI (every compiled
   extension reads it through those macros); `_positional` still checks once per
   process that `array_head` reads what `.shape` and `.dtype` say, and uses the plain
   twin if it does not. */

#include "_scan.h"

/* The start of numpy's array object (numpy/ndarraytypes.h, PyArrayObject_fields). */
typedef struct {
    PyObject_HEAD
    char *data;
    int nd;
    Py_intptr_t *dimensions;
    Py_intptr_t *strides;
    PyObject *base;
    PyObject *descr;
} ArrayHead;

#define HEAD(a) ((ArrayHead *)(a))

/* 1 if `ndarray` is numpy's array type (by name: a type whose instances start as
   ArrayHead), 0 with a TypeError if not. */
static int
is_numpy_array_type(PyObject *ndarray)
{
    PyTypeObject *t = (PyTypeObject *)ndarray;
    if (strcmp(t->tp_name, "numpy.ndarray") == 0 &&
        t->tp_basicsize >= (Py_ssize_t)sizeof(ArrayHead))
        return 1;
    PyErr_Format(PyExc_TypeError, "arrays_fit: ndarray must be numpy.ndarray, got %s", t->tp_name);
    return 0;
}

/* 1 if the numpy arrays a and b have equal shapes (`a.shape == b.shape`), 0 if not. */
static inline int
same_dims(PyObject *a, PyObject *b)
{
    int nd = HEAD(a)->nd;
    if (nd != HEAD(b)->nd)
        return 0;
    for (int k = 0; k < nd; k++) {
        if (HEAD(a)->dimensions[k] != HEAD(b)->dimensions[k])
            return 0;
    }
    return 1;
}

/* 1 if the numpy arrays a and b have equal shapes and dtypes (`a.shape == b.shape and
   a.dtype == b.dtype`), 0 if not, -1 on error. */
static int
same_head(PyObject *a, PyObject *b)
{
    if (!same_dims(a, b))
        return 0;
    PyObject *x = HEAD(a)->descr, *y = HEAD(b)->descr;
    return x == y ? 1 : PyObject_RichCompareBool(x, y, Py_EQ);
}

/* 1 if a.name == b.name, 0 if not, -1 on error. */
static int
same_attr(PyObject *a, PyObject *b, PyObject *name)
{
    PyObject *x = PyObject_GetAttr(a, name);
    PyObject *y = x == NULL ? NULL : PyObject_GetAttr(b, name);
    int same = y == NULL ? -1 : PyObject_RichCompareBool(x, y, Py_EQ);
    Py_XDECREF(x);
    Py_XDECREF(y);
    return same;
}

/* 1 if the template leaf w (an exact tensor) fits the file's numpy array v as
   torch.from_numpy(v): `w.is_cpu`, `dtypes.get(w.dtype) == v.dtype` (dtypes: the torch
   dtypes from_numpy makes, to numpy's) and `w.shape == v.shape`; 0 if not, -1 on
   error. */
static int
tensor_fits(PyObject *v, PyObject *w, PyObject *dtypes, PyObject *const *names)
{
    PyObject *cpu = PyObject_GetAttr(w, names[2]);
    int fit = cpu == NULL ? -1 : cpu == Py_True;
    Py_XDECREF(cpu);
    if (fit == 1) {
        PyObject *wd = PyObject_GetAttr(w, names[1]);
        PyObject *want = wd == NULL ? NULL : PyDict_GetItemWithError(dtypes, wd);
        Py_XDECREF(wd); /* want is borrowed from dtypes, which the caller holds */
        fit = want != NULL         ? PyObject_RichCompareBool(HEAD(v)->descr, want, Py_EQ)
              : !PyErr_Occurred() ? 0
                                  : -1;
    }
    return fit == 1 ? same_attr(v, w, names[0]) : fit;
}

/* `arrays_fit(values, wants, ndarray[, tensor, dtypes, convert])`: for a file's leaves
   and a template's, taken by position, the set of the types of the template leaves
   where the file has no exact ndarray, when every template leaf that is an exact
   ndarray has one there of an equal shape and dtype (`same_head`), every one that is an
   exact `tensor` (torch.Tensor) has one that torch.from_numpy takes as it
   (`tensor_fits`), and no other template leaf has one; else None. When it fits, each
   file array facing a tensor is replaced in values by `convert(array)`
   (torch.from_numpy); nothing is replaced when it does not. */
SCAN_HIDDEN PyObject *
scan_arrays_fit(PyObject *Py_UNUSED(module), PyObject *args)
{
    PyObject *values, *wants, *ndarray, *tensor = NULL, *dtypes = NULL, *convert = NULL;
    if (!PyArg_ParseTuple(args, "O!O!O!|O!O!O:arrays_fit", &PyList_Type, &values,
                          &PyList_Type, &wants, &PyType_Type, &ndarray, &PyType_Type,
                          &tensor, &PyDict_Type, &dtypes, &convert))
        return NULL;
    if (!is_numpy_array_type(ndarray))
        return NULL;
    if (tensor != NULL && (dtypes == NULL || convert == NULL)) {
        PyErr_SetString(PyExc_TypeError, "arrays_fit: a tensor type needs dtypes and convert");
        return NULL;
    }
    PyObject *names[3] = {PyUnicode_InternFromString("shape"),
                          PyUnicode_InternFromString("dtype"),
                          PyUnicode_InternFromString("is_cpu")};
    PyObject *others = PySet_New(NULL);
    int fit = names[0] && names[1] && names[2] && others ? 1 : -1;
    Py_ssize_t tensors = 0;
    PyTypeObject *last_other = NULL; /* in others: a type is held by the set */
    for (Py_ssize_t i = 0; fit == 1; i++) {
        /* lengths read at each step: a metaclass's __hash__ may run Python code */
        if (i >= PyList_GET_SIZE(values) || i >= PyList_GET_SIZE(wants)) {
            fit = PyList_GET_SIZE(values) == PyList_GET_SIZE(wants) ? 2 : 0;
            break;
        }
        /* borrowed while no Python code can run: two arrays of one shape and the same
           dtype object, or the type last added to others (held by the set) */
        PyObject *v = PyList_GET_ITEM(values, i);
        PyObject *w = PyList_GET_ITEM(wants, i);
        int file_array = Py_IS_TYPE(v, (PyTypeObject *)ndarray);
        if (Py_IS_TYPE(w, (PyTypeObject *)ndarray) && file_array &&
            HEAD(v)->descr == HEAD(w)->descr) {
            fit = same_dims(v, w);
            continue;
        }
        if (!file_array && Py_TYPE(w) == last_other) {
            continue;
        }
        Py_INCREF(v);
        Py_INCREF(w);
        if (Py_IS_TYPE(w, (PyTypeObject *)ndarray)) {
            fit = file_array ? same_head(v, w) : 0;
        }
        else if (tensor != NULL && Py_IS_TYPE(w, (PyTypeObject *)tensor)) {
            fit = file_array ? tensor_fits(v, w, dtypes, names) : 0;
            tensors++;
        }
        else if (file_array) {
            fit = 0;
        }
        else {
            fit = PySet_Add(others, (PyObject *)Py_TYPE(w)) < 0 ? -1 : 1;
            last_other = fit == 1 ? Py_TYPE(w) : NULL;
        }
        Py_DECREF(v);
        Py_DECREF(w);
    }
    /* then the conversions, in order, of the arrays facing tensors */
    for (Py_ssize_t i = 0; fit == 2 && tensors && i < PyList_GET_SIZE(values); i++) {
        if (i < PyList_GET_SIZE(wants) &&
            Py_IS_TYPE(PyList_GET_ITEM(wants, i), (PyTypeObject *)tensor)) {
            PyObject *made = PyObject_CallOneArg(convert, PyList_GET_ITEM(values, i));
            if (made == NULL || PyList_SetItem(values, i, made) < 0) {
                fit = -1; /* PyList_SetItem stole made */
            }
        }
    }
    for (int k = 0; k < 3; k++) {
        Py_XDECREF(names[k]);
    }
    if (fit != 2) {
        Py_XDECREF(others);
        if (fit < 0)
            return NULL;
        Py_RETURN_NONE;
    }
    return others;
}

/* `array_head(a, ndarray)`: `(shape, dtype)` of the exact numpy array `a` as `same_head`
   reads them, for `_positional`'s check that they are what `a.shape` and `a.dtype`
   say. */
SCAN_HIDDEN PyObject *
scan_array_head(PyObject *Py_UNUSED(module), PyObject *args)
{
    PyObject *a, *ndarray;
    if (!PyArg_ParseTuple(args, "OO!:array_head", &a, &PyType_Type, &ndarray))
        return NULL;
    if (!is_numpy_array_type(ndarray))
        return NULL;
    if (!Py_IS_TYPE(a, (PyTypeObject *)ndarray)) {
        PyErr_Format(PyExc_TypeError, "array_head: expected a numpy.ndarray, got %s",
                     Py_TYPE(a)->tp_name);
        return NULL;
    }
    int nd = HEAD(a)->nd;
    PyObject *shape = PyTuple_New(nd < 0 ? 0 : nd);
    for (int k = 0; shape != NULL && k < nd; k++) {
        PyObject *dim = PyLong_FromSsize_t((Py_ssize_t)HEAD(a)->dimensions[k]);
        if (dim == NULL)
            Py_CLEAR(shape);
        else
            PyTuple_SET_ITEM(shape, k, dim);
    }
    return shape == NULL ? NULL : Py_BuildValue("(NO)", shape, HEAD(a)->descr);
}
