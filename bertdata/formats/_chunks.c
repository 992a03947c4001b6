/* An array cut into hdf5 chunks, each laid out as HDF5's shuffle filter stores it, in one pass:
 * the writer compresses each chunk and hands it to HDF5 as finished (hdf5io.ShardWriter.write).
 * A numpy pad, copy and byte transpose did the same in three passes, the transpose gathering
 * one byte at a time; _chunks.pyi gives the signature.
 */

#include "../instances/_arrays.h"

#if defined(__SSE2__)
#include <emmintrin.h>

/* 16 elements of 4 bytes (v0..v3, in order) as their 4 byte planes of 16 bytes each: bytes of
 * two vectors interleaved three times over sort them by byte, then by element. */
static inline void shuffle16x4(__m128i v0, __m128i v1, __m128i v2, __m128i v3, uint8_t *to, Py_ssize_t plane)
{
    const __m128i a0 = _mm_unpacklo_epi8(v0, v1), a1 = _mm_unpackhi_epi8(v0, v1);
    const __m128i a2 = _mm_unpacklo_epi8(v2, v3), a3 = _mm_unpackhi_epi8(v2, v3);
    const __m128i b0 = _mm_unpacklo_epi8(a0, a1), b1 = _mm_unpackhi_epi8(a0, a1);
    const __m128i b2 = _mm_unpacklo_epi8(a2, a3), b3 = _mm_unpackhi_epi8(a2, a3);
    /* c0: bytes 0 and 1 of elements 0-7; c1: bytes 2 and 3; d0, d1: those of elements 8-15. */
    const __m128i c0 = _mm_unpacklo_epi8(b0, b1), c1 = _mm_unpackhi_epi8(b0, b1);
    const __m128i d0 = _mm_unpacklo_epi8(b2, b3), d1 = _mm_unpackhi_epi8(b2, b3);
    _mm_storeu_si128((__m128i *)to, _mm_unpacklo_epi64(c0, d0));
    _mm_storeu_si128((__m128i *)(to + plane), _mm_unpackhi_epi64(c0, d0));
    _mm_storeu_si128((__m128i *)(to + 2 * plane), _mm_unpacklo_epi64(c1, d1));
    _mm_storeu_si128((__m128i *)(to + 3 * plane), _mm_unpackhi_epi64(c1, d1));
}

/* A whole-width chunk of 4-byte elements, cols a multiple of 4 (the token ids' chunks are 8 wide):
 * 16 elements at a time in the chunk's order, each 4 of them adjacent in the source. Returns how
 * many of its elements (from the start, in the chunk's order) it shuffled. */
static Py_ssize_t shuffle_chunk4(uint8_t *dst, const uint8_t *src, Py_ssize_t m, Py_ssize_t row0,
                                 Py_ssize_t col0, Py_ssize_t in_rows, Py_ssize_t rows, Py_ssize_t cols)
{
    const Py_ssize_t plane = rows * cols, total = in_rows * cols;
    Py_ssize_t k = 0, r = 0, c = 0; /* element k of the chunk is (r, c) */
    for (; k + 16 <= total; k += 16) {
        __m128i v[4];
        for (int q = 0; q < 4; q++) {
            v[q] = _mm_loadu_si128((const __m128i *)(src + ((row0 + r) * m + col0 + c) * 4));
            c += 4;
            if (c == cols) {
                c = 0;
                r++;
            }
        }
        shuffle16x4(v[0], v[1], v[2], v[3], dst + k, plane);
    }
    return k;
}
#endif

/* Chunk (i, j) of `src` ([n, m] elements of `size` bytes), shuffled into `dst` (rows * cols * size
 * bytes): byte b of element (r, c) at b * rows * cols + r * cols + c. Elements past the array's
 * edge are 0, as HDF5 pads edge chunks with the fill value. `size` is a constant in each caller,
 * so the byte loop unrolls. */
static inline void shuffle_chunk(uint8_t *dst, const uint8_t *src, Py_ssize_t n, Py_ssize_t m,
                                 Py_ssize_t i, Py_ssize_t j, Py_ssize_t rows, Py_ssize_t cols,
                                 const Py_ssize_t size)
{
    const Py_ssize_t plane = rows * cols;
    const Py_ssize_t row0 = i * rows, col0 = j * cols;
    const Py_ssize_t in_rows = n - row0 < rows ? n - row0 : rows;
    const Py_ssize_t in_cols = m - col0 < cols ? m - col0 : cols;
    if (in_rows < rows || in_cols < cols)
        memset(dst, 0, (size_t)(plane * size));
    Py_ssize_t r = 0;
#if defined(__SSE2__)
    if (size == 4 && in_cols == cols && cols % 4 == 0) {
        const Py_ssize_t done = shuffle_chunk4(dst, src, m, row0, col0, in_rows, rows, cols);
        r = done / cols;
        if (done % cols) {
            /* the vectors ended inside row r: finish it element by element */
            const uint8_t *from = src + ((row0 + r) * m + col0) * size;
            uint8_t *to = dst + r * cols;
            for (Py_ssize_t c = done % cols; c < cols; c++)
                for (Py_ssize_t b = 0; b < size; b++)
                    to[b * plane + c] = from[c * size + b];
            r++;
        }
    }
#endif
    for (; r < in_rows; r++) {
        const uint8_t *from = src + ((row0 + r) * m + col0) * size;
        uint8_t *to = dst + r * cols;
        for (Py_ssize_t c = 0; c < in_cols; c++)
            for (Py_ssize_t b = 0; b < size; b++)
                to[b * plane + c] = from[c * size + b];
    }
}

static void shuffle_all(uint8_t *dst, const uint8_t *src, Py_ssize_t n, Py_ssize_t m, Py_ssize_t rows,
                        Py_ssize_t cols, Py_ssize_t size)
{
    const Py_ssize_t n_i = n / rows + (n % rows != 0), n_j = m / cols + (m % cols != 0);
    const Py_ssize_t chunk = rows * cols * size;
    for (Py_ssize_t i = 0; i < n_i; i++)
        for (Py_ssize_t j = 0; j < n_j; j++) {
            uint8_t *to = dst + (i * n_j + j) * chunk;
            switch (size) {
            case 1: shuffle_chunk(to, src, n, m, i, j, rows, cols, 1); break;
            case 2: shuffle_chunk(to, src, n, m, i, j, rows, cols, 2); break;
            case 4: shuffle_chunk(to, src, n, m, i, j, rows, cols, 4); break;
            default: shuffle_chunk(to, src, n, m, i, j, rows, cols, 8); break;
            }
        }
}

static PyObject *fast_shuffle_chunks(PyObject *self, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"out", "values", "chunk_rows", "chunk_cols", NULL};
    Arr out = {.name = "out"}, values = {.name = "values"};
    Arr *all[] = {&out, &values};
    Py_ssize_t rows, cols;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O&O&nn:shuffle_chunks", kwlist, conv_out, &out, conv_in,
                                     &values, &rows, &cols))
        return NULL;
    if (require(&out, K_U8, 1) < 0)
        goto fail;
    if (values.view.ndim < 1) {
        PyErr_SetString(PyExc_ValueError, "values must have 1 or 2 dimensions, not 0");
        goto fail;
    }
    if (rows < 1 || cols < 1 || (values.view.ndim == 1 && cols != 1)) {
        PyErr_SetString(PyExc_ValueError, "chunk_rows and chunk_cols must be at least 1 (chunk_cols 1 for 1-d values)");
        goto fail;
    }
    const Py_ssize_t n = values.rows, m = values.cols, size = values.view.itemsize;
    /* Rounded up without n + rows - 1, which wraps for chunk sizes near 2**63. */
    const Py_ssize_t n_i = n / rows + (n % rows != 0), n_j = m / cols + (m % cols != 0);
    /* n_i * n_j <= n * m, which fits: the array is in memory. */
    if (rows > PY_SSIZE_T_MAX / cols / size || out.len % (rows * cols * size)
        || out.len / (rows * cols * size) != n_i * n_j) {
        PyErr_Format(PyExc_ValueError, "out must hold %zd chunks of %zd x %zd elements of %zd bytes",
                     n_i * n_j, rows, cols, size);
        goto fail;
    }
    Py_BEGIN_ALLOW_THREADS
    shuffle_all((uint8_t *)out.data, (const uint8_t *)values.data, n, m, rows, cols, size);
    Py_END_ALLOW_THREADS
    release(all, 2);
    Py_RETURN_NONE;
fail:
    release(all, 2);
    return NULL;
}

/* The doc starts with its signature and "--", so inspect.signature reads it (_chunks.pyi must agree). */
static PyMethodDef methods[] = {
    {"shuffle_chunks", (PyCFunction)(void (*)(void))fast_shuffle_chunks, METH_VARARGS | METH_KEYWORDS,
     "shuffle_chunks(out, values, chunk_rows, chunk_cols)\n--\n\n"
     "out[k] = chunk k of values (row-major over the chunk grid), 0-padded at the edges, its bytes shuffled "
     "as HDF5's shuffle filter stores them."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "bertdata.formats._chunks",
    "Compiled inner loop of the hdf5 writer: chunks laid out byte-shuffled in one pass.",
    -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__chunks(void)
{
    return PyModule_Create(&module);
}
