"""Writing Megatron pairs: one pair of a text shard's documents (`write_pair`), and `merge`,
which concatenates pairs as Megatron's `tools/merge_datasets.py` does (pointers and document
indices shifted), streaming the files in buffers, so its memory is bounded whatever the data's
size."""

from __future__ import annotations

import contextlib
import hashlib
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import BinaryIO

import numpy as np

from bertdata.errors import ValidationError
from bertdata.formats.megatron import codec
from bertdata.formats.megatron.codec import (BIN, HEADER, PairInfo, PathLike, decode_header, encode_header,
                                            encode_index, pair_paths, token_dtype)
from bertdata.fsutil import atomic_path
from bertdata.instances.documents import Documents


def write_pair(bin_path: PathLike, idx_path: PathLike, documents: Documents, vocab_size: int) -> PairInfo:
    """One pair of `documents` (one sequence per sentence), each file written under a temporary
    name and renamed when whole; the .bin first, so an .idx never points into a missing .bin."""
    dtype = token_dtype(vocab_size)
    if documents.num_tokens and int(documents.tokens.max()) >= vocab_size:
        raise ValueError(f"token id {int(documents.tokens.max())} past the vocab's {vocab_size} tokens")
    for path, data in ((bin_path, documents.tokens.astype(dtype, copy=False).tobytes()),
                       (idx_path, encode_index(dtype, np.diff(documents.sentence_offsets), documents.doc_offsets))):
        with atomic_path(path) as tmp:
            tmp.write_bytes(data)
    return PairInfo(os.fspath(bin_path)[:-len(BIN)], dtype, documents.num_documents, documents.num_sentences,
                    documents.num_tokens)


@dataclass(frozen=True)
class Merged:
    """A merged pair's figures and its files' checksums."""

    documents: int
    sentences: int
    tokens: int
    bin_bytes: int
    idx_bytes: int
    bin_sha256: str
    idx_sha256: str


class _Hashing:
    """A writer that counts and hashes what passes through it."""

    def __init__(self, f: BinaryIO):
        self.f, self.digest, self.size = f, hashlib.sha256(), 0

    def write(self, data) -> None:
        self.digest.update(data)
        self.size += len(data)
        self.f.write(data)


def _read_exactly(f: BinaryIO, n: int, where: str) -> Iterator[bytes]:
    """`n` bytes of `f` from where it stands, in buffers; fewer raises ValidationError."""
    while n > 0:
        block = f.read(min(n, codec.BUFFER))
        if not block:
            raise ValidationError(f"{where}: ends {n:,} bytes early")
        n -= len(block)
        yield block


def merge(parts: Sequence[PathLike], bin_out: BinaryIO, idx_out: BinaryIO,
          open_file: Callable[[str], BinaryIO] = lambda path: open(path, "rb")) -> Merged:
    """Concatenate the pairs `parts` (prefixes), in order, into `bin_out` and `idx_out`: pointers
    shifted by the .bin bytes before them, document indices by the sequences before them, as
    Megatron's merge_datasets.py does. Streams every file in buffers (`open_file` opens one to
    read, from where `merge` seeks); parts of different dtypes, or files shorter than their
    headers say, raise ValidationError naming the file."""
    if not parts:
        raise ValueError("no pairs to merge")
    paths = [pair_paths(p) for p in parts]
    headers = []
    for _bin, idx in paths:
        with open_file(idx) as f:
            headers.append(decode_header(f.read(HEADER.size), idx))
    dtype = headers[0].dtype
    for (_bin, idx), header in zip(paths, headers):
        if header.dtype != dtype:
            raise ValidationError(f"{idx}: ids of {header.dtype.name}, but {paths[0][1]}'s are {dtype.name}: "
                                  "pairs of different vocab sizes do not merge")
    out_idx, out_bin = _Hashing(idx_out), _Hashing(bin_out)
    sequences, documents = sum(h.sequences for h in headers), sum(h.documents for h in headers)
    out_idx.write(encode_header(dtype, sequences, documents))
    part_tokens = []
    for (_bin, idx), header in zip(paths, headers):  # lengths: copied as they are
        total = 0
        with open_file(idx) as f:
            f.seek(HEADER.size)
            for block in _read_exactly(f, 4 * header.sequences, idx):
                total += int(np.frombuffer(block, dtype=np.int32).sum(dtype=np.int64))
                out_idx.write(block)
        part_tokens.append(total)
    shift = 0
    for (_bin, idx), header, tokens in zip(paths, headers, part_tokens):  # pointers: past the bytes before
        with open_file(idx) as f:
            f.seek(HEADER.size + 4 * header.sequences)
            for block in _read_exactly(f, 8 * header.sequences, idx):
                out_idx.write((np.frombuffer(block, dtype=np.int64) + shift).tobytes())
        shift += tokens * dtype.itemsize
    out_idx.write(np.zeros(1, np.int64).tobytes())
    shift = 0
    for (_bin, idx), header in zip(paths, headers):  # document ends: past the sequences before
        with open_file(idx) as f:
            f.seek(HEADER.size + 12 * header.sequences)
            blocks = _read_exactly(f, 8 * (header.documents + 1), idx)
            first = True
            for block in blocks:
                ends = np.frombuffer(block, dtype=np.int64)[1 if first else 0:]
                first = False
                out_idx.write((ends + shift).tobytes())
        shift += header.sequences
    for (bin_path, _idx), tokens in zip(paths, part_tokens):
        with open_file(bin_path) as f:
            for block in _read_exactly(f, tokens * dtype.itemsize, bin_path):
                out_bin.write(block)
            if f.read(1):
                raise ValidationError(f"{bin_path}: longer than its index's {tokens:,} ids")
    return Merged(documents, sequences, sum(part_tokens), out_bin.size, out_idx.size,
                  out_bin.digest.hexdigest(), out_idx.digest.hexdigest())


def merge_pairs(parts: Sequence[PathLike], prefix: PathLike) -> Merged:
    """`merge` of local pairs into the pair `prefix`, each file written whole or not at all."""
    bin_path, idx_path = pair_paths(prefix)
    with contextlib.ExitStack() as stack:
        # Entered in this order, so that the .bin is renamed first.
        idx_tmp = stack.enter_context(atomic_path(idx_path))
        bin_tmp = stack.enter_context(atomic_path(bin_path))
        with open(bin_tmp, "wb") as bin_out, open(idx_tmp, "wb") as idx_out:
            return merge(parts, bin_out, idx_out)
