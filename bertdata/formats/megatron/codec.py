"""Megatron-LM's indexed dataset, the `.bin`/`.idx` pair (MMIDIDX): its names, header and index.

`.bin`: every sequence's token ids laid end to end. `.idx`, little-endian: the 9-byte magic,
version 1 (u64), the ids' dtype code (u8), the sequence count (u64), the document count (u64:
the length of the document indices, which start at 0), then each sequence's length (int32),
byte offset in the `.bin` (int64), and the document indices (int64: document d is sequences
[indices[d], indices[d + 1])).
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass

import numpy as np

from bertdata.errors import ValidationError

PathLike = str | os.PathLike
MAGIC = b"MMIDIDX\x00\x00"
VERSION = 1
# magic, version, dtype code, sequence count, document count (indices, with the leading 0)
HEADER = struct.Struct("<9sQBQQ")
# Megatron's DType codes (megatron.core.datasets.indexed_dataset.DType): its readers map them back.
DTYPE_CODES = {"uint8": 1, "int8": 2, "int16": 3, "int32": 4, "int64": 5, "float64": 6, "float32": 7,
               "uint16": 8}
# DType.optimal_dtype: ids in uint16 for a vocab of fewer than this many tokens, else int32.
UINT16_VOCAB_LIMIT = 65500
# Megatron's name for what `preprocess_data.py` makes of a JSON key "text" with --split-sentences.
SUFFIX = "text_sentence"
BIN, IDX = ".bin", ".idx"
# A text shard's pair in a build, before its split's pairs are merged.
PART = "part"
# Bytes copied or checked at a time: what bounds the memory of a merge or a validation.
BUFFER = 1 << 22


def token_dtype(vocab_size: int) -> np.dtype:
    """The ids' dtype Megatron chooses for a vocab (DType.optimal_dtype)."""
    return np.dtype(np.uint16 if vocab_size < UINT16_VOCAB_LIMIT else np.int32)


def prefix_name(dataset: str, split: str) -> str:
    """A split's pair, as `--data-path` names it: `<dataset>_<split>_text_sentence`."""
    return f"{dataset}_{split}_{SUFFIX}"


def pair_paths(prefix: PathLike) -> tuple[str, str]:
    """(.bin, .idx) of the pair `prefix` (Megatron's get_bin_path / get_idx_path)."""
    prefix = os.fspath(prefix)
    return prefix + BIN, prefix + IDX


@dataclass(frozen=True)
class Header:
    dtype: np.dtype
    sequences: int
    documents: int  # documents, not the indices' length (one more)

    def index_bytes(self) -> int:
        """The .idx size this header promises."""
        return HEADER.size + 12 * self.sequences + 8 * (self.documents + 1)


def encode_header(dtype: np.dtype, sequences: int, documents: int) -> bytes:
    return HEADER.pack(MAGIC, VERSION, DTYPE_CODES[np.dtype(dtype).name], sequences, documents + 1)


def decode_header(data: bytes, where: str) -> Header:
    """The header at the start of `data`; a bad one raises ValidationError naming `where`."""
    if len(data) < HEADER.size:
        raise ValidationError(f"{where}: {len(data)} bytes, shorter than the {HEADER.size}-byte MMIDIDX header")
    magic, version, code, sequences, indices = HEADER.unpack_from(data)
    if magic != MAGIC:
        raise ValidationError(f"{where}: not a Megatron index (magic {magic!r}, expected {MAGIC!r})")
    if version != VERSION:
        raise ValidationError(f"{where}: index version {version}, only {VERSION} exists")
    names = {c: n for n, c in DTYPE_CODES.items()}
    if code not in names or not np.issubdtype(np.dtype(names[code]), np.integer):
        raise ValidationError(f"{where}: dtype code {code} is not one of Megatron's integer token dtypes")
    if indices < 1:
        raise ValidationError(f"{where}: document count {indices}: the document indices always hold a leading 0")
    return Header(np.dtype(names[code]), sequences, indices - 1)


def encode_index(dtype: np.dtype, lengths: np.ndarray, doc_indices: np.ndarray) -> bytes:
    """The .idx of sequences of `lengths` ids of `dtype`, documents cut at `doc_indices`."""
    lengths = np.asarray(lengths, dtype=np.int32)
    pointers = np.zeros(len(lengths), dtype=np.int64)
    np.cumsum(lengths[:-1], out=pointers[1:])
    pointers *= np.dtype(dtype).itemsize
    return b"".join((encode_header(dtype, len(lengths), len(doc_indices) - 1), lengths.tobytes(),
                     pointers.tobytes(), np.asarray(doc_indices, dtype=np.int64).tobytes()))


@dataclass(frozen=True)
class PairInfo:
    """A valid pair's figures."""

    prefix: str
    dtype: np.dtype
    documents: int
    sentences: int
    tokens: int

    @property
    def mean_sentence_length(self) -> float:
        return self.tokens / max(self.sentences, 1)


def index_arrays(idx: np.ndarray, header: Header) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The .idx's lengths, pointers and document indices, as views of `idx` (its bytes)."""
    n, m = header.sequences, header.documents + 1
    start = HEADER.size
    lengths = idx[start:start + 4 * n].view(np.int32)
    pointers = idx[start + 4 * n:start + 12 * n].view(np.int64)
    doc_indices = idx[start + 12 * n:start + 12 * n + 8 * m].view(np.int64)
    return lengths, pointers, doc_indices
