/* The pages of a MediaWiki export read in C (wikidump.py) where the XML is written as Wikimedia
 * writes it: elements, attributes, character data and the predefined and numeric references, in
 * UTF-8, a line break after each page. Anything else (a comment, CDATA, a carriage return, a name
 * outside ASCII, a malformed byte, an error of any kind) stops the reading at the last line break
 * between pages before it, and expat reads on from there: what this reader accepts, expat reads
 * alike, and every error is expat's. _pages.pyi gives the signature.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

enum { DONE, MORE, ODD, FAILED }; /* a step: done; the data ends first; not for this reader; a Python error */

#define MAX_DEPTH 64
#define MAX_ATTRS 16

/* What a page's tuple holds, in this order, as DumpParser captures it. */
enum { TITLE, NS, ID, REDIRECT, REVISION_ID, TIMESTAMP, TEXT, FIELDS };

typedef struct {
    const uint8_t *s;
    Py_ssize_t n, i;       /* the data, its length, where the reading is */
    char *out;             /* a kept value's bytes, references replaced */
    Py_ssize_t len, cap;
    Py_ssize_t max_field; /* the characters a field but the text and the redirect may have */
    PyObject *field[FIELDS];
} Reader;

static int pages_put(Reader *r, const void *p, Py_ssize_t k)
{
    if (k == 0) return DONE; /* r->out may still be NULL, which memcpy must not be given */
    if (r->len + k > r->cap) {
        Py_ssize_t cap = r->cap ? r->cap : 4096;
        while (cap < r->len + k) cap *= 2;
        char *out = PyMem_Realloc(r->out, (size_t)cap);
        if (!out) {
            PyErr_NoMemory();
            return FAILED;
        }
        r->out = out;
        r->cap = cap;
    }
    memcpy(r->out + r->len, p, (size_t)k);
    r->len += k;
    return DONE;
}

/* field[f] = the kept bytes as a str (they are valid UTF-8: every byte was checked on the way).
 * A field over max_field characters is DumpParser's error even where a later one would replace
 * it: the page is left to expat, which raises it. */
static int keep_field(Reader *r, int f)
{
    PyObject *v = PyUnicode_DecodeUTF8(r->out ? r->out : "", r->len, NULL);
    if (!v) return FAILED;
    if (f != TEXT && f != REDIRECT && PyUnicode_GET_LENGTH(v) > r->max_field) {
        Py_DECREF(v);
        return ODD;
    }
    Py_XSETREF(r->field[f], v);
    r->len = 0;
    return DONE;
}

/* The length of the UTF-8 sequence at s[i] (a byte of 0x80 or more) as expat takes it: 0 for one
 * it refuses (malformed, overlong, a surrogate, past U+10FFFF, U+FFFE or U+FFFF), -1 where the
 * data ends inside it. */
static int utf8_length(const uint8_t *s, Py_ssize_t i, Py_ssize_t n)
{
    const uint8_t c = s[i];
    uint8_t lo = 0x80, hi = 0xbf;
    int k;
    if (c >= 0xc2 && c <= 0xdf) {
        k = 2;
    } else if (c >= 0xe0 && c <= 0xef) {
        k = 3;
        if (c == 0xe0) lo = 0xa0;
        if (c == 0xed) hi = 0x9f;
    } else if (c >= 0xf0 && c <= 0xf4) {
        k = 4;
        if (c == 0xf0) lo = 0x90;
        if (c == 0xf4) hi = 0x8f;
    } else {
        return 0;
    }
    for (int j = 1; j < k; j++) {
        if (i + j >= n) return -1;
        const uint8_t b = s[i + j];
        if (b < (j == 1 ? lo : 0x80) || b > (j == 1 ? hi : 0xbf)) return 0;
    }
    if (c == 0xef && s[i + 1] == 0xbf && s[i + 2] >= 0xbe) return 0;
    return k;
}

static int xml_char(uint32_t v)
{
    return v == 0x9 || v == 0xa || v == 0xd || (v >= 0x20 && v <= 0xd7ff) || (v >= 0xe000 && v <= 0xfffd) ||
           (v >= 0x10000 && v <= 0x10ffff);
}

/* The reference at s[i] ('&'): its character's UTF-8 in u, its length; *end past its ';'. 0 for
 * one this reader leaves to expat (a name not predefined, a number not a character: expat's
 * errors), -1 where the data ends inside it. */
static int reference(const uint8_t *s, Py_ssize_t i, Py_ssize_t n, uint8_t u[4], Py_ssize_t *end)
{
    static const struct {
        const char *name;
        uint8_t c;
    } named[] = {{"amp;", '&'}, {"lt;", '<'}, {"gt;", '>'}, {"quot;", '"'}, {"apos;", '\''}};
    const Py_ssize_t at = i + 1;
    if (at >= n) return -1;
    if (s[at] != '#') {
        for (size_t k = 0; k < sizeof named / sizeof named[0]; k++) {
            const Py_ssize_t len = (Py_ssize_t)strlen(named[k].name), have = n - at < len ? n - at : len;
            if (memcmp(s + at, named[k].name, (size_t)have)) continue;
            if (have < len) return -1;
            u[0] = named[k].c;
            *end = at + len;
            return 1;
        }
        return 0;
    }
    const int hex = at + 1 < n && s[at + 1] == 'x';
    Py_ssize_t j = at + 1 + hex;
    uint32_t v = 0;
    int digits = 0;
    for (;; j++) {
        if (j >= n) return -1;
        const uint8_t c = s[j];
        int d;
        if (c >= '0' && c <= '9') d = c - '0';
        else if (hex && (c | 0x20) >= 'a' && (c | 0x20) <= 'f') d = (c | 0x20) - 'a' + 10;
        else break;
        if (++digits > 7) return 0;
        v = v * (hex ? 16 : 10) + (uint32_t)d;
    }
    if (!digits || s[j] != ';' || !xml_char(v)) return 0;
    *end = j + 1;
    if (v < 0x80) {
        u[0] = (uint8_t)v;
        return 1;
    }
    if (v < 0x800) {
        u[0] = (uint8_t)(0xc0 | v >> 6);
        u[1] = (uint8_t)(0x80 | (v & 0x3f));
        return 2;
    }
    if (v < 0x10000) {
        u[0] = (uint8_t)(0xe0 | v >> 12);
        u[1] = (uint8_t)(0x80 | (v >> 6 & 0x3f));
        u[2] = (uint8_t)(0x80 | (v & 0x3f));
        return 3;
    }
    u[0] = (uint8_t)(0xf0 | v >> 18);
    u[1] = (uint8_t)(0x80 | (v >> 12 & 0x3f));
    u[2] = (uint8_t)(0x80 | (v >> 6 & 0x3f));
    u[3] = (uint8_t)(0x80 | (v & 0x3f));
    return 4;
}

/* The first byte at or after i that character data cannot simply pass: '<', '&', '>' (the end of
 * "]]>", which is not allowed there; the dumps write '>' as "&gt;", where ']' comes twice a
 * link), a byte of 0x80 or more, or a control character other than tab and line feed; n if none.
 * Sixteen bytes at a time (SSE2), as a page's text is long runs of plain ASCII. */
static inline Py_ssize_t next_special(const uint8_t *s, Py_ssize_t i, Py_ssize_t n)
{
#if defined(__SSE2__)
    const __m128i lt = _mm_set1_epi8('<'), amp = _mm_set1_epi8('&'), gt = _mm_set1_epi8('>'),
                  space = _mm_set1_epi8(0x20), lf = _mm_set1_epi8('\n'), tab = _mm_set1_epi8('\t');
    for (; i + 16 <= n; i += 16) {
        const __m128i v = _mm_loadu_si128((const __m128i *)(s + i));
        /* signed: bytes of 0x80 and more are below 0x20 too */
        const __m128i low = _mm_andnot_si128(_mm_or_si128(_mm_cmpeq_epi8(v, lf), _mm_cmpeq_epi8(v, tab)),
                                             _mm_cmplt_epi8(v, space));
        const int hit = _mm_movemask_epi8(_mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, lt), _mm_cmpeq_epi8(v, amp)),
                                                       _mm_or_si128(_mm_cmpeq_epi8(v, gt), low)));
        if (hit) return i + __builtin_ctz((unsigned)hit);
    }
#endif
    for (; i < n; i++) {
        const uint8_t c = s[i];
        if (c == '<' || c == '&' || c == '>' || c >= 0x80 || (c < 0x20 && c != '\n' && c != '\t')) return i;
    }
    return n;
}

/* Character data up to the next '<' (where it stops), kept in r->out when `keep`. */
static int chars(Reader *r, int keep)
{
    const uint8_t *s = r->s;
    const Py_ssize_t n = r->n;
    Py_ssize_t i = r->i, run = i;
    for (;;) {
        i = next_special(s, i, n);
        if (i == n) return MORE;
        const uint8_t c = s[i];
        if (c == '<') break;
        if (c == '&') {
            uint8_t u[4];
            Py_ssize_t end;
            const int k = reference(s, i, n, u, &end);
            if (k <= 0) return k < 0 ? MORE : ODD;
            if (keep && (pages_put(r, s + run, i - run) || pages_put(r, u, k))) return FAILED;
            i = run = end;
        } else if (c == '>') {
            if (i - 2 >= r->i && s[i - 1] == ']' && s[i - 2] == ']') return ODD; /* expat's error */
            i++;
        } else if (c >= 0x80) {
            const int k = utf8_length(s, i, n);
            if (k <= 0) return k < 0 ? MORE : ODD;
            i += k;
        } else {
            return ODD; /* a control character or a carriage return (expat turns \r\n into \n) */
        }
    }
    if (keep && pages_put(r, s + run, i - run)) return FAILED;
    r->i = i;
    return DONE;
}

static inline int name_start(uint8_t c)
{
    return ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') || c == '_' || c == ':';
}

static inline int name_char(uint8_t c) { return name_start(c) || (c >= '0' && c <= '9') || c == '.' || c == '-'; }

/* An ASCII name at r->i, its length in *len. */
static int name(Reader *r, Py_ssize_t *len)
{
    Py_ssize_t i = r->i;
    if (i >= r->n) return MORE;
    if (!name_start(r->s[i])) return ODD;
    while (++i < r->n && name_char(r->s[i]))
        ;
    if (i >= r->n) return MORE;
    if (r->s[i] >= 0x80) return ODD;
    *len = i - r->i;
    r->i = i;
    return DONE;
}

/* Spaces, tabs and line feeds at r->i; *some: whether there was one. */
static int space(Reader *r, int *some)
{
    const Py_ssize_t from = r->i;
    while (r->i < r->n && (r->s[r->i] == ' ' || r->s[r->i] == '\t' || r->s[r->i] == '\n')) r->i++;
    if (r->i >= r->n) return MORE;
    if (r->s[r->i] == '\r') return ODD;
    *some = r->i > from;
    return DONE;
}

/* A quoted attribute value at r->i, kept in r->out when `keep` (tab and line feed as a space, as
 * XML normalises them). */
static int value(Reader *r, int keep)
{
    const uint8_t *s = r->s;
    const Py_ssize_t n = r->n;
    if (r->i >= n) return MORE;
    const uint8_t quote = s[r->i];
    if (quote != '"' && quote != '\'') return ODD;
    Py_ssize_t i = r->i + 1;
    for (;;) {
        if (i >= n) return MORE;
        const uint8_t c = s[i];
        int k = 1;
        uint8_t u[4];
        const uint8_t *bytes = s + i;
        if (c == quote) break;
        if (c == '<') return ODD;
        if (c == '&') {
            Py_ssize_t end;
            k = reference(s, i, n, u, &end);
            if (k <= 0) return k < 0 ? MORE : ODD;
            if (keep && pages_put(r, u, k)) return FAILED;
            i = end;
            continue;
        }
        if (c >= 0x80) {
            k = utf8_length(s, i, n);
            if (k <= 0) return k < 0 ? MORE : ODD;
        } else if (c == '\t' || c == '\n') {
            bytes = (const uint8_t *)" ";
        } else if (c < 0x20) {
            return ODD;
        }
        if (keep && pages_put(r, bytes, k)) return FAILED;
        i += k;
    }
    r->i = i + 1;
    return DONE;
}

static int is(const uint8_t *p, Py_ssize_t len, const char *word)
{
    return len == (Py_ssize_t)strlen(word) && !memcmp(p, word, (size_t)len);
}

/* A start tag's attributes and its end, from just past its name; *empty: it ended with "/>". A
 * <redirect>'s `title` goes to field[REDIRECT]. */
static int attributes(Reader *r, int redirect, int *empty)
{
    const uint8_t *names[MAX_ATTRS];
    Py_ssize_t lens[MAX_ATTRS];
    int count = 0, st, spaced;
    for (;;) {
        if ((st = space(r, &spaced))) return st;
        const uint8_t c = r->s[r->i];
        if (c == '>' || c == '/') {
            if (c == '/' && r->i + 1 >= r->n) return MORE;
            if (c == '/' && r->s[r->i + 1] != '>') return ODD;
            *empty = c == '/';
            r->i += 1 + (c == '/');
            return DONE;
        }
        if (!spaced || count == MAX_ATTRS) return ODD;
        const uint8_t *at = r->s + r->i;
        Py_ssize_t len;
        if ((st = name(r, &len))) return st;
        for (int j = 0; j < count; j++)
            if (lens[j] == len && !memcmp(names[j], at, (size_t)len)) return ODD; /* expat's error */
        names[count] = at;
        lens[count++] = len;
        if ((st = space(r, &spaced))) return st;
        if (r->s[r->i] != '=') return ODD;
        r->i++;
        if ((st = space(r, &spaced))) return st;
        const int keep = redirect && is(at, len, "title");
        r->len = 0;
        if ((st = value(r, keep)) || (keep && (st = keep_field(r, REDIRECT)))) return st;
    }
}

/* The field an element's characters are kept in, by its parent's name and its own (DumpParser's
 * _CAPTURE), -1 for none. */
static int field_of(const uint8_t *parent, Py_ssize_t plen, const uint8_t *tag, Py_ssize_t len)
{
    if (is(parent, plen, "page"))
        return is(tag, len, "title") ? TITLE : is(tag, len, "ns") ? NS : is(tag, len, "id") ? ID : -1;
    if (is(parent, plen, "revision"))
        return is(tag, len, "id") ? REVISION_ID : is(tag, len, "timestamp") ? TIMESTAMP : is(tag, len, "text") ? TEXT : -1;
    return -1;
}

/* A <page> element's content and end tag, from just past "<page>": its fields into r->field, the
 * last of each as DumpParser keeps it. An element inside a kept one, a nested <page>, or a
 * <siteinfo> or <namespaces> (which DumpParser reads as the dump's) are left to expat. */
static int page(Reader *r)
{
    const uint8_t *open[MAX_DEPTH];
    Py_ssize_t open_len[MAX_DEPTH];
    int depth = 1, kept = -1, st, spaced, empty;
    open[0] = (const uint8_t *)"page";
    open_len[0] = 4;
    for (;;) {
        if ((st = chars(r, kept >= 0))) return st;
        const Py_ssize_t i = r->i; /* at '<' */
        if (i + 1 >= r->n) return MORE;
        const uint8_t next = r->s[i + 1];
        const uint8_t *tag = r->s + i + 1 + (next == '/');
        Py_ssize_t len;
        r->i = tag - r->s;
        if (next == '!' || next == '?') return ODD;
        if ((st = name(r, &len))) return st;
        if (next == '/') {
            if (len != open_len[depth - 1] || memcmp(tag, open[depth - 1], (size_t)len)) return ODD; /* expat's error */
            if ((st = space(r, &spaced))) return st;
            if (r->s[r->i++] != '>') return ODD;
            if (kept >= 0 && (st = keep_field(r, kept))) return st;
            kept = -1;
            if (--depth == 0) return DONE;
            continue;
        }
        if (kept >= 0 || depth == MAX_DEPTH || is(tag, len, "page") || is(tag, len, "siteinfo") ||
            is(tag, len, "namespaces"))
            return ODD;
        const int redirect = is(tag, len, "redirect"), f = field_of(open[depth - 1], open_len[depth - 1], tag, len);
        if (redirect && (r->len = 0, (st = keep_field(r, REDIRECT)))) return st; /* "" until a title says */
        if ((st = attributes(r, redirect, &empty))) return st;
        r->len = 0;
        if (empty) {
            if (f >= 0 && (st = keep_field(r, f))) return st;
            continue;
        }
        open[depth] = tag;
        open_len[depth++] = len;
        kept = f;
    }
}

/* Whole pages from data[start:], where a line of the root element's content begins. */
static PyObject *pages_fast_scan(PyObject *self, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"data", "start", "final", "max_field_chars", NULL};
    Py_buffer view;
    Py_ssize_t start, max_field = PY_SSIZE_T_MAX;
    int final;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "y*np|n:scan", kwlist, &view, &start, &final, &max_field))
        return NULL;
    if (max_field < 0) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "scan: max_field_chars must be zero or more");
        return NULL;
    }
    Reader r = {.s = view.buf, .n = view.len, .max_field = max_field};
    PyObject *pages = PyList_New(0);
    Py_ssize_t safe = start < 0 ? 0 : start > view.len ? view.len : start;
    int st = pages ? DONE : FAILED;
    while (st == DONE) {
        for (int f = 0; f < FIELDS; f++) Py_CLEAR(r.field[f]);
        const uint8_t *s = r.s;
        const Py_ssize_t n = r.n;
        Py_ssize_t i = safe;
        while (i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n')) i++;
        if (n - i < 6) {
            st = i < n && memcmp(s + i, "<page>", (size_t)(n - i)) ? ODD : MORE;
            break;
        }
        if (memcmp(s + i, "<page>", 6)) {
            st = ODD;
            break;
        }
        r.i = i + 6;
        if ((st = page(&r))) break;
        for (i = r.i; i < n && (s[i] == ' ' || s[i] == '\t');) i++;
        if (i >= n || s[i] != '\n') {
            st = i >= n ? MORE : ODD;
            break;
        }
        safe = i + 1;
        PyObject *item = PyTuple_New(FIELDS + 1);
        if (!item) {
            st = FAILED;
            break;
        }
        for (int f = 0; f < FIELDS; f++) {
            PyTuple_SET_ITEM(item, f, r.field[f] ? r.field[f] : Py_NewRef(Py_None));
            r.field[f] = NULL;
        }
        PyObject *end = PyLong_FromSsize_t(safe);
        if (!end || (PyTuple_SET_ITEM(item, FIELDS, end), PyList_Append(pages, item))) st = FAILED;
        Py_DECREF(item);
    }
    for (int f = 0; f < FIELDS; f++) Py_XDECREF(r.field[f]);
    PyMem_Free(r.out);
    PyBuffer_Release(&view);
    if (st == FAILED) {
        Py_XDECREF(pages);
        return NULL;
    }
    return Py_BuildValue("(NnO)", pages, safe, st == ODD || final ? Py_True : Py_False);
}

static PyMethodDef methods[] = {
    {"scan", (PyCFunction)(void (*)(void))pages_fast_scan, METH_VARARGS | METH_KEYWORDS,
     "scan(data, start, final) -> (pages, stop, hand_over): see _pages.pyi"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_pages", NULL, -1, methods};

PyMODINIT_FUNC PyInit__pages(void) { return PyModule_Create(&module); }
