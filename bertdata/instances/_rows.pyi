"""Signatures of the compiled filling of the padded reference arrays (_rows.c). Arrays are
C-contiguous numpy arrays (any object with the buffer protocol). Bad input raises TypeError
(element type, not contiguous or read-only), ValueError (shape, sizes), IndexError (a row out of
range) or OverflowError (an id too large for its array)."""

from typing import Any

import numpy as np

Array = np.ndarray[Any, np.dtype[Any]]

def fill_input_ids(out: Array, rows: Array, tokens: Array, spans: Array, positions: Array, shown: Array,
                   cls_id: int, sep_id: int) -> None:
    """out[r] = [CLS] A [SEP] B [SEP] of instance rows[r], with the shown ids at its positions."""

def fill_input_mask(out: Array, rows: Array, spans: Array) -> None:
    """out[r] = 1 over instance rows[r]'s tokens."""

def fill_segment_ids(out: Array, rows: Array, spans: Array) -> None:
    """out[r] = 1 over instance rows[r]'s segment B and its [SEP]."""
