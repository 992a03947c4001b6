"""Reading and writing shards in the reference hdf5 layout (six datasets, byte-shuffled and gzipped)."""

from __future__ import annotations

import collections
import json
import os
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import h5py
import numpy as np

from bertdata.errors import BertdataError
from bertdata.formats._chunks import shuffle_chunks
from bertdata.formats._zrle import zlib_rle
from bertdata.formats.contract import PartInfo
from bertdata.fsutil import atomic_path, load_json
from bertdata.instances.schema import ATTRS_KEY, DTYPES, FIELDS, shapes

GZIP_LEVEL = 1
# How each non-empty dataset is stored, as h5py reports it, and what wrote its deflate streams;
# recorded in every hdf5 folder's manifest. The reference has gzip level 4 alone. HDF5's byte
# shuffle before gzip gives the same arrays to every hdf5 reader (both filters are built into
# libhdf5) in the same chunks, in smaller files for less compression work (README, Performance).
# The gzip filter reads any zlib stream: its level is what HDF5 itself uses, on partial chunks.
LAYOUT = {"compression": "gzip", "compression_opts": GZIP_LEVEL, "shuffle": True,
          "chunks": "h5py's default for the dataset's shape, as the reference's",
          "deflate": "whole chunks: runs as distance-1 matches and one Huffman block each "
                     "(bertdata.formats._zrle: smaller and faster than gzip level 1 on shuffled "
                     "token ids and masks); partial chunks: HDF5's gzip level 1"}
# Whole shards are written dataset by dataset in this order, which fixes where each dataset's
# chunks lie in the file: every writer of whole shards follows it, so all give the same bytes.
# input_ids and masked_lm_positions come first: their widths give `write_shard` the shard's shape.
WRITE_ORDER = ("input_ids", "masked_lm_positions",
               *(name for name in FIELDS if name not in ("input_ids", "masked_lm_positions")))

ArraySource = Mapping[str, np.ndarray] | Callable[[str], np.ndarray]


def _compress(chunk: np.ndarray) -> bytes:
    # A byte-shuffled chunk is planes of near-random low bytes, skewed high bytes and zeros, and
    # runs: earlier repeats buy little there, so a deflate that looks for runs only does less
    # work for fewer bytes (README, Performance), and, being our own code, gives the same bytes
    # on every machine. (ISA-L's deflate did not: one chunk came out of it two ways in two builds.)
    return zlib_rle(chunk)


def _compress_all(blocks: list[np.ndarray]) -> list[bytes]:
    return [_compress(block) for block in blocks]


# Writes whose chunks are handed to the compressing thread and not yet stored, at most; a write
# is a few MB (see formats.hdf5.WRITE_BLOCK_BYTES). A write's chunks (tens of KB each) go as one
# task: a hand-off per chunk cost about as much as compressing it.
COMPRESS_AHEAD = 1


class ShardWriter:
    """Write a shard of known size in slices, so callers never hold all instances at once.

    Datasets are created with their full shape, which gives h5py's default chunking for
    that shape -- the same layout the reference gets from `create_dataset(data=...)`.
    The file appears under its final name only after `close()` on success.

    Whole chunks are compressed on a helper thread (`zlib_rle` lets go of the GIL) while the
    caller builds the next rows, and stored in the order they were written: the file's bytes
    do not depend on the thread's timing. Without `helper_thread` (a worker that shares every
    core with others) they are compressed in line: the hand-offs cost more than they overlap.
    """

    def __init__(self, path: str | os.PathLike, num_instances: int, max_seq_length: int,
                 max_predictions_per_seq: int, attrs: Mapping[str, Any] | None = None, *,
                 helper_thread: bool = True):
        self.path = os.fspath(path)
        self._atomic = atomic_path(self.path)
        tmp = self._atomic.__enter__()
        try:
            self._file = h5py.File(tmp, "w")
            if attrs:
                # One JSON attribute: one attribute costs HDF5 about as much as fourteen would
                # cost fourteen times, and small shards are written by the hundred.
                self._file.attrs[ATTRS_KEY] = json.dumps(dict(attrs), sort_keys=True)
            self._datasets = {}
            self._pending: collections.deque[tuple[h5py.Dataset, list[tuple[int, ...]], Future]] = collections.deque()
            self._compressor = ThreadPoolExecutor(1, thread_name_prefix="hdf5-deflate") if helper_thread else None
            for name, shape in shapes(num_instances, max_seq_length, max_predictions_per_seq).items():
                # chunks=True on an empty shape is an error in HDF5; an empty shard stays contiguous.
                self._datasets[name] = self._file.create_dataset(
                    name, shape=shape, dtype=DTYPES[name],
                    compression=LAYOUT["compression"] if num_instances else None,
                    compression_opts=GZIP_LEVEL if num_instances else None,
                    shuffle=LAYOUT["shuffle"] and bool(num_instances),
                )
        except BaseException as err:
            self._abort(err)
            raise

    def write(self, name: str, start: int, values: np.ndarray) -> None:
        """Rows start:start+len(values). Slices on chunk-row boundaries (see `chunk_rows`) are
        compressed here and stored as finished chunks; others go through HDF5's own filter."""
        dataset = self._datasets[name]
        if not len(values):
            return
        end = start + len(values)
        rows = dataset.chunks[0] if dataset.chunks else 0
        if not rows or start % rows or (end % rows and end != dataset.shape[0]):
            self._store(0)  # earlier writes reach HDF5 first, as when each stored its chunks at once
            dataset[start:end] = values
            return
        rows_per, cols_per = (dataset.chunks + (1,))[:2]
        cols = values.shape[1] if values.ndim == 2 else 1
        n_rows, n_cols = -(-len(values) // rows_per), -(-cols // cols_per)
        # Every chunk laid out as HDF5's shuffle filter stores it, edge chunks padded with the fill
        # value 0 as HDF5 pads them, each a contiguous block.
        blocks = np.empty(n_rows * n_cols * rows_per * cols_per * dataset.dtype.itemsize, np.uint8)
        shuffle_chunks(blocks, np.ascontiguousarray(values, dataset.dtype), rows_per, cols_per)
        blocks = blocks.reshape(n_rows * n_cols, -1)
        offsets = [(start + i * rows_per, j * cols_per) if values.ndim == 2 else (start + i * rows_per,)
                   for i in range(n_rows) for j in range(n_cols)]
        if self._compressor is None:
            compressed: Future = Future()
            compressed.set_result(_compress_all(list(blocks)))
        else:
            compressed = self._compressor.submit(_compress_all, list(blocks))
        self._pending.append((dataset, offsets, compressed))
        self._store(COMPRESS_AHEAD)

    def _store(self, keep: int) -> None:
        """Store compressed chunks in the order written, leaving at most `keep` pending."""
        while len(self._pending) > keep:
            dataset, offsets, compressed = self._pending.popleft()
            for offset, chunk in zip(offsets, compressed.result()):
                dataset.id.write_direct_chunk(offset, chunk)

    def write_all(self, name: str, values: np.ndarray) -> None:
        dataset = self._datasets[name]
        if values.shape != dataset.shape:
            raise ValueError(f"{name}: shape {values.shape}, expected {dataset.shape}")
        self.write(name, 0, values)

    def close(self) -> None:
        try:
            self._store(0)
        except BaseException as err:
            self._abort(err)
            raise
        if self._compressor is not None:
            self._compressor.shutdown()
        self._file.close()
        self._atomic.__exit__(None, None, None)

    def _abort(self, err: BaseException) -> None:
        if getattr(self, "_compressor", None) is not None:
            self._compressor.shutdown(cancel_futures=True)
        if getattr(self, "_file", None) is not None:
            self._file.close()
        self._atomic.__exit__(type(err), err, err.__traceback__)

    def __enter__(self) -> "ShardWriter":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc is None:
            self.close()
        else:
            self._abort(exc)


def write_shard(path: str | os.PathLike, arrays: ArraySource,
                attrs: Mapping[str, Any] | None = None) -> None:
    """Write the six arrays atomically. `arrays` may be a function of the field name, so a
    caller can materialise one dataset at a time and keep peak memory to one array."""
    get = arrays if callable(arrays) else arrays.__getitem__
    first = get("input_ids")
    positions = get("masked_lm_positions")
    with ShardWriter(path, first.shape[0], first.shape[1], positions.shape[1], attrs) as writer:
        held = {"input_ids": first, "masked_lm_positions": positions}
        del first, positions
        for name in WRITE_ORDER:
            values = held.pop(name) if name in held else get(name)
            writer.write_all(name, values.astype(DTYPES[name], copy=False))
            del values


def _open(path: str | os.PathLike) -> h5py.File:
    path = os.fspath(path)
    if not os.path.exists(path):
        raise BertdataError(f"{path}: no such file")
    try:
        return h5py.File(path, "r")
    except OSError as err:
        raise BertdataError(f"{path}: not a readable hdf5 file ({err})") from None


def _check_fields(path: str, f: h5py.File) -> None:
    missing = [name for name in FIELDS if name not in f]
    if missing:
        raise BertdataError(f"{path}: not a BERT shard (missing dataset {', '.join(missing)})")


def part_info(path: str | os.PathLike) -> PartInfo:
    with _open(path) as f:
        _check_fields(os.fspath(path), f)
        n, seq = f["input_ids"].shape
        return PartInfo(os.fspath(path), n, seq, f["masked_lm_positions"].shape[1], file_attrs(f))


def file_attrs(f: h5py.File) -> dict[str, Any]:
    """The generation parameters a shard records (none for the reference's shards)."""
    attrs = {k: _plain(v) for k, v in f.attrs.items() if k != ATTRS_KEY}
    if ATTRS_KEY in f.attrs:
        try:
            recorded = load_json(_plain(f.attrs[ATTRS_KEY]))
        except (ValueError, TypeError):
            raise BertdataError(f"{f.filename}: attribute {ATTRS_KEY!r} is not valid JSON") from None
        if not isinstance(recorded, dict):
            raise BertdataError(f"{f.filename}: attribute {ATTRS_KEY!r} is not a JSON object")
        attrs.update(recorded)
    return attrs


def _plain(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.decode("utf-8")
    if isinstance(value, np.generic):
        return value.item()
    return value


def shard_attrs(path: str | os.PathLike) -> dict[str, Any]:
    return part_info(path).attrs


def read_shard(path: str | os.PathLike, start: int = 0, stop: int | None = None) -> dict[str, np.ndarray]:
    """The six arrays (or rows start:stop of each) as numpy arrays in their stored dtypes."""
    with _open(path) as f:
        _check_fields(os.fspath(path), f)
        return {name: f[name][start:stop] for name in FIELDS}


@dataclass(frozen=True)
class Instance:
    input_ids: np.ndarray
    input_mask: np.ndarray
    segment_ids: np.ndarray
    masked_lm_positions: np.ndarray
    masked_lm_ids: np.ndarray
    next_sentence_label: int

    @property
    def num_masked(self) -> int:
        # Position 0 is [CLS], never masked, so the first 0 ends the list.
        nonzero = self.masked_lm_positions != 0
        return int(np.argmin(nonzero)) if not nonzero.all() else len(nonzero)


def iter_instances(path: str | os.PathLike, batch_size: int = 4096) -> Iterator[Instance]:
    n = part_info(path).num_instances
    for start in range(0, n, batch_size):
        batch = read_shard(path, start, start + batch_size)
        for i in range(len(batch["input_ids"])):
            yield Instance(
                batch["input_ids"][i], batch["input_mask"][i], batch["segment_ids"][i],
                batch["masked_lm_positions"][i], batch["masked_lm_ids"][i],
                int(batch["next_sentence_labels"][i]),
            )


def decode_instance(instance: Instance, tokens: tuple[str, ...] | list[str]) -> str:
    """Readable text: WordPieces joined, segment B after `||`, each prediction shown as
    `[shown→original]` (shown is [MASK], a random token, or the original kept)."""
    def word(token_id: int) -> str:
        return tokens[token_id] if token_id < len(tokens) else f"<{token_id}>"

    length = int(instance.input_mask.sum())
    count = instance.num_masked
    originals = {pos: word(i) for pos, i in zip(instance.masked_lm_positions[:count].tolist(),
                                                instance.masked_lm_ids[:count].tolist())}
    return decode_words([word(int(i)) for i in instance.input_ids[:length]], originals)


def decode_words(words: list[str], originals: Mapping[int, str]) -> str:
    """`words` joined as text, ## pieces glued on, the word at each position in `originals`
    shown as `[shown→original]`."""
    out: list[str] = []
    for pos, shown in enumerate(words):
        if pos in originals:
            shown = f"[{shown}→{originals[pos]}]"
        if shown.startswith("##") and out:
            out[-1] += shown[2:]
        else:
            out.append(shown)
    return " ".join(out)


# --- Chunk-aware slice access, for tools that stream shards larger than memory (`bertdata shard`) ---

def chunk_rows(writer: ShardWriter) -> dict[str, int]:
    """Rows per hdf5 chunk of each dataset `writer` is filling. A `write` that ends inside a chunk
    leaves it in HDF5's chunk cache; once evicted it is compressed, and the next write must read,
    decompress and recompress it -- so slice writers should write whole chunk rows."""
    return {name: (writer._datasets[name].chunks or (max(writer._datasets[name].shape[0], 1),))[0]
            for name in FIELDS}


def iter_slices(path: str | os.PathLike, rows: int) -> Iterator[tuple[int, dict[str, np.ndarray]]]:
    """(start, the six arrays of rows start:start+rows), through a whole shard in order, from one open
    file. Each dataset's chunk cache holds one row of chunks, so a chunk cut by a slice boundary is
    decompressed once, not once per slice (as with repeated `read_shard` calls), and memory stays
    at one chunk row per dataset whatever the file size."""
    info = part_info(path)
    with _open(path) as f:
        datasets = {}
        for name in FIELDS:
            meta = f[name]
            cache = 1 << 20
            if meta.chunks:
                per_row = -(-int(np.prod(meta.shape[1:], dtype=np.int64)) // int(np.prod(meta.chunks[1:], dtype=np.int64)))
                cache = max(cache, 2 * per_row * int(np.prod(meta.chunks)) * meta.dtype.itemsize)
            dapl = h5py.h5p.create(h5py.h5p.DATASET_ACCESS)
            # Slot count: a prime well above the chunks one cache can hold, as HDF5 advises.
            dapl.set_chunk_cache(100_003, cache, 1.0)
            datasets[name] = h5py.Dataset(h5py.h5d.open(f.id, name.encode(), dapl=dapl))
        for start in range(0, info.num_instances, rows):
            yield start, {name: datasets[name][start:start + rows] for name in FIELDS}
