"""`bertdata shard`: re-partition hdf5 shards into N balanced, globally shuffled parts.

An external two-pass shuffle keeps memory flat whatever the input size:

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

import contextlib
import dataclasses
import hashlib
import json
import multiprocessing
import os
import queue
import re
import shutil
import signal
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from bertdata import formats
from bertdata.formats import lddl
from bertdata.config import ShardConfig
from bertdata.errors import BertdataError, ValidationError
from bertdata.fsutil import owner_gone, this_process
from bertdata.formats import ShardInfo
from bertdata.formats.hdf5io import ShardWriter, chunk_rows
from bertdata.text.shards import shard_stem
from bertdata.manifest import MANIFEST, file_sha256, tool_record, write_manifest
from bertdata.instances.schema import DTYPES, FIELDS, record_dtype
from bertdata.formats.checks import check_batch
from bertdata.instances.vocab import Vocab, check_vocab, load_vocab, vocab_for_shard

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

# The temporary folder inside --output, and the file in it naming the process that owns it.
# No temporary name contains "train": NGC's loader takes every file whose name contains
# "training", PaddleNLP's every one containing "train", hidden ones too.
TEMP_PREFIX = ".bertdata-shard-"
# The writer named in this command's manifests: a folder with one is not searched for inputs.
SHARD_TOOL = "bertdata shard"
OWNER = "owner.json"
PART_PATTERN = re.compile(r"^(?P<name>.+)_(?P<split>training|test)_(?P<index>\d+)\.hdf5$")
# Attributes that describe one part, not the generation settings, so they never carry over.
PART_ATTRS = ("shard_seed", "part_index", "num_parts")


def _slice_rows(dtype: np.dtype) -> int:
    return max(1, SLICE_BYTES // dtype.itemsize)


# ---------------------------------------------------------------- inputs

def find_inputs(paths: Iterable[str], split: str, output: str | os.PathLike) -> tuple[list[str], list[str]]:
    """The input units (`bertdata.formats.find`), sorted by absolute path with duplicates dropped,
    and notes on what was left out. Units found in a folder are taken when their name has
    `_<split>_` (all for split "all"), skipping anything inside the output folder and inside
    folders an earlier `bertdata shard` wrote (their parts hold the instances of their inputs
    again); files and folders named explicitly are taken as they are."""
    out = Path(output).resolve()
    found: dict[str, str] = {}
    skipped = 0
    notes: list[str] = []
    for given in paths:
        units = formats.find([given])
        if any(fmt.claims(given) for fmt in formats.REGISTRY.values()) or os.path.isfile(given):
            if out in (resolved := Path(given).resolve()).parents or resolved == out:
                raise BertdataError(f"{given}: input is inside the output folder {output}; "
                                    "write the parts to another folder")
            found.setdefault(os.path.realpath(given), given)
            continue
        earlier = dict.fromkeys(shard_outputs_inside(Path(given)), 0)
        for unit in units:
            if unit.format.holds != formats.INSTANCES or (split != "all" and f"_{split}_" not in Path(unit.path).name):
                continue
            parents = Path(unit.path).resolve().parents
            if out in parents:
                skipped += 1
            elif inside := [folder for folder in earlier if folder in parents]:
                earlier[inside[0]] += 1
            else:
                found.setdefault(os.path.realpath(unit.path), unit.path)
        notes += [f"{folder}: the output of an earlier bertdata shard, {count} files not read as input "
                  "(name the folder itself to read it)" for folder, count in earlier.items() if count]
    if not found:
        which = "shard" if split == "all" else f"*_{split}_* shard"
        raise BertdataError(f"no {which} files found in {', '.join(paths)}"
                            + (f" ({skipped} inside the output folder are not read)" if skipped else "")
                            + ("" if split == "all" else " (--split all takes every shard file)"))
    return sorted(found.values(), key=os.path.abspath), notes


def shard_outputs_inside(folder: Path) -> list[Path]:
    """The folders below `folder` (resolved) whose manifest says `bertdata shard` wrote them."""
    found = []
    for manifest in folder.rglob(MANIFEST):
        if manifest.parent == folder:
            continue
        try:
            tool = json.loads(manifest.read_text()).get("tool")
        except (OSError, ValueError, AttributeError):  # not a manifest of ours: its folder is searched
            continue
        if isinstance(tool, dict) and tool.get("name") == SHARD_TOOL:
            found.append(manifest.parent.resolve())
    return found


def dataset_name(paths: Iterable[str]) -> str:
    """The name the inputs share before `_training_<i>` / `_test_<i>`, else "shards"."""
    names = {m["name"] if (m := PART_PATTERN.match(Path(p).name)) else None for p in paths}
    return names.pop() if len(names) == 1 and None not in names else "shards"


@contextlib.contextmanager
def _refuse_invalid() -> Iterator[None]:
    """An invalid input stops `shard` with exit code 2: it is bad input, not a finding of `inspect`."""
    try:
        yield
    except ValidationError as err:
        raise BertdataError(f"invalid input shard: {err}") from None


@dataclass(frozen=True)
class Input:
    """One input unit: its shape and attributes, its format, its parts and how to read them."""

    info: ShardInfo
    format: formats.InstanceFormat
    parts: tuple[ShardInfo, ...]
    reading: formats.Reading


def read_input(path: str, vocab: str | None = None) -> Input:
    """One input unit, checked as its format checks it without reading rows (other integer dtypes
    allowed: they are cast), before anything is written; its rows are checked as they are read.
    `vocab` reads a format whose rows are text (refused if the unit records another)."""
    with _refuse_invalid():
        fmt = formats.find([path])[0].format
        if fmt.holds != formats.INSTANCES:
            raise BertdataError(f"{path}: {fmt.name} files hold {fmt.holds}, not instances to re-partition")
        parts = fmt.parts(path)
        first = parts[0]
        info = ShardInfo(path, sum(p.num_instances for p in parts), first.max_seq_length,
                         first.max_predictions_per_seq, first.attrs)
        return Input(info, fmt, tuple(parts), fmt.reading(parts, vocab if fmt.rows_as_text else None, None))


def _input_slices(source: Input, rows: int) -> Iterator[tuple[int, dict[str, np.ndarray]]]:
    """(start, the six arrays of rows start..) through one input, in its order."""
    start = 0
    with _refuse_invalid():
        for part in source.parts:
            for arrays in source.format.slices(part, source.reading, rows):
                yield start, arrays
                start += len(arrays["input_ids"])


def input_vocab(infos: list[ShardInfo], given: str | None) -> Vocab:
    """The vocab the inputs were made with: `given` (refused if an input records another), else
    the one whose sha256 they record (see `vocab_for_shard`)."""
    if given is None:
        return vocab_for_shard(infos[0].attrs, infos[0].path)
    vocab = load_vocab(given)
    for info in infos:
        check_vocab(vocab, info.attrs, info.path)
    return vocab


def check_inputs(infos: list[ShardInfo]) -> dict[str, Any]:
    """Refuse inputs that cannot be mixed; return the generation attributes they all agree on."""
    first = infos[0]
    vocab_ref: ShardInfo | None = None
    for info in infos:
        for what in ("max_seq_length", "max_predictions_per_seq"):
            if getattr(info, what) != getattr(first, what):
                raise BertdataError(
                    f"{info.path}: {what} {getattr(info, what)} differs from {first.path} "
                    f"({getattr(first, what)}); only shards of one setting can be mixed")
        # Absent means token (InstanceConfig.record): mixed, the parts' common attrs would say token.
        scheme, first_scheme = (i.attrs.get("masking_scheme", "token") for i in (info, first))
        if scheme != first_scheme:
            raise BertdataError(f"{info.path}: masking scheme {scheme} differs from {first.path} ({first_scheme}); "
                                "only shards of one setting can be mixed")
        if "vocab_sha256" in info.attrs:
            if vocab_ref is None:
                vocab_ref = info
            elif info.attrs["vocab_sha256"] != vocab_ref.attrs["vocab_sha256"]:
                raise BertdataError(
                    f"{info.path}: vocab_sha256 {info.attrs['vocab_sha256']} differs from "
                    f"{vocab_ref.path} ({vocab_ref.attrs['vocab_sha256']}); the shards use different vocabs")
    common = {key: value for key, value in first.attrs.items()
              if key not in PART_ATTRS and isinstance(value, (bool, int, float, str))}
    for info in infos[1:]:
        common = {key: value for key, value in common.items()
                  if key in info.attrs and type(info.attrs[key]) is type(value) and info.attrs[key] == value}
    return common


def _as_field(path: str, name: str, values: np.ndarray) -> np.ndarray:
    """`values` in the reference dtype; other integer dtypes are accepted when every value fits."""
    target = DTYPES[name]
    if values.dtype == target:
        return values
    if not np.issubdtype(values.dtype, np.integer):
        raise BertdataError(f"{path}: dataset {name} has dtype {values.dtype}, expected {target}")
    limits = np.iinfo(target)
    if values.size and (values.min() < limits.min or values.max() > limits.max):
        raise BertdataError(f"{path}: dataset {name} has values outside {target}, "
                            f"the reference dtype ({values.min()}..{values.max()})")
    return values.astype(target)


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


class _Chooser:
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

class _Buckets:
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


def _scatter(sources: list[Input], chooser: _Chooser, buckets: _Buckets, dtype: np.dtype,
             ctrl_c: "_CtrlC") -> int:
    """Pass 1; returns the number of instances read."""
    rows = _slice_rows(dtype)
    offset = 0
    # disable=None: no bar when stderr is not a terminal (a log file, CI).
    with tqdm(total=int(sum(s.info.num_instances for s in sources)), unit="inst", desc="scatter",
              dynamic_ncols=True, disable=None) as bar:
        for source in sources:
            info = source.info
            try:
                for start, arrays in _input_slices(source, rows):
                    with _refuse_invalid():
                        check_batch(info.path, start, arrays, info.attrs.get("vocab_size"))
                    n = len(arrays["input_ids"])
                    picked, labels = chooser(offset + start, offset + start + n)
                    records = np.empty(len(picked), dtype=dtype)
                    everything = len(picked) == n  # then picked is 0..n-1: skip a gather
                    for name in FIELDS:
                        values = _as_field(info.path, name, arrays[name])
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
class _Plan:
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


def bucket_order(plan: _Plan, bucket: int) -> np.ndarray:
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


def gathered(plan: _Plan, start: int, stop: int) -> Iterator[np.ndarray]:
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


def write_part(plan: _Plan, part: int, progress: Callable[[int], None]) -> tuple[int, str, int]:
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


# Set in each worker process: where it reports rows done.
_progress_queue: Any = None


def _init_worker(progress_queue) -> None:
    global _progress_queue
    _progress_queue = progress_queue
    # Ctrl-C reaches the whole process group; the main process alone acts on it (by ending
    # the pool), instead of every worker printing its own traceback.
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _run_in_worker(task: tuple[Callable, _Plan, int]):
    func, plan, index = task
    return func(plan, index, _progress_queue.put)


class Terminated(BertdataError):
    """SIGTERM or SIGHUP, after the temporary files are removed; the exit code a shell gives a
    process the signal ends (143, 129)."""

    def __init__(self, signum: int) -> None:
        super().__init__(f"stopped by {signal.Signals(signum).name}; temporary files removed, no parts written")
        self.exit_code = 128 + signum


class _CtrlC:
    """Ctrl-C, SIGTERM and SIGHUP, raised where it is safe to stop.

    h5py runs Python weakref callbacks all the time, and a KeyboardInterrupt that lands in one
    is printed and dropped -- the run would go on to the end. So the signals only set a flag
    here, and `check()`, called between slices, raises. SIGTERM (a job scheduler, `kill`, a
    container stopping) and SIGHUP (a closed terminal) must clean up as Ctrl-C does: by default it ends the process at once,
    leaving up to 3.4x the input in the temporary folder.
    """

    def __init__(self) -> None:
        self.received: int | None = None
        self.previous: dict[int, Any] = {}

    def __enter__(self) -> "_CtrlC":
        # Only the main thread may set handlers; an ignored signal (SIGINT in a background job) stays ignored.
        if threading.current_thread() is threading.main_thread():
            for signum, default in ((signal.SIGINT, signal.default_int_handler), (signal.SIGTERM, signal.SIG_DFL),
                                    (signal.SIGHUP, signal.SIG_DFL)):
                if signal.getsignal(signum) is default:
                    self.previous[signum] = signal.signal(signum, self._press)
        return self

    def _press(self, signum, frame) -> None:
        self.received = signum

    def check(self) -> None:
        if self.received in (signal.SIGTERM, signal.SIGHUP):
            raise Terminated(self.received)
        if self.received is not None:
            raise KeyboardInterrupt

    def __exit__(self, *exc) -> None:
        for signum, handler in self.previous.items():
            signal.signal(signum, handler)


class _Workers:
    """Runs `func(plan, i, progress)` for many i, in this process or in a pool of processes.

    The pool is started before the scatter, so the workers' start-up (a fresh interpreter each:
    spawn, not fork, as the main process runs a hashing thread) overlaps it.
    """

    def __init__(self, workers: int, ctrl_c: "_CtrlC"):
        self.pool, self.ctrl_c = None, ctrl_c
        if workers > 1:
            ctx = multiprocessing.get_context("spawn")
            self.progress = ctx.Queue()
            self.pool = ctx.Pool(workers, _init_worker, (self.progress,))

    def run(self, func: Callable, plan: _Plan, indices: list[int], total: int, desc: str) -> list:
        """Results in completion order."""
        with tqdm(total=total, unit="inst", desc=desc, dynamic_ncols=True, disable=None) as bar:
            if self.pool is None or len(indices) == 1:
                def progress(rows: int) -> None:
                    bar.update(rows)
                    self.ctrl_c.check()

                return [func(plan, i, progress) for i in indices]
            results = self.pool.imap_unordered(_run_in_worker, [(func, plan, i) for i in indices])
            done = []
            while len(done) < len(indices):
                with contextlib.suppress(multiprocessing.TimeoutError):
                    done.append(results.next(timeout=0.2))
                with contextlib.suppress(queue.Empty):
                    while True:
                        bar.update(self.progress.get_nowait())
                self.ctrl_c.check()
            return done

    def close(self) -> None:
        # Workers must be gone before the temporary folder they write in is removed.
        if self.pool is not None:
            self.pool.terminate()
            self.pool.join()
            self.pool = None


# ---------------------------------------------------------------- the command

@dataclass
class ShardResult:
    output: str
    parts: list[str]
    instances_in: int
    instances_out: int
    bytes_in: int
    bytes_out: int
    seconds: float
    removed: list[str] = field(default_factory=list)
    # About temporary folders of earlier runs: removed (their run is gone) or left alone.
    notes: list[str] = field(default_factory=list)
    lddl: dict[str, Any] | None = None  # what lddl.write_phase wrote, for --format lddl

    def summary(self) -> str:
        mb_in, mb_out, secs = self.bytes_in / 1e6, self.bytes_out / 1e6, max(self.seconds, 1e-9)
        if self.lddl is not None:
            bins = len(self.lddl["bins"])
            return (f"{self.instances_in:,} instances in, {self.instances_out:,} out ({self.lddl['dropped']} dropped "
                    f"to balance the bins), {len(self.parts)} LDDL files ({self.lddl['num_shards']} per bin, "
                    f"{bins} bin{'s' if bins > 1 else ''}, {self.lddl['masking']} masking) in {self.output}, "
                    f"{self.seconds:.1f} s, {mb_in / secs:.1f} MB/s in, {mb_out / secs:.1f} MB/s parquet out")
        return (f"{self.instances_in:,} instances in, {self.instances_out:,} out, {len(self.parts)} parts "
                f"in {self.output}, {self.seconds:.1f} s, {mb_in / secs:.1f} MB/s hdf5 in, "
                f"{mb_out / secs:.1f} MB/s hdf5 out")


def existing_outputs(output: Path) -> list[Path]:
    """Earlier parts or manifest in `output` -- what a run would overwrite or make inconsistent."""
    if not output.is_dir():
        return []
    return sorted(p for p in output.iterdir() if p.name == MANIFEST or PART_PATTERN.match(p.name))


def _stale_parts(output: Path, name: str, split_word: str, keep: set[str]) -> list[Path]:
    """Parts of an earlier run that the new set does not replace: our name beyond the new N,
    and whatever the old manifest lists."""
    stale = {p for p in output.glob(f"{name}_{split_word}_*.hdf5")
             if PART_PATTERN.match(p.name) and p.name not in keep}
    manifest = output / MANIFEST
    if manifest.exists():
        with contextlib.suppress(ValueError, KeyError, TypeError):
            for entry in json.loads(manifest.read_text())["parts"]:
                part = output / Path(entry["file"]).name
                if part.name not in keep and part.exists():
                    stale.add(part)
    return sorted(stale)


def _gigabytes(size: int) -> str:
    return f"{size / 1e9:,.1f} GB" if size >= 1e8 else f"{size / 1e6:,.1f} MB"


def _check_free_space(output: Path, needed: int) -> None:
    """Refuse before writing anything when the temporary files cannot fit."""
    existing = next(p for p in (output, *output.parents) if p.exists())
    free = shutil.disk_usage(existing).free
    if needed > free:
        raise BertdataError(f"{output}: the temporary files need about {_gigabytes(needed)}, but only "
                            f"{_gigabytes(free)} is free there; free some space or pass another --output")


def _make_temp_folder(output: Path) -> str:
    try:
        output.mkdir(parents=True, exist_ok=True)
        tmp = tempfile.mkdtemp(prefix=TEMP_PREFIX, dir=output)
        Path(tmp, OWNER).write_text(json.dumps(this_process()))
    except OSError as err:
        raise BertdataError(f"{output}: cannot write the parts there ({err.strerror or err})") from None
    return tmp


def remove_dead_temp_folders(output: Path) -> list[str]:
    """Remove the temporary folders that runs killed outright (SIGKILL, power loss) left in
    `output`; never one whose run may still be going. Returns a line for each folder seen."""
    notes = []
    for folder in sorted(output.glob(TEMP_PREFIX + "*")) if output.is_dir() else []:
        try:
            owner = json.loads((folder / OWNER).read_text())
        except (OSError, ValueError):
            owner = None
        if owner_gone(owner):
            shutil.rmtree(folder, ignore_errors=True)
            notes.append(f"removed {folder}, left by a run that was killed (pid {owner['pid']})")
        elif isinstance(owner, dict):
            notes.append(f"left {folder} alone: it belongs to pid {owner.get('pid')} on host "
                         f"{owner.get('host')}, which may still be running")
        else:
            notes.append(f"left {folder} alone: it does not say which run made it; remove it "
                         "yourself if no `bertdata shard` is writing to this folder")
    return notes


def _digest(path: str) -> str:
    """A file's sha256; for an LDDL folder, the sha256 of its files' "sha256  name" lines, sorted by name."""
    if not os.path.isdir(path):
        with open(path, "rb") as f:
            return file_sha256(f)
    lines = []
    for entry in sorted(Path(path).iterdir()):
        if entry.is_file() and entry.name != MANIFEST:
            with open(entry, "rb") as f:
                lines.append(f"{file_sha256(f)}  {entry.name}\n")
    return hashlib.sha256("".join(lines).encode()).hexdigest()


def _size(path: str) -> int:
    if os.path.isdir(path):
        return sum(p.stat().st_size for p in Path(path).iterdir() if p.is_file())
    return os.path.getsize(path)


def _input_digests(paths: list[str], stop: threading.Event) -> list[str]:
    digests = []
    for path in paths:
        if stop.is_set():
            break
        digests.append(_digest(path))
    return digests


def repartition(config: ShardConfig) -> ShardResult:
    began = time.perf_counter()
    tool = tool_record(SHARD_TOOL)
    output = Path(config.output)
    if output.exists() and not output.is_dir():
        raise BertdataError(f"{output}: exists and is not a folder")
    to_lddl = config.format == "lddl"
    paths, input_notes = find_inputs(config.inputs, config.split, output)
    sources = [read_input(p, config.vocab) for p in paths]
    infos = [source.info for source in sources]
    attrs = check_inputs(infos)
    text_inputs = [source for source in sources if source.format.rows_as_text]
    if config.vocab is not None and not (to_lddl or text_inputs):
        raise BertdataError("--vocab is for LDDL output or input; hdf5 shards hold token ids")
    vocab = input_vocab(infos, config.vocab) if to_lddl or text_inputs else None
    masking = config.masking or "static"
    if any(s.reading.masking == "dynamic" for s in sources) and not (to_lddl and masking == "dynamic"):
        raise BertdataError("an LDDL input with dynamic masking holds no masks to write; "
                            "only --format lddl --masking dynamic can take it")
    total = sum(i.num_instances for i in infos)
    keep = sample_size(total, config.sample, config.max_instances)
    if config.parts > keep and not to_lddl:
        picked = "" if keep == total else f" ({'--sample' if config.sample else '--max-instances'} keeps {keep:,})"
        raise BertdataError(f"--parts {config.parts} is more than the {keep:,} instances to share out{picked}; "
                            "every part needs at least one")
    existing = [] if to_lddl else existing_outputs(output)  # write_phase refuses a non-empty folder itself
    if existing and not config.force:
        raise BertdataError(f"{output}: already holds parts or a manifest ({existing[0].name}, "
                            f"{len(existing)} in all); pass --force to replace them")
    name = config.name or dataset_name(paths)
    split_word = "test" if config.split == "test" else "training"
    part_files = [f"{shard_stem(name, split_word, i)}.hdf5" for i in range(config.parts)]

    first = infos[0]
    dtype = record_dtype(first.max_seq_length, first.max_predictions_per_seq)
    num_buckets = max(1, -(-keep * dtype.itemsize // BUCKET_BYTES))
    bytes_in = sum(_size(p) for p in paths)
    # An LDDL folder may hold no subfolder (its loader would read it too): the temporary folder
    # goes beside it.
    temp_parent = output.absolute().parent if to_lddl else output
    notes = input_notes + remove_dead_temp_folders(temp_parent)
    # Buckets hold the kept rows uncompressed; the parts, compressed about as well as the inputs,
    # are written beside them before either is removed.
    _check_free_space(temp_parent, keep * dtype.itemsize + bytes_in * keep // max(total, 1))
    tmp = _make_temp_folder(temp_parent)
    hasher, stop_hashing = ThreadPoolExecutor(1), threading.Event()
    workers: _Workers | None = None
    with _CtrlC() as ctrl_c:
        try:
            workers = _Workers(min(config.workers, config.parts), ctrl_c)
            # Hashing the inputs overlaps the scatter: hashlib releases the GIL on large blocks.
            input_digests = hasher.submit(_input_digests, paths, stop_hashing)
            buckets = _Buckets(tmp, num_buckets)
            tokens = vocab.tokens if vocab else None
            plan = _Plan(tuple(buckets.paths), (), (), (), first.max_seq_length, first.max_predictions_per_seq,
                         attrs, config.seed)
            options = {"split": config.split, "parts": config.parts, "seed": config.seed,
                       "sample": config.sample, "max_instances": config.max_instances}

            def inputs() -> list[dict[str, Any]]:
                return [{"path": info.path, "sha256": digest, "instances": info.num_instances,
                         "bytes": _size(info.path)} for info, digest in zip(infos, input_digests.result())]

            if to_lddl:
                if config.force:  # a crash midway must not leave the old manifest beside new files
                    with contextlib.suppress(FileNotFoundError):
                        (output / MANIFEST).unlink()
                written = _write_lddl(config, sources, plan, buckets, keep, tokens, output, ctrl_c)
                names = sorted(written["files"], key=lambda n: lddl.name_parts(n)[::-1])
                files = [{"file": n, "bin": lddl.name_parts(n)[1], "rows": written["files"][n],
                          "sha256": _digest(str(output / n)), "bytes": (output / n).stat().st_size} for n in names]
                write_manifest(output / MANIFEST, {
                    "format": "lddl",
                    "options": {**options, "masking": masking, "bin_size": config.bin_size, "ranks": config.ranks or 1},
                    "max_seq_length": first.max_seq_length,
                    "max_predictions_per_seq": first.max_predictions_per_seq,
                    "attrs": {**attrs, "vocab_sha256": vocab.sha256, "vocab_size": len(vocab)},
                    "buckets": num_buckets, "instances_in": total, "instances_sampled": keep,
                    "instances_out": written["rows"], "dropped": written["dropped"],
                    "bins": written["bins"], "inputs": inputs(), "files": files,
                }, tool)
                return ShardResult(str(output), [str(output / f["file"]) for f in files], total, written["rows"],
                                   bytes_in, written["bytes"], time.perf_counter() - began, notes=notes,
                                   lddl=written)
            _scatter(sources, _Chooser(total, keep, num_buckets, config.seed), buckets, dtype, ctrl_c)
            temp_parts = [f"part_{i:06d}.hdf5" for i in range(config.parts)]
            plan = dataclasses.replace(plan, bucket_sizes=tuple(int(s) for s in buckets.sizes),
                                       part_paths=tuple(os.path.join(tmp, f) for f in temp_parts),
                                       part_sizes=tuple(part_sizes(keep, config.parts)))
            written = sorted(workers.run(write_part, plan, list(range(config.parts)), keep, "write"))
            workers.close()
            manifest = {
                "options": {**options, "name": name},
                "max_seq_length": first.max_seq_length,
                "max_predictions_per_seq": first.max_predictions_per_seq,
                "attrs": attrs,
                "buckets": num_buckets,
                "instances_in": total,
                "instances_out": keep,
                "inputs": inputs(),
                "parts": [{"file": part_files[i], "instances": plan.part_sizes[i], "sha256": digest,
                           "bytes": size} for i, digest, size in written],
            }
            removed = _publish(Path(tmp), output, dict(zip(temp_parts, part_files)),
                               _stale_parts(output, name, split_word, set(part_files)), tool, manifest)
        finally:
            if workers is not None:
                workers.close()
            stop_hashing.set()
            hasher.shutdown(wait=True)
            shutil.rmtree(tmp, ignore_errors=True)
    return ShardResult(str(output), [str(output / f) for f in part_files], total, keep,
                       bytes_in, sum(size for _, _, size in written),
                       time.perf_counter() - began, [str(p) for p in removed], notes)


def _write_lddl(config: ShardConfig, sources: list[Input], plan: _Plan, buckets: _Buckets, keep: int,
                tokens: tuple[str, ...], output: Path, ctrl_c: _CtrlC) -> dict[str, Any]:
    """The kept rows in their global shuffled order, into an LDDL folder (see `lddl.write_phase`).

    The rows reach write_phase lazily, so it checks its options and the folder before the
    scatter reads a single input."""
    def rows() -> Iterator[dict[str, np.ndarray]]:
        _scatter(sources, _Chooser(sum(s.info.num_instances for s in sources), keep, len(buckets.paths), config.seed),
                 buckets, plan.dtype, ctrl_c)
        shuffled = dataclasses.replace(plan, bucket_sizes=tuple(int(s) for s in buckets.sizes))
        with tqdm(total=keep, unit="inst", desc="write", dynamic_ncols=True, disable=None) as bar:
            for records in gathered(shuffled, 0, keep):
                yield {name: records[name] for name in FIELDS}
                bar.update(len(records))
                ctrl_c.check()

    return lddl.write_phase(rows(), output, tokens, seq_len=plan.max_seq_length, num_shards=config.parts,
                            masking=config.masking or "static", bin_size=config.bin_size, ranks=config.ranks or 1,
                            force=config.force)


def _publish(tmp: Path, output: Path, part_files: dict[str, str], stale: list[Path], tool: dict,
             manifest: dict) -> list[Path]:
    """Move the complete parts into `output`, drop `stale` earlier parts, write the manifest.

    The old manifest goes first: a crash midway leaves a folder without a manifest, never one
    whose manifest does not match its parts."""
    with contextlib.suppress(FileNotFoundError):
        (output / MANIFEST).unlink()
    for temp_name, part_file in part_files.items():
        os.replace(tmp / temp_name, output / part_file)
    for path in stale:
        path.unlink()
    write_manifest(output / MANIFEST, manifest, tool)
    return stale
