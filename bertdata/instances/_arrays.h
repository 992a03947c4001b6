/* Arrays through the buffer protocol, for the compiled loops of the instance stage (_engine.c,
 * _wordpiece.c): element kinds, checked conversion, and checked reads and writes.
 *
 * Plain CPython C API: arrays come in through the buffer protocol, so the module builds
 * without numpy headers and loads in microseconds, where a JIT costs about a second per
 * process. Every array's element type and shape are checked, every index that comes from
 * data is checked, and every value stored into a narrower integer is checked to fit, so bad
 * input raises a Python exception instead of corrupting memory or wrapping silently.
 */

#ifndef BERTDATA_ARRAYS_H
#define BERTDATA_ARRAYS_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* ---- arrays through the buffer protocol --------------------------------------------------- */

enum { K_BOOL, K_I8, K_U8, K_I16, K_U16, K_I32, K_U32, K_I64, K_U64 };
/* For `require`: any integer kind but uint64, whose upper half int64 arithmetic cannot hold. */
#define K_INT (-1)

static const char *const KIND_NAMES[] = {"bool", "int8", "uint8", "int16", "uint16", "int32",
                                         "uint32", "int64", "uint64"};
/* The values each kind holds (uint64 arrays are only ever written from int64 values). */
static const int64_t KIND_MIN[] = {0, INT8_MIN, 0, INT16_MIN, 0, INT32_MIN, 0, INT64_MIN, 0};
static const int64_t KIND_MAX[] = {1, INT8_MAX, UINT8_MAX, INT16_MAX, UINT16_MAX, INT32_MAX,
                                   UINT32_MAX, INT64_MAX, INT64_MAX};

typedef struct {
    const char *name; /* the argument's name, for error messages */
    Py_buffer view;
    char *data;
    Py_ssize_t len;  /* elements in all */
    Py_ssize_t rows; /* shape[0] (1 for a scalar) */
    Py_ssize_t cols; /* shape[1] (1 unless 2-d) */
    int kind;
} Arr;

static inline int kind_of(const Py_buffer *view, int *kind)
{
    const char *f = view->format ? view->format : "B";
    if (*f == '@' || *f == '=' || *f == (PY_LITTLE_ENDIAN ? '<' : '>'))
        f++;
    if (f[0] == '\0' || f[1] != '\0')
        return -1;
    int is_signed;
    if (f[0] == '?') {
        *kind = K_BOOL;
        return view->itemsize == 1 ? 0 : -1;
    }
    if (strchr("bhilqn", f[0]))
        is_signed = 1;
    else if (strchr("BHILQN", f[0]))
        is_signed = 0;
    else
        return -1;
    switch (view->itemsize) {
    case 1: *kind = is_signed ? K_I8 : K_U8; return 0;
    case 2: *kind = is_signed ? K_I16 : K_U16; return 0;
    case 4: *kind = is_signed ? K_I32 : K_U32; return 0;
    case 8: *kind = is_signed ? K_I64 : K_U64; return 0;
    }
    return -1;
}

static inline int arr_convert(PyObject *obj, Arr *a, int writable)
{
    if (obj == NULL) { /* parsing failed on a later argument: release this one */
        PyBuffer_Release(&a->view);
        return 1;
    }
    int flags = PyBUF_FORMAT | PyBUF_C_CONTIGUOUS | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(obj, &a->view, flags) < 0) {
        /* The exporter's message ("ndarray is not C-contiguous") does not say which argument. */
        if (!PyErr_ExceptionMatches(PyExc_ValueError) && !PyErr_ExceptionMatches(PyExc_TypeError)
            && !PyErr_ExceptionMatches(PyExc_BufferError))
            return 0;
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "%s must be a C-contiguous%s integer array, not %.100s",
                     a->name, writable ? ", writable" : "", Py_TYPE(obj)->tp_name);
        return 0;
    }
    if (kind_of(&a->view, &a->kind) < 0 || a->view.ndim > 2) {
        PyErr_Format(PyExc_TypeError, "%s must be an integer array of at most 2 dimensions, "
                     "not format %s with %d dimensions", a->name,
                     a->view.format ? a->view.format : "B", a->view.ndim);
        PyBuffer_Release(&a->view);
        return 0;
    }
    a->data = a->view.buf;
    a->len = a->view.len / a->view.itemsize;
    a->rows = a->view.ndim >= 1 ? a->view.shape[0] : 1;
    a->cols = a->view.ndim == 2 ? a->view.shape[1] : 1;
    return Py_CLEANUP_SUPPORTED;
}

static inline int conv_in(PyObject *obj, void *a) { return arr_convert(obj, a, 0); }
static inline int conv_out(PyObject *obj, void *a) { return arr_convert(obj, a, 1); }

static inline void release(Arr **arrays, int n)
{
    for (int i = 0; i < n; i++)
        PyBuffer_Release(&arrays[i]->view);
}

/* `kind` is a K_* or K_INT; a wrong element type is a TypeError, a wrong rank a ValueError. */
static inline int require(const Arr *a, int kind, int ndim)
{
    if (kind == K_INT ? a->kind == K_U64 : a->kind != kind) {
        PyErr_Format(PyExc_TypeError, "%s must be %s, not %s", a->name,
                     kind == K_INT ? "an integer array (uint64 does not fit int64)" : KIND_NAMES[kind],
                     KIND_NAMES[a->kind]);
        return -1;
    }
    if (a->view.ndim != ndim) {
        PyErr_Format(PyExc_ValueError, "%s must have %d dimension%s, not %d", a->name, ndim,
                     ndim == 1 ? "" : "s", a->view.ndim);
        return -1;
    }
    return 0;
}

static inline int64_t get(const Arr *a, Py_ssize_t i)
{
    switch (a->kind) {
    case K_BOOL: return ((const uint8_t *)a->data)[i] != 0;
    case K_I8: return ((const int8_t *)a->data)[i];
    case K_U8: return ((const uint8_t *)a->data)[i];
    case K_I16: return ((const int16_t *)a->data)[i];
    case K_U16: return ((const uint16_t *)a->data)[i];
    case K_I32: return ((const int32_t *)a->data)[i];
    case K_U32: return ((const uint32_t *)a->data)[i];
    case K_I64: return ((const int64_t *)a->data)[i];
    default: return (int64_t)((const uint64_t *)a->data)[i];
    }
}

/* a[lo:lo + n] into dst: one test of the kind for the run, not one per element. */
static inline void gather(const Arr *a, Py_ssize_t lo, Py_ssize_t n, int64_t *dst)
{
#define GATHER(type)                                      \
    do {                                                  \
        const type *src = (const type *)a->data + lo;     \
        for (Py_ssize_t k = 0; k < n; k++)                \
            dst[k] = (int64_t)src[k];                     \
    } while (0)
    switch (a->kind) {
    case K_BOOL:
        for (Py_ssize_t k = 0; k < n; k++)
            dst[k] = ((const uint8_t *)a->data)[lo + k] != 0;
        break;
    case K_I8: GATHER(int8_t); break;
    case K_U8: GATHER(uint8_t); break;
    case K_I16: GATHER(int16_t); break;
    case K_U16: GATHER(uint16_t); break;
    case K_I32: GATHER(int32_t); break;
    case K_U32: GATHER(uint32_t); break;
    case K_I64: GATHER(int64_t); break;
    default: GATHER(uint64_t); break;
    }
#undef GATHER
}

/* Stores a value the element type is known to hold. */
static inline void store(Arr *a, Py_ssize_t i, int64_t v)
{
    switch (a->kind) {
    case K_BOOL: ((uint8_t *)a->data)[i] = (uint8_t)v; break;
    case K_I8: ((int8_t *)a->data)[i] = (int8_t)v; break;
    case K_U8: ((uint8_t *)a->data)[i] = (uint8_t)v; break;
    case K_I16: ((int16_t *)a->data)[i] = (int16_t)v; break;
    case K_U16: ((uint16_t *)a->data)[i] = (uint16_t)v; break;
    case K_I32: ((int32_t *)a->data)[i] = (int32_t)v; break;
    case K_U32: ((uint32_t *)a->data)[i] = (uint32_t)v; break;
    case K_I64: ((int64_t *)a->data)[i] = v; break;
    default: ((uint64_t *)a->data)[i] = (uint64_t)v; break;
    }
}

static inline int fits(const Arr *a, int64_t v)
{
    return v >= KIND_MIN[a->kind] && v <= KIND_MAX[a->kind];
}

/* Stores v if the element type holds it, else returns -1 without setting an exception (the
 * caller may be running without the GIL) and the caller reports it with `overflow`. */
static inline int arr_put(Arr *a, Py_ssize_t i, int64_t v)
{
    if (!fits(a, v))
        return -1;
    store(a, i, v);
    return 0;
}

static inline int overflow(const Arr *a, int64_t v)
{
    PyErr_Format(PyExc_OverflowError, "%s: %lld does not fit its %s elements", a->name, (long long)v,
                 KIND_NAMES[a->kind]);
    return -1;
}

#endif
