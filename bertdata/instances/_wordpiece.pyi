"""Signatures of the tokenizer's compiled piece table (_wordpiece.c). Arrays are C-contiguous numpy
arrays (any object with the buffer protocol). Bad input raises
TypeError (element type, not contiguous or read-only), ValueError (shape, offsets, sizes) or
OverflowError (a value too large for the array it goes to)."""

from typing import Any

import numpy as np

Array = np.ndarray[Any, np.dtype[Any]]

def rehash(slots: Array, hashes: Array, count: int) -> None:
    """Insert entries 0..count-1 into the empty (all -1) int32 `slots` by their uint64 hashes."""

def text_lines(block: bytes) -> tuple[bytes, bytes, bytes] | None:
    """A block of a text shard (UTF-8, lines split at LF only): its non-blank lines, stripped as
    `str.strip` strips them, joined by LF; an int64 array's bytes of where each starts in that;
    a byte per line, 1 for a blank one. None if `block` is not valid UTF-8."""

def count_pieces(buf: Array | bytes) -> tuple[int, int]:
    """The pieces `scan` finds in UTF-8 `buf` (runs between space, tab, CR and LF), and its newlines."""

def count_ids(word_entry: Array, words: int, value_lengths: Array) -> int:
    """How many ids the first `words` pieces of int32 `word_entry` have, by int32 `value_lengths`."""

def scan(buf: Array, *, slots: Array, hashes: Array, key_offsets: Array, key_lengths: Array, keys: Array,
         meta: Array, word_entry: Array, line_words: Array, whole_line: Array) -> int:
    """Split UTF-8 `buf` (lines joined by newlines) into pieces, adding new ones to the table;
    returns the number of pieces."""

def assemble(word_entry: Array, *, line_words: Array, whole_line: Array, value_offsets: Array,
             value_lengths: Array, values: Array, whole_ids: Array, whole_offsets: Array, out: Array,
             lengths: Array) -> int:
    """Lay each line's ids end to end in `out`; returns how many were written."""
