"""The reference MLM/NSP instance algorithm, compiled (`bertdata._fast`), bit-exact with the reference.

The reference draws every random number from one `random.Random(seed)`; the C loop replays
CPython's Mersenne Twister (`random()`, `_randbelow` by rejection on the top bits, Fisher-Yates
`shuffle`, as in CPython 3.10-3.13), so the draws -- and with them the instances -- are the
same, at a small fraction of the cost.

An instance is kept as four offsets into the shard's flat token array (segments A and B are each
a run of consecutive sentences, trimmed at either end by truncation) plus its predictions; the
padded reference arrays are filled from that one field at a time by the `fill_*` functions.
"""

from __future__ import annotations

import numpy as np

from bertdata._fast import fill_input_ids, fill_input_mask, fill_segment_ids, shuffle
from bertdata._fast import generate as _fast_generate

__all__ = ["generate", "fill_input_ids", "fill_input_mask", "fill_segment_ids"]


def generate(state, tokens, sentence_offsets, doc_offsets, max_seq_length, short_seq_prob,
             dupe_factor, num_to_predict, vocab_words, cls_id, sep_id, mask_id,
             spans, nsp, positions, labels, shown):
    """Run the whole reference algorithm. `state` (625 int64: CPython's getstate() words and
    index) is advanced in place. `num_to_predict[L]` is the reference's prediction count for
    L tokens; `vocab_words[r]` is the id of the reference's r-th vocab word.

    Instance i is written to row i of the zeroed output arrays, which are regrown if too small:
    spans[i] = a_start, a_stop, b_start, b_stop in `tokens`; nsp[i] = 1 for a random next;
    positions/labels/shown[i] = the masked positions (0-padded, sorted), the original ids
    there, and the ids shown instead. Returns (order, spans, nsp, positions, labels, shown):
    `order` is the final shuffle (output row r is instance order[r]), its length the count.
    """
    start = state.copy()
    inputs = (tokens, sentence_offsets, doc_offsets, max_seq_length, short_seq_prob, dupe_factor,
              num_to_predict, vocab_words, cls_id, sep_id, mask_id)
    count = _fast_generate(state, *inputs, spans, nsp, positions, labels, shown)
    if count > len(nsp):
        # The capacity guess was short: the C loop counted every instance, so one rerun from
        # the same state into arrays of exactly that size is enough.
        state[:] = start
        spans, nsp, positions, labels, shown = (np.zeros((count, *a.shape[1:]), a.dtype)
                                                for a in (spans, nsp, positions, labels, shown))
        _fast_generate(state, *inputs, spans, nsp, positions, labels, shown)
    order = np.arange(count)
    shuffle(state, order)
    return order, spans, nsp, positions, labels, shown
