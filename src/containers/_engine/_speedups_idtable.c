#include "_speedups.h"

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
   are written in order and released in reverse order (IdTable_clear). They are never
   removed one by one, only all at once (`clear`), so an empty slot ends every probe
   and no tombstones are needed.
   Python reads the table by id, as it read the dict (`get(id, default)`, `id in
   table`, `table[id]`), and writes it with `store(obj, value)`; the loops (_speedups_loop.c) probe
   it directly. */

#define TABLE_MIN_SLOTS 64
/* Below this many slots the table grows fourfold (fewer rehashes of a small table),
   from it twofold (less memory for a large one). */
#define TABLE_QUADRUPLE_BELOW 65536

/* table_find's probe past its linear steps, from the occupied slot i. */
COLD size_t
table_jump(const IdTableObject *self, const void *key, size_t i)
{
    /* the address's bits mixed into all of perturb's (splitmix64's finalizer) */
    uint64_t z = (uint64_t)(uintptr_t)key;
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    size_t perturb = (size_t)(z ^ (z >> 31));
    uint32_t tag = table_tag(self, key), s;
    do {
        perturb >>= 5;
        i = (i * 5 + perturb + 1) & self->mask;
    } while ((s = self->slots[i]) != 0 && !table_holds(self, s, tag, key));
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
    return s == 0 ? NULL : self->entries[table_index(self, s)].value;
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

void
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
    if (self->slots == NULL) {
        self->shift = TABLE_SHIFT; /* until table_respace reads the first keys */
    }
    if (self->slots == NULL && spare_take(self)) {
        self->layout++;
        return 0;
    }
    size_t slots_now = self->slots == NULL ? 0 : self->mask + 1;
    size_t n = slots_now == 0                       ? TABLE_MIN_SLOTS
               : slots_now < TABLE_QUADRUPLE_BELOW ? 4 * slots_now
                                                   : 2 * slots_now;
    if ((uint64_t)n - 1 > UINT32_MAX) {
        PyErr_NoMemory(); /* an index + 1 and its tag must fit a slot's 32 bits */
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
        PyObject *key = entries[j].key;
        slots[table_find(self, key)] = table_tag(self, key) | ((uint32_t)j + 1);
    }
    return 0;
}

/* The largest shift tried: objects 256 bytes apart or more take two slots each. */
#define TABLE_SHIFT_MAX 7

/* Set the shift from the spacing of the first TABLE_SPACING_SAMPLE keys stored, and
   put every entry in its slot again. The shift is one less than the floor of log2 of
   the smallest distance between two of these keys in address order (at least
   TABLE_SHIFT, at most TABLE_SHIFT_MAX): keys that far apart or more get homes at
   least two slots apart, so that a run of them fills at most half of its slots, and
   where two runs fall on the same slots (keys from two regions of memory, as a tree
   of dicts of arrays has) they still fit, mostly without leaving their cache lines;
   keys further apart share the cache lines of slots with fewer gaps between them.
   The smallest distance, not a typical one: a shift too large for some keys (several
   homes in one slot) costs probes, one too small only cache lines. In address order,
   not in the order stored: keys stored one after the other may come from different
   regions (a dict after its arrays), and on a heap that earlier work has fragmented
   the first keys of each region lie far apart while the rest are dense. Measured
   between keys stored in a row, with homes one slot apart, the shift came out 7 for
   arrays 96 bytes apart after W1, W3 and W4c had run, and a quarter of W6id's probes
   jumped to a slot out of the CPU cache; in benchmarks/run.py's order, 2-4% of the
   probes of W6id, W3id-held and W4c at 100k jumped, 0.3-2% with this rule (counted
   in the probe). Only the slots change: no Python code runs, and `layout` tells a
   pending Probe to probe again. */
COLD void
table_respace(IdTableObject *self)
{
    Entry *entries = self->entries;
    Py_ssize_t sample = self->used < TABLE_SPACING_SAMPLE ? self->used : TABLE_SPACING_SAMPLE;
    uintptr_t by_address[TABLE_SPACING_SAMPLE]; /* the sample's addresses, sorted */
    for (Py_ssize_t j = 0; j < sample; j++) {
        uintptr_t a = (uintptr_t)entries[j].key;
        Py_ssize_t k = j;
        for (; k > 0 && by_address[k - 1] > a; k--) {
            by_address[k] = by_address[k - 1];
        }
        by_address[k] = a;
    }
    uintptr_t least = UINTPTR_MAX;
    for (Py_ssize_t j = 1; j < sample; j++) {
        uintptr_t d = by_address[j] - by_address[j - 1];
        least = d < least ? d : least;
    }
    unsigned shift = TABLE_SHIFT;
    while (shift < TABLE_SHIFT_MAX && (least >> (shift + 2)) != 0) {
        shift++;
    }
    if (shift == self->shift) {
        return;
    }
    /* every occupied slot found with the old shift, then all emptied (an emptied slot
       would end the probes that passed it), then refilled */
    size_t found[TABLE_SPACING_SAMPLE];
    Py_ssize_t n = self->used < TABLE_SPACING_SAMPLE ? self->used : TABLE_SPACING_SAMPLE;
    if (n != self->used) {
        return; /* called past the sample: the shift stays (never, from table_put) */
    }
    for (Py_ssize_t j = 0; j < n; j++) {
        found[j] = table_find(self, entries[j].key);
    }
    for (Py_ssize_t j = 0; j < n; j++) {
        self->slots[found[j]] = 0;
    }
    self->shift = shift;
    self->layout++;
    for (Py_ssize_t j = 0; j < self->used; j++) {
        PyObject *key = entries[j].key;
        self->slots[table_find(self, key)] = table_tag(self, key) | ((uint32_t)j + 1);
    }
}

/* Remember value as key's result (replacing any); -1 on error. */
int
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
        Py_SETREF(self->entries[table_index(self, self->slots[i])].value, value);
    }
    return 0;
}

/* How many entries ahead clear asks the CPU for the objects it will release (a hint:
   table_prefetch_object). */
#define CLEAR_AHEAD 32

/* Ask the CPU to load obj's reference count for writing: a hint, which reads and
   changes nothing (the object is held by the entry, not yet released). */
static inline void
table_prefetch_object(const PyObject *obj)
{
#if defined(__GNUC__)
    __builtin_prefetch(obj, 1);
#else
    (void)obj;
#endif
}

/* Forget everything. The arrays are detached first, so that Python code run by the
   releases (a __del__) finds an empty, usable table. Entries are released last stored
   first, as a list releases its items: at the end of a walk over a large tree its
   first objects have left the CPU cache and its last ones are still there, and each
   release writes the object's reference count. Released first to last, each one
   missed the cache (the pass itself evicting the last objects before it reached
   them); last to first, the objects still cached are released before they are
   evicted, and the CPU is asked ahead for the others (perf annotate, benchmarks/run.py
   W3id-held at 100k: the table's clear cost about as much as all its lookups). */
static int
IdTable_clear(IdTableObject *self)
{
    TableArrays arrays = {self->slots, self->entries, self->mask};
    Py_ssize_t used = self->used;
    self->slots = NULL;
    self->entries = NULL;
    self->mask = 0;
    self->used = 0;
    self->shift = TABLE_SHIFT;
    self->layout++;
    for (Py_ssize_t j = used - 1; j >= 0; j--) {
        if (j >= CLEAR_AHEAD) {
            table_prefetch_object(arrays.entries[j - CLEAR_AHEAD].key);
            table_prefetch_object(arrays.entries[j - CLEAR_AHEAD].value);
        }
        Py_DECREF(arrays.entries[j].value);
        Py_DECREF(arrays.entries[j].key);
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

/* lookup(obj, default): as get, by the object itself: no id to make and read back
   (the iterative walk calls it at every mutable node: benchmarks/run.py, deep-fmap). */
static PyObject *
IdTable_lookup(IdTableObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_Format(PyExc_TypeError, "lookup() takes 2 arguments (%zd given)", nargs);
        return NULL;
    }
    PyObject *value = table_lookup(self, args[0]);
    return Py_NewRef(value == NULL ? args[1] : value);
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
    {"lookup", (PyCFunction)(void (*)(void))IdTable_lookup, METH_FASTCALL,
     "lookup(obj, default): the result stored for obj itself, or default."},
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

PyType_Spec IdTable_spec = {
    .name = "containers._engine._speedups.IdTable",
    .basicsize = sizeof(IdTableObject),
    .flags = LOOP_FLAGS,
    .slots = IdTable_slots,
};
