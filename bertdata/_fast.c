/* The compiled inner loops of bertdata: the reference instance algorithm (with CPython's
 * Mersenne Twister replayed bit for bit) and the word-piece cache of the tokenizer.
 *
 * Plain CPython C API: arrays come in through the buffer protocol, so the module builds
 * without numpy headers and loads in microseconds, where a JIT costs about a second per
 * process. Every array's element type is read from its buffer format, and every index that
 * comes from data is checked, so bad input raises instead of corrupting memory.
 * The Python wrappers (kernel.py, tokenize.py) own allocation: a function that may need
 * more room than it was given says how much, and the caller regrows and calls again.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* ---- arrays through the buffer protocol --------------------------------------------------- */

enum { K_BOOL, K_I8, K_U8, K_I16, K_U16, K_I32, K_U32, K_I64, K_U64 };

typedef struct {
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
    if (obj == NULL) { /* PyArg_ParseTuple failed on a later argument: release this one */
        PyBuffer_Release(&a->view);
        return 1;
    }
    int flags = PyBUF_FORMAT | PyBUF_C_CONTIGUOUS | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(obj, &a->view, flags) < 0)
        return 0;
    if (kind_of(&a->view, &a->kind) < 0 || a->view.ndim > 2) {
        PyErr_Format(PyExc_TypeError, "expected a contiguous integer array of at most 2 dimensions, "
                     "got format %s with %d dimensions",
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

static int require(const Arr *a, int kind, const char *name)
{
    static const char *names[] = {"bool", "int8", "uint8", "int16", "uint16", "int32", "uint32",
                                  "int64", "uint64"};
    if (a->kind == kind)
        return 0;
    PyErr_Format(PyExc_TypeError, "%s must be %s, not %s", name, names[kind], names[a->kind]);
    return -1;
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

/* Stores wrap to the element type, as numpy's casts do. */
static inline void put(Arr *a, Py_ssize_t i, int64_t v)
{
    switch (a->kind) {
    case K_BOOL: ((uint8_t *)a->data)[i] = v != 0; break;
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
    if (require(state, K_I64, "state") < 0)
        return -1;
    const int64_t *s = (const int64_t *)state->data;
    if (state->len != MT_N + 1 || s[MT_N] < 0 || s[MT_N] > MT_N) {
        PyErr_SetString(PyExc_ValueError, "state must be 625 words: getstate()'s 624 and an index <= 624");
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
 * word, rejected until < n (so even n == 1 consumes a word). Callers guarantee n >= 1. */
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
 * bit length tracked as i falls: the masking shuffles every candidate of every instance. */
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

static PyObject *fast_shuffle(PyObject *self, PyObject *args)
{
    Arr state = {0}, x = {0};
    Arr *all[] = {&state, &x};
    MT r;
    if (!PyArg_ParseTuple(args, "O&O&:shuffle", conv_out, &state, conv_out, &x))
        return NULL;
    if (mt_load(&r, &state) < 0 || require(&x, K_I64, "x") < 0)
        goto fail;
    if (x.len > ((Py_ssize_t)1 << 31)) {
        PyErr_SetString(PyExc_ValueError, "shuffle: at most 2**31 elements");
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

/* ---- the reference instance algorithm ------------------------------------------------------ */

typedef struct {
    Py_ssize_t max_seq_length, dupe_factor;
    double short_seq_prob;
    int64_t cls_id, sep_id, mask_id;
    Arr *tokens, *sentence_offsets, *doc_offsets, *num_to_predict, *vocab_words;
    Arr *spans, *nsp, *positions, *labels, *shown;
} Job;

/* Rejects what would make the loop read out of bounds or never end. */
static int check_job(const Job *g)
{
    Py_ssize_t num_sentences = g->sentence_offsets->len - 1, num_docs = g->doc_offsets->len - 1;
    if (g->max_seq_length < 5 || g->dupe_factor < 0)
        return PyErr_SetString(PyExc_ValueError, "max_seq_length must be >= 5 and dupe_factor >= 0"), -1;
    if (num_sentences < 0 || num_docs < 0 || get(g->sentence_offsets, 0) != 0 || get(g->doc_offsets, 0) != 0)
        return PyErr_SetString(PyExc_ValueError, "offsets must start at 0"), -1;
    for (Py_ssize_t s = 0; s < num_sentences; s++)
        if (get(g->sentence_offsets, s + 1) < get(g->sentence_offsets, s))
            return PyErr_SetString(PyExc_ValueError, "sentence_offsets must not decrease"), -1;
    if (get(g->sentence_offsets, num_sentences) > g->tokens->len)
        return PyErr_SetString(PyExc_ValueError, "sentence_offsets run past the tokens"), -1;
    for (Py_ssize_t d = 0; d < num_docs; d++)
        if (get(g->doc_offsets, d + 1) <= get(g->doc_offsets, d))
            return PyErr_SetString(PyExc_ValueError, "every document needs a sentence (doc_offsets must rise)"), -1;
    if (get(g->doc_offsets, num_docs) > num_sentences)
        return PyErr_SetString(PyExc_ValueError, "doc_offsets run past the sentences"), -1;
    if (num_docs >= ((Py_ssize_t)1 << 31) || g->vocab_words->len >= ((Py_ssize_t)1 << 31))
        return PyErr_SetString(PyExc_ValueError, "at most 2**31 documents and vocab words"), -1;
    if (g->vocab_words->len < 1 || g->num_to_predict->len < g->max_seq_length + 1)
        return PyErr_SetString(PyExc_ValueError, "vocab_words must not be empty and num_to_predict needs "
                               "max_seq_length + 1 entries"), -1;
    Py_ssize_t p = g->positions->cols;
    if (g->spans->cols != 4 || g->labels->cols != p || g->shown->cols != p || p < 1
        || g->positions->rows != g->spans->rows || g->labels->rows != g->spans->rows
        || g->shown->rows != g->spans->rows || g->nsp->len != g->spans->rows)
        return PyErr_SetString(PyExc_ValueError, "output arrays: spans [N, 4], nsp [N], positions, "
                               "labels and shown [N, P] with P >= 1"), -1;
    for (Py_ssize_t n = 0; n <= g->max_seq_length; n++)
        if (get(g->num_to_predict, n) > p)
            return PyErr_SetString(PyExc_ValueError, "num_to_predict exceeds the prediction columns"), -1;
    return 0;
}

/* Returns the number of instances, writing those that fit (rows < capacity); -1 if out of memory. */
static Py_ssize_t run_job(const Job *g, MT *r)
{
    const Py_ssize_t capacity = g->spans->rows, max_predictions = g->positions->cols;
    const Py_ssize_t num_docs = g->doc_offsets->len - 1, num_words = g->vocab_words->len;
    const int64_t max_num_tokens = g->max_seq_length - 3;
    const Arr *so = g->sentence_offsets, *dof = g->doc_offsets;
    Py_ssize_t count = -1;
    int64_t *docs = PyMem_RawMalloc(sizeof(int64_t) * (num_docs ? num_docs : 1));
    int64_t *seq = PyMem_RawMalloc(sizeof(int64_t) * g->max_seq_length);
    int64_t *candidates = PyMem_RawMalloc(sizeof(int64_t) * g->max_seq_length);
    int64_t *picked_pos = PyMem_RawMalloc(sizeof(int64_t) * max_predictions);
    int64_t *picked_new = PyMem_RawMalloc(sizeof(int64_t) * max_predictions);
    if (!docs || !seq || !candidates || !picked_pos || !picked_new)
        goto done;
    for (Py_ssize_t d = 0; d < num_docs; d++)
        docs[d] = d;
    mt_shuffle(r, docs, num_docs);
    count = 0;

    for (Py_ssize_t dupe = 0; dupe < g->dupe_factor; dupe++) {
        for (Py_ssize_t d = 0; d < num_docs; d++) {
            const int64_t first = get(dof, docs[d]);
            const int64_t num_sentences = get(dof, docs[d] + 1) - first;
            int64_t target = max_num_tokens;
            if (mt_random(r) < g->short_seq_prob)
                target = mt_randint(r, 2, max_num_tokens);
            int64_t chunk_first = 0; /* the chunk is sentences chunk_first..i of the document */
            int64_t length = 0;
            for (int64_t i = 0; i < num_sentences; i++) {
                const int64_t s = first + i;
                length += get(so, s + 1) - get(so, s);
                if (!(i == num_sentences - 1 || length >= target))
                    continue;
                const int64_t chunk_len = i - chunk_first + 1;
                int64_t a_end = 1;
                if (chunk_len >= 2)
                    a_end = mt_randint(r, 1, chunk_len - 1);
                int64_t a_lo = get(so, first + chunk_first);
                int64_t a_hi = get(so, first + chunk_first + a_end);
                int64_t b_lo, b_hi, is_random_next;
                if (chunk_len == 1 || mt_random(r) < 0.5) {
                    is_random_next = 1;
                    const int64_t target_b = target - (a_hi - a_lo);
                    int64_t rd = 0;
                    for (int t = 0; t < 10; t++) {
                        rd = mt_randint(r, 0, num_docs - 1);
                        if (rd != d)
                            break;
                    }
                    if (rd == d)
                        is_random_next = 0;
                    const int64_t r_first = get(dof, docs[rd]);
                    const int64_t r_count = get(dof, docs[rd] + 1) - r_first;
                    const int64_t start = mt_randint(r, 0, r_count - 1);
                    b_lo = get(so, r_first + start);
                    b_hi = b_lo;
                    for (int64_t j = r_first + start; j < r_first + r_count; j++) {
                        b_hi = get(so, j + 1);
                        if (b_hi - b_lo >= target_b)
                            break;
                    }
                    i -= chunk_len - a_end;
                } else {
                    is_random_next = 0;
                    b_lo = a_hi;
                    b_hi = get(so, first + i + 1);
                }
                while ((a_hi - a_lo) + (b_hi - b_lo) > max_num_tokens) {
                    if (a_hi - a_lo > b_hi - b_lo) {
                        if (mt_random(r) < 0.5)
                            a_lo++;
                        else
                            a_hi--;
                    } else {
                        if (mt_random(r) < 0.5)
                            b_lo++;
                        else
                            b_hi--;
                    }
                }

                const int64_t len_a = a_hi - a_lo, len_b = b_hi - b_lo, n_tok = len_a + len_b + 3;
                seq[0] = g->cls_id;
                for (int64_t k = 0; k < len_a; k++)
                    seq[1 + k] = get(g->tokens, a_lo + k);
                seq[1 + len_a] = g->sep_id;
                for (int64_t k = 0; k < len_b; k++)
                    seq[2 + len_a + k] = get(g->tokens, b_lo + k);
                seq[n_tok - 1] = g->sep_id;
                /* The reference excludes by token, so a "[SEP]" typed in the text is never masked either. */
                Py_ssize_t n_cand = 0;
                for (int64_t k = 0; k < n_tok; k++)
                    if (seq[k] != g->cls_id && seq[k] != g->sep_id)
                        candidates[n_cand++] = k;
                mt_shuffle(r, candidates, n_cand);
                int64_t n_pred = get(g->num_to_predict, n_tok);
                if (n_cand < n_pred)
                    n_pred = n_cand;
                for (int64_t p = 0; p < n_pred; p++) {
                    const int64_t k = candidates[p];
                    int64_t replacement;
                    if (mt_random(r) < 0.8)
                        replacement = g->mask_id;
                    else if (mt_random(r) < 0.5)
                        replacement = seq[k];
                    else
                        replacement = get(g->vocab_words, mt_randint(r, 0, num_words - 1));
                    /* Insertion sort by position: the reference sorts its predictions. */
                    int64_t q = p;
                    while (q > 0 && picked_pos[q - 1] > k) {
                        picked_pos[q] = picked_pos[q - 1];
                        picked_new[q] = picked_new[q - 1];
                        q--;
                    }
                    picked_pos[q] = k;
                    picked_new[q] = replacement;
                }

                if (count < capacity) {
                    put(g->spans, count * 4, a_lo);
                    put(g->spans, count * 4 + 1, a_hi);
                    put(g->spans, count * 4 + 2, b_lo);
                    put(g->spans, count * 4 + 3, b_hi);
                    put(g->nsp, count, is_random_next);
                    for (int64_t p = 0; p < n_pred; p++) {
                        put(g->positions, count * max_predictions + p, picked_pos[p]);
                        put(g->labels, count * max_predictions + p, seq[picked_pos[p]]);
                        put(g->shown, count * max_predictions + p, picked_new[p]);
                    }
                }
                count++;
                chunk_first = i + 1;
                length = 0;
            }
        }
    }
done:
    PyMem_RawFree(docs);
    PyMem_RawFree(seq);
    PyMem_RawFree(candidates);
    PyMem_RawFree(picked_pos);
    PyMem_RawFree(picked_new);
    return count;
}

static PyObject *fast_generate(PyObject *self, PyObject *args)
{
    Arr state = {0}, tokens = {0}, sentence_offsets = {0}, doc_offsets = {0}, num_to_predict = {0};
    Arr vocab_words = {0}, spans = {0}, nsp = {0}, positions = {0}, labels = {0}, shown = {0};
    Arr *all[] = {&state, &tokens, &sentence_offsets, &doc_offsets, &num_to_predict, &vocab_words,
                  &spans, &nsp, &positions, &labels, &shown};
    Job g = {.tokens = &tokens, .sentence_offsets = &sentence_offsets, .doc_offsets = &doc_offsets,
             .num_to_predict = &num_to_predict, .vocab_words = &vocab_words, .spans = &spans,
             .nsp = &nsp, .positions = &positions, .labels = &labels, .shown = &shown};
    long long cls_id, sep_id, mask_id;
    MT r;
    Py_ssize_t count;
    if (!PyArg_ParseTuple(args, "O&O&O&O&ndnO&O&LLLO&O&O&O&O&:generate", conv_out, &state,
                          conv_in, &tokens, conv_in, &sentence_offsets, conv_in, &doc_offsets,
                          &g.max_seq_length, &g.short_seq_prob, &g.dupe_factor,
                          conv_in, &num_to_predict, conv_in, &vocab_words, &cls_id, &sep_id, &mask_id,
                          conv_out, &spans, conv_out, &nsp, conv_out, &positions, conv_out, &labels,
                          conv_out, &shown))
        return NULL;
    g.cls_id = cls_id;
    g.sep_id = sep_id;
    g.mask_id = mask_id;
    if (mt_load(&r, &state) < 0 || check_job(&g) < 0)
        goto fail;
    Py_BEGIN_ALLOW_THREADS
    count = run_job(&g, &r);
    Py_END_ALLOW_THREADS
    if (count < 0) {
        PyErr_NoMemory();
        goto fail;
    }
    mt_store(&r, &state);
    release(all, 11);
    return PyLong_FromSsize_t(count);
fail:
    release(all, 11);
    return NULL;
}

/* ---- the padded reference arrays, one field at a time --------------------------------------- */

/* Row r's instance and the bounds of its segments, checked against `out` and `tokens`. */
static int instance_row(const Arr *rows, Py_ssize_t r, const Arr *spans, Py_ssize_t width,
                        Py_ssize_t num_tokens, int64_t *i, int64_t span[4])
{
    *i = get(rows, r);
    if (*i < 0 || *i >= spans->rows) {
        PyErr_SetString(PyExc_IndexError, "row index out of range of spans");
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
    if (out->view.ndim != 2 || rows->len != out->rows || spans->cols != 4) {
        PyErr_SetString(PyExc_ValueError, "need out [R, L], rows [R] and spans [N, 4]");
        return -1;
    }
    return 0;
}

static PyObject *fast_fill_input_ids(PyObject *self, PyObject *args)
{
    Arr out = {0}, rows = {0}, tokens = {0}, spans = {0}, positions = {0}, shown = {0};
    Arr *all[] = {&out, &rows, &tokens, &spans, &positions, &shown};
    long long cls_id, sep_id;
    if (!PyArg_ParseTuple(args, "O&O&O&O&O&O&LL:fill_input_ids", conv_out, &out, conv_in, &rows,
                          conv_in, &tokens, conv_in, &spans, conv_in, &positions, conv_in, &shown,
                          &cls_id, &sep_id))
        return NULL;
    if (check_fill(&out, &rows, &spans) < 0)
        goto fail;
    const Py_ssize_t width = out.cols, preds = positions.cols;
    if (positions.rows != spans.rows || shown.rows != spans.rows || shown.cols != preds) {
        PyErr_SetString(PyExc_ValueError, "positions and shown must be [N, P] beside spans [N, 4]");
        goto fail;
    }
    for (Py_ssize_t r = 0; r < out.rows; r++) {
        int64_t i, span[4];
        if (instance_row(&rows, r, &spans, width, tokens.len, &i, span) < 0)
            goto fail;
        const int64_t len_a = span[1] - span[0], len_b = span[3] - span[2];
        const Py_ssize_t base = r * width;
        put(&out, base, cls_id);
        for (int64_t k = 0; k < len_a; k++)
            put(&out, base + 1 + k, get(&tokens, span[0] + k));
        put(&out, base + 1 + len_a, sep_id);
        for (int64_t k = 0; k < len_b; k++)
            put(&out, base + 2 + len_a + k, get(&tokens, span[2] + k));
        put(&out, base + 2 + len_a + len_b, sep_id);
        for (Py_ssize_t p = 0; p < preds; p++) {
            const int64_t position = get(&positions, i * preds + p);
            if (position == 0)
                break;
            if (position < 0 || position >= width) {
                PyErr_SetString(PyExc_ValueError, "a masked position is outside the row");
                goto fail;
            }
            put(&out, base + position, get(&shown, i * preds + p));
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
static PyObject *fill_ones(PyObject *args, const char *format, int segment_b)
{
    Arr out = {0}, rows = {0}, spans = {0};
    Arr *all[] = {&out, &rows, &spans};
    if (!PyArg_ParseTuple(args, format, conv_out, &out, conv_in, &rows, conv_in, &spans))
        return NULL;
    if (check_fill(&out, &rows, &spans) < 0)
        goto fail;
    for (Py_ssize_t r = 0; r < out.rows; r++) {
        int64_t i, span[4];
        if (instance_row(&rows, r, &spans, out.cols, PY_SSIZE_T_MAX, &i, span) < 0)
            goto fail;
        const int64_t len_a = span[1] - span[0], n_tok = len_a + span[3] - span[2] + 3;
        for (int64_t k = segment_b ? 2 + len_a : 0; k < n_tok; k++)
            put(&out, r * out.cols + k, 1);
    }
    release(all, 3);
    Py_RETURN_NONE;
fail:
    release(all, 3);
    return NULL;
}

static PyObject *fast_fill_input_mask(PyObject *self, PyObject *args)
{
    return fill_ones(args, "O&O&O&:fill_input_mask", 0);
}

static PyObject *fast_fill_segment_ids(PyObject *self, PyObject *args)
{
    return fill_ones(args, "O&O&O&:fill_segment_ids", 1);
}

/* ---- the tokenizer's piece table ------------------------------------------------------------ */

static const uint64_t FNV_OFFSET = 14695981039346656037ull;
static const uint64_t FNV_PRIME = 1099511628211ull;

static int check_slots(const Arr *slots, Py_ssize_t entries)
{
    if (slots->len < 1 || (slots->len & (slots->len - 1)) || entries >= slots->len) {
        PyErr_SetString(PyExc_ValueError, "slots must be a power of two longer than the entries");
        return -1;
    }
    return 0;
}

static PyObject *fast_rehash(PyObject *self, PyObject *args)
{
    Arr slots = {0}, hashes = {0};
    Arr *all[] = {&slots, &hashes};
    Py_ssize_t count;
    if (!PyArg_ParseTuple(args, "O&O&n:rehash", conv_out, &slots, conv_in, &hashes, &count))
        return NULL;
    if (require(&slots, K_I32, "slots") < 0 || require(&hashes, K_U64, "hashes") < 0
        || check_slots(&slots, count) < 0)
        goto fail;
    if (count < 0 || count > hashes.len) {
        PyErr_SetString(PyExc_ValueError, "count out of range of hashes");
        goto fail;
    }
    int32_t *slot = (int32_t *)slots.data;
    const uint64_t *hash = (const uint64_t *)hashes.data;
    const uint64_t mask = (uint64_t)slots.len - 1;
    for (Py_ssize_t e = 0; e < count; e++) {
        uint64_t s = hash[e] & mask;
        while (slot[s] >= 0)
            s = (s + 1) & mask;
        slot[s] = (int32_t)e;
    }
    release(all, 2);
    Py_RETURN_NONE;
fail:
    release(all, 2);
    return NULL;
}

static PyObject *fast_scan(PyObject *self, PyObject *args)
{
    Arr buf = {0}, slots = {0}, hashes = {0}, key_offsets = {0}, key_lengths = {0}, keys = {0};
    Arr meta = {0}, word_entry = {0}, line_words = {0}, whole_line = {0};
    Arr *all[] = {&buf, &slots, &hashes, &key_offsets, &key_lengths, &keys, &meta, &word_entry,
                  &line_words, &whole_line};
    if (!PyArg_ParseTuple(args, "O&O&O&O&O&O&O&O&O&O&:scan", conv_in, &buf, conv_out, &slots,
                          conv_out, &hashes, conv_out, &key_offsets, conv_out, &key_lengths,
                          conv_out, &keys, conv_out, &meta, conv_out, &word_entry,
                          conv_out, &line_words, conv_out, &whole_line))
        return NULL;
    if (require(&buf, K_U8, "buf") < 0 || require(&slots, K_I32, "slots") < 0
        || require(&hashes, K_U64, "hashes") < 0 || require(&key_offsets, K_I32, "key_offsets") < 0
        || require(&key_lengths, K_I32, "key_lengths") < 0 || require(&keys, K_U8, "keys") < 0
        || require(&meta, K_I64, "meta") < 0 || require(&word_entry, K_I32, "word_entry") < 0
        || require(&line_words, K_I32, "line_words") < 0 || require(&whole_line, K_BOOL, "whole_line") < 0)
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
    const int64_t entry_room = hashes.len < key_offsets.len ? hashes.len : key_offsets.len;
    if (check_slots(&slots, m[0]) < 0)
        goto fail;
    if (key_lengths.len < entry_room || m[0] < 0 || m[1] < 0 || m[1] > keys.len) {
        PyErr_SetString(PyExc_ValueError, "table arrays disagree with meta");
        goto fail;
    }
    const uint64_t mask = (uint64_t)slots.len - 1;
    Py_ssize_t line = 0, in_line = 0, words = 0, i = 0;
    while (i <= n) {
        if (i == n || b[i] == 10) {
            if (line >= line_words.len || line >= whole_line.len)
                goto room;
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
        for (;;) {
            entry = slot[s];
            if (entry < 0) {
                entry = m[0];
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
            if (hash[entry] == h && klen[entry] == length && memcmp(key + koff[entry], b + i, length) == 0)
                break;
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
fail:
    release(all, 10);
    return NULL;
}

static PyObject *fast_assemble(PyObject *self, PyObject *args)
{
    Arr word_entry = {0}, line_words = {0}, whole_line = {0}, value_offsets = {0}, value_lengths = {0};
    Arr values = {0}, whole_ids = {0}, whole_offsets = {0}, out = {0}, lengths = {0};
    Arr *all[] = {&word_entry, &line_words, &whole_line, &value_offsets, &value_lengths, &values,
                  &whole_ids, &whole_offsets, &out, &lengths};
    if (!PyArg_ParseTuple(args, "O&O&O&O&O&O&O&O&O&O&:assemble", conv_in, &word_entry,
                          conv_in, &line_words, conv_in, &whole_line, conv_in, &value_offsets,
                          conv_in, &value_lengths, conv_in, &values, conv_in, &whole_ids,
                          conv_in, &whole_offsets, conv_out, &out, conv_out, &lengths))
        return NULL;
    if (require(&word_entry, K_I32, "word_entry") < 0 || require(&line_words, K_I32, "line_words") < 0
        || require(&whole_line, K_BOOL, "whole_line") < 0
        || require(&value_offsets, K_I32, "value_offsets") < 0
        || require(&value_lengths, K_I32, "value_lengths") < 0
        || require(&whole_ids, values.kind, "whole_ids (as values)") < 0
        || require(&out, values.kind, "out (as values)") < 0
        || require(&whole_offsets, K_I64, "whole_offsets") < 0 || require(&lengths, K_I32, "lengths") < 0)
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
            if (a < 0 || z < a || z > whole_ids.len || o + (z - a) > out.len)
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
                memcpy(out.data + o * size, values.data + v * size, count * size);
                o += count;
            }
        }
        w += lwords[line];
        len_out[line] = (int32_t)(o - start);
    }
    release(all, 10);
    return PyLong_FromSsize_t(o);
bounds:
    PyErr_SetString(PyExc_ValueError, "assemble: an entry or line points outside its array "
                    "(a piece without ids, or out too small)");
fail:
    release(all, 10);
    return NULL;
}

/* ---- module --------------------------------------------------------------------------------- */

static PyMethodDef methods[] = {
    {"shuffle", fast_shuffle, METH_VARARGS,
     "shuffle(state, x): random.shuffle of int64 x, drawing from state (625 int64, advanced)."},
    {"generate", fast_generate, METH_VARARGS,
     "generate(state, tokens, sentence_offsets, doc_offsets, max_seq_length, short_seq_prob, "
     "dupe_factor, num_to_predict, vocab_words, cls_id, sep_id, mask_id, spans, nsp, positions, "
     "labels, shown) -> count. Writes the rows that fit; a count above len(nsp) means call again "
     "from the same state with that many rows."},
    {"fill_input_ids", fast_fill_input_ids, METH_VARARGS,
     "fill_input_ids(out, rows, tokens, spans, positions, shown, cls_id, sep_id)"},
    {"fill_input_mask", fast_fill_input_mask, METH_VARARGS, "fill_input_mask(out, rows, spans)"},
    {"fill_segment_ids", fast_fill_segment_ids, METH_VARARGS, "fill_segment_ids(out, rows, spans)"},
    {"rehash", fast_rehash, METH_VARARGS, "rehash(slots, hashes, count): reinsert entries 0..count-1."},
    {"scan", fast_scan, METH_VARARGS,
     "scan(buf, slots, hashes, key_offsets, key_lengths, keys, meta, word_entry, line_words, "
     "whole_line) -> words"},
    {"assemble", fast_assemble, METH_VARARGS,
     "assemble(word_entry, line_words, whole_line, value_offsets, value_lengths, values, whole_ids, "
     "whole_offsets, out, lengths) -> ids written"},
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
