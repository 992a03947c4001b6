"""Checking a Megatron pair as Megatron's IndexedDataset reads it, and reading it back: the .idx
mapped, the .bin in buffers."""

from __future__ import annotations

import os

import numpy as np

from bertdata.errors import ValidationError
from bertdata.formats.megatron import codec
from bertdata.formats.megatron.codec import HEADER, PairInfo, PathLike, decode_header, index_arrays, pair_paths
from bertdata.instances.documents import Documents


def validate_pair(prefix: PathLike, vocab_size: int | None = None) -> PairInfo:
    """Check the pair `prefix` as Megatron's IndexedDataset reads it, and every id below
    `vocab_size` when given; a fault raises ValidationError naming the file. Reads the .idx
    mapped and the .bin in buffers."""
    bin_path, idx_path = pair_paths(prefix)
    for path in (idx_path, bin_path):
        if not os.path.isfile(path):
            raise ValidationError(f"{path}: missing (a Megatron pair is PREFIX.bin and PREFIX.idx)")
    size = os.path.getsize(idx_path)
    with open(idx_path, "rb") as f:
        header = decode_header(f.read(HEADER.size), idx_path)
    if size != header.index_bytes():
        raise ValidationError(f"{idx_path}: {size:,} bytes, but its header's {header.sequences:,} sequences and "
                              f"{header.documents:,} documents make {header.index_bytes():,}")
    idx = np.memmap(idx_path, dtype=np.uint8, mode="r")
    lengths, pointers, doc_indices = index_arrays(idx, header)
    itemsize = header.dtype.itemsize
    tokens = 0
    step = codec.BUFFER // 8
    for start in range(0, header.sequences, step):
        chunk = lengths[start:start + step].astype(np.int64)
        if (chunk < 0).any():
            raise ValidationError(f"{idx_path}: sequence {start + int(np.argmax(chunk < 0))} has a negative length")
        expected = (tokens + np.concatenate(([0], np.cumsum(chunk[:-1])))) * itemsize
        wrong = np.flatnonzero(pointers[start:start + step] != expected)
        if len(wrong):
            s = start + int(wrong[0])
            raise ValidationError(f"{idx_path}: sequence {s} points to byte {int(pointers[s])} of the .bin, but "
                                  f"the lengths before it put it at {int(expected[wrong[0]])}")
        tokens += int(chunk.sum())
    if doc_indices[0] != 0 or doc_indices[-1] != header.sequences:
        raise ValidationError(f"{idx_path}: document indices run from {int(doc_indices[0])} to "
                              f"{int(doc_indices[-1])}, not from 0 to the sequence count {header.sequences}")
    if header.documents and (np.diff(doc_indices) < 0).any():
        d = int(np.argmax(np.diff(doc_indices) < 0))
        raise ValidationError(f"{idx_path}: document indices decrease at document {d}")
    bin_size = os.path.getsize(bin_path)
    if bin_size != tokens * itemsize:
        raise ValidationError(f"{bin_path}: {bin_size:,} bytes, but its index's {tokens:,} {header.dtype.name} "
                              f"ids make {tokens * itemsize:,} (truncated, or not this index's data)")
    if vocab_size is not None:
        _check_ids(bin_path, header.dtype, vocab_size)
    return PairInfo(os.fspath(prefix), header.dtype, header.documents, header.sequences, tokens)


def _check_ids(bin_path: str, dtype: np.dtype, vocab_size: int) -> None:
    position = 0
    with open(bin_path, "rb") as f:
        for block in iter(lambda: f.read(codec.BUFFER - codec.BUFFER % dtype.itemsize), b""):
            ids = np.frombuffer(block, dtype=dtype)
            bad = np.flatnonzero((ids >= vocab_size) | (ids < 0))
            if len(bad):
                raise ValidationError(f"{bin_path}: token {position + int(bad[0])} has id {int(ids[bad[0]])}, "
                                      f"outside the vocab's {vocab_size:,} tokens")
            position += len(ids)


def read_pair(prefix: PathLike) -> Documents:
    """A valid pair's documents and sentences back (the ids mapped from the .bin, in its dtype)."""
    info = validate_pair(prefix)
    bin_path, idx_path = pair_paths(prefix)
    idx = np.memmap(idx_path, dtype=np.uint8, mode="r")
    lengths, _pointers, doc_indices = index_arrays(idx, decode_header(idx[:HEADER.size].tobytes(), idx_path))
    sentence_offsets = np.zeros(info.sentences + 1, dtype=np.int64)
    np.cumsum(lengths, out=sentence_offsets[1:])
    tokens = np.memmap(bin_path, dtype=info.dtype, mode="r") if info.tokens else np.empty(0, info.dtype)
    return Documents((bin_path,), tokens, sentence_offsets, np.array(doc_indices))
