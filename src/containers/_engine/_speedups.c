/* containers._engine._speedups: fmap's child loops in C, an optional accelerator.

   `Loop.run(kids, depth)` (_speedups_loop.c) does what the generated Python loop does
   (`_loops.loop_source()`, its plain twin, used whenever this module is missing or
   CONTAINERS_PURE_PYTHON is set): map each child of one node and return the results
   as a list. A tuple of one to four immutable leaves is mapped in place; an immutable
   leaf goes to `f`; every other leaf goes to `f` through the identity cache, an
   `IdTable` (_speedups_idtable.c), so sharing holds by construction; a node goes to
   its type's mapper in `direct`, or to `node`. `Loop` records each leaf type it meets
   in `direct` too, as one of two markers, so that a leaf costs one lookup; a
   registration removes them (`_fast._forget_modes`). `PairLoop.run(kids, ykids,
   depth)` is the same for fmap with one extra tree (`_loops.loop_source(2)`).
   `Loop.leaf(x)` is the cached call alone, for the generated per-class mappers. A
   `MapNode` in `direct` is a frozen declared class's generated mapper done in C
   (_speedups_mapnode.c), so a tree of such classes is mapped without a Python frame.
   Everything else (other nodes, depth, errors and their paths) stays in Python, in
   `_fast._Mode` (one tree or several), which owns the loops and sets their per-call
   values with `bind`. flatten's walk, a Structure's leaf paths and its rebuild have
   their own files (_speedups.h lists them all).

   `IdTable` is the identity cache itself when this module is built (`_core.Memo`
   holds one instead of its dict and keep-list): results keyed by the objects'
   addresses, the objects held, so the loops probe it without making an int per
   lookup, and the Python side (`Memo`, the closures of `_fast`, the generated
   mappers through `Loop.leaf`) reads and writes the same table.

   Speed (benchmarks/instructions.py, W2 and W4): the type tests and calls of the
   Python loop cost about as many instructions in the interpreter as `f` itself; here
   they cost a few dozen. Calling a Python `f` from C costs a little more than from
   Python, far less than the bytecode it replaces.

   Both loop types share one layout: an array of references (the REF_* slots; each
   type uses some) and the identity cache's `use_prune`. A run takes its own references
   to all of them first, so that nothing `f` does (even re-initialising the loop) frees
   what the run is using.

   `Rebuild(cls, fields, unpack, kept_first)` is one container class's rebuild as
   another library's registry calls it (`unflatten(kept, children)`, or
   `(children, kept)` for torch): `object.__new__(cls)`, then each field stored with
   `PyObject_GenericSetAttr`, which is `object.__setattr__` (past a frozen class's own
   `__setattr__`, into slots through their descriptors, into the inline values on
   3.11+ without making a dict), reset fields getting their defaults. Its plain twin
   is the generated Python rebuild (`interop._generated.adapter_source`); the object
   is registered as is, so a rebuild costs no Python frame (benchmarks/interop.py,
   tree_unflatten). `new_instance(cls, names, *values)` is the same stores for the
   generated per-class code (`_codegen._construct`), which has the values at hand.

   The module uses multi-phase initialisation (PEP 489) and keeps no Python object in
   a C static: its types are heap types made by each module object, and its state
   (a constant, the IdTable type) lives in the module's state, so it can be imported
   in subinterpreters, each with its own GIL (3.12+). It needs the GIL: a loop's
   references are read and replaced without locks, so on a free-threaded build
   (3.13+) importing it turns the GIL back on. */

#include "_speedups.h"

/* frame_stack_room(): the bytes left in the chunk of this thread's frame stack that the
   calling Python frame is in, or -1 where it is not read: before 3.11 (no such stack)
   and from 3.14 on, whose chunks are cached (the problem _core._walk works around is
   fixed there; this reads fields of the thread state that a later version may move). */
static PyObject *
speedups_frame_stack_room(PyObject *module, PyObject *Py_UNUSED(ignored))
{
    (void)module;
#if PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030E0000
    PyThreadState *ts = PyThreadState_Get();
    return PyLong_FromSsize_t((char *)ts->datastack_limit - (char *)ts->datastack_top);
#else
    return PyLong_FromLong(-1);
#endif
}

static PyMethodDef speedups_methods[] = {
    {"frame_stack_room", (PyCFunction)speedups_frame_stack_room, METH_NOARGS,
     "frame_stack_room(): the bytes left in the chunk of this thread's frame stack that "
     "the caller's frame is in (CPython 3.11 to 3.13), or -1."},
    {"new_instance", (PyCFunction)(void (*)(void))speedups_new_instance, METH_FASTCALL,
     "new_instance(cls, names, *values): object.__new__(cls) with each name set to its "
     "value as object.__setattr__ sets it (the generated unflatten's)."},
    {"flatten", (PyCFunction)(void (*)(void))speedups_flatten, METH_FASTCALL,
     "flatten(x, kind, leaf_types, records, context): the leaves of x, its records "
     "appended to records unless None (the compiled twin of _flat.flatten_fast); "
     "with a sixth argument immutable, (leaves, once) (twin: _flat.flatten_once)."},
    {"leaf_paths", (PyCFunction)(void (*)(void))speedups_leaf_paths, METH_FASTCALL,
     "leaf_paths(records, context): the key path of every leaf of a Structure's records "
     "(the compiled twin of _record_paths.ranked_paths without ranks)."},
    {"same_records", (PyCFunction)(void (*)(void))speedups_same_records, METH_FASTCALL,
     "same_records(a, b): whether two Structures' records are made of the same objects "
     "(the compiled twin of _structure.same_records_plain)."},
    {"fill_part", (PyCFunction)(void (*)(void))speedups_fill_part, METH_FASTCALL,
     "fill_part(keys, hashes, leaves, picks): {keys[i]: leaves[picks[i]]}, each key "
     "inserted with its hash hashes[i] (the compiled twin of _tags.fill_part_plain)."},
    {"fill_missing", (PyCFunction)(void (*)(void))speedups_fill_missing, METH_FASTCALL,
     "fill_missing(out, other, missing): each item of out that is missing replaced by "
     "other's at its index (the compiled twin of _split.fill_missing_plain)."},
    {"build", (PyCFunction)(void (*)(void))speedups_build, METH_FASTCALL,
     "build(records, leaves, context): the tree of a Structure's records with leaves in "
     "place (the compiled twin of _records.build)."},
    {NULL, NULL, 0, NULL},
};

/* Make a type for this module object and add it; -1 on error. With kept, also store a
   new reference to it there. */
static int
add_type(PyObject *module, PyType_Spec *spec, PyTypeObject **kept)
{
    PyObject *type = PyType_FromModuleAndSpec(module, spec, NULL);
    if (type == NULL) {
        return -1;
    }
    int r = PyModule_AddType(module, (PyTypeObject *)type);
    if (kept != NULL && r == 0) {
        *kept = (PyTypeObject *)type;
    }
    else {
        Py_DECREF(type);
    }
    return r;
}

static int
speedups_exec(PyObject *module)
{
    ModuleState *state = PyModule_GetState(module);
    state->handover_depth = PyLong_FromLong(1L << 30);
    if (state->handover_depth == NULL ||
        add_type(module, &IdTable_spec, &state->table_type) < 0 ||
        add_type(module, &Loop_spec, &state->loop_type) < 0 ||
        add_type(module, &PairLoop_spec, NULL) < 0 ||
        add_type(module, &Rebuild_spec, NULL) < 0 ||
        add_type(module, &MapNode_spec, &state->node_type) < 0 ||
        add_type(module, &KeyHash_spec, NULL) < 0 ||
        PyModule_AddIntConstant(module, "UNROLLED", UNROLLED) < 0) {
        return -1;
    }
    return 0;
}

static int
speedups_traverse(PyObject *module, visitproc visit, void *arg)
{
    ModuleState *state = PyModule_GetState(module);
    Py_VISIT(state->handover_depth);
    Py_VISIT(state->table_type);
    Py_VISIT(state->loop_type);
    Py_VISIT(state->node_type);
    return 0;
}

static int
speedups_clear(PyObject *module)
{
    ModuleState *state = PyModule_GetState(module);
    Py_CLEAR(state->handover_depth);
    Py_CLEAR(state->table_type);
    Py_CLEAR(state->loop_type);
    Py_CLEAR(state->node_type);
    return 0;
}

static void
speedups_free(void *module)
{
    speedups_clear((PyObject *)module);
    ModuleState *state = PyModule_GetState((PyObject *)module);
    arrays_free(state->spare);
    state->spare = (TableArrays){NULL, NULL, 0};
    PyMem_Free(state->scratch.mem);
    state->scratch = (Scratch){NULL, 0};
}

/* What the module declares: it runs in any interpreter, each with its own GIL (no
   Python object in C statics; the stack bound is per thread), and it needs the GIL. */
static PyModuleDef_Slot speedups_slots[] = {
    {Py_mod_exec, speedups_exec},
#if PY_VERSION_HEX >= 0x030C0000
    {Py_mod_multiple_interpreters, Py_MOD_PER_INTERPRETER_GIL_SUPPORTED},
#endif
#if PY_VERSION_HEX >= 0x030D0000
    {Py_mod_gil, Py_MOD_GIL_USED},
#endif
    {0, NULL},
};

static struct PyModuleDef speedups_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "containers._engine._speedups",
    .m_doc = PyDoc_STR("fmap's child loops and declared classes' mappers, flatten's walk, "
                       "unflatten's rebuild and interop's rebuild in C (optional; see "
                       "_fast._Mode, _mappers.node_plan, _flat.flatten_fast, "
                       "_records.build and interop._generated)."),
    .m_size = sizeof(ModuleState),
    .m_methods = speedups_methods,
    .m_slots = speedups_slots,
    .m_traverse = speedups_traverse,
    .m_clear = speedups_clear,
    .m_free = speedups_free,
};

PyMODINIT_FUNC
PyInit__speedups(void)
{
    return PyModuleDef_Init(&speedups_module);
}
