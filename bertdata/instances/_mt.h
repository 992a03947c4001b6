/* CPython's Mersenne Twister, replayed bit for bit over random.Random.getstate()'s words, so
 * the compiled instance algorithm (_engine.c) draws exactly the reference's numbers. */

#ifndef BERTDATA_MT_H
#define BERTDATA_MT_H

#include "_arrays.h"

/* ---- CPython's Mersenne Twister ------------------------------------------------------------ */

#define MT_N 624
#define MT_M 397

typedef struct {
    uint32_t mt[MT_N];
    uint32_t out[MT_N]; /* mt's words tempered: what the draws from this block give */
    Py_ssize_t index;
} MT;

static inline uint32_t mt_temper(uint32_t y)
{
    y ^= y >> 11;
    y ^= (y << 7) & 0x9d2c5680u;
    y ^= (y << 15) & 0xefc60000u;
    y ^= y >> 18;
    return y;
}

/* A block's words tempered at once (a loop the compiler vectorises), so that a draw is a load
 * and a rejection test can look at the next word before it is drawn (mt_below). */
static inline void mt_temper_all(MT *r)
{
    for (int i = 0; i < MT_N; i++)
        r->out[i] = mt_temper(r->mt[i]);
}

/* `state`: random.Random.getstate()'s 624 words and index, as int64. */
static inline int mt_load(MT *r, const Arr *state)
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
    mt_temper_all(r);
    return 0;
}

static inline void mt_store(const MT *r, Arr *state)
{
    int64_t *s = (int64_t *)state->data;
    for (int i = 0; i < MT_N; i++)
        s[i] = r->mt[i];
    s[MT_N] = r->index;
}

#define MT_MIX(upper, lower, other) \
    ((other) ^ ((((upper) & 0x80000000u) | ((lower) & 0x7fffffffu)) >> 1) ^ (((lower) & 1u) * 0x9908b0dfu))

static inline void mt_twist(uint32_t *mt)
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
        mt_temper_all(r);
        r->index = 0;
    }
    return r->out[r->index++];
}

/* The top bits of words (32 - shift of them), drawn until one is below n: random's rejection
 * sampling. Its test fails for up to half the words, at random, so as a branch it was
 * mispredicted about as often: where two words are left in the block both are tested at once
 * and the branch is taken only when both fail. */
static inline uint64_t mt_below(MT *r, uint64_t n, int shift)
{
    if (r->index + 1 < MT_N) {
        const uint64_t first = r->out[r->index] >> shift, second = r->out[r->index + 1] >> shift;
        const int take_first = first < n;
        if (take_first | (second < n)) {
            r->index += 2 - take_first;
            return take_first ? first : second;
        }
        r->index += 2;
    }
    uint64_t v = mt_uint32(r) >> shift;
    while (v >= n)
        v = mt_uint32(r) >> shift;
    return v;
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
    return (int64_t)mt_below(r, (uint64_t)n, 32 - bit_length((uint64_t)n));
}

static inline int64_t mt_randint(MT *r, int64_t a, int64_t b)
{
    return a + mt_randbelow(r, b - a + 1);
}

/* random.shuffle (Fisher-Yates from the end: x[i] swaps with x[randbelow(i + 1)]), with the
 * bit length tracked as i falls: the masking shuffles every candidate of every instance.
 * len <= 2**32. */
static inline void mt_shuffle(MT *r, int64_t *x, Py_ssize_t len)
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
        const uint64_t j = mt_below(r, (uint64_t)n, shift);
        int64_t tmp = x[i];
        x[i] = x[j];
        x[j] = tmp;
        i--;
    }
}

#endif
