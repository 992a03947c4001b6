/* A text shard's lines stripped and joined in UTF-8, never made into str (`text_lines`), for
 * _wordpiece.c: the instance stage reads every shard so before it tokenizes it.
 */

#ifndef BERTDATA_LINES_H
#define BERTDATA_LINES_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

/* The length of a valid UTF-8 sequence at b[i] (b[i] not ASCII), 0 if invalid: what Python's strict
 * decoder accepts (no overlong forms, no surrogates, nothing past U+10FFFF). */
static Py_ssize_t utf8_sequence(const uint8_t *b, Py_ssize_t i, Py_ssize_t n)
{
    const uint8_t c = b[i];
    Py_ssize_t len = c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
    if (!len || i + len > n)
        return 0;
    const uint8_t d = b[i + 1];
    uint8_t lo = 0x80, hi = 0xBF;
    if (c == 0xE0)
        lo = 0xA0;
    else if (c == 0xED)
        hi = 0x9F;
    else if (c == 0xF0)
        lo = 0x90;
    else if (c == 0xF4)
        hi = 0x8F;
    if (d < lo || d > hi)
        return 0;
    for (Py_ssize_t k = 2; k < len; k++)
        if ((b[i + k] & 0xC0) != 0x80)
            return 0;
    return len;
}

/* The length of the character str.isspace() takes for white space at b[i] (0 if none), and of the one
 * ending at b[end] (exclusive), in valid UTF-8. */
static inline int ascii_white(uint8_t c) { return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20); }

static inline int white3(const uint8_t *p)
{
    return (p[0] == 0xE1 && p[1] == 0x9A && p[2] == 0x80)
        || (p[0] == 0xE2 && p[1] == 0x80 && (p[2] <= 0x8A || p[2] == 0xA8 || p[2] == 0xA9 || p[2] == 0xAF))
        || (p[0] == 0xE2 && p[1] == 0x81 && p[2] == 0x9F) || (p[0] == 0xE3 && p[1] == 0x80 && p[2] == 0x80);
}

static Py_ssize_t white_at(const uint8_t *b, Py_ssize_t i, Py_ssize_t end)
{
    if (ascii_white(b[i]))
        return 1;
    if (i + 2 <= end && b[i] == 0xC2 && (b[i + 1] == 0x85 || b[i + 1] == 0xA0))
        return 2;
    return i + 3 <= end && white3(b + i) ? 3 : 0;
}

static Py_ssize_t white_before(const uint8_t *b, Py_ssize_t start, Py_ssize_t end)
{
    if (ascii_white(b[end - 1]))
        return 1;
    if (end - 2 >= start && b[end - 2] == 0xC2 && (b[end - 1] == 0x85 || b[end - 1] == 0xA0))
        return 2;
    return end - 3 >= start && white3(b + end - 3) ? 3 : 0;
}

/* A block of a text shard (UTF-8, lines split at LF only) -> its lines stripped as str.strip()
 * strips them, the non-blank ones joined by LF, where each starts in that, and a byte per line, 1
 * for a blank one; None if the block is not valid UTF-8 (the caller decodes it, to raise or replace). */
static PyObject *fast_text_lines(PyObject *self, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"block", NULL};
    Py_buffer view;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "y*:text_lines", kwlist, &view))
        return NULL;
    const uint8_t *b = view.buf;
    const Py_ssize_t n = view.len;
    PyObject *result = NULL;
    Py_ssize_t lines = 1;
#if defined(__SSE2__)
    const __m128i newline = _mm_set1_epi8('\n');
#endif
    for (Py_ssize_t i = 0; i < n;) {
#if defined(__SSE2__)
        /* 16 bytes at a time up to the next that is not ASCII, which starts a sequence to check. */
        if (i + 16 <= n) {
            const __m128i v = _mm_loadu_si128((const __m128i *)(b + i));
            const unsigned high = (unsigned)_mm_movemask_epi8(v);
            const unsigned newlines = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(v, newline));
            if (!high) {
                lines += __builtin_popcount(newlines);
                i += 16;
                continue;
            }
            const int ascii = __builtin_ctz(high);
            lines += __builtin_popcount(newlines & ((1u << ascii) - 1));
            i += ascii;
        }
#endif
        if (b[i] < 0x80) {
            lines += b[i++] == '\n';
            continue;
        }
        const Py_ssize_t len = utf8_sequence(b, i, n);
        if (!len) {
            PyBuffer_Release(&view);
            Py_RETURN_NONE;
        }
        i += len;
    }
    uint8_t *joined = PyMem_Malloc(n + 1), *blank = PyMem_Malloc(lines);
    int64_t *starts = PyMem_Malloc(lines * sizeof(int64_t));
    if (!joined || !blank || !starts) {
        PyErr_NoMemory();
        goto done;
    }
    Py_ssize_t size = 0, kept = 0, line = 0;
    for (Py_ssize_t a = 0; a <= n; line++) {
        const uint8_t *eol = memchr(b + a, '\n', n - a);
        const Py_ssize_t end = eol ? eol - b : n;
        Py_ssize_t s = a, e = end, w;
        while (s < e && (w = white_at(b, s, e)))
            s += w;
        while (e > s && (w = white_before(b, s, e)))
            e -= w;
        blank[line] = s == e;
        if (s < e) {
            if (kept)
                joined[size++] = '\n';
            starts[kept++] = size;
            memcpy(joined + size, b + s, e - s);
            size += e - s;
        }
        a = end + 1;
    }
    result = Py_BuildValue("y#y#y#", joined, size, (const char *)starts, kept * (Py_ssize_t)sizeof(int64_t),
                           blank, lines);
done:
    PyMem_Free(joined);
    PyMem_Free(blank);
    PyMem_Free(starts);
    PyBuffer_Release(&view);
    return result;
}

#endif
