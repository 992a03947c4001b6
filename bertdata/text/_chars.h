/* What the text stage's compiled passes (_scan.c, _markup.c, _tags.c, _prose.c) share: `re`'s \w, finding
 * characters and copying runs of a str's code points in its own width.
 */

#ifndef BERTDATA_CHARS_H
#define BERTDATA_CHARS_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

/* `re`'s \w on str. */
static inline int word_char(Py_UCS4 c) { return Py_UNICODE_ISALNUM(c) || c == '_'; }

/* The first character of text[i:n] that `table` (indexed by ASCII code) holds, n if none: a loop
 * of the str's own width, not a switch on its kind per character. */
static inline Py_ssize_t find_in(int kind, const void *data, Py_ssize_t i, Py_ssize_t n, const unsigned char table[128])
{
    switch (kind) {
    case PyUnicode_1BYTE_KIND: {
        const Py_UCS1 *p = data;
        while (i < n && !(p[i] < 128 && table[p[i]]))
            i++;
        return i;
    }
    case PyUnicode_2BYTE_KIND: {
        const Py_UCS2 *p = data;
        while (i < n && !(p[i] < 128 && table[p[i]]))
            i++;
        return i;
    }
    default: {
        const Py_UCS4 *p = data;
        while (i < n && !(p[i] < 128 && table[p[i]]))
            i++;
        return i;
    }
    }
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
