#include "_speedups.h"

/* --- Rebuild: one class's rebuild without __init__ -------------------------------- */

/* new_instance(cls, names, *values): object.__new__(cls) with each name set to its
   value as object.__setattr__ sets it, past a frozen __setattr__: the generated
   unflatten of a class (`_codegen`), whose plain twin is `plain_unflatten`. Setting
   fields this way keeps CPython's compact instance values (3.11+), where reading
   `__dict__` to write it makes a dict per instance (benchmarks/run.py, W3id). */
PyObject *
speedups_new_instance(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs < 2 || !PyType_Check(args[0]) || !PyTuple_CheckExact(args[1]) ||
        PyTuple_GET_SIZE(args[1]) != nargs - 2) {
        PyErr_SetString(PyExc_TypeError, "new_instance(cls, names, *values) takes a type, "
                                         "a tuple of names and one value per name");
        return NULL;
    }
    PyObject *obj = new_object((PyTypeObject *)args[0]);
    if (obj == NULL) {
        return NULL;
    }
    for (Py_ssize_t i = 2; i < nargs; i++) {
        if (PyObject_GenericSetAttr(obj, PyTuple_GET_ITEM(args[1], i - 2), args[i]) < 0) {
            Py_DECREF(obj);
            return NULL;
        }
    }
    return obj;
}

/* fill_missing(out, other, missing): each item of the list out that is missing
   replaced by the item of the list other at its index, in place: combine's choice of
   each leaf from the first tree that has it (`_split.fill_missing_plain`, its plain
   twin). One pass in C, with no tuple, no call and no new list per leaf, where the
   twin's `map(getitem, zip(...), map(is_, ...))` cost combine about a third of its
   time at 1k leaves (benchmarks/split.py). No Python code runs during the pass (a
   replaced item is missing, which the caller also holds: its release frees nothing),
   so neither list can change under it. */
PyObject *
speedups_fill_missing(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 3 || !PyList_CheckExact(args[0]) || !PyList_CheckExact(args[1])) {
        PyErr_SetString(PyExc_TypeError, "fill_missing(out, other, missing) takes two lists "
                                         "and the missing marker");
        return NULL;
    }
    PyObject *out = args[0], *other = args[1], *missing = args[2];
    Py_ssize_t n = PyList_GET_SIZE(out);
    if (PyList_GET_SIZE(other) != n) {
        PyErr_Format(PyExc_ValueError, "fill_missing: lists of %zd and %zd items", n,
                     PyList_GET_SIZE(other));
        return NULL;
    }
    PyObject **mine = ((PyListObject *)out)->ob_item;
    PyObject **theirs = ((PyListObject *)other)->ob_item;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (mine[i] == missing) {
            mine[i] = Py_NewRef(theirs[i]);
            Py_DECREF(missing); /* the list's reference: the caller holds another */
        }
    }
    Py_RETURN_NONE;
}

/* A field array's references (Rebuild's, MapNode's): visited, cleared, freed. */
int
fields_traverse(const Field *fields, Py_ssize_t n, visitproc visit, void *arg)
{
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_VISIT(fields[i].value);
    }
    return 0;
}

void
fields_clear(Field *fields, Py_ssize_t n)
{
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_CLEAR(fields[i].value);
    }
}

void
fields_free(Field *fields, Py_ssize_t n)
{
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_XDECREF(fields[i].name);
    }
    PyMem_Free(fields);
}

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *cls;    /* NULL once cleared (then a call raises) */
    PyObject *unpack; /* unpack(children) -> tuple, the interpreter's own unpacking */
    Field *fields;
    Py_ssize_t n_fields;
    Py_ssize_t n_children;
    int kept_first;
} RebuildObject;

static int
Rebuild_traverse(RebuildObject *self, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(self->cls);
    Py_VISIT(self->unpack);
    return fields_traverse(self->fields, self->n_fields, visit, arg);
}

static int
Rebuild_clear(RebuildObject *self)
{
    /* cls first: a call made while the rest is released (a __del__) sees a cleared
       object and raises instead of reading released fields */
    Py_CLEAR(self->cls);
    Py_CLEAR(self->unpack);
    fields_clear(self->fields, self->n_fields);
    return 0;
}

static void
Rebuild_dealloc(RebuildObject *self)
{
    PyTypeObject *type = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    Rebuild_clear(self);
    fields_free(self->fields, self->n_fields);
    type->tp_free((PyObject *)self);
    Py_DECREF(type);
}

/* Read one (name, how, arg) entry of the fields of a Rebuild or MapNode (`type`) into
   field; -1 on error. */
int
read_field(const char *type, PyObject *entry, Field *field, Py_ssize_t *n_children)
{
    static const char *hows[] = {"child", "kept", "value", "factory", "factory_self"};
    PyObject *name, *how, *arg;
    if (!PyTuple_Check(entry) || !PyArg_UnpackTuple(entry, "field", 3, 3, &name, &how, &arg)) {
        if (!PyErr_Occurred()) {
            PyErr_Format(PyExc_TypeError, "%s: each field must be a tuple (name, how, arg)",
                         type);
        }
        return -1;
    }
    if (!PyUnicode_CheckExact(name) || !PyUnicode_Check(how)) {
        PyErr_Format(PyExc_TypeError, "%s: a field's name and how must be str", type);
        return -1;
    }
    field->how = -1;
    for (int i = 0; i < 5; i++) {
        if (PyUnicode_CompareWithASCIIString(how, hows[i]) == 0) {
            field->how = i;
        }
    }
    if (field->how < 0) {
        PyErr_Format(PyExc_ValueError, "%s: unknown how %R for field %R", type, how, name);
        return -1;
    }
    if (field->how == FROM_CHILD || field->how == FROM_KEPT) {
        field->index = PyLong_AsSsize_t(arg);
        if (field->index == -1 && PyErr_Occurred()) {
            return -1;
        }
        if (field->index < 0) {
            PyErr_Format(PyExc_ValueError, "%s: negative index for field %R", type, name);
            return -1;
        }
        *n_children += field->how == FROM_CHILD;
    }
    else {
        if (field->how != FROM_VALUE && !PyCallable_Check(arg)) {
            PyErr_Format(PyExc_TypeError, "%s: the factory of field %R must be callable", type,
                         name);
            return -1;
        }
        Py_INCREF(arg);
        field->value = arg;
    }
    Py_INCREF(name);
    PyUnicode_InternInPlace(&name);
    field->name = name;
    return 0;
}

static PyObject *Rebuild_vectorcall(PyObject *, PyObject *const *, size_t, PyObject *);

/* No __init__: the fields never change after construction, so a call never sees them
   change under it (a factory cannot re-initialise the object it runs in). */
static PyObject *
Rebuild_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *names[] = {"cls", "fields", "unpack", "kept_first", NULL};
    PyObject *cls, *fields, *unpack;
    int kept_first;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O!O!Op:Rebuild", names, &PyType_Type, &cls,
                                     &PyTuple_Type, &fields, &unpack, &kept_first)) {
        return NULL;
    }
    RebuildObject *self = (RebuildObject *)type->tp_alloc(type, 0);
    if (self == NULL) {
        return NULL;
    }
    self->vectorcall = Rebuild_vectorcall;
    self->kept_first = kept_first;
    Py_ssize_t n = PyTuple_GET_SIZE(fields);
    self->fields = PyMem_Calloc(n ? n : 1, sizeof(Field));
    if (self->fields == NULL) {
        Py_DECREF(self);
        return PyErr_NoMemory();
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        self->n_fields = i + 1; /* released by dealloc if what follows fails */
        if (read_field("Rebuild", PyTuple_GET_ITEM(fields, i), &self->fields[i],
                       &self->n_children) < 0) {
            Py_DECREF(self);
            return NULL;
        }
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        if (self->fields[i].how == FROM_CHILD && self->fields[i].index >= self->n_children) {
            PyErr_Format(PyExc_ValueError, "Rebuild: child index %zd out of range",
                         self->fields[i].index);
            Py_DECREF(self);
            return NULL;
        }
    }
    if (self->n_children > 0 && !PyCallable_Check(unpack)) {
        PyErr_SetString(PyExc_TypeError, "Rebuild: unpack must be callable");
        Py_DECREF(self);
        return NULL;
    }
    Py_INCREF(unpack);
    self->unpack = unpack;
    Py_INCREF(cls);
    self->cls = cls; /* last: a set cls says the object is complete */
    return (PyObject *)self;
}

/* kept[i], as the generated code reads it: a tuple's item directly, unless its type
   overrides indexing. A new reference. */
static PyObject *
kept_item(PyObject *kept, Py_ssize_t i)
{
    PyMappingMethods *m = Py_TYPE(kept)->tp_as_mapping;
    if (PyTuple_Check(kept) && i < PyTuple_GET_SIZE(kept) && m != NULL &&
        m->mp_subscript == PyTuple_Type.tp_as_mapping->mp_subscript) {
        PyObject *v = PyTuple_GET_ITEM(kept, i);
        Py_INCREF(v);
        return v;
    }
    PyObject *key = PyLong_FromSsize_t(i);
    if (key == NULL) {
        return NULL;
    }
    PyObject *v = PyObject_GetItem(kept, key);
    Py_DECREF(key);
    return v;
}

/* Store field's value, from kids, kept or its default, into obj; -1 on error. */
static int
store_field(PyObject *obj, const Field *field, PyObject *const *kids, PyObject *kept)
{
    PyObject *value;
    switch (field->how) {
    case FROM_CHILD:
        value = kids[field->index];
        Py_INCREF(value);
        break;
    case FROM_KEPT:
        value = kept_item(kept, field->index);
        break;
    case FROM_VALUE:
        value = field->value;
        Py_INCREF(value);
        break;
    case FROM_FACTORY:
        value = PyObject_CallNoArgs(field->value);
        break;
    default: /* FROM_FACTORY_SELF */
        value = PyObject_CallOneArg(field->value, obj);
        break;
    }
    if (value == NULL) {
        return -1;
    }
    int r = PyObject_GenericSetAttr(obj, field->name, value);
    Py_DECREF(value);
    return r;
}

static PyObject *
Rebuild_vectorcall(PyObject *callable, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    RebuildObject *self = (RebuildObject *)callable;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (kwnames != NULL && PyTuple_GET_SIZE(kwnames) != 0) {
        PyErr_SetString(PyExc_TypeError, "Rebuild() takes no keyword arguments");
        return NULL;
    }
    if (nargs != 2) {
        PyErr_Format(PyExc_TypeError, "Rebuild() takes 2 arguments (%zd given)", nargs);
        return NULL;
    }
    if (self->cls == NULL) {
        PyErr_SetString(PyExc_TypeError, "Rebuild: the object was cleared");
        return NULL;
    }
    PyObject *kept = args[self->kept_first ? 0 : 1];
    PyObject *children = args[self->kept_first ? 1 : 0];
    Py_ssize_t n = self->n_children, i;
    PyObject *stack[STACK_CHILDREN];
    PyObject **kids = n <= STACK_CHILDREN ? stack : PyMem_New(PyObject *, n);
    if (kids == NULL) {
        return PyErr_NoMemory();
    }
    Py_INCREF(self); /* a factory may drop the registry's reference to self */
    PyObject *obj = NULL, *unpacked = NULL;
    Py_ssize_t taken = 0;
    if (n > 0) {
        /* `_c0, ..., _cn = children`: the children first, all at once, as the
           generated code takes them (a factory cannot change them under us) */
        PyObject *seq = children;
        if (!((PyTuple_CheckExact(children) || PyList_CheckExact(children)) &&
              PySequence_Fast_GET_SIZE(children) == n)) {
            seq = unpacked = PyObject_CallOneArg(self->unpack, children);
            if (unpacked == NULL) {
                goto done;
            }
            if (!PyTuple_CheckExact(unpacked) || PyTuple_GET_SIZE(unpacked) != n) {
                PyErr_Format(PyExc_TypeError, "Rebuild: unpack must return a tuple of %zd",
                             n);
                goto done;
            }
        }
        for (; taken < n; taken++) {
            kids[taken] = PySequence_Fast_GET_ITEM(seq, taken);
            Py_INCREF(kids[taken]);
        }
    }
    obj = new_object((PyTypeObject *)self->cls); /* no __new__ or __init__ of cls runs */
    if (obj == NULL) {
        goto done;
    }
    /* in field order, then the attrs factories taking self (as _codegen._construct) */
    for (int self_pass = 0; self_pass < 2; self_pass++) {
        for (i = 0; i < self->n_fields; i++) {
            const Field *field = &self->fields[i];
            if ((field->how == FROM_FACTORY_SELF) == self_pass &&
                store_field(obj, field, kids, kept) < 0) {
                Py_CLEAR(obj);
                goto done;
            }
        }
    }
done:
    while (taken--) {
        Py_DECREF(kids[taken]);
    }
    if (kids != stack) {
        PyMem_Free(kids);
    }
    Py_XDECREF(unpacked);
    Py_DECREF(self);
    return obj;
}


static PyMemberDef Rebuild_members[] = {
    {"__vectorcalloffset__", Py_T_PYSSIZET, offsetof(RebuildObject, vectorcall), Py_READONLY,
     NULL},
    {NULL, 0, 0, 0, NULL},
};

static PyType_Slot Rebuild_slots[] = {
    {Py_tp_doc, (void *)PyDoc_STR(
                    "Rebuild(cls, fields, unpack, kept_first): one class's rebuild without "
                    "__init__, called as unflatten(kept, children), or (children, kept) if "
                    "not kept_first. fields: (name, how, arg) per field in declaration "
                    "order, how one of 'child' and 'kept' (arg: the index), 'value', "
                    "'factory' and 'factory_self' (arg: the default or factory); unpack: "
                    "children -> tuple, for children that are not a list or tuple of the "
                    "right length.")},
    {Py_tp_new, Rebuild_new},
    {Py_tp_call, PyVectorcall_Call},
    {Py_tp_dealloc, Rebuild_dealloc},
    {Py_tp_traverse, Rebuild_traverse},
    {Py_tp_clear, Rebuild_clear},
    {Py_tp_members, Rebuild_members},
    {0, NULL},
};

PyType_Spec Rebuild_spec = {
    .name = "containers._engine._speedups.Rebuild",
    .basicsize = sizeof(RebuildObject),
    .flags = LOOP_FLAGS | Py_TPFLAGS_HAVE_VECTORCALL,
    .slots = Rebuild_slots,
};
