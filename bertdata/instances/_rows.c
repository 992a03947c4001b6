/* The padded reference arrays (input_ids, input_mask, segment_ids), filled one field at a time
 * from the instances _engine.c made: a row per instance, each id checked to fit its array.
 * The Python wrapper (kernel.py) allocates; _rows.pyi gives the signatures.
 */

#include "_arrays.h"

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
    /* Each length is checked against the room left, never summed first: two lengths near
     * 2**63 would wrap the sum past the width check. */
    if (span[0] < 0 || span[1] < span[0] || span[2] < 0 || span[3] < span[2]
        || span[1] > num_tokens || span[3] > num_tokens
        || span[1] - span[0] > width - 3 || span[3] - span[2] > width - 3 - (span[1] - span[0])) {
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
    /* The usual pair (ids of a vocab under 65,536 into the reference's int32) always fits: a
     * plain loop, where the checked one below costs several times as much per id. */
    if (out->kind == K_I32 && tokens->kind == K_U16) {
        int32_t *to = (int32_t *)out->data + at;
        const uint16_t *from = (const uint16_t *)tokens->data + start;
        for (int64_t k = 0; k < n; k++)
            to[k] = from[k];
        return 0;
    }
    for (int64_t k = 0; k < n; k++) {
        const int64_t id = get(tokens, start + k);
        if (arr_put(out, at + k, id) < 0)
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
            if (arr_put(&out, base + position, id) < 0) {
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
        const int64_t from = segment_b ? 2 + len_a : 0;
        if (out.view.itemsize == 1) /* the reference's int8: a byte 1 is the value 1 */
            memset(out.data + r * out.cols + from, 1, (size_t)(n_tok - from));
        else
            for (int64_t k = from; k < n_tok; k++)
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

#define FN(name, doc) {#name, (PyCFunction)(void (*)(void))fast_##name, METH_VARARGS | METH_KEYWORDS, doc}

/* Each doc starts with its signature and "--", so inspect.signature reads it (_rows.pyi must agree). */
static PyMethodDef methods[] = {
    FN(fill_input_ids, "fill_input_ids(out, rows, tokens, spans, positions, shown, cls_id, sep_id)\n--\n\n"
       "out[r] = [CLS] A [SEP] B [SEP] of instance rows[r], with the shown ids at its positions."),
    FN(fill_input_mask, "fill_input_mask(out, rows, spans)\n--\n\nout[r] = 1 over instance rows[r]'s tokens."),
    FN(fill_segment_ids, "fill_segment_ids(out, rows, spans)\n--\n\n"
       "out[r] = 1 over instance rows[r]'s segment B and its [SEP]."),
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "bertdata.instances._rows",
    "Compiled inner loops: the padded reference arrays, one field at a time.",
    -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__rows(void)
{
    return PyModule_Create(&module);
}
