/* The sentence splitter's compiled scans over str: NLTK punkt's sentence boundaries
 * (fastpunkt.py) and the tidying of their sentences (sentences.py). Plain CPython C API over the
 * str's own code points. _scan.pyi gives the signatures.
 */

#include "_chars.h"
#include "_punkt.h"
#include <stdint.h>

/* ---- punkt's sentence boundaries (fastpunkt.py) ------------------------------------ */

/* NLTK looks back for the word before a mark over string.whitespace only. */
static inline int ascii_space(Py_UCS4 c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\x0b' || c == '\x0c';
}

/* What the word regex splits off the end of a word as a word of its own (fastpunkt._CLOSING). */
static inline int punkt_closing(Py_UCS4 c)
{
    return c == ',' || c == ';' || c == ':' || punkt_non_word(c) || c == '*' || c == '@';
}

/* The realignment pattern's closing brackets and quotes. */
static inline int punkt_realign(Py_UCS4 c)
{
    return c == '"' || c == '\'' || c == ')' || c == ']' || c == '}';
}

static int all_alpha(int kind, const void *data, Py_ssize_t a, Py_ssize_t b)
{
    if (a >= b)
        return 0;
    for (Py_ssize_t i = a; i < b; i++)
        if (!Py_UNICODE_ISALPHA(PyUnicode_READ(kind, data, i)))
            return 0;
    return 1;
}

/* Whether the mark at `at` ends a sentence: -1 error, else 0/1. The context is text[start:end],
 * the word after it text[next:end] (next < 0: a mark follows at once). */
static int punkt_breaks(PunktModel *m, PyObject *text, int kind, const void *data, Py_ssize_t start,
                        Py_ssize_t at, Py_ssize_t next, Py_ssize_t end)
{
    if (next >= 0 && PyUnicode_READ(kind, data, at) == '.' && all_alpha(kind, data, start, at)) {
        Py_UCS4 last = PyUnicode_READ(kind, data, end - 1);
        Py_ssize_t fb = end;
        int following_first = 0, plain = 1;
        if (!all_alpha(kind, data, next, end)) {
            if (end - next >= 2 && all_alpha(kind, data, next, end - 1) && (last == '.' || punkt_closing(last))) {
                if (last != '.')
                    fb = end - 1;
                else
                    following_first = -1; /* decided below */
            } else
                plain = 0;
        }
        if (plain) {
            PyObject *next_typ = lower_of(text, kind, data, next, fb);
            if (!next_typ)
                return -1;
            if (following_first == -1) {
                /* A word of letters and a period: an abbreviation or a break. */
                Py_ssize_t n = PyUnicode_GET_LENGTH(next_typ);
                PyObject *bare = PyUnicode_Substring(next_typ, 0, n - 1);
                if (!bare) {
                    Py_DECREF(next_typ);
                    return -1;
                }
                /* fastpunkt._first_pass lower-cases the word without its period; the same
                 * characters, so the same string but for a final sigma, which only the whole
                 * word decides: lower-case the part alone, as NLTK does. */
                PyObject *alone = lower_of(text, kind, data, next, end - 1);
                int abbrev = alone ? PySet_Contains(m->abbrev, alone) : -1;
                Py_XDECREF(alone);
                if (abbrev < 0) {
                    Py_DECREF(bare);
                    Py_DECREF(next_typ);
                    return -1;
                }
                if (abbrev)
                    Py_DECREF(bare);
                else {
                    /* A break: its type loses the period (NLTK's type_no_sentperiod). */
                    Py_DECREF(next_typ);
                    next_typ = bare;
                }
            }
            PyObject *typ = lower_of(text, kind, data, start, at);
            if (!typ) {
                Py_DECREF(next_typ);
                return -1;
            }
            int abbrev = PySet_Contains(m->abbrev, typ);
            int r = abbrev < 0 ? -1 : punkt_reclassify(m, abbrev ? 2 : 1, typ, at - start == 1, 0,
                                                        PyUnicode_READ(kind, data, next), 0, next_typ);
            Py_DECREF(typ);
            Py_DECREF(next_typ);
            return r;
        }
    }
    /* NLTK annotates a context that spans lines line by line (fastpunkt's `_general`). */
    int lines = 0;
    for (Py_ssize_t i = start; i < end && !lines; i++)
        lines = PyUnicode_READ(kind, data, i) == '\n';
    if (!lines)
        return punkt_general(m, text, kind, data, start, end);
    PyObject *context = PyUnicode_Substring(text, start, end);
    if (!context)
        return -1;
    PyObject *r = PyObject_CallOneArg(m->general, context);
    Py_DECREF(context);
    if (!r)
        return -1;
    int truth = PyObject_IsTrue(r);
    Py_DECREF(r);
    return truth;
}

typedef struct {
    Py_ssize_t *v;
    Py_ssize_t len, cap;
} Slices;

static int slices_add(Slices *s, Py_ssize_t a, Py_ssize_t b)
{
    if (s->len + 2 > s->cap) {
        Py_ssize_t cap = s->cap ? 2 * s->cap : 64;
        Py_ssize_t *v = PyMem_Realloc(s->v, cap * sizeof(Py_ssize_t));
        if (!v) {
            PyErr_NoMemory();
            return -1;
        }
        s->v = v;
        s->cap = cap;
    }
    s->v[s->len++] = a;
    s->v[s->len++] = b;
    return 0;
}

/* Decide a candidate and append the sentence it ends: -1 error, else 0. */
static int punkt_decide(PunktModel *m, PyObject *text, int kind, const void *data, Slices *slices,
                        Py_ssize_t *last_break, Py_ssize_t start, Py_ssize_t at, Py_ssize_t next, Py_ssize_t end)
{
    int breaks = punkt_breaks(m, text, kind, data, start, at, next, end);
    if (breaks < 0)
        return -1;
    if (!breaks)
        return 0;
    if (slices_add(slices, *last_break, at + 1) < 0)
        return -1;
    *last_break = next >= 0 ? next : at + 1;
    return 0;
}

static PyObject *fast_punkt_sentences(PyObject *self, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"text", "abbrev", "collocations", "starters", "ortho", "general", "flags", NULL};
    PyObject *text;
    PunktModel m;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "UO!O!O!O!O(llll)", kwlist, &text, &PySet_Type, &m.abbrev,
                                     &PySet_Type, &m.collocations, &PySet_Type, &m.starters, &PyDict_Type,
                                     &m.ortho, &m.general, &m.ortho_lc, &m.ortho_mid_uc, &m.ortho_uc,
                                     &m.ortho_beg_lc))
        return NULL;
    Py_ssize_t n = PyUnicode_GET_LENGTH(text);
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    Slices slices = {NULL, 0, 0};
    PyObject *out = NULL;
    Py_ssize_t last_break = 0;
    /* The last candidate not yet decided (NLTK decides one only once the next one is known
     * not to overlap it). */
    int pending = 0;
    Py_ssize_t p_start = 0, p_at = 0, p_next = -1, p_end = 0;
    static const Stops MARKS = {{'.', '?', '!'}}; /* punkt_mark's */
    for (Py_ssize_t at = find_in(kind, data, 0, n, &MARKS); at < n; at = find_in(kind, data, at + 1, n, &MARKS)) {
        /* NLTK's candidate regex: a mark, then a non-word character, or spaces and a word. */
        Py_ssize_t next = -1, end;
        if (at + 1 >= n)
            continue;
        Py_UCS4 after = PyUnicode_READ(kind, data, at + 1);
        if (punkt_non_word(after))
            end = at + 2;
        else if (Py_UNICODE_ISSPACE(after)) {
            Py_ssize_t j = at + 1;
            while (j < n && Py_UNICODE_ISSPACE(PyUnicode_READ(kind, data, j)))
                j++;
            if (j >= n)
                continue;
            next = j;
            while (j < n && !Py_UNICODE_ISSPACE(PyUnicode_READ(kind, data, j)))
                j++;
            end = j;
        } else
            continue;
        /* The word before: from the last ASCII space after the previous candidate; NLTK's
         * look-back counts one right at the previous candidate as none. */
        Py_ssize_t start = p_start;
        for (Py_ssize_t i = at - 1; i > p_at; i--)
            if (ascii_space(PyUnicode_READ(kind, data, i))) {
                start = i + 1;
                break;
            }
        if (pending && p_at <= start &&
            punkt_decide(&m, text, kind, data, &slices, &last_break, p_start, p_at, p_next, p_end) < 0)
            goto done;
        pending = 1;
        p_start = start, p_at = at, p_next = next, p_end = end;
    }
    if (pending && punkt_decide(&m, text, kind, data, &slices, &last_break, p_start, p_at, p_next, p_end) < 0)
        goto done;
    Py_ssize_t stop = n;
    while (stop > 0 && Py_UNICODE_ISSPACE(PyUnicode_READ(kind, data, stop - 1)))
        stop--;
    if (slices_add(&slices, last_break, stop) < 0)
        goto done;

    /* NLTK's _realign_boundaries: closing quotes and brackets after a sentence's mark join it. */
    out = PyList_New(0);
    if (!out)
        goto done;
    Py_ssize_t count = slices.len / 2, realign = 0;
    for (Py_ssize_t k = 0; k < count; k++) {
        Py_ssize_t a = slices.v[2 * k] + realign, b = slices.v[2 * k + 1], to = -1;
        if (k + 1 < count) {
            Py_ssize_t na = slices.v[2 * k + 2], nb = slices.v[2 * k + 3], j = na;
            while (j < nb && punkt_realign(PyUnicode_READ(kind, data, j)))
                j++;
            int matched = 0;
            if (j > na) {
                if (j == nb)
                    matched = 1;
                else if (Py_UNICODE_ISSPACE(PyUnicode_READ(kind, data, j)))
                    matched = 1;
                else if (j + 1 < nb && PyUnicode_READ(kind, data, j) == '-' &&
                         PyUnicode_READ(kind, data, j + 1) == '-')
                    matched = 1;
            }
            if (matched) {
                to = j;
                while (j < nb && Py_UNICODE_ISSPACE(PyUnicode_READ(kind, data, j)))
                    j++;
                realign = j - na;
            } else
                realign = 0;
        }
        if (to < 0 && a >= b)
            continue;
        PyObject *sentence = PyUnicode_Substring(text, a, to < 0 ? b : to);
        if (!sentence || PyList_Append(out, sentence) < 0) {
            Py_XDECREF(sentence);
            Py_CLEAR(out);
            goto done;
        }
        Py_DECREF(sentence);
    }
done:
    PyMem_Free(slices.v);
    return out;
}

#define FN(name, doc) {#name, (PyCFunction)(void (*)(void))fast_##name, METH_VARARGS | METH_KEYWORDS, doc}

/* Each doc starts with its signature and "--", so inspect.signature reads it (_scan.pyi must agree). */
/* ---- a paragraph's sentences, tidied (sentences.py) ----------------------------------- */


/* Whether `" ".join(piece.split())` would give the piece back (no whitespace but single ' '
 * between other characters), and whether it holds a \w character, in one read-only pass
 * over one kind of str. Branch-free but for the word test, which stops at the first word
 * character: whitespace comes every few characters at no regular interval. */
#define SINGLE_SPACED_SCAN(T)                                                                      \
    {                                                                                              \
        const T *chars = (const T *)data;                                                          \
        int spaced = 1, word = 0, was_space = 1; /* as if after a space: a leading one counts */  \
        for (Py_ssize_t i = 0; i < n; i++) {                                                       \
            const Py_UCS4 c = chars[i];                                                            \
            const int space = Py_UNICODE_ISSPACE(c);                                               \
            spaced &= !(space & ((c != ' ') | was_space));                                         \
            was_space = space;                                                                     \
            if (!word)                                                                             \
                word = word_char(c);                                                               \
        }                                                                                          \
        *has_word = word;                                                                          \
        return spaced & !(n && was_space);                                                         \
    }

static int already_single_spaced(int kind, const void *data, Py_ssize_t n, int *has_word)
{
    if (kind == PyUnicode_1BYTE_KIND)
        SINGLE_SPACED_SCAN(Py_UCS1)
    if (kind == PyUnicode_2BYTE_KIND)
        SINGLE_SPACED_SCAN(Py_UCS2)
    SINGLE_SPACED_SCAN(Py_UCS4)
}

/* `" ".join(piece.split())` of a str. Sets *has_word when it holds a \w character. Most
 * pieces come back as they are: the cleaner has squeezed the paragraph's spaces already. */
static PyObject *single_spaced(PyObject *piece, int *has_word)
{
    Py_ssize_t n = PyUnicode_GET_LENGTH(piece);
    int kind = PyUnicode_KIND(piece);
    const void *data = PyUnicode_DATA(piece);
    if (already_single_spaced(kind, data, n, has_word))
        return Py_NewRef(piece);
    Py_UCS4 *out = PyMem_Malloc((n ? n : 1) * sizeof(Py_UCS4));
    if (!out)
        return PyErr_NoMemory();
    Py_ssize_t len = 0;
    int gap = 0;
    *has_word = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_UCS4 c = PyUnicode_READ(kind, data, i);
        if (Py_UNICODE_ISSPACE(c)) {
            gap = 1;
            continue;
        }
        if (gap && len)
            out[len++] = ' ';
        gap = 0;
        out[len++] = c;
        *has_word |= word_char(c);
    }
    PyObject *result = PyUnicode_FromKindAndData(PyUnicode_4BYTE_KIND, out, len);
    PyMem_Free(out);
    return result;
}

/* What sentences.py did per sentence in Python: each piece single-spaced; one without a \w
 * character glued onto the sentence before it in the paragraph, or dropped when there is none. */
static PyObject *fast_tidy_sentences(PyObject *self, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"pieces", NULL};
    PyObject *pieces;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O!:tidy_sentences", kwlist, &PyList_Type, &pieces))
        return NULL;
    PyObject *sentences = PyList_New(0);
    if (!sentences)
        return NULL;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(pieces); i++) {
        PyObject *piece = PyList_GET_ITEM(pieces, i);
        if (!PyUnicode_Check(piece)) {
            PyErr_SetString(PyExc_TypeError, "tidy_sentences takes a list of str");
            goto fail;
        }
        int has_word;
        PyObject *sentence = single_spaced(piece, &has_word);
        if (!sentence)
            goto fail;
        Py_ssize_t count = PyList_GET_SIZE(sentences);
        int failed = 0;
        if (has_word) {
            failed = PyList_Append(sentences, sentence) < 0;
        } else if (PyUnicode_GET_LENGTH(sentence) && count) {
            PyObject *glued = PyUnicode_Concat(PyList_GET_ITEM(sentences, count - 1), sentence);
            failed = !glued || PyList_SetItem(sentences, count - 1, glued) < 0;
        }
        Py_DECREF(sentence);
        if (failed)
            goto fail;
    }
    return sentences;
fail:
    Py_DECREF(sentences);
    return NULL;
}

/* What ends a terminated sentence (articles._ENDINGS). */
static inline int sentence_ending(Py_UCS4 c)
{
    return c == '.' || c == '!' || c == '?' || c == '"' || c == '\'' || c == 0x201D || c == 0x2019 || c == ')' ||
           c == ']';
}

static PyObject *fast_sentence_stats(PyObject *self, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"sentences", NULL};
    PyObject *sentences;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O!:sentence_stats", kwlist, &PyTuple_Type, &sentences))
        return NULL;
    Py_ssize_t chars = 0, spaces = 0, words = 0, unterminated = 0;
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(sentences); k++) {
        PyObject *s = PyTuple_GET_ITEM(sentences, k);
        if (!PyUnicode_Check(s)) {
            PyErr_SetString(PyExc_TypeError, "sentence_stats: sentences must be str");
            return NULL;
        }
        const Py_ssize_t n = PyUnicode_GET_LENGTH(s);
        const int kind = PyUnicode_KIND(s);
        const void *data = PyUnicode_DATA(s);
        for (Py_ssize_t i = 0; i < n; i++)
            spaces += PyUnicode_READ(kind, data, i) == ' ';
        chars += n;
        words += n > 0;
        unterminated += !(n && sentence_ending(PyUnicode_READ(kind, data, n - 1)));
    }
    return Py_BuildValue("nnn", chars, spaces + words, unterminated);
}

static PyMethodDef methods[] = {
    FN(punkt_sentences, "punkt_sentences(text, abbrev, collocations, starters, ortho, general, flags)\n--\n\n"
       "NLTK punkt's sentences of text (see fastpunkt.py)."),
    FN(sentence_stats, "sentence_stats(sentences)\n--\n\n"
       "(characters, words, unterminated sentences) of a tuple of sentences (see articles.sentence_counts)."),
    FN(tidy_sentences, "tidy_sentences(pieces)\n--\n\n"
       "A paragraph's sentences from punkt's pieces: single-spaced, wordless pieces glued to the one before."),
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "bertdata.text._scan",
    "Compiled scans of the sentence splitter: punkt's sentences and their tidying.",
    -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__scan(void)
{
    return PyModule_Create(&module);
}
