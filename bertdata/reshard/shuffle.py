"""`bertdata shard`'s external two-pass shuffle, which keeps memory flat whatever the input size:

1. scatter -- inputs are read in slices, in sorted path order; every instance kept (all, or a
   uniform random subset) is appended to one of B bucket files (raw rows), chosen at random.
   The random choices are drawn per fixed block of the global instance index, so they depend
   on the inputs and the seed only, never on slice sizes, file boundaries or the worker count.
2. write -- each bucket (at most ~BUCKET_BYTES) has its own seeded permutation; the buckets
   in that order, one after another, are the global order: a uniform random permutation, since
   bucket membership is uniform random and each bucket's order is uniform. That order is cut
   into N consecutive ranges whose sizes differ by at most one, one part each; a part gathers
   its rows from the memory-mapped buckets it spans.

Parts are independent, so `workers` processes share them; each part is still written by one
process in one fixed sequence of writes, so the bytes do not depend on the worker count.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
from tqdm import tqdm

from bertdata.errors import BertdataError
from bertdata.formats.checks import check_batch
from bertdata.formats.hdf5io import ShardWriter, chunk_rows
from bertdata.instances.schema import DTYPES, FIELDS, record_dtype
from bertdata.manifest import file_sha256
from bertdata.reshard.inputs import Input, as_field, input_slices, refuse_invalid
from bertdata.reshard.workers import CtrlC

# Largest bucket we aim for: a part may map all of one bucket, so this bounds memory (per worker).
BUCKET_BYTES = 48 << 20
# Rows read, gathered or written at a time; small next to a bucket.
SLICE_BYTES = 4 << 20
# Scattered rows wait in memory until this much has gathered, so each bucket file gets one
# larger append per flush even when there are thousands of buckets.
FLUSH_BYTES = 16 << 20
# Rows per ShardWriter.write call: whole chunk rows adding up to about this much. It bounds
# the rows a part holds back per dataset while waiting for a chunk row to fill.
WRITE_BYTES = 1 << 20
# Random choices are drawn per block of this many consecutive instances of the global index.
BLOCK = 1 << 16
# Independent random streams derived from the seed.
_KEEP_STREAM, _BLOCK_STREAM, _BUCKET_STREAM = 1, 2, 3


def _slice_rows(dtype: np.dtype) -> int:
    return max(1, SLICE_BYTES // dtype.itemsize)


def bucket_count(instances: int, dtype: np.dtype) -> int:
    """Buckets enough that each holds at most about BUCKET_BYTES of `instances` rows."""
    return max(1, -(-instances * dtype.itemsize // BUCKET_BYTES))


# ---------------------------------------------------------------- random choices

def sample_size(total: int, sample: float | None, max_instances: int | None) -> int:
    if sample is not None:
        return int(round(sample * total))
    if max_instances is not None:
        return min(max_instances, total)
    return total


def part_sizes(instances: int, parts: int) -> list[int]:
    base, extra = divmod(instances, parts)
    return [base + (i < extra) for i in range(parts)]


class Chooser:
    """Which instances of the global index are kept and the bucket each goes to.

    Exactly `keep` of `total` instances are kept, a uniform random subset: per-block counts
    from a multivariate hypergeometric draw, then a uniform choice inside each block.
    """

    def __init__(self, total: int, keep: int, buckets: int, seed: int):
        self.seed, self.buckets = seed, buckets
        sizes = np.full(-(-total // BLOCK), BLOCK, dtype=np.int64)
        if len(sizes):
            sizes[-1] = total - BLOCK * (len(sizes) - 1)
        self.sizes = sizes
        self.counts = sizes if keep == total else \
            np.random.default_rng([seed, _KEEP_STREAM]).multivariate_hypergeometric(sizes, keep)
        self._cached: tuple[int, np.ndarray, np.ndarray] | None = None

    def _block(self, block: int) -> tuple[np.ndarray, np.ndarray]:
        if self._cached is None or self._cached[0] != block:
            rng = np.random.default_rng([self.seed, _BLOCK_STREAM, block])
            size, count = int(self.sizes[block]), int(self.counts[block])
            kept = np.arange(size) if count == size else np.sort(rng.choice(size, count, replace=False))
            # The smallest label type: numpy's stable argsort is a radix sort on 16-bit keys.
            label_type = np.uint16 if self.buckets <= 1 << 16 else np.int64
            self._cached = (block, kept, rng.integers(0, self.buckets, size=count, dtype=label_type))
        return self._cached[1], self._cached[2]

    def __call__(self, start: int, stop: int) -> tuple[np.ndarray, np.ndarray]:
        """(offsets into [start, stop) of the kept instances, their buckets)."""
        offsets, labels = [], []
        for block in range(start // BLOCK, (stop - 1) // BLOCK + 1):
            kept, buckets = self._block(block)
            base = block * BLOCK
            lo, hi = np.searchsorted(kept, [start - base, stop - base])
            offsets.append(kept[lo:hi] + (base - start))
            labels.append(buckets[lo:hi])
        return np.concatenate(offsets), np.concatenate(labels)


# ---------------------------------------------------------------- pass 1: scatter

class Buckets:
    """Bucket files that rows are appended to, in global-index order within each bucket."""

    def __init__(self, folder: str, count: int):
        self.paths = [os.path.join(folder, f"bucket_{b:06d}.bin") for b in range(count)]
        self.sizes = np.zeros(count, dtype=np.int64)
        self._pending: list[tuple[np.ndarray, np.ndarray]] = []
        self._pending_bytes = 0

    def add(self, records: np.ndarray, labels: np.ndarray) -> None:
        order = np.argsort(labels, kind="stable")
        counts = np.bincount(labels, minlength=len(self.paths))
        self._pending.append((records[order], np.concatenate(([0], np.cumsum(counts)))))
        self.sizes += counts
        self._pending_bytes += records.nbytes
        if self._pending_bytes >= FLUSH_BYTES:
            self.flush()

    def flush(self) -> None:
        for b, path in enumerate(self.paths):
            pieces = [records[ends[b]:ends[b + 1]] for records, ends in self._pending if ends[b + 1] > ends[b]]
            if pieces:
                with open(path, "ab") as f:
                    for piece in pieces:
                        piece.tofile(f)
        self._pending, self._pending_bytes = [], 0


def scatter(sources: list[Input], chooser: Chooser, buckets: Buckets, dtype: np.dtype,
            ctrl_c: CtrlC) -> int:
    """Pass 1; returns the number of instances read."""
    rows = _slice_rows(dtype)
    offset = 0
    # disable=None: no bar when stderr is not a terminal (a log file, CI).
    with tqdm(total=int(sum(s.info.num_instances for s in sources)), unit="inst", desc="scatter",
              dynamic_ncols=True, disable=None) as bar:
        for source in sources:
            info = source.info
            try:
                for start, arrays in input_slices(source, rows):
                    with refuse_invalid():
                        check_batch(info.path, start, arrays, info.attrs.get("vocab_size"))
                    n = len(arrays["input_ids"])
                    picked, labels = chooser(offset + start, offset + start + n)
                    records = np.empty(len(picked), dtype=dtype)
                    everything = len(picked) == n  # then picked is 0..n-1: skip a gather
                    for name in FIELDS:
                        values = as_field(info.path, name, arrays[name])
                        records[name] = values if everything else values[picked]
                    buckets.add(records, labels)
                    bar.update(n)
                    ctrl_c.check()
            except OSError as err:  # truncated file, corrupt chunk
                raise BertdataError(f"{info.path}: unreadable data ({err})") from None
            offset += info.num_instances
    buckets.flush()
    return offset


# ---------------------------------------------------------------- pass 2: shuffle and write parts

@dataclass(frozen=True)
class Plan:
    """All a worker needs for pass 2 (picklable)."""

    bucket_paths: tuple[str, ...]
    bucket_sizes: tuple[int, ...]
    part_paths: tuple[str, ...]
    part_sizes: tuple[int, ...]
    max_seq_length: int
    max_predictions_per_seq: int
    attrs: dict[str, Any]
    seed: int

    @property
    def dtype(self) -> np.dtype:
        return record_dtype(self.max_seq_length, self.max_predictions_per_seq)


def bucket_order(plan: Plan, bucket: int) -> np.ndarray:
    """The shuffled order of one bucket's rows: its own stream, so any worker can recompute it."""
    return np.random.default_rng([plan.seed, _BUCKET_STREAM, bucket]).permutation(plan.bucket_sizes[bucket])


class _ChunkAlignedWriter:
    """Feeds a ShardWriter whole chunk rows only (~WRITE_BYTES per call): those it compresses
    itself and stores as finished chunks, each compressed once, where a write ending inside a
    chunk would go through HDF5's chunk cache. Writes go out in order of the row where they end
    (ties in field order), a sequence fixed by the part's size and chunk shapes alone: the file's
    bytes do not depend on how the rows were sliced on their way in."""

    def __init__(self, writer: ShardWriter, num_instances: int, dtype: np.dtype):
        self.writer = writer
        self.rows = {}
        for name, rows in chunk_rows(writer).items():
            row_bytes = dtype[name].itemsize
            self.rows[name] = rows * max(1, WRITE_BYTES // (rows * row_bytes))
        self.total = num_instances
        self.received = 0
        self.buffers = {name: np.empty((0,), DTYPES[name]) for name in FIELDS}
        self.written = dict.fromkeys(FIELDS, 0)

    def add(self, records: np.ndarray) -> None:
        self.received += len(records)
        for name in FIELDS:
            self.buffers[name] = np.concatenate((self.buffers[name], records[name])) \
                if len(self.buffers[name]) else np.ascontiguousarray(records[name])
        writes = []
        for order, name in enumerate(FIELDS):
            end = self.written[name]
            while end < self.received and (end + self.rows[name] <= self.received or self.received == self.total):
                end = min(end + self.rows[name], self.total)
                writes.append((end, order, name))
        for end, _, name in sorted(writes):
            count = end - self.written[name]
            self.writer.write(name, self.written[name], self.buffers[name][:count])
            self.buffers[name] = self.buffers[name][count:]
            self.written[name] = end


def gathered(plan: Plan, start: int, stop: int) -> Iterator[np.ndarray]:
    """Rows start:stop of the global order (the shuffled buckets laid end to end), as slices of records.

    A bucket is memory-mapped, not read: rows are gathered in shuffled order straight from the
    page cache, and only the pages of the rows taken are touched (at most the bucket)."""
    rows = _slice_rows(plan.dtype)
    bucket_start = 0
    for bucket, (path, size) in enumerate(zip(plan.bucket_paths, plan.bucket_sizes)):
        lo, hi = max(start, bucket_start) - bucket_start, min(stop, bucket_start + size) - bucket_start
        if lo < hi:
            order = bucket_order(plan, bucket)
            records = np.memmap(path, dtype=plan.dtype, mode="r", shape=(size,))
            for first in range(lo, hi, rows):
                yield records[order[first:min(first + rows, hi)]]
            del records  # unmapped: its pages leave this process's memory
        bucket_start += size


def write_part(plan: Plan, part: int, progress: Callable[[int], None]) -> tuple[int, str, int]:
    """Write part `part`, rows start:stop of the global order; (part, sha256, bytes)."""
    start = sum(plan.part_sizes[:part])
    stop = start + plan.part_sizes[part]
    attrs = {**plan.attrs, "shard_seed": plan.seed, "part_index": part, "num_parts": len(plan.part_sizes)}
    with ShardWriter(plan.part_paths[part], stop - start, plan.max_seq_length,
                     plan.max_predictions_per_seq, attrs) as shard:
        writer = _ChunkAlignedWriter(shard, stop - start, plan.dtype)
        for records in gathered(plan, start, stop):
            writer.add(records)
            progress(len(records))
    with open(plan.part_paths[part], "rb") as f:
        digest = file_sha256(f)
    return part, digest, os.path.getsize(plan.part_paths[part])

