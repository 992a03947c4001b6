"""Signatures of the compiled instance algorithm (_engine.c). Arrays are C-contiguous numpy
arrays (any object with the buffer protocol); `state` is a Mersenne Twister as 625 int64
(random.Random.getstate()'s 624 words and index), advanced in place. Bad input raises
TypeError (element type, not contiguous or read-only), ValueError (shape, offsets, sizes) or
OverflowError (a value too large for the array it goes to)."""

from typing import Any

import numpy as np

Array = np.ndarray[Any, np.dtype[Any]]

def generate(state: Array, *, tokens: Array, sentence_offsets: Array, doc_offsets: Array,
             max_seq_length: int, max_predictions_per_seq: int, short_seq_prob: float, dupe_factor: int,
             num_to_predict: Array, vocab_words: Array, word_continues: Array, cls_id: int, sep_id: int,
             mask_id: int, spans: Array, random_next: Array, positions: Array, labels: Array,
             shown: Array) -> int:
    """The reference instance algorithm (whole-word masking where `word_continues`, bool per
    token id, marks pieces that continue a word; none marked: token masking); instance i goes to row i of spans [N, 4], random_next [N]
    and positions, labels, shown [N, max_predictions_per_seq] if N > i. Returns the count of
    instances: above N, call again from the same state with that many rows."""

def shuffle(state: Array, x: Array) -> None:
    """random.shuffle of int64 `x`."""

def replay(state: Array, bounds: Array) -> list[float | int]:
    """For each bound: random() if it is 0, else randrange(bound) (bound < 2**32)."""
