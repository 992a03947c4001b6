"""Shard validation and statistics, for `bertdata inspect` and for checks after a build."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import h5py
import numpy as np

from bertdata.errors import BertdataError, ValidationError
from bertdata.formats.hdf5io import _open, file_attrs
from bertdata.instances.masking import is_candidate, word_continuations
from bertdata.instances.schema import ARRAYS, ATTRS_KEY, DTYPES, FIELDS
from bertdata.instances.vocab import Vocab

BATCH = 8192
# Largest hdf5 chunk accepted (uncompressed); h5py's automatic chunks stay under 1 MiB.
MAX_CHUNK_BYTES = 64 << 20


@dataclass
class ShardStats:
    path: str
    instances: int = 0
    max_seq_length: int = 0
    real_tokens: int = 0
    full_length: int = 0
    masked: int = 0
    random_next: int = 0
    # With a vocab (see word_masking): masked positions that start a word, instances whose masks
    # cover part of a word.
    word_starts: int = 0
    split_words: int = 0

    def add(self, other: "ShardStats") -> None:
        for name in ("instances", "real_tokens", "full_length", "masked", "random_next", "word_starts",
                     "split_words"):
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


def _fail(path: str, message: str) -> None:
    raise ValidationError(f"{path}: {message}")


@dataclass(frozen=True)
class Layout:
    """What a shard declares: sizes and the generation attributes it records."""

    instances: int
    max_seq_length: int
    max_predictions_per_seq: int
    attrs: dict[str, Any]

    @property
    def vocab_size(self) -> int | None:
        return self.attrs.get("vocab_size")


def check_layout(path: str, f: h5py.File, exact_dtypes: bool = True) -> Layout:
    """The six datasets, their dtypes (exactly the reference's, or any integer type when
    `exact_dtypes` is false, for readers that cast), their shapes, that every row is stored,
    and the recorded attributes. Cheap: reads no rows. Raises ValidationError."""
    for name in FIELDS:
        node = f.get(name)
        if node is None:
            _fail(path, f"missing dataset {name}")
        if not isinstance(node, h5py.Dataset):
            _fail(path, f"{name} is a {type(node).__name__.lower()}, not a dataset")
        dtype = node.dtype
        if dtype != DTYPES[name] if exact_dtypes else not np.issubdtype(dtype, np.integer):
            _fail(path, f"dataset {name} has dtype {dtype}, expected {DTYPES[name]}")
    if f["input_ids"].ndim != 2:
        _fail(path, f"input_ids has shape {f['input_ids'].shape}, expected [N, max_seq_length]")
    n, seq = f["input_ids"].shape
    preds = f["masked_lm_positions"].shape[-1] if f["masked_lm_positions"].ndim == 2 else -1
    for array in ARRAYS:
        shape = array.shape(n, seq, preds)
        if f[array.name].shape != shape:
            _fail(path, f"dataset {array.name} has shape {f[array.name].shape}, expected {shape}")
    for name in FIELDS:
        _check_storage(path, n, f[name])
    try:
        attrs = file_attrs(f)
    except TypeError:  # valid JSON, but a number or a list: file_attrs expects an object
        _fail(path, f"attribute {ATTRS_KEY!r} is not a JSON object")
    vocab_size = attrs.get("vocab_size")
    if vocab_size is not None and (type(vocab_size) is not int or vocab_size < 1):
        _fail(path, f"recorded vocab_size {vocab_size!r} is not a positive integer")
    return Layout(n, seq, preds, attrs)


def _check_storage(path: str, n: int, dataset: h5py.Dataset) -> None:
    """Refuse a dataset that declares more rows than the file holds data for.

    HDF5 reads rows never written as zeros, so a few kB can declare 200 M (empty, invalid) rows
    that a reader would stream for hours or a shuffle would spill to disk. A writer stores every
    chunk it writes, so a complete shard has all of them. Chunks are capped too, because a reader
    inflates a whole chunk at once: deflate packs a GB of zeros into one MB."""
    if not n:
        return
    name = dataset.name.lstrip("/")
    if dataset.chunks:
        chunk_bytes = int(np.prod(dataset.chunks, dtype=np.int64)) * dataset.dtype.itemsize
        if chunk_bytes > MAX_CHUNK_BYTES:
            _fail(path, f"dataset {name} has chunks of {chunk_bytes / 2**20:,.0f} MiB "
                        f"(at most {MAX_CHUNK_BYTES >> 20} MiB accepted: readers inflate whole chunks)")
        needed = int(np.prod([-(-size // rows) for size, rows in zip(dataset.shape, dataset.chunks)],
                             dtype=np.int64))
        stored = dataset.id.get_num_chunks()
        if stored < needed:
            _fail(path, f"declares {n:,} instances, but dataset {name} stores {stored:,} of its "
                        f"{needed:,} chunks (rows never written; the file is {os.path.getsize(path):,} bytes)")
    elif dataset.id.get_storage_size() < dataset.nbytes:
        _fail(path, f"declares {n:,} instances, but dataset {name} stores "
                    f"{dataset.id.get_storage_size():,} of its {dataset.nbytes:,} bytes")


@contextlib.contextmanager
def _invalid_on_read_errors(path: str) -> Iterator[None]:
    try:
        yield
    except ValidationError:
        raise
    except BertdataError as err:  # not hdf5 at all, or unreadable
        raise ValidationError(str(err)) from None
    except OSError as err:  # hdf5 whose data cannot be read back (truncated, corrupt chunks)
        raise ValidationError(f"{path}: unreadable data ({err})") from None


def read_layout(path: str, exact_dtypes: bool = True) -> Layout:
    """`check_layout` of the file at `path`; raises ValidationError."""
    with _invalid_on_read_errors(path), _open(path) as f:
        return check_layout(path, f, exact_dtypes)


def validate_shard(path: str, vocab_size: int | None = None, vocab: Vocab | None = None) -> ShardStats:
    """Check every invariant of the reference layout; raise ValidationError naming the first broken one.
    With `vocab`, also count how the masks fall on words (`word_masking`)."""
    with _invalid_on_read_errors(path), _open(path) as f:
        layout = check_layout(path, f)
        if vocab_size is None:
            vocab_size = layout.vocab_size
        stats = ShardStats(path, instances=layout.instances, max_seq_length=layout.max_seq_length)
        for start in range(0, layout.instances, BATCH):
            batch = {name: f[name][start:start + BATCH] for name in FIELDS}
            check_batch(path, start, batch, vocab_size, stats)
            if vocab is not None:
                word_masking(batch, vocab, stats)
        return stats


def word_masking(b: dict[str, np.ndarray], vocab: Vocab, stats: ShardStats) -> None:
    """Add to `stats` the masked positions of valid rows `b` that start a word, and the rows
    whose masks cover part of a word, the words as the masking rule groups the original pieces
    (`bertdata.instances.masking`)."""
    ids, pos, mids = b["input_ids"], b["masked_lm_positions"], b["masked_lm_ids"]
    rows, slots = np.nonzero(np.cumprod(pos != 0, axis=1))
    original = ids.astype(np.int64)
    original[rows, pos[rows, slots]] = mids[rows, slots]
    masked = np.zeros(ids.shape, bool)
    masked[rows, pos[rows, slots]] = True
    candidate = (b["input_mask"] != 0) & is_candidate(original, vocab.cls_id, vocab.sep_id)
    continues, before = word_continuations(original, candidate, vocab.word_continues)
    split = continues & (masked != np.take_along_axis(masked, before, axis=1))
    stats.word_starts += int((masked & ~continues).sum())
    stats.split_words += int(split.any(axis=1).sum())


def check_batch(path: str, start: int, b: dict[str, np.ndarray], vocab_size: int | None,
                stats: ShardStats | None = None) -> None:
    """Rows start.. of a shard, as arrays of any integer dtype: raise ValidationError naming the
    first broken row; add the rows' statistics to `stats`."""
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
    bad_row((mids < 0).any(1), "masked_lm_ids has a negative id")
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
    if stats is None:
        return
    stats.real_tokens += int(length.sum())
    stats.full_length += int((length == seq).sum())
    stats.masked += int(count.sum())
    stats.random_next += int(nsp.sum())
