/* bzip2 decoding for the byte ranges of a multistream dump: several blocks at a time, their
 * inverse Burrows-Wheeler walks cut into segments that a few lanes advance in turn (_bzwalk.h).
 * Each walk is a chain of dependent loads, one per output byte, into a table of 3.6 MB that
 * misses the core's own caches: a lone chain waits for every load (libbz2 and indexed_bzip2
 * spend most of their time there). Every block's CRC and every stream's
 * combined CRC is checked before its bytes are handed back; the caller takes any error as a
 * cue to let libbz2 decode the range and name the damage. Randomised blocks (a bzip2 0.9.0
 * feature no encoder has written since 1999) are refused the same way. _bunzip.pyi gives the
 * signature.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "_bzblock.h"

#define GROUP_BLOCKS 4 /* blocks decoded, then walked, a call (README, Performance: 2, 4 and 8 timed) */
/* A call returns no more than this (unless its first block alone makes more): a stream of
 * runs can expand 50-fold, and memory stays bounded whatever the data. */
#define MAX_OUTPUT (32u << 20)
#define MAX_EVENTS (2 * GROUP_BLOCKS + 2)

#include "_bzwalk.h"

#define BLOCK_MAGIC 0x314159265359ULL
#define END_MAGIC 0x177245385090ULL

static uint32_t crc_tables[8][256]; /* [k][b]: byte b followed by k zero bytes */

static void init_crc_tables(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i << 24;
        for (int k = 0; k < 8; k++)
            c = (c & 0x80000000u) ? (c << 1) ^ 0x04c11db7u : c << 1;
        crc_tables[0][i] = c;
    }
    for (int k = 1; k < 8; k++)
        for (int i = 0; i < 256; i++)
            crc_tables[k][i] = (crc_tables[k - 1][i] << 8) ^ crc_tables[0][crc_tables[k - 1][i] >> 24];
}

/* Where the next run of 4 equal bytes starts in w[i, n) (n: none). Text has few: the bytes
 * between are copied whole, where a test per byte, twice (sizing, then writing), took a tenth
 * of the decoder's time. Sixteen places are tested at once where SSE2 is there (all x86-64). */
static inline int32_t bunzip_next_run(const uint8_t *w, int32_t i, int32_t n)
{
#ifdef __SSE2__
    for (; i + 19 <= n; i += 16) {
        const __m128i a = _mm_loadu_si128((const __m128i *)(w + i));
        const __m128i same = _mm_and_si128(
            _mm_and_si128(_mm_cmpeq_epi8(a, _mm_loadu_si128((const __m128i *)(w + i + 1))),
                          _mm_cmpeq_epi8(a, _mm_loadu_si128((const __m128i *)(w + i + 2)))),
            _mm_cmpeq_epi8(a, _mm_loadu_si128((const __m128i *)(w + i + 3))));
        const unsigned starts = (unsigned)_mm_movemask_epi8(same);
        if (starts) return i + __builtin_ctz(starts);
    }
#endif
    for (; i + 3 < n; i++)
        if (w[i] == w[i + 1] && w[i] == w[i + 2] && w[i] == w[i + 3]) return i;
    return n;
}

/* The first run-length stage undone (4 equal bytes, then a count of 0-255 more): with `out`
 * NULL, only the size it takes; else written there. -1 for a run cut off at the block's end. */
static int64_t unrun(const Block *b, uint8_t *out)
{
    const uint8_t *w = b->walk;
    const int32_t n = b->n;
    int64_t total = 0;
    for (int32_t i = 0; i < n;) {
        const int32_t run = bunzip_next_run(w, i, n);
        if (out) memcpy(out + total, w + i, (size_t)(run - i));
        total += run - i;
        if (run == n) break;
        if (run + 4 >= n) return -1;
        const int32_t length = 4 + w[run + 4];
        if (out) memset(out + total, w[run], (size_t)length);
        total += length;
        i = run + 5;
    }
    return total;
}

/* bzip2's CRC (CRC-32 MSB first) of `n` bytes, eight at a time. */
static uint32_t crc_of(const uint8_t *p, size_t n)
{
    uint32_t crc = 0xffffffffu;
    for (; n >= 8; n -= 8, p += 8) {
        crc ^= (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
        crc = crc_tables[7][crc >> 24] ^ crc_tables[6][(crc >> 16) & 0xff] ^ crc_tables[5][(crc >> 8) & 0xff]
              ^ crc_tables[4][crc & 0xff] ^ crc_tables[3][p[4]] ^ crc_tables[2][p[5]] ^ crc_tables[1][p[6]]
              ^ crc_tables[0][p[7]];
    }
    for (; n; n--, p++) crc = (crc << 8) ^ crc_tables[0][(crc >> 24) ^ *p];
    return ~crc;
}

enum { EV_BLOCK, EV_END };

typedef struct {
    int kind, block;
    uint32_t crc;
    uint64_t next; /* EV_END: the byte after the stream, where the next one may start */
} Event;

/* What a call needs besides its output, about 22 MB, kept for the next call until `release`:
 * mapped afresh for every range of the 64x dump, its first touch cost ~7% of a two-worker
 * build in page faults. One set per process: a second decoder at the same time maps its own
 * and unmaps it after. Mapped, not malloc'ed: glibc kept freed scratch of the threads in their
 * arenas (a one-worker build of the 64x dump peaked at 730 MiB instead of 280). */
typedef struct {
    Block blocks[GROUP_BLOCKS];
    Table tables[MAX_GROUPS];
    uint8_t selectors[MAX_SELECTORS];
    uint32_t tt[GROUP_BLOCKS][MAX_BLOCK];
    uint8_t walk[GROUP_BLOCKS][MAX_BLOCK];
    Walks walks;
} Scratch;

static Scratch *cached_scratch;

static void free_scratch(Scratch *s)
{
    if (s) munmap(s, sizeof(Scratch));
}

static Scratch *new_scratch(void)
{
    Scratch *s = mmap(NULL, sizeof(Scratch), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (s == MAP_FAILED) return NULL;
    /* The walks' loads land anywhere in 8 tables of 3.6 MB: on 4 KB pages nearly each one misses
     * the TLB as well as the caches. Huge pages, where the kernel grants them, save some of the
     * decoder's CPU (README, Performance); refused or unsupported, nothing else changes. */
#ifdef MADV_HUGEPAGE
    madvise(s, sizeof(Scratch), MADV_HUGEPAGE);
#endif
    for (int k = 0; k < GROUP_BLOCKS; k++) {
        s->blocks[k].tt = s->tt[k];
        s->blocks[k].walk = s->walk[k];
    }
    return s;
}

/* Thread-safe without the GIL: whoever takes the one cached set has it to itself. */
static Scratch *take_scratch(void)
{
    Scratch *s = __atomic_exchange_n(&cached_scratch, NULL, __ATOMIC_ACQ_REL);
    return s ? s : new_scratch();
}

static void keep_scratch(Scratch *s) { free_scratch(__atomic_exchange_n(&cached_scratch, s, __ATOMIC_ACQ_REL)); }

typedef struct {
    const char *damage;
    int n_events;
    Event events[MAX_EVENTS];
    int64_t sizes[MAX_EVENTS];
    uint64_t bit;
    int level;
} Group;

/* Read up to GROUP_BLOCKS blocks from `g->bit`, walk them, and size their output; events past
 * MAX_OUTPUT are dropped and `g->bit`/`g->level` moved back to the first of them. */
static void read_group(Group *g, Scratch *s, const uint8_t *data, size_t size)
{
    Reader r = {data, size, (size_t)(g->bit / 8), 0, 0};
    refill(&r);
    if (g->bit % 8) take(&r, (int)(g->bit % 8));
    int level = g->level, n_blocks = 0;
    while (n_blocks < GROUP_BLOCKS && g->n_events < MAX_EVENTS - 1) {
        if (level == 0) {
            if (bit_position(&r) == (uint64_t)size * 8) break;
            if (size * 8 - bit_position(&r) < 32) { g->damage = "bytes after the last stream"; return; }
            uint32_t head = take(&r, 32);
            if ((head >> 8) != 0x425a68u || (head & 0xff) < '1' || (head & 0xff) > '9') {
                g->damage = "not the start of a bz2 stream";
                return;
            }
            level = (int)(head & 0xff) - '0'; /* the combined CRC restarts at the end event before */
        }
        const uint64_t at = bit_position(&r);
        uint64_t magic = (uint64_t)take(&r, 24) << 24;
        magic |= take(&r, 24);
        if (magic == BLOCK_MAGIC) {
            Block *b = &s->blocks[n_blocks];
            if (read_block(&r, b, level, s->tables, s->selectors)) { g->damage = "corrupt block"; return; }
            b->start = at;
            b->level = level;
            g->events[g->n_events++] = (Event){EV_BLOCK, n_blocks++, 0, 0};
        } else if (magic == END_MAGIC) {
            uint32_t stored = take(&r, 32);
            if (overrun(&r)) { g->damage = "truncated"; return; }
            uint64_t end = bit_position(&r);
            if (end % 8) take(&r, (int)(8 - end % 8));
            g->events[g->n_events++] = (Event){EV_END, 0, stored, (end + 7) / 8};
            level = 0;
        } else {
            g->damage = overrun(&r) ? "truncated" : "bad block magic";
            return;
        }
    }
    g->bit = bit_position(&r);
    g->level = level;
    if (n_blocks && walk_blocks(&s->walks, s->blocks, n_blocks)) {
        g->damage = "corrupt block";
        return;
    }
    int64_t total = 0;
    for (int e = 0; e < g->n_events; e++) {
        g->sizes[e] = 0;
        if (g->events[e].kind != EV_BLOCK) continue;
        const Block *b = &s->blocks[g->events[e].block];
        int64_t n = unrun(b, NULL);
        if (n < 0) { g->damage = "corrupt block"; return; }
        if (total && total + n > MAX_OUTPUT) { /* the rest next time */
            g->n_events = e;
            g->bit = b->start;
            g->level = b->level;
            return;
        }
        g->sizes[e] = n;
        total += n;
    }
}

/* The group's bytes into `out`, every CRC checked; the stream's combined CRC goes on in `combined`. */
static void write_group(Group *g, Scratch *s, uint8_t *out, uint32_t *combined)
{
    for (int e = 0; e < g->n_events; e++) {
        const Event *ev = &g->events[e];
        if (ev->kind == EV_END) {
            if (*combined != ev->crc) { g->damage = "stream CRC mismatch"; return; }
            *combined = 0;
            continue;
        }
        const Block *b = &s->blocks[ev->block];
        unrun(b, out);
        uint32_t crc = crc_of(out, (size_t)g->sizes[e]);
        if (crc != b->stored_crc) { g->damage = "block CRC mismatch"; return; }
        *combined = ((*combined << 1) | (*combined >> 31)) ^ crc;
        out += g->sizes[e];
    }
}

static PyObject *decode(PyObject *Py_UNUSED(self), PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"data", "bit", "level", "crc", NULL};
    Py_buffer view;
    unsigned long long bit;
    int level;
    unsigned long crc_in;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "y*Kik:decode", kwlist, &view, &bit, &level, &crc_in))
        return NULL;
    if (level < 0 || level > 9 || bit > (unsigned long long)view.len * 8 || (level == 0 && bit % 8)) {
        PyBuffer_Release(&view);
        return PyErr_Format(PyExc_ValueError, "bz2 data: bad position or state");
    }
    Group g = {.bit = bit, .level = level};
    Scratch *s = NULL;
    PyObject *out = NULL, *ends = NULL;
    uint32_t combined = level ? (uint32_t)crc_in : 0;
    Py_BEGIN_ALLOW_THREADS
    s = take_scratch();
    if (s)
        read_group(&g, s, (const uint8_t *)view.buf, (size_t)view.len);
    Py_END_ALLOW_THREADS
    if (!s || g.damage) goto fail;
    int64_t total = 0;
    for (int e = 0; e < g.n_events; e++) total += g.sizes[e];
    out = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)total);
    if (!out) goto fail;
    Py_BEGIN_ALLOW_THREADS
    write_group(&g, s, (uint8_t *)PyBytes_AS_STRING(out), &combined);
    Py_END_ALLOW_THREADS
    if (g.damage) goto fail;
    /* Where each stream that ended in this call ends, in the data and in the output: a caller
     * that handed over several ranges at once cuts the output at theirs. */
    int n_ends = 0;
    for (int e = 0; e < g.n_events; e++) n_ends += g.events[e].kind == EV_END;
    ends = PyTuple_New(n_ends);
    if (!ends) goto fail;
    int64_t at = 0;
    for (int e = 0, k = 0; e < g.n_events; e++) {
        if (g.events[e].kind == EV_END) {
            PyObject *end = Py_BuildValue("(KL)", (unsigned long long)g.events[e].next, (long long)at);
            if (!end) goto fail;
            PyTuple_SET_ITEM(ends, k++, end);
        }
        at += g.sizes[e];
    }
    PyObject *result = Py_BuildValue("(NKikN)", out, (unsigned long long)g.bit, g.level, (unsigned long)combined,
                                     ends);
    out = ends = NULL;
    keep_scratch(s);
    PyBuffer_Release(&view);
    return result;
fail:
    Py_XDECREF(out);
    Py_XDECREF(ends);
    if (g.damage)
        PyErr_Format(PyExc_ValueError, "bz2 data: %s", g.damage);
    else if (!PyErr_Occurred())
        PyErr_NoMemory();
    free_scratch(s);
    PyBuffer_Release(&view);
    return NULL;
}

static PyObject *bunzip_release(PyObject *Py_UNUSED(self), PyObject *Py_UNUSED(args))
{
    free_scratch(__atomic_exchange_n(&cached_scratch, NULL, __ATOMIC_ACQ_REL));
    Py_RETURN_NONE;
}

/* The doc starts with its signature and "--", so inspect.signature reads it (_bunzip.pyi must agree). */
static PyMethodDef methods[] = {
    {"decode", (PyCFunction)(void (*)(void))decode, METH_VARARGS | METH_KEYWORDS,
     "decode(data, bit, level, crc)\n--\n\n"
     "Decode the next few blocks of the bz2 streams in data from bit offset bit: (bytes, bit, level, crc) "
     "to continue from, and ends: (byte, output offset) where each stream that ended is over. "
     "The GIL is released."},
    {"release", (PyCFunction)bunzip_release, METH_NOARGS,
     "release()\n--\n\n"
     "Unmap the scratch decode keeps between calls (about 22 MB)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "bertdata.text._bunzip",
    "Compiled bzip2 decoding of multistream ranges, several blocks' inverse BWT walks interleaved.",
    -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__bunzip(void)
{
    init_crc_tables();
    return PyModule_Create(&module);
}
