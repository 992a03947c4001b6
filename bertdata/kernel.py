"""The reference MLM/NSP instance algorithm compiled with numba, bit-exact with the reference.

The reference draws every random number from one `random.Random(seed)`; this module replays
CPython's Mersenne Twister (`random()`, `_randbelow` by rejection on the top bits, Fisher-Yates
`shuffle`, as in CPython 3.10-3.13) inside the compiled loop, so the draws -- and with them the
instances -- are the same, at a small fraction of the cost.

An instance is kept as four offsets into the shard's flat token array (segments A and B are each
a run of consecutive sentences, trimmed at either end by truncation) plus its predictions; the
padded reference arrays are filled from that one field at a time by the `fill_*` functions.
"""

from __future__ import annotations

import numpy as np
from numba import njit

_N = 624  # Mersenne Twister state words; the state array carries the index as word 624
_M = 397
_MASK32 = 0xFFFFFFFF


@njit(cache=True)
def _mix(upper, lower, other):
    y = (upper & 0x80000000) | (lower & 0x7FFFFFFF)
    return other ^ (y >> 1) ^ ((y & 1) * 0x9908B0DF)


@njit(cache=True)
def _twist(state):
    # CPython's three loops (no modulo in the hot path): later words read already
    # regenerated ones, exactly as in the C code.
    for kk in range(_N - _M):
        state[kk] = _mix(state[kk], state[kk + 1], state[kk + _M])
    for kk in range(_N - _M, _N - 1):
        state[kk] = _mix(state[kk], state[kk + 1], state[kk + _M - _N])
    state[_N - 1] = _mix(state[_N - 1], state[0], state[_M - 1])


@njit(cache=True)
def _uint32(state):
    """CPython's genrand_uint32 (state held as int64 so numba never mixes signedness)."""
    index = state[_N]
    if index >= _N:
        _twist(state)
        index = 0
    y = state[index]
    state[_N] = index + 1
    y ^= y >> 11
    y ^= (y << 7) & 0x9D2C5680
    y ^= (y << 15) & 0xEFC60000
    y ^= y >> 18
    return y & _MASK32


@njit(cache=True)
def _random(state):
    """random.random(): 53 bits from two words."""
    a = _uint32(state) >> 5
    b = _uint32(state) >> 6
    return (a * 67108864.0 + b) * (1.0 / 9007199254740992.0)


@njit(cache=True)
def _bit_length(n):
    k = 0
    while n:
        k += 1
        n >>= 1
    return k


@njit(cache=True)
def _randbelow(state, n):
    """random._randbelow_with_getrandbits for 1 <= n < 2**32: the top n.bit_length() bits of
    a word, rejected until < n (so even n == 1 consumes at least one word)."""
    shift = 32 - _bit_length(n)
    r = _uint32(state) >> shift
    while r >= n:
        r = _uint32(state) >> shift
    return r


@njit(cache=True)
def _randint(state, a, b):
    return a + _randbelow(state, b - a + 1)


@njit(cache=True)
def _shuffle(state, x):
    """random.shuffle (CPython 3.11 Fisher-Yates from the end: x[i] swaps with x[randbelow(i + 1)]).

    `_randbelow` inlined with the bit length tracked as i falls: this is the hottest loop
    (the masking shuffles every candidate position of every instance)."""
    i = len(x) - 1
    if i < 1:
        return
    bits = _bit_length(i + 1)
    shift = 32 - bits
    low = 1 << (bits - 1)  # smallest n with this bit length
    while i > 0:
        n = i + 1
        if n < low:
            shift += 1
            low >>= 1
        j = _uint32(state) >> shift
        while j >= n:
            j = _uint32(state) >> shift
        tmp = x[i]
        x[i] = x[j]
        x[j] = tmp
        i -= 1


@njit(cache=True)
def _grow1(a, size):
    out = np.zeros(size, a.dtype)
    out[:len(a)] = a
    return out


@njit(cache=True)
def _grow2(a, size):
    out = np.zeros((size, a.shape[1]), a.dtype)
    out[:a.shape[0]] = a
    return out


@njit(cache=True)
def generate(state, tokens, sentence_offsets, doc_offsets, max_seq_length, short_seq_prob,
             dupe_factor, num_to_predict, vocab_words, cls_id, sep_id, mask_id,
             spans, nsp, positions, labels, shown):
    """Run the whole reference algorithm. `state` (625 int64: CPython's getstate() words and
    index) is advanced in place. `num_to_predict[L]` is the reference's prediction count for
    L tokens; `vocab_words[r]` is the id of the reference's r-th vocab word.

    Instance i is written to row i of the zeroed output arrays, which are regrown if full:
    spans[i] = a_start, a_stop, b_start, b_stop in `tokens`; nsp[i] = 1 for a random next;
    positions/labels/shown[i] = the masked positions (0-padded, sorted), the original ids
    there, and the ids shown instead. Returns (order, spans, nsp, positions, labels, shown):
    `order` is the final shuffle (output row r is instance order[r]), its length the count.
    """
    max_predictions = positions.shape[1]
    num_docs = len(doc_offsets) - 1
    docs = np.arange(num_docs)
    _shuffle(state, docs)
    count = 0

    max_num_tokens = max_seq_length - 3
    seq = np.empty(max_seq_length, np.int64)
    candidates = np.empty(max_seq_length, np.int64)
    picked_pos = np.empty(max_predictions, np.int64)
    picked_new = np.empty(max_predictions, np.int64)

    for _ in range(dupe_factor):
        for d in range(num_docs):
            first = doc_offsets[docs[d]]
            num_sentences = doc_offsets[docs[d] + 1] - first
            target = max_num_tokens
            if _random(state) < short_seq_prob:
                target = _randint(state, 2, max_num_tokens)
            chunk_first = 0  # the chunk is sentences chunk_first..i of the document
            length = 0
            i = 0
            while i < num_sentences:
                s = first + i
                length += sentence_offsets[s + 1] - sentence_offsets[s]
                if i == num_sentences - 1 or length >= target:
                    chunk_len = i - chunk_first + 1
                    a_end = 1
                    if chunk_len >= 2:
                        a_end = _randint(state, 1, chunk_len - 1)
                    a_lo = sentence_offsets[first + chunk_first]
                    a_hi = sentence_offsets[first + chunk_first + a_end]
                    if chunk_len == 1 or _random(state) < 0.5:
                        is_random_next = 1
                        target_b = target - (a_hi - a_lo)
                        r = 0
                        for _try in range(10):
                            r = _randint(state, 0, num_docs - 1)
                            if r != d:
                                break
                        if r == d:
                            is_random_next = 0
                        r_first = doc_offsets[docs[r]]
                        r_count = doc_offsets[docs[r] + 1] - r_first
                        start = _randint(state, 0, r_count - 1)
                        b_lo = sentence_offsets[r_first + start]
                        b_hi = b_lo
                        for j in range(r_first + start, r_first + r_count):
                            b_hi = sentence_offsets[j + 1]
                            if b_hi - b_lo >= target_b:
                                break
                        i -= chunk_len - a_end
                    else:
                        is_random_next = 0
                        b_lo = a_hi
                        b_hi = sentence_offsets[first + i + 1]
                    while (a_hi - a_lo) + (b_hi - b_lo) > max_num_tokens:
                        if a_hi - a_lo > b_hi - b_lo:
                            if _random(state) < 0.5:
                                a_lo += 1
                            else:
                                a_hi -= 1
                        else:
                            if _random(state) < 0.5:
                                b_lo += 1
                            else:
                                b_hi -= 1

                    len_a = a_hi - a_lo
                    len_b = b_hi - b_lo
                    n_tok = len_a + len_b + 3
                    seq[0] = cls_id
                    seq[1:1 + len_a] = tokens[a_lo:a_hi]
                    seq[1 + len_a] = sep_id
                    seq[2 + len_a:2 + len_a + len_b] = tokens[b_lo:b_hi]
                    seq[n_tok - 1] = sep_id
                    # The reference excludes by token, so a "[SEP]" typed in the text is never masked either.
                    n_cand = 0
                    for k in range(n_tok):
                        if seq[k] != cls_id and seq[k] != sep_id:
                            candidates[n_cand] = k
                            n_cand += 1
                    _shuffle(state, candidates[:n_cand])
                    n_pred = min(num_to_predict[n_tok], n_cand)
                    for p in range(n_pred):
                        k = candidates[p]
                        if _random(state) < 0.8:
                            new = mask_id
                        elif _random(state) < 0.5:
                            new = seq[k]
                        else:
                            new = vocab_words[_randint(state, 0, len(vocab_words) - 1)]
                        # Insertion sort by position: the reference sorts its predictions.
                        q = p
                        while q > 0 and picked_pos[q - 1] > k:
                            picked_pos[q] = picked_pos[q - 1]
                            picked_new[q] = picked_new[q - 1]
                            q -= 1
                        picked_pos[q] = k
                        picked_new[q] = new

                    if count == len(nsp):
                        size = count + count // 2 + 16
                        spans = _grow2(spans, size)
                        nsp = _grow1(nsp, size)
                        positions = _grow2(positions, size)
                        labels = _grow2(labels, size)
                        shown = _grow2(shown, size)
                    spans[count, 0] = a_lo
                    spans[count, 1] = a_hi
                    spans[count, 2] = b_lo
                    spans[count, 3] = b_hi
                    nsp[count] = is_random_next
                    for p in range(n_pred):
                        positions[count, p] = picked_pos[p]
                        labels[count, p] = seq[picked_pos[p]]
                        shown[count, p] = picked_new[p]
                    count += 1
                    chunk_first = i + 1
                    length = 0
                i += 1

    order = np.arange(count)
    _shuffle(state, order)
    return order, spans, nsp, positions, labels, shown


@njit(cache=True)
def fill_input_ids(out, rows, tokens, spans, positions, shown, cls_id, sep_id):
    """out[r] = the input ids of instance rows[r]: [CLS] A [SEP] B [SEP], predictions applied."""
    for r in range(out.shape[0]):
        i = rows[r]
        a_lo, a_hi, b_lo, b_hi = spans[i, 0], spans[i, 1], spans[i, 2], spans[i, 3]
        len_a = a_hi - a_lo
        len_b = b_hi - b_lo
        out[r, 0] = cls_id
        out[r, 1:1 + len_a] = tokens[a_lo:a_hi]
        out[r, 1 + len_a] = sep_id
        out[r, 2 + len_a:2 + len_a + len_b] = tokens[b_lo:b_hi]
        out[r, 2 + len_a + len_b] = sep_id
        for p in range(positions.shape[1]):
            if positions[i, p] == 0:
                break
            out[r, positions[i, p]] = shown[i, p]


@njit(cache=True)
def fill_input_mask(out, rows, spans):
    for r in range(out.shape[0]):
        i = rows[r]
        out[r, :spans[i, 1] - spans[i, 0] + spans[i, 3] - spans[i, 2] + 3] = 1


@njit(cache=True)
def fill_segment_ids(out, rows, spans):
    for r in range(out.shape[0]):
        i = rows[r]
        len_a = spans[i, 1] - spans[i, 0]
        out[r, 2 + len_a:len_a + spans[i, 3] - spans[i, 2] + 3] = 1
