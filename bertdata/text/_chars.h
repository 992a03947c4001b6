/* What the text stage's compiled passes (_scan.c, _markup.c, _tags.c) share: `re`'s \w, and
 * copying a str's code points out of its own kind.
 */

#ifndef BERTDATA_CHARS_H
#define BERTDATA_CHARS_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

/* `re`'s \w on str. */
static inline int word_char(Py_UCS4 c) { return Py_UNICODE_ISALNUM(c) || c == '_'; }

/* Copy text[start:end] to out + *len. */
static inline void copy_chars(Py_UCS4 *out, Py_ssize_t *len, int kind, const void *data, Py_ssize_t start,
                              Py_ssize_t end)
{
    for (Py_ssize_t i = start; i < end; i++)
        out[(*len)++] = PyUnicode_READ(kind, data, i);
}

#endif
