/* The cleaner's compiled comment and tag passes (wikitext.py): comments removed, and HTML-like
 * tags dropped with their content or unwrapped, which it did with a Python loop, and a regex loop
 * and a Python callback per element. Plain CPython C API over the str's own code points;
 * _tags.pyi gives the signatures.
 */

#include "_chars.h"

static inline int ascii_alpha(Py_UCS4 c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

static inline int ascii_alnum(Py_UCS4 c) { return ascii_alpha(c) || (c >= '0' && c <= '9'); }

typedef struct {
    Py_ssize_t start, end;        /* the tag, '<' to '>' */
    int closing;                  /* "</name ...>" */
    Py_ssize_t name, name_end;    /* its name */
    Py_ssize_t attrs, attrs_end;  /* what follows the name, up to '>' */
} Tag;

/* wikitext's `<(/?)([a-zA-Z][a-zA-Z0-9]*)\b([^<>]*)>` matched at `at`, a '<'. */
static int match_tag(int kind, const void *data, Py_ssize_t n, Py_ssize_t at, Tag *tag)
{
    Py_ssize_t i = at + 1;
    tag->closing = i < n && PyUnicode_READ(kind, data, i) == '/';
    i += tag->closing;
    if (i >= n || !ascii_alpha(PyUnicode_READ(kind, data, i)))
        return 0;
    tag->name = i;
    while (i < n && ascii_alnum(PyUnicode_READ(kind, data, i)))
        i++;
    tag->name_end = i;
    if (i < n && word_char(PyUnicode_READ(kind, data, i)))
        return 0;
    tag->attrs = i;
    for (; i < n; i++) {
        Py_UCS4 c = PyUnicode_READ(kind, data, i);
        if (c == '<')
            return 0;
        if (c == '>') {
            tag->attrs_end = i;
            tag->start = at;
            tag->end = i + 1;
            return 1;
        }
    }
    return 0;
}

/* Whether text[from:to] holds `what` (ASCII). */
static int holds(int kind, const void *data, Py_ssize_t from, Py_ssize_t to, const char *what)
{
    Py_ssize_t len = (Py_ssize_t)strlen(what);
    for (Py_ssize_t i = from; i + len <= to; i++) {
        Py_ssize_t k = 0;
        while (k < len && PyUnicode_READ(kind, data, i + k) == (Py_UCS4)what[k])
            k++;
        if (k == len)
            return 1;
    }
    return 0;
}

static inline int tag_space(Py_UCS4 c) { return c == ' ' || c == '\t' || c == '\n' || c == '/'; }

/* Prose, not a tag: `a<b and c>d` has attributes but none with a value. */
static int prose_not_tag(int kind, const void *data, const Tag *tag)
{
    int filled = 0;
    for (Py_ssize_t i = tag->attrs; i < tag->attrs_end && !filled; i++)
        filled = !tag_space(PyUnicode_READ(kind, data, i));
    if (!filled)
        return 0;
    return !holds(kind, data, tag->attrs, tag->attrs_end, "=") || !tag_space(PyUnicode_READ(kind, data, tag->attrs));
}

/* The element ends itself: its attributes end with '/' (trailing whitespace aside). */
static int self_closing(int kind, const void *data, const Tag *tag)
{
    Py_ssize_t end = tag->attrs_end;
    while (end > tag->attrs && Py_UNICODE_ISSPACE(PyUnicode_READ(kind, data, end - 1)))
        end--;
    return end > tag->attrs && PyUnicode_READ(kind, data, end - 1) == '/';
}

/* Whether `c` matches the name's character `want` (ASCII, lower case) as `re` matches with
 * IGNORECASE: a letter's capital too, and for i, k and s the non-ASCII letters Unicode folds to
 * them (U+0130 and U+0131, the Kelvin sign U+212A, the long s U+017F). */
static inline int name_char_matches(Py_UCS4 c, char want)
{
    if (c == (Py_UCS4)want)
        return 1;
    if (want < 'a' || want > 'z')
        return 0;
    if (c == (Py_UCS4)(want - 'a' + 'A'))
        return 1;
    return (want == 'i' && (c == 0x130 || c == 0x131)) || (want == 'k' && c == 0x212A) ||
           (want == 's' && c == 0x17F);
}

/* The first `</name\s*>` (IGNORECASE; \s is str.isspace) at or after `from`: 1 with its bounds,
 * or 0 where there is none. */
static int find_closer(int kind, const void *data, Py_ssize_t n, Py_ssize_t from, const char *name,
                       Py_ssize_t *start, Py_ssize_t *end)
{
    const Py_ssize_t len = (Py_ssize_t)strlen(name);
    for (Py_ssize_t i = from; i + 2 + len < n; i++) {
        if (PyUnicode_READ(kind, data, i) != '<' || PyUnicode_READ(kind, data, i + 1) != '/')
            continue;
        Py_ssize_t k = 0;
        while (k < len && name_char_matches(PyUnicode_READ(kind, data, i + 2 + k), name[k]))
            k++;
        if (k < len)
            continue;
        Py_ssize_t j = i + 2 + len;
        while (j < n && Py_UNICODE_ISSPACE(PyUnicode_READ(kind, data, j)))
            j++;
        if (j < n && PyUnicode_READ(kind, data, j) == '>') {
            *start = i;
            *end = j + 1;
            return 1;
        }
    }
    return 0;
}

/* Whether the lower-cased name is in `set` (-1: error). */
static int named(PyObject *name, PyObject *set) { return PySet_Contains(set, name); }

static PyObject *fast_strip_tags(PyObject *self, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"text", "drop", "blocks", "keep", "breaks", NULL};
    PyObject *text, *drop, *blocks, *keep, *breaks;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "UO!O!O!O!:strip_tags", kwlist, &text, &PyFrozenSet_Type, &drop,
                                     &PyFrozenSet_Type, &blocks, &PyFrozenSet_Type, &keep, &PyFrozenSet_Type, &breaks))
        return NULL;
    Py_ssize_t n = PyUnicode_GET_LENGTH(text);
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    /* Where the next closing tag of each dropped element is (None: there is none left), so
     * that unclosed elements never rescan the rest of the page. */
    PyObject *next_close = PyDict_New();
    /* In the text's own kind: the result only drops characters and puts a space or two newlines
     * where a tag of three or more was, so it is no longer, and no wider. */
    char *out = PyMem_Malloc((n ? n : 1) * kind);
    if (!next_close || !out) {
        Py_XDECREF(next_close);
        PyMem_Free(out);
        return PyErr_NoMemory();
    }
    Py_ssize_t len = 0, pos = 0;
    for (Py_ssize_t at = 0; at < n; at++) {
        /* str's own search (memchr where it can) to the next '<': most characters are not one. */
        at = PyUnicode_FindChar(text, '<', at, n, 1);
        if (at < 0) {
            if (at == -2)
                goto fail;
            break;
        }
        Tag tag;
        if (!match_tag(kind, data, n, at, &tag) || prose_not_tag(kind, data, &tag))
            continue;
        PyObject *name = PyUnicode_Substring(text, tag.name, tag.name_end);
        PyObject *lower = name ? PyObject_CallMethod(name, "lower", NULL) : NULL;
        Py_XDECREF(name);
        if (!lower)
            goto fail;
        int dropped = named(lower, drop), kept = dropped ? 0 : named(lower, keep);
        if (dropped < 0 || kept < 0)
            goto fail_name;
        if (dropped) {
            copy_run(out, &len, kind, text, pos, tag.start);
            int block = named(lower, blocks);
            if (block < 0)
                goto fail_name;
            if (block && !holds(kind, data, tag.attrs, tag.attrs_end, "inline")) {
                PyUnicode_WRITE(kind, out, len++, '\n');
                PyUnicode_WRITE(kind, out, len++, '\n');
            }
            pos = tag.end;
            at = tag.end - 1;
            if (!tag.closing && !self_closing(kind, data, &tag)) {
                PyObject *cached = PyDict_GetItemWithError(next_close, lower);
                if (!cached && PyErr_Occurred())
                    goto fail_name;
                Py_ssize_t close_start = -1, close_end = -1;
                if (cached && cached != Py_None &&
                    !PyArg_ParseTuple(cached, "nn", &close_start, &close_end))
                    goto fail_name;
                if (!cached || (cached != Py_None && close_start < tag.end)) {
                    const char *ascii = PyUnicode_AsUTF8(lower); /* match_tag takes ASCII names only */
                    if (!ascii)
                        goto fail_name;
                    PyObject *found = find_closer(kind, data, n, tag.end, ascii, &close_start, &close_end)
                                          ? Py_BuildValue("nn", close_start, close_end) : Py_NewRef(Py_None);
                    if (!found || PyDict_SetItem(next_close, lower, found) < 0) {
                        Py_XDECREF(found);
                        goto fail_name;
                    }
                    cached = found;
                    Py_DECREF(found); /* the dict holds it */
                }
                if (cached != Py_None) {
                    pos = close_end;
                    at = close_end - 1;
                }
            }
        } else if (kept) {
            copy_run(out, &len, kind, text, pos, tag.start);
            int breaking = named(lower, breaks);
            if (breaking < 0)
                goto fail_name;
            if (PyUnicode_CompareWithASCIIString(lower, "br") == 0) {
                PyUnicode_WRITE(kind, out, len++, ' ');
            } else if (breaking) {
                PyUnicode_WRITE(kind, out, len++, '\n');
                PyUnicode_WRITE(kind, out, len++, '\n');
            }
            pos = tag.end;
            at = tag.end - 1;
        }
        Py_DECREF(lower);
        continue;
    fail_name:
        Py_DECREF(lower);
        goto fail;
    }
    copy_run(out, &len, kind, text, pos, n);
    PyObject *result = PyUnicode_FromKindAndData(kind, out, len);
    PyMem_Free(out);
    Py_DECREF(next_close);
    return result;
fail:
    PyMem_Free(out);
    Py_DECREF(next_close);
    return NULL;
}

/* text with every "<!--" ... "-->" removed, and an unclosed comment to the end: what MediaWiki
 * hides. The text itself when it has none. */
static PyObject *fast_remove_comments(PyObject *self, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"text", NULL};
    static const Stops OPEN = {{'<', '<', '<'}}, DASH = {{'-', '-', '-'}};
    PyObject *text;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "U:remove_comments", kwlist, &text))
        return NULL;
    const Py_ssize_t n = PyUnicode_GET_LENGTH(text);
    const int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    char *out = NULL;
    Py_ssize_t len = 0, copied = 0; /* text[:copied] is in out, or dropped */
    for (Py_ssize_t i = 0;;) {
        Py_ssize_t start = find_in(kind, data, i, n, &OPEN);
        if (start + 3 >= n)
            break;
        if (PyUnicode_READ(kind, data, start + 1) != '!' || PyUnicode_READ(kind, data, start + 2) != '-' ||
            PyUnicode_READ(kind, data, start + 3) != '-') {
            i = start + 1;
            continue;
        }
        if (!out && !(out = PyMem_Malloc(n * kind)))
            return PyErr_NoMemory();
        copy_run(out, &len, kind, text, copied, start);
        Py_ssize_t end = start + 4;
        for (;; end++) {
            end = find_in(kind, data, end, n, &DASH);
            if (end + 2 >= n || (PyUnicode_READ(kind, data, end + 1) == '-' && PyUnicode_READ(kind, data, end + 2) == '>'))
                break;
        }
        copied = i = end + 2 >= n ? n : end + 3;
    }
    if (!out)
        return Py_NewRef(text);
    copy_run(out, &len, kind, text, copied, n);
    PyObject *result = PyUnicode_FromKindAndData(kind, out, len);
    PyMem_Free(out);
    return result;
}

static PyMethodDef methods[] = {
    {"remove_comments", (PyCFunction)(void (*)(void))fast_remove_comments, METH_VARARGS | METH_KEYWORDS,
     "remove_comments(text)\n--\n\n"
     "text without its <!-- ... --> comments; an unclosed one runs to the end."},
    {"strip_tags", (PyCFunction)(void (*)(void))fast_strip_tags, METH_VARARGS | METH_KEYWORDS,
     "strip_tags(text, drop, blocks, keep, breaks)\n--\n\n"
     "text with its HTML-like tags handled: elements named in drop go with their content (up to\n"
     "the next closing tag </name>, in any case, if there is one), those in blocks leaving a\n"
     "paragraph break; tags named in keep go, their content stays, br leaving a space and\n"
     "those in breaks a paragraph break; anything else is prose."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "bertdata.text._tags", "The wikitext cleaner's compiled comment and tag passes.",
    -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__tags(void) { return PyModule_Create(&module); }
