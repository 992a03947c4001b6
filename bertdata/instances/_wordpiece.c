/* The tokenizer's piece table, compiled: a line's words split into pieces and looked up in an
 * open-addressing table of the pieces seen so far, then each line's ids laid end to end; and
 * before that, a text shard's lines stripped and joined in UTF-8, never made into str (_lines.h).
 *
 * Plain CPython C API: arrays come in through the buffer protocol, so the module builds
 * without numpy headers and loads in microseconds, where a JIT costs about a second per
 * process. Every array's element type and shape are checked, every index that comes from
 * data is checked, and every value stored into a narrower integer is checked to fit, so bad
 * input raises a Python exception instead of corrupting memory or wrapping silently.
 * The Python wrapper (tokenize.py) owns allocation and regrows the table; _wordpiece.pyi
 * gives the signatures.
 */

#include "_arrays.h"
#include "_lines.h"
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

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

/* ---- the piece table's sizes ------------------------------------------------------------------ */

/* The pieces of `buf` (runs between space, tab, CR and LF) and its newlines: what `scan` will
 * find, so the caller can size its outputs without a pass over the bytes per separator. */
static PyObject *fast_count_pieces(PyObject *self, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"buf", NULL};
    Arr buf = {.name = "buf"};
    Arr *all[] = {&buf};
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O&:count_pieces", kwlist, conv_in, &buf))
        return NULL;
    if (require(&buf, K_U8, 1) < 0) {
        release(all, 1);
        return NULL;
    }
    const uint8_t *b = (const uint8_t *)buf.data;
    Py_ssize_t pieces = 0, newlines = 0, i = 0;
    int in_piece = 0;
#if defined(__SSE2__)
    /* 16 bytes at a time: a piece starts at each byte that is no separator where the one before
     * is one (or is the buffer's start). */
    const __m128i space = _mm_set1_epi8(32), tab = _mm_set1_epi8(9), cr = _mm_set1_epi8(13), lf = _mm_set1_epi8(10);
    for (; i + 16 <= buf.len; i += 16) {
        const __m128i v = _mm_loadu_si128((const __m128i *)(b + i));
        const __m128i is_lf = _mm_cmpeq_epi8(v, lf);
        const unsigned sep = (unsigned)_mm_movemask_epi8(_mm_or_si128(
            _mm_or_si128(_mm_cmpeq_epi8(v, space), _mm_cmpeq_epi8(v, tab)), _mm_or_si128(_mm_cmpeq_epi8(v, cr), is_lf)));
        const unsigned before_sep = (sep << 1 | !in_piece) & 0xFFFF;
        pieces += __builtin_popcount(~sep & before_sep & 0xFFFF);
        newlines += __builtin_popcount((unsigned)_mm_movemask_epi8(is_lf));
        in_piece = !(sep >> 15);
    }
#endif
    for (; i < buf.len; i++) {
        const uint8_t c = b[i];
        const int sep = c == 32 || c == 9 || c == 13 || c == 10;
        pieces += !sep & !in_piece;
        newlines += c == 10;
        in_piece = !sep;
    }
    release(all, 1);
    return Py_BuildValue("nn", pieces, newlines);
}

/* How many ids the first `words` pieces of word_entry have in all: the size `assemble` fills. */
static PyObject *fast_count_ids(PyObject *self, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"word_entry", "words", "value_lengths", NULL};
    Arr word_entry = {.name = "word_entry"}, value_lengths = {.name = "value_lengths"};
    Arr *all[] = {&word_entry, &value_lengths};
    Py_ssize_t words;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O&nO&:count_ids", kwlist, conv_in, &word_entry, &words,
                                     conv_in, &value_lengths))
        return NULL;
    int64_t total = 0;
    if (require(&word_entry, K_I32, 1) < 0 || require(&value_lengths, K_I32, 1) < 0)
        goto fail;
    if (words < 0 || words > word_entry.len) {
        PyErr_SetString(PyExc_ValueError, "count_ids: words out of range of word_entry");
        goto fail;
    }
    const int32_t *went = (const int32_t *)word_entry.data, *vlen = (const int32_t *)value_lengths.data;
    for (Py_ssize_t k = 0; k < words; k++) {
        if (went[k] < 0 || went[k] >= value_lengths.len) {
            PyErr_SetString(PyExc_ValueError, "count_ids: an entry outside value_lengths");
            goto fail;
        }
        total += vlen[went[k]];
    }
    release(all, 2);
    return PyLong_FromLongLong(total);
fail:
    release(all, 2);
    return NULL;
}

static PyObject *wordpiece_fast_scan(PyObject *self, PyObject *args, PyObject *kwargs)
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
                memmove(key + m[1], b + i, length); /* keys may be buf itself: a caller's arrays may overlap */
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
        /* A whole line's words are skipped, not read: its count must be in range all the same. */
        if (lwords[line] < 0 || w + lwords[line] > word_entry.len)
            goto bounds;
        if (whole[line]) {
            const int64_t a = woff[line], z = woff[line + 1];
            if (a < 0 || z < a)
                goto bounds;
            if (z - a > INT32_MAX)
                goto too_long;
            if (z > whole_ids.len || o + (z - a) > out.len)
                goto bounds;
            /* memmove: out may be whole_ids or values itself (a caller's arrays may overlap) */
            memmove(out.data + o * size, whole_ids.data + a * size, (z - a) * size);
            o += z - a;
        } else {
            for (Py_ssize_t k = w; k < w + lwords[line]; k++) {
                const int32_t e = went[k];
                if (e < 0 || e >= value_offsets.len)
                    goto bounds;
                const int64_t v = voff[e], count = vlen[e];
                if (v < 0 || count < 0 || v + count > values.len || o + count > out.len)
                    goto bounds;
                if (o + count - start > INT32_MAX)
                    goto too_long;
                memmove(out.data + o * size, values.data + v * size, count * size);
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

#define FN(name, doc) {#name, (PyCFunction)(void (*)(void))fast_##name, METH_VARARGS | METH_KEYWORDS, doc}

/* Each doc starts with its signature and "--", so inspect.signature reads it (_wordpiece.pyi must agree). */
static PyMethodDef methods[] = {
    FN(rehash, "rehash(slots, hashes, count)\n--\n\nReinsert entries 0..count-1 into empty slots."),
    FN(text_lines, "text_lines(block)\n--\n\nA text shard block's lines stripped, the non-blank ones joined; None if not UTF-8."),
    FN(count_pieces, "count_pieces(buf)\n--\n\nThe pieces scan will find in buf, and its newlines."),
    FN(count_ids, "count_ids(word_entry, words, value_lengths)\n--\n\nThe ids of the first words pieces, in all."),
    /* Not FN's fast_scan: _pages.c has a scan of its own, and the two are told apart by name. */
    {"scan", (PyCFunction)(void (*)(void))wordpiece_fast_scan, METH_VARARGS | METH_KEYWORDS,
     "scan(buf, *, slots, hashes, key_offsets, key_lengths, keys, meta, word_entry, line_words, "
     "whole_line)\n--\n\nSplit buf into pieces, adding new ones to the table; return how many."},
    FN(assemble, "assemble(word_entry, *, line_words, whole_line, value_offsets, value_lengths, values, "
       "whole_ids, whole_offsets, out, lengths)\n--\n\nLay each line's ids end to end in out; return how many."),
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "bertdata.instances._wordpiece",
    "Compiled inner loops: the tokenizer's piece table.",
    -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__wordpiece(void)
{
    return PyModule_Create(&module);
}
