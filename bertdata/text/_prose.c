/* The cleaner's last tidying of its prose (wikitext.py), which took it ten regex and replace
 * passes, and the lines it drops as not prose. Plain CPython C API over the str's own code
 * points; _prose.pyi gives the signatures.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>

/* Removed from prose: zero-width spaces and joiners, directional marks, soft hyphens, BOMs. */
static inline int invisible(Py_UCS4 c)
{
    return (c >= 0x200B && c <= 0x200F) || c == 0x00AD || c == 0xFEFF;
}

/* A space: ' ', tab, CR, form feed, vertical tab, no-break and typographic spaces. */
static inline int blank(Py_UCS4 c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v' || c == 0x00A0 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x202F || c == 0x205F || c == 0x3000;
}

/* A separator that a removed template or reference leaves stuck inside brackets. */
static inline int separator(Py_UCS4 c) { return c == ' ' || c == ',' || c == ';' || c == ':'; }

/* What an empty pair of brackets may still hold: `\((?: ?[,;:.\u2013\u2014-])* ?\)`. */
static inline int leftover(Py_UCS4 c)
{
    return c == ',' || c == ';' || c == ':' || c == '.' || c == 0x2013 || c == 0x2014 || c == '-';
}

/* Invisible characters go, then every run of spaces becomes one ' ', which goes too at either
 * end of the text or of a line. */
static Py_ssize_t squeeze(const Py_UCS4 *in, Py_ssize_t n, Py_UCS4 *out)
{
    Py_ssize_t len = 0;
    int pending = 0; /* a run of spaces since the last character written */
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_UCS4 c = in[i];
        if (invisible(c))
            continue;
        if (blank(c)) {
            pending = 1;
            continue;
        }
        if (pending && len && c != '\n' && out[len - 1] != '\n')
            out[len++] = ' ';
        pending = 0;
        out[len++] = c;
    }
    return len;
}

/* Separators go after each '(' and before each ')'. */
static Py_ssize_t trim_brackets(const Py_UCS4 *in, Py_ssize_t n, Py_UCS4 *out)
{
    Py_ssize_t len = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_UCS4 c = in[i];
        if (c == ')')
            while (len && separator(out[len - 1]))
                len--;
        out[len++] = c;
        if (c == '(')
            while (i + 1 < n && separator(in[i + 1]))
                i++;
    }
    return len;
}

/* Brackets holding nothing but leftovers, single spaces between them, go. */
static Py_ssize_t drop_empty_brackets(const Py_UCS4 *in, Py_ssize_t n, Py_UCS4 *out)
{
    Py_ssize_t len = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (in[i] == '(') {
            Py_ssize_t j = i + 1;
            while (j < n && (leftover(in[j]) || (in[j] == ' ' && in[j - 1] != ' ')))
                j++;
            if (j < n && in[j] == ')') {
                i = j;
                continue;
            }
        }
        out[len++] = in[i];
    }
    return len;
}

/* A space before ',', ';', ':', '!', '?', ')', ']' or a '.' that is not the first of "..". */
static Py_ssize_t drop_spaces_before_punctuation(const Py_UCS4 *in, Py_ssize_t n, Py_UCS4 *out)
{
    Py_ssize_t len = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (in[i] == ' ' && i + 1 < n) {
            Py_UCS4 next = in[i + 1];
            if (next == ',' || next == ';' || next == ':' || next == '!' || next == '?' || next == ')' ||
                next == ']' || (next == '.' && !(i + 2 < n && in[i + 2] == '.')))
                continue;
        }
        out[len++] = in[i];
    }
    return len;
}

/* "[]" goes (left to right, as str.replace), then each run of commas becomes one. */
static Py_ssize_t drop_empty_links_and_commas(const Py_UCS4 *in, Py_ssize_t n, Py_UCS4 *out)
{
    Py_ssize_t len = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (in[i] == '[' && i + 1 < n && in[i + 1] == ']') {
            i++;
            continue;
        }
        out[len++] = in[i];
    }
    Py_ssize_t kept = 0;
    for (Py_ssize_t i = 0; i < len; i++)
        if (!(out[i] == ',' && kept && out[kept - 1] == ','))
            out[kept++] = out[i];
    return kept;
}

/* A line that is not prose: a heading (`[ \t]*=.*=[ \t]*`), a rule (`[ \t]*-{4,}.*`), or a table row
 * or list item left outside any table (`[ \t]*[|!*#:;].*`). */
static int junk_line(int kind, const void *data, Py_ssize_t line, Py_ssize_t eol)
{
    Py_ssize_t p = line;
    while (p < eol && (PyUnicode_READ(kind, data, p) == ' ' || PyUnicode_READ(kind, data, p) == '\t'))
        p++;
    if (p == eol)
        return 0;
    const Py_UCS4 c = PyUnicode_READ(kind, data, p);
    if (c == '|' || c == '!' || c == '*' || c == '#' || c == ':' || c == ';')
        return 1;
    if (c == '-')
        return p + 3 < eol && PyUnicode_READ(kind, data, p + 1) == '-' && PyUnicode_READ(kind, data, p + 2) == '-' &&
               PyUnicode_READ(kind, data, p + 3) == '-';
    if (c != '=')
        return 0;
    Py_ssize_t q = eol;
    while (q > p && (PyUnicode_READ(kind, data, q - 1) == ' ' || PyUnicode_READ(kind, data, q - 1) == '\t'))
        q--;
    return q - 1 > p && PyUnicode_READ(kind, data, q - 1) == '=';
}

static PyObject *fast_drop_junk_lines(PyObject *self, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"text", NULL};
    PyObject *text;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "U:drop_junk_lines", kwlist, &text))
        return NULL;
    const Py_ssize_t n = PyUnicode_GET_LENGTH(text);
    const int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    Py_UCS4 *out = NULL;
    Py_ssize_t len = 0, copied = 0; /* text[:copied] is in out */
    for (Py_ssize_t line = 0; line <= n;) {
        Py_ssize_t eol = line;
        while (eol < n && PyUnicode_READ(kind, data, eol) != '\n')
            eol++;
        if (junk_line(kind, data, line, eol)) {
            if (!out && !(out = PyMem_Malloc((n ? n : 1) * sizeof(Py_UCS4))))
                return PyErr_NoMemory();
            for (Py_ssize_t i = copied; i < line; i++)
                out[len++] = PyUnicode_READ(kind, data, i);
            copied = eol;
        }
        line = eol + 1;
    }
    if (!out) /* most pages: no such line left once tables and templates are gone */
        return Py_NewRef(text);
    for (Py_ssize_t i = copied; i < n; i++)
        out[len++] = PyUnicode_READ(kind, data, i);
    PyObject *result = PyUnicode_FromKindAndData(PyUnicode_4BYTE_KIND, out, len);
    PyMem_Free(out);
    return result;
}

typedef Py_ssize_t (*Pass)(const Py_UCS4 *, Py_ssize_t, Py_UCS4 *);

static PyObject *fast_tidy_prose(PyObject *self, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"text", NULL};
    PyObject *text;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "U:tidy_prose", kwlist, &text))
        return NULL;
    Py_ssize_t n = PyUnicode_GET_LENGTH(text);
    Py_UCS4 *a = PyUnicode_AsUCS4Copy(text), *b = PyMem_Malloc((n + 1) * sizeof(Py_UCS4));
    if (!a || !b) {
        PyMem_Free(a);
        PyMem_Free(b);
        return a ? PyErr_NoMemory() : NULL;
    }
    /* No pass lengthens the text, so two buffers of its length serve them all in turn. */
    static const Pass passes[] = {squeeze, trim_brackets, drop_empty_brackets, drop_spaces_before_punctuation,
                                  drop_empty_links_and_commas, squeeze};
    for (size_t p = 0; p < sizeof passes / sizeof passes[0]; p++) {
        n = passes[p](a, n, b);
        Py_UCS4 *t = a;
        a = b;
        b = t;
    }
    PyObject *result = PyUnicode_FromKindAndData(PyUnicode_4BYTE_KIND, a, n);
    PyMem_Free(a);
    PyMem_Free(b);
    return result;
}

static PyMethodDef methods[] = {
    {"drop_junk_lines", (PyCFunction)(void (*)(void))fast_drop_junk_lines, METH_VARARGS | METH_KEYWORDS,
     "drop_junk_lines(text)\n--\n\n"
     "text with every heading, horizontal rule, stray table row and list item line emptied (its\n"
     "newline stays): what re.sub(r'^[ \\t]*(?:=.*=[ \\t]*|-{4,}.*|[|!*#:;].*)$', '', text, flags=re.M) gives."},
    {"tidy_prose", (PyCFunction)(void (*)(void))fast_tidy_prose, METH_VARARGS | METH_KEYWORDS,
     "tidy_prose(text)\n--\n\n"
     "The cleaner's last passes over paragraphs joined by newlines: spaces squeezed, separators\n"
     "trimmed inside brackets, empty brackets and '[]' dropped, no space before punctuation, one\n"
     "comma for a run, spaces squeezed again."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "bertdata.text._prose", "The wikitext cleaner's compiled tidying of its prose.",
    -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__prose(void) { return PyModule_Create(&module); }
