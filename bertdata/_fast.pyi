"""Signatures of the compiled inner loops (bertdata/_fast.c). Arrays are C-contiguous numpy
arrays (any object with the buffer protocol); `state` is a Mersenne Twister as 625 int64
(random.Random.getstate()'s 624 words and index), advanced in place. Bad input raises
TypeError (element type, not contiguous or read-only), ValueError (shape, offsets, sizes) or
OverflowError (a value too large for the array it goes to)."""

from collections.abc import Callable
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

def fill_input_ids(out: Array, rows: Array, tokens: Array, spans: Array, positions: Array, shown: Array,
                   cls_id: int, sep_id: int) -> None:
    """out[r] = [CLS] A [SEP] B [SEP] of instance rows[r], with the shown ids at its positions."""

def fill_input_mask(out: Array, rows: Array, spans: Array) -> None:
    """out[r] = 1 over instance rows[r]'s tokens."""

def fill_segment_ids(out: Array, rows: Array, spans: Array) -> None:
    """out[r] = 1 over instance rows[r]'s segment B and its [SEP]."""

def rehash(slots: Array, hashes: Array, count: int) -> None:
    """Insert entries 0..count-1 into the empty (all -1) int32 `slots` by their uint64 hashes."""

def scan(buf: Array, *, slots: Array, hashes: Array, key_offsets: Array, key_lengths: Array, keys: Array,
         meta: Array, word_entry: Array, line_words: Array, whole_line: Array) -> int:
    """Split UTF-8 `buf` (lines joined by newlines) into pieces, adding new ones to the table;
    returns the number of pieces."""

def assemble(word_entry: Array, *, line_words: Array, whole_line: Array, value_offsets: Array,
             value_lengths: Array, values: Array, whole_ids: Array, whole_offsets: Array, out: Array,
             lengths: Array) -> int:
    """Lay each line's ids end to end in `out`; returns how many were written."""

def squeeze_spaces(text: str) -> str:
    """`text` without invisible characters (U+200B-U+200F, soft hyphen, BOM), each run of spaces
    (' ', tab, CR, FF, VT, U+00A0, U+2000-U+200A, U+202F, U+205F, U+3000) one ' ', and none at
    the start or end of the text or of a line."""

def punkt_sentences(text: str, abbrev: set[str], collocations: set[tuple[str, str]], starters: set[str],
                    ortho: dict[str, int], general: Callable[[str], bool],
                    flags: tuple[int, int, int, int]) -> list[str]:
    """NLTK punkt's sentences of `text` with the model's abbreviation types, collocations,
    sentence starters and orthographic contexts (`flags`: NLTK's _ORTHO_LC, _ORTHO_MID_UC,
    _ORTHO_UC, _ORTHO_BEG_LC); `general(context)` decides a context other than a word of
    letters, a period and a word (see bertdata/fastpunkt.py)."""
