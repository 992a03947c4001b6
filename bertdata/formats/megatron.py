"""Megatron-LM's indexed dataset: the `.bin`/`.idx` pair (MMIDIDX) that Megatron-LM and NeMo
pretrain BERT from, holding every document's tokenized sentences, one sequence per sentence.

It is what Megatron's `tools/preprocess_data.py --split-sentences --tokenizer-type
BertWordPieceLowerCase` writes as `PREFIX_text_sentence.bin/.idx`, without an end-of-document
token (BERT's preprocessing appends none). `.bin`: every sequence's token ids laid end to end.
`.idx`, little-endian: the 9-byte magic, version 1 (u64), the ids' dtype code (u8), the
sequence count (u64), the document count (u64: the length of the document indices, which
start at 0), then each sequence's length (int32), byte offset in the `.bin` (int64), and the
document indices (int64: document d is sequences [indices[d], indices[d + 1])).

One pair per text shard is written (`write_pair`); `merge` concatenates pairs as Megatron's
`tools/merge_datasets.py` does (pointers and document indices shifted), streaming the files
in buffers, so its memory is bounded whatever the data's size.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import struct
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, ClassVar

import numpy as np

from bertdata.errors import ValidationError
from bertdata.formats.contract import PER_SPLIT, SENTENCES, Report, SplitSettings, hidden
from bertdata.fsutil import atomic_path
from bertdata.manifest import MANIFEST
from bertdata.instances.documents import Documents

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


def _section(idx: np.ndarray, header: Header) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    n, m = header.sequences, header.documents + 1
    start = HEADER.size
    lengths = idx[start:start + 4 * n].view(np.int32)
    pointers = idx[start + 4 * n:start + 12 * n].view(np.int64)
    doc_indices = idx[start + 12 * n:start + 12 * n + 8 * m].view(np.int64)
    return lengths, pointers, doc_indices


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
    lengths, pointers, doc_indices = _section(idx, header)
    itemsize = header.dtype.itemsize
    tokens = 0
    step = BUFFER // 8
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
        for block in iter(lambda: f.read(BUFFER - BUFFER % dtype.itemsize), b""):
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
    lengths, _pointers, doc_indices = _section(idx, decode_header(idx[:HEADER.size].tobytes(), idx_path))
    sentence_offsets = np.zeros(info.sentences + 1, dtype=np.int64)
    np.cumsum(lengths, out=sentence_offsets[1:])
    tokens = np.memmap(bin_path, dtype=info.dtype, mode="r") if info.tokens else np.empty(0, info.dtype)
    return Documents((bin_path,), tokens, sentence_offsets, np.array(doc_indices))


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
        block = f.read(min(n, BUFFER))
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


def folder_name(lowercase: bool) -> str:
    """A build's pairs: one per split, whatever the phases; named like the hdf5 folders for the
    case, since a cased vocab's ids differ."""
    return f"megatron/lower_case_{int(lowercase)}"


@dataclass(frozen=True)
class MegatronPairs:
    """Megatron-LM's indexed datasets: one unit per pair, named by its prefix; a build writes a
    part per text shard and merges them per split."""

    name: ClassVar[str] = "megatron"
    cut: ClassVar[str] = PER_SPLIT
    holds: ClassVar[str] = SENTENCES
    # Bytes written per byte of clean text, once whatever the phases (None), measured on the
    # fragment (uint16 ids): what the build's disk check counts on.
    disk_per_text_byte: ClassVar[dict] = {None: 0.501}
    takes_any_file: ClassVar[bool] = False
    describe: ClassVar[str] = (
        "Megatron-LM's indexed dataset (.bin/.idx, one pair per split of every document's tokenized "
        "sentences, for Megatron-LM and NeMo: --data-path PREFIX), under OUTPUT/megatron/lower_case_1/, made "
        "once whatever the phases")
    writes: ClassVar[str] = "one .bin/.idx pair per split, whatever the phases"

    # --- how a build writes it (bertdata.formats.SplitFormat) ---

    def folder(self, settings: SplitSettings) -> str:
        return folder_name(settings.lowercase)

    def options(self, settings: SplitSettings) -> dict:
        tokenizer = settings.tokenizer
        options = {"dataset": settings.dataset, "vocab_sha256": tokenizer.sha256, "vocab_size": tokenizer.vocab_size,
                   "lowercase": settings.lowercase, "dtype": token_dtype(tokenizer.vocab_size).name}
        return {**options, "tokenizer": tokenizer.name} if settings.tokenizer_file else options

    def write_part(self, shard, documents: Documents, settings: SplitSettings, local: str) -> str:
        """The text shard's documents as a pair in `local`; its prefix's name."""
        bin_path, idx_path = pair_paths(os.path.join(local, PART))
        write_pair(bin_path, idx_path, documents, settings.tokenizer.vocab_size)
        return PART

    def finish_split(self, split: str, parts: list, settings: SplitSettings, folder: str, files) -> dict:
        """The split's parts merged into its pair (`merge`, streamed)."""
        prefix = files.join(folder, prefix_name(settings.dataset, split))
        bin_path, idx_path = pair_paths(prefix)
        # The .bin is renamed into place first (the inner writer), so an .idx never points into nothing.
        with files.atomic_writer(idx_path) as idx_out, files.atomic_writer(bin_path) as bin_out:
            merged = merge([files.join(where, name) for where, name in parts], bin_out, idx_out, files.open_file)
        return {"prefix": prefix_name(settings.dataset, split), "documents": merged.documents,
                "sentences": merged.sentences, "tokens": merged.tokens,
                "files": [{"file": os.path.basename(path), "bytes": size, "sha256": sha}
                          for path, size, sha in zip(pair_paths(prefix), (merged.bin_bytes, merged.idx_bytes),
                                                     (merged.bin_sha256, merged.idx_sha256))]}

    def finish_folder(self, entries: list[dict], settings: SplitSettings, folder: str, files) -> dict:
        return {}

    def ours(self, path: str) -> bool:
        return "/" not in path and path.endswith((BIN, IDX)) and path[:-len(BIN)].endswith(SUFFIX)

    # --- finding, reading and checking what is written ---

    def summary(self, folder: str, manifest: dict) -> str:
        """The build's line for a folder it wrote, from the folder's manifest."""
        counts = manifest["counts"]
        return (f"{self.name}: {counts['documents']:,} documents, {counts['sentences']:,} sentences, "
                f"{counts['tokens']:,} tokens in {counts['splits']} pair{'s' if counts['splits'] != 1 else ''} -> "
                f"{folder}")

    def claims(self, path: str) -> bool:
        """A .bin or .idx file, or the prefix of a pair, as Megatron's `--data-path` names it."""
        return ((path.endswith((BIN, IDX)) and os.path.isfile(path))
                or (not os.path.exists(path) and os.path.isfile(path + IDX)))

    def find(self, folder: str) -> list[str]:
        root = Path(folder)
        return sorted(str(p)[:-len(IDX)] for p in root.rglob("*" + IDX) if not hidden(p, root))

    def inspect(self, units: list[str], report: Report) -> None:
        """Validate each pair and print its figures; ids are checked against the report's vocab,
        else the vocab size the folder's manifest records."""
        from bertdata.instances.vocab import check_vocab

        for unit in units:
            prefix = unit[:-len(IDX)] if unit.endswith((BIN, IDX)) else unit
            manifest_path = Path(prefix).parent / MANIFEST
            options = {}
            if manifest_path.is_file():
                with contextlib.suppress(ValueError):
                    options = json.loads(manifest_path.read_text(encoding="utf-8")).get("options", {})
            if report.vocab is not None:
                check_vocab(report.vocab, options, prefix)
            vocab_size = len(report.vocab) if report.vocab is not None else options.get("vocab_size")
            try:
                info = validate_pair(prefix, vocab_size)
            except ValidationError as err:
                report.failures.append(str(err))
                report.out(f"Megatron pair {prefix}: INVALID")
                continue
            report.out(f"Megatron pair {prefix}: {info.documents:,} documents, {info.sentences:,} sentences, "
                       f"{info.tokens:,} {info.dtype.name} tokens, {info.mean_sentence_length:.1f} tokens per "
                       "sentence" + ("" if vocab_size else " (ids not checked: no vocab size known)"))


MEGATRON = MegatronPairs()
