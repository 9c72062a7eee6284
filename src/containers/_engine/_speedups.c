/* containers._engine._speedups: fmap's child loops in C, an optional accelerator.

   `Loop.run(kids, depth)` does what the generated Python loop does
   (`_loops.loop_source()`, its plain twin, used whenever this module is missing or
   CONTAINERS_PURE_PYTHON is set): map each child of one node and return the results
   as a list. A tuple of one to four immutable leaves is mapped in place; an immutable
   leaf goes to `f`; every other leaf goes to `f` through the identity cache, an
   `IdTable` (below), so sharing holds by construction; a node goes to its type's
   mapper in `direct`, or to `node`. `Loop` records each leaf type it meets in `direct`
   too, as one of two markers, so that a leaf costs one lookup; a registration
   removes them (`_fast._forget_modes`). `PairLoop.run(kids, ykids, depth)` is the same
   for fmap with one extra tree (`_loops.pair_loop_source()`). `Loop.leaf(x)` is
   the cached call alone, for the generated per-class mappers. A `MapNode` in
   `direct` is a frozen declared class's generated mapper done in C (below), so a
   tree of such classes is mapped without a Python frame. Everything else (other
   nodes, depth, errors and their paths) stays in Python, in `_fast._Mode` and
   `_fast._ManyMode`, which own the loops and set their per-call values with `bind`.

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

/* --- IdTable: fmap's identity cache, keyed by address -------------------------------

   The compiled twin of `_core.Memo`'s dict and keep-list: each cached object's result,
   found by the object's address. It holds a strong reference to every key object (and
   value) until cleared, so no address in it can be reused by another object while it
   lives: an address is as good a key as `id()`, without making an int per lookup, and
   without a second list to keep the objects alive (benchmarks/run.py, W3id).

   Laid out as CPython's dicts are: the entries (key, value) in the order stored, and
   a power-of-two array of 32-bit slots, at most half full, each 0 (empty) or an
   entry's index + 1, probed linearly. A probe that ends at an empty slot reads only
   the slots, 4 bytes each: at 150,000 entries they take 2 MB, where 16-byte slots
   holding the entries took 8 MB (benchmarks/run.py, W6id and W3id at 100k). Entries
   are written and released in order. They are never removed one by one, only all at
   once (`clear`), so an empty slot ends every probe and no tombstones are needed.
   Python reads the table by id, as it read the dict (`get(id, default)`, `id in
   table`, `table[id]`), and writes it with `store(obj, value)`; the loops below probe
   it directly. */

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
    PyObject *unflatten_name; /* "unflatten_fresh", interned: a NodeKind's attribute */
    TableArrays spare;        /* a cleared table's arrays, for the next table (spare_put) */
    Scratch scratch;          /* a finished build's block, for the next build (scratch_put) */
} ModuleState;

/* The slots allocated at the first store. */
#define TABLE_MIN_SLOTS 64
/* Below this many slots the table grows fourfold (fewer rehashes of a small table),
   from it twofold (less memory for a large one). */
#define TABLE_QUADRUPLE_BELOW 65536
/* A probe's steps to the next slot before it jumps (table_find). */
#define TABLE_LINEAR_STEPS 3

/* A function kept out of line, off its callers' fast path. */
#if defined(__GNUC__)
#define COLD __attribute__((noinline, cold))
#else
#define COLD
#endif

/* Where key's probe starts. */
static size_t
table_home(const IdTableObject *self, const void *key)
{
    /* Objects are 16-byte aligned, so the low 4 bits say nothing. The next bits are
       kept in order: objects allocated one after another (a tree's leaves, usually)
       take nearby slots, so a walk reads the slots nearly in order instead of
       missing the CPU cache at each probe (benchmarks/run.py, W3id at 100k: a
       multiplicative hash made each store a cache miss, as slow as the dict). Higher
       bits are folded in so that objects a power of two apart (page-aligned ones)
       still spread over the slots. */
    uintptr_t h = (uintptr_t)key >> 4;
    h ^= h >> 16;
#if SIZEOF_VOID_P > 4
    h ^= h >> 32; /* a shift by the type's width would be undefined on 32-bit builds */
#endif
    return (size_t)h & self->mask;
}

/* table_find's probe past its linear steps, from the occupied slot i. */
static COLD size_t
table_jump(const IdTableObject *self, const void *key, size_t i)
{
    /* the address's bits mixed into all of perturb's (splitmix64's finalizer) */
    uint64_t z = (uint64_t)(uintptr_t)key;
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    size_t perturb = (size_t)(z ^ (z >> 31));
    uint32_t s;
    do {
        perturb >>= 5;
        i = (i * 5 + perturb + 1) & self->mask;
    } while ((s = self->slots[i]) != 0 && self->entries[s - 1].key != key);
    return i;
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
   jumps, 0.1; on the W3 and W6id trees the probes are as short as before and leave
   the cache line as rarely (benchmarks/run.py, W3id, W6id). */
static inline size_t
table_find(const IdTableObject *self, const void *key)
{
    size_t i = table_home(self, key);
    uint32_t s;
    for (int step = 0; (s = self->slots[i]) != 0 && self->entries[s - 1].key != key; step++) {
        if (step == TABLE_LINEAR_STEPS) {
            return table_jump(self, key, i);
        }
        i = (i + 1) & self->mask;
    }
    return i;
}

/* The value stored for key (borrowed), or NULL if there is none; never an error. */
static PyObject *
table_lookup(const IdTableObject *self, const void *key)
{
    if (self->slots == NULL) {
        return NULL;
    }
    uint32_t s = self->slots[table_find(self, key)];
    return s == 0 ? NULL : self->entries[s - 1].value;
}

/* Whether one more entry fits without growing. */
static int
table_has_room(const IdTableObject *self)
{
    return self->slots != NULL && (size_t)(self->used + 1) * 2 <= self->mask + 1;
}

/* A cleared table leaves its arrays to the next table of the module (one spare), so
   that a walk repeated over trees of one size (a training loop) starts at the size the
   last one grew to instead of growing again: with 150,000 entries that is nine
   allocations, eight rehashes and the copies of the entries saved per call
   (benchmarks/run.py, W6id at 100k). Only arrays at most this large are kept, so the
   memory held between calls stays under 12 MB, */
#define SPARE_MAX_SLOTS (1 << 20)
/* and only those at least 1/SPARE_MIN_LOAD full, so that zeroing the slots for the next
   table (4 bytes per slot) costs at most a few bytes per entry stored: a small walk
   after a large one keeps its own small arrays, freeing the large ones. */
#define SPARE_MIN_LOAD 16

/* Take the module's spare arrays, if there are: 1, else 0. self has none. */
static int
spare_take(IdTableObject *self)
{
    ModuleState *state = PyType_GetModuleState(Py_TYPE(self));
    if (state == NULL || state->spare.slots == NULL) {
        return 0;
    }
    self->slots = state->spare.slots;
    self->entries = state->spare.entries;
    self->mask = state->spare.mask;
    state->spare = (TableArrays){NULL, NULL, 0};
    return 1;
}

static void
arrays_free(TableArrays arrays)
{
    PyMem_Free(arrays.slots);
    PyMem_Free(arrays.entries);
}

/* Give a cleared table's arrays (their `used` entries already released) to the module
   as its spare, all slots 0, or free them. */
static void
spare_put(PyTypeObject *type, TableArrays arrays, Py_ssize_t used)
{
    ModuleState *state = PyType_GetModuleState(type);
    size_t n = arrays.mask + 1;
    if (arrays.slots != NULL && state != NULL && state->spare.slots == NULL &&
        n <= SPARE_MAX_SLOTS && (size_t)used * SPARE_MIN_LOAD >= n) {
        memset(arrays.slots, 0, n * sizeof(uint32_t));
        state->spare = arrays;
        return;
    }
    arrays_free(arrays);
}

/* Four or two times as many slots (or the first ones: the spare's if there is one),
   and room for as many entries as they allow; -1 with MemoryError. No Python code
   runs here: entries stay where they are in the order stored, references do not
   change hands. */
static int
table_grow(IdTableObject *self)
{
    if (self->slots == NULL && spare_take(self)) {
        self->layout++;
        return 0;
    }
    size_t slots_now = self->slots == NULL ? 0 : self->mask + 1;
    size_t n = slots_now == 0                       ? TABLE_MIN_SLOTS
               : slots_now < TABLE_QUADRUPLE_BELOW ? 4 * slots_now
                                                   : 2 * slots_now;
    if (n / 2 > UINT32_MAX - 1) {
        PyErr_NoMemory(); /* an index + 1 must fit a slot */
        return -1;
    }
    uint32_t *slots = PyMem_Calloc(n, sizeof(uint32_t));
    Entry *entries = slots == NULL ? NULL : PyMem_Realloc(self->entries, n / 2 * sizeof(Entry));
    if (entries == NULL) {
        PyMem_Free(slots);
        PyErr_NoMemory();
        return -1;
    }
    PyMem_Free(self->slots);
    self->slots = slots;
    self->entries = entries;
    self->mask = n - 1;
    self->layout++;
    for (Py_ssize_t j = 0; j < self->used; j++) {
        /* the keys are distinct: the empty slot that ends the probe */
        slots[table_find(self, entries[j].key)] = (uint32_t)j + 1;
    }
    return 0;
}

/* Put (key, value) in the empty slot i, as the next entry (there must be room). */
static void
table_put(IdTableObject *self, size_t i, PyObject *key, PyObject *value)
{
    Py_INCREF(key);
    Py_INCREF(value);
    self->entries[self->used].key = key;
    self->entries[self->used].value = value;
    self->slots[i] = (uint32_t)++self->used;
}

/* Remember value as key's result (replacing any); -1 on error. */
static int
table_store(IdTableObject *self, PyObject *key, PyObject *value)
{
    if (!table_has_room(self) && table_grow(self) < 0) {
        return -1;
    }
    size_t i = table_find(self, key);
    if (self->slots[i] == 0) {
        table_put(self, i, key, value);
    }
    else {
        /* the old value's release may run Python code (a __del__): the table is
           complete before it does */
        Py_INCREF(value);
        Py_SETREF(self->entries[self->slots[i] - 1].value, value);
    }
    return 0;
}

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

/* The value stored for key (borrowed), or NULL with probe set for table_fill. One probe
   per lookup and store instead of two (benchmarks/instructions.py, W3id). */
static PyObject *
table_probe(const IdTableObject *self, const void *key, Probe *probe)
{
    probe->valid = 0;
    if (self->slots == NULL) {
        return NULL;
    }
    size_t i = table_find(self, key);
    uint32_t s = self->slots[i];
    if (s != 0) {
        return self->entries[s - 1].value;
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
static int
table_fill(IdTableObject *self, const Probe *probe, PyObject *key, PyObject *value)
{
    if (probe->valid && self->layout == probe->layout && self->slots[probe->slot] == 0 &&
        table_has_room(self)) {
        table_put(self, probe->slot, key, value);
        return 0;
    }
    return table_store(self, key, value);
}

/* Forget everything. The arrays are detached first, so that Python code run by the
   releases (a __del__) finds an empty, usable table; entries are released in the
   order stored. */
static int
IdTable_clear(IdTableObject *self)
{
    TableArrays arrays = {self->slots, self->entries, self->mask};
    Py_ssize_t used = self->used;
    self->slots = NULL;
    self->entries = NULL;
    self->mask = 0;
    self->used = 0;
    self->layout++;
    for (Py_ssize_t j = 0; j < used; j++) {
        Py_DECREF(arrays.entries[j].key);
        Py_DECREF(arrays.entries[j].value);
    }
    spare_put(Py_TYPE(self), arrays, used);
    return 0;
}

static int
IdTable_traverse(IdTableObject *self, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(self));
    for (Py_ssize_t j = 0; j < self->used; j++) {
        Py_VISIT(self->entries[j].key);
        Py_VISIT(self->entries[j].value);
    }
    return 0;
}

static void
IdTable_dealloc(IdTableObject *self)
{
    PyTypeObject *type = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    IdTable_clear(self);
    type->tp_free((PyObject *)self);
    Py_DECREF(type);
}

static PyObject *
IdTable_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    if (PyTuple_GET_SIZE(args) != 0 || (kwds != NULL && PyDict_GET_SIZE(kwds) != 0)) {
        PyErr_SetString(PyExc_TypeError, "IdTable() takes no arguments");
        return NULL;
    }
    return type->tp_alloc(type, 0); /* zeroed: empty */
}

/* The value stored for the object whose id is the int `id` (borrowed), or NULL: with
   TypeError if id is not an int, with no error if nothing is stored for it. */
static PyObject *
table_lookup_id(const IdTableObject *self, PyObject *id)
{
    if (!PyLong_Check(id)) {
        PyErr_Format(PyExc_TypeError, "IdTable: keys are ids of objects (int), not '%.100s'",
                     Py_TYPE(id)->tp_name);
        return NULL;
    }
    void *key = PyLong_AsVoidPtr(id);
    if (key == NULL && PyErr_Occurred()) {
        PyErr_Clear(); /* too large to be an address: no object has that id */
        return NULL;
    }
    return table_lookup(self, key);
}

static PyObject *
IdTable_get(IdTableObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs < 1 || nargs > 2) {
        PyErr_Format(PyExc_TypeError, "get() takes 1 or 2 arguments (%zd given)", nargs);
        return NULL;
    }
    PyObject *value = table_lookup_id(self, args[0]);
    if (value == NULL) {
        if (PyErr_Occurred()) {
            return NULL;
        }
        value = nargs == 2 ? args[1] : Py_None;
    }
    Py_INCREF(value);
    return value;
}

static PyObject *
IdTable_subscript(IdTableObject *self, PyObject *id)
{
    PyObject *value = table_lookup_id(self, id);
    if (value == NULL) {
        if (!PyErr_Occurred()) {
            PyErr_SetObject(PyExc_KeyError, id);
        }
        return NULL;
    }
    Py_INCREF(value);
    return value;
}

static int
IdTable_contains(IdTableObject *self, PyObject *id)
{
    return table_lookup_id(self, id) != NULL ? 1 : PyErr_Occurred() ? -1 : 0;
}

static Py_ssize_t
IdTable_length(IdTableObject *self)
{
    return self->used;
}

static PyObject *
IdTable_store(IdTableObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_Format(PyExc_TypeError, "store() takes 2 arguments (%zd given)", nargs);
        return NULL;
    }
    if (table_store(self, args[0], args[1]) < 0) {
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyObject *
IdTable_clear_method(IdTableObject *self, PyObject *Py_UNUSED(ignored))
{
    IdTable_clear(self);
    Py_RETURN_NONE;
}

/* The key objects in the order stored, as a new list (Memo.keep, for tests and
   debugging). */
static PyObject *
IdTable_keys(IdTableObject *self, PyObject *Py_UNUSED(ignored))
{
    PyObject *keys = PyList_New(self->used);
    for (Py_ssize_t j = 0; keys != NULL && j < self->used; j++) {
        Py_INCREF(self->entries[j].key);
        PyList_SET_ITEM(keys, j, self->entries[j].key);
    }
    return keys;
}

static PyMethodDef IdTable_methods[] = {
    {"get", (PyCFunction)(void (*)(void))IdTable_get, METH_FASTCALL,
     "get(id, default=None): the result stored for the object with this id, or default."},
    {"store", (PyCFunction)(void (*)(void))IdTable_store, METH_FASTCALL,
     "store(obj, value): remember value as obj's result, holding both."},
    {"keys", (PyCFunction)IdTable_keys, METH_NOARGS,
     "keys(): a new list of the objects whose results are stored, in the order stored."},
    {"clear", (PyCFunction)IdTable_clear_method, METH_NOARGS,
     "clear(): forget every result and release every object."},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot IdTable_slots[] = {
    {Py_tp_doc, (void *)PyDoc_STR("IdTable(): fmap's identity cache keyed by address, holding "
                                  "its objects (the compiled twin of _core.Memo's dict and "
                                  "keep list). Read by id, written by store(obj, value).")},
    {Py_tp_new, IdTable_new},
    {Py_tp_dealloc, IdTable_dealloc},
    {Py_tp_traverse, IdTable_traverse},
    {Py_tp_clear, IdTable_clear},
    {Py_tp_methods, IdTable_methods},
    {Py_mp_subscript, IdTable_subscript},
    {Py_mp_length, IdTable_length},
    {Py_sq_contains, IdTable_contains},
    {0, NULL},
};

/* --- Loop and PairLoop: fmap's child loops ------------------------------------------ */

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

static int
Loop_traverse(LoopObject *self, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(self)); /* a heap type: each instance holds a reference to it */
    for (int i = 0; i < N_REFS; i++) {
        Py_VISIT(self->refs[i]);
    }
    return 0;
}

static int
Loop_clear(LoopObject *self)
{
    for (int i = 0; i < N_REFS; i++) {
        Py_CLEAR(self->refs[i]);
    }
    return 0;
}

static void
Loop_dealloc(LoopObject *self)
{
    PyTypeObject *type = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    Loop_clear(self);
    type->tp_free((PyObject *)self);
    Py_DECREF(type);
}

/* Replace a slot's reference with a new one to value. */
static void
set_ref(LoopObject *self, int slot, PyObject *value)
{
    Py_INCREF(value);
    Py_XSETREF(self->refs[slot], value);
}

/* The per-call values of a loop no call has bound: no function, no table. */
static void
set_unbound(LoopObject *self)
{
    set_ref(self, REF_F, Py_None);
    set_ref(self, REF_TABLE, Py_None);
    set_ref(self, REF_PRUNE, Py_None);
    self->use_prune = 0;
}

/* The checks common to both constructors; -1 with TypeError if one fails. */
static int
check_callables_and_sets(const char *type, const char *names, PyObject **callables, int n,
                         PyObject *immutable, PyObject *leaf_types)
{
    for (int i = 0; i < n; i++) {
        if (!PyCallable_Check(callables[i])) {
            PyErr_Format(PyExc_TypeError, "%s: %s must be callable", type, names);
            return -1;
        }
    }
    if (!PyAnySet_Check(immutable) || !PyAnySet_Check(leaf_types)) {
        PyErr_Format(PyExc_TypeError, "%s: immutable and leaf_types must be sets", type);
        return -1;
    }
    return 0;
}

static int
Loop_init(LoopObject *self, PyObject *args, PyObject *kwds)
{
    static char *names[] = {"node",       "direct",     "immutable",   "leaf_types",
                            "value_leaf", "cached_leaf", "max_depth", NULL};
    PyObject *callables[3], *direct, *immutable, *leaf_types;
    Py_ssize_t max_depth;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OO!OOOOn:Loop", names, &callables[0],
                                     &PyDict_Type, &direct, &immutable, &leaf_types,
                                     &callables[1], &callables[2], &max_depth) ||
        check_callables_and_sets("Loop", "node, value_leaf and cached_leaf", callables, 3,
                                 immutable, leaf_types) < 0) {
        return -1;
    }
    self->max_depth = max_depth;
    /* the types cannot be subclassed, so self's type is the one its module made */
    self->node_type = ((ModuleState *)PyType_GetModuleState(Py_TYPE(self)))->node_type;
    set_ref(self, REF_NODE, callables[0]);
    set_ref(self, REF_VALUE_LEAF, callables[1]);
    set_ref(self, REF_CACHED_LEAF, callables[2]);
    set_ref(self, REF_DIRECT, direct);
    set_ref(self, REF_IMMUTABLE, immutable);
    set_ref(self, REF_LEAF_TYPES, leaf_types);
    set_unbound(self);
    return 0;
}

static int
PairLoop_init(LoopObject *self, PyObject *args, PyObject *kwds)
{
    static char *names[] = {"pair", "node", "immutable", "leaf_types", NULL};
    PyObject *callables[2], *immutable, *leaf_types;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOOO:PairLoop", names, &callables[0],
                                     &callables[1], &immutable, &leaf_types) ||
        check_callables_and_sets("PairLoop", "pair and node", callables, 2, immutable,
                                 leaf_types) < 0) {
        return -1;
    }
    set_ref(self, REF_PAIR, callables[0]);
    set_ref(self, REF_NODE, callables[1]);
    set_ref(self, REF_IMMUTABLE, immutable);
    set_ref(self, REF_LEAF_TYPES, leaf_types);
    set_unbound(self);
    return 0;
}

static PyObject *
Loop_bind(LoopObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4) {
        PyErr_Format(PyExc_TypeError, "bind() takes 4 arguments (%zd given)", nargs);
        return NULL;
    }
    /* the types cannot be subclassed, so self's type is the one its module made */
    ModuleState *state = PyType_GetModuleState(Py_TYPE(self));
    if (args[1] != Py_None && !Py_IS_TYPE(args[1], state->table_type)) {
        PyErr_Format(PyExc_TypeError, "bind(f, table, prune, use_prune): table must be an "
                                      "IdTable of this module, or None, not '%.100s'",
                     Py_TYPE(args[1])->tp_name);
        return NULL;
    }
    int use_prune = PyObject_IsTrue(args[3]);
    if (use_prune < 0) {
        return NULL;
    }
    set_ref(self, REF_F, args[0]);
    set_ref(self, REF_TABLE, args[1]);
    set_ref(self, REF_PRUNE, args[2]);
    self->use_prune = use_prune;
    Py_RETURN_NONE;
}

/* f(x), or f(x, y) when y is not NULL, for a leaf that is not a value: the cached
   result (or prune), or f's, stored. Without a table, f's. */
static PyObject *
map_cached(const Run *run, PyObject *x, PyObject *y)
{
    IdTableObject *table = run->refs[REF_TABLE] == Py_None
                               ? NULL
                               : (IdTableObject *)run->refs[REF_TABLE];
    Probe probe = {0, 0, 0};
    if (table != NULL) {
        PyObject *r = table_probe(table, x, &probe);
        if (r != NULL) {
            return Py_NewRef(run->use_prune ? run->refs[REF_PRUNE] : r);
        }
    }
    PyObject *argv[2] = {x, y};
    PyObject *r = PyObject_Vectorcall(run->refs[REF_F], argv, y ? 2 : 1, NULL);
    if (r != NULL && table != NULL && table_fill(table, &probe, x, r) < 0) {
        Py_CLEAR(r);
    }
    return r;
}

/* The mapped tuple if x is a tuple of one to UNROLLED immutable leaves (f(a) for each,
   or f(a, b) with the tuple y of x's length when y is not NULL); NULL with no error set
   if it is not, NULL with an error set if f raised. */
static PyObject *
map_small_tuple(const Run *run, PyObject *x, PyObject *y)
{
    Py_ssize_t n = PyTuple_GET_SIZE(x), i;
    PyObject *values[UNROLLED];
    if (n < 1 || n > UNROLLED) {
        return NULL;
    }
    for (i = 0; i < n; i++) {
        PyObject *type = (PyObject *)Py_TYPE(PyTuple_GET_ITEM(x, i));
        int leaf = PySet_Contains(run->refs[REF_IMMUTABLE], type);
        if (leaf <= 0) {
            return NULL; /* not all immutable leaves, or an error (set) */
        }
    }
    for (i = 0; i < n; i++) {
        PyObject *argv[2] = {PyTuple_GET_ITEM(x, i), y ? PyTuple_GET_ITEM(y, i) : NULL};
        values[i] = PyObject_Vectorcall(run->refs[REF_F], argv, y ? 2 : 1, NULL);
        if (values[i] == NULL) {
            while (i--) {
                Py_DECREF(values[i]);
            }
            return NULL;
        }
    }
    PyObject *out = PyTuple_New(n);
    if (out == NULL) {
        for (i = 0; i < n; i++) {
            Py_DECREF(values[i]);
        }
        return NULL;
    }
    for (i = 0; i < n; i++) {
        PyTuple_SET_ITEM(out, i, values[i]);
    }
    return out;
}

static PyObject *map_str_dict(const Run *run, PyObject *x, PyObject *depth);
static PyObject *map_declared(const Run *run, PyObject *node, PyObject *x, PyObject *depth);

/* For a type direct does not know: its leaf marker, recorded in direct, if the type
   is a leaf; else node (borrowed, all three); NULL on error. A leaf type is recorded
   once, so that each later leaf costs one lookup, as a node does. */
static PyObject *
leaf_marker(const Run *run, PyObject *type)
{
    int is = PySet_Contains(run->refs[REF_IMMUTABLE], type);
    PyObject *marker = run->refs[REF_VALUE_LEAF];
    if (is == 0) {
        is = PySet_Contains(run->refs[REF_LEAF_TYPES], type);
        marker = run->refs[REF_CACHED_LEAF];
    }
    if (is < 0) {
        return NULL;
    }
    if (is == 0) {
        return run->refs[REF_NODE];
    }
    return PyDict_SetItem(run->refs[REF_DIRECT], type, marker) < 0 ? NULL : marker;
}

/* Loop: the result for one child x (y, NULL, is there for the map_one signature). */
static PyObject *
map_child(const Run *run, PyObject *x, PyObject *y, PyObject *depth)
{
    (void)y;
    PyObject *type = (PyObject *)Py_TYPE(x);
    if (Py_IS_TYPE(x, &PyTuple_Type)) {
        PyObject *r = map_small_tuple(run, x, NULL);
        if (r != NULL || PyErr_Occurred()) {
            return r;
        }
    }
    /* Tested before the leaf-type sets: dict is never in them (the registry never
       removes a builtin kind, so `dict` cannot be read as a leaf). */
    else if (Py_IS_TYPE(x, &PyDict_Type)) {
        PyObject *r = map_str_dict(run, x, depth);
        if (r != NULL || PyErr_Occurred()) {
            return r;
        }
    }
    PyObject *mapper = PyDict_GetItemWithError(run->refs[REF_DIRECT], type); /* borrowed */
    if (mapper == NULL) {
        if (PyErr_Occurred() || (mapper = leaf_marker(run, type)) == NULL) {
            return NULL;
        }
    }
    if (mapper == run->refs[REF_VALUE_LEAF]) {
        return PyObject_CallOneArg(run->refs[REF_F], x);
    }
    if (mapper == run->refs[REF_CACHED_LEAF]) {
        return map_cached(run, x, NULL);
    }
    if (Py_IS_TYPE(mapper, run->node_type)) {
        return map_declared(run, mapper, x, depth);
    }
    PyObject *argv[2] = {x, depth};
    Py_INCREF(mapper); /* the call may replace it in direct */
    PyObject *r = PyObject_Vectorcall(mapper, argv, 2, NULL);
    Py_DECREF(mapper);
    return r;
}

/* PairLoop: the result for the child x facing y. */
static PyObject *
map_pair_child(const Run *run, PyObject *x, PyObject *y, PyObject *depth)
{
    PyObject *type = (PyObject *)Py_TYPE(x);
    if (Py_IS_TYPE(x, &PyTuple_Type)) {
        if (Py_IS_TYPE(y, &PyTuple_Type) && PyTuple_GET_SIZE(x) == PyTuple_GET_SIZE(y)) {
            PyObject *r = map_small_tuple(run, x, y);
            if (r != NULL || PyErr_Occurred()) {
                return r;
            }
        }
        PyObject *argv[3] = {x, y, depth};
        return PyObject_Vectorcall(run->refs[REF_PAIR], argv, 3, NULL);
    }
    int is = PySet_Contains(run->refs[REF_IMMUTABLE], type);
    if (is < 0) {
        return NULL;
    }
    if (is) {
        PyObject *argv[2] = {x, y};
        return PyObject_Vectorcall(run->refs[REF_F], argv, 2, NULL);
    }
    is = PySet_Contains(run->refs[REF_LEAF_TYPES], type);
    if (is < 0) {
        return NULL;
    }
    if (is) {
        return map_cached(run, x, y);
    }
    PyObject *ys = PyTuple_Pack(1, y);
    if (ys == NULL) {
        return NULL;
    }
    PyObject *argv[3] = {x, ys, depth};
    PyObject *r = PyObject_Vectorcall(run->refs[REF_NODE], argv, 3, NULL);
    Py_DECREF(ys);
    return r;
}

typedef PyObject *(*map_one)(const Run *, PyObject *, PyObject *, PyObject *);

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

static int
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
static int
stack_is_low(void)
{
    return 0;
}
#endif

/* Loop: a dict whose keys are all exact str, mapped here as `_Mode.map_dict` (its
   plain twin, `direct[dict]`) maps it, without its Python frame, `sort_keys` and the
   rebuild (benchmarks/instructions.py, W6id: a dict of small dicts of arrays). The
   result is a new dict with x's keys in x's order; the values are mapped in sorted key
   order, so f is called in the same order. Distinct str are totally ordered by `<`
   (code points), so `sort_keys` returns `sorted(keys)`, which the order here equals.
   The dict goes through the identity cache as map_dict's does (looked up first,
   stored last, prune for a repeat); a repeat is returned here whatever its keys.

   Its values are read as map_dict reads them, with Python's errors: in key order from
   the dict itself (as `x.values()` iterates: "dictionary changed size during
   iteration" if f changes its size), else by key (`x[key]`: KeyError if f removed it).

   NULL with no error set when it does not take x: a key that is not an exact str (the
   fallback order of `sort_keys` is not `<`), a depth past max_depth, or the thread's
   stack running low. The caller then calls map_dict, which does the same (or hands x
   to the iterative engine). */
#define SMALL_DICT 8

static PyObject *
map_str_dict(const Run *run, PyObject *x, PyObject *depth)
{
    Py_ssize_t d = PyLong_AsSsize_t(depth);
    if (d == -1 && PyErr_Occurred()) {
        return NULL;
    }
    if (d > run->max_depth || stack_is_low()) {
        return NULL;
    }
    PyObject *table = run->refs[REF_TABLE];
    Probe probe = {0, 0, 0};
    if (table != Py_None) {
        PyObject *r = table_probe((IdTableObject *)table, x, &probe); /* borrowed */
        if (r != NULL) {
            return Py_NewRef(run->use_prune ? run->refs[REF_PRUNE] : r);
        }
    }
    Py_ssize_t n = PyDict_GET_SIZE(x), pos = 0, i;
    PyObject *small[2 * SMALL_DICT], **keys = small, *key, *value, *out = NULL;
    if (n > SMALL_DICT) {
        keys = PyMem_New(PyObject *, 2 * n);
        if (keys == NULL) {
            return PyErr_NoMemory();
        }
    }
    /* keys[0:n]: x's keys in its order (held, as `list(x)`); keys[n:2n]: the same
       keys in sorted order (borrowed from the first half) */
    PyObject **order = keys + n;
    for (i = 0; PyDict_Next(x, &pos, &key, &value); i++) {
        if (!PyUnicode_CheckExact(key)) {
            break; /* no Python code has run: x is as it was */
        }
        Py_INCREF(key);
        keys[i] = order[i] = key;
    }
    Py_ssize_t held = i;
    if (held < n) {
        goto done; /* not taken */
    }
    int sorted = 1;
    for (i = 1; i < n && sorted; i++) {
        int c = PyUnicode_Compare(keys[i - 1], keys[i]);
        if (c == -1 && PyErr_Occurred()) {
            goto done;
        }
        sorted = c < 0;
    }
    if (!sorted && n <= SMALL_DICT) { /* insertion sort */
        for (i = 1; i < n; i++) {
            PyObject *k = order[i];
            Py_ssize_t j = i;
            for (; j > 0; j--) {
                int c = PyUnicode_Compare(order[j - 1], k);
                if (c == -1 && PyErr_Occurred()) {
                    goto done;
                }
                if (c < 0) {
                    break;
                }
                order[j] = order[j - 1];
            }
            order[j] = k;
        }
    }
    else if (!sorted) {
        PyObject *list = PyList_New(n);
        if (list == NULL) {
            goto done;
        }
        for (i = 0; i < n; i++) {
            Py_INCREF(keys[i]);
            PyList_SET_ITEM(list, i, keys[i]);
        }
        if (PyList_Sort(list) < 0) {
            Py_DECREF(list);
            goto done;
        }
        for (i = 0; i < n; i++) {
            order[i] = PyList_GET_ITEM(list, i); /* still held by keys */
        }
        Py_DECREF(list);
    }
    PyObject *kid_depth = PyLong_FromSsize_t(d + 1);
    out = kid_depth == NULL ? NULL : PyDict_New();
    if (out == NULL) {
        Py_XDECREF(kid_depth);
        goto done;
    }
    if (sorted) {
        /* as `dict(zip(keys, loop(x.values(), depth + 1)))` */
        Py_ssize_t left = n;
        pos = 0;
        for (i = 0;; i++) {
            if (PyDict_GET_SIZE(x) != n) {
                PyErr_SetString(PyExc_RuntimeError, "dictionary changed size during iteration");
                break;
            }
            if (!PyDict_Next(x, &pos, &key, &value)) {
                break;
            }
            if (left-- == 0) {
                PyErr_SetString(PyExc_RuntimeError, "dictionary keys changed during iteration");
                break;
            }
            Py_INCREF(value);
            PyObject *r = map_child(run, value, NULL, kid_depth);
            Py_DECREF(value);
            if (r == NULL || PyDict_SetItem(out, keys[i], r) < 0) {
                Py_XDECREF(r);
                break;
            }
            Py_DECREF(r);
        }
    }
    else {
        /* as `dict.fromkeys(keys)`, then updated from
           `zip(order, loop(map(x.__getitem__, order), depth + 1))` */
        for (i = 0; i < n; i++) {
            if (PyDict_SetItem(out, keys[i], Py_None) < 0) {
                break;
            }
        }
        for (i = 0; i < n && !PyErr_Occurred(); i++) {
            value = PyDict_GetItemWithError(x, order[i]); /* borrowed */
            if (value == NULL) {
                if (!PyErr_Occurred()) {
                    PyErr_SetObject(PyExc_KeyError, order[i]);
                }
                break;
            }
            Py_INCREF(value);
            PyObject *r = map_child(run, value, NULL, kid_depth);
            Py_DECREF(value);
            if (r == NULL || PyDict_SetItem(out, order[i], r) < 0) {
                Py_XDECREF(r);
                break;
            }
            Py_DECREF(r);
        }
    }
    Py_DECREF(kid_depth);
    if (PyErr_Occurred() ||
        (table != Py_None && table_fill((IdTableObject *)table, &probe, x, out) < 0)) {
        Py_CLEAR(out);
    }
done:
    for (i = 0; i < held; i++) {
        Py_DECREF(keys[i]);
    }
    if (keys != small) {
        PyMem_Free(keys);
    }
    return out;
}

/* Take the run's own references to all of self's; -1 with TypeError if self was never
   initialised. */
static int
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

static void
run_release(Run *run)
{
    for (int i = 0; i < N_REFS; i++) {
        Py_XDECREF(run->refs[i]);
    }
}

/* The list of map(run, x, y, depth) for the children x of kids, each facing the next
   child y of ykids when ykids is not NULL (as zip pairs them: the first tree's next
   child is read first, and the shorter tree ends the loop). */
static PyObject *
run_loop(LoopObject *self, const char *what, PyObject *kids, PyObject *ykids,
         PyObject *depth, map_one map)
{
    Run run;
    if (run_take(self, what, &run) < 0) {
        return NULL;
    }
    PyObject *xs = PyObject_GetIter(kids);
    if (xs == NULL) {
        run_release(&run);
        return NULL;
    }
    PyObject *ys = ykids == NULL ? NULL : PyObject_GetIter(ykids);
    PyObject *out = ykids != NULL && ys == NULL ? NULL : PyList_New(0);
    if (out == NULL) {
        Py_XDECREF(ys);
        Py_DECREF(xs);
        run_release(&run);
        return NULL;
    }
    if (stack_is_low()) {
        /* the nodes below go to the iterative engine (the types cannot be subclassed,
           so self's type is the one its module made) */
        depth = ((ModuleState *)PyType_GetModuleState(Py_TYPE(self)))->handover_depth;
    }
    PyObject *x;
    while ((x = PyIter_Next(xs)) != NULL) {
        PyObject *y = ys == NULL ? NULL : PyIter_Next(ys);
        if (ys != NULL && y == NULL) {
            Py_DECREF(x);
            break;
        }
        PyObject *r = map(&run, x, y, depth);
        Py_DECREF(x);
        Py_XDECREF(y);
        if (r == NULL || PyList_Append(out, r) < 0) {
            Py_XDECREF(r);
            Py_CLEAR(out);
            break;
        }
        Py_DECREF(r);
    }
    if (out != NULL && PyErr_Occurred()) {
        Py_CLEAR(out); /* an iterator raised */
    }
    run_release(&run);
    Py_XDECREF(ys);
    Py_DECREF(xs);
    return out;
}

static PyObject *
Loop_run(LoopObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_Format(PyExc_TypeError, "run() takes 2 arguments (%zd given)", nargs);
        return NULL;
    }
    return run_loop(self, "Loop.run", args[0], NULL, args[1], map_child);
}

/* map_child for one value: what `_Mode.dispatch` does for the root of a tree (a
   dict of str keys mapped here too: benchmarks/instructions.py, W6id). */
static PyObject *
Loop_child(LoopObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    Run run;
    if (nargs != 2) {
        PyErr_Format(PyExc_TypeError, "child() takes 2 arguments (%zd given)", nargs);
        return NULL;
    }
    if (run_take(self, "Loop.child", &run) < 0) {
        return NULL;
    }
    PyObject *r = map_child(&run, args[0], NULL, args[1]);
    run_release(&run);
    return r;
}

static PyObject *
PairLoop_run(LoopObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3) {
        PyErr_Format(PyExc_TypeError, "run() takes 3 arguments (%zd given)", nargs);
        return NULL;
    }
    return run_loop(self, "PairLoop.run", args[0], args[1], args[2], map_pair_child);
}

/* f(x) through the identity cache, for a leaf that is not a value: the generated
   mappers' call (`_loops.map_child`), so that they share the loop's table and cost
   one call per leaf (benchmarks/run.py, W3id). */
static PyObject *
cached_leaf(LoopObject *self, const char *what, PyObject *x, PyObject *y)
{
    /* the run holds only what map_cached reads (a full run_take costs as much as the
       probe: benchmarks/instructions.py, W3id) */
    static const int used[] = {REF_F, REF_TABLE, REF_PRUNE};
    Run run = {{NULL}, self->use_prune, self->max_depth, NULL}; /* a leaf: no nodes */
    if (self->refs[REF_F] == NULL) {
        PyErr_Format(PyExc_TypeError, "%s: the loop was never initialised", what);
        return NULL;
    }
    for (size_t i = 0; i < sizeof used / sizeof used[0]; i++) {
        run.refs[used[i]] = self->refs[used[i]];
        Py_INCREF(run.refs[used[i]]);
    }
    PyObject *r = map_cached(&run, x, y);
    run_release(&run);
    return r;
}

static PyObject *
Loop_leaf(LoopObject *self, PyObject *x)
{
    return cached_leaf(self, "Loop.leaf", x, NULL);
}

/* f(x, y) through the identity cache (keyed by x), for the generated pair mappers
   (`_loops.map_pair_child`), as Loop.leaf is for the one-tree mappers
   (benchmarks/run.py, W4c). */
static PyObject *
PairLoop_leaf(LoopObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_Format(PyExc_TypeError, "leaf() takes 2 arguments (%zd given)", nargs);
        return NULL;
    }
    return cached_leaf(self, "PairLoop.leaf", args[0], args[1]);
}

static PyMethodDef Loop_methods[] = {
    {"run", (PyCFunction)(void (*)(void))Loop_run, METH_FASTCALL,
     "run(kids, depth) -> list: each child of one node, mapped."},
    {"child", (PyCFunction)(void (*)(void))Loop_child, METH_FASTCALL,
     "child(x, depth): x mapped as run maps each child (the root of a tree)."},
    {"leaf", (PyCFunction)Loop_leaf, METH_O,
     "leaf(x): f(x) through the identity cache (a leaf that is not a value)."},
    {"bind", (PyCFunction)(void (*)(void))Loop_bind, METH_FASTCALL,
     "bind(f, table, prune, use_prune): the values of one fmap call (table: an IdTable, "
     "or None without a cache)."},
    {NULL, NULL, 0, NULL},
};

static PyMethodDef PairLoop_methods[] = {
    {"run", (PyCFunction)(void (*)(void))PairLoop_run, METH_FASTCALL,
     "run(kids, ykids, depth) -> list: each child of one node facing another's, mapped."},
    {"leaf", (PyCFunction)(void (*)(void))PairLoop_leaf, METH_FASTCALL,
     "leaf(x, y): f(x, y) through the identity cache, keyed by x (a leaf that is not a "
     "value)."},
    {"bind", (PyCFunction)(void (*)(void))Loop_bind, METH_FASTCALL,
     "bind(f, table, prune, use_prune): the values of one fmap call (table: an IdTable, "
     "or None without a cache)."},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot Loop_slots[] = {
    {Py_tp_doc, (void *)PyDoc_STR("Loop(node, direct, immutable, leaf_types, value_leaf, "
                                  "cached_leaf, max_depth): fmap's child loop for one "
                                  "mode of _fast._Mode.")},
    {Py_tp_new, PyType_GenericNew},
    {Py_tp_init, Loop_init},
    {Py_tp_dealloc, Loop_dealloc},
    {Py_tp_traverse, Loop_traverse},
    {Py_tp_clear, Loop_clear},
    {Py_tp_methods, Loop_methods},
    {0, NULL},
};

static PyType_Slot PairLoop_slots[] = {
    {Py_tp_doc, (void *)PyDoc_STR("PairLoop(pair, node, immutable, leaf_types): fmap's "
                                  "child loop with one extra tree, for _fast._ManyMode.")},
    {Py_tp_new, PyType_GenericNew},
    {Py_tp_init, PairLoop_init},
    {Py_tp_dealloc, Loop_dealloc},
    {Py_tp_traverse, Loop_traverse},
    {Py_tp_clear, Loop_clear},
    {Py_tp_methods, PairLoop_methods},
    {0, NULL},
};


/* --- flatten: flatten's recursive walk ---------------------------------------------

   `flatten(x, kind, leaf_types, records, context)` is `_flat.flatten_fast` in C, its
   plain twin (used whenever this module is missing or CONTAINERS_PURE_PYTHON is set):
   the leaves of x, as a new list, and its pre-order records `(kind, aux, n, mask)`
   appended to `records` unless it is None (`leaves`, which builds none). It makes the
   same calls in the same order as the Python function, so that even a node's
   `flatten` with side effects sees no difference: a child is a leaf if its exact type
   is in leaf_types, else a node of the kind `kinds[type(child)]`, else of the kind
   `kind_of(child)` returns (None: a leaf). A tuple or list is walked here; every other
   node is taken apart by its kind's attribute named by the context's last item
   (`flatten`, or `flatten_snapshot` for a Structure's records).

   Speed (benchmarks/run.py, W1f and W5): the Python walk spends most of its time on
   the bytecode of its type tests, appends and record tuples; here each leaf costs one
   set lookup and one append.

   `context` is `_flat.C_CONTEXT`, what does not change between calls:
   (kinds, kind_of, tuple_kind, list_kind, deep, run, min_run, max_depth, flatten_name);
   `_flat.C_SNAPSHOT_CONTEXT` is the same for a Structure's records.
   `deep(x, leaves, records, leaf_types)` is the plain walk, for a node past max_depth
   (or where the thread's stack runs low): the C recursion stays under max_depth levels
   of a few hundred bytes each, and depth is unlimited. A cycle goes there too, and
   the plain walk reports it. `run(kind, aux, kids, leaf_types, leaves, records)` is
   `_flat._flatten_run`, for a node of at least min_run children that are nodes of one
   kind with leaf children only (a list of layers); it returns whether it took them.

   Python code runs inside (a kind's `flatten`, `kind_of`, `deep`, `run`), and may
   change a list being walked, as it may in the Python walk: the loops re-read a list's
   length at each step and hold each child while they use it, as a Python `for`
   does, and a node's record reads the length when it is made. */

/* One call's values: borrowed from the call's arguments, which outlive it; and the
   answers of the last leaf-type tests. */
typedef struct {
    PyObject *leaves;     /* the new list of leaves */
    PyObject *records;    /* list, or NULL for `leaves` */
    PyObject *leaf_types; /* set */
    PyObject *kinds;      /* dict: exact type -> NodeKind */
    PyObject *kind_of;
    PyObject *tuple_kind;
    PyObject *list_kind;
    PyObject *deep;
    PyObject *run;
    PyObject *flatten_name; /* "flatten" or "flatten_snapshot": the context's last item */
    Py_ssize_t min_run;
    Py_ssize_t max_depth;
    PyTypeObject *leaf_type; /* the last type found in leaf_types, or NULL */
    PyTypeObject *node_type; /* the last type found not in it, or NULL */
    size_t ran;              /* counts the calls into Python code (flat_forget) */
    PyObject *recent[3];     /* the last record made of a tuple, of a list, of another
                                kind (owned, or NULL): flat_record */
} Flat;

static int flat_node(Flat *w, PyObject *x, PyObject *kind, Py_ssize_t depth);

/* 1 if x's exact type is in leaf_types, 0 if not, -1 on error.

   A set lookup costs about 100 instructions, as much as the rest of a leaf's walk
   (benchmarks/instructions.py, W1f and W5), and most trees repeat one leaf type and
   one node type: the last answer for each is kept. It stays true only while no Python
   code runs, since Python code may register a leaf type: `flat_forget` drops both
   after every call that may run some. A type whose metaclass is not `type` is never
   kept, since hashing it may itself run Python code. (A finalizer the garbage
   collector runs may run at any allocation, here or in the Python walk, at different
   points: what it registers is seen from some point on in either, never exactly.) */
static inline int
flat_is_leaf_type(Flat *w, PyObject *x)
{
    PyTypeObject *type = Py_TYPE(x);
    if (type == w->leaf_type) {
        return 1;
    }
    if (type == w->node_type) {
        return 0;
    }
    int leaf = PySet_Contains(w->leaf_types, (PyObject *)type);
    if (leaf >= 0 && Py_IS_TYPE(type, &PyType_Type)) {
        *(leaf ? &w->leaf_type : &w->node_type) = type;
    }
    return leaf;
}

/* After Python code may have run (a call, or the release of an object the tree does
   not hold): forget the leaf-type answers. */
static inline void
flat_forget(Flat *w)
{
    w->leaf_type = w->node_type = NULL;
    w->ran++;
}

/* x's node kind (a new reference), Py_None (new) if x is a leaf by `kind_of`, NULL on
   error: `KINDS.get(type(x)) or kind_of(x)`, for x whose type is no leaf type. */
static PyObject *
flat_kind(Flat *w, PyObject *x)
{
    PyObject *kind = PyDict_GetItemWithError(w->kinds, (PyObject *)Py_TYPE(x));
    if (kind != NULL) {
        Py_INCREF(kind); /* the walk below it may re-register the type */
        return kind;
    }
    if (PyErr_Occurred()) {
        return NULL;
    }
    kind = PyObject_CallOneArg(w->kind_of, x);
    flat_forget(w);
    return kind;
}

/* Whether record is (kind, aux, n, mask) with the same objects but n. */
static int
flat_same_record(PyObject *record, PyObject *kind, PyObject *aux, Py_ssize_t n,
                 PyObject *mask)
{
    return record != NULL && PyTuple_GET_ITEM(record, 0) == kind &&
           PyTuple_GET_ITEM(record, 1) == aux && PyTuple_GET_ITEM(record, 3) == mask &&
           PyLong_AsSsize_t(PyTuple_GET_ITEM(record, 2)) == n; /* n fit when it was made */
}

/* Append the record (kind, aux, n, mask) to records, or store it at slot if slot >= 0
   (IndexError if Python code shortened records, as `records[slot] = ...` raises).

   A record of the same objects as the last one made for a node of the same sort (a
   tuple, a list, another kind) is that record again: the tuples of a tree of many
   small nodes, such as 25,000 `(TUPLE, None, 4, None)` in a 100,000-leaf tree, are
   mostly equal, and making each anew was a third of flatten's time and most of a
   Structure's memory (benchmarks/run.py, W1f and W1). Records are tuples of the same
   objects either way, so they compare, hash and pickle as the plain walk's do. */
static int
flat_record(Flat *w, Py_ssize_t slot, PyObject *kind, PyObject *aux, Py_ssize_t n,
            PyObject *mask)
{
    PyObject **recent =
        &w->recent[kind == w->tuple_kind ? 0 : kind == w->list_kind ? 1 : 2];
    PyObject *record;
    if (flat_same_record(*recent, kind, aux, n, mask)) {
        record = Py_NewRef(*recent);
    }
    else {
        PyObject *count = PyLong_FromSsize_t(n);
        if (count == NULL) {
            return -1;
        }
        record = PyTuple_Pack(4, kind, aux, count, mask);
        Py_DECREF(count);
        if (record == NULL) {
            return -1;
        }
        Py_XSETREF(*recent, Py_NewRef(record));
    }
    if (slot < 0) {
        int r = PyList_Append(w->records, record);
        Py_DECREF(record);
        return r;
    }
    return PyList_SetItem(w->records, slot, record); /* steals record */
}

/* `kids, aux = kind.flatten(x)` (or `kind.flatten_snapshot(x)`), with kids made an exact list or tuple (a list of its
   items, for any other sized iterable); -1 on error, as the unpacking raises. */
static int
flat_split(Flat *w, PyObject *x, PyObject *kind, PyObject **kids, PyObject **aux)
{
    PyObject *flatten = PyObject_GetAttr(kind, w->flatten_name);
    if (flatten == NULL) {
        return -1;
    }
    PyObject *pair = PyObject_CallOneArg(flatten, x);
    Py_DECREF(flatten);
    flat_forget(w); /* also for what follows: iterating kids, releasing pair */
    if (pair == NULL) {
        return -1;
    }
    if (Py_TYPE(pair)->tp_iter == NULL && !PySequence_Check(pair)) {
        PyErr_Format(PyExc_TypeError, "cannot unpack non-iterable %.200s object",
                     Py_TYPE(pair)->tp_name); /* as the interpreter says it */
        Py_DECREF(pair);
        return -1;
    }
    PyObject *items = PySequence_Tuple(pair); /* pair itself when it is a tuple */
    Py_DECREF(pair);
    if (items == NULL) {
        return -1;
    }
    if (PyTuple_GET_SIZE(items) != 2) {
        if (PyTuple_GET_SIZE(items) < 2) {
            PyErr_Format(PyExc_ValueError,
                         "not enough values to unpack (expected 2, got %zd)",
                         PyTuple_GET_SIZE(items));
        }
        else {
            PyErr_SetString(PyExc_ValueError, "too many values to unpack (expected 2)");
        }
        Py_DECREF(items);
        return -1;
    }
    *kids = PyTuple_GET_ITEM(items, 0);
    *aux = PyTuple_GET_ITEM(items, 1);
    if (PyList_CheckExact(*kids) || PyTuple_CheckExact(*kids)) {
        Py_INCREF(*kids);
    }
    else {
        /* iterated, then measured, as the Python walk does: an iterator is no sequence
           of children, and raises TypeError there too */
        PyObject *list = PySequence_List(*kids);
        if (list == NULL || PyObject_Size(*kids) < 0) {
            Py_XDECREF(list);
            Py_DECREF(items);
            return -1;
        }
        *kids = list;
    }
    Py_INCREF(*aux);
    Py_DECREF(items);
    return 0;
}

/* 1 if every child in kids (an exact list or tuple) has a leaf type, 0 if not. */
static int
flat_all_leaves(Flat *w, PyObject *kids)
{
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(kids); i++) {
        int leaf = flat_is_leaf_type(w, PySequence_Fast_GET_ITEM(kids, i));
        if (leaf <= 0) {
            return leaf;
        }
    }
    return 1;
}

/* `leaves.extend(kids)`: appended one by one, which costs half of PyList_SetSlice's
   setup for the usual few children (benchmarks/instructions.py, W5). */
static int
flat_extend(Flat *w, PyObject *kids)
{
    Py_ssize_t n = PySequence_Fast_GET_SIZE(kids);
    for (Py_ssize_t i = 0; i < n; i++) {
        if (PyList_Append(w->leaves, PySequence_Fast_GET_ITEM(kids, i)) < 0) {
            return -1;
        }
    }
    return 0;
}

/* 1 if run took a node's children (a list of layers), 0 if not, -1 on error. The
   test before the call is the first one run makes, which has no side effect: most
   nodes (a list of tuples) are not a run, and pay no call. */
static int
flat_try_run(Flat *w, PyObject *kind, PyObject *aux, PyObject *kids)
{
    PyObject *first = PySequence_Fast_GET_ITEM(kids, 0);
    PyObject *k = PyDict_GetItemWithError(w->kinds, (PyObject *)Py_TYPE(first));
    if (k == NULL) {
        return PyErr_Occurred() ? -1 : 0;
    }
    if (k == w->tuple_kind || k == w->list_kind) {
        return 0;
    }
    int leaf = flat_is_leaf_type(w, first);
    if (leaf != 0) {
        return leaf < 0 ? -1 : 0;
    }
    PyObject *records = w->records ? w->records : Py_None;
    PyObject *argv[6] = {kind, aux, kids, w->leaf_types, w->leaves, records};
    PyObject *took = PyObject_Vectorcall(w->run, argv, 6, NULL);
    flat_forget(w);
    if (took == NULL) {
        return -1;
    }
    int r = PyObject_IsTrue(took);
    Py_DECREF(took);
    return r;
}

/* The mask of a node mixing leaf and node children, read again from kids when the
   record is made, as the Python walk does: a tuple of bools. */
static PyObject *
flat_mask(Flat *w, PyObject *kids)
{
    PyObject *mask = PyList_New(0);
    for (Py_ssize_t i = 0; mask != NULL && i < PySequence_Fast_GET_SIZE(kids); i++) {
        PyObject *kid = PySequence_Fast_GET_ITEM(kids, i);
        Py_INCREF(kid);
        int node = flat_is_leaf_type(w, kid);
        if (node == 0) {
            PyObject *kind = flat_kind(w, kid);
            node = kind == NULL ? -1 : kind != Py_None;
            Py_XDECREF(kind);
        }
        else if (node == 1) {
            node = 0;
        }
        Py_DECREF(kid);
        flat_forget(w); /* (as in flat_children) a mixed node is rare: no count kept */
        if (node < 0 || PyList_Append(mask, node ? Py_True : Py_False) < 0) {
            Py_CLEAR(mask);
        }
    }
    if (mask == NULL) {
        return NULL;
    }
    Py_SETREF(mask, PyList_AsTuple(mask));
    return mask;
}

/* One child of a node at depth: appended if a leaf, walked if a node (counted in
   *nodes); -1 on error. */
static int
flat_child(Flat *w, PyObject *kid, Py_ssize_t depth, Py_ssize_t *nodes)
{
    int leaf = flat_is_leaf_type(w, kid);
    if (leaf != 0) {
        return leaf < 0 ? -1 : PyList_Append(w->leaves, kid);
    }
    if (PyTuple_CheckExact(kid) || PyList_CheckExact(kid)) {
        /* (the Python walk tests a tuple or list of leaves inline: the same records) */
        ++*nodes;
        return flat_node(w, kid, PyTuple_CheckExact(kid) ? w->tuple_kind : w->list_kind,
                         depth + 1);
    }
    PyObject *kind = flat_kind(w, kid);
    if (kind == NULL) {
        return -1;
    }
    int r;
    if (kind == Py_None) {
        r = PyList_Append(w->leaves, kid);
    }
    else {
        ++*nodes;
        r = flat_node(w, kid, kind, depth + 1);
    }
    Py_DECREF(kind);
    return r;
}

/* The node x of kind, taken apart into kids and aux, at depth. */
static int
flat_children(Flat *w, PyObject *x, PyObject *kind, PyObject *kids, PyObject *aux,
              Py_ssize_t depth)
{
    int all = flat_all_leaves(w, kids);
    if (all != 0) {
        /* all children leaves: one extend, one record (benchmarks/run.py, W1, W5) */
        if (all < 0 || flat_extend(w, kids) < 0) {
            return -1;
        }
        return w->records == NULL
                   ? 0
                   : flat_record(w, -1, kind, aux, PySequence_Fast_GET_SIZE(kids), Py_None);
    }
    if (depth > w->max_depth || stack_is_low()) {
        PyObject *records = w->records ? w->records : Py_None;
        PyObject *argv[4] = {x, w->leaves, records, w->leaf_types};
        PyObject *r = PyObject_Vectorcall(w->deep, argv, 4, NULL);
        Py_XDECREF(r);
        flat_forget(w);
        return r == NULL ? -1 : 0;
    }
    if (PySequence_Fast_GET_SIZE(kids) >= w->min_run && PySequence_Fast_GET_SIZE(kids) > 0) {
        int took = flat_try_run(w, kind, aux, kids);
        if (took != 0) {
            return took < 0 ? -1 : 0;
        }
    }
    Py_ssize_t slot = -1, nodes = 0; /* the record's place, filled when the node is left */
    if (w->records != NULL) {
        slot = PyList_GET_SIZE(w->records);
        if (PyList_Append(w->records, Py_None) < 0) {
            return -1;
        }
    }
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(kids); i++) {
        PyObject *kid = PySequence_Fast_GET_ITEM(kids, i);
        size_t ran = w->ran;
        Py_INCREF(kid);
        int r = flat_child(w, kid, depth, &nodes);
        Py_DECREF(kid);
        if (w->ran != ran) {
            flat_forget(w); /* Python code may have taken kid out of kids: released */
        }
        if (r < 0) {
            return -1;
        }
    }
    if (w->records == NULL) {
        return 0;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(kids);
    if (nodes == 0 || nodes == n) {
        return flat_record(w, slot, kind, aux, n, nodes ? Py_True : Py_None);
    }
    PyObject *mask = flat_mask(w, kids);
    if (mask == NULL) {
        return -1;
    }
    int r = flat_record(w, slot, kind, aux, PySequence_Fast_GET_SIZE(kids), mask);
    Py_DECREF(mask);
    return r;
}

/* The node x of kind at depth: its leaves and records. */
static int
flat_node(Flat *w, PyObject *x, PyObject *kind, Py_ssize_t depth)
{
    PyObject *kids, *aux;
    int split = !((kind == w->tuple_kind || kind == w->list_kind) &&
                  (PyTuple_CheckExact(x) || PyList_CheckExact(x)));
    if (!split) {
        kids = Py_NewRef(x); /* held: Python code may drop x's last other reference */
        aux = Py_NewRef(Py_None);
    }
    else if (flat_split(w, x, kind, &kids, &aux) < 0) {
        return -1;
    }
    int r = flat_children(w, x, kind, kids, aux, depth);
    Py_DECREF(kids);
    Py_DECREF(aux);
    if (split) {
        flat_forget(w); /* kids and aux may have held the last references to objects */
    }
    return r;
}

static PyObject *
speedups_flatten(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 5) {
        PyErr_Format(PyExc_TypeError, "flatten() takes 5 arguments (%zd given)", nargs);
        return NULL;
    }
    PyObject *x = args[0], *kind = args[1], *context = args[4];
    Flat w = {.leaf_types = args[2], .records = args[3] == Py_None ? NULL : args[3]};
    if (!PyAnySet_Check(w.leaf_types) || (w.records != NULL && !PyList_Check(w.records))) {
        PyErr_SetString(PyExc_TypeError,
                        "flatten(x, kind, leaf_types, records, context): leaf_types must "
                        "be a set, records a list or None");
        return NULL;
    }
    PyObject *min_run, *max_depth;
    if (!PyTuple_Check(context) ||
        !PyArg_ParseTuple(context, "O!OOOOOO!O!U:flatten context", &PyDict_Type, &w.kinds,
                          &w.kind_of, &w.tuple_kind, &w.list_kind, &w.deep, &w.run,
                          &PyLong_Type, &min_run, &PyLong_Type, &max_depth,
                          &w.flatten_name)) {
        if (!PyErr_Occurred()) {
            PyErr_SetString(PyExc_TypeError, "flatten: context must be a tuple");
        }
        return NULL;
    }
    w.min_run = PyLong_AsSsize_t(min_run);
    w.max_depth = PyLong_AsSsize_t(max_depth);
    if ((w.min_run == -1 || w.max_depth == -1) && PyErr_Occurred()) {
        return NULL;
    }
    w.leaves = PyList_New(0);
    if (w.leaves == NULL) {
        return NULL;
    }
    if (flat_node(&w, x, kind, 0) < 0) {
        Py_CLEAR(w.leaves);
    }
    for (size_t i = 0; i < sizeof w.recent / sizeof w.recent[0]; i++) {
        Py_XDECREF(w.recent[i]);
    }
    return w.leaves;
}

/* --- leaf_paths: the key path of every leaf of a Structure ------------------------

   `leaf_paths(records, context)` is `_flatten.ranked_paths(records, None, 0)[0]` in C,
   its plain twin (used whenever this module is missing or CONTAINERS_PURE_PYTHON is
   set): one linear pass over a Structure's pre-order records `(kind, aux, n, mask)`
   with a stack of open nodes, as a Python loop would, so any depth. Each node's keys
   are `kind.keys(aux, n)`, called in record order as the twin calls them; a leaf's
   path is the tuple of the keys above it and its own. `context` is
   `_flatten.PATHS_CONTEXT`: (tuple_kind, list_kind, "keys"). The keys of a tuple or
   list depend on n alone (`_registry._no_keys`), so one call serves a run of
   sequences of one length.

   Speed (benchmarks/run.py, flatten_with_path): the Python loop spends most of a
   leaf's time on the bytecode of its stack and mask tests; here a leaf costs one tuple. */

typedef struct {
    PyObject *keys;   /* the node's keys: a tuple, owned */
    PyObject *mask;   /* None, True or a tuple of booleans, borrowed from the records */
    Py_ssize_t i;     /* the next child */
} PathFrame;

typedef struct {
    PyObject *records;                            /* a tuple, owned */
    PyObject *tuple_kind, *list_kind, *keys_name; /* borrowed from the context */
    Py_ssize_t seq_n;                             /* the length seq_keys are for */
    PyObject *seq_keys;                           /* owned, or NULL */
} Paths;

/* The keys of the j-th record as a new tuple, its mask borrowed in *mask; NULL with
   an error set if the record is malformed or `keys` raised. */
static PyObject *
paths_keys(Paths *p, Py_ssize_t j, PyObject **mask)
{
    PyObject *record = PyTuple_GET_ITEM(p->records, j);
    if (!PyTuple_Check(record) || PyTuple_GET_SIZE(record) != 4) {
        PyErr_SetString(PyExc_TypeError,
                        "leaf_paths: a record must be a tuple (kind, aux, n, mask)");
        return NULL;
    }
    PyObject *kind = PyTuple_GET_ITEM(record, 0), *n = PyTuple_GET_ITEM(record, 2);
    *mask = PyTuple_GET_ITEM(record, 3);
    int seq = kind == p->tuple_kind || kind == p->list_kind;
    Py_ssize_t length = -1;
    if (seq) {
        length = PyLong_AsSsize_t(n);
        if (length == -1 && PyErr_Occurred()) {
            return NULL;
        }
        if (p->seq_keys != NULL && length == p->seq_n) {
            return Py_NewRef(p->seq_keys);
        }
    }
    PyObject *argv[3] = {kind, PyTuple_GET_ITEM(record, 1), n};
    PyObject *keys = PyObject_VectorcallMethod(
        p->keys_name, argv, 3 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
    if (keys != NULL && !PyTuple_CheckExact(keys)) {
        Py_SETREF(keys, PySequence_Tuple(keys));
    }
    if (keys != NULL && seq) {
        Py_XSETREF(p->seq_keys, Py_NewRef(keys));
        p->seq_n = length;
    }
    return keys;
}

/* 1 if child i of a node with this mask is a node, 0 if a leaf, -1 on error. */
static int
paths_is_node(PyObject *mask, Py_ssize_t i)
{
    if (mask == Py_None) {
        return 0;
    }
    if (mask == Py_True) {
        return 1;
    }
    PyObject *item = PySequence_GetItem(mask, i);
    if (item == NULL) {
        return -1;
    }
    int r = PyObject_IsTrue(item);
    Py_DECREF(item);
    return r;
}

/* The tuple of the keys in above[0:depth] and key. */
static PyObject *
paths_path(PyObject **above, Py_ssize_t depth, PyObject *key)
{
    PyObject *path = PyTuple_New(depth + 1);
    if (path == NULL) {
        return NULL;
    }
    for (Py_ssize_t k = 0; k < depth; k++) {
        PyTuple_SET_ITEM(path, k, Py_NewRef(above[k]));
    }
    PyTuple_SET_ITEM(path, depth, Py_NewRef(key));
    return path;
}

static PyObject *
speedups_leaf_paths(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_Format(PyExc_TypeError, "leaf_paths() takes 2 arguments (%zd given)", nargs);
        return NULL;
    }
    Paths p = {.seq_n = -1, .seq_keys = NULL};
    if (!PyTuple_Check(args[0]) && !PyList_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "leaf_paths: records must be a tuple or a list");
        return NULL;
    }
    if (!PyTuple_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "leaf_paths: context must be a tuple");
        return NULL;
    }
    if (!PyArg_ParseTuple(args[1], "OOU:leaf_paths context", &p.tuple_kind, &p.list_kind,
                          &p.keys_name)) {
        return NULL;
    }
    /* a tuple, so that a kind's keys, which may run any Python code, cannot change the
       records being read (a Structure's records are one already) */
    p.records = PySequence_Tuple(args[0]);
    if (p.records == NULL) {
        return NULL;
    }
    Py_ssize_t n_records = PyTuple_GET_SIZE(p.records);
    if (n_records == 0) {
        Py_DECREF(p.records);
        return Py_BuildValue("[()]"); /* the tree is one leaf */
    }
    /* The open nodes, and the key of each under its parent: above[d] is the key of
       stack[d + 1], so a leaf in the top frame has the path above[0:top] + its key. */
    Py_ssize_t cap = 16, top = -1, next = 1;
    PathFrame *stack = PyMem_Malloc(cap * sizeof(PathFrame));
    PyObject **above = PyMem_Malloc(cap * sizeof(PyObject *));
    PyObject *out = PyList_New(0);
    if (stack == NULL || above == NULL || out == NULL) {
        if (out != NULL) {
            PyErr_NoMemory();
        }
        goto error;
    }
    stack[0].keys = paths_keys(&p, 0, &stack[0].mask);
    if (stack[0].keys == NULL) {
        goto error;
    }
    stack[0].i = 0;
    top = 0;
    while (top >= 0) {
        PathFrame *fr = &stack[top];
        if (fr->i == PyTuple_GET_SIZE(fr->keys)) {
            Py_DECREF(fr->keys);
            top--;
            continue;
        }
        Py_ssize_t i = fr->i++;
        PyObject *key = PyTuple_GET_ITEM(fr->keys, i);
        int node = paths_is_node(fr->mask, i);
        if (node < 0) {
            goto error;
        }
        if (!node) {
            PyObject *path = paths_path(above, top, key);
            if (path == NULL || PyList_Append(out, path) < 0) {
                Py_XDECREF(path);
                goto error;
            }
            Py_DECREF(path);
            continue;
        }
        if (next >= n_records) {
            PyErr_SetString(PyExc_IndexError, "leaf_paths: the records end inside a node");
            goto error;
        }
        if (top + 1 == cap) {
            cap *= 2;
            PathFrame *grown = PyMem_Realloc(stack, cap * sizeof(PathFrame));
            if (grown == NULL) {
                PyErr_NoMemory();
                goto error;
            }
            stack = grown;
            PyObject **grown_above = PyMem_Realloc(above, cap * sizeof(PyObject *));
            if (grown_above == NULL) {
                PyErr_NoMemory();
                goto error;
            }
            above = grown_above;
        }
        above[top] = key; /* borrowed: fr->keys holds it while the child is open */
        PathFrame *child = &stack[top + 1];
        child->keys = paths_keys(&p, next++, &child->mask);
        if (child->keys == NULL) {
            goto error;
        }
        child->i = 0;
        top++;
    }
    PyMem_Free(stack);
    PyMem_Free(above);
    Py_XDECREF(p.seq_keys);
    Py_DECREF(p.records);
    return out;
error:
    for (; top >= 0; top--) {
        Py_DECREF(stack[top].keys);
    }
    PyMem_Free(stack);
    PyMem_Free(above);
    Py_XDECREF(p.seq_keys);
    Py_DECREF(p.records);
    Py_XDECREF(out);
    return NULL;
}

/* --- build: unflatten's rebuild ----------------------------------------------------

   `build(records, leaves, context)` is `_flatten._build` in C, its plain twin (used
   whenever this module is missing or CONTAINERS_PURE_PYTHON is set): the tree of the
   pre-order records `(kind, aux, n, mask)` of a Structure (a tuple) with `leaves` in
   place. It makes the same calls `kind.unflatten_fresh(aux, children)` in the same order (a
   node's when its last child is built; children as a new list), so that even a
   kind's `unflatten` with side effects sees no difference. A tuple, a list and a plain
   dict are built here, as jax builds its own node types in C++; every other node by
   its kind's `unflatten`, one Python call each.

   Speed (benchmarks/instructions.py, W1u and W1): the Python loop spends most of its
   time on the bytecode of a record's unpacking, its tests and the stack, and a dict
   costs it a Python call; here a record costs a few dozen instructions, a leaf two
   references (the copy's and the node's), a dict no call. W1u at N = 2,000: 593
   instructions per leaf in the Python loop, 148 here (jax 271, optree 216).

   `context` is `_flatten.C_BUILD_CONTEXT`, what does not change between calls:
   (tuple_kind, list_kind, dict_kind, dict_unflatten, plain). A record of dict_kind is
   built here as `_registry._dict_build` builds it (`dict(zip(keys, children))` with
   aux `(keys, None)`, keys in sorted order; else first `dict.fromkeys(insertion)`,
   the insertion order, then updated in the sorted order), but only while dict_kind's
   `unflatten` is dict_unflatten and aux has that shape: otherwise its `unflatten` is
   called, as for any kind. `plain(records, leaves)` is `_build` itself, for what is
   not a Structure's records and leaves (no exact tuple of records, leaves no exact
   list or tuple) or records that are not what flatten makes (a Structure unpickled
   from altered bytes): all records are checked first, before any call, and such ones
   are handed over whole, so that the plain twin raises its own errors.

   Records are flat, so this is one loop with a stack in two arrays, no C recursion:
   any depth. A list of leaves is first copied (the plain twin copies it too), so that a
   kind's `unflatten` that changes the caller's list changes nothing here; a tuple
   cannot change. The copy, each record's n and the two stacks share one block of
   memory, reused by the next call (scratch_take). */

/* A finished build leaves its block to the next build of the module, so that unflatten
   repeated over trees of one size reuses memory it has already touched. A new block of
   a few MB each call comes from fresh pages: unflatten of a 100,000-leaf tree faulted
   in about 200 pages per call for its copy of the leaves alone, besides the pages of
   the tree it builds, which any rebuild has: 2 to 4 ns per leaf where a fault costs 1
   to 2 us, as on a VM (benchmarks/run.py, W1u and W1 at 100k). Only blocks at most
   this large are kept (about 250,000 leaves' worth), so that the memory held between
   calls stays small. */
#define SCRATCH_MAX_BYTES ((size_t)8 << 20)

/* A block of at least size bytes: the module's spare if large enough, else a new one;
   mem NULL with MemoryError. */
static Scratch
scratch_take(ModuleState *state, size_t size)
{
    Scratch block = state->scratch;
    if (block.mem != NULL && block.size >= size) {
        state->scratch = (Scratch){NULL, 0};
        return block;
    }
    block.mem = PyMem_Malloc(size > 0 ? size : 1);
    block.size = size;
    if (block.mem == NULL) {
        PyErr_NoMemory();
    }
    return block;
}

/* Give a block back: kept as the module's spare if small enough and larger than the
   spare it has (a build run inside another's, by a kind's unflatten, may have put one
   back meanwhile), else freed. */
static void
scratch_put(ModuleState *state, Scratch block)
{
    if (block.mem == NULL) {
        return;
    }
    if (block.size <= SCRATCH_MAX_BYTES && block.size > state->scratch.size) {
        PyMem_Free(state->scratch.mem);
        state->scratch = block;
        return;
    }
    PyMem_Free(block.mem);
}

/* An open node: its record's index, and where its children start on the value stack. */
typedef struct {
    Py_ssize_t record;
    Py_ssize_t base;
} Open;

/* One call's values: borrowed from the call's arguments (and the copy of the leaves),
   which outlive it; and the arrays it owns. */
typedef struct {
    PyObject *records;        /* exact tuple of exact 4-tuples, checked by build_check */
    PyObject *const *leaves;  /* the items of the copy of the leaves */
    PyObject *tuple_kind;
    PyObject *list_kind;
    PyObject *dict_kind;      /* NULL while its unflatten is not dict_unflatten */
    PyObject *unflatten_name; /* "unflatten_fresh", from the module's state */
    Py_ssize_t *ns;           /* each record's n, read by build_check */
    Open *open;               /* the open nodes, innermost last */
    PyObject **values;        /* the open nodes' children built so far (owned) */
} Build;

#define RECORD_KIND(r) PyTuple_GET_ITEM((r), 0)
#define RECORD_AUX(r) PyTuple_GET_ITEM((r), 1)
#define RECORD_N(r) PyTuple_GET_ITEM((r), 2)
#define RECORD_MASK(r) PyTuple_GET_ITEM((r), 3)

/* 1 if the records are what flatten makes, 0 if not, -1 on error. Each record must be
   an exact tuple (kind, aux, n, mask) with n an exact int >= 0 and mask None, True
   with n > 0, or an exact tuple of n bools with a True in it (where the plain twin's
   scan for a node child stops); a tuple's or a list's aux None (the plain twin
   compares such records with ==, which then runs no Python code); and the records
   together one tree in pre-order with exactly nleaves leaves. Each n goes to b->ns.
   No Python code runs here. */
static int
build_check(Build *b, Py_ssize_t nrecords, Py_ssize_t nleaves)
{
    Py_ssize_t pending = 1; /* nodes still to come: the root */
    Py_ssize_t leaves = 0;
    for (Py_ssize_t j = 0; j < nrecords; j++) {
        PyObject *record = PyTuple_GET_ITEM(b->records, j);
        if (pending == 0 || !PyTuple_CheckExact(record) || PyTuple_GET_SIZE(record) != 4 ||
            !PyLong_CheckExact(RECORD_N(record))) {
            return 0;
        }
        Py_ssize_t n = PyLong_AsSsize_t(RECORD_N(record));
        if (n < 0) {
            if (PyErr_Occurred()) {
                if (!PyErr_ExceptionMatches(PyExc_OverflowError)) {
                    return -1;
                }
                PyErr_Clear(); /* too large for any tree: not flatten's */
            }
            return 0;
        }
        PyObject *kind = RECORD_KIND(record), *mask = RECORD_MASK(record);
        if ((kind == b->tuple_kind || kind == b->list_kind) && RECORD_AUX(record) != Py_None) {
            return 0;
        }
        Py_ssize_t nodes = 0;
        if (mask == Py_True) {
            nodes = n;
        }
        else if (mask != Py_None) {
            if (!PyTuple_CheckExact(mask) || PyTuple_GET_SIZE(mask) != n) {
                return 0;
            }
            for (Py_ssize_t i = 0; i < n; i++) {
                PyObject *node = PyTuple_GET_ITEM(mask, i);
                if (node == Py_True) {
                    nodes++;
                }
                else if (node != Py_False) {
                    return 0;
                }
            }
        }
        if ((mask != Py_None && nodes == 0) || nodes > nrecords - j - pending ||
            n - nodes > nleaves - leaves) {
            return 0; /* no node child; more nodes or leaves than there are */
        }
        pending += nodes - 1;
        leaves += n - nodes;
        b->ns[j] = n;
    }
    return pending == 0 && leaves == nleaves;
}

/* Drop the references to n items. */
static void
build_release(PyObject *const *items, Py_ssize_t n)
{
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_DECREF(items[i]);
    }
}

/* The dict `_registry._dict_build(aux, children)` builds, with aux already found to be
   (keys, insertion), both exact tuples (insertion may be None); the same insertions
   in the same order, so that keys whose hash or == runs Python code see no
   difference. */
static PyObject *
build_dict(PyObject *keys, PyObject *insertion, PyObject *const *items, Py_ssize_t n)
{
    PyObject *d = PyDict_New();
    if (d == NULL) {
        return NULL;
    }
    if (insertion != Py_None) { /* dict.fromkeys(insertion) */
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(insertion); i++) {
            if (PyDict_SetItem(d, PyTuple_GET_ITEM(insertion, i), Py_None) < 0) {
                Py_DECREF(d);
                return NULL;
            }
        }
    }
    Py_ssize_t m = PyTuple_GET_SIZE(keys) < n ? PyTuple_GET_SIZE(keys) : n; /* as zip */
    for (Py_ssize_t i = 0; i < m; i++) {
        if (PyDict_SetItem(d, PyTuple_GET_ITEM(keys, i), items[i]) < 0) {
            Py_DECREF(d);
            return NULL;
        }
    }
    return d;
}

/* The node of kind and aux with the n children items (new references taken, or the
   items' own stolen if steal, on error too); NULL on error. */
static PyObject *
build_node(Build *b, PyObject *kind, PyObject *aux, PyObject *const *items, Py_ssize_t n,
           int steal)
{
    if (kind == b->tuple_kind) {
        PyObject *tuple = PyTuple_New(n);
        if (tuple == NULL) {
            goto fail;
        }
        for (Py_ssize_t i = 0; i < n; i++) {
            PyTuple_SET_ITEM(tuple, i, steal ? items[i] : Py_NewRef(items[i]));
        }
        return tuple;
    }
    if (kind == b->dict_kind && PyTuple_CheckExact(aux) && PyTuple_GET_SIZE(aux) == 2 &&
        PyTuple_CheckExact(PyTuple_GET_ITEM(aux, 0)) &&
        (PyTuple_GET_ITEM(aux, 1) == Py_None || PyTuple_CheckExact(PyTuple_GET_ITEM(aux, 1)))) {
        /* the dict kind's unflatten in C: W1u's one Python call per dict */
        PyObject *d = build_dict(PyTuple_GET_ITEM(aux, 0), PyTuple_GET_ITEM(aux, 1), items, n);
        if (steal) {
            build_release(items, n);
        }
        return d;
    }
    PyObject *list = PyList_New(n);
    if (list == NULL) {
        goto fail;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyList_SET_ITEM(list, i, steal ? items[i] : Py_NewRef(items[i]));
    }
    if (kind == b->list_kind) {
        return list;
    }
    PyObject *argv[3] = {kind, aux, list}; /* kind.unflatten_fresh(aux, list) */
    PyObject *node = PyObject_VectorcallMethod(b->unflatten_name, argv, 3, NULL);
    Py_DECREF(list);
    return node;
fail:
    if (steal) {
        build_release(items, n);
    }
    return NULL;
}

/* The tree of the checked records: one pass, the open nodes on b->open, their
   children so far on b->values. */
static PyObject *
build_tree(Build *b, Py_ssize_t nrecords)
{
    Py_ssize_t pos = 0; /* the next leaf */
    Py_ssize_t top = 0; /* the open nodes */
    Py_ssize_t sp = 0;  /* the values held */
    for (Py_ssize_t j = 0; j < nrecords; j++) {
        PyObject *record = PyTuple_GET_ITEM(b->records, j);
        PyObject *mask = RECORD_MASK(record);
        Py_ssize_t n = b->ns[j];
        if (mask != Py_None) { /* a node with node children: open it */
            b->open[top].record = j;
            b->open[top].base = sp;
            top++;
            for (Py_ssize_t i = 0; mask != Py_True && PyTuple_GET_ITEM(mask, i) == Py_False;
                 i++) {
                b->values[sp++] = Py_NewRef(b->leaves[pos++]);
            }
            continue;
        }
        /* a node whose children are all leaves: built from the leaves in place */
        PyObject *value =
            build_node(b, RECORD_KIND(record), RECORD_AUX(record), b->leaves + pos, n, 0);
        pos += n;
        while (value != NULL) { /* attach value to the open node; close those it completes */
            if (top == 0) {
                return value; /* the root: the last record, by build_check */
            }
            b->values[sp++] = value;
            Open *node = &b->open[top - 1];
            PyObject *parent = PyTuple_GET_ITEM(b->records, node->record);
            PyObject *pmask = RECORD_MASK(parent);
            Py_ssize_t pn = b->ns[node->record];
            Py_ssize_t i = sp - node->base;
            while (i < pn && pmask != Py_True && PyTuple_GET_ITEM(pmask, i) == Py_False) {
                b->values[sp++] = Py_NewRef(b->leaves[pos++]);
                i++;
            }
            if (i < pn) {
                break;
            }
            top--;
            sp = node->base; /* its children, stolen by build_node */
            value = build_node(b, RECORD_KIND(parent), RECORD_AUX(parent), b->values + sp, pn,
                               1);
        }
        if (value == NULL) {
            build_release(b->values, sp);
            return NULL;
        }
    }
    PyErr_SetString(PyExc_SystemError, "build: records checked but left open");
    build_release(b->values, sp);
    return NULL;
}

static PyObject *
speedups_build(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3) {
        PyErr_Format(PyExc_TypeError, "build() takes 3 arguments (%zd given)", nargs);
        return NULL;
    }
    PyObject *records = args[0], *leaves = args[1], *context = args[2];
    PyObject *dict_unflatten, *plain;
    Build b = {.records = records};
    if (!PyTuple_Check(context) ||
        !PyArg_ParseTuple(context, "OOOOO:build context", &b.tuple_kind, &b.list_kind,
                          &b.dict_kind, &dict_unflatten, &plain)) {
        if (!PyErr_Occurred()) {
            PyErr_SetString(PyExc_TypeError, "build: context must be a tuple");
        }
        return NULL;
    }
    if (!PyTuple_CheckExact(records) || !(PyList_CheckExact(leaves) || PyTuple_CheckExact(leaves))) {
        return PyObject_CallFunctionObjArgs(plain, records, leaves, NULL);
    }
    Py_ssize_t nrecords = PyTuple_GET_SIZE(records);
    if (nrecords == 0) {
        return PySequence_GetItem(leaves, 0); /* a leaf: leaves[0] */
    }
    ModuleState *state = PyModule_GetState(module);
    b.unflatten_name = state->unflatten_name;
    PyObject *current = PyObject_GetAttr(b.dict_kind, b.unflatten_name);
    if (current == NULL) {
        return NULL;
    }
    if (current != dict_unflatten) {
        b.dict_kind = NULL; /* replaced: called as any kind's */
    }
    Py_DECREF(current);
    Py_ssize_t nleaves = PySequence_Fast_GET_SIZE(leaves);
    int copying = PyList_CheckExact(leaves);
    if (nleaves > PY_SSIZE_T_MAX / 64 || nrecords > PY_SSIZE_T_MAX / 64) {
        return PyErr_NoMemory(); /* no tree this large fits in memory */
    }
    /* the block: ns, open, values (room for every leaf and node), then the copy */
    size_t ns_size = (size_t)nrecords * sizeof(Py_ssize_t);
    size_t open_size = (size_t)nrecords * sizeof(Open);
    size_t values_size = (size_t)(nleaves + nrecords) * sizeof(PyObject *);
    size_t copy_size = copying ? (size_t)nleaves * sizeof(PyObject *) : 0;
    Scratch block = scratch_take(state, ns_size + open_size + values_size + copy_size);
    if (block.mem == NULL) {
        return NULL;
    }
    char *mem = block.mem;
    b.ns = (Py_ssize_t *)mem;
    b.open = (Open *)(mem + ns_size);
    b.values = (PyObject **)(mem + ns_size + open_size);
    PyObject *tree;
    int checked = build_check(&b, nrecords, nleaves);
    if (checked <= 0) {
        scratch_put(state, block);
        return checked == 0 ? PyObject_CallFunctionObjArgs(plain, records, leaves, NULL) : NULL;
    }
    if (copying) {
        PyObject **copy = (PyObject **)(mem + ns_size + open_size + values_size);
        for (Py_ssize_t i = 0; i < nleaves; i++) {
            copy[i] = Py_NewRef(PyList_GET_ITEM(leaves, i)); /* no Python code runs */
        }
        b.leaves = copy;
        tree = build_tree(&b, nrecords);
        build_release(copy, nleaves);
    }
    else {
        Py_INCREF(leaves); /* the tuple's items are the leaves while it lives */
        b.leaves = PySequence_Fast_ITEMS(leaves);
        tree = build_tree(&b, nrecords);
        Py_DECREF(leaves);
    }
    /* the releases may have run a nested build, which took a block of its own */
    scratch_put(state, block);
    return tree;
}

/* object.__new__(cls): object's tp_new itself where it is the class's (the checks of
   its Python wrapper pass then), else the wrapper, which decides (a class with its own
   __new__ may get an instance, one with a built-in base is refused). */
static PyObject *
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

/* new_instance(cls, names, *values): object.__new__(cls) with each name set to its
   value as object.__setattr__ sets it, past a frozen __setattr__: the generated
   unflatten of a class (`_codegen`), whose plain twin is `plain_unflatten`. Setting
   fields this way keeps CPython's compact instance values (3.11+), where reading
   `__dict__` to write it makes a dict per instance (benchmarks/run.py, W3id). */
static PyObject *
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
     "appended to records unless None (the compiled twin of _flat.flatten_fast)."},
    {"leaf_paths", (PyCFunction)(void (*)(void))speedups_leaf_paths, METH_FASTCALL,
     "leaf_paths(records, context): the key path of every leaf of a Structure's records "
     "(the compiled twin of _flatten.ranked_paths without ranks)."},
    {"build", (PyCFunction)(void (*)(void))speedups_build, METH_FASTCALL,
     "build(records, leaves, context): the tree of a Structure's records with leaves in "
     "place (the compiled twin of _flatten._build)."},
    {NULL, NULL, 0, NULL},
};

/* --- Rebuild: one class's rebuild without __init__ -------------------------------- */

/* Where a field's value comes from. */
enum { FROM_CHILD, FROM_KEPT, FROM_VALUE, FROM_FACTORY, FROM_FACTORY_SELF };

typedef struct {
    PyObject *name;   /* interned str */
    PyObject *value;  /* FROM_VALUE: the default; FROM_FACTORY(_SELF): the factory */
    Py_ssize_t index; /* FROM_CHILD, FROM_KEPT: the position in children or kept */
    int how;
} Field;

/* A field array's references (Rebuild's, MapNode's): visited, cleared, freed. */
static int
fields_traverse(const Field *fields, Py_ssize_t n, visitproc visit, void *arg)
{
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_VISIT(fields[i].value);
    }
    return 0;
}

static void
fields_clear(Field *fields, Py_ssize_t n)
{
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_CLEAR(fields[i].value);
    }
}

static void
fields_free(Field *fields, Py_ssize_t n)
{
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_XDECREF(fields[i].name);
    }
    PyMem_Free(fields);
}

/* Children up to this many are held on the C stack during a rebuild. */
#define STACK_CHILDREN 8

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
static int
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
static PyObject *
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

/* Heap types, one pair per module object; like the static types they replace, they
   cannot be subclassed or changed. */
#define LOOP_FLAGS (Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_IMMUTABLETYPE)

static PyType_Spec IdTable_spec = {
    .name = "containers._engine._speedups.IdTable",
    .basicsize = sizeof(IdTableObject),
    .flags = LOOP_FLAGS,
    .slots = IdTable_slots,
};

static PyType_Spec Loop_spec = {
    .name = "containers._engine._speedups.Loop",
    .basicsize = sizeof(LoopObject),
    .flags = LOOP_FLAGS,
    .slots = Loop_slots,
};

static PyType_Spec PairLoop_spec = {
    .name = "containers._engine._speedups.PairLoop",
    .basicsize = sizeof(LoopObject),
    .flags = LOOP_FLAGS,
    .slots = PairLoop_slots,
};

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

static PyType_Spec Rebuild_spec = {
    .name = "containers._engine._speedups.Rebuild",
    .basicsize = sizeof(RebuildObject),
    .flags = LOOP_FLAGS | Py_TPFLAGS_HAVE_VECTORCALL,
    .slots = Rebuild_slots,
};

static PyType_Spec MapNode_spec = {
    .name = "containers._engine._speedups.MapNode",
    .basicsize = sizeof(MapNodeObject),
    .flags = LOOP_FLAGS | Py_TPFLAGS_HAVE_VECTORCALL,
    .slots = MapNode_slots,
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
    state->unflatten_name = PyUnicode_InternFromString("unflatten_fresh");
    if (state->handover_depth == NULL || state->unflatten_name == NULL ||
        add_type(module, &IdTable_spec, &state->table_type) < 0 ||
        add_type(module, &Loop_spec, &state->loop_type) < 0 ||
        add_type(module, &PairLoop_spec, NULL) < 0 ||
        add_type(module, &Rebuild_spec, NULL) < 0 ||
        add_type(module, &MapNode_spec, &state->node_type) < 0 ||
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
    Py_VISIT(state->unflatten_name);
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
    Py_CLEAR(state->unflatten_name);
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
                       "_fast._Mode, _fast._ManyMode, _mappers.node_plan, _flat.flatten_fast, "
                       "_flatten._build and interop._generated)."),
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
