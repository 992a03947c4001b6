/* A group of bz2 blocks' inverse Burrows-Wheeler walks, cut into segments that a few lanes
 * advance in turn, for _bunzip.c, which defines GROUP_BLOCKS and includes _bzblock.h first.
 */

#ifndef BERTDATA_BZWALK_H
#define BERTDATA_BZWALK_H

#include <stdint.h>
#include <string.h>

#define LANES 8      /* walks advanced in turn (README, Performance: 8, 12 and 16 timed) */
#define SEGMENTS 128 /* places each block's walk is cut at, besides where its bytes begin */
#define CHUNK 1024   /* bytes of a segment's output piece */
#define POOL_CHUNKS (GROUP_BLOCKS * (MAX_BLOCK / CHUNK + SEGMENTS + 3))
#define FLAG 0x80000000u   /* in a table entry: a segment starts at this place */
#define LINK_MASK 0xfffffu /* an entry's link: 20 bits hold any place of a block of 900k */

typedef struct {
    int32_t start;       /* the place in the block's table the segment's walk starts at */
    int32_t first_chunk; /* where its bytes are: chunks of the pool, linked by chunk_next */
    int32_t length;
    int32_t next;        /* the segment that follows it in the block's bytes */
} Segment;

/* A group's segments and the pool their bytes go to: part of the decoder's scratch. */
typedef struct {
    Segment segments[GROUP_BLOCKS][SEGMENTS + 1];
    int32_t n_segments[GROUP_BLOCKS], first_segment[GROUP_BLOCKS];
    int32_t chunk_next[POOL_CHUNKS];
    uint8_t pool[POOL_CHUNKS][CHUNK];
} Walks;

/* The walks in progress, one per lane, and the segments not yet begun. */
typedef struct {
    Block *blocks;
    const uint32_t *tab[LANES];
    uint32_t pos[LANES];
    uint8_t *out[LANES], *end[LANES];
    int32_t block[LANES], segment[LANES], chunk[LANES], full[LANES];
    int next_block, next_segment, count, live, pool_used, damage;
    uint8_t sink[CHUNK]; /* where a lane with no segment left writes */
} Lanes;

static const uint32_t idle_entry[1] = {0}; /* a parked lane's table: one entry, a loop onto itself */

static void park(Lanes *w, int k)
{
    w->tab[k] = idle_entry;
    w->pos[k] = 0;
    w->out[k] = w->sink;
    w->end[k] = w->sink + CHUNK;
    w->segment[k] = -1;
    w->live--;
}

static int take_chunk(Lanes *w)
{
    if (w->pool_used >= POOL_CHUNKS) { /* the walks cover each place at most once: not for a real block */
        w->damage = 1;
        return -1;
    }
    return w->pool_used++;
}

/* The next segment not yet begun on lane k, its first byte out; the lane parks when none is left. */
static void begin_segment(Lanes *w, Walks *s, int k)
{
    const int c = w->next_block < w->count ? take_chunk(w) : -1;
    if (c < 0) {
        park(w, k);
        return;
    }
    const int b = w->next_block, i = w->next_segment;
    if (++w->next_segment == s->n_segments[b]) {
        w->next_block++;
        w->next_segment = 0;
    }
    Segment *sg = &s->segments[b][i];
    sg->first_chunk = c;
    w->block[k] = b;
    w->segment[k] = i;
    w->chunk[k] = c;
    w->full[k] = 0;
    w->tab[k] = w->blocks[b].tt;
    const uint32_t e = w->tab[k][sg->start]; /* flagged: it is a start */
    s->pool[c][0] = (uint8_t)e;
    w->out[k] = s->pool[c] + 1;
    w->end[k] = s->pool[c] + CHUNK;
    w->pos[k] = (e >> 8) & LINK_MASK;
}

static void next_chunk(Lanes *w, Walks *s, int k)
{
    if (w->segment[k] < 0) {
        w->out[k] = w->sink;
        return;
    }
    const int c = take_chunk(w);
    if (c < 0) {
        park(w, k);
        return;
    }
    s->chunk_next[w->chunk[k]] = c;
    w->chunk[k] = c;
    w->full[k]++;
    w->out[k] = s->pool[c];
    w->end[k] = s->pool[c] + CHUNK;
}

/* Lane k's walk met another segment's start at its place: its segment is done. */
static void end_segment(Lanes *w, Walks *s, int k)
{
    const int b = w->block[k];
    const Segment *starts = s->segments[b];
    Segment *sg = &s->segments[b][w->segment[k]];
    sg->length = w->full[k] * CHUNK + (int32_t)(w->out[k] - s->pool[w->chunk[k]]);
    int lo = 0, hi = s->n_segments[b] - 1;
    const int32_t at = (int32_t)w->pos[k];
    while (lo < hi) {
        const int mid = (lo + hi) / 2;
        if (starts[mid].start < at)
            lo = mid + 1;
        else
            hi = mid;
    }
    sg->next = starts[lo].start == at ? lo : -1;
    begin_segment(w, s, k);
}

/* Where each block's walk starts a segment: SEGMENTS places spread over its table, and the place
 * its bytes begin at. Each is flagged in the table, where a walk that reaches it stops. */
static void plan_segments(Walks *s, Block *bl, int b)
{
    Segment *sg = s->segments[b];
    const int32_t n = bl->n, first = (int32_t)(bl->tt[bl->orig_ptr] >> 8);
    int m = 0, f = -1;
    for (int j = 0; j < SEGMENTS; j++) {
        const int32_t at = (int32_t)((int64_t)j * n / SEGMENTS);
        if (f < 0 && first <= at) {
            f = m;
            if (first < at) sg[m++].start = first;
        }
        if (!m || sg[m - 1].start != at) sg[m++].start = at;
    }
    if (f < 0) {
        f = m;
        sg[m++].start = first;
    }
    for (int i = 0; i < m; i++) bl->tt[sg[i].start] |= FLAG;
    s->n_segments[b] = m;
    s->first_segment[b] = f;
}

/* Every block's inverse BWT walk, cut into segments at places spread over its table; LANES of
 * them advance in turn. A walk is a chain of dependent loads into a table of 3.6 MB that misses
 * the core's own caches: a lone chain waits for every load, while a few advanced in turn keep
 * that many in flight; and as the lanes take the segments block after block, they share one or
 * two tables at a time, where one chain per block had every block's in play at once (29 MB for
 * 8 blocks: 0.6x the CPU time this way). Each segment's bytes go to chunks of a pool, then the
 * block's bytes are the segments in the order of the walk. 0, or -1 for a walk that does not
 * come back to where it started (none of a real block). */
static int walk_blocks(Walks *s, Block *blocks, int count)
{
    Lanes lanes = {.blocks = blocks, .count = count, .live = LANES};
    for (int b = 0; b < count; b++) plan_segments(s, &blocks[b], b);
    for (int k = 0; k < LANES; k++) begin_segment(&lanes, s, k);
    while (lanes.live > 0) {
#pragma GCC unroll 8
        for (int k = 0; k < LANES; k++) {
            const uint32_t e = lanes.tab[k][lanes.pos[k]];
            if (__builtin_expect((e & FLAG) != 0, 0)) {
                end_segment(&lanes, s, k);
                continue;
            }
            *lanes.out[k]++ = (uint8_t)e;
            lanes.pos[k] = e >> 8; /* not flagged: the link alone */
            if (__builtin_expect(lanes.out[k] == lanes.end[k], 0)) next_chunk(&lanes, s, k);
        }
    }
    if (lanes.damage) return -1;
    for (int b = 0; b < count; b++) {
        const Segment *sg = s->segments[b];
        const int32_t n = blocks[b].n, m = s->n_segments[b], first = s->first_segment[b];
        uint8_t *dst = blocks[b].walk;
        int32_t total = 0, i = first, visited = 0;
        do {
            if (sg[i].length > n - total) return -1;
            int32_t left = sg[i].length;
            for (int32_t c = sg[i].first_chunk; left > 0; c = s->chunk_next[c]) {
                const int32_t take = left < CHUNK ? left : CHUNK;
                memcpy(dst + total, s->pool[c], (size_t)take);
                total += take;
                left -= take;
            }
            i = sg[i].next;
        } while (i >= 0 && i != first && ++visited < m);
        if (i != first) return -1;
        /* A cycle shorter than the block (a block of one text over and over): a walk of n steps
         * goes round it again, as libbz2's does, and the CRC tells whether that was right. */
        for (int32_t k = total; k < n; k++) dst[k] = dst[k - total];
    }
    return 0;
}

#endif
