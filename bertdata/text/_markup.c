/* The cleaner's compiled markup passes (wikitext.py, templates.py): the templates' brace-run
 * matching and name check, and plain links, which it resolved with a regex and a Python
 * callback each (tags are _tags.c's). Plain CPython C API over the str's own code points;
 * _markup.pyi gives the signatures.
 */

#include "_chars.h"

/* ---- links ----------------------------------------------------------------------------------- */

/* Where "[[" next starts at or after `from`, or -1 (-2: error); each '[' found by str's own search. */
static Py_ssize_t find_open(PyObject *text, int kind, const void *data, Py_ssize_t n, Py_ssize_t from)
{
    for (Py_ssize_t i = from; i + 1 < n; i++) {
        i = PyUnicode_FindChar(text, '[', i, n - 1, 1);
        if (i < 0 || PyUnicode_READ(kind, data, i + 1) == '[')
            return i;
    }
    return -1;
}

/* Narrow [*start, *end) past the whitespace str.strip() removes. */
static void strip(int kind, const void *data, Py_ssize_t *start, Py_ssize_t *end)
{
    while (*start < *end && Py_UNICODE_ISSPACE(PyUnicode_READ(kind, data, *start)))
        (*start)++;
    while (*end > *start && Py_UNICODE_ISSPACE(PyUnicode_READ(kind, data, *end - 1)))
        (*end)--;
}

/* The text wikitext._link_text gives for the link whose inside is text[start:end], when it can be
 * told without it: a target without ':' (no namespace, no interlanguage prefix) and, after a '|',
 * a label that is not empty (no pipe trick). Sets [*from, *to) and returns 1, or returns 0. */
static int plain_link(int kind, const void *data, Py_ssize_t start, Py_ssize_t end, Py_ssize_t *from,
                      Py_ssize_t *to)
{
    Py_ssize_t bar = -1;
    for (Py_ssize_t i = start; i < end; i++) {
        Py_UCS4 c = PyUnicode_READ(kind, data, i);
        if (c == '|') {
            bar = i;
            break;
        }
        if (c == ':')
            return 0;
    }
    if (bar >= 0) { /* the label, which may hold more bars */
        *from = bar + 1;
        *to = end;
        strip(kind, data, from, to);
        return *from < *to;
    }
    *from = start;
    *to = end;
    strip(kind, data, from, to);
    while (*from < *to && PyUnicode_READ(kind, data, *from) == '#')
        (*from)++;
    return 1;
}

/* wikitext's `_SIMPLE_LINK.sub(lambda m: link_text(m.group(1)), text)`: every `[[...]]` with no
 * bracket inside, left to right, replaced by its text; `link_text` is called only for the links
 * `plain_link` cannot tell. */
static PyObject *fast_resolve_simple_links(PyObject *self, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"text", "link_text", NULL};
    PyObject *text, *link_text;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "UO:resolve_simple_links", kwlist, &text, &link_text))
        return NULL;
    Py_ssize_t n = PyUnicode_GET_LENGTH(text);
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    Py_ssize_t open = find_open(text, kind, data, n, 0);
    if (open < 0)
        return open == -2 ? NULL : Py_NewRef(text);
    /* A link's text is a part of its inside (link_text's too, checked below): the output is
     * never longer than the input, nor wider, so it is made in the text's kind. */
    char *out = PyMem_Malloc((n ? n : 1) * kind);
    if (!out)
        return PyErr_NoMemory();
    Py_ssize_t len = 0, pos = 0;
    while (open >= 0) {
        Py_ssize_t close = open + 2;
        while (close < n) {
            Py_UCS4 c = PyUnicode_READ(kind, data, close);
            if (c == '[' || c == ']')
                break;
            close++;
        }
        if (close + 1 >= n || PyUnicode_READ(kind, data, close) != ']' || PyUnicode_READ(kind, data, close + 1) != ']') {
            open = find_open(text, kind, data, n, open + 1);
            continue;
        }
        copy_run(out, &len, kind, text, pos, open);
        Py_ssize_t from, to;
        if (plain_link(kind, data, open + 2, close, &from, &to)) {
            copy_run(out, &len, kind, text, from, to);
        } else {
            PyObject *inner = PyUnicode_Substring(text, open + 2, close);
            PyObject *shown = inner ? PyObject_CallOneArg(link_text, inner) : NULL;
            Py_XDECREF(inner);
            if (shown && (!PyUnicode_Check(shown) || PyUnicode_GET_LENGTH(shown) > close - open
                          || PyUnicode_KIND(shown) > kind)) {
                PyErr_SetString(PyExc_ValueError, "link_text must return a str no longer than the link, of no wider characters");
                Py_CLEAR(shown);
            }
            if (!shown) {
                PyMem_Free(out);
                return NULL;
            }
            copy_run(out, &len, kind, shown, 0, PyUnicode_GET_LENGTH(shown));
            Py_DECREF(shown);
        }
        pos = close + 2;
        open = find_open(text, kind, data, n, pos);
    }
    copy_run(out, &len, kind, text, pos, n);
    PyObject *result = open == -2 ? NULL : PyUnicode_FromKindAndData(kind, out, len);
    PyMem_Free(out);
    return result;
}

/* ---- templates -------------------------------------------------------------------------- */

typedef struct {
    Py_ssize_t start; /* of its opening run */
    Py_ssize_t open;  /* braces of that run still open */
    PyObject *children; /* the spans of its closed children */
} Open;

/* The name templates.py expands the template text[start:end] by -- stripped, lower-cased, '_'
 * read as ' ' -- when it is one of `names` or starts with `prefix`; NULL otherwise (with an
 * error set only on failure). A `{{{parameter}}}` and a name longer than `max_name` have none. */
static PyObject *expandable_name(PyObject *text, int kind, const void *data, Py_ssize_t start, Py_ssize_t end,
                                 PyObject *names, PyObject *prefix, Py_ssize_t max_name)
{
    if (PyUnicode_READ(kind, data, start + 2) == '{')
        return NULL;
    Py_ssize_t head_end = end - 2 < start + 2 + max_name ? end - 2 : start + 2 + max_name;
    Py_ssize_t bar = -1;
    for (Py_ssize_t i = start + 2; i < head_end && bar < 0; i++)
        if (PyUnicode_READ(kind, data, i) == '|')
            bar = i;
    if (bar < 0 && head_end < end - 2)
        return NULL;
    Py_ssize_t from = start + 2, to = bar >= 0 ? bar : head_end;
    strip(kind, data, &from, &to);
    PyObject *raw = PyUnicode_Substring(text, from, to);
    if (!raw)
        return NULL;
    PyObject *lowered = PyObject_CallMethod(raw, "lower", NULL);
    Py_DECREF(raw);
    if (!lowered)
        return NULL;
    PyObject *name = PyObject_CallMethod(lowered, "replace", "ss", "_", " ");
    Py_DECREF(lowered);
    if (!name)
        return NULL;
    int found = PySet_Contains(names, name);
    if (found == 0)
        found = PyUnicode_Tailmatch(name, prefix, 0, PY_SSIZE_T_MAX, -1) > 0;
    if (found > 0)
        return name;
    Py_DECREF(name);
    return NULL;
}

/* templates.py's spans of `text`: MediaWiki's brace-run matching. */
static PyObject *fast_template_spans(PyObject *self, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"text", "names", "prefix", "max_name", "max_depth", "render", NULL};
    PyObject *text, *names, *prefix, *render;
    Py_ssize_t max_name, max_depth;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "UO!UnnO:template_spans", kwlist, &text, &PyFrozenSet_Type,
                                     &names, &prefix, &max_name, &max_depth, &render))
        return NULL;
    if (max_name < 0) {
        PyErr_SetString(PyExc_ValueError, "template_spans: max_name must be zero or more");
        return NULL;
    }
    Py_ssize_t n = PyUnicode_GET_LENGTH(text);
    if (max_name > n) /* no name is longer than the text: start + 2 + max_name cannot wrap */
        max_name = n;
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    PyObject *spans = PyList_New(0);
    Open *stack = NULL;
    Py_ssize_t depth = 0, capacity = 0;
    if (!spans)
        return NULL;
    static const Stops BRACES = {{'{', '}', '}'}};
    for (Py_ssize_t i = find_in(kind, data, 0, n, &BRACES); i < n; i = find_in(kind, data, i, n, &BRACES)) {
        const Py_UCS4 c = PyUnicode_READ(kind, data, i);
        Py_ssize_t j = i + 1;
        while (j < n && PyUnicode_READ(kind, data, j) == c)
            j++;
        Py_ssize_t run = j - i, pos = i;
        i = j;
        if (run < 2)
            continue;
        if (c == '{') {
            if (depth == capacity) {
                Py_ssize_t grown = capacity ? 2 * capacity : 16;
                Open *more = PyMem_Realloc(stack, grown * sizeof(Open));
                if (!more) {
                    PyErr_NoMemory();
                    goto fail;
                }
                stack = more;
                capacity = grown;
            }
            stack[depth].children = PyList_New(0);
            if (!stack[depth].children)
                goto fail;
            stack[depth].start = pos;
            stack[depth++].open = run;
            continue;
        }
        while (run >= 2 && depth) {
            Open *top = &stack[depth - 1];
            Py_ssize_t take = top->open >= 3 && run >= 3 ? 3 : 2;
            top->open -= take;
            run -= take;
            pos += take;
            if (top->open >= 2)
                continue;
            Open closed = *top;
            depth--;
            PyObject *shown = NULL;
            if (depth < max_depth) {
                PyObject *name = expandable_name(text, kind, data, closed.start, pos, names, prefix, max_name);
                if (name) {
                    shown = PyObject_CallFunction(render, "OnnO", name, closed.start, pos, closed.children);
                    Py_DECREF(name);
                }
                if (PyErr_Occurred()) {
                    Py_DECREF(closed.children);
                    goto fail;
                }
            }
            Py_DECREF(closed.children);
            PyObject *span = Py_BuildValue("(nnO)", closed.start, pos, shown ? shown : Py_None);
            Py_XDECREF(shown);
            if (!span || PyList_Append(depth ? stack[depth - 1].children : spans, span) < 0) {
                Py_XDECREF(span);
                goto fail;
            }
            Py_DECREF(span);
        }
        if (run >= 2) { /* closing braces with nothing open: stray markup, never prose */
            PyObject *span = Py_BuildValue("(nnO)", pos, j, Py_None);
            if (!span || PyList_Append(spans, span) < 0) {
                Py_XDECREF(span);
                goto fail;
            }
            Py_DECREF(span);
        }
    }
    /* An unclosed template swallows the rest of its paragraph; its closed children go in too,
     * for splice to weigh against it. */
    Py_ssize_t blank_after = -1;
    for (Py_ssize_t k = 0; k < depth; k++) {
        Py_ssize_t start = stack[k].start;
        if (PyList_SetSlice(spans, PY_SSIZE_T_MAX, PY_SSIZE_T_MAX, stack[k].children) < 0)
            goto fail;
        if (start < blank_after)
            continue;
        blank_after = n;
        for (Py_ssize_t i = start; i + 1 < n; i++)
            if (PyUnicode_READ(kind, data, i) == '\n' && PyUnicode_READ(kind, data, i + 1) == '\n') {
                blank_after = i;
                break;
            }
        PyObject *span = Py_BuildValue("(nnO)", start, blank_after, Py_None);
        if (!span || PyList_Append(spans, span) < 0) {
            Py_XDECREF(span);
            goto fail;
        }
        Py_DECREF(span);
    }
    for (Py_ssize_t k = 0; k < depth; k++)
        Py_DECREF(stack[k].children);
    PyMem_Free(stack);
    return spans;
fail:
    for (Py_ssize_t k = 0; k < depth; k++)
        Py_DECREF(stack[k].children);
    PyMem_Free(stack);
    Py_DECREF(spans);
    return NULL;
}

/* ---- lines that start with a mark: headings and tables -------------------------------------- */

/* Past the characters `indent` (indexed by ASCII code) holds from i, at most to n. */
static inline Py_ssize_t past_indent(int kind, const void *data, Py_ssize_t i, Py_ssize_t n,
                                     const unsigned char indent[128])
{
    Py_UCS4 c;
    while (i < n && (c = PyUnicode_READ(kind, data, i)) < 128 && indent[c])
        i++;
    return i;
}

/* Where the line after the one holding i starts: -1 if none, -2 on error. */
static inline Py_ssize_t next_line(PyObject *text, Py_ssize_t i, Py_ssize_t n)
{
    const Py_ssize_t eol = i < n ? PyUnicode_FindChar(text, '\n', i, n, 1) : -1;
    return eol < 0 ? eol : eol + 1;
}

/* Where each line starts whose first characters but spaces and tabs are "==": the only lines a
 * heading pattern (`^[ \t]*==...`, MULTILINE) can match at. */
static PyObject *fast_heading_lines(PyObject *self, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"text", NULL};
    PyObject *text;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "U:heading_lines", kwlist, &text))
        return NULL;
    const Py_ssize_t n = PyUnicode_GET_LENGTH(text);
    const int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    static const unsigned char INDENT[128] = {[' '] = 1, ['\t'] = 1};
    PyObject *lines = PyList_New(0);
    Py_ssize_t line = 0;
    for (Py_ssize_t i; lines && line >= 0 && line < n; line = next_line(text, i, n)) {
        i = past_indent(kind, data, line, n, INDENT);
        if (i + 1 < n && PyUnicode_READ(kind, data, i) == '=' && PyUnicode_READ(kind, data, i + 1) == '=')
            append_new(&lines, PyLong_FromSsize_t(line));
    }
    if (line == -2)
        Py_CLEAR(lines);
    return lines;
}

/* (line start, mark, mark end) for each line whose first characters but spaces, tabs and colons are
 * a table's "{|" or "|}": where `^[ \t:]*(\{\||\|\})` with MULTILINE matches. */
static PyObject *fast_table_lines(PyObject *self, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"text", NULL};
    PyObject *text;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "U:table_lines", kwlist, &text))
        return NULL;
    const Py_ssize_t n = PyUnicode_GET_LENGTH(text);
    const int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    static const unsigned char INDENT[128] = {[' '] = 1, ['\t'] = 1, [':'] = 1};
    PyObject *marks = PyList_New(0);
    Py_ssize_t line = 0;
    for (Py_ssize_t i; marks && line >= 0 && line < n; line = next_line(text, i, n)) {
        i = past_indent(kind, data, line, n, INDENT);
        if (i + 1 < n) {
            const Py_UCS4 a = PyUnicode_READ(kind, data, i), b = PyUnicode_READ(kind, data, i + 1);
            const char *mark = a == '{' && b == '|' ? "{|" : a == '|' && b == '}' ? "|}" : NULL;
            if (mark)
                append_new(&marks, Py_BuildValue("(nsn)", line, mark, i + 2));
        }
    }
    if (line == -2)
        Py_CLEAR(marks);
    return marks;
}

/* Whether needle occurs in text: `needle in text`, found by a vector search for its first
 * character, which is quicker than str's own search where that character is rare. */
static PyObject *fast_contains(PyObject *self, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"text", "needle", NULL};
    PyObject *text, *needle;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "UU:contains", kwlist, &text, &needle))
        return NULL;
    const Py_ssize_t n = PyUnicode_GET_LENGTH(text), m = PyUnicode_GET_LENGTH(needle);
    if (!m || !PyUnicode_IS_ASCII(needle))
        return PyErr_Format(PyExc_ValueError, "needle: %R is not a non-empty ASCII str", needle);
    const int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    const Py_UCS1 *p = PyUnicode_1BYTE_DATA(needle);
    const Stops first = {{p[0], p[0], p[0]}};
    for (Py_ssize_t i = find_in(kind, data, 0, n, &first); i + m <= n; i = find_in(kind, data, i + 1, n, &first)) {
        Py_ssize_t k = 1;
        while (k < m && PyUnicode_READ(kind, data, i + k) == p[k])
            k++;
        if (k == m)
            Py_RETURN_TRUE;
    }
    Py_RETURN_FALSE;
}

/* ---- named templates ----------------------------------------------------------------- */

/* Whether text character c matches the lower-case ASCII character p as `re` matches a pattern
 * with IGNORECASE: either case, and the other characters Unicode folds to i, k and s. */
static inline int folds_to(Py_UCS4 c, char p)
{
    if (p < 'a' || p > 'z')
        return c == (Py_UCS4)p;
    if (c < 128)
        return (c | 0x20) == (Py_UCS4)p;
    return (p == 'i' && (c == 0x130 || c == 0x131)) || (p == 'k' && c == 0x212A) || (p == 's' && c == 0x17F);
}

/* Whether one of `names` starts at text[i], then any whitespace, then '|' or "}}". */
static int named_at(int kind, const void *data, Py_ssize_t i, Py_ssize_t n, PyObject *names)
{
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(names); k++) {
        const char *name = PyUnicode_AsUTF8(PyTuple_GET_ITEM(names, k));
        Py_ssize_t j = i;
        for (; *name && j < n && folds_to(PyUnicode_READ(kind, data, j), *name); name++)
            j++;
        if (*name)
            continue;
        while (j < n && Py_UNICODE_ISSPACE(PyUnicode_READ(kind, data, j)))
            j++;
        if (j < n && (PyUnicode_READ(kind, data, j) == '|' ||
                      (PyUnicode_READ(kind, data, j) == '}' && j + 1 < n && PyUnicode_READ(kind, data, j + 1) == '}')))
            return 1;
    }
    return 0;
}

/* Whether text calls one of the templates `names`: what
 * `re.search(r"\{\{\s*(?:name|...)\s*(?:\||\}\})", text, re.IGNORECASE)` finds. */
static PyObject *fast_has_template(PyObject *self, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"text", "names", NULL};
    static const Stops BRACE = {{'{', '{', '{'}};
    PyObject *text, *names;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "UO!:has_template", kwlist, &text, &PyTuple_Type, &names))
        return NULL;
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(names); k++) {
        PyObject *name = PyTuple_GET_ITEM(names, k);
        if (!PyUnicode_Check(name) || !PyUnicode_IS_ASCII(name) || !PyUnicode_GET_LENGTH(name))
            return PyErr_Format(PyExc_ValueError, "names: %R is not a non-empty ASCII str", name);
        for (Py_ssize_t j = 0; j < PyUnicode_GET_LENGTH(name); j++)
            if (Py_UNICODE_ISUPPER(PyUnicode_READ_CHAR(name, j)))
                return PyErr_Format(PyExc_ValueError, "names: %R is not lower case", name);
    }
    const Py_ssize_t n = PyUnicode_GET_LENGTH(text);
    const int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    for (Py_ssize_t i = find_in(kind, data, 0, n, &BRACE); i + 1 < n; i = find_in(kind, data, i + 1, n, &BRACE)) {
        if (PyUnicode_READ(kind, data, i + 1) != '{')
            continue;
        Py_ssize_t j = i + 2;
        while (j < n && Py_UNICODE_ISSPACE(PyUnicode_READ(kind, data, j)))
            j++;
        if (named_at(kind, data, j, n, names))
            Py_RETURN_TRUE;
    }
    Py_RETURN_FALSE;
}

static PyMethodDef methods[] = {
    {"contains", (PyCFunction)(void (*)(void))fast_contains, METH_VARARGS | METH_KEYWORDS,
     "contains(text, needle)\n--\n\n"
     "needle in text, for an ASCII needle whose first character is rare in text."},
    {"has_template", (PyCFunction)(void (*)(void))fast_has_template, METH_VARARGS | METH_KEYWORDS,
     "has_template(text, names)\n--\n\n"
     "Whether text calls a template of names (lower-case ASCII), as re.search of\n"
     "'\\{\\{\\s*(?:names)\\s*(?:\\||\\}\\})' with IGNORECASE finds."},
    {"table_lines", (PyCFunction)(void (*)(void))fast_table_lines, METH_VARARGS | METH_KEYWORDS,
     "table_lines(text)\n--\n\n"
     "(line start, mark, mark end) for each line of text whose first characters but spaces, tabs\n"
     "and colons are '{|' or '|}'."},
    {"heading_lines", (PyCFunction)(void (*)(void))fast_heading_lines, METH_VARARGS | METH_KEYWORDS,
     "heading_lines(text)\n--\n\n"
     "Where each line of text starts whose first characters but spaces and tabs are \"==\"."},
    {"template_spans", (PyCFunction)(void (*)(void))fast_template_spans, METH_VARARGS | METH_KEYWORDS,
     "template_spans(text, names, prefix, max_name, max_depth, render)\n--\n\n"
     "The spans (start, end, shown) of text's templates for splice, matched as MediaWiki matches\n"
     "brace runs; render(name, start, end, children) gives what a closed template within max_depth\n"
     "shows when its name is one of names or starts with prefix."},
    {"resolve_simple_links", (PyCFunction)(void (*)(void))fast_resolve_simple_links, METH_VARARGS | METH_KEYWORDS,
     "resolve_simple_links(text, link_text)\n--\n\n"
     "Every [[...]] of text with no bracket inside, left to right, replaced by its text: the label\n"
     "after a '|', else the target; link_text(inside) gives the text of a link whose target holds\n"
     "':' or whose label is empty."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "bertdata.text._markup",
    "Compiled markup passes of the wikitext cleaner: templates and plain links.",
    -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__markup(void) { return PyModule_Create(&module); }
