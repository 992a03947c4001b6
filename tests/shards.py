"""Shards for tests: valid random rows, rows as keys to compare, and files broken in the ways
hostile or careless input is."""

from __future__ import annotations

import hashlib
from pathlib import Path

import h5py
import numpy as np

from bertdata.config import ReshardConfig
from bertdata.formats.hdf5io import DTYPES, FIELDS, LAYOUT, write_shard
from bertdata.reshard import repartition as rp


def filters(dataset: h5py.Dataset) -> dict:
    """How `dataset` is stored, in the keys of the layout every hdf5 manifest records."""
    return {key: getattr(dataset, key) for key in ("compression", "compression_opts", "shuffle")}


STORED = {key: LAYOUT[key] for key in ("compression", "compression_opts", "shuffle")}


def valid_rows(n: int, rng: np.random.Generator, seq: int = 16, preds: int = 4,
               vocab_size: int = 30522) -> dict[str, np.ndarray]:
    """Random rows that pass `inspect`'s checks (distinct with overwhelming probability)."""
    length = rng.integers(3, seq + 1, n)
    real = np.arange(seq) < length[:, None]
    split = rng.integers(1, length)
    positions = np.zeros((n, preds), dtype=np.int64)
    for i in range(n):
        count = rng.integers(0, min(preds, length[i] - 1) + 1)
        positions[i, :count] = np.sort(rng.choice(np.arange(1, length[i]), count, replace=False))
    return {
        "input_ids": np.where(real, rng.integers(1, vocab_size, (n, seq)), 0),
        "input_mask": real.astype(np.int8),
        "segment_ids": (real & (np.arange(seq) >= split[:, None])).astype(np.int8),
        "masked_lm_positions": positions,
        "masked_lm_ids": np.where(positions > 0, rng.integers(1, vocab_size, (n, preds)), 0),
        "next_sentence_labels": rng.integers(0, 2, n),
    }


def reference_rows(n: int, seed: int = 0, seq: int = 128, preds: int = 20) -> dict[str, np.ndarray]:
    """`valid_rows` in the reference's dtypes, from `seed`."""
    return {k: v.astype(DTYPES[k]) for k, v in valid_rows(n, np.random.default_rng(seed), seq, preds).items()}


def row_keys(arrays: dict[str, np.ndarray]) -> list[bytes]:
    """One hash per instance over its six arrays, to compare rows as multisets whatever their
    order or integer dtypes."""
    return [hashlib.sha256(b"".join(np.ascontiguousarray(arrays[k][r], dtype=np.int64).tobytes() for k in FIELDS)
                           ).digest() for r in range(len(arrays["input_ids"]))]


def hostile_files(folder: Path) -> dict[str, tuple[Path, str]]:
    """Files that are not valid shards: name -> (path, what the error must say)."""
    rng = np.random.default_rng(1)
    files = {}

    def make(name: str, reason: str, attrs: dict | None = None, **changes) -> Path:
        path = folder / f"{name}_training_0.hdf5"
        arrays = valid_rows(20, rng)
        with h5py.File(path, "w") as f:
            for field in FIELDS:
                if field in changes:
                    changes[field](f, field, arrays[field])
                else:
                    f.create_dataset(field, data=arrays[field].astype(DTYPES[field]))
            for key, value in (attrs or {}).items():
                f.attrs[key] = value
        files[name] = (path, reason)
        return path

    make("group", "input_ids is a group, not a dataset", input_ids=lambda f, n, a: f.create_group(n))
    make("flat", "dataset segment_ids has shape (320,), expected (20, 16)",
         segment_ids=lambda f, n, a: f.create_dataset(n, data=a.astype("i1").ravel()))
    make("scalar", "input_ids has shape (), expected [N, max_seq_length]",
         input_ids=lambda f, n, a: f.create_dataset(n, data=np.int32(5)))
    make("badjson", "attribute 'bertdata' is not valid JSON", attrs={"bertdata": "{not json"})
    make("jsonlist", "attribute 'bertdata' is not a JSON object", attrs={"bertdata": "[1, 2, 3]"})
    make("vocabsize", "recorded vocab_size 'big' is not a positive integer", attrs={"bertdata": '{"vocab_size": "big"}'})
    # 200 M rows declared in a few kB: chunks never written read back as zeros.
    empty = folder / "empty_training_0.hdf5"
    with h5py.File(empty, "w") as f:
        for field in FIELDS:
            shape = (200_000_000,) if field == "next_sentence_labels" else \
                (200_000_000, 4 if "masked" in field else 16)
            f.create_dataset(field, shape=shape, dtype=DTYPES[field], compression="gzip")
    files["empty"] = (empty, "declares 200,000,000 instances, but dataset input_ids stores 0 of its")
    return files


def numpy_shuffled_chunks(values: np.ndarray, rows: int, cols: int) -> np.ndarray:
    """The chunk layout by numpy's pad and byte transpose: what HDF5's shuffle filter stores."""
    values = values.reshape(len(values), -1)
    n_i, n_j = -(-len(values) // rows), -(-values.shape[1] // cols)
    padded = np.zeros((n_i * rows, n_j * cols), values.dtype)
    padded[:len(values), :values.shape[1]] = values
    size = values.dtype.itemsize
    return padded.view(np.uint8).reshape(n_i, rows, n_j, cols, size).transpose(0, 2, 4, 1, 3).reshape(-1)


def assert_identical(got: dict[str, np.ndarray], expected: dict[str, np.ndarray]) -> None:
    assert set(got) >= set(FIELDS)
    for name in FIELDS:
        assert got[name].dtype == expected[name].dtype == DTYPES[name], name
        assert got[name].shape == expected[name].shape, name
        mismatched = np.flatnonzero((got[name] != expected[name]).reshape(len(got[name]), -1).any(1))
        assert not len(mismatched), f"{name}: {len(mismatched)} rows differ, first row {mismatched[:1]}"


GEN_ATTRS = {"seed": 7, "max_seq_length": 16, "max_predictions_per_seq": 4, "masked_lm_prob": 0.15,
             "vocab_sha256": "ab" * 32, "lower_case": True}


def random_shard(path: Path, n: int, rng: np.random.Generator, seq: int = 16, preds: int = 4,
                 attrs: dict | None = None) -> Path:
    write_shard(path, valid_rows(n, rng, seq, preds),
                {**GEN_ATTRS, "max_seq_length": seq, "max_predictions_per_seq": preds, **(attrs or {})})
    return path


def reshard(*inputs, output, parts, **options) -> rp.ReshardResult:
    return rp.repartition(ReshardConfig(inputs=tuple(str(i) for i in inputs), output=str(output),
                                      parts=parts, **options))
