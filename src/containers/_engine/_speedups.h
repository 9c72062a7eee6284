/* containers._engine._speedups: what its source files share. The module is one
   extension built from several files (setup.py), one per accelerator:

   _speedups.c          the module: its state, its types made, frame_stack_room
   _speedups_idtable.c  IdTable, fmap's identity cache
   _speedups_loop.c     Loop and PairLoop, fmap's child loops
   _speedups_mapnode.c  MapNode, a frozen declared class's mapper
   _speedups_flatten.c  flatten, flatten's walk
   _speedups_paths.c    leaf_paths, the key paths of a Structure's leaves
   _speedups_build.c    build, unflatten's rebuild of a Structure's records
   _speedups_rebuild.c  Rebuild and new_instance, a class's rebuild without __init__

   Here: the types and constants more than one file reads, and the functions one
   file calls in another (hidden: the module exports only PyInit__speedups). */

#ifndef CONTAINERS_SPEEDUPS_H
#define CONTAINERS_SPEEDUPS_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stddef.h> /* offsetof */
#include <stdint.h> /* uint64_t, uintptr_t */
#if PY_VERSION_HEX < 0x030C0000
#include <structmember.h>
#define Py_T_PYSSIZET T_PYSSIZET
#define Py_READONLY READONLY
#endif

#if defined(__linux__)
#include <pthread.h>
#endif

/* A tuple of at most this many immutable leaves is mapped without a call of its
   mapper (as `_loops.UNROLLED_TUPLE_LENGTH` in the Python loop). */
#define UNROLLED 4

/* IdTable (_speedups_idtable.c) and the module's state. */

typedef struct {
    PyObject *key;
    PyObject *value;
} Entry;

typedef struct {
    PyObject_HEAD
    uint32_t *slots; /* NULL until the first store, and after clear */
    Entry *entries;  /* room for (mask + 1) / 2, the first `used` stored */
    size_t mask;     /* the number of slots - 1 (0 when slots is NULL) */
    Py_ssize_t used;
    uint64_t layout; /* changed when the slots are replaced (growth, clear): an empty
                        slot a probe found stays its key's while this holds (Probe) */
} IdTableObject;

/* A block of memory one call of build uses and gives back (scratch_take). */
typedef struct {
    void *mem; /* NULL: none */
    size_t size;
} Scratch;

/* A table's arrays, without its entries' objects: slots all 0. */
typedef struct {
    uint32_t *slots; /* NULL: none */
    Entry *entries;  /* room for (mask + 1) / 2 */
    size_t mask;
} TableArrays;

/* The module's state: a depth past every mapper's limit, as a Python int, the
   module's IdTable type, and the names flatten and build read. */
typedef struct {
    PyObject *handover_depth;
    PyTypeObject *table_type;
    PyTypeObject *loop_type;
    PyTypeObject *node_type;
    PyObject *flatten_name;   /* "flatten", interned: a NodeKind's attribute */
    PyObject *unflatten_name; /* "unflatten", interned: another */
    TableArrays spare;        /* a cleared table's arrays, for the next table (spare_put) */
    Scratch scratch;          /* a finished build's block, for the next build (scratch_put) */
} ModuleState;

/* The slots allocated at the first store. */

/* Where a lookup of one key ended: the empty slot its store can fill. Between the
   lookup and the store, other keys are stored (a node's children, or anything f
   stores) and the table may grow or be cleared. While the slots are the same ones
   (`layout`) and this slot is still empty, it is still the first empty slot of the
   key's probe: the slots before it were full and nothing is removed but by clear. */
typedef struct {
    size_t slot;
    uint64_t layout;
    int valid; /* 0: no slot to reuse (no table yet) */
} Probe;

/* Loop and PairLoop (_speedups_loop.c). */

enum {
    REF_F,          /* the mapped function (bind) */
    REF_IMMUTABLE,  /* set of leaf types never cached */
    REF_LEAF_TYPES, /* set of all leaf types */
    REF_NODE,       /* Loop: node(x, depth); PairLoop: node(x, (y,), depth) */
    REF_DIRECT,     /* Loop: dict, type -> mapper(x, depth), or a leaf's marker */
    REF_VALUE_LEAF, /* Loop: direct's marker for a value type: f(x) */
    REF_CACHED_LEAF, /* Loop: direct's marker for another leaf type: f(x), cached */
    REF_TABLE,      /* the identity cache, an IdTable, or None without one (bind) */
    REF_PRUNE,      /* what a repeat becomes when use_prune (bind) */
    REF_PAIR,       /* PairLoop: pair(x, y, depth), for a tuple */
    N_REFS
};

typedef struct {
    PyObject_HEAD
    PyObject *refs[N_REFS];
    int use_prune;        /* (bind) */
    Py_ssize_t max_depth; /* Loop: _core.MAX_FAST_DEPTH, the deepest node mapped here */
    PyTypeObject *node_type; /* Loop: the module's MapNode type (borrowed: the loop's
                                type holds the module, whose state holds it) */
} LoopObject;

/* One run's view of a loop: its own references and scalars. */
typedef struct {
    PyObject *refs[N_REFS];
    int use_prune;
    Py_ssize_t max_depth;
    PyTypeObject *node_type;
} Run;


/* Where a field's value comes from. */
enum { FROM_CHILD, FROM_KEPT, FROM_VALUE, FROM_FACTORY, FROM_FACTORY_SELF };

typedef struct {
    PyObject *name;   /* interned str */
    PyObject *value;  /* FROM_VALUE: the default; FROM_FACTORY(_SELF): the factory */
    Py_ssize_t index; /* FROM_CHILD, FROM_KEPT: the position in children or kept */
    int how;
} Field;

/* Children up to this many are held on the C stack during a rebuild. */
#define STACK_CHILDREN 8

/* Heap types, one pair per module object; like the static types they replace, they
   cannot be subclassed or changed. */
#define LOOP_FLAGS (Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_IMMUTABLETYPE)

#if defined(__GNUC__)
#define SPEEDUPS_HIDDEN __attribute__((visibility("hidden")))
#else
#define SPEEDUPS_HIDDEN
#endif

/* _speedups_idtable.c */
SPEEDUPS_HIDDEN extern PyType_Spec IdTable_spec;
SPEEDUPS_HIDDEN void arrays_free(TableArrays arrays);
SPEEDUPS_HIDDEN PyObject *table_probe(const IdTableObject *self, const void *key, Probe *probe);
SPEEDUPS_HIDDEN int table_fill(IdTableObject *self, const Probe *probe, PyObject *key,
                               PyObject *value);

/* _speedups_loop.c */
SPEEDUPS_HIDDEN extern PyType_Spec Loop_spec;
SPEEDUPS_HIDDEN extern PyType_Spec PairLoop_spec;
SPEEDUPS_HIDDEN PyObject *map_child(const Run *run, PyObject *x, PyObject *y, PyObject *depth);
SPEEDUPS_HIDDEN int stack_is_low(void);
SPEEDUPS_HIDDEN int run_take(LoopObject *self, const char *what, Run *run);
SPEEDUPS_HIDDEN void run_release(Run *run);

/* _speedups_mapnode.c */
SPEEDUPS_HIDDEN extern PyType_Spec MapNode_spec;
SPEEDUPS_HIDDEN PyObject *map_declared(const Run *run, PyObject *node, PyObject *x,
                                       PyObject *depth);

/* _speedups_flatten.c, _speedups_paths.c, _speedups_build.c */
SPEEDUPS_HIDDEN PyObject *speedups_flatten(PyObject *module, PyObject *const *args,
                                           Py_ssize_t nargs);
SPEEDUPS_HIDDEN PyObject *speedups_leaf_paths(PyObject *module, PyObject *const *args,
                                              Py_ssize_t nargs);
SPEEDUPS_HIDDEN PyObject *speedups_build(PyObject *module, PyObject *const *args, Py_ssize_t nargs);

/* _speedups_rebuild.c */
SPEEDUPS_HIDDEN extern PyType_Spec Rebuild_spec;
SPEEDUPS_HIDDEN PyObject *new_object(PyTypeObject *cls);
SPEEDUPS_HIDDEN PyObject *speedups_new_instance(PyObject *module, PyObject *const *args,
                                                Py_ssize_t nargs);
SPEEDUPS_HIDDEN int fields_traverse(const Field *fields, Py_ssize_t n, visitproc visit, void *arg);
SPEEDUPS_HIDDEN void fields_clear(Field *fields, Py_ssize_t n);
SPEEDUPS_HIDDEN void fields_free(Field *fields, Py_ssize_t n);
SPEEDUPS_HIDDEN int read_field(const char *type, PyObject *entry, Field *field,
                               Py_ssize_t *n_children);

#endif /* CONTAINERS_SPEEDUPS_H */
