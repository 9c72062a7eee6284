/* containers._crc32: CRC-32 (ISO-HDLC, as zlib.crc32 computes it) by carry-less
   multiplication, an optional accelerator for the checks of ct.load and ct.save.

   `crc32(data, value=0, /)` returns exactly what `zlib.crc32(data, value)` returns, for
   any C-contiguous buffer. On x86-64 CPUs with PCLMULQDQ it folds 64 bytes per step
   with four 128-bit accumulators (the method of Intel's white paper "Fast CRC
   Computation for Generic Polynomials Using PCLMULQDQ Instruction", as in Chromium's
   and Linux's crc32 code); with AVX-512 and VPCLMULQDQ it folds 256 bytes per step
   with four 512-bit accumulators, then finishes as the 128-bit code does. The CPU is
   asked at import (`__builtin_cpu_supports`, which also checks that the OS saves the
   AVX-512 registers); `IMPLEMENTATION` names what was found and `ACCELERATED` is
   false where neither instruction exists (another architecture, another compiler),
   in which case `_format` uses zlib.crc32, the plain twin. tests/test_crc32.py checks
   every implementation against zlib.crc32 (`crc32_using`).

   zlib computes about 2 GB/s on the benchmark machine; this code runs at memory speed
   (benchmarks/serialization.py, "big": load with verify=True). The GIL is released
   for inputs of 16 KiB and more, so threads can check tensors in parallel.

   The module keeps no state (PEP 489 multi-phase initialisation; no Python object in
   a C static), needs no GIL for its work, and can be imported in any interpreter. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
#define CRC_X86 1
#include <immintrin.h>
#else
#define CRC_X86 0
#endif

/* Inputs at least this long are checked without the GIL (zlib's own bound is 5 KiB). */
#define NOGIL_BYTES (16 * 1024)

/* The byte-at-a-time table of the reflected polynomial 0xEDB88320 (generated; the
   tails of the folding code and the portable path use it). */
static const uint32_t crc_table[256] = {
    0x00000000, 0x77073096, 0xee0e612c, 0x990951ba, 0x076dc419, 0x706af48f,
    0xe963a535, 0x9e6495a3, 0x0edb8832, 0x79dcb8a4, 0xe0d5e91e, 0x97d2d988,
    0x09b64c2b, 0x7eb17cbd, 0xe7b82d07, 0x90bf1d91, 0x1db71064, 0x6ab020f2,
    0xf3b97148, 0x84be41de, 0x1adad47d, 0x6ddde4eb, 0xf4d4b551, 0x83d385c7,
    0x136c9856, 0x646ba8c0, 0xfd62f97a, 0x8a65c9ec, 0x14015c4f, 0x63066cd9,
    0xfa0f3d63, 0x8d080df5, 0x3b6e20c8, 0x4c69105e, 0xd56041e4, 0xa2677172,
    0x3c03e4d1, 0x4b04d447, 0xd20d85fd, 0xa50ab56b, 0x35b5a8fa, 0x42b2986c,
    0xdbbbc9d6, 0xacbcf940, 0x32d86ce3, 0x45df5c75, 0xdcd60dcf, 0xabd13d59,
    0x26d930ac, 0x51de003a, 0xc8d75180, 0xbfd06116, 0x21b4f4b5, 0x56b3c423,
    0xcfba9599, 0xb8bda50f, 0x2802b89e, 0x5f058808, 0xc60cd9b2, 0xb10be924,
    0x2f6f7c87, 0x58684c11, 0xc1611dab, 0xb6662d3d, 0x76dc4190, 0x01db7106,
    0x98d220bc, 0xefd5102a, 0x71b18589, 0x06b6b51f, 0x9fbfe4a5, 0xe8b8d433,
    0x7807c9a2, 0x0f00f934, 0x9609a88e, 0xe10e9818, 0x7f6a0dbb, 0x086d3d2d,
    0x91646c97, 0xe6635c01, 0x6b6b51f4, 0x1c6c6162, 0x856530d8, 0xf262004e,
    0x6c0695ed, 0x1b01a57b, 0x8208f4c1, 0xf50fc457, 0x65b0d9c6, 0x12b7e950,
    0x8bbeb8ea, 0xfcb9887c, 0x62dd1ddf, 0x15da2d49, 0x8cd37cf3, 0xfbd44c65,
    0x4db26158, 0x3ab551ce, 0xa3bc0074, 0xd4bb30e2, 0x4adfa541, 0x3dd895d7,
    0xa4d1c46d, 0xd3d6f4fb, 0x4369e96a, 0x346ed9fc, 0xad678846, 0xda60b8d0,
    0x44042d73, 0x33031de5, 0xaa0a4c5f, 0xdd0d7cc9, 0x5005713c, 0x270241aa,
    0xbe0b1010, 0xc90c2086, 0x5768b525, 0x206f85b3, 0xb966d409, 0xce61e49f,
    0x5edef90e, 0x29d9c998, 0xb0d09822, 0xc7d7a8b4, 0x59b33d17, 0x2eb40d81,
    0xb7bd5c3b, 0xc0ba6cad, 0xedb88320, 0x9abfb3b6, 0x03b6e20c, 0x74b1d29a,
    0xead54739, 0x9dd277af, 0x04db2615, 0x73dc1683, 0xe3630b12, 0x94643b84,
    0x0d6d6a3e, 0x7a6a5aa8, 0xe40ecf0b, 0x9309ff9d, 0x0a00ae27, 0x7d079eb1,
    0xf00f9344, 0x8708a3d2, 0x1e01f268, 0x6906c2fe, 0xf762575d, 0x806567cb,
    0x196c3671, 0x6e6b06e7, 0xfed41b76, 0x89d32be0, 0x10da7a5a, 0x67dd4acc,
    0xf9b9df6f, 0x8ebeeff9, 0x17b7be43, 0x60b08ed5, 0xd6d6a3e8, 0xa1d1937e,
    0x38d8c2c4, 0x4fdff252, 0xd1bb67f1, 0xa6bc5767, 0x3fb506dd, 0x48b2364b,
    0xd80d2bda, 0xaf0a1b4c, 0x36034af6, 0x41047a60, 0xdf60efc3, 0xa867df55,
    0x316e8eef, 0x4669be79, 0xcb61b38c, 0xbc66831a, 0x256fd2a0, 0x5268e236,
    0xcc0c7795, 0xbb0b4703, 0x220216b9, 0x5505262f, 0xc5ba3bbe, 0xb2bd0b28,
    0x2bb45a92, 0x5cb36a04, 0xc2d7ffa7, 0xb5d0cf31, 0x2cd99e8b, 0x5bdeae1d,
    0x9b64c2b0, 0xec63f226, 0x756aa39c, 0x026d930a, 0x9c0906a9, 0xeb0e363f,
    0x72076785, 0x05005713, 0x95bf4a82, 0xe2b87a14, 0x7bb12bae, 0x0cb61b38,
    0x92d28e9b, 0xe5d5be0d, 0x7cdcefb7, 0x0bdbdf21, 0x86d3d2d4, 0xf1d4e242,
    0x68ddb3f8, 0x1fda836e, 0x81be16cd, 0xf6b9265b, 0x6fb077e1, 0x18b74777,
    0x88085ae6, 0xff0f6a70, 0x66063bca, 0x11010b5c, 0x8f659eff, 0xf862ae69,
    0x616bffd3, 0x166ccf45, 0xa00ae278, 0xd70dd2ee, 0x4e048354, 0x3903b3c2,
    0xa7672661, 0xd06016f7, 0x4969474d, 0x3e6e77db, 0xaed16a4a, 0xd9d65adc,
    0x40df0b66, 0x37d83bf0, 0xa9bcae53, 0xdebb9ec5, 0x47b2cf7f, 0x30b5ffe9,
    0xbdbdf21c, 0xcabac28a, 0x53b39330, 0x24b4a3a6, 0xbad03605, 0xcdd70693,
    0x54de5729, 0x23d967bf, 0xb3667a2e, 0xc4614ab8, 0x5d681b02, 0x2a6f2b94,
    0xb40bbe37, 0xc30c8ea1, 0x5a05df1b, 0x2d02ef8d,
};

static uint32_t
crc_bytes(uint32_t crc, const unsigned char *p, size_t n)
{
    /* `crc` is the inverted running state, as inside zlib. */
    while (n--) {
        crc = crc_table[(crc ^ *p++) & 0xff] ^ (crc >> 8);
    }
    return crc;
}

#if CRC_X86

/* Folding constants: x^(D+32) and x^(D-32) mod P, bit-reflected and shifted left by
   one, for a fold over D bits (D = 512: four 128-bit lanes; D = 128: one lane; D =
   2048: four 512-bit lanes). k5 is x^64 mod P; `poly` is P' and P for Barrett's
   reduction. */
#define K512_LO 0x154442bd4ULL
#define K512_HI 0x1c6e41596ULL
#define K128_LO 0x1751997d0ULL
#define K128_HI 0x0ccaa009eULL
#define K2048_LO 0x11542778aULL
#define K2048_HI 0x1322d1430ULL
#define K5 0x163cd6124ULL
#define POLY_MU 0x1f7011641ULL
#define POLY_P 0x1db710641ULL

__attribute__((target("pclmul,sse4.1"))) static inline __m128i
fold128(__m128i acc, __m128i k, __m128i next)
{
    __m128i lo = _mm_clmulepi64_si128(acc, k, 0x00);
    __m128i hi = _mm_clmulepi64_si128(acc, k, 0x11);
    return _mm_xor_si128(_mm_xor_si128(lo, hi), next);
}

/* Four 128-bit accumulators x1..x4 holding the first (n - len) bytes folded: fold them
   into one, then the remaining 16-byte blocks, then reduce to 32 bits. `len` is a
   multiple of 16. Returns the inverted state, as `crc_bytes` takes it. */
__attribute__((target("pclmul,sse4.1"))) static uint32_t
finish128(__m128i x1, __m128i x2, __m128i x3, __m128i x4, const unsigned char *buf,
          size_t len)
{
    const __m128i k3k4 = _mm_set_epi64x((long long)K128_HI, (long long)K128_LO);
    const __m128i k5 = _mm_set_epi64x(0, (long long)K5);
    const __m128i poly = _mm_set_epi64x((long long)POLY_MU, (long long)POLY_P);
    const __m128i mask32 = _mm_setr_epi32(~0, 0, ~0, 0);
    __m128i x0, x2b;

    x1 = fold128(x1, k3k4, x2);
    x1 = fold128(x1, k3k4, x3);
    x1 = fold128(x1, k3k4, x4);
    while (len >= 16) {
        x1 = fold128(x1, k3k4, _mm_loadu_si128((const __m128i *)buf));
        buf += 16;
        len -= 16;
    }
    /* 128 -> 64 bits. */
    x2b = _mm_clmulepi64_si128(x1, k3k4, 0x10);
    x1 = _mm_xor_si128(_mm_srli_si128(x1, 8), x2b);
    /* 64 -> 32 bits. */
    x2b = _mm_srli_si128(x1, 4);
    x1 = _mm_and_si128(x1, mask32);
    x1 = _mm_clmulepi64_si128(x1, k5, 0x00);
    x1 = _mm_xor_si128(x1, x2b);
    /* Barrett reduction. */
    x0 = _mm_and_si128(x1, mask32);
    x0 = _mm_clmulepi64_si128(x0, poly, 0x10);
    x0 = _mm_and_si128(x0, mask32);
    x0 = _mm_clmulepi64_si128(x0, poly, 0x00);
    x1 = _mm_xor_si128(x1, x0);
    return (uint32_t)_mm_extract_epi32(x1, 1);
}

/* The inverted state after `len` bytes (len >= 64, a multiple of 16). */
__attribute__((target("pclmul,sse4.1"))) static uint32_t
crc_pclmul(uint32_t crc, const unsigned char *buf, size_t len)
{
    const __m128i k1k2 = _mm_set_epi64x((long long)K512_HI, (long long)K512_LO);
    __m128i x1 = _mm_loadu_si128((const __m128i *)(buf + 0x00));
    __m128i x2 = _mm_loadu_si128((const __m128i *)(buf + 0x10));
    __m128i x3 = _mm_loadu_si128((const __m128i *)(buf + 0x20));
    __m128i x4 = _mm_loadu_si128((const __m128i *)(buf + 0x30));

    x1 = _mm_xor_si128(x1, _mm_cvtsi32_si128((int)crc));
    buf += 64;
    len -= 64;
    while (len >= 64) {
        x1 = fold128(x1, k1k2, _mm_loadu_si128((const __m128i *)(buf + 0x00)));
        x2 = fold128(x2, k1k2, _mm_loadu_si128((const __m128i *)(buf + 0x10)));
        x3 = fold128(x3, k1k2, _mm_loadu_si128((const __m128i *)(buf + 0x20)));
        x4 = fold128(x4, k1k2, _mm_loadu_si128((const __m128i *)(buf + 0x30)));
        buf += 64;
        len -= 64;
    }
    return finish128(x1, x2, x3, x4, buf, len);
}

#define AVX512_TARGET "avx512f,avx512vl,avx512dq,vpclmulqdq,pclmul,sse4.1"

__attribute__((target(AVX512_TARGET))) static inline __m512i
fold512(__m512i acc, __m512i k, __m512i next)
{
    __m512i lo = _mm512_clmulepi64_epi128(acc, k, 0x00);
    __m512i hi = _mm512_clmulepi64_epi128(acc, k, 0x11);
    /* 0x96: a ^ b ^ c in one instruction. */
    return _mm512_ternarylogic_epi64(lo, hi, next, 0x96);
}

/* The inverted state after `len` bytes (len >= 256, a multiple of 16). */
__attribute__((target(AVX512_TARGET))) static uint32_t
crc_vpclmul(uint32_t crc, const unsigned char *buf, size_t len)
{
    const __m512i k2048 = _mm512_set_epi64(
        (long long)K2048_HI, (long long)K2048_LO, (long long)K2048_HI, (long long)K2048_LO,
        (long long)K2048_HI, (long long)K2048_LO, (long long)K2048_HI, (long long)K2048_LO);
    const __m512i k512 = _mm512_set_epi64(
        (long long)K512_HI, (long long)K512_LO, (long long)K512_HI, (long long)K512_LO,
        (long long)K512_HI, (long long)K512_LO, (long long)K512_HI, (long long)K512_LO);
    __m512i z0 = _mm512_loadu_si512((const void *)(buf + 0x00));
    __m512i z1 = _mm512_loadu_si512((const void *)(buf + 0x40));
    __m512i z2 = _mm512_loadu_si512((const void *)(buf + 0x80));
    __m512i z3 = _mm512_loadu_si512((const void *)(buf + 0xc0));

    z0 = _mm512_xor_si512(z0, _mm512_zextsi128_si512(_mm_cvtsi32_si128((int)crc)));
    buf += 256;
    len -= 256;
    while (len >= 256) {
        z0 = fold512(z0, k2048, _mm512_loadu_si512((const void *)(buf + 0x00)));
        z1 = fold512(z1, k2048, _mm512_loadu_si512((const void *)(buf + 0x40)));
        z2 = fold512(z2, k2048, _mm512_loadu_si512((const void *)(buf + 0x80)));
        z3 = fold512(z3, k2048, _mm512_loadu_si512((const void *)(buf + 0xc0)));
        buf += 256;
        len -= 256;
    }
    /* Four 512-bit accumulators into one, then the remaining 64-byte blocks. */
    z1 = fold512(z0, k512, z1);
    z2 = fold512(z1, k512, z2);
    z0 = fold512(z2, k512, z3);
    while (len >= 64) {
        z0 = fold512(z0, k512, _mm512_loadu_si512((const void *)buf));
        buf += 64;
        len -= 64;
    }
    return finish128(_mm512_extracti32x4_epi32(z0, 0), _mm512_extracti32x4_epi32(z0, 1),
                     _mm512_extracti32x4_epi32(z0, 2), _mm512_extracti32x4_epi32(z0, 3),
                     buf, len);
}

#endif /* CRC_X86 */

typedef enum { IMPL_TABLE = 0, IMPL_PCLMUL = 1, IMPL_VPCLMUL = 2 } Impl;

static const char *const impl_names[] = {"table", "pclmulqdq", "avx512-vpclmulqdq"};

/* The fastest implementation this CPU runs; asked once per call (a read of the
   flags libgcc filled at load time). */
static Impl
best_impl(void)
{
#if CRC_X86
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
        __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("vpclmulqdq") &&
        __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1")) {
        return IMPL_VPCLMUL;
    }
    if (__builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1")) {
        return IMPL_PCLMUL;
    }
#endif
    return IMPL_TABLE;
}

/* zlib.crc32(buf[:len], value) with the given implementation (which the CPU has). */
static uint32_t
crc_run(Impl impl, uint32_t value, const unsigned char *buf, size_t len)
{
    uint32_t crc = ~value;
#if CRC_X86
    size_t bulk = len & ~(size_t)15;
    if (impl == IMPL_VPCLMUL && bulk >= 256) {
        crc = crc_vpclmul(crc, buf, bulk);
        buf += bulk;
        len -= bulk;
    }
    else if (impl != IMPL_TABLE && bulk >= 64) {
        crc = crc_pclmul(crc, buf, bulk);
        buf += bulk;
        len -= bulk;
    }
#else
    (void)impl;
#endif
    return ~crc_bytes(crc, buf, len);
}

static PyObject *
crc_call(Impl impl, PyObject *const *args, Py_ssize_t nargs, const char *fname)
{
    Py_buffer view;
    uint32_t value = 0, result;

    if (nargs < 1 || nargs > 2) {
        PyErr_Format(PyExc_TypeError, "%s() takes 1 or 2 positional arguments (%zd given)",
                     fname, nargs);
        return NULL;
    }
    if (nargs == 2) {
        unsigned long v;
        if (!PyLong_Check(args[1])) {
            PyErr_Format(PyExc_TypeError, "%s(): value must be an int, not %.100s", fname,
                         Py_TYPE(args[1])->tp_name);
            return NULL;
        }
        /* As zlib.crc32: the value is taken modulo 2**32. */
        v = PyLong_AsUnsignedLongMask(args[1]);
        if (v == (unsigned long)-1 && PyErr_Occurred()) {
            return NULL;
        }
        value = (uint32_t)v;
    }
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0) {
        return NULL;
    }
    if (view.len >= NOGIL_BYTES) {
        Py_BEGIN_ALLOW_THREADS
        result = crc_run(impl, value, (const unsigned char *)view.buf, (size_t)view.len);
        Py_END_ALLOW_THREADS
    }
    else {
        result = crc_run(impl, value, (const unsigned char *)view.buf, (size_t)view.len);
    }
    PyBuffer_Release(&view);
    return PyLong_FromUnsignedLong(result);
}

static PyObject *
crc32_crc32(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    return crc_call(best_impl(), args, nargs, "crc32");
}

static PyObject *
crc32_using(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    const char *name;
    Impl impl, best = best_impl();

    (void)module;
    if (nargs < 2 || nargs > 3) {
        PyErr_Format(PyExc_TypeError,
                     "crc32_using() takes 2 or 3 positional arguments (%zd given)", nargs);
        return NULL;
    }
    if (!PyUnicode_Check(args[0]) || (name = PyUnicode_AsUTF8(args[0])) == NULL) {
        PyErr_Clear();
        PyErr_SetString(PyExc_TypeError, "crc32_using(): the implementation must be a str");
        return NULL;
    }
    for (impl = IMPL_TABLE; impl <= IMPL_VPCLMUL; impl++) {
        if (strcmp(name, impl_names[impl]) == 0) {
            break;
        }
    }
    if (impl > IMPL_VPCLMUL) {
        PyErr_Format(PyExc_ValueError,
                     "crc32_using(): unknown implementation %R; known: 'table', "
                     "'pclmulqdq', 'avx512-vpclmulqdq'",
                     args[0]);
        return NULL;
    }
    if (impl > best) {
        PyErr_Format(PyExc_ValueError,
                     "crc32_using(): this CPU cannot run %R (the best it runs is '%s')",
                     args[0], impl_names[best]);
        return NULL;
    }
    return crc_call(impl, args + 1, nargs - 1, "crc32_using");
}

/* first_mismatch(data, tensors, base, wants, /): the index of the first tensor whose
   bytes data[t[0] - base : t[1] - base] have a CRC-32 other than wants[k] (None: not
   checked), or -1. `tensors` and `wants` are lists of one length, each tensor a tuple
   whose items 0 and 1 are ints (its offsets); one loop over a group of small tensors
   instead of a call per array (_serialize._arrays._check_group; plain twin:
   _check_all over the views). */
static PyObject *
crc32_first_mismatch(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    Py_buffer view;
    Py_ssize_t base, found = -1;
    Impl impl = best_impl();

    (void)module;
    if (nargs != 4 || !PyList_Check(args[1]) || !PyList_Check(args[3])) {
        PyErr_SetString(PyExc_TypeError,
                        "first_mismatch(data, tensors, base, wants): two lists");
        return NULL;
    }
    base = PyLong_AsSsize_t(args[2]);
    if (base == -1 && PyErr_Occurred()) {
        return NULL;
    }
    if (PyList_GET_SIZE(args[1]) != PyList_GET_SIZE(args[3])) {
        PyErr_SetString(PyExc_ValueError, "first_mismatch(): tensors and wants differ in length");
        return NULL;
    }
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0) {
        return NULL;
    }
    for (Py_ssize_t k = 0; k < PyList_GET_SIZE(args[1]); k++) {
        PyObject *t = PyList_GET_ITEM(args[1], k), *want = PyList_GET_ITEM(args[3], k);
        if (want == Py_None) {
            continue;
        }
        if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) < 2 || !PyLong_Check(want)) {
            PyErr_SetString(PyExc_TypeError,
                            "first_mismatch(): a tensor is a tuple (begin, end, ...), a want "
                            "an int or None");
            goto error;
        }
        Py_ssize_t a = PyLong_AsSsize_t(PyTuple_GET_ITEM(t, 0));
        Py_ssize_t b = PyErr_Occurred() ? 0 : PyLong_AsSsize_t(PyTuple_GET_ITEM(t, 1));
        int overflow = 0;
        long long w = PyErr_Occurred() ? 0 : PyLong_AsLongLongAndOverflow(want, &overflow);
        if (PyErr_Occurred()) {
            goto error;
        }
        if (a < base || b < a || b - base > view.len) {
            PyErr_SetString(PyExc_ValueError, "first_mismatch(): a tensor lies outside data");
            goto error;
        }
        uint32_t got = crc_run(impl, 0, (const unsigned char *)view.buf + (a - base),
                               (size_t)(b - a));
        if (overflow || w != (long long)got) {
            found = k;
            break;
        }
    }
    PyBuffer_Release(&view);
    return PyLong_FromSsize_t(found);
error:
    PyBuffer_Release(&view);
    return NULL;
}

static PyMethodDef crc32_methods[] = {
    {"crc32", (PyCFunction)(void (*)(void))crc32_crc32, METH_FASTCALL,
     PyDoc_STR("crc32(data, value=0, /)\n--\n\n"
               "The CRC-32 of a C-contiguous buffer, continuing from value: what\n"
               "zlib.crc32(data, value) returns.")},
    {"crc32_using", (PyCFunction)(void (*)(void))crc32_using, METH_FASTCALL,
     PyDoc_STR("crc32_using(implementation, data, value=0, /)\n--\n\n"
               "crc32 with a named implementation (for tests): 'table',\n"
               "'pclmulqdq' or 'avx512-vpclmulqdq'; ValueError if the CPU lacks it.")},
    {"first_mismatch", (PyCFunction)(void (*)(void))crc32_first_mismatch, METH_FASTCALL,
     PyDoc_STR("first_mismatch(data, tensors, base, wants, /)\n--\n\n"
               "The index of the first tensor (begin, end, ...) whose bytes\n"
               "data[begin - base:end - base] have a CRC-32 other than its want\n"
               "(None: not checked), or -1.")},
    {NULL, NULL, 0, NULL},
};

static int
crc32_exec(PyObject *module)
{
    Impl impl;
    PyObject *names;

#if CRC_X86
    __builtin_cpu_init();
#endif
    impl = best_impl();
    if (PyModule_AddStringConstant(module, "IMPLEMENTATION", impl_names[impl]) < 0) {
        return -1;
    }
    if (PyModule_AddObjectRef(module, "ACCELERATED", impl == IMPL_TABLE ? Py_False : Py_True) <
        0) {
        return -1;
    }
    names = Py_BuildValue("(sss)", impl_names[0], impl_names[1], impl_names[2]);
    if (names == NULL) {
        return -1;
    }
    if (PyModule_AddObject(module, "IMPLEMENTATIONS", names) < 0) {
        Py_DECREF(names);
        return -1;
    }
    return 0;
}

/* No state, no Python object in a C static: any interpreter; the work needs no GIL. */
static PyModuleDef_Slot crc32_slots[] = {
    {Py_mod_exec, crc32_exec},
#if PY_VERSION_HEX >= 0x030C0000
    {Py_mod_multiple_interpreters, Py_MOD_PER_INTERPRETER_GIL_SUPPORTED},
#endif
#if PY_VERSION_HEX >= 0x030D0000
    {Py_mod_gil, Py_MOD_GIL_NOT_USED},
#endif
    {0, NULL},
};

static struct PyModuleDef crc32_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "containers._crc32",
    .m_doc = PyDoc_STR("CRC-32 as zlib.crc32 computes it, by carry-less multiplication "
                       "(optional; see _serialize._format.crc32)."),
    .m_size = 0,
    .m_methods = crc32_methods,
    .m_slots = crc32_slots,
};

PyMODINIT_FUNC
PyInit__crc32(void)
{
    return PyModuleDef_Init(&crc32_module);
}
