/* A zlib stream (RFC 1950) for one byte-shuffled hdf5 chunk, which HDF5's gzip filter and every
 * zlib inflate read as any other. A shuffled chunk of token ids is a plane of near-random low
 * bytes, a plane of skewed high bytes and planes of zeros; masks and segment ids are long runs.
 * Matches further back than the byte before find next to nothing in such planes, so this encoder
 * looks for runs only (distance-1 matches, zlib's Z_RLE strategy) and entropy-codes the rest with
 * one optimal Huffman block: smaller files than libdeflate's level 1 in a fraction of its time,
 * and the same bytes on every machine (plain integer code, no tables left from an earlier call).
 * _zrle.pyi gives the signature.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "_huffman.h"

#define MIN_MATCH 3
#define MAX_MATCH 258
#define END_OF_BLOCK 256
#define CL_CODES 19
#define CL_MAX_BITS 7    /* the longest code-length code */
#define STORED_MAX 65535 /* the most bytes a stored block holds */

/* Length 3..258 as its code (257..285), extra bits and their value (RFC 1951, 3.2.5). */
static uint16_t len_code[MAX_MATCH + 1];
static uint8_t len_extra_bits[MAX_MATCH + 1];
static uint16_t len_extra_value[MAX_MATCH + 1];
static uint8_t code_extra_bits[29];

static void init_length_table(void)
{
    static const uint16_t base[29] = {3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 15, 17, 19, 23, 27, 31,
                                      35, 43, 51, 59, 67, 83, 99, 115, 131, 163, 195, 227, 258};
    static const uint8_t extra[29] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2,
                                      3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0};
    for (int code = 0; code < 29; code++) {
        code_extra_bits[code] = extra[code];
        int last = code == 28 ? MAX_MATCH : (code == 27 ? MAX_MATCH - 1 : base[code + 1] - 1);
        for (int len = base[code]; len <= last; len++) {
            len_code[len] = (uint16_t)(257 + code);
            len_extra_bits[len] = extra[code];
            len_extra_value[len] = (uint16_t)(len - base[code]);
        }
    }
}

typedef struct {
    uint8_t *out; /* room for every byte written plus 8 */
    size_t pos;
    uint64_t bits;
    int count;
} BitWriter;

static inline void add_bits(BitWriter *w, uint32_t value, int n)
{
    w->bits |= (uint64_t)value << w->count;
    w->count += n;
}

/* Stores the whole bit buffer and moves on by its full bytes, leaving at most 7 bits: no test
 * for a full buffer, which, taken at irregular intervals as code lengths vary, mispredicted
 * about once in four symbols. At most 56 bits may be added between two calls. */
static inline void flush_bytes(BitWriter *w)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    const uint64_t bits = w->bits;
    memcpy(w->out + w->pos, &bits, 8);
    const int bytes = w->count >> 3;
    w->pos += (size_t)bytes;
    w->bits >>= 8 * bytes;
    w->count &= 7;
#else
    for (; w->count >= 8; w->count -= 8) {
        w->out[w->pos++] = (uint8_t)w->bits;
        w->bits >>= 8;
    }
#endif
}

static inline void put_bits(BitWriter *w, uint32_t value, int n)
{
    add_bits(w, value, n);
    flush_bytes(w);
}

/* The last bits, their byte padded with zeros. */
static void flush_bits(BitWriter *w)
{
    flush_bytes(w);
    if (w->count)
        w->out[w->pos++] = (uint8_t)w->bits;
    w->bits = 0;
    w->count = 0;
}

/* The code lengths of both alphabets as one sequence, runs folded into repeat codes 16 (the
 * previous length 3-6 times), 17 (zero 3-10 times) and 18 (zero 11-138 times). Each item is
 * symbol | extra value << 8. Returns the number of items. */
static int fold_lengths(const uint8_t *lens, int n, uint16_t *items)
{
    int count = 0;
    for (int i = 0; i < n;) {
        const uint8_t v = lens[i];
        int run = 1;
        while (i + run < n && lens[i + run] == v)
            run++;
        i += run;
        if (v == 0) {
            while (run >= 11) {
                const int r = run < 138 ? run : 138;
                items[count++] = (uint16_t)(18 | (r - 11) << 8);
                run -= r;
            }
            if (run >= 3) {
                items[count++] = (uint16_t)(17 | (run - 3) << 8);
                run = 0;
            }
        } else {
            items[count++] = v;
            run--;
            while (run >= 3) {
                const int r = run < 6 ? run : 6;
                items[count++] = (uint16_t)(16 | (r - 3) << 8);
                run -= r;
            }
        }
        while (run-- > 0)
            items[count++] = v;
    }
    return count;
}

static const uint8_t CL_ORDER[CL_CODES] = {16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15};
static const uint8_t CL_EXTRA[CL_CODES] = {[16] = 2, [17] = 3, [18] = 7};

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

static uint32_t adler32(const uint8_t *data, size_t n)
{
    uint32_t a = 1, b = 0;
    while (n) {
        size_t k = n < 5552 ? n : 5552; /* the most bytes before b can overflow 32 bits */
        n -= k;
#if defined(__SSE2__)
        /* 16 bytes at a time: b gains 16 a, then the bytes weighted 16..1; their plain sum by
         * psadbw, their weighted sum by pmaddwd on the bytes widened to 16 bits. */
        if (k >= 16) {
            const __m128i zero = _mm_setzero_si128();
            const __m128i weights_lo = _mm_setr_epi16(16, 15, 14, 13, 12, 11, 10, 9);
            const __m128i weights_hi = _mm_setr_epi16(8, 7, 6, 5, 4, 3, 2, 1);
            __m128i sums = zero, weighted = zero, a_sums = zero;
            for (; k >= 16; k -= 16, data += 16) {
                const __m128i bytes = _mm_loadu_si128((const __m128i *)data);
                a_sums = _mm_add_epi32(a_sums, sums); /* each earlier block's bytes, once per block since */
                sums = _mm_add_epi32(sums, _mm_sad_epu8(bytes, zero));
                weighted = _mm_add_epi32(weighted, _mm_madd_epi16(_mm_unpacklo_epi8(bytes, zero), weights_lo));
                weighted = _mm_add_epi32(weighted, _mm_madd_epi16(_mm_unpackhi_epi8(bytes, zero), weights_hi));
                b += 16 * a;
            }
            uint32_t lanes[4];
            _mm_storeu_si128((__m128i *)lanes, sums);
            const uint32_t sum = lanes[0] + lanes[2];
            _mm_storeu_si128((__m128i *)lanes, a_sums);
            b += 16 * (lanes[0] + lanes[2]);
            _mm_storeu_si128((__m128i *)lanes, weighted);
            b += lanes[0] + lanes[1] + lanes[2] + lanes[3];
            a += sum;
        }
#endif
        for (; k >= 16; k -= 16, data += 16) {
            uint32_t sum = 0, weighted = 0;
            for (int j = 0; j < 16; j++) {
                sum += data[j];
                weighted += (uint32_t)(16 - j) * data[j];
            }
            b += 16 * a + weighted;
            a += sum;
        }
        while (k--) {
            a += *data++;
            b += a;
        }
        a %= 65521;
        b %= 65521;
    }
    return b << 16 | a;
}

/* Where the next run of 4 or more equal bytes starts in data[i..n), or n. Runs of 2 or 3 are
 * sent as literals, so only longer ones stop the literal loop; a word of 8 bytes shows at once
 * whether one starts in its first 5 (the byte-by-byte test mispredicted on every short run). */
static inline size_t next_run(const uint8_t *data, size_t i, size_t n)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    const uint64_t low7 = 0x7f7f7f7f7f7f7f7fULL;
    for (; i + 8 <= n; i += 5) {
        uint64_t x;
        memcpy(&x, data + i, 8);
        const uint64_t diff = x ^ (x >> 8);                     /* byte k: data[i+k] ^ data[i+k+1] */
        const uint64_t zero = ~(((diff & low7) + low7) | diff | low7); /* 0x80 where that is 0 */
        const uint64_t run = zero & (zero >> 8) & (zero >> 16) & 0x0000008080808080ULL;
        if (run)
            return i + (size_t)(__builtin_ctzll(run) >> 3);
    }
#endif
    for (; i + 4 <= n; i++)
        if (data[i] == data[i + 1] && data[i] == data[i + 2] && data[i] == data[i + 3])
            return i;
    return n;
}

/* How many of data[0..n) equal b, from the start: 8 bytes at a time. */
static inline size_t same_bytes(const uint8_t *data, size_t n, uint8_t b)
{
    size_t k = 0;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    const uint64_t all = 0x0101010101010101ULL * b;
    for (; k + 8 <= n; k += 8) {
        uint64_t x;
        memcpy(&x, data + k, 8);
        if (x != all)
            return k + (size_t)(__builtin_ctzll(x ^ all) >> 3);
    }
#endif
    while (k < n && data[k] == b)
        k++;
    return k;
}

/* Symbols of `data`: literals, and for each run of 4 or more equal bytes its first byte as a
 * literal and the rest as lengths of distance-1 matches (3..258; a remainder under 3 as
 * literals). Each is a uint16: a byte value, or MAX_MATCH + 1 + length for a match. */
static size_t runs(const uint8_t *data, size_t n, uint16_t *symbols, uint32_t *freqs)
{
    /* Literals are counted in four tables in turn: one table stalled on every repeated byte,
     * each count waiting for the one before. */
    uint32_t seen[4][256] = {{0}};
    size_t count = 0, i = 0;
    while (i < n) {
        const size_t start = next_run(data, i, n);
        for (size_t j = i; j < start; j++) /* apart from the counting, so it vectorises */
            symbols[count + j - i] = data[j];
        count += start - i;
        for (; i + 4 <= start; i += 4) {
            seen[0][data[i]]++;
            seen[1][data[i + 1]]++;
            seen[2][data[i + 2]]++;
            seen[3][data[i + 3]]++;
        }
        for (; i < start; i++)
            seen[0][data[i]]++;
        if (i == n)
            break;
        const uint8_t b = data[i];
        size_t run = 4 + same_bytes(data + i + 4, n - i - 4, b);
        i += run;
        symbols[count++] = b;
        freqs[b]++;
        run--;
        while (run >= MIN_MATCH) {
            const size_t len = run < MAX_MATCH ? run : MAX_MATCH;
            symbols[count++] = (uint16_t)(MAX_MATCH + 1 + len);
            freqs[len_code[len]]++;
            run -= len;
        }
        while (run--) {
            symbols[count++] = b;
            freqs[b]++;
        }
    }
    for (int b = 0; b < 256; b++)
        freqs[b] += seen[0][b] + seen[1][b] + seen[2][b] + seen[3][b];
    return count;
}

/* The bytes of n bytes sent as stored blocks: each holds at most STORED_MAX, after 5 bytes of
 * header (3 bits, padded to a byte, then its length twice). */
static size_t stored_bytes(size_t n)
{
    return n + 5 * (n / STORED_MAX + 1);
}

/* The most zrle writes for n bytes: its zlib header, stored blocks (it sends the dynamic block
 * only where that is smaller), the checksum, and 8 for the bit writer's whole-word stores. */
static size_t zrle_bound(size_t n)
{
    return 2 + stored_bytes(n) + 4 + 8;
}

/* The zlib stream of data[0..n), written to out (zrle_bound(n) bytes); its size. `symbols`
 * holds n. */
static size_t zrle(const uint8_t *data, size_t n, uint8_t *out, uint16_t *symbols)
{
    uint32_t freqs[LITLEN_CODES] = {0};
    const size_t count = runs(data, n, symbols, freqs);
    freqs[END_OF_BLOCK] = 1;
    uint8_t lens[LITLEN_CODES + 1];
    uint16_t codes[LITLEN_CODES] = {0};
    huffman_lengths(freqs, LITLEN_CODES, MAX_BITS, lens);
    int n_lit = LITLEN_CODES;
    while (n_lit > 257 && !lens[n_lit - 1])
        n_lit--;
    lens[n_lit] = 1; /* the one distance code (distance 1), one bit, as deflate wants */
    canonical_codes(lens, n_lit, codes);

    uint16_t items[LITLEN_CODES + 1];
    const int n_items = fold_lengths(lens, n_lit + 1, items);
    uint32_t cl_freqs[CL_CODES] = {0};
    uint8_t cl_lens[CL_CODES];
    uint16_t cl_codes[CL_CODES];
    for (int i = 0; i < n_items; i++)
        cl_freqs[items[i] & 0xff]++;
    huffman_lengths(cl_freqs, CL_CODES, CL_MAX_BITS, cl_lens);
    int cl_used = 0;
    for (int s = 0; s < CL_CODES; s++)
        cl_used += cl_lens[s] != 0;
    if (cl_used == 1) /* a lone code-length code must still be a complete code: give it a partner */
        cl_lens[cl_lens[0] ? 1 : 0] = 1;
    canonical_codes(cl_lens, CL_CODES, cl_codes);
    int n_cl = CL_CODES;
    while (n_cl > 4 && !cl_lens[CL_ORDER[n_cl - 1]])
        n_cl--;

    /* The block's size in bits, to fall back to stored blocks where it would be larger. */
    uint64_t bits = 3 + 5 + 5 + 4 + 3 * (uint64_t)n_cl;
    for (int i = 0; i < n_items; i++)
        bits += cl_lens[items[i] & 0xff] + CL_EXTRA[items[i] & 0xff];
    for (int s = 0; s < n_lit; s++)
        bits += (uint64_t)freqs[s] * lens[s];
    for (int code = 257; code < LITLEN_CODES; code++) /* + extra bits and the distance code's bit */
        bits += (uint64_t)freqs[code] * (code_extra_bits[code - 257] + 1u);

    BitWriter w = {.out = out, .pos = 0, .bits = 0, .count = 0};
    out[w.pos++] = 0x78; /* deflate, 32 KB window */
    out[w.pos++] = 0x01; /* no dictionary, "fastest" level; 0x7801 is a multiple of 31 */
    if ((bits + 7) / 8 >= stored_bytes(n)) {
        size_t done = 0;
        do {
            const size_t k = n - done < STORED_MAX ? n - done : STORED_MAX;
            put_bits(&w, done + k == n ? 1 : 0, 3); /* BFINAL on the last, BTYPE 00 */
            flush_bits(&w);
            out[w.pos++] = (uint8_t)k;
            out[w.pos++] = (uint8_t)(k >> 8);
            out[w.pos++] = (uint8_t)~k;
            out[w.pos++] = (uint8_t)(~k >> 8);
            memcpy(out + w.pos, data + done, k);
            w.pos += k;
            done += k;
        } while (done < n);
    } else {
        put_bits(&w, 1 | 2 << 1, 3); /* BFINAL, BTYPE 10: dynamic Huffman codes */
        put_bits(&w, (uint32_t)(n_lit - 257), 5);
        put_bits(&w, 0, 5); /* one distance code */
        put_bits(&w, (uint32_t)(n_cl - 4), 4);
        for (int i = 0; i < n_cl; i++)
            put_bits(&w, cl_lens[CL_ORDER[i]], 3);
        for (int i = 0; i < n_items; i++) {
            const int s = items[i] & 0xff;
            put_bits(&w, cl_codes[s], cl_lens[s]);
            if (CL_EXTRA[s])
                put_bits(&w, (uint32_t)(items[i] >> 8), CL_EXTRA[s]);
        }
        /* Each symbol's bits ready to send: a literal's code, or a length's code, its extra bits
         * and the distance code (0, one bit): at most 15 + 5 + 1 bits. */
        uint32_t send[MAX_MATCH + 1 + MAX_MATCH + 1];
        uint8_t send_bits[MAX_MATCH + 1 + MAX_MATCH + 1];
        for (int b = 0; b < 256; b++) {
            send[b] = codes[b];
            send_bits[b] = lens[b];
        }
        for (int len = MIN_MATCH; len <= MAX_MATCH; len++) {
            const int code = len_code[len];
            send[MAX_MATCH + 1 + len] = codes[code] | (uint32_t)len_extra_value[len] << lens[code];
            send_bits[MAX_MATCH + 1 + len] = (uint8_t)(lens[code] + len_extra_bits[len] + 1);
        }
        size_t i = 0;
        for (; i + 1 < count; i += 2) { /* two symbols, at most 42 bits, per flush */
            add_bits(&w, send[symbols[i]], send_bits[symbols[i]]);
            add_bits(&w, send[symbols[i + 1]], send_bits[symbols[i + 1]]);
            flush_bytes(&w);
        }
        if (i < count)
            put_bits(&w, send[symbols[i]], send_bits[symbols[i]]);
        put_bits(&w, codes[END_OF_BLOCK], lens[END_OF_BLOCK]);
        flush_bits(&w);
    }
    const uint32_t check = adler32(data, n);
    for (int i = 3; i >= 0; i--)
        out[w.pos++] = (uint8_t)(check >> (8 * i));
    return w.pos;
}

static PyObject *zlib_rle(PyObject *Py_UNUSED(self), PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"data", NULL};
    Py_buffer view;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "y*:zlib_rle", kwlist, &view))
        return NULL;
    /* The symbol counts and the Huffman tree's weights are 32-bit: their sum, at most the bytes
     * and the end of block, must not wrap. A chunk is tens of KB. */
    if ((uint64_t)view.len >= ((uint64_t)1 << 31)) {
        PyBuffer_Release(&view);
        PyErr_Format(PyExc_ValueError, "zlib_rle: %zd bytes, more than 2**31 - 1 in one call", view.len);
        return NULL;
    }
    const size_t n = (size_t)view.len;
    uint8_t *out = malloc(zrle_bound(n));
    uint16_t *symbols = malloc((n ? n : 1) * sizeof *symbols);
    PyObject *result = NULL;
    if (!out || !symbols) {
        PyErr_NoMemory();
    } else {
        size_t size;
        Py_BEGIN_ALLOW_THREADS
        size = zrle((const uint8_t *)view.buf, n, out, symbols);
        Py_END_ALLOW_THREADS
        result = PyBytes_FromStringAndSize((const char *)out, (Py_ssize_t)size);
    }
    free(out);
    free(symbols);
    PyBuffer_Release(&view);
    return result;
}

/* The doc starts with its signature and "--", so inspect.signature reads it (_zrle.pyi must agree). */
static PyMethodDef methods[] = {
    {"zlib_rle", (PyCFunction)(void (*)(void))zlib_rle, METH_VARARGS | METH_KEYWORDS,
     "zlib_rle(data)\n--\n\n"
     "The zlib stream of data's bytes: runs as distance-1 matches and one optimal Huffman block (stored "
     "blocks where those are smaller). The same bytes on every machine; the GIL is released."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "bertdata.formats._zrle",
    "Compiled deflate for byte-shuffled hdf5 chunks: runs and one Huffman block, the same bytes everywhere.",
    -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__zrle(void)
{
    init_length_table();
    return PyModule_Create(&module);
}
