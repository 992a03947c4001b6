/* One bzip2 block read into the tables its inverse Burrows-Wheeler walk needs: the bit reader,
 * the Huffman codes (libbz2's canonical ones, with a lookup of their first bits), the selectors,
 * the move-to-front and run symbols, and the walk's links. Included by _bunzip.c only. */

#ifndef BERTDATA_BZBLOCK_H
#define BERTDATA_BZBLOCK_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#define MAX_ALPHA 258
#define MAX_GROUPS 6
#define MAX_SELECTORS 18002 /* bzip2 1.0.8: more are read and ignored */
#define MAX_CODE_LEN 20
#define GROUP_SIZE 50
#define FAST_BITS 10

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

#define MAX_BLOCK 900000 /* bytes in a block of the largest size (level 9) */

typedef struct {
    uint32_t *tt;  /* low byte: the BWT's last column; above it the inverse's links (the top bit:
                    * a segment's start while the block is walked, _bzwalk.h) */
    uint8_t *walk; /* the block's bytes before run-length decoding */
    int32_t n, orig_ptr;
    uint32_t stored_crc;
    uint64_t start;  /* the bit its magic starts at: where to resume if it is held back */
    int level;       /* its stream's block size */
} Block;

/* Move-to-front: mtf[k] to the front, mtf[0, k) one place on. Most indices are small in text,
 * where a call to memmove per symbol cost more than the move: under 16, one 16-byte blend. */
static inline uint8_t mtf_front(uint8_t *mtf, int k)
{
    const uint8_t v = mtf[k];
#ifdef __SSE2__
    if (k < 16) {
        const __m128i head = _mm_loadu_si128((const __m128i *)mtf);
        const __m128i moved = _mm_or_si128(_mm_slli_si128(head, 1), _mm_cvtsi32_si128(v));
        const __m128i front = _mm_cmplt_epi8(_mm_setr_epi8(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                             _mm_set1_epi8((char)(k + 1)));
        _mm_storeu_si128((__m128i *)mtf, _mm_or_si128(_mm_and_si128(front, moved), _mm_andnot_si128(front, head)));
        return v;
    }
#endif
    memmove(mtf + 1, mtf, (size_t)k);
    mtf[0] = v;
    return v;
}

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
        uint8_t c = seq_to_unseq[mtf_front(mtf, k)];
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

#endif
