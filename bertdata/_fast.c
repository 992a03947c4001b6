/* The compiled inner loops of bertdata: the reference instance algorithm (with CPython's
 * Mersenne Twister replayed bit for bit), the word-piece cache of the tokenizer and the
 * wikitext cleaner's space squeezing.
 *
 * Plain CPython C API: arrays come in through the buffer protocol, so the module builds
 * without numpy headers and loads in microseconds, where a JIT costs about a second per
 * process. Every array's element type and shape are checked, every index that comes from
 * data is checked, and every value stored into a narrower integer is checked to fit, so bad
 * input raises a Python exception instead of corrupting memory or wrapping silently.
 * The Python wrappers (kernel.py, tokenize.py) own allocation: a function that may need
 * more room than it was given says how much, and the caller regrows and calls again.
 * _fast.pyi gives the signatures.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* ---- arrays through the buffer protocol --------------------------------------------------- */

enum { K_BOOL, K_I8, K_U8, K_I16, K_U16, K_I32, K_U32, K_I64, K_U64 };
/* For `require`: any integer kind but uint64, whose upper half int64 arithmetic cannot hold. */
#define K_INT (-1)

static const char *const KIND_NAMES[] = {"bool", "int8", "uint8", "int16", "uint16", "int32",
                                         "uint32", "int64", "uint64"};
/* The values each kind holds (uint64 arrays are only ever written from int64 values). */
static const int64_t KIND_MIN[] = {0, INT8_MIN, 0, INT16_MIN, 0, INT32_MIN, 0, INT64_MIN, 0};
static const int64_t KIND_MAX[] = {1, INT8_MAX, UINT8_MAX, INT16_MAX, UINT16_MAX, INT32_MAX,
                                   UINT32_MAX, INT64_MAX, INT64_MAX};

typedef struct {
    const char *name; /* the argument's name, for error messages */
    Py_buffer view;
    char *data;
    Py_ssize_t len;  /* elements in all */
    Py_ssize_t rows; /* shape[0] (1 for a scalar) */
    Py_ssize_t cols; /* shape[1] (1 unless 2-d) */
    int kind;
} Arr;

static int kind_of(const Py_buffer *view, int *kind)
{
    const char *f = view->format ? view->format : "B";
    if (*f == '@' || *f == '=' || *f == (PY_LITTLE_ENDIAN ? '<' : '>'))
        f++;
    if (f[0] == '\0' || f[1] != '\0')
        return -1;
    int is_signed;
    if (f[0] == '?') {
        *kind = K_BOOL;
        return view->itemsize == 1 ? 0 : -1;
    }
    if (strchr("bhilqn", f[0]))
        is_signed = 1;
    else if (strchr("BHILQN", f[0]))
        is_signed = 0;
    else
        return -1;
    switch (view->itemsize) {
    case 1: *kind = is_signed ? K_I8 : K_U8; return 0;
    case 2: *kind = is_signed ? K_I16 : K_U16; return 0;
    case 4: *kind = is_signed ? K_I32 : K_U32; return 0;
    case 8: *kind = is_signed ? K_I64 : K_U64; return 0;
    }
    return -1;
}

static int arr_convert(PyObject *obj, Arr *a, int writable)
{
    if (obj == NULL) { /* parsing failed on a later argument: release this one */
        PyBuffer_Release(&a->view);
        return 1;
    }
    int flags = PyBUF_FORMAT | PyBUF_C_CONTIGUOUS | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(obj, &a->view, flags) < 0) {
        /* The exporter's message ("ndarray is not C-contiguous") does not say which argument. */
        if (!PyErr_ExceptionMatches(PyExc_ValueError) && !PyErr_ExceptionMatches(PyExc_TypeError)
            && !PyErr_ExceptionMatches(PyExc_BufferError))
            return 0;
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "%s must be a C-contiguous%s integer array, not %.100s",
                     a->name, writable ? ", writable" : "", Py_TYPE(obj)->tp_name);
        return 0;
    }
    if (kind_of(&a->view, &a->kind) < 0 || a->view.ndim > 2) {
        PyErr_Format(PyExc_TypeError, "%s must be an integer array of at most 2 dimensions, "
                     "not format %s with %d dimensions", a->name,
                     a->view.format ? a->view.format : "B", a->view.ndim);
        PyBuffer_Release(&a->view);
        return 0;
    }
    a->data = a->view.buf;
    a->len = a->view.len / a->view.itemsize;
    a->rows = a->view.ndim >= 1 ? a->view.shape[0] : 1;
    a->cols = a->view.ndim == 2 ? a->view.shape[1] : 1;
    return Py_CLEANUP_SUPPORTED;
}

static int conv_in(PyObject *obj, void *a) { return arr_convert(obj, a, 0); }
static int conv_out(PyObject *obj, void *a) { return arr_convert(obj, a, 1); }

static void release(Arr **arrays, int n)
{
    for (int i = 0; i < n; i++)
        PyBuffer_Release(&arrays[i]->view);
}

/* `kind` is a K_* or K_INT; a wrong element type is a TypeError, a wrong rank a ValueError. */
static int require(const Arr *a, int kind, int ndim)
{
    if (kind == K_INT ? a->kind == K_U64 : a->kind != kind) {
        PyErr_Format(PyExc_TypeError, "%s must be %s, not %s", a->name,
                     kind == K_INT ? "an integer array (uint64 does not fit int64)" : KIND_NAMES[kind],
                     KIND_NAMES[a->kind]);
        return -1;
    }
    if (a->view.ndim != ndim) {
        PyErr_Format(PyExc_ValueError, "%s must have %d dimension%s, not %d", a->name, ndim,
                     ndim == 1 ? "" : "s", a->view.ndim);
        return -1;
    }
    return 0;
}

static inline int64_t get(const Arr *a, Py_ssize_t i)
{
    switch (a->kind) {
    case K_BOOL: return ((const uint8_t *)a->data)[i] != 0;
    case K_I8: return ((const int8_t *)a->data)[i];
    case K_U8: return ((const uint8_t *)a->data)[i];
    case K_I16: return ((const int16_t *)a->data)[i];
    case K_U16: return ((const uint16_t *)a->data)[i];
    case K_I32: return ((const int32_t *)a->data)[i];
    case K_U32: return ((const uint32_t *)a->data)[i];
    case K_I64: return ((const int64_t *)a->data)[i];
    default: return (int64_t)((const uint64_t *)a->data)[i];
    }
}

/* Stores a value the element type is known to hold. */
static inline void store(Arr *a, Py_ssize_t i, int64_t v)
{
    switch (a->kind) {
    case K_BOOL: ((uint8_t *)a->data)[i] = (uint8_t)v; break;
    case K_I8: ((int8_t *)a->data)[i] = (int8_t)v; break;
    case K_U8: ((uint8_t *)a->data)[i] = (uint8_t)v; break;
    case K_I16: ((int16_t *)a->data)[i] = (int16_t)v; break;
    case K_U16: ((uint16_t *)a->data)[i] = (uint16_t)v; break;
    case K_I32: ((int32_t *)a->data)[i] = (int32_t)v; break;
    case K_U32: ((uint32_t *)a->data)[i] = (uint32_t)v; break;
    case K_I64: ((int64_t *)a->data)[i] = v; break;
    default: ((uint64_t *)a->data)[i] = (uint64_t)v; break;
    }
}

static inline int fits(const Arr *a, int64_t v)
{
    return v >= KIND_MIN[a->kind] && v <= KIND_MAX[a->kind];
}

/* Stores v if the element type holds it, else returns -1 without setting an exception (the
 * caller may be running without the GIL) and the caller reports it with `overflow`. */
static inline int put(Arr *a, Py_ssize_t i, int64_t v)
{
    if (!fits(a, v))
        return -1;
    store(a, i, v);
    return 0;
}

static int overflow(const Arr *a, int64_t v)
{
    PyErr_Format(PyExc_OverflowError, "%s: %lld does not fit its %s elements", a->name, (long long)v,
                 KIND_NAMES[a->kind]);
    return -1;
}

/* ---- CPython's Mersenne Twister ------------------------------------------------------------ */

#define MT_N 624
#define MT_M 397

typedef struct {
    uint32_t mt[MT_N];
    Py_ssize_t index;
} MT;

/* `state`: random.Random.getstate()'s 624 words and index, as int64. */
static int mt_load(MT *r, const Arr *state)
{
    if (require(state, K_I64, 1) < 0)
        return -1;
    const int64_t *s = (const int64_t *)state->data;
    if (state->len != MT_N + 1) {
        PyErr_Format(PyExc_ValueError, "state must be 625 words (getstate()'s 624 and its index), not %zd",
                     state->len);
        return -1;
    }
    for (int i = 0; i < MT_N; i++)
        if (s[i] < 0 || s[i] > UINT32_MAX) {
            PyErr_Format(PyExc_OverflowError, "state: word %d (%lld) is not a 32-bit word", i, (long long)s[i]);
            return -1;
        }
    if (s[MT_N] < 0 || s[MT_N] > MT_N) {
        PyErr_Format(PyExc_ValueError, "state: index %lld is not in 0..624", (long long)s[MT_N]);
        return -1;
    }
    for (int i = 0; i < MT_N; i++)
        r->mt[i] = (uint32_t)s[i];
    r->index = (Py_ssize_t)s[MT_N];
    return 0;
}

static void mt_store(const MT *r, Arr *state)
{
    int64_t *s = (int64_t *)state->data;
    for (int i = 0; i < MT_N; i++)
        s[i] = r->mt[i];
    s[MT_N] = r->index;
}

#define MT_MIX(upper, lower, other) \
    ((other) ^ ((((upper) & 0x80000000u) | ((lower) & 0x7fffffffu)) >> 1) ^ (((lower) & 1u) * 0x9908b0dfu))

static void mt_twist(uint32_t *mt)
{
    /* CPython's three loops: later words read already regenerated ones. */
    int kk;
    for (kk = 0; kk < MT_N - MT_M; kk++)
        mt[kk] = MT_MIX(mt[kk], mt[kk + 1], mt[kk + MT_M]);
    for (; kk < MT_N - 1; kk++)
        mt[kk] = MT_MIX(mt[kk], mt[kk + 1], mt[kk + MT_M - MT_N]);
    mt[MT_N - 1] = MT_MIX(mt[MT_N - 1], mt[0], mt[MT_M - 1]);
}

static inline uint64_t mt_uint32(MT *r)
{
    if (r->index >= MT_N) {
        mt_twist(r->mt);
        r->index = 0;
    }
    uint32_t y = r->mt[r->index++];
    y ^= y >> 11;
    y ^= (y << 7) & 0x9d2c5680u;
    y ^= (y << 15) & 0xefc60000u;
    y ^= y >> 18;
    return y;
}

/* random.random(): 53 bits from two words (the sum is exact, so contraction cannot change it). */
static inline double mt_random(MT *r)
{
    uint64_t a = mt_uint32(r) >> 5, b = mt_uint32(r) >> 6;
    return ((double)a * 67108864.0 + (double)b) * (1.0 / 9007199254740992.0);
}

static inline int bit_length(uint64_t n)
{
    int k = 0;
    while (n) {
        k++;
        n >>= 1;
    }
    return k;
}

/* random._randbelow_with_getrandbits for 1 <= n < 2**32: the top n.bit_length() bits of a
 * word, rejected until < n (so even n == 1 consumes a word). Callers guarantee the range. */
static inline int64_t mt_randbelow(MT *r, int64_t n)
{
    int shift = 32 - bit_length((uint64_t)n);
    uint64_t v = mt_uint32(r) >> shift;
    while (v >= (uint64_t)n)
        v = mt_uint32(r) >> shift;
    return (int64_t)v;
}

static inline int64_t mt_randint(MT *r, int64_t a, int64_t b)
{
    return a + mt_randbelow(r, b - a + 1);
}

/* random.shuffle (Fisher-Yates from the end: x[i] swaps with x[randbelow(i + 1)]), with the
 * bit length tracked as i falls: the masking shuffles every candidate of every instance.
 * len <= 2**32. */
static void mt_shuffle(MT *r, int64_t *x, Py_ssize_t len)
{
    Py_ssize_t i = len - 1;
    if (i < 1)
        return;
    int bits = bit_length((uint64_t)(i + 1));
    int shift = 32 - bits;
    int64_t low = (int64_t)1 << (bits - 1); /* smallest n with this bit length */
    while (i > 0) {
        int64_t n = i + 1;
        if (n < low) {
            shift++;
            low >>= 1;
        }
        uint64_t j = mt_uint32(r) >> shift;
        while (j >= (uint64_t)n)
            j = mt_uint32(r) >> shift;
        int64_t tmp = x[i];
        x[i] = x[j];
        x[j] = tmp;
        i--;
    }
}

static PyObject *fast_shuffle(PyObject *self, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"state", "x", NULL};
    Arr state = {.name = "state"}, x = {.name = "x"};
    Arr *all[] = {&state, &x};
    MT r;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O&O&:shuffle", kwlist, conv_out, &state, conv_out, &x))
        return NULL;
    if (mt_load(&r, &state) < 0 || require(&x, K_I64, 1) < 0)
        goto fail;
    if (x.len > ((Py_ssize_t)1 << 31)) {
        PyErr_SetString(PyExc_ValueError, "shuffle: x has more than 2**31 elements");
        goto fail;
    }
    Py_BEGIN_ALLOW_THREADS
    mt_shuffle(&r, (int64_t *)x.data, x.len);
    Py_END_ALLOW_THREADS
    mt_store(&r, &state);
    release(all, 2);
    Py_RETURN_NONE;
fail:
    release(all, 2);
    return NULL;
}

/* The draws the instance loop makes, one call each, for kernel.py's check of the replay against
 * this Python's `random`: bound 0 draws random(), any other randbelow(bound). */
static PyObject *fast_replay(PyObject *self, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"state", "bounds", NULL};
    Arr state = {.name = "state"}, bounds = {.name = "bounds"};
    Arr *all[] = {&state, &bounds};
    PyObject *drawn = NULL;
    MT r;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O&O&:replay", kwlist, conv_out, &state, conv_in, &bounds))
        return NULL;
    if (mt_load(&r, &state) < 0 || require(&bounds, K_INT, 1) < 0)
        goto fail;
    for (Py_ssize_t k = 0; k < bounds.len; k++)
        if (get(&bounds, k) < 0 || get(&bounds, k) > UINT32_MAX) {
            PyErr_Format(PyExc_ValueError, "bounds: %lld is not in 0..2**32-1", (long long)get(&bounds, k));
            goto fail;
        }
    if (!(drawn = PyList_New(bounds.len)))
        goto fail;
    for (Py_ssize_t k = 0; k < bounds.len; k++) {
        const int64_t n = get(&bounds, k);
        PyObject *v = n ? PyLong_FromLongLong(mt_randbelow(&r, n)) : PyFloat_FromDouble(mt_random(&r));
        if (!v)
            goto fail;
        PyList_SET_ITEM(drawn, k, v);
    }
    mt_store(&r, &state);
    release(all, 2);
    return drawn;
fail:
    Py_XDECREF(drawn);
    release(all, 2);
    return NULL;
}

/* ---- the reference instance algorithm ------------------------------------------------------ */

/* generate()'s arguments: one field per keyword. */
typedef struct {
    Arr tokens, sentence_offsets, doc_offsets; /* the corpus (see kernel.py) */
    Py_ssize_t max_seq_length, max_predictions_per_seq, dupe_factor;
    double short_seq_prob;
    Arr num_to_predict, vocab_words;
    Arr word_continues; /* per token id: 1 where it continues the word before it (whole-word masking) */
    long long cls_id, sep_id, mask_id;
    Arr spans, random_next, positions, labels, shown; /* the output: row i is instance i */
} Job;

/* One run of the algorithm, which holds no GIL: scratch sized once, and what went wrong. */
typedef struct {
    Job *g;
    MT *rng;
    int64_t *docs;       /* the document order after the first shuffle */
    int64_t *seq;        /* one instance's tokens: [CLS] A [SEP] B [SEP] */
    int64_t *candidates; /* its positions that may be masked, in order */
    int64_t *words;      /* its candidates grouped into words: first candidate << 32 | count */
    int64_t *picked_pos, *picked_new; /* its predictions: positions, sorted, and ids shown there */
    Py_ssize_t count;    /* instances made; those below the output's rows are written */
    const Arr *bad;      /* an output array a value did not fit, reported once the GIL is back */
    int64_t bad_value;
} Run;

/* Segments A and B of one instance, as [lo, hi) offsets into the tokens. */
typedef struct {
    int64_t a_lo, a_hi, b_lo, b_hi;
} Pair;

/* Rejects what would make the loop read out of bounds, draw from a range the replay cannot,
 * or never end. */
static int check_job(const Job *g)
{
    const Arr *so = &g->sentence_offsets, *dof = &g->doc_offsets;
    if (require(&g->tokens, K_INT, 1) < 0 || require(so, K_INT, 1) < 0 || require(dof, K_INT, 1) < 0
        || require(&g->num_to_predict, K_INT, 1) < 0 || require(&g->vocab_words, K_INT, 1) < 0
        || require(&g->word_continues, K_BOOL, 1) < 0 || require(&g->spans, K_INT, 2) < 0 || require(&g->random_next, K_INT, 1) < 0
        || require(&g->positions, K_INT, 2) < 0 || require(&g->labels, K_INT, 2) < 0
        || require(&g->shown, K_INT, 2) < 0)
        return -1;
    const Py_ssize_t num_sentences = so->len - 1, num_docs = dof->len - 1;
    /* The draws are 32-bit (randint(2, max_seq_length - 3), randint over documents, sentences
     * and vocab words), as is a prediction's position. */
    const Py_ssize_t limit = (Py_ssize_t)1 << 31;
    if (g->max_seq_length < 5 || g->max_seq_length >= limit)
        return PyErr_Format(PyExc_ValueError, "max_seq_length must be in 5..2**31-1, not %zd",
                            g->max_seq_length), -1;
    if (g->dupe_factor < 0 || g->max_predictions_per_seq < 1)
        return PyErr_SetString(PyExc_ValueError, "dupe_factor must be >= 0 and max_predictions_per_seq >= 1"), -1;
    if (num_sentences < 0 || num_docs < 0 || get(so, 0) != 0 || get(dof, 0) != 0)
        return PyErr_SetString(PyExc_ValueError, "sentence_offsets and doc_offsets must start at 0"), -1;
    if (num_docs >= limit || num_sentences >= limit || g->vocab_words.len >= limit)
        return PyErr_SetString(PyExc_ValueError, "at most 2**31-1 documents, sentences and vocab words"), -1;
    for (Py_ssize_t s = 0; s < num_sentences; s++)
        if (get(so, s + 1) < get(so, s))
            return PyErr_SetString(PyExc_ValueError, "sentence_offsets must not decrease"), -1;
    if (get(so, num_sentences) > g->tokens.len)
        return PyErr_SetString(PyExc_ValueError, "sentence_offsets run past the tokens"), -1;
    for (Py_ssize_t d = 0; d < num_docs; d++)
        if (get(dof, d + 1) <= get(dof, d))
            return PyErr_SetString(PyExc_ValueError, "every document needs a sentence (doc_offsets must rise)"), -1;
    if (get(dof, num_docs) > num_sentences)
        return PyErr_SetString(PyExc_ValueError, "doc_offsets run past the sentences"), -1;
    if (g->vocab_words.len < 1 || g->num_to_predict.len < g->max_seq_length + 1)
        return PyErr_SetString(PyExc_ValueError, "vocab_words must not be empty and num_to_predict needs "
                               "max_seq_length + 1 entries"), -1;
    const Py_ssize_t rows = g->spans.rows, p = g->max_predictions_per_seq;
    if (g->spans.cols != 4 || g->random_next.len != rows || g->positions.rows != rows
        || g->positions.cols != p || g->labels.rows != rows || g->labels.cols != p
        || g->shown.rows != rows || g->shown.cols != p)
        return PyErr_SetString(PyExc_ValueError, "output arrays must be spans [N, 4], random_next [N] and "
                               "positions, labels and shown [N, max_predictions_per_seq]"), -1;
    for (Py_ssize_t n = 0; n <= g->max_seq_length; n++)
        if (get(&g->num_to_predict, n) > p)
            return PyErr_SetString(PyExc_ValueError, "num_to_predict exceeds max_predictions_per_seq"), -1;
    /* The masking looks every token up in word_continues. */
    for (Py_ssize_t k = 0; k < g->tokens.len; k++)
        if (get(&g->tokens, k) < 0 || get(&g->tokens, k) >= g->word_continues.len)
            return PyErr_Format(PyExc_ValueError, "tokens: id %lld has no entry in word_continues (%zd ids)",
                                (long long)get(&g->tokens, k), g->word_continues.len), -1;
    return 0;
}

/* The reference's truncate_seq_pair: "Truncates a pair of sequences to a maximum sequence
 * length", a token at a time from the longer one (B on a tie), "sometimes from the front and
 * sometimes from the back to add more randomness and avoid biases". */
static inline void truncate_seq_pair(Pair *p, int64_t max_num_tokens, MT *r)
{
    while ((p->a_hi - p->a_lo) + (p->b_hi - p->b_lo) > max_num_tokens) {
        int64_t *lo = &p->b_lo, *hi = &p->b_hi;
        if (p->a_hi - p->a_lo > p->b_hi - p->b_lo) {
            lo = &p->a_lo;
            hi = &p->a_hi;
        }
        if (mt_random(r) < 0.5)
            (*lo)++;
        else
            (*hi)--;
    }
}

/* The reference's create_masked_lm_predictions on run->seq. Candidates are the positions but
 * [CLS] and [SEP], grouped into words: a piece that word_continues marks (a "##" piece) joins
 * the word of the candidate before it -- across the [SEP] between A and B too, as the reference
 * groups -- and with no piece marked every piece is a word (token masking). The words are
 * shuffled and taken in that order while they fit num_to_predict; a word that would pass it is
 * skipped and the next tried. Leaves the predictions sorted by position in picked_pos, the ids
 * shown there in picked_new; returns how many. */
static inline int64_t create_masked_lm_predictions(Run *run, Py_ssize_t n_tok)
{
    const Job *g = run->g;
    MT *r = run->rng;
    const int64_t *seq = run->seq;
    const uint8_t *continues = (const uint8_t *)g->word_continues.data;
    int64_t *candidates = run->candidates, *words = run->words;
    int64_t *picked_pos = run->picked_pos, *picked_new = run->picked_new;
    /* The reference excludes by token, so a "[SEP]" typed in the text is never masked either. */
    Py_ssize_t n_cand = 0, n_words = 0;
    for (Py_ssize_t k = 0; k < n_tok; k++)
        if (seq[k] != g->cls_id && seq[k] != g->sep_id) {
            if (n_words && continues[seq[k]])
                words[n_words - 1]++;
            else
                words[n_words++] = (int64_t)n_cand << 32 | 1;
            candidates[n_cand++] = k;
        }
    mt_shuffle(r, words, n_words);
    const int64_t n_pred = get(&g->num_to_predict, n_tok);
    int64_t n_masked = 0;
    /* The reference also skips a word with a position already taken: words never share one. */
    for (Py_ssize_t w = 0; w < n_words && n_masked < n_pred; w++) {
        const int64_t first = words[w] >> 32, count = words[w] & 0xffffffff;
        if (n_masked + count > n_pred)
            continue;
        for (int64_t c = first; c < first + count; c++) {
            const int64_t k = candidates[c];
            /* 80% of the time [MASK], 10% the original token, 10% a random word: the BERT
             * paper's mix, since [MASK] never appears in fine-tuning. */
            int64_t replacement;
            if (mt_random(r) < 0.8)
                replacement = g->mask_id;
            else if (mt_random(r) < 0.5)
                replacement = seq[k];
            else
                replacement = get(&g->vocab_words, mt_randint(r, 0, g->vocab_words.len - 1));
            /* Insertion sort by position: the reference sorts its predictions. */
            int64_t q = n_masked++;
            while (q > 0 && picked_pos[q - 1] > k) {
                picked_pos[q] = picked_pos[q - 1];
                picked_new[q] = picked_new[q - 1];
                q--;
            }
            picked_pos[q] = k;
            picked_new[q] = replacement;
        }
    }
    return n_masked;
}

static int bad_value(Run *run, const Arr *a, int64_t v)
{
    run->bad = a;
    run->bad_value = v;
    return -1;
}

/* Counts the instance and writes it to its row if the output has one: the count tells the
 * caller how many rows a rerun needs. -1 if a value does not fit its array. */
static inline int add_instance(Run *run, const Pair *p, int64_t is_random_next, int64_t n_pred)
{
    Job *g = run->g;
    const Py_ssize_t row = run->count++;
    if (row >= g->spans.rows)
        return 0;
    const int64_t span[4] = {p->a_lo, p->a_hi, p->b_lo, p->b_hi};
    for (int k = 0; k < 4; k++)
        if (put(&g->spans, row * 4 + k, span[k]) < 0)
            return bad_value(run, &g->spans, span[k]);
    if (put(&g->random_next, row, is_random_next) < 0)
        return bad_value(run, &g->random_next, is_random_next);
    const Py_ssize_t base = row * g->max_predictions_per_seq;
    for (int64_t k = 0; k < n_pred; k++) {
        const int64_t position = run->picked_pos[k], label = run->seq[position];
        if (put(&g->positions, base + k, position) < 0)
            return bad_value(run, &g->positions, position);
        if (put(&g->labels, base + k, label) < 0)
            return bad_value(run, &g->labels, label);
        if (put(&g->shown, base + k, run->picked_new[k]) < 0)
            return bad_value(run, &g->shown, run->picked_new[k]);
    }
    return 0;
}

/* The reference's create_instances_from_document for the d-th document of the shuffled order. */
static int create_instances_from_document(Run *run, Py_ssize_t d)
{
    const Job *g = run->g;
    MT *r = run->rng;
    const Arr *so = &g->sentence_offsets, *dof = &g->doc_offsets;
    const Py_ssize_t num_docs = dof->len - 1;
    const int64_t max_num_tokens = g->max_seq_length - 3; /* room for [CLS], [SEP], [SEP] */
    const int64_t first = get(dof, run->docs[d]);
    const int64_t num_sentences = get(dof, run->docs[d] + 1) - first;
    /* The reference: "We *usually* want to fill up the entire sequence since we are padding to
     * `max_seq_length` anyways, so short sequences are generally wasted computation. However, we
     * *sometimes* (i.e., short_seq_prob == 0.1 == 10% of the time) want to use shorter sequences
     * to minimize the mismatch between pre-training and fine-tuning." The target is rough,
     * max_num_tokens the hard limit; it is drawn once per document, not per instance. */
    int64_t target = max_num_tokens;
    if (mt_random(r) < g->short_seq_prob)
        target = mt_randint(r, 2, max_num_tokens);
    /* A and B are split at sentence boundaries, not at an arbitrary token: that "would make
     * the next sentence prediction task too easy". The chunk is sentences chunk_first..i. */
    int64_t chunk_first = 0, length = 0;
    for (int64_t i = 0; i < num_sentences; i++) {
        length += get(so, first + i + 1) - get(so, first + i);
        if (!(i == num_sentences - 1 || length >= target))
            continue;
        const int64_t chunk_len = i - chunk_first + 1;
        /* How many of the chunk's sentences go into A. */
        int64_t a_end = 1;
        if (chunk_len >= 2)
            a_end = mt_randint(r, 1, chunk_len - 1);
        Pair p = {.a_lo = get(so, first + chunk_first), .a_hi = get(so, first + chunk_first + a_end)};
        int64_t is_random_next;
        if (chunk_len == 1 || mt_random(r) < 0.5) {
            is_random_next = 1;
            const int64_t target_b = target - (p.a_hi - p.a_lo);
            /* The reference: "This should rarely go for more than one iteration for large
             * corpora. However, just to be careful, we try to make sure that the random document
             * is not the same as the document we're processing." Only in a one-document shard
             * do all ten draws hit it; B then comes from it and is no random next. */
            int64_t rd = 0;
            for (int t = 0; t < 10; t++) {
                rd = mt_randint(r, 0, num_docs - 1);
                if (rd != d)
                    break;
            }
            if (rd == d)
                is_random_next = 0;
            const int64_t r_first = get(dof, run->docs[rd]);
            const int64_t r_count = get(dof, run->docs[rd] + 1) - r_first;
            const int64_t start = mt_randint(r, 0, r_count - 1);
            p.b_lo = p.b_hi = get(so, r_first + start);
            for (int64_t j = r_first + start; j < r_first + r_count; j++) {
                p.b_hi = get(so, j + 1);
                if (p.b_hi - p.b_lo >= target_b)
                    break;
            }
            /* The reference: "We didn't actually use these segments so we 'put them back' so
             * they don't go to waste." */
            i -= chunk_len - a_end;
        } else {
            is_random_next = 0;
            p.b_lo = p.a_hi;
            p.b_hi = get(so, first + i + 1);
        }
        truncate_seq_pair(&p, max_num_tokens, r);

        const int64_t len_a = p.a_hi - p.a_lo, len_b = p.b_hi - p.b_lo, n_tok = len_a + len_b + 3;
        int64_t *seq = run->seq;
        seq[0] = g->cls_id;
        for (int64_t k = 0; k < len_a; k++)
            seq[1 + k] = get(&g->tokens, p.a_lo + k);
        seq[1 + len_a] = g->sep_id;
        for (int64_t k = 0; k < len_b; k++)
            seq[2 + len_a + k] = get(&g->tokens, p.b_lo + k);
        seq[n_tok - 1] = g->sep_id;
        const int64_t n_pred = create_masked_lm_predictions(run, n_tok);
        if (add_instance(run, &p, is_random_next, n_pred) < 0)
            return -1;
        chunk_first = i + 1;
        length = 0;
    }
    return 0;
}

/* The reference's create_training_instances, but for its final shuffle of the instances (the
 * caller shuffles their order instead): shuffle the documents, then dupe_factor passes over
 * them, each with new splits and masks. 0, or -1 with run->bad set. */
static int create_training_instances(Run *run)
{
    const Py_ssize_t num_docs = run->g->doc_offsets.len - 1;
    for (Py_ssize_t d = 0; d < num_docs; d++)
        run->docs[d] = d;
    mt_shuffle(run->rng, run->docs, num_docs);
    for (Py_ssize_t dupe = 0; dupe < run->g->dupe_factor; dupe++)
        for (Py_ssize_t d = 0; d < num_docs; d++)
            if (create_instances_from_document(run, d) < 0)
                return -1;
    return 0;
}

static PyObject *fast_generate(PyObject *self, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"state", "tokens", "sentence_offsets", "doc_offsets", "max_seq_length",
                             "max_predictions_per_seq", "short_seq_prob", "dupe_factor", "num_to_predict",
                             "vocab_words", "word_continues", "cls_id", "sep_id", "mask_id", "spans",
                             "random_next", "positions", "labels", "shown", NULL};
    Arr state = {.name = "state"};
    Job g = {.tokens = {.name = "tokens"}, .sentence_offsets = {.name = "sentence_offsets"},
             .doc_offsets = {.name = "doc_offsets"}, .num_to_predict = {.name = "num_to_predict"},
             .vocab_words = {.name = "vocab_words"}, .word_continues = {.name = "word_continues"},
             .spans = {.name = "spans"},
             .random_next = {.name = "random_next"}, .positions = {.name = "positions"},
             .labels = {.name = "labels"}, .shown = {.name = "shown"}};
    Arr *all[] = {&state, &g.tokens, &g.sentence_offsets, &g.doc_offsets, &g.num_to_predict,
                  &g.vocab_words, &g.word_continues, &g.spans, &g.random_next, &g.positions, &g.labels,
                  &g.shown};
    MT r;
    Run run = {.g = &g, .rng = &r};
    int status = -1;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O&$O&O&O&nndnO&O&O&LLLO&O&O&O&O&:generate", kwlist,
                                     conv_out, &state, conv_in, &g.tokens, conv_in, &g.sentence_offsets,
                                     conv_in, &g.doc_offsets, &g.max_seq_length, &g.max_predictions_per_seq,
                                     &g.short_seq_prob, &g.dupe_factor, conv_in, &g.num_to_predict,
                                     conv_in, &g.vocab_words, conv_in, &g.word_continues, &g.cls_id,
                                     &g.sep_id, &g.mask_id,
                                     conv_out, &g.spans, conv_out, &g.random_next, conv_out, &g.positions,
                                     conv_out, &g.labels, conv_out, &g.shown))
        return NULL;
    if (mt_load(&r, &state) < 0 || check_job(&g) < 0)
        goto done;
    const Py_ssize_t num_docs = g.doc_offsets.len - 1;
    run.docs = PyMem_RawMalloc(sizeof(int64_t) * (num_docs ? num_docs : 1));
    run.seq = PyMem_RawMalloc(sizeof(int64_t) * g.max_seq_length);
    run.candidates = PyMem_RawMalloc(sizeof(int64_t) * g.max_seq_length);
    run.words = PyMem_RawMalloc(sizeof(int64_t) * g.max_seq_length);
    run.picked_pos = PyMem_RawMalloc(sizeof(int64_t) * g.max_predictions_per_seq);
    run.picked_new = PyMem_RawMalloc(sizeof(int64_t) * g.max_predictions_per_seq);
    if (!run.docs || !run.seq || !run.candidates || !run.words || !run.picked_pos || !run.picked_new) {
        PyErr_NoMemory();
        goto done;
    }
    Py_BEGIN_ALLOW_THREADS
    status = create_training_instances(&run);
    Py_END_ALLOW_THREADS
    if (status < 0)
        overflow(run.bad, run.bad_value);
    else
        mt_store(&r, &state);
done:
    PyMem_RawFree(run.docs);
    PyMem_RawFree(run.seq);
    PyMem_RawFree(run.candidates);
    PyMem_RawFree(run.words);
    PyMem_RawFree(run.picked_pos);
    PyMem_RawFree(run.picked_new);
    release(all, 12);
    return status < 0 ? NULL : PyLong_FromSsize_t(run.count);
}

/* ---- the padded reference arrays, one field at a time --------------------------------------- */

/* Row r's instance and the bounds of its segments, checked against `out` and `tokens`. */
static int instance_row(const Arr *rows, Py_ssize_t r, const Arr *spans, Py_ssize_t width,
                        Py_ssize_t num_tokens, int64_t *i, int64_t span[4])
{
    *i = get(rows, r);
    if (*i < 0 || *i >= spans->rows) {
        PyErr_Format(PyExc_IndexError, "rows: %lld is out of range of spans", (long long)*i);
        return -1;
    }
    for (int k = 0; k < 4; k++)
        span[k] = get(spans, *i * 4 + k);
    if (span[0] < 0 || span[1] < span[0] || span[2] < 0 || span[3] < span[2]
        || span[1] > num_tokens || span[3] > num_tokens
        || span[1] - span[0] + span[3] - span[2] + 3 > width) {
        PyErr_SetString(PyExc_ValueError, "an instance's span does not fit the tokens or the row");
        return -1;
    }
    return 0;
}

static int check_fill(const Arr *out, const Arr *rows, const Arr *spans)
{
    if (require(out, K_INT, 2) < 0 || require(rows, K_INT, 1) < 0 || require(spans, K_INT, 2) < 0)
        return -1;
    if (rows->len != out->rows || spans->cols != 4) {
        PyErr_SetString(PyExc_ValueError, "need out [R, L], rows [R] and spans [N, 4]");
        return -1;
    }
    return 0;
}

/* out[at:at + n] = tokens[start:start + n], each id checked to fit. */
static int copy_ids(Arr *out, Py_ssize_t at, const Arr *tokens, int64_t start, int64_t n)
{
    for (int64_t k = 0; k < n; k++) {
        const int64_t id = get(tokens, start + k);
        if (put(out, at + k, id) < 0)
            return overflow(out, id);
    }
    return 0;
}

static PyObject *fast_fill_input_ids(PyObject *self, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"out", "rows", "tokens", "spans", "positions", "shown", "cls_id", "sep_id", NULL};
    Arr out = {.name = "out"}, rows = {.name = "rows"}, tokens = {.name = "tokens"}, spans = {.name = "spans"};
    Arr positions = {.name = "positions"}, shown = {.name = "shown"};
    Arr *all[] = {&out, &rows, &tokens, &spans, &positions, &shown};
    long long cls_id, sep_id;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O&O&O&O&O&O&LL:fill_input_ids", kwlist, conv_out, &out,
                                     conv_in, &rows, conv_in, &tokens, conv_in, &spans, conv_in, &positions,
                                     conv_in, &shown, &cls_id, &sep_id))
        return NULL;
    if (check_fill(&out, &rows, &spans) < 0 || require(&tokens, K_INT, 1) < 0
        || require(&positions, K_INT, 2) < 0 || require(&shown, K_INT, 2) < 0)
        goto fail;
    const Py_ssize_t width = out.cols, preds = positions.cols;
    if (positions.rows != spans.rows || shown.rows != spans.rows || shown.cols != preds) {
        PyErr_SetString(PyExc_ValueError, "positions and shown must be [N, P] beside spans [N, 4]");
        goto fail;
    }
    if (!fits(&out, cls_id) || !fits(&out, sep_id)) {
        overflow(&out, fits(&out, cls_id) ? sep_id : cls_id);
        goto fail;
    }
    for (Py_ssize_t r = 0; r < out.rows; r++) {
        int64_t i, span[4];
        if (instance_row(&rows, r, &spans, width, tokens.len, &i, span) < 0)
            goto fail;
        const int64_t len_a = span[1] - span[0], len_b = span[3] - span[2];
        const Py_ssize_t base = r * width;
        store(&out, base, cls_id);
        if (copy_ids(&out, base + 1, &tokens, span[0], len_a) < 0)
            goto fail;
        store(&out, base + 1 + len_a, sep_id);
        if (copy_ids(&out, base + 2 + len_a, &tokens, span[2], len_b) < 0)
            goto fail;
        store(&out, base + 2 + len_a + len_b, sep_id);
        for (Py_ssize_t p = 0; p < preds; p++) {
            const int64_t position = get(&positions, i * preds + p), id = get(&shown, i * preds + p);
            if (position == 0)
                break;
            if (position < 0 || position >= width) {
                PyErr_SetString(PyExc_ValueError, "a masked position is outside the row");
                goto fail;
            }
            if (put(&out, base + position, id) < 0) {
                overflow(&out, id);
                goto fail;
            }
        }
    }
    release(all, 6);
    Py_RETURN_NONE;
fail:
    release(all, 6);
    return NULL;
}

/* out[r, lo:hi] = 1 for each row, lo and hi from its instance's lengths: the input mask covers
 * the whole sequence, the segment ids segment B and its [SEP]. */
static PyObject *fill_ones(PyObject *args, PyObject *kwargs, const char *format, int segment_b)
{
    static char *kwlist[] = {"out", "rows", "spans", NULL};
    Arr out = {.name = "out"}, rows = {.name = "rows"}, spans = {.name = "spans"};
    Arr *all[] = {&out, &rows, &spans};
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, format, kwlist, conv_out, &out, conv_in, &rows,
                                     conv_in, &spans))
        return NULL;
    if (check_fill(&out, &rows, &spans) < 0)
        goto fail;
    for (Py_ssize_t r = 0; r < out.rows; r++) {
        int64_t i, span[4];
        if (instance_row(&rows, r, &spans, out.cols, PY_SSIZE_T_MAX, &i, span) < 0)
            goto fail;
        const int64_t len_a = span[1] - span[0], n_tok = len_a + span[3] - span[2] + 3;
        for (int64_t k = segment_b ? 2 + len_a : 0; k < n_tok; k++)
            store(&out, r * out.cols + k, 1); /* every integer type holds 1 */
    }
    release(all, 3);
    Py_RETURN_NONE;
fail:
    release(all, 3);
    return NULL;
}

static PyObject *fast_fill_input_mask(PyObject *self, PyObject *args, PyObject *kwargs)
{
    return fill_ones(args, kwargs, "O&O&O&:fill_input_mask", 0);
}

static PyObject *fast_fill_segment_ids(PyObject *self, PyObject *args, PyObject *kwargs)
{
    return fill_ones(args, kwargs, "O&O&O&:fill_segment_ids", 1);
}

/* ---- the tokenizer's piece table ------------------------------------------------------------ */

static const uint64_t FNV_OFFSET = 14695981039346656037ull;
static const uint64_t FNV_PRIME = 1099511628211ull;

static int check_slots(const Arr *slots, int64_t entries)
{
    if (slots->len < 1 || (slots->len & (slots->len - 1)) || entries >= slots->len) {
        PyErr_SetString(PyExc_ValueError, "slots must be a power of two longer than the entries");
        return -1;
    }
    return 0;
}

static PyObject *fast_rehash(PyObject *self, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"slots", "hashes", "count", NULL};
    Arr slots = {.name = "slots"}, hashes = {.name = "hashes"};
    Arr *all[] = {&slots, &hashes};
    Py_ssize_t count;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O&O&n:rehash", kwlist, conv_out, &slots, conv_in, &hashes,
                                     &count))
        return NULL;
    if (require(&slots, K_I32, 1) < 0 || require(&hashes, K_U64, 1) < 0)
        goto fail;
    if (count > INT32_MAX) {
        PyErr_Format(PyExc_OverflowError, "rehash: %zd entries do not fit the int32 slots", count);
        goto fail;
    }
    if (count < 0 || count > hashes.len) {
        PyErr_SetString(PyExc_ValueError, "rehash: count out of range of hashes");
        goto fail;
    }
    if (check_slots(&slots, count) < 0)
        goto fail;
    int32_t *slot = (int32_t *)slots.data;
    const uint64_t *hash = (const uint64_t *)hashes.data;
    const uint64_t mask = (uint64_t)slots.len - 1;
    for (Py_ssize_t e = 0; e < count; e++) {
        uint64_t s = hash[e] & mask;
        for (Py_ssize_t probes = 1; slot[s] >= 0; probes++) {
            if (probes == slots.len) {
                PyErr_SetString(PyExc_ValueError, "rehash: no free slot (slots must start all -1)");
                goto fail;
            }
            s = (s + 1) & mask;
        }
        slot[s] = (int32_t)e;
    }
    release(all, 2);
    Py_RETURN_NONE;
fail:
    release(all, 2);
    return NULL;
}

static PyObject *fast_scan(PyObject *self, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"buf", "slots", "hashes", "key_offsets", "key_lengths", "keys", "meta",
                             "word_entry", "line_words", "whole_line", NULL};
    Arr buf = {.name = "buf"}, slots = {.name = "slots"}, hashes = {.name = "hashes"};
    Arr key_offsets = {.name = "key_offsets"}, key_lengths = {.name = "key_lengths"}, keys = {.name = "keys"};
    Arr meta = {.name = "meta"}, word_entry = {.name = "word_entry"}, line_words = {.name = "line_words"};
    Arr whole_line = {.name = "whole_line"};
    Arr *all[] = {&buf, &slots, &hashes, &key_offsets, &key_lengths, &keys, &meta, &word_entry,
                  &line_words, &whole_line};
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O&$O&O&O&O&O&O&O&O&O&:scan", kwlist, conv_in, &buf,
                                     conv_out, &slots, conv_out, &hashes, conv_out, &key_offsets,
                                     conv_out, &key_lengths, conv_out, &keys, conv_out, &meta,
                                     conv_out, &word_entry, conv_out, &line_words, conv_out, &whole_line))
        return NULL;
    if (require(&buf, K_U8, 1) < 0 || require(&slots, K_I32, 1) < 0 || require(&hashes, K_U64, 1) < 0
        || require(&key_offsets, K_I32, 1) < 0 || require(&key_lengths, K_I32, 1) < 0
        || require(&keys, K_U8, 1) < 0 || require(&meta, K_I64, 1) < 0 || require(&word_entry, K_I32, 1) < 0
        || require(&line_words, K_I32, 1) < 0 || require(&whole_line, K_BOOL, 1) < 0)
        goto fail;
    if (meta.len != 3) {
        PyErr_SetString(PyExc_ValueError, "meta must hold (entries, key bytes, id count)");
        goto fail;
    }
    const uint8_t *b = (const uint8_t *)buf.data;
    int32_t *slot = (int32_t *)slots.data, *koff = (int32_t *)key_offsets.data;
    int32_t *klen = (int32_t *)key_lengths.data, *went = (int32_t *)word_entry.data;
    int32_t *lwords = (int32_t *)line_words.data;
    uint64_t *hash = (uint64_t *)hashes.data;
    uint8_t *key = (uint8_t *)keys.data, *whole = (uint8_t *)whole_line.data;
    int64_t *m = (int64_t *)meta.data;
    const Py_ssize_t n = buf.len;
    Py_ssize_t entry_room = hashes.len < key_offsets.len ? hashes.len : key_offsets.len;
    if (key_lengths.len < entry_room)
        entry_room = key_lengths.len;
    if (m[0] < 0 || m[0] > entry_room || m[1] < 0 || m[1] > keys.len) {
        PyErr_Format(PyExc_ValueError, "scan: meta (%lld entries, %lld key bytes) disagrees with the table arrays",
                     (long long)m[0], (long long)m[1]);
        goto fail;
    }
    if (check_slots(&slots, m[0]) < 0)
        goto fail;
    const uint64_t mask = (uint64_t)slots.len - 1;
    Py_ssize_t line = 0, in_line = 0, words = 0, i = 0;
    while (i <= n) {
        if (i == n || b[i] == 10) {
            if (line >= line_words.len || line >= whole_line.len)
                goto room;
            if (in_line > INT32_MAX) {
                PyErr_Format(PyExc_OverflowError, "scan: line %zd has more pieces than its int32 count holds", line);
                goto fail;
            }
            lwords[line++] = (int32_t)in_line;
            in_line = 0;
            i++;
            continue;
        }
        uint8_t c = b[i];
        if (c == 32 || c == 9 || c == 13) {
            i++;
            continue;
        }
        if (line >= whole_line.len)
            goto room;
        Py_ssize_t j = i;
        uint64_t h = FNV_OFFSET;
        while (j < n) {
            c = b[j];
            if (c == 32 || c == 9 || c == 13 || c == 10)
                break;
            /* Characters BERT treats as whitespace or deletes: send the line whole (see tokenize.py). */
            if (c < 32) {
                if (c == 11 || c == 12 || c >= 28)
                    whole[line] = 1;
            } else if (c >= 0xC2 && j + 1 < n) {
                const uint8_t d = b[j + 1];
                if (c == 0xC2) {
                    if (d == 0x85 || d == 0xA0)
                        whole[line] = 1;
                } else if (j + 2 < n) {
                    const uint8_t e = b[j + 2];
                    if ((c == 0xE1 && d == 0x9A && e == 0x80)
                        || (c == 0xE2 && d == 0x80 && (e <= 0x8A || e == 0xA8 || e == 0xA9 || e == 0xAF))
                        || (c == 0xE2 && d == 0x81 && e == 0x9F)
                        || (c == 0xE3 && d == 0x80 && e == 0x80))
                        whole[line] = 1;
                }
            }
            h = (h ^ c) * FNV_PRIME;
            j++;
        }
        const Py_ssize_t length = j - i;
        uint64_t s = h & mask;
        int64_t entry;
        for (Py_ssize_t probes = 0;; probes++) {
            if (probes == slots.len)
                goto corrupt;
            entry = slot[s];
            if (entry < 0) {
                entry = m[0];
                /* Offsets, lengths and entries are int32 (half the memory of int64): the caller
                 * clears the table long before, so only a batch of over 2 GiB gets here. */
                if (entry > INT32_MAX || m[1] + length > INT32_MAX) {
                    PyErr_SetString(PyExc_OverflowError, "scan: the table's key bytes would pass "
                                    "2**31 - 1, more than its int32 key_offsets hold (clear it first)");
                    goto fail;
                }
                /* An empty slot must remain for the probe loop to end. */
                if (entry >= entry_room || m[1] + length > keys.len || entry + 1 >= slots.len)
                    goto room;
                m[0]++;
                hash[entry] = h;
                koff[entry] = (int32_t)m[1];
                klen[entry] = (int32_t)length;
                memcpy(key + m[1], b + i, length);
                m[1] += length;
                slot[s] = (int32_t)entry;
                break;
            }
            if (entry >= m[0])
                goto corrupt;
            if (hash[entry] == h && klen[entry] == length) {
                if (koff[entry] < 0 || koff[entry] + (int64_t)length > m[1])
                    goto corrupt;
                if (memcmp(key + koff[entry], b + i, length) == 0)
                    break;
            }
            s = (s + 1) & mask;
        }
        if (words >= word_entry.len)
            goto room;
        went[words++] = (int32_t)entry;
        in_line++;
        i = j;
    }
    release(all, 10);
    return PyLong_FromSsize_t(words);
room:
    PyErr_SetString(PyExc_ValueError, "scan: the table or an output array has too little room "
                    "(reserve before scanning)");
    goto fail;
corrupt:
    PyErr_SetString(PyExc_ValueError, "scan: slots point outside the table's entries or keys");
fail:
    release(all, 10);
    return NULL;
}

static PyObject *fast_assemble(PyObject *self, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"word_entry", "line_words", "whole_line", "value_offsets", "value_lengths",
                             "values", "whole_ids", "whole_offsets", "out", "lengths", NULL};
    Arr word_entry = {.name = "word_entry"}, line_words = {.name = "line_words"};
    Arr whole_line = {.name = "whole_line"}, value_offsets = {.name = "value_offsets"};
    Arr value_lengths = {.name = "value_lengths"}, values = {.name = "values"}, whole_ids = {.name = "whole_ids"};
    Arr whole_offsets = {.name = "whole_offsets"}, out = {.name = "out"}, lengths = {.name = "lengths"};
    Arr *all[] = {&word_entry, &line_words, &whole_line, &value_offsets, &value_lengths, &values,
                  &whole_ids, &whole_offsets, &out, &lengths};
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O&$O&O&O&O&O&O&O&O&O&:assemble", kwlist,
                                     conv_in, &word_entry, conv_in, &line_words, conv_in, &whole_line,
                                     conv_in, &value_offsets, conv_in, &value_lengths, conv_in, &values,
                                     conv_in, &whole_ids, conv_in, &whole_offsets, conv_out, &out,
                                     conv_out, &lengths))
        return NULL;
    /* Ids are copied, not converted: whole_ids and out share the values' type, whatever it is. */
    if (require(&word_entry, K_I32, 1) < 0 || require(&line_words, K_I32, 1) < 0
        || require(&whole_line, K_BOOL, 1) < 0 || require(&value_offsets, K_I32, 1) < 0
        || require(&value_lengths, K_I32, 1) < 0 || require(&values, values.kind, 1) < 0
        || require(&whole_ids, values.kind, 1) < 0 || require(&out, values.kind, 1) < 0
        || require(&whole_offsets, K_I64, 1) < 0 || require(&lengths, K_I32, 1) < 0)
        goto fail;
    const Py_ssize_t num_lines = line_words.len;
    if (whole_line.len < num_lines || lengths.len < num_lines || whole_offsets.len < num_lines + 1
        || value_lengths.len < value_offsets.len) {
        PyErr_SetString(PyExc_ValueError, "assemble: arrays disagree on the number of lines or entries");
        goto fail;
    }
    const int32_t *went = (const int32_t *)word_entry.data, *lwords = (const int32_t *)line_words.data;
    const int32_t *voff = (const int32_t *)value_offsets.data, *vlen = (const int32_t *)value_lengths.data;
    const int64_t *woff = (const int64_t *)whole_offsets.data;
    const uint8_t *whole = (const uint8_t *)whole_line.data;
    int32_t *len_out = (int32_t *)lengths.data;
    const Py_ssize_t size = values.view.itemsize;
    Py_ssize_t o = 0, w = 0;
    for (Py_ssize_t line = 0; line < num_lines; line++) {
        const Py_ssize_t start = o;
        if (whole[line]) {
            const int64_t a = woff[line], z = woff[line + 1];
            if (a < 0 || z < a)
                goto bounds;
            if (z - a > INT32_MAX)
                goto too_long;
            if (z > whole_ids.len || o + (z - a) > out.len)
                goto bounds;
            memcpy(out.data + o * size, whole_ids.data + a * size, (z - a) * size);
            o += z - a;
        } else {
            if (lwords[line] < 0 || w + lwords[line] > word_entry.len)
                goto bounds;
            for (Py_ssize_t k = w; k < w + lwords[line]; k++) {
                const int32_t e = went[k];
                if (e < 0 || e >= value_offsets.len)
                    goto bounds;
                const int64_t v = voff[e], count = vlen[e];
                if (v < 0 || count < 0 || v + count > values.len || o + count > out.len)
                    goto bounds;
                if (o + count - start > INT32_MAX)
                    goto too_long;
                memcpy(out.data + o * size, values.data + v * size, count * size);
                o += count;
            }
        }
        w += lwords[line];
        len_out[line] = (int32_t)(o - start);
    }
    release(all, 10);
    return PyLong_FromSsize_t(o);
too_long:
    PyErr_SetString(PyExc_OverflowError, "assemble: a line has more ids than its int32 length holds");
    goto fail;
bounds:
    PyErr_SetString(PyExc_ValueError, "assemble: an entry or line points outside its array "
                    "(a piece without ids, or out too small)");
fail:
    release(all, 10);
    return NULL;
}

/* ---- module --------------------------------------------------------------------------------- */

/* ---- the cleaner's spaces ------------------------------------------------------------------ */

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

/* One pass for what took the cleaner five: invisible characters go, then every run of spaces
 * becomes one ' ', which goes too at either end of the text or of a line. */
static PyObject *fast_squeeze_spaces(PyObject *self, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"text", NULL};
    PyObject *text;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "U", kwlist, &text))
        return NULL;
    Py_ssize_t n = PyUnicode_GET_LENGTH(text);
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    /* Text already squeezed (as the cleaner's second call mostly gets) comes back as it is. */
    Py_ssize_t i = 0;
    for (Py_UCS4 prev = '\n'; i < n; i++) {
        Py_UCS4 c = PyUnicode_READ(kind, data, i);
        if (invisible(c) || (blank(c) && (c != ' ' || prev == ' ' || prev == '\n')) || (c == '\n' && prev == ' '))
            break;
        prev = c;
    }
    if (i == n && !(n && PyUnicode_READ(kind, data, n - 1) == ' ')) {
        Py_INCREF(text);
        return text;
    }
    Py_UCS4 *out = PyMem_Malloc((n ? n : 1) * sizeof(Py_UCS4));
    if (!out)
        return PyErr_NoMemory();
    Py_ssize_t len = 0;
    int pending = 0; /* a run of spaces since the last character written */
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_UCS4 c = PyUnicode_READ(kind, data, i);
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
    PyObject *result = PyUnicode_FromKindAndData(PyUnicode_4BYTE_KIND, out, len);
    PyMem_Free(out);
    return result;
}

/* ---- punkt's sentence boundaries (bertdata/fastpunkt.py) ------------------------------------ */

/* NLTK punkt's PunktLanguageVars: marks that may end a sentence, and characters that may not be
 * inside a word (`_re_non_word_chars`), which may follow a mark directly. */
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

typedef struct {
    PyObject *abbrev, *collocations, *starters, *ortho, *general;
    long ortho_lc, ortho_mid_uc, ortho_uc, ortho_beg_lc;
} PunktModel;

static int all_alpha(int kind, const void *data, Py_ssize_t a, Py_ssize_t b)
{
    if (a >= b)
        return 0;
    for (Py_ssize_t i = a; i < b; i++)
        if (!Py_UNICODE_ISALPHA(PyUnicode_READ(kind, data, i)))
            return 0;
    return 1;
}

static PyObject *lower_of(PyObject *text, Py_ssize_t a, Py_ssize_t b)
{
    PyObject *part = PyUnicode_Substring(text, a, b);
    if (!part)
        return NULL;
    PyObject *lower = PyObject_CallMethod(part, "lower", NULL);
    Py_DECREF(part);
    return lower;
}

/* -1 error, else the ortho context flags of `typ` (0 where the model has none). */
static long ortho_of(PunktModel *m, PyObject *typ)
{
    PyObject *v = PyDict_GetItemWithError(m->ortho, typ);
    if (!v)
        return PyErr_Occurred() ? -1 : 0;
    return PyLong_AsLong(v);
}

/* fastpunkt's `_reclassify` for a word of letters (first: 1 break, 2 abbreviation) before
 * `following` (text[fa:fb], never punctuation) of type `next_typ`: -1 error, else 0/1. */
static int punkt_reclassify(PunktModel *m, int first, PyObject *typ, int initial, Py_UCS4 following0,
                            PyObject *next_typ)
{
    PyObject *pair = PyTuple_Pack(2, typ, next_typ);
    if (!pair)
        return -1;
    int colloc = PySet_Contains(m->collocations, pair);
    Py_DECREF(pair);
    if (colloc)
        return colloc < 0 ? -1 : 0;
    int upper = Py_UNICODE_ISUPPER(following0), lower = Py_UNICODE_ISLOWER(following0);
    long ortho = -2;
    /* The orthographic heuristic: 1 starts a sentence, 0 does not, 2 unsure. */
    int starts = 2;
    if ((first == 2 && !initial) || initial) {
        ortho = ortho_of(m, next_typ);
        if (ortho == -1 && PyErr_Occurred())
            return -1;
        if (upper && (ortho & m->ortho_lc) && !(ortho & m->ortho_mid_uc))
            starts = 1;
        else if (lower && ((ortho & m->ortho_uc) || !(ortho & m->ortho_beg_lc)))
            starts = 0;
    }
    if (first == 2 && !initial) {
        if (starts == 1)
            return 1;
        if (upper) {
            int starter = PySet_Contains(m->starters, next_typ);
            if (starter)
                return starter;
        }
    }
    if (initial) {
        if (starts == 0)
            return 0;
        if (starts == 2 && upper && !(ortho & m->ortho_lc))
            return 0;
    }
    return first == 1;
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
            PyObject *next_typ = lower_of(text, next, fb);
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
                PyObject *alone = lower_of(text, next, end - 1);
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
            PyObject *typ = lower_of(text, start, at);
            if (!typ) {
                Py_DECREF(next_typ);
                return -1;
            }
            int abbrev = PySet_Contains(m->abbrev, typ);
            int r = abbrev < 0 ? -1 : punkt_reclassify(m, abbrev ? 2 : 1, typ, at - start == 1,
                                                        PyUnicode_READ(kind, data, next), next_typ);
            Py_DECREF(typ);
            Py_DECREF(next_typ);
            return r;
        }
    }
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
    for (Py_ssize_t at = 0; at < n; at++) {
        if (!punkt_mark(PyUnicode_READ(kind, data, at)))
            continue;
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

/* Each doc starts with its signature and "--", so inspect.signature reads it (_fast.pyi must agree). */
static PyMethodDef methods[] = {
    FN(generate, "generate(state, *, tokens, sentence_offsets, doc_offsets, max_seq_length, "
       "max_predictions_per_seq, short_seq_prob, dupe_factor, num_to_predict, vocab_words, word_continues, "
       "cls_id, sep_id, mask_id, spans, random_next, positions, labels, shown)\n--\n\n"
       "Run the reference instance algorithm, advancing state; return the count of instances. Rows that "
       "fit are written; a count above their number means call again from the same state with that many."),
    FN(shuffle, "shuffle(state, x)\n--\n\nrandom.shuffle of int64 x, drawing from state (625 int64, advanced)."),
    FN(replay, "replay(state, bounds)\n--\n\n"
       "A list: random() for each bound 0, else randrange(bound); advances state."),
    FN(fill_input_ids, "fill_input_ids(out, rows, tokens, spans, positions, shown, cls_id, sep_id)\n--\n\n"
       "out[r] = [CLS] A [SEP] B [SEP] of instance rows[r], with the shown ids at its positions."),
    FN(fill_input_mask, "fill_input_mask(out, rows, spans)\n--\n\nout[r] = 1 over instance rows[r]'s tokens."),
    FN(fill_segment_ids, "fill_segment_ids(out, rows, spans)\n--\n\n"
       "out[r] = 1 over instance rows[r]'s segment B and its [SEP]."),
    FN(rehash, "rehash(slots, hashes, count)\n--\n\nReinsert entries 0..count-1 into empty slots."),
    FN(scan, "scan(buf, *, slots, hashes, key_offsets, key_lengths, keys, meta, word_entry, line_words, "
       "whole_line)\n--\n\nSplit buf into pieces, adding new ones to the table; return how many."),
    FN(assemble, "assemble(word_entry, *, line_words, whole_line, value_offsets, value_lengths, values, "
       "whole_ids, whole_offsets, out, lengths)\n--\n\nLay each line's ids end to end in out; return how many."),
    FN(punkt_sentences, "punkt_sentences(text, abbrev, collocations, starters, ortho, general, flags)\n--\n\n"
       "NLTK punkt's sentences of text (see bertdata/fastpunkt.py)."),
    FN(squeeze_spaces, "squeeze_spaces(text)\n--\n\n"
       "text without invisible characters, each run of spaces one ' ', none at the ends of text or lines."),
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "bertdata._fast",
    "Compiled inner loops: the reference instance algorithm and the tokenizer's piece table.",
    -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__fast(void)
{
    return PyModule_Create(&module);
}
