/* What the text stage's compiled passes (_scan.c, _markup.c, _tags.c, _prose.c, _spans.c) share: `re`'s \w,
 * finding characters and lines, copying runs of a str's code points in its own width, growing a list.
 */

#ifndef BERTDATA_CHARS_H
#define BERTDATA_CHARS_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

/* `re`'s \w on str. */
static inline int word_char(Py_UCS4 c) { return Py_UNICODE_ISALNUM(c) || c == '_'; }

/* The ASCII characters a search stops at: up to three (repeat one to name fewer). */
typedef struct {
    unsigned char c[3];
} Stops;

static inline int is_stop(const Stops *s, Py_UCS4 c) { return c == s->c[0] || c == s->c[1] || c == s->c[2]; }

/* The first character of text[i:n] that `stops` names, n if none: a loop of the str's own width,
 * not a switch on its kind per character, comparing a vector of characters at a time (16, 8 or 4:
 * SSE2, which every x86-64 has), as the characters sought come a few times a line at most. */
static inline Py_ssize_t find_in(int kind, const void *data, Py_ssize_t i, Py_ssize_t n, const Stops *s)
{
    switch (kind) {
    case PyUnicode_1BYTE_KIND: {
        const Py_UCS1 *p = data;
#if defined(__SSE2__)
        const __m128i a = _mm_set1_epi8((char)s->c[0]), b = _mm_set1_epi8((char)s->c[1]),
                      c = _mm_set1_epi8((char)s->c[2]);
        for (; i + 16 <= n; i += 16) {
            const __m128i v = _mm_loadu_si128((const __m128i *)(p + i));
            const int hit = _mm_movemask_epi8(
                _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, a), _mm_cmpeq_epi8(v, b)), _mm_cmpeq_epi8(v, c)));
            if (hit)
                return i + __builtin_ctz((unsigned)hit);
        }
#endif
        while (i < n && !is_stop(s, p[i]))
            i++;
        return i;
    }
    case PyUnicode_2BYTE_KIND: {
        const Py_UCS2 *p = data;
#if defined(__SSE2__)
        const __m128i a = _mm_set1_epi16((short)s->c[0]), b = _mm_set1_epi16((short)s->c[1]),
                      c = _mm_set1_epi16((short)s->c[2]);
        for (; i + 8 <= n; i += 8) {
            const __m128i v = _mm_loadu_si128((const __m128i *)(p + i));
            const int hit = _mm_movemask_epi8(
                _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi16(v, a), _mm_cmpeq_epi16(v, b)), _mm_cmpeq_epi16(v, c)));
            if (hit)
                return i + (__builtin_ctz((unsigned)hit) >> 1);
        }
#endif
        while (i < n && !is_stop(s, p[i]))
            i++;
        return i;
    }
    default: {
        const Py_UCS4 *p = data;
#if defined(__SSE2__)
        const __m128i a = _mm_set1_epi32(s->c[0]), b = _mm_set1_epi32(s->c[1]), c = _mm_set1_epi32(s->c[2]);
        for (; i + 4 <= n; i += 4) {
            const __m128i v = _mm_loadu_si128((const __m128i *)(p + i));
            const int hit = _mm_movemask_epi8(
                _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi32(v, a), _mm_cmpeq_epi32(v, b)), _mm_cmpeq_epi32(v, c)));
            if (hit)
                return i + (__builtin_ctz((unsigned)hit) >> 2);
        }
#endif
        while (i < n && !is_stop(s, p[i]))
            i++;
        return i;
    }
    }
}

/* Append `item` (a new reference, NULL on error) to *list, or clear *list on failure. */
static inline void append_new(PyObject **list, PyObject *item)
{
    if (!item || PyList_Append(*list, item) < 0)
        Py_CLEAR(*list);
    Py_XDECREF(item);
}

/* Where the line (split at '\n' only) that starts at `line` ends: its newline, or n; -2 on error. */
static inline Py_ssize_t line_end(PyObject *text, Py_ssize_t line, Py_ssize_t n)
{
    const Py_ssize_t eol = PyUnicode_FindChar(text, '\n', line, n, 1);
    return eol == -1 ? n : eol;
}

/* text[start:end] to out + *len (characters), out being of `kind`, no narrower than text's. */
static inline void copy_run(char *out, Py_ssize_t *len, int kind, PyObject *text, Py_ssize_t start, Py_ssize_t end)
{
    const int from = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    if (from == kind)
        memcpy(out + *len * kind, (const char *)data + start * kind, (end - start) * kind);
    else
        for (Py_ssize_t i = start; i < end; i++)
            PyUnicode_WRITE(kind, out, *len + i - start, PyUnicode_READ(from, data, i));
    *len += end - start;
}

#endif
