/* The cleaner's paragraphs and last tidying of its prose (wikitext.py), which took it a dozen regex and
 * replace passes, and the lines it drops as not prose. Plain CPython C API over the str's own code
 * points; _prose.pyi gives the signatures.
 */

#include "_chars.h"

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

/* ASCII's spaces, for a lookup in the hot loops below. */
static const unsigned char ASCII_BLANK[128] = {['\t'] = 1, ['\v'] = 1, ['\f'] = 1, ['\r'] = 1, [' '] = 1};

/* Invisible characters go, then every run of spaces becomes one ' ', which goes too at either
 * end of the text or of a line. Branch-free for ASCII: a test per space, which comes every few
 * characters at no regular interval, mispredicted on most of them. The last character written
 * is kept at hand, not read back from out. Writes out[len] ahead of need, which a later
 * character overwrites; out has room, as each space it gains stands for a blank it lost. */
static Py_ssize_t squeeze(const Py_UCS4 *in, Py_ssize_t n, Py_UCS4 *out)
{
    Py_ssize_t len = 0;
    int pending = 0;     /* a run of spaces since the last character written */
    Py_UCS4 last = '\n'; /* the last character written; at the start, as after a newline */
    for (Py_ssize_t i = 0; i < n; i++) {
        const Py_UCS4 c = in[i];
        int is_blank;
        if (c < 128) {
            is_blank = ASCII_BLANK[c];
        } else {
            if (invisible(c))
                continue;
            is_blank = blank(c);
        }
        const int space = !is_blank & pending & (c != '\n') & (last != '\n');
        out[len] = ' ';
        len += space;
        out[len] = c;
        len += !is_blank;
        last = is_blank ? last : c;
        pending = is_blank;
    }
    return len;
}

/* in[i:j] copied to out + len, j the first character at or after i that `stops` holds (n if
 * none): the passes below act only at a few characters, and copy the runs between them whole. */
static inline Py_ssize_t copy_until(const Py_UCS4 *in, Py_ssize_t i, Py_ssize_t n, const Stops *stops,
                                    Py_UCS4 *out, Py_ssize_t *len)
{
    const Py_ssize_t j = find_in(PyUnicode_4BYTE_KIND, in, i, n, stops);
    memcpy(out + *len, in + i, (j - i) * sizeof(Py_UCS4));
    *len += j - i;
    return j;
}

static const Stops BRACKETS = {{'(', ')', ')'}}, OPENING = {{'(', '(', '('}}, LINKS_AND_COMMAS = {{'[', ',', ','}};

/* Separators go after each '(' and before each ')'. */
static Py_ssize_t trim_brackets(const Py_UCS4 *in, Py_ssize_t n, Py_UCS4 *out)
{
    Py_ssize_t len = 0;
    for (Py_ssize_t i = copy_until(in, 0, n, &BRACKETS, out, &len); i < n; i = copy_until(in, i, n, &BRACKETS, out, &len)) {
        const Py_UCS4 c = in[i++];
        if (c == ')')
            while (len && separator(out[len - 1]))
                len--;
        out[len++] = c;
        if (c == '(')
            while (i < n && separator(in[i]))
                i++;
    }
    return len;
}

/* Brackets holding nothing but leftovers, single spaces between them, go. */
static Py_ssize_t drop_empty_brackets(const Py_UCS4 *in, Py_ssize_t n, Py_UCS4 *out)
{
    Py_ssize_t len = 0;
    for (Py_ssize_t i = copy_until(in, 0, n, &OPENING, out, &len); i < n; i = copy_until(in, i, n, &OPENING, out, &len)) {
        Py_ssize_t j = i + 1;
        while (j < n && (leftover(in[j]) || (in[j] == ' ' && in[j - 1] != ' ')))
            j++;
        if (j < n && in[j] == ')')
            i = j + 1;
        else
            out[len++] = in[i++];
    }
    return len;
}

/* What a space before it goes for; '.' only when not the first of "..". */
static const unsigned char ASCII_CLOSING[128] = {[','] = 1, [';'] = 1, [':'] = 1, ['!'] = 1, ['?'] = 1,
                                                 [')'] = 1, [']'] = 1};

/* A space before ',', ';', ':', '!', '?', ')', ']' or a '.' that is not the first of "..".
 * Branch-free but for the last two characters (see squeeze). */
static Py_ssize_t drop_spaces_before_punctuation(const Py_UCS4 *in, Py_ssize_t n, Py_UCS4 *out)
{
    Py_ssize_t len = 0, i = 0;
    for (; i + 2 < n; i++) {
        const Py_UCS4 next = in[i + 1];
        const int closing = next < 128 && ASCII_CLOSING[next];
        const int stop = (next == '.') & (in[i + 2] != '.');
        out[len] = in[i];
        len += !((in[i] == ' ') & (closing | stop));
    }
    for (; i < n; i++) {
        if (in[i] == ' ' && i + 1 < n) {
            Py_UCS4 next = in[i + 1];
            if (next == ',' || next == ';' || next == ':' || next == '!' || next == '?' || next == ')' ||
                next == ']' || next == '.')
                continue;
        }
        out[len++] = in[i];
    }
    return len;
}

/* "[]" goes (left to right, as str.replace), then each run of commas becomes one: in one pass,
 * as a comma is kept unless the last character kept is one. */
static Py_ssize_t drop_empty_links_and_commas(const Py_UCS4 *in, Py_ssize_t n, Py_UCS4 *out)
{
    Py_ssize_t len = 0;
    for (Py_ssize_t i = copy_until(in, 0, n, &LINKS_AND_COMMAS, out, &len); i < n; i = copy_until(in, i, n, &LINKS_AND_COMMAS, out, &len)) {
        if (in[i] == '[') {
            if (i + 1 < n && in[i + 1] == ']')
                i += 2;
            else
                out[len++] = in[i++];
        } else {
            if (!(len && out[len - 1] == ','))
                out[len++] = ',';
            i++;
        }
    }
    return len;
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

/* Where the text of an indented line (`:` ...) or of a definition (`; term : definition`) starts, if
 * `p`, the line's first character past its spaces and tabs, begins one; -1 if the line is not one, or
 * holds nothing to keep: a list item indented (`:*`, `:#`), a term without its definition. */
static Py_ssize_t indented_text(int kind, const void *data, Py_ssize_t p, Py_ssize_t eol)
{
    Py_ssize_t r = p;
    int term = 0;
    for (; r < eol; r++) {
        const Py_UCS4 c = PyUnicode_READ(kind, data, r);
        if (c == '*' || c == '#')
            return -1;
        if (c != ':' && c != ';')
            break;
        term |= c == ';';
    }
    if (term) { /* the definition follows the term's first colon */
        while (r < eol && PyUnicode_READ(kind, data, r) != ':')
            r++;
        r++;
    }
    while (r < eol && (PyUnicode_READ(kind, data, r) == ' ' || PyUnicode_READ(kind, data, r) == '\t'))
        r++;
    return r < eol ? r : -1;
}

/* What an indented line or definition becomes: a paragraph of its own, marked by INDENTED so that the
 * cleaner keeps it only as whole sentences (wikitext.py). */
#define INDENTED 0x01

static PyObject *fast_drop_junk_lines(PyObject *self, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"text", "indented", NULL};
    PyObject *text;
    int indented = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "U|p:drop_junk_lines", kwlist, &text, &indented))
        return NULL;
    const Py_ssize_t n = PyUnicode_GET_LENGTH(text);
    const int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    char *out = NULL; /* in the text's kind */
    Py_ssize_t len = 0, copied = 0, room = 0; /* text[:copied] is in out, which holds room characters */
    for (Py_ssize_t line = 0; line <= n;) {
        const Py_ssize_t eol = line_end(text, line, n);
        if (eol == -2) {
            PyMem_Free(out);
            return NULL;
        }
        if (junk_line(kind, data, line, eol)) {
            Py_ssize_t keep = -1; /* where the kept text of an indented line starts */
            if (indented) {
                Py_ssize_t p = line;
                while (PyUnicode_READ(kind, data, p) == ' ' || PyUnicode_READ(kind, data, p) == '\t')
                    p++; /* a junk line is not blank */
                const Py_UCS4 c = PyUnicode_READ(kind, data, p);
                if (c == ':' || c == ';')
                    keep = indented_text(kind, data, p, eol);
            }
            /* A kept line gains two characters at most: its marks (one at least) become "\n" INDENTED, and
             * a newline ends it. */
            const Py_ssize_t need = len + (line - copied) + (keep < 0 ? 0 : eol - keep + 3);
            if (!out || need > room) {
                const Py_ssize_t grown = Py_MAX(need, n + n / 8 + 16);
                if (grown > PY_SSIZE_T_MAX / 4) {
                    PyMem_Free(out);
                    return PyErr_NoMemory();
                }
                char *bigger = PyMem_Realloc(out, grown * kind);
                if (!bigger) {
                    PyMem_Free(out);
                    return PyErr_NoMemory();
                }
                out = bigger;
                room = grown;
            }
            memcpy(out + len * kind, (const char *)data + copied * kind, (line - copied) * kind);
            len += line - copied;
            if (keep >= 0) {
                PyUnicode_WRITE(kind, out, len++, '\n');
                PyUnicode_WRITE(kind, out, len++, INDENTED);
                memcpy(out + len * kind, (const char *)data + keep * kind, (eol - keep) * kind);
                len += eol - keep;
                PyUnicode_WRITE(kind, out, len++, '\n');
            }
            copied = eol;
        }
        line = eol + 1;
    }
    if (!out) /* most pages: no such line left once tables and templates are gone */
        return Py_NewRef(text);
    if (len + (n - copied) > room) {
        char *bigger = PyMem_Realloc(out, (len + (n - copied)) * kind);
        if (!bigger) {
            PyMem_Free(out);
            return PyErr_NoMemory();
        }
        out = bigger;
    }
    memcpy(out + len * kind, (const char *)data + copied * kind, (n - copied) * kind);
    len += n - copied;
    PyObject *result = PyUnicode_FromKindAndData(kind, out, len);
    PyMem_Free(out);
    return result;
}

/* Where the run of blank lines that starts with the newline text[j] ends (past the spaces and
 * tabs after its last newline), or -1 if the line after it is not blank: a match of
 * `\n[ \t]*(?:\n[ \t]*)+` at j. */
static Py_ssize_t blank_line(int kind, const void *data, Py_ssize_t j, Py_ssize_t n)
{
    Py_ssize_t k = j, lines = 0;
    while (k < n && PyUnicode_READ(kind, data, k) == '\n') {
        lines++;
        for (k++; k < n && (PyUnicode_READ(kind, data, k) == ' ' || PyUnicode_READ(kind, data, k) == '\t');)
            k++;
    }
    return lines >= 2 ? k : -1;
}

/* Paragraphs, one per line: what `"\n".join(p.replace("\n", " ") for p in
 * re.split(r"\n[ \t]*(?:\n[ \t]*)+", text) if p)` gives, then every run of two or more
 * apostrophes (italic and bold markup) removed, in one pass. A paragraph of apostrophes alone
 * still counts as one: its line stays, empty. */
static PyObject *fast_join_paragraphs(PyObject *self, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"text", NULL};
    static const Stops MARKS = {{'\n', '\'', '\''}};
    PyObject *text;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "U:join_paragraphs", kwlist, &text))
        return NULL;
    const Py_ssize_t n = PyUnicode_GET_LENGTH(text);
    const int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    char *out = PyMem_Malloc(n ? n * kind : 1);
    if (!out)
        return PyErr_NoMemory();
    Py_ssize_t len = 0;
    int in_paragraph = 0, newline_due = 0; /* a paragraph is open; one ended, and no other began yet */
    for (Py_ssize_t i = 0; i < n;) {
        const Py_ssize_t j = find_in(kind, data, i, n, &MARKS);
        const Py_ssize_t blank_end = j < n && PyUnicode_READ(kind, data, j) == '\n' ? blank_line(kind, data, j, n) : -1;
        if (j > i || (j < n && blank_end < 0)) { /* characters of a paragraph */
            if (newline_due)
                PyUnicode_WRITE(kind, out, len++, '\n');
            newline_due = 0;
            in_paragraph = 1;
            copy_run(out, &len, kind, text, i, j);
        }
        if (j >= n)
            break;
        Py_ssize_t k = j + 1;
        if (PyUnicode_READ(kind, data, j) == '\'') {
            while (k < n && PyUnicode_READ(kind, data, k) == '\'')
                k++;
            if (k - j == 1)
                PyUnicode_WRITE(kind, out, len++, '\'');
        } else if (blank_end >= 0) { /* the paragraph, if any, ends */
            k = blank_end;
            newline_due |= in_paragraph;
            in_paragraph = 0;
        } else { /* a line wrapped inside the paragraph */
            PyUnicode_WRITE(kind, out, len++, ' ');
        }
        i = k;
    }
    PyObject *result = PyUnicode_FromKindAndData(kind, out, len);
    PyMem_Free(out);
    return result;
}

/* The lines of text (split at '\n') that hold a word character (`re`'s \w). */
static PyObject *fast_worded_lines(PyObject *self, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"text", NULL};
    PyObject *text;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "U:worded_lines", kwlist, &text))
        return NULL;
    const Py_ssize_t n = PyUnicode_GET_LENGTH(text);
    const int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    PyObject *lines = PyList_New(0);
    for (Py_ssize_t line = 0; lines && line <= n;) {
        const Py_ssize_t eol = line_end(text, line, n);
        if (eol == -2) {
            Py_CLEAR(lines);
            break;
        }
        Py_ssize_t i = line;
        while (i < eol && !word_char(PyUnicode_READ(kind, data, i)))
            i++;
        if (i < eol)
            append_new(&lines, PyUnicode_Substring(text, line, eol));
        line = eol + 1;
    }
    return lines;
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
    /* No pass lengthens the text, so two buffers of its length serve them all in turn. Those
     * between the squeezes only delete: if they kept every character, the text is squeezed. */
    static const Pass passes[] = {squeeze, trim_brackets, drop_empty_brackets, drop_spaces_before_punctuation,
                                  drop_empty_links_and_commas, squeeze};
    const size_t last = sizeof passes / sizeof passes[0] - 1;
    Py_ssize_t squeezed = -1;
    for (size_t p = 0; p <= last; p++) {
        if (p == last && n == squeezed)
            break;
        n = passes[p](a, n, b);
        Py_UCS4 *t = a;
        a = b;
        b = t;
        if (p == 0)
            squeezed = n;
    }
    PyObject *result = PyUnicode_FromKindAndData(PyUnicode_4BYTE_KIND, a, n);
    PyMem_Free(a);
    PyMem_Free(b);
    return result;
}

static PyMethodDef methods[] = {
    {"drop_junk_lines", (PyCFunction)(void (*)(void))fast_drop_junk_lines, METH_VARARGS | METH_KEYWORDS,
     "drop_junk_lines(text, indented=False)\n--\n\n"
     "text with every heading, horizontal rule, stray table row and list item line emptied (its\n"
     "newline stays): what re.sub(r'^[ \\t]*(?:=.*=[ \\t]*|-{4,}.*|[|!*#:;].*)$', '', text, flags=re.M) gives.\n"
     "With indented, the text of an indented line (':') or of a definition ('; term : definition')\n"
     "becomes a paragraph of its own, '\\n\\x01' + text + '\\n', unless it is an indented list item."},
    {"join_paragraphs", (PyCFunction)(void (*)(void))fast_join_paragraphs, METH_VARARGS | METH_KEYWORDS,
     "join_paragraphs(text)\n--\n\n"
     "text's paragraphs (split at blank lines), one per line, their lines joined by spaces, and\n"
     "every run of two or more apostrophes removed."},
    {"worded_lines", (PyCFunction)(void (*)(void))fast_worded_lines, METH_VARARGS | METH_KEYWORDS,
     "worded_lines(text)\n--\n\n"
     "The lines of text (split at newlines) that hold a word character, as re's \\w."},
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
