/* Huffman codes for deflate (RFC 1951, 3.2.2): optimal code lengths under a length limit, and
 * the canonical codes they give. Plain integer code, so the same counts give the same codes on
 * every machine. Used by _zrle.c.
 */

#ifndef BERTDATA_HUFFMAN_H
#define BERTDATA_HUFFMAN_H

#include <stdint.h>
#include <string.h>

/* deflate's literal/length alphabet, its largest: 0-255 literals, 256 end of block, 257-285 lengths */
#define LITLEN_CODES 286
#define MAX_BITS 15 /* the longest code deflate allows */

/* keyed[0..n) (count << 16 | symbol, already in symbol order) sorted by count, ties kept in
 * symbol order: a radix sort on the count, a byte at a time, as many passes as the largest
 * count has bytes. qsort's calls to a comparison function took as long as finding a chunk's runs. */
static void sort_keys(uint64_t *keyed, int n, uint32_t largest)
{
    uint64_t spare[LITLEN_CODES];
    uint64_t *from = keyed, *to = spare;
    for (int shift = 16; shift < 48 && (largest >> (shift - 16)); shift += 8) {
        int start[257] = {0};
        for (int i = 0; i < n; i++)
            start[((from[i] >> shift) & 0xff) + 1]++;
        for (int d = 0; d < 256; d++)
            start[d + 1] += start[d];
        for (int i = 0; i < n; i++)
            to[start[(from[i] >> shift) & 0xff]++] = from[i];
        uint64_t *t = from;
        from = to;
        to = t;
    }
    if (from != keyed)
        memcpy(keyed, from, (size_t)n * sizeof *keyed);
}

/* Code lengths of a Huffman code for freqs[0..n) (0 for an unused symbol), none longer than
 * max_bits. Ties are broken by symbol, so the lengths depend on the counts alone. Where the
 * optimal code is too deep (rare: it takes Fibonacci-like counts) the counts are halved, rounded
 * up, until it fits. A lone used symbol gets length 1, as deflate wants. */
static void huffman_lengths(const uint32_t *freqs, int n, int max_bits, uint8_t *lengths)
{
    uint64_t keyed[LITLEN_CODES]; /* freq << 16 | symbol: sorted, ascending counts by symbol */
    uint32_t depth[LITLEN_CODES];
    uint32_t scaled[LITLEN_CODES];
    int used = 0;
    memset(lengths, 0, (size_t)n);
    for (int s = 0; s < n; s++)
        scaled[s] = freqs[s];
    for (;;) {
        used = 0;
        uint32_t largest = 0;
        for (int s = 0; s < n; s++)
            if (scaled[s]) {
                keyed[used++] = (uint64_t)scaled[s] << 16 | (uint64_t)s;
                largest = scaled[s] > largest ? scaled[s] : largest;
            }
        if (used == 0)
            return;
        if (used == 1) {
            lengths[keyed[0] & 0xffff] = 1;
            return;
        }
        sort_keys(keyed, used, largest);
        /* Moffat and Katajainen's in-place code lengths of a sorted list ("In-place calculation
         * of minimum-redundancy codes", 1995): parents, then internal depths, then leaf depths. */
        uint32_t *a = depth;
        for (int i = 0; i < used; i++)
            a[i] = (uint32_t)(keyed[i] >> 16);
        int root = 0, leaf = 2, next;
        a[0] += a[1];
        for (next = 1; next < used - 1; next++) {
            if (leaf >= used || a[root] < a[leaf]) {
                a[next] = a[root];
                a[root++] = (uint32_t)next;
            } else
                a[next] = a[leaf++];
            if (leaf >= used || (root < next && a[root] < a[leaf])) {
                a[next] += a[root];
                a[root++] = (uint32_t)next;
            } else
                a[next] += a[leaf++];
        }
        a[used - 2] = 0;
        for (next = used - 3; next >= 0; next--)
            a[next] = a[a[next]] + 1;
        int avail = 1, taken = 0;
        uint32_t d = 0;
        root = used - 2;
        next = used - 1;
        while (avail > 0) {
            while (root >= 0 && a[root] == d) {
                taken++;
                root--;
            }
            while (avail > taken) {
                a[next--] = d;
                avail--;
            }
            avail = 2 * taken;
            d++;
            taken = 0;
        }
        if (a[0] <= (uint32_t)max_bits) { /* a[0]: the rarest symbol, the deepest */
            for (int i = 0; i < used; i++)
                lengths[keyed[i] & 0xffff] = (uint8_t)a[i];
            return;
        }
        for (int s = 0; s < n; s++)
            scaled[s] = scaled[s] ? (scaled[s] + 1) / 2 : 0;
    }
}

/* Canonical codes for `lengths` (RFC 1951, 3.2.2), bit-reversed: deflate sends codes from their
 * most significant bit while the bit writer fills bytes from the least. */
static void canonical_codes(const uint8_t *lengths, int n, uint16_t *codes)
{
    uint16_t count[MAX_BITS + 1] = {0}, next[MAX_BITS + 2];
    for (int s = 0; s < n; s++)
        count[lengths[s]]++;
    count[0] = 0;
    next[1] = 0;
    for (int bits = 1; bits <= MAX_BITS; bits++)
        next[bits + 1] = (uint16_t)((next[bits] + count[bits]) << 1);
    for (int s = 0; s < n; s++) {
        const int len = lengths[s];
        if (!len)
            continue;
        uint16_t code = next[len]++, reversed = 0;
        for (int b = 0; b < len; b++) {
            reversed = (uint16_t)(reversed << 1 | (code & 1));
            code >>= 1;
        }
        codes[s] = reversed;
    }
}

#endif
