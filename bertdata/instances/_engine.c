/* The reference instance algorithm, compiled, with CPython's Mersenne Twister replayed bit for
 * bit (_mt.h); its instances go into the padded arrays by _rows.c.
 *
 * Plain CPython C API: arrays come in through the buffer protocol, so the module builds
 * without numpy headers and loads in microseconds, where a JIT costs about a second per
 * process. Every array's element type and shape are checked, every index that comes from
 * data is checked, and every value stored into a narrower integer is checked to fit, so bad
 * input raises a Python exception instead of corrupting memory or wrapping silently.
 * The Python wrapper (kernel.py) owns allocation: a function that may need more room than it
 * was given says how much, and the caller regrows and calls again. _engine.pyi gives the
 * signatures.
 */

#include "_arrays.h"
#include "_mt.h"

/* ---- the random draws, for kernel.py ------------------------------------------------------ */

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
        if (arr_put(&g->spans, row * 4 + k, span[k]) < 0)
            return bad_value(run, &g->spans, span[k]);
    if (arr_put(&g->random_next, row, is_random_next) < 0)
        return bad_value(run, &g->random_next, is_random_next);
    const Py_ssize_t base = row * g->max_predictions_per_seq;
    for (int64_t k = 0; k < n_pred; k++) {
        const int64_t position = run->picked_pos[k], label = run->seq[position];
        if (arr_put(&g->positions, base + k, position) < 0)
            return bad_value(run, &g->positions, position);
        if (arr_put(&g->labels, base + k, label) < 0)
            return bad_value(run, &g->labels, label);
        if (arr_put(&g->shown, base + k, run->picked_new[k]) < 0)
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
        gather(&g->tokens, p.a_lo, len_a, seq + 1);
        seq[1 + len_a] = g->sep_id;
        gather(&g->tokens, p.b_lo, len_b, seq + 2 + len_a);
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
    /* An instance has at most max_seq_length tokens to mask, however many columns the output
     * has: sized by the smaller, the product cannot wrap (max_predictions_per_seq may be near
     * 2**63 where the output has no rows). */
    const Py_ssize_t most_predictions = g.max_predictions_per_seq < g.max_seq_length
        ? g.max_predictions_per_seq : g.max_seq_length;
    run.picked_pos = PyMem_RawMalloc(sizeof(int64_t) * most_predictions);
    run.picked_new = PyMem_RawMalloc(sizeof(int64_t) * most_predictions);
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

#define FN(name, doc) {#name, (PyCFunction)(void (*)(void))fast_##name, METH_VARARGS | METH_KEYWORDS, doc}

/* Each doc starts with its signature and "--", so inspect.signature reads it (_engine.pyi must agree). */
static PyMethodDef methods[] = {
    FN(generate, "generate(state, *, tokens, sentence_offsets, doc_offsets, max_seq_length, "
       "max_predictions_per_seq, short_seq_prob, dupe_factor, num_to_predict, vocab_words, word_continues, "
       "cls_id, sep_id, mask_id, spans, random_next, positions, labels, shown)\n--\n\n"
       "Run the reference instance algorithm, advancing state; return the count of instances. Rows that "
       "fit are written; a count above their number means call again from the same state with that many."),
    FN(shuffle, "shuffle(state, x)\n--\n\nrandom.shuffle of int64 x, drawing from state (625 int64, advanced)."),
    FN(replay, "replay(state, bounds)\n--\n\n"
       "A list: random() for each bound 0, else randrange(bound); advances state."),
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "bertdata.instances._engine",
    "Compiled inner loops: the reference instance algorithm and the padded arrays.",
    -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__engine(void)
{
    return PyModule_Create(&module);
}
