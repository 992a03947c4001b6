/* NLTK punkt's decision on one candidate's context (nltk.tokenize.punkt 3.9, rule for rule), for
 * _scan.c, which includes _chars.h first: the model, its two annotation passes, and NLTK's word
 * regex as a scan. NLTK splits the context into words, wraps each in a PunktToken and runs
 * chains of generators over them; here the same rules run over the str's own code points and
 * make a Python string only for a type the model is asked about.
 */

#ifndef BERTDATA_PUNKT_H
#define BERTDATA_PUNKT_H

typedef struct {
    PyObject *abbrev, *collocations, *starters, *ortho, *general;
    long ortho_lc, ortho_mid_uc, ortho_uc, ortho_beg_lc;
} PunktModel;

/* PunktLanguageVars: marks that may end a sentence (sent_end_chars), and characters that may not
 * be inside a word (`_re_non_word_chars`), which may follow a mark directly. */
static inline int punkt_mark(Py_UCS4 c) { return c == '.' || c == '?' || c == '!'; }

static inline int punkt_non_word(Py_UCS4 c)
{
    switch (c) {
    case ')': case '"': case ';': case '}': case ']': case '*': case ':': case '@': case '\'':
    case '(': case '{': case '[': case '!': case '?':
        return 1;
    default:
        return 0;
    }
}

/* `_re_word_start`: what a word may start with. */
static inline int punkt_word_start(Py_UCS4 c)
{
    switch (c) {
    case '(': case '"': case '`': case '{': case '[': case ':': case ';': case '&': case '#': case '*':
    case '@': case ')': case '}': case ']': case '-': case ',':
        return 0;
    default:
        return 1;
    }
}

/* PunktSentenceTokenizer.PUNCTUATION, which the orthographic heuristic never takes for a start. */
static inline int punkt_punctuation(Py_UCS4 c)
{
    return c == ';' || c == ':' || c == ',' || c == '.' || c == '!' || c == '?';
}

/* text[a:b].lower() (b >= a). ASCII, the usual case, is lower-cased here; anything else by str.lower,
 * whose result may differ in length (U+0130) and which knows a final sigma from its neighbours. */
static PyObject *lower_of(PyObject *text, int kind, const void *data, Py_ssize_t a, Py_ssize_t b)
{
    Py_ssize_t i = a;
    while (i < b && PyUnicode_READ(kind, data, i) < 128)
        i++;
    if (i < b) {
        PyObject *part = PyUnicode_Substring(text, a, b);
        if (!part)
            return NULL;
        PyObject *lower = PyObject_CallMethod(part, "lower", NULL);
        Py_DECREF(part);
        return lower;
    }
    PyObject *out = PyUnicode_New(b - a, 127);
    if (!out)
        return NULL;
    Py_UCS1 *to = PyUnicode_1BYTE_DATA(out);
    for (i = a; i < b; i++) {
        Py_UCS4 c = PyUnicode_READ(kind, data, i);
        to[i - a] = (Py_UCS1)(c >= 'A' && c <= 'Z' ? c + 32 : c);
    }
    return out;
}

/* -1 error, else the ortho context flags of `typ` (0 where the model has none). */
static long ortho_of(PunktModel *m, PyObject *typ)
{
    PyObject *v = PyDict_GetItemWithError(m->ortho, typ);
    if (!v)
        return PyErr_Occurred() ? -1 : 0;
    Py_INCREF(v); /* borrowed from a dict that an __index__ could change */
    const long flags = PyLong_AsLong(v);
    Py_DECREF(v);
    if (flags < 0 && !PyErr_Occurred())
        PyErr_Format(PyExc_ValueError, "ortho: %R has negative flags", typ);
    return flags < 0 ? -1 : flags;
}

/* NLTK's `_second_pass_annotation` for a word ending in a period before the word `following`
 * (its first character following0; `following_punct`: it is one of PUNCTUATION): whether the word
 * ends a sentence. `first` is the word's first-pass annotation (1 break, 2 abbreviation, 3
 * ellipsis, 0 none), `typ` its type without the period, `initial` whether it is an initial,
 * `number` whether its type is ##number## (an ordinal), `next_typ` the next word's type, less a
 * period that breaks. -1 error, else 0/1. */
static int punkt_reclassify(PunktModel *m, int first, PyObject *typ, int initial, int number,
                            Py_UCS4 following0, int following_punct, PyObject *next_typ)
{
    PyObject *pair = PyTuple_Pack(2, typ, next_typ);
    if (!pair)
        return -1;
    int colloc = PySet_Contains(m->collocations, pair);
    Py_DECREF(pair);
    if (colloc)
        return colloc < 0 ? -1 : 0;
    int upper = Py_UNICODE_ISUPPER(following0), lower = Py_UNICODE_ISLOWER(following0);
    long ortho = 0;
    /* The orthographic heuristic: 1 starts a sentence, 0 does not, 2 unsure. */
    int starts = 2;
    if ((first >= 2 && !initial) || initial || number) {
        if (following_punct)
            starts = 0;
        else {
            ortho = ortho_of(m, next_typ);
            if (ortho == -1 && PyErr_Occurred())
                return -1;
            if (upper && (ortho & m->ortho_lc) && !(ortho & m->ortho_mid_uc))
                starts = 1;
            else if (lower && ((ortho & m->ortho_uc) || !(ortho & m->ortho_beg_lc)))
                starts = 0;
        }
    }
    if (first >= 2 && !initial) {
        if (starts == 1)
            return 1;
        if (upper) {
            int starter = PySet_Contains(m->starters, next_typ);
            if (starter)
                return starter;
        }
    }
    if (initial || number) {
        if (starts == 0)
            return 0;
        if (starts == 2 && initial && upper && !(ortho & m->ortho_lc))
            return 0;
    }
    return first == 1;
}

/* ---- the general case: NLTK's word regex, then both passes ---------------------------- */

/* `_re_multi_char_punct` at i, the string ending at n: its length ("--", "..", ". . ."), 0 if none. */
static Py_ssize_t punkt_multi_char(int kind, const void *data, Py_ssize_t i, Py_ssize_t n)
{
    Py_UCS4 c = PyUnicode_READ(kind, data, i);
    if (c != '-' && c != '.')
        return 0;
    Py_ssize_t j = i;
    while (j < n && PyUnicode_READ(kind, data, j) == c)
        j++;
    if (j - i >= 2)
        return j - i;
    if (c == '-')
        return 0;
    /* (?:\.\s){2,}\. with its backtracking: k pairs, then a period, or k - 1 pairs and the k-th's. */
    Py_ssize_t k = 0;
    for (j = i; j + 1 < n && PyUnicode_READ(kind, data, j) == '.' && Py_UNICODE_ISSPACE(PyUnicode_READ(kind, data, j + 1));
         j += 2)
        k++;
    if (k >= 2 && j < n && PyUnicode_READ(kind, data, j) == '.')
        return 2 * k + 1;
    return k >= 3 ? 2 * k - 1 : 0;
}

/* The word regex's end of a word at j: white space, the end, a non-word character, multi-character
 * punctuation, or a comma before any of those. */
static int punkt_word_end(int kind, const void *data, Py_ssize_t j, Py_ssize_t n)
{
    if (j >= n)
        return 1;
    Py_UCS4 c = PyUnicode_READ(kind, data, j);
    if (Py_UNICODE_ISSPACE(c) || punkt_non_word(c) || punkt_multi_char(kind, data, j, n))
        return 1;
    if (c != ',')
        return 0;
    if (j + 1 >= n)
        return 1;
    Py_UCS4 d = PyUnicode_READ(kind, data, j + 1);
    return Py_UNICODE_ISSPACE(d) || punkt_non_word(d) || punkt_multi_char(kind, data, j + 1, n) > 0;
}

/* `findall` of the word regex over text[a:b]: the words' bounds into `bounds` (room for b - a
 * words); returns their count. */
static Py_ssize_t punkt_words(int kind, const void *data, Py_ssize_t a, Py_ssize_t b, Py_ssize_t *bounds)
{
    Py_ssize_t count = 0;
    for (Py_ssize_t i = a; i < b;) {
        Py_UCS4 c = PyUnicode_READ(kind, data, i);
        if (Py_UNICODE_ISSPACE(c)) {
            i++;
            continue;
        }
        Py_ssize_t len = punkt_multi_char(kind, data, i, b);
        if (!len && punkt_word_start(c)) {
            Py_ssize_t j = i + 1; /* the lazy \S+? */
            while (!punkt_word_end(kind, data, j, b))
                j++;
            len = j - i;
        }
        if (!len)
            len = 1; /* \S */
        bounds[2 * count] = i;
        bounds[2 * count + 1] = i + len;
        count++;
        i += len;
    }
    return count;
}

/* NLTK's `_first_pass_annotation` of the word text[a:b]: -1 error, 0 none, 1 a sentence break,
 * 2 an abbreviation, 3 an ellipsis. */
static int punkt_first_pass(PunktModel *m, PyObject *text, int kind, const void *data, Py_ssize_t a, Py_ssize_t b)
{
    Py_UCS4 last = PyUnicode_READ(kind, data, b - 1);
    if (b - a == 1 && punkt_mark(last))
        return 1;
    Py_ssize_t periods = 0;
    while (a + periods < b && PyUnicode_READ(kind, data, a + periods) == '.')
        periods++;
    if (periods == b - a)
        return 3; /* two periods or more: one alone is a mark */
    if (last != '.' || PyUnicode_READ(kind, data, b - 2) == '.')
        return 0;
    PyObject *lower = lower_of(text, kind, data, a, b - 1);
    if (!lower)
        return -1;
    int abbrev = PySet_Contains(m->abbrev, lower);
    if (abbrev == 0) {
        /* the part after its last hyphen */
        Py_ssize_t hyphen = PyUnicode_FindChar(lower, '-', 0, PyUnicode_GET_LENGTH(lower), -1);
        if (hyphen >= 0) {
            PyObject *part = PyUnicode_Substring(lower, hyphen + 1, PyUnicode_GET_LENGTH(lower));
            abbrev = part ? PySet_Contains(m->abbrev, part) : -1;
            Py_XDECREF(part);
        } else if (hyphen == -2)
            abbrev = -1;
    }
    Py_DECREF(lower);
    return abbrev < 0 ? -1 : abbrev ? 2 : 1;
}

/* `_RE_NUMERIC` (^-?[\.,]?\d[\d,\.-]*\.?$) on text[a:b]: lower-casing changes none of its characters. */
static int punkt_numeric(int kind, const void *data, Py_ssize_t a, Py_ssize_t b)
{
    Py_ssize_t i = a;
    if (i < b && PyUnicode_READ(kind, data, i) == '-')
        i++;
    if (i < b && (PyUnicode_READ(kind, data, i) == '.' || PyUnicode_READ(kind, data, i) == ','))
        i++;
    if (i >= b || !Py_UNICODE_ISDECIMAL(PyUnicode_READ(kind, data, i)))
        return 0;
    for (i++; i < b; i++) {
        Py_UCS4 c = PyUnicode_READ(kind, data, i);
        if (!Py_UNICODE_ISDECIMAL(c) && c != ',' && c != '.' && c != '-')
            return 0;
    }
    return 1;
}

/* A word's type (lower-cased, numbers as ##number##), less a final period if `no_period`. */
static PyObject *punkt_type(PyObject *text, int kind, const void *data, Py_ssize_t a, Py_ssize_t b, int no_period)
{
    if (punkt_numeric(kind, data, a, b))
        return PyUnicode_FromString("##number##");
    PyObject *typ = lower_of(text, kind, data, a, b);
    Py_ssize_t n = typ ? PyUnicode_GET_LENGTH(typ) : 0;
    if (no_period && n > 1 && PyUnicode_READ_CHAR(typ, n - 1) == '.') {
        PyObject *cut = PyUnicode_Substring(typ, 0, n - 1);
        Py_DECREF(typ);
        return cut;
    }
    return typ;
}

/* `_RE_INITIAL` ([^\W\d]\.$) on text[a:b]. */
static int punkt_initial(int kind, const void *data, Py_ssize_t a, Py_ssize_t b)
{
    if (b - a != 2 || PyUnicode_READ(kind, data, a + 1) != '.')
        return 0;
    Py_UCS4 c = PyUnicode_READ(kind, data, a);
    return word_char(c) && !Py_UNICODE_ISDECIMAL(c);
}

/* NLTK's `text_contains_sentbreak` on the one-line context text[a:b]: does a word other than the
 * last end a sentence after both annotation passes? -1 error, else 0/1. */
static int punkt_general(PunktModel *m, PyObject *text, int kind, const void *data, Py_ssize_t a, Py_ssize_t b)
{
    Py_ssize_t *bounds = PyMem_Malloc(2 * (b - a + 1) * sizeof(Py_ssize_t));
    int *firsts = PyMem_Malloc((b - a + 1) * sizeof(int));
    int found = 0;
    if (!bounds || !firsts) {
        PyErr_NoMemory();
        found = -1;
        goto done;
    }
    Py_ssize_t count = punkt_words(kind, data, a, b, bounds);
    for (Py_ssize_t w = 0; w < count; w++)
        if ((firsts[w] = punkt_first_pass(m, text, kind, data, bounds[2 * w], bounds[2 * w + 1])) < 0) {
            found = -1;
            goto done;
        }
    for (Py_ssize_t w = 0; w + 1 < count && !found; w++) {
        Py_ssize_t wa = bounds[2 * w], wb = bounds[2 * w + 1], fa = bounds[2 * w + 2], fb = bounds[2 * w + 3];
        if (PyUnicode_READ(kind, data, wb - 1) != '.') {
            found = firsts[w] == 1;
            continue;
        }
        PyObject *next_typ = punkt_type(text, kind, data, fa, fb, firsts[w + 1] == 1);
        PyObject *typ = next_typ ? punkt_type(text, kind, data, wa, wb, 1) : NULL;
        if (typ) {
            Py_UCS4 following0 = PyUnicode_READ(kind, data, fa);
            found = punkt_reclassify(m, firsts[w], typ, punkt_initial(kind, data, wa, wb),
                                     PyUnicode_CompareWithASCIIString(typ, "##number##") == 0, following0,
                                     fb - fa == 1 && punkt_punctuation(following0), next_typ);
        } else
            found = -1;
        Py_XDECREF(typ);
        Py_XDECREF(next_typ);
    }
done:
    PyMem_Free(bounds);
    PyMem_Free(firsts);
    return found;
}

#endif
