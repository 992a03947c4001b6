"""Shard validation and statistics, for `bertdata inspect` and for checks after a build."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bertdata.errors import BertdataError, ValidationError
from bertdata.hdf5io import DTYPES, FIELDS, _open, file_attrs

BATCH = 8192


@dataclass
class ShardStats:
    path: str
    instances: int = 0
    max_seq_length: int = 0
    real_tokens: int = 0
    full_length: int = 0
    masked: int = 0
    random_next: int = 0

    def add(self, other: "ShardStats") -> None:
        for name in ("instances", "real_tokens", "full_length", "masked", "random_next"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.max_seq_length = max(self.max_seq_length, other.max_seq_length)

    def row(self) -> dict[str, float | int | str]:
        n = max(self.instances, 1)
        return {
            "instances": self.instances,
            "mean_real_tokens": self.real_tokens / n,
            "short_share": 1 - self.full_length / n,
            "masked_per_instance": self.masked / n,
            "random_next_share": self.random_next / n,
        }


def find_shards(paths: list[str]) -> list[str]:
    """Files as given; folders searched recursively for *.hdf5 in sorted order."""
    found: list[str] = []
    for path in paths:
        if os.path.isdir(path):
            found.extend(sorted(str(p) for p in Path(path).rglob("*.hdf5") if not p.name.startswith(".")))
        elif os.path.exists(path):
            found.append(path)
        else:
            raise BertdataError(f"{path}: no such file or folder")
    if not found:
        raise BertdataError(f"no .hdf5 shards found in {', '.join(paths)}")
    return found


def _fail(path: str, message: str) -> None:
    raise ValidationError(f"{path}: {message}")


def validate_shard(path: str, vocab_size: int | None = None) -> ShardStats:
    """Check every invariant of the reference layout; raise ValidationError naming the first broken one."""
    try:
        return _validate(path, vocab_size)
    except ValidationError:
        raise
    except BertdataError as err:  # not hdf5 at all, or unreadable
        raise ValidationError(str(err)) from None
    except OSError as err:  # hdf5 whose data cannot be read back (truncated, corrupt chunks)
        raise ValidationError(f"{path}: unreadable data ({err})") from None


def _validate(path: str, vocab_size: int | None) -> ShardStats:
    with _open(path) as f:
        missing = [name for name in FIELDS if name not in f]
        if missing:
            _fail(path, f"missing dataset {', '.join(missing)}")
        for name in FIELDS:
            if f[name].dtype != DTYPES[name]:
                _fail(path, f"dataset {name} has dtype {f[name].dtype}, expected {DTYPES[name]}")
        n, seq = f["input_ids"].shape if f["input_ids"].ndim == 2 else (None, None)
        if n is None:
            _fail(path, f"input_ids has shape {f['input_ids'].shape}, expected [N, max_seq_length]")
        preds = f["masked_lm_positions"].shape[-1] if f["masked_lm_positions"].ndim == 2 else -1
        expected = {"input_ids": (n, seq), "input_mask": (n, seq), "segment_ids": (n, seq),
                    "masked_lm_positions": (n, preds), "masked_lm_ids": (n, preds),
                    "next_sentence_labels": (n,)}
        for name, shape in expected.items():
            if f[name].shape != shape:
                _fail(path, f"dataset {name} has shape {f[name].shape}, expected {shape}")
        if vocab_size is None:
            vocab_size = file_attrs(f).get("vocab_size")
        stats = ShardStats(path, instances=n, max_seq_length=seq)
        for start in range(0, n, BATCH):
            batch = {name: f[name][start:start + BATCH] for name in FIELDS}
            _check_batch(path, start, batch, vocab_size, stats)
        return stats


def _check_batch(path: str, start: int, b: dict[str, np.ndarray], vocab_size: int | None,
                 stats: ShardStats) -> None:
    def bad_row(mask: np.ndarray, what: str) -> None:
        if mask.any():
            _fail(path, f"instance {start + int(np.flatnonzero(mask)[0])}: {what}")

    ids, mask, seg = b["input_ids"], b["input_mask"], b["segment_ids"]
    pos, mids, nsp = b["masked_lm_positions"], b["masked_lm_ids"], b["next_sentence_labels"]
    seq = ids.shape[1]
    bad_row(((mask != 0) & (mask != 1)).any(1), "input_mask has values other than 0 and 1")
    length = mask.sum(1, dtype=np.int64)
    # input_mask must be a run of 1s followed by 0s.
    bad_row((mask != (np.arange(seq) < length[:, None])).any(1), "input_mask is not 1s followed by 0s")
    bad_row(length < 3, "fewer than 3 real tokens")
    bad_row(((ids != 0) & (mask == 0)).any(1), "input_ids not 0-padded after the real tokens")
    bad_row((ids < 0).any(1), "negative token id")
    if vocab_size is not None:
        bad_row((ids >= vocab_size).any(1), f"token id >= vocab size {vocab_size}")
        bad_row((mids >= vocab_size).any(1), f"masked_lm_ids has an id >= vocab size {vocab_size}")
    bad_row(((seg != 0) & (seg != 1)).any(1), "segment_ids has values other than 0 and 1")
    bad_row(((seg != 0) & (mask == 0)).any(1), "segment_ids not 0-padded")
    real_seg = np.where(mask == 1, seg, 1)
    bad_row((np.diff(real_seg, axis=1) < 0).any(1), "segment_ids go from 1 back to 0")
    bad_row((nsp != 0) & (nsp != 1), "next_sentence_labels not 0 or 1")

    used = pos != 0
    count = np.where(used.all(1), used.shape[1], np.argmin(used, axis=1))
    slots = np.arange(pos.shape[1])
    tail = slots >= count[:, None]
    bad_row((used & tail).any(1), "masked_lm_positions not 0-padded after the last prediction")
    bad_row(((mids != 0) & tail).any(1), "masked_lm_ids not 0-padded after the last prediction")
    head = ~tail
    increasing = np.diff(pos, axis=1) > 0
    bad_row((~increasing & head[:, 1:]).any(1), "masked_lm_positions not strictly increasing")
    bad_row((head & ((pos < 0) | (pos >= length[:, None]))).any(1),
            "masked position outside the real tokens (input_mask is 0 there)")
    stats.real_tokens += int(length.sum())
    stats.full_length += int((length == seq).sum())
    stats.masked += int(count.sum())
    stats.random_next += int(nsp.sum())
