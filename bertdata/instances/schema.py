"""The shard schema: the reference's six arrays, and where a shard records how it was made.

Every shard, whatever its file format, is these six arrays with one row per instance, all
0-padded (see the reference algorithm's output table). The writers, readers, validator,
re-partitioner and the bench loader take names, dtypes, widths and order from here.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

SEQ, PRED, ONE = "max_seq_length", "max_predictions_per_seq", "one"


@dataclass(frozen=True)
class Array:
    """One of the six arrays: its dtype, and how wide a row is (a sequence, the predictions,
    or a single value)."""

    name: str
    dtype: np.dtype
    width: str  # SEQ, PRED or ONE

    def row_shape(self, max_seq_length: int, max_predictions_per_seq: int) -> tuple[int, ...]:
        return {SEQ: (max_seq_length,), PRED: (max_predictions_per_seq,), ONE: ()}[self.width]

    def shape(self, instances: int, max_seq_length: int, max_predictions_per_seq: int) -> tuple[int, ...]:
        return (instances, *self.row_shape(max_seq_length, max_predictions_per_seq))

    def row_bytes(self, max_seq_length: int, max_predictions_per_seq: int) -> int:
        return self.dtype.itemsize * int(np.prod(self.row_shape(max_seq_length, max_predictions_per_seq)))


# The reference's creation order: readers index by name, but the order is the hdf5 file's layout.
ARRAYS = (
    Array("input_ids", np.dtype("i4"), SEQ),
    Array("input_mask", np.dtype("i1"), SEQ),
    Array("segment_ids", np.dtype("i1"), SEQ),
    Array("masked_lm_positions", np.dtype("i4"), PRED),  # 0 ends the list: position 0 is [CLS]
    Array("masked_lm_ids", np.dtype("i4"), PRED),
    Array("next_sentence_labels", np.dtype("i1"), ONE),  # 1 = segment B is from another document
)
BY_NAME = {a.name: a for a in ARRAYS}
FIELDS = tuple(BY_NAME)
DTYPES = {a.name: a.dtype for a in ARRAYS}

# The reference's files carry no attributes. Ours record how they were made (seed, lengths,
# vocab) as one JSON object under this key; readers that know only the six arrays ignore it.
ATTRS_KEY = "bertdata"


def shapes(instances: int, max_seq_length: int, max_predictions_per_seq: int) -> dict[str, tuple[int, ...]]:
    return {a.name: a.shape(instances, max_seq_length, max_predictions_per_seq) for a in ARRAYS}


def zeros(instances: int, max_seq_length: int, max_predictions_per_seq: int) -> dict[str, np.ndarray]:
    """The six arrays of `instances` rows, all padding."""
    return {a.name: np.zeros(a.shape(instances, max_seq_length, max_predictions_per_seq), a.dtype) for a in ARRAYS}


def record_dtype(max_seq_length: int, max_predictions_per_seq: int) -> np.dtype:
    """One instance as one packed record of the six rows, in schema order."""
    return np.dtype([(a.name, a.dtype, a.row_shape(max_seq_length, max_predictions_per_seq)) for a in ARRAYS])
