/* containers._engine._speedups: what its source files share. The module is one
   extension built from several files (setup.py), one per accelerator:

   _speedups.c          the module: its state, its types made, frame_stack_room
   _speedups_idtable.c  IdTable, fmap's identity cache
   _speedups_loop.c     Loop and PairLoop, fmap's child loops
   _speedups_mapnode.c  MapNode, a frozen declared class's mapper
   _speedups_flatten.c  flatten, flatten's walk
   _speedups_paths.c    leaf_paths, the key paths of a Structure's leaves
   _speedups_build.c    build, unflatten's rebuild of a Structure's records
   _speedups_rebuild.c  Rebuild and new_instance, a class's rebuild without __init__;
                        fill_missing, combine's choice of leaves

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
    uint32_t *slots; /* NULL until the first store, and after clear; each 0 (empty) or
                        an entry's index + 1 in the bits of mask, a tag in the others
                        (table_tag) */
    Entry *entries;  /* room for (mask + 1) / 2, the first `used` stored */
    size_t mask;     /* the number of slots - 1 (0 when slots is NULL) */
    Py_ssize_t used;
    uint64_t layout; /* changed when the slots are replaced or rebuilt (growth, clear,
                        a new shift): an empty slot a probe found stays its key's while
                        this holds (Probe) */
    unsigned shift;  /* the address bits below the home slot's (table_home): 0 until
                        the first store, then TABLE_SHIFT, then the keys' own
                        (table_respace) */
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
SPEEDUPS_HIDDEN void table_respace(IdTableObject *self);
SPEEDUPS_HIDDEN void arrays_free(TableArrays arrays);
SPEEDUPS_HIDDEN size_t table_jump(const IdTableObject *self, const void *key, size_t i);
SPEEDUPS_HIDDEN int table_store(IdTableObject *self, PyObject *key, PyObject *value);

/* _speedups_loop.c */
SPEEDUPS_HIDDEN extern PyType_Spec Loop_spec;
SPEEDUPS_HIDDEN extern PyType_Spec PairLoop_spec;
SPEEDUPS_HIDDEN PyObject *map_child(const Run *run, PyObject *x, PyObject *y, PyObject *depth);
SPEEDUPS_HIDDEN void trail_index(Py_ssize_t i);

/* _speedups_mapnode.c */
SPEEDUPS_HIDDEN extern PyType_Spec MapNode_spec;
SPEEDUPS_HIDDEN PyObject *map_declared(const Run *run, PyObject *node, PyObject *x,
                                       PyObject *depth);

/* _speedups_flatten.c, _speedups_paths.c, _speedups_build.c */
SPEEDUPS_HIDDEN PyObject *speedups_flatten(PyObject *module, PyObject *const *args,
                                           Py_ssize_t nargs);
SPEEDUPS_HIDDEN PyObject *speedups_leaf_paths(PyObject *module, PyObject *const *args,
                                              Py_ssize_t nargs);
SPEEDUPS_HIDDEN PyObject *speedups_same_records(PyObject *module, PyObject *const *args,
                                                Py_ssize_t nargs);
SPEEDUPS_HIDDEN PyObject *speedups_fill_part(PyObject *module, PyObject *const *args,
                                             Py_ssize_t nargs);
SPEEDUPS_HIDDEN extern PyType_Spec KeyHash_spec;
SPEEDUPS_HIDDEN PyObject *speedups_build(PyObject *module, PyObject *const *args, Py_ssize_t nargs);

/* _speedups_rebuild.c */
SPEEDUPS_HIDDEN extern PyType_Spec Rebuild_spec;
SPEEDUPS_HIDDEN PyObject *speedups_new_instance(PyObject *module, PyObject *const *args,
                                                Py_ssize_t nargs);
SPEEDUPS_HIDDEN PyObject *speedups_fill_missing(PyObject *module, PyObject *const *args,
                                                Py_ssize_t nargs);
SPEEDUPS_HIDDEN int fields_traverse(const Field *fields, Py_ssize_t n, visitproc visit, void *arg);
SPEEDUPS_HIDDEN void fields_clear(Field *fields, Py_ssize_t n);
SPEEDUPS_HIDDEN void fields_free(Field *fields, Py_ssize_t n);
SPEEDUPS_HIDDEN int read_field(const char *type, PyObject *entry, Field *field,
                               Py_ssize_t *n_children);

/* --- hot helpers, called in several files: inline in each, as they were in one file
   (a call per leaf or per node costs what the inlining saved) ------------------- */

/* A probe's steps to the next slot before it jumps (table_find). */
#define TABLE_LINEAR_STEPS 3

/* A function kept out of line, off its callers' fast path. */
#if defined(__GNUC__)
#define COLD __attribute__((noinline, cold))
#else
#define COLD
#endif

/* The shift of a table's first keys: objects are 16-byte aligned, so the low 4 bits
   of an address say nothing. */
#define TABLE_SHIFT 4

/* Where key's probe starts. */
static inline size_t
table_home(const IdTableObject *self, const void *key)
{
    /* The bits above the shift are kept in order: objects allocated one after another
       (a tree's leaves, usually) take nearby slots, so a walk reads the slots nearly
       in order instead of missing the CPU cache at each probe (benchmarks/run.py, W3id
       at 100k: a multiplicative hash made each store a cache miss, as slow as the
       dict). The shift follows the keys' spacing (table_respace): objects 96 bytes apart
       (numpy arrays) take every third slot rather than one in six, so a walk reads
       half as many cache lines of slots. Higher bits are folded in so
       that objects a power of two apart (page-aligned ones) still spread over the
       slots. */
    uintptr_t h = (uintptr_t)key >> self->shift;
    h ^= h >> 16;
#if SIZEOF_VOID_P > 4
    h ^= h >> 32; /* a shift by the type's width would be undefined on 32-bit builds */
#endif
    return (size_t)h & self->mask;
}

/* The bits of a slot that are not its entry's index + 1: a few bits of the address of
   the entry's key, so that a probe passing an occupied slot tells (almost always)
   from the slot alone that the key is another one, without reading that entry's key:
   an entry is 16 bytes in a table of several MB, so that read missed the CPU cache
   at most collisions (benchmarks/run.py, W3id at 100k: one key in five meets
   another's slot). An index + 1 is at most (mask + 1) / 2, so it fits the bits of
   mask; the tag takes the others (none when the slots are 2^32). */
static inline uint32_t
table_tag(const IdTableObject *self, const void *key)
{
    /* the high half of the address times a 64-bit odd constant (Fibonacci hashing):
       bits unrelated to the home slot's */
    uint64_t z = (uint64_t)(uintptr_t)key * UINT64_C(0x9e3779b97f4a7c15);
    return (uint32_t)(z >> 32) & ~(uint32_t)self->mask;
}

/* The entry's index of the occupied slot value s. */
static inline size_t
table_index(const IdTableObject *self, uint32_t s)
{
    return (size_t)(s & (uint32_t)self->mask) - 1;
}

/* Whether the occupied slot value s holds key, whose tag is tag. */
static inline int
table_holds(const IdTableObject *self, uint32_t s, uint32_t tag, const void *key)
{
    return (s & ~(uint32_t)self->mask) == tag && self->entries[table_index(self, s)].key == key;
}

/* The slot of key, or the empty slot that ends its probe (slots must exist).

   The probe tries the next TABLE_LINEAR_STEPS slots (usually in the same cache line),
   then jumps as CPython's dicts do, i = 5i + 1 + perturb with perturb a scrambled
   address shifted right at each jump: a sequence that reaches every slot, so the probe
   ends at the first empty one. Linear probing alone is slow exactly where the home
   slots keep addresses in order: objects allocated 16 bytes apart fill a run of slots
   as long as the tree, and when two such runs meet (two memory arenas whose addresses
   fall on the same slots as the table grows) every later key walks to the end of the
   merged run: 165 slots per key on 100,000 `object()`s, a 7x slower fmap. With the
   jumps, 0.1; on trees of declared classes and of dicts of arrays the probes are as
   short as before and leave the cache line as rarely (benchmarks/run.py, W3id, W6id).
   A slot passed is told apart by its tag (table_tag), its entry read only if the tag
   is key's. */
static inline size_t
table_find(const IdTableObject *self, const void *key)
{
    size_t i = table_home(self, key);
    uint32_t tag = table_tag(self, key);
    uint32_t s;
    for (int step = 0; (s = self->slots[i]) != 0 && !table_holds(self, s, tag, key); step++) {
        if (step == TABLE_LINEAR_STEPS) {
            return table_jump(self, key, i);
        }
        i = (i + 1) & self->mask;
    }
    return i;
}

/* Ask the CPU to load the slot where key's probe starts, ahead of the probe: a
   speed hint, which neither reads nor changes anything (any address may be given,
   even a stale one). A walk over a large tree misses the CPU cache at most home
   slots (perf record, benchmarks/run.py W6id at 100k: most of the table's time);
   hinted one child ahead, the slot is there when the child is looked up. */
static inline void
table_prefetch(const IdTableObject *self, const void *key)
{
#if defined(__GNUC__)
    if (self->slots != NULL) {
        __builtin_prefetch(&self->slots[table_home(self, key)]);
    }
#else
    (void)self;
    (void)key;
#endif
}

/* Whether one more entry fits without growing. */
static inline int
table_has_room(const IdTableObject *self)
{
    return self->slots != NULL && (size_t)(self->used + 1) * 2 <= self->mask + 1;
}

/* How many keys table_respace reads: the first ones stored. */
#define TABLE_SPACING_SAMPLE 64

/* Put (key, value) in the empty slot i, as the next entry (there must be room). */
static inline void
table_put(IdTableObject *self, size_t i, PyObject *key, PyObject *value)
{
    Py_INCREF(key);
    Py_INCREF(value);
    self->entries[self->used].key = key;
    self->entries[self->used].value = value;
    self->slots[i] = table_tag(self, key) | (uint32_t)++self->used;
    if (self->used == TABLE_SPACING_SAMPLE) {
        table_respace(self);
    }
}

/* The value stored for key (borrowed), or NULL with probe set for table_fill. One probe
   per lookup and store instead of two (benchmarks/instructions.py, W3id). */
static inline PyObject *
table_probe(const IdTableObject *self, const void *key, Probe *probe)
{
    probe->valid = 0;
    if (self->slots == NULL) {
        return NULL;
    }
    size_t i = table_find(self, key);
    uint32_t s = self->slots[i];
    if (s != 0) {
        return self->entries[table_index(self, s)].value;
    }
    probe->slot = i;
    probe->layout = self->layout;
    probe->valid = 1;
    return NULL;
}

/* table_store(key, value) after table_probe(key) found nothing: into the slot it
   found, if still the key's and no growth is needed, else after a new probe; -1 on
   error. A node's lookup and store, around its children's, take one probe as a
   leaf's do (benchmarks/run.py, W6id). */
static inline int
table_fill(IdTableObject *self, const Probe *probe, PyObject *key, PyObject *value)
{
    if (probe->valid && self->layout == probe->layout && self->slots[probe->slot] == 0 &&
        table_has_room(self)) {
        table_put(self, probe->slot, key, value);
        return 0;
    }
    return table_store(self, key, value);
}

/* The loops recurse in C through the nodes' Python mappers, about 1 KB of C stack per
   level, down to the fast path's depth limit (_core.MAX_FAST_DEPTH). A thread may have
   far less stack than that needs (threading.stack_size(64 * 1024)): when less than
   STACK_RESERVE bytes remain below a loop, it hands its children to their mappers with
   HANDOVER_DEPTH, past any depth limit, so that every node among them goes to the
   iterative engine (each mapper's `depth > max_depth` test) instead of one C level
   deeper. The reserve is what the engine, `f` and numpy need from there on. */
#define STACK_RESERVE (24 * 1024)

#if defined(__linux__)
/* The lowest usable address of this thread's stack, found once per thread (NULL if
   unknown: then the loops never hand over early). */
static _Thread_local char *stack_low = NULL;
static _Thread_local int stack_checked = 0;

static inline int
stack_is_low(void)
{
    char here;
    if (!stack_checked) {
        stack_checked = 1;
        pthread_attr_t attr;
        void *addr;
        size_t size;
        if (pthread_getattr_np(pthread_self(), &attr) == 0) {
            if (pthread_attr_getstack(&attr, &addr, &size) == 0) {
                stack_low = (char *)addr;
            }
            pthread_attr_destroy(&attr);
        }
    }
    return stack_low != NULL && &here - stack_low < STACK_RESERVE;
}
#else
/* Elsewhere the depth limit alone bounds the recursion (it fits 128 KB stacks). */
static inline int
stack_is_low(void)
{
    return 0;
}
#endif

/* Take the run's own references to all of self's; -1 with TypeError if self was never
   initialised. */
static inline int
run_take(LoopObject *self, const char *what, Run *run)
{
    if (self->refs[REF_F] == NULL) {
        PyErr_Format(PyExc_TypeError, "%s: the loop was never initialised", what);
        return -1;
    }
    run->use_prune = self->use_prune;
    run->max_depth = self->max_depth;
    run->node_type = self->node_type;
    for (int i = 0; i < N_REFS; i++) {
        run->refs[i] = self->refs[i];
        Py_XINCREF(run->refs[i]);
    }
    return 0;
}

static inline void
run_release(Run *run)
{
    for (int i = 0; i < N_REFS; i++) {
        Py_XDECREF(run->refs[i]);
    }
}

/* object.__new__(cls): object's tp_new itself where it is the class's (the checks of
   its Python wrapper pass then), else the wrapper, which decides (a class with its own
   __new__ may get an instance, one with a built-in base is refused). */
static inline PyObject *
new_object(PyTypeObject *cls)
{
    if (cls->tp_new != PyBaseObject_Type.tp_new) {
        return PyObject_CallMethod((PyObject *)&PyBaseObject_Type, "__new__", "O", cls);
    }
    PyObject *empty = PyTuple_New(0);
    if (empty == NULL) {
        return NULL;
    }
    PyObject *obj = PyBaseObject_Type.tp_new(cls, empty, NULL);
    Py_DECREF(empty);
    return obj;
}

#endif /* CONTAINERS_SPEEDUPS_H */
