"""The shard schema against the reference's output table and the reference's own files."""

from __future__ import annotations

import h5py
import numpy as np

from bertdata.instances.schema import ARRAYS, DTYPES, FIELDS, record_dtype, shapes, zeros
from conftest import PARITY, need

# docs/reference-algorithm.md, "Output: one hdf5 file per shard", in its order.
REFERENCE_TABLE = [
    ("input_ids", "int32", ("N", "max_seq_length")),
    ("input_mask", "int8", ("N", "max_seq_length")),
    ("segment_ids", "int8", ("N", "max_seq_length")),
    ("masked_lm_positions", "int32", ("N", "max_predictions_per_seq")),
    ("masked_lm_ids", "int32", ("N", "max_predictions_per_seq")),
    ("next_sentence_labels", "int8", ("N",)),
]


def test_schema_is_the_reference_table():
    sizes = {"N": 7, "max_seq_length": 128, "max_predictions_per_seq": 20}
    assert FIELDS == tuple(name for name, _, _ in REFERENCE_TABLE)
    assert shapes(7, 128, 20) == {name: tuple(sizes[d] for d in dims) for name, _, dims in REFERENCE_TABLE}
    assert {name: str(dtype) for name, dtype in DTYPES.items()} == {name: t for name, t, _ in REFERENCE_TABLE}
    assert [a.name for a in ARRAYS] == list(FIELDS)


def test_zeros_and_records_follow_the_schema():
    arrays = zeros(3, 16, 4)
    assert list(arrays) == list(FIELDS)
    for name, shape in shapes(3, 16, 4).items():
        assert arrays[name].shape == shape and arrays[name].dtype == DTYPES[name] and not arrays[name].any()
    record = record_dtype(16, 4)
    assert record.names == FIELDS
    assert record.itemsize == 16 * (4 + 1 + 1) + 4 * (4 + 4) + 1  # packed: no padding between fields
    records = np.zeros(3, record)
    for name in FIELDS:
        assert records[name].shape == arrays[name].shape and records[name].dtype == DTYPES[name]
    assert [a.row_bytes(16, 4) for a in ARRAYS] == [record[name].itemsize for name in FIELDS]


def test_reference_shards_match_the_schema():
    for path, seq, preds in ((PARITY / "A_s12345_128_20_p15_d5.hdf5", 128, 20),
                             (PARITY / "A_s12345_512_80_p15_d2.hdf5", 512, 80)):
        with h5py.File(need(path), "r") as f:
            n = f["input_ids"].shape[0]
            assert sorted(f) == sorted(FIELDS)
            assert {name: f[name].shape for name in FIELDS} == shapes(n, seq, preds)
            assert {name: f[name].dtype for name in FIELDS} == DTYPES
            assert not f.attrs.keys()  # the reference records nothing about how it was made
