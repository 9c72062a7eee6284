#include "_speedups.h"

/* --- MapNode: fmap's mapper of one declared class, in C ------------------------------

   `MapNode(mapper, loop, cls, fields, children, unset, structural)` is the generated
   mapper `map_node(x, depth)` of one frozen declared class (`_codegen.build_source`),
   its plain twin, run in C with the values `loop` (a `Loop`) is bound to: it reads the
   children named in `children`, maps each as the loop maps any child (so a child
   that is itself such a class is mapped here too), and builds the instance with
   `fields` (as `Rebuild`'s: 'child' takes the mapped child at that index, 'kept' reads
   the field from x, 'value' and 'factory' reset it) as `new_instance` does; with
   `structural` (fmapstructure), the dict of the mapped children by name. The
   generated mapper does the same in the same order: each child read and mapped in
   turn, then the kept fields read and the factories called in field order, the
   instance made last. So a node costs no Python frame, and `f` is called from C with
   or without the cache (benchmarks/run.py, W3id). `Loop` runs a MapNode found in
   `direct` without calling it; Python code (`_fast._Mode.node`, the mappers of other
   classes) calls it as `node(x, depth)`.

   An AttributeError anywhere in that (an unset field, or `f`'s own) becomes
   `unset(x, err)` raised `from None`, as in the generated `except AttributeError`.
   Past max_depth, the mapper is called instead, and hands x to the iterative engine;
   with the thread's stack running low, it is called with HANDOVER_DEPTH, so that it
   does the same, as the loops hand over their children. */

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *cls;      /* NULL once cleared (then a call raises) */
    PyObject *mapper;   /* the generated map_node(x, depth) */
    PyObject *loop;     /* the Loop whose bound values (f, the table) a call uses */
    PyObject *children; /* tuple of interned str: the children's fields, in visit order */
    PyObject *unset;    /* unset(x, err) -> the exception to raise */
    Field *fields;
    Py_ssize_t n_fields;
    int structural;
} MapNodeObject;

static int
MapNode_traverse(MapNodeObject *self, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(self->cls);
    Py_VISIT(self->mapper);
    Py_VISIT(self->loop);
    Py_VISIT(self->children);
    Py_VISIT(self->unset);
    return fields_traverse(self->fields, self->n_fields, visit, arg);
}

static int
MapNode_clear(MapNodeObject *self)
{
    Py_CLEAR(self->cls); /* first: a call made while the rest is released raises */
    Py_CLEAR(self->mapper);
    Py_CLEAR(self->loop);
    Py_CLEAR(self->children);
    Py_CLEAR(self->unset);
    fields_clear(self->fields, self->n_fields);
    return 0;
}

static void
MapNode_dealloc(MapNodeObject *self)
{
    PyTypeObject *type = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    MapNode_clear(self);
    fields_free(self->fields, self->n_fields);
    type->tp_free((PyObject *)self);
    Py_DECREF(type);
}

static PyObject *
MapNode_vectorcall(PyObject *callable, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    MapNodeObject *self = (MapNodeObject *)callable;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (nargs != 2 || (kwnames != NULL && PyTuple_GET_SIZE(kwnames) != 0)) {
        PyErr_SetString(PyExc_TypeError, "MapNode() takes 2 positional arguments (x, depth)");
        return NULL;
    }
    if (self->cls == NULL) {
        PyErr_SetString(PyExc_TypeError, "MapNode: the object was cleared");
        return NULL;
    }
    Run run;
    if (run_take((LoopObject *)self->loop, "MapNode", &run) < 0) {
        return NULL;
    }
    PyObject *r = map_declared(&run, callable, args[0], args[1]);
    run_release(&run);
    return r;
}

/* No __init__, as Rebuild: the fields never change under a call. */
static PyObject *
MapNode_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *names[] = {"mapper",   "loop",  "cls",        "fields",
                            "children", "unset", "structural", NULL};
    PyObject *mapper, *loop, *cls, *fields, *children, *unset;
    int structural;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOO!O!O!Op:MapNode", names, &mapper, &loop,
                                     &PyType_Type, &cls, &PyTuple_Type, &fields, &PyTuple_Type,
                                     &children, &unset, &structural)) {
        return NULL;
    }
    if (!PyCallable_Check(mapper) || !PyCallable_Check(unset)) {
        PyErr_SetString(PyExc_TypeError, "MapNode: mapper and unset must be callable");
        return NULL;
    }
    /* the types cannot be subclassed, so type is the one its module made */
    if (!Py_IS_TYPE(loop, ((ModuleState *)PyType_GetModuleState(type))->loop_type)) {
        PyErr_Format(PyExc_TypeError, "MapNode: loop must be a Loop of this module, not "
                                      "'%.100s'",
                     Py_TYPE(loop)->tp_name);
        return NULL;
    }
    Py_ssize_t n_children = PyTuple_GET_SIZE(children), n = PyTuple_GET_SIZE(fields), i;
    for (i = 0; i < n_children; i++) {
        if (!PyUnicode_CheckExact(PyTuple_GET_ITEM(children, i))) {
            PyErr_SetString(PyExc_TypeError, "MapNode: children must be a tuple of str");
            return NULL;
        }
    }
    MapNodeObject *self = (MapNodeObject *)type->tp_alloc(type, 0);
    if (self == NULL) {
        return NULL;
    }
    self->vectorcall = MapNode_vectorcall;
    self->structural = structural;
    self->fields = PyMem_Calloc(n ? n : 1, sizeof(Field));
    if (self->fields == NULL) {
        Py_DECREF(self);
        return PyErr_NoMemory();
    }
    Py_ssize_t counted = 0; /* read_field counts the children; `children` names them */
    for (i = 0; i < n; i++) {
        self->n_fields = i + 1; /* released by dealloc if what follows fails */
        Field *field = &self->fields[i];
        if (read_field("MapNode", PyTuple_GET_ITEM(fields, i), field, &counted) < 0) {
            Py_DECREF(self);
            return NULL;
        }
        if (field->how == FROM_FACTORY_SELF ||
            (field->how == FROM_CHILD && field->index >= n_children)) {
            PyErr_Format(PyExc_ValueError, "MapNode: field %R cannot be built here (a "
                                           "factory taking self, or a child index out of "
                                           "range)",
                         field->name);
            Py_DECREF(self);
            return NULL;
        }
    }
    self->children = PyTuple_New(n_children);
    if (self->children == NULL) {
        Py_DECREF(self);
        return NULL;
    }
    for (i = 0; i < n_children; i++) {
        PyObject *name = PyTuple_GET_ITEM(children, i);
        Py_INCREF(name);
        PyUnicode_InternInPlace(&name);
        PyTuple_SET_ITEM(self->children, i, name);
    }
    self->mapper = Py_NewRef(mapper);
    self->loop = Py_NewRef(loop);
    self->unset = Py_NewRef(unset);
    self->cls = Py_NewRef(cls); /* last: a set cls says the object is complete */
    return (PyObject *)self;
}

/* The exception being raised, taken (normalized, with its traceback). */
static PyObject *
take_raised(void)
{
#if PY_VERSION_HEX >= 0x030C0000
    return PyErr_GetRaisedException();
#else
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyErr_NormalizeException(&type, &value, &tb);
    if (tb != NULL) {
        PyException_SetTraceback(value, tb);
    }
    Py_XDECREF(type);
    Py_XDECREF(tb);
    return value;
#endif
}

/* Raise the exception exc (a reference taken). */
static void
set_raised(PyObject *exc)
{
#if PY_VERSION_HEX >= 0x030C0000
    PyErr_SetRaisedException(exc);
#else
    PyErr_Restore(Py_NewRef(Py_TYPE(exc)), exc, PyException_GetTraceback(exc));
#endif
}

/* The AttributeError being raised replaced, as the generated mapper's
   `except AttributeError as _e: raise _ct_unset(x, _e) from None` replaces it. */
static void
raise_unset(MapNodeObject *self, PyObject *x)
{
    PyObject *err = take_raised();
    PyObject *exc = PyObject_CallFunctionObjArgs(self->unset, x, err, NULL);
    if (exc != NULL && !PyExceptionInstance_Check(exc)) {
        Py_CLEAR(exc);
        PyErr_SetString(PyExc_TypeError, "exceptions must derive from BaseException");
    }
    if (exc == NULL) { /* raised in the except clause: chained to err */
        exc = take_raised();
        PyException_SetContext(exc, err);
        set_raised(exc);
        return;
    }
    PyException_SetCause(exc, NULL); /* `from None`: also suppresses the context */
    if (exc != err) {
        PyException_SetContext(exc, err);
    }
    else {
        Py_DECREF(err);
    }
    set_raised(exc);
}

/* kids[0:n] (mapped children, borrowed) and x's kept fields and defaults, as the
   instance or, structural, as the dict of the children by name. */
static PyObject *
build_declared(MapNodeObject *self, PyObject *x, PyObject *const *kids)
{
    Py_ssize_t n = self->n_fields, i, made = 0;
    if (self->structural) {
        PyObject *out = PyDict_New();
        for (i = 0; out != NULL && i < PyTuple_GET_SIZE(self->children); i++) {
            if (PyDict_SetItem(out, PyTuple_GET_ITEM(self->children, i), kids[i]) < 0) {
                Py_CLEAR(out);
            }
        }
        return out;
    }
    PyObject *stack[STACK_CHILDREN];
    PyObject **values = n <= STACK_CHILDREN ? stack : PyMem_New(PyObject *, n);
    PyObject *obj = NULL;
    if (values == NULL) {
        return PyErr_NoMemory();
    }
    /* every value first, in field order, then the instance (new_instance's arguments) */
    for (; made < n; made++) {
        const Field *field = &self->fields[made];
        PyObject *value;
        switch (field->how) {
        case FROM_CHILD:
            value = Py_NewRef(kids[field->index]);
            break;
        case FROM_KEPT:
            value = PyObject_GetAttr(x, field->name);
            break;
        case FROM_VALUE:
            value = Py_NewRef(field->value);
            break;
        default: /* FROM_FACTORY */
            value = PyObject_CallNoArgs(field->value);
            break;
        }
        if (value == NULL) {
            goto done;
        }
        values[made] = value;
    }
    obj = new_object((PyTypeObject *)self->cls);
    for (i = 0; obj != NULL && i < n; i++) {
        if (PyObject_GenericSetAttr(obj, self->fields[i].name, values[i]) < 0) {
            Py_CLEAR(obj);
        }
    }
done:
    while (made--) {
        Py_DECREF(values[made]);
    }
    if (values != stack) {
        PyMem_Free(values);
    }
    return obj;
}

/* x, an instance of the MapNode node's class, mapped with the run's values (at depth). */
PyObject *
map_declared(const Run *run, PyObject *node, PyObject *x, PyObject *depth)
{
    MapNodeObject *self = (MapNodeObject *)node;
    Py_ssize_t d = PyLong_AsSsize_t(depth);
    if (d == -1 && PyErr_Occurred()) {
        return NULL;
    }
    if (self->cls == NULL) {
        PyErr_SetString(PyExc_TypeError, "MapNode: the object was cleared");
        return NULL;
    }
    int low = stack_is_low();
    if (d > run->max_depth || low) { /* the mapper hands x to the iterative engine */
        PyObject *mapper = Py_NewRef(self->mapper); /* the call may clear self */
        PyObject *argv[2] = {x, low ? ((ModuleState *)PyType_GetModuleState(Py_TYPE(node)))
                                          ->handover_depth
                                    : depth};
        PyObject *r = PyObject_Vectorcall(mapper, argv, 2, NULL);
        Py_DECREF(mapper);
        return r;
    }
    Py_ssize_t n = PyTuple_GET_SIZE(self->children), taken = 0;
    PyObject *stack[STACK_CHILDREN];
    PyObject **kids = n <= STACK_CHILDREN ? stack : PyMem_New(PyObject *, n);
    if (kids == NULL) {
        return PyErr_NoMemory();
    }
    Py_INCREF(self); /* f may drop direct's reference to it */
    PyObject *out = NULL, *kid_depth = PyLong_FromSsize_t(d + 1);
    if (kid_depth == NULL) {
        goto done;
    }
    for (; taken < n; taken++) {
        PyObject *v = PyObject_GetAttr(x, PyTuple_GET_ITEM(self->children, taken));
        if (v == NULL) {
            goto done;
        }
        kids[taken] = map_child(run, v, NULL, kid_depth);
        Py_DECREF(v);
        if (kids[taken] == NULL) {
            trail_index(taken);
            goto done;
        }
    }
    out = build_declared(self, x, kids);
done:
    Py_XDECREF(kid_depth);
    while (taken--) {
        Py_DECREF(kids[taken]);
    }
    if (kids != stack) {
        PyMem_Free(kids);
    }
    if (out == NULL && PyErr_ExceptionMatches(PyExc_AttributeError)) {
        raise_unset(self, x);
    }
    Py_DECREF(self);
    return out;
}

static PyMemberDef MapNode_members[] = {
    {"__vectorcalloffset__", Py_T_PYSSIZET, offsetof(MapNodeObject, vectorcall), Py_READONLY,
     NULL},
    {NULL, 0, 0, 0, NULL},
};

static PyType_Slot MapNode_slots[] = {
    {Py_tp_doc, (void *)PyDoc_STR(
                    "MapNode(mapper, loop, cls, fields, children, unset, structural): the "
                    "generated mapper of one declared class, called as mapper(x, depth), "
                    "in C with loop's bound values. fields as Rebuild's, without "
                    "'factory_self'; children: the names of the children, in visit "
                    "order.")},
    {Py_tp_new, MapNode_new},
    {Py_tp_call, PyVectorcall_Call},
    {Py_tp_dealloc, MapNode_dealloc},
    {Py_tp_traverse, MapNode_traverse},
    {Py_tp_clear, MapNode_clear},
    {Py_tp_members, MapNode_members},
    {0, NULL},
};

PyType_Spec MapNode_spec = {
    .name = "containers._engine._speedups.MapNode",
    .basicsize = sizeof(MapNodeObject),
    .flags = LOOP_FLAGS | Py_TPFLAGS_HAVE_VECTORCALL,
    .slots = MapNode_slots,
};
