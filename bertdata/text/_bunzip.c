/* bzip2 decoding for the byte ranges of a multistream dump: several blocks at a time, their
 * inverse Burrows-Wheeler walks interleaved. Each walk is a chain of dependent loads, one per
 * output byte, into a table of 3.6 MB that misses the core's own caches: a lone chain waits
 * for every load (libbz2 and indexed_bzip2 spend most of their time there), while a few
 * chains advanced in turn keep that many loads in flight. Every block's CRC and every stream's
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

#define GROUP_BLOCKS 8      /* blocks decoded, and walked, together: 8 took 0.86x 1's time, 2 0.94x */
/* A call returns no more than this (unless its first block alone makes more): a stream of
 * runs can expand 50-fold, and memory stays bounded whatever the data. */
#define MAX_OUTPUT (32u << 20)
#define MAX_EVENTS (2 * GROUP_BLOCKS + 2)
#define MAX_ALPHA 258
#define MAX_GROUPS 6
#define MAX_SELECTORS 18002 /* bzip2 1.0.8: more are read and ignored */
#define MAX_CODE_LEN 20
#define GROUP_SIZE 50
#define FAST_BITS 10
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

/* MSB-first bits; `bits` holds `count` of them at its top. Past the data it reads zeros,
 * which `overrun` then reports, so the hot loops need no bounds test per read. */
typedef struct {
    const uint8_t *data;
    size_t size, next;
    uint64_t bits;
    int count;
} Reader;

static inline void refill(Reader *r)
{
    while (r->count <= 56) {
        uint64_t byte = r->next < r->size ? r->data[r->next] : 0;
        r->next++;
        r->bits |= byte << (56 - r->count);
        r->count += 8;
    }
}

static inline uint32_t take(Reader *r, int n) /* 1 <= n <= 32 */
{
    if (r->count < n)
        refill(r);
    uint32_t v = (uint32_t)(r->bits >> (64 - n));
    r->bits <<= n;
    r->count -= n;
    return v;
}

static inline uint64_t bit_position(const Reader *r) { return (uint64_t)r->next * 8 - (uint64_t)r->count; }

static inline int overrun(const Reader *r) { return bit_position(r) > (uint64_t)r->size * 8; }

/* One coding table: libbz2's canonical codes (limit/base/perm), plus a lookup of the first
 * FAST_BITS bits that resolves every code no longer than that in one step. */
typedef struct {
    int32_t limit[MAX_CODE_LEN + 2], base[MAX_CODE_LEN + 2], perm[MAX_ALPHA];
    int min_len;
    uint16_t fast[1 << FAST_BITS]; /* symbol << 5 | length; 0: longer than FAST_BITS */
} Table;

static int make_table(Table *t, const uint8_t *length, int alpha)
{
    int min_len = 32, max_len = 0;
    for (int i = 0; i < alpha; i++) {
        if (length[i] > max_len) max_len = length[i];
        if (length[i] < min_len) min_len = length[i];
    }
    memset(t->perm, 0, sizeof t->perm);
    int pp = 0;
    for (int len = min_len; len <= max_len; len++)
        for (int s = 0; s < alpha; s++)
            if (length[s] == len) t->perm[pp++] = s;
    int32_t count[MAX_CODE_LEN + 2] = {0};
    for (int s = 0; s < alpha; s++) count[length[s] + 1]++;
    int32_t base[MAX_CODE_LEN + 2];
    base[0] = count[0];
    for (int i = 1; i < MAX_CODE_LEN + 2; i++) base[i] = base[i - 1] + count[i];
    for (int i = 0; i < MAX_CODE_LEN + 2; i++) t->limit[i] = 0;
    int32_t vec = 0;
    for (int len = min_len; len <= max_len; len++) {
        vec += base[len + 1] - base[len];
        t->limit[len] = vec - 1;
        vec <<= 1;
    }
    for (int len = min_len + 1; len <= max_len; len++) base[len] = ((t->limit[len - 1] + 1) << 1) - base[len];
    memcpy(t->base, base, sizeof base);
    t->min_len = min_len;
    /* The table gives what libbz2's loop (shortest length first, `code <= limit`) decides. */
    memset(t->fast, 0, sizeof t->fast);
    for (int len = min_len; len <= max_len && len <= FAST_BITS; len++) {
        int32_t first = len == min_len ? 0 : (t->limit[len - 1] + 1) << 1;
        for (int32_t code = first; code <= t->limit[len]; code++) {
            int32_t p = code - t->base[len];
            if (p < 0 || p >= alpha) return -1;
            uint32_t lo = (uint32_t)code << (FAST_BITS - len), hi = (uint32_t)(code + 1) << (FAST_BITS - len);
            if (hi > (1u << FAST_BITS)) return -1;
            for (uint32_t v = lo; v < hi; v++) t->fast[v] = (uint16_t)(t->perm[p] << 5 | len);
        }
    }
    return 0;
}

/* The next symbol of table `t`; -1 for a code no table has. */
static inline int decode_symbol(Reader *r, const Table *t, int alpha)
{
    if (r->count < MAX_CODE_LEN)
        refill(r);
    uint16_t e = t->fast[r->bits >> (64 - FAST_BITS)];
    if (e) {
        int len = e & 31;
        r->bits <<= len;
        r->count -= len;
        return e >> 5;
    }
    int len = t->min_len;
    int32_t code = (int32_t)(r->bits >> (64 - len));
    while (code > t->limit[len]) {
        if (++len > MAX_CODE_LEN) return -1;
        code = (int32_t)(r->bits >> (64 - len));
    }
    int32_t p = code - t->base[len];
    if (p < 0 || p >= alpha) return -1;
    r->bits <<= len;
    r->count -= len;
    return t->perm[p];
}

#define TT_BYTES (4u << 20) /* 900,000 entries of 4 bytes, rounded up to two huge pages */

/* A block's link table, in huge pages where the kernel grants them: a walk's loads land all
 * over its 3.6 MB, and in 4 KB pages nearly each one missed the TLB too, which serialised them. */
static uint32_t *huge_table(void)
{
    void *p = NULL;
    if (posix_memalign(&p, 2u << 20, TT_BYTES)) return NULL;
#ifdef MADV_HUGEPAGE
    madvise(p, TT_BYTES, MADV_HUGEPAGE);
#endif
    return p;
}

typedef struct {
    uint32_t *tt;  /* low byte: the BWT's last column; high 24 bits: the inverse's links */
    uint8_t *walk; /* the block's bytes before run-length decoding */
    int32_t n, orig_ptr;
    uint32_t stored_crc;
    uint64_t start;  /* the bit its magic starts at: where to resume if it is held back */
    int level;       /* its stream's block size */
} Block;

/* A block's symbols into `b->tt` and its links; 0, or -1 for damage. */
static int read_block(Reader *r, Block *b, int level, Table *tables, uint8_t *selectors)
{
    b->stored_crc = take(r, 32);
    if (take(r, 1)) return -1; /* randomised */
    b->orig_ptr = (int32_t)take(r, 24);
    int in_use16 = (int)take(r, 16), n_in_use = 0;
    uint8_t seq_to_unseq[256];
    for (int i = 0; i < 16; i++)
        if (in_use16 & (0x8000 >> i)) {
            int bits = (int)take(r, 16);
            for (int j = 0; j < 16; j++)
                if (bits & (0x8000 >> j)) seq_to_unseq[n_in_use++] = (uint8_t)(i * 16 + j);
        }
    if (n_in_use == 0) return -1;
    const int alpha = n_in_use + 2;
    const int groups = (int)take(r, 3);
    if (groups < 2 || groups > MAX_GROUPS) return -1;
    int n_selectors = (int)take(r, 15);
    if (n_selectors < 1) return -1;
    uint8_t pos[MAX_GROUPS];
    for (int g = 0; g < groups; g++) pos[g] = (uint8_t)g;
    for (int i = 0; i < n_selectors; i++) {
        int j = 0;
        while (take(r, 1)) {
            if (++j >= groups) return -1;
        }
        if (overrun(r)) return -1;
        if (i < MAX_SELECTORS) {
            uint8_t v = pos[j];
            for (; j > 0; j--) pos[j] = pos[j - 1];
            pos[0] = v;
            selectors[i] = v;
        }
    }
    if (n_selectors > MAX_SELECTORS) n_selectors = MAX_SELECTORS;
    for (int g = 0; g < groups; g++) {
        uint8_t length[MAX_ALPHA];
        int curr = (int)take(r, 5);
        for (int s = 0; s < alpha; s++) {
            for (;;) {
                if (curr < 1 || curr > MAX_CODE_LEN) return -1;
                if (!take(r, 1)) break;
                curr += take(r, 1) ? -1 : 1;
            }
            length[s] = (uint8_t)curr;
        }
        if (overrun(r) || make_table(&tables[g], length, alpha)) return -1;
    }

    /* Symbols: runs of the front byte (RUNA/RUNB digits) and move-to-front indices. */
    const int end_of_block = n_in_use + 1;
    const int32_t max_n = 100000 * level;
    uint8_t mtf[256];
    for (int i = 0; i < 256; i++) mtf[i] = (uint8_t)i;
    int32_t counts[256] = {0};
    uint32_t *tt = b->tt;
    int32_t n = 0;
    int group = -1, left = 0;
    const Table *t = NULL;
    int32_t run = 0, weight = 1;
    for (;;) {
        if (left == 0) {
            if (++group >= n_selectors) return -1;
            left = GROUP_SIZE;
            t = &tables[selectors[group]];
        }
        left--;
        int sym = decode_symbol(r, t, alpha);
        if (sym < 0) return -1;
        if (sym <= 1) { /* RUNA adds weight, RUNB twice that; the weights double */
            if (weight >= (1 << 21)) return -1;
            run += weight << sym;
            weight <<= 1;
            continue;
        }
        if (run) {
            if (run > max_n - n) return -1;
            uint8_t c = seq_to_unseq[mtf[0]];
            counts[c] += run;
            for (int32_t k = 0; k < run; k++) tt[n + k] = c;
            n += run;
            run = 0;
            weight = 1;
        }
        if (sym == end_of_block) break;
        if (n >= max_n) return -1;
        int k = sym - 1;
        uint8_t v = mtf[k];
        memmove(mtf + 1, mtf, (size_t)k);
        mtf[0] = v;
        uint8_t c = seq_to_unseq[v];
        counts[c]++;
        tt[n++] = c;
    }
    if (overrun(r) || b->orig_ptr >= n) return -1;
    int32_t next[256], sum = 0;
    for (int c = 0; c < 256; c++) {
        next[c] = sum;
        sum += counts[c];
    }
    for (int32_t i = 0; i < n; i++) tt[next[tt[i] & 0xff]++] |= (uint32_t)i << 8;
    b->n = n;
    return 0;
}

/* The blocks' inverse BWT walks, advanced together: a step of each in turn. A block that has
 * ended (or a group of fewer blocks) walks a one-entry loop into `scratch` meanwhile, so the
 * loop over the blocks keeps its fixed length and its state stays in registers. */
static void walk_blocks(Block *blocks, int count, uint8_t *scratch)
{
    static const uint32_t idle[1] = {0};
    uint32_t pos[GROUP_BLOCKS];
    int32_t longest = 0;
    for (int k = 0; k < GROUP_BLOCKS; k++) {
        pos[k] = k < count ? blocks[k].tt[blocks[k].orig_ptr] >> 8 : 0;
        if (k < count && blocks[k].n > longest) longest = blocks[k].n;
    }
    int32_t i = 0;
    while (i < longest) {
        int32_t end = longest;
        const uint32_t *tt[GROUP_BLOCKS];
        uint8_t *walk[GROUP_BLOCKS];
        uint32_t p[GROUP_BLOCKS];
        for (int k = 0; k < GROUP_BLOCKS; k++) {
            const int live = k < count && blocks[k].n > i;
            tt[k] = live ? blocks[k].tt : idle;
            walk[k] = live ? blocks[k].walk : scratch;
            p[k] = live ? pos[k] : 0;
            if (live && blocks[k].n < end) end = blocks[k].n;
        }
        for (; i < end; i++) {
#pragma GCC unroll 8
            for (int k = 0; k < GROUP_BLOCKS; k++) {
                const uint32_t e = tt[k][p[k]];
                walk[k][i] = (uint8_t)e;
                p[k] = e >> 8;
            }
        }
        for (int k = 0; k < GROUP_BLOCKS; k++) pos[k] = p[k];
    }
}

/* The first run-length stage undone (4 equal bytes, then a count of 0-255 more): with `out`
 * NULL, only the size it takes; else written there. -1 for a run cut off at the block's end. */
static int64_t unrun(const Block *b, uint8_t *out)
{
    const uint8_t *w = b->walk;
    const int32_t n = b->n;
    int64_t total = 0;
    int32_t i = 0;
    while (i < n) {
        const uint8_t c = w[i];
        int32_t same = 1;
        while (same < 4 && i + same < n && w[i + same] == c) same++;
        i += same;
        int32_t length = same;
        if (same == 4) {
            if (i >= n) return -1;
            length += w[i++];
        }
        if (out) {
            memset(out, c, (size_t)length);
            out += length;
        }
        total += length;
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
} Event;

/* What a call needs besides its output: kept between the calls of one range (their tables'
 * first touch cost as much as a tenth of the decoding) and freed when a call reaches its end. */
typedef struct {
    Block blocks[GROUP_BLOCKS];
    Table tables[MAX_GROUPS];
    uint8_t selectors[MAX_SELECTORS];
    uint8_t idle_walk[900000];
} Scratch;

static Scratch *cached_scratch;

static void free_scratch(Scratch *s)
{
    if (!s) return;
    for (int k = 0; k < GROUP_BLOCKS; k++) {
        free(s->blocks[k].tt);
        free(s->blocks[k].walk);
    }
    free(s);
}

/* Thread-safe without the GIL: whoever takes the one cached set has it to itself. */
static Scratch *take_scratch(void)
{
    Scratch *s = __atomic_exchange_n(&cached_scratch, NULL, __ATOMIC_ACQ_REL);
    return s ? s : calloc(1, sizeof(Scratch));
}

static void keep_scratch(Scratch *s) { free_scratch(__atomic_exchange_n(&cached_scratch, s, __ATOMIC_ACQ_REL)); }

typedef struct {
    const char *damage;
    int memory, n_events;
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
            if (!b->tt) {
                b->tt = huge_table();
                b->walk = malloc(900000);
                if (!b->tt || !b->walk) { g->memory = 1; return; }
            }
            if (read_block(&r, b, level, s->tables, s->selectors)) { g->damage = "corrupt block"; return; }
            b->start = at;
            b->level = level;
            g->events[g->n_events++] = (Event){EV_BLOCK, n_blocks++, 0};
        } else if (magic == END_MAGIC) {
            uint32_t stored = take(&r, 32);
            if (overrun(&r)) { g->damage = "truncated"; return; }
            g->events[g->n_events++] = (Event){EV_END, 0, stored};
            uint64_t end = bit_position(&r);
            if (end % 8) take(&r, (int)(8 - end % 8));
            level = 0;
        } else {
            g->damage = overrun(&r) ? "truncated" : "bad block magic";
            return;
        }
    }
    g->bit = bit_position(&r);
    g->level = level;
    if (n_blocks) walk_blocks(s->blocks, n_blocks, s->idle_walk);
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
    Group *g = calloc(1, sizeof(Group));
    Scratch *s = NULL;
    PyObject *out = NULL;
    uint32_t combined = level ? (uint32_t)crc_in : 0;
    if (!g) goto fail;
    g->bit = bit;
    g->level = level;
    Py_BEGIN_ALLOW_THREADS
    s = take_scratch();
    if (!s)
        g->memory = 1;
    else
        read_group(g, s, (const uint8_t *)view.buf, (size_t)view.len);
    Py_END_ALLOW_THREADS
    if (g->memory || g->damage) goto fail;
    int64_t total = 0;
    for (int e = 0; e < g->n_events; e++) total += g->sizes[e];
    out = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)total);
    if (!out) goto fail;
    Py_BEGIN_ALLOW_THREADS
    write_group(g, s, (uint8_t *)PyBytes_AS_STRING(out), &combined);
    Py_END_ALLOW_THREADS
    if (g->damage) goto fail;
    const int finished = !g->level && g->bit == (uint64_t)view.len * 8;
    PyObject *result = Py_BuildValue("(NKik)", out, (unsigned long long)g->bit, g->level, (unsigned long)combined);
    out = NULL;
    if (finished)
        free_scratch(s);
    else
        keep_scratch(s);
    free(g);
    PyBuffer_Release(&view);
    return result;
fail:
    Py_XDECREF(out);
    if (g && g->damage)
        PyErr_Format(PyExc_ValueError, "bz2 data: %s", g->damage);
    else if (!PyErr_Occurred())
        PyErr_NoMemory();
    free_scratch(s);
    free(g);
    PyBuffer_Release(&view);
    return NULL;
}

/* The doc starts with its signature and "--", so inspect.signature reads it (_bunzip.pyi must agree). */
static PyMethodDef methods[] = {
    {"decode", (PyCFunction)(void (*)(void))decode, METH_VARARGS | METH_KEYWORDS,
     "decode(data, bit, level, crc)\n--\n\n"
     "Decode the next few blocks of the bz2 streams in data from bit offset bit: (bytes, bit, level, crc) "
     "to continue from. The GIL is released."},
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
