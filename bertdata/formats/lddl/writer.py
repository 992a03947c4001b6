"""Writing LDDL phase folders: rows spilled per bin, files planned for LDDL's balance rule, each
file written on its own, atomically."""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from bertdata.errors import BertdataError
from bertdata.formats.lddl.codec import rows_from_arrays
from bertdata.formats.lddl.layout import (
    BIN_FIELD,
    COMPRESSION,
    DICTIONARY_COLUMNS,
    NUM_SAMPLES_JSON,
    ROW_GROUP_ROWS,
    bin_of,
    file_name,
    loader_visible,
    schema_for,
)
from bertdata.fsutil import atomic_path, temp_basename


def parquet_writer(path: Path, schema: pa.Schema) -> pq.ParquetWriter:
    """A writer of LDDL files as `write_phase` makes them (compression, dictionaries, statistics)."""
    small = [name for name in DICTIONARY_COLUMNS if name in schema.names]
    return pq.ParquetWriter(path, schema, compression=COMPRESSION, use_dictionary=small,
                            write_statistics=small)


def _prepare_folder(out_dir: Path, force: bool) -> None:
    if out_dir.exists() and not out_dir.is_dir():
        raise BertdataError(f"{out_dir}: exists and is not a folder")
    if not out_dir.parent.is_dir():
        raise BertdataError(f"{out_dir}: parent folder {out_dir.parent} does not exist")
    out_dir.mkdir(exist_ok=True)
    entries = sorted(out_dir.iterdir())
    if entries and not force:
        raise BertdataError(f"{out_dir}: folder is not empty; pass --force to replace the parquet files in it")
    for entry in entries:
        if entry.is_dir():
            # The loader walks subfolders too: their parquet files would join this phase.
            raise BertdataError(f"{entry}: a subfolder in an LDDL phase folder; the loader would read it too")
        if loader_visible(entry.name) or entry.name == NUM_SAMPLES_JSON:
            entry.unlink()


class _RowStream:
    """Rows of record batches handed out in exact counts, one row group's worth at a time."""

    def __init__(self, batches: Iterator[pa.RecordBatch]):
        self._batches = batches
        self._pending: list[pa.RecordBatch] = []
        self._pending_rows = 0

    def take(self, count: int) -> pa.Table:
        while self._pending_rows < count:
            batch = next(self._batches)
            self._pending.append(batch)
            self._pending_rows += batch.num_rows
        table = pa.Table.from_batches(self._pending)
        rest = table.slice(count)
        self._pending = rest.to_batches()
        self._pending_rows = rest.num_rows
        return table.slice(0, count).combine_chunks()


def balanced_sizes(rows: int, num_files: int) -> tuple[list[int], int]:
    """File sizes for one bin as LDDL's loader demands (largest = smallest + 1), and how many
    rows must go for that: with `rows` a multiple of `num_files` every file would be equal,
    which the loader refuses, so the last row is dropped."""
    dropped = 1 if rows % num_files == 0 else 0
    q, r = divmod(rows - dropped, num_files)
    return [q + 1] * r + [q] * (num_files - r), dropped


def check_options(where: str, *, seq_len: int, num_shards: int, bin_size: int | None, ranks: int) -> int:
    """Refuse options the loader cannot use, naming `where`; returns the number of bins."""
    if num_shards < 2:
        raise BertdataError(f"{where}: LDDL needs at least 2 files per bin (its loader wants the largest "
                            f"file one row longer than the smallest), not --num-shards {num_shards}")
    if ranks < 1 or num_shards % ranks:
        raise BertdataError(f"{where}: --num-shards {num_shards} does not divide by {ranks} ranks x workers; "
                            "LDDL's loader gives every rank and worker the same number of files")
    if not 0 < seq_len <= np.iinfo(np.uint16).max:
        raise BertdataError(f"{where}: sequence length {seq_len} does not fit LDDL's uint16 num_tokens")
    if bin_size is not None and not 0 < bin_size <= seq_len:
        raise BertdataError(f"{where}: bin size {bin_size} must be between 1 and the sequence length {seq_len}")
    return 1 if bin_size is None else seq_len // bin_size


# A phase is written in three steps, so that many workers can share it: rows are spilled per bin
# in input order ("runs": one per bin for `write_phase`, one per bin and text shard in a build),
# the runs' counts fix every file's rows (`plan_files`), and each file is then written on its own
# (`write_file`). A file's rows are known only once a whole bin is counted: that is the reason.

@dataclass(frozen=True)
class Run:
    """Rows of one bin (0 when unbinned), spilled in input order to a parquet file at `path`."""

    path: str
    bin: int
    rows: int


@dataclass(frozen=True)
class FilePlan:
    """One output file: its name, bin (None unbinned), and its rows as (run path, first row,
    row count) pieces, in order."""

    name: str
    bin: int | None
    pieces: tuple[tuple[str, int, int], ...]

    @property
    def rows(self) -> int:
        return sum(count for _path, _start, count in self.pieces)


def spill_runs(batches: Iterable[Mapping[str, np.ndarray]], tokens: Sequence[str], run_path: Callable[[int], str],
               *, seq_len: int, masking: str, bin_size: int | None, where: str) -> list[Run]:
    """Instances (batches of the six hdf5 arrays) -> rows spilled per bin to `run_path(bin)`,
    in input order; the runs of the bins that got rows, by bin."""
    writers: dict[int, pq.ParquetWriter] = {}
    rows: dict[int, int] = {}
    try:
        for index, batch in enumerate(batches):
            width = np.asarray(batch["input_ids"]).shape[1]
            if width != seq_len:
                raise BertdataError(f"{where}: input batch {index} has sequence length {width}, not {seq_len}")
            table = rows_from_arrays(batch, tokens, masking, source=f"input batch {index}")
            if bin_size is None:
                parts = {0: table}
            else:
                bins = bin_of(table.column("num_tokens").to_numpy(), seq_len, bin_size)
                parts = {int(b): table.filter(pa.array(bins == b)).append_column(
                    BIN_FIELD, pa.array(np.full(int((bins == b).sum()), b, np.int64))) for b in np.unique(bins)}
            for b, part in parts.items():
                if b not in writers:
                    writers[b] = pq.ParquetWriter(run_path(b), part.schema, compression="lz4")
                writers[b].write_table(part)
                rows[b] = rows.get(b, 0) + part.num_rows
    finally:
        for writer in writers.values():
            writer.close()
    return [Run(run_path(b), b, rows[b]) for b in sorted(rows)]


def plan_files(runs: Sequence[Run], *, num_bins: int, bin_size: int | None, num_shards: int,
               where: str) -> tuple[list[FilePlan], list[dict[str, Any]]]:
    """Cut each bin's runs (concatenated in the order given) into `num_shards` contiguous files
    of the sizes the loader demands. Returns the files and, per bin, {"bin", "rows_in", "rows",
    "dropped", "dropped_row" (the dropped row's index among its bin's rows, or None),
    "min_rows", "max_rows"}."""
    binned = bin_size is not None
    by_bin: dict[int, list[Run]] = {b: [] for b in range(num_bins)}
    for run in runs:
        by_bin[run.bin].append(run)
    rows_in = {b: sum(r.rows for r in bin_runs) for b, bin_runs in by_bin.items()}
    if not any(rows_in.values()):
        raise BertdataError(f"{where}: no instances to write")
    empty = [b for b in range(num_bins) if not rows_in[b]]
    if empty:
        # The loader refuses a bin of empty files, and would mis-number bins after a gap;
        # NGC's launch script also expects all seq_len // bin_size bins.
        raise BertdataError(f"{where}: bin {empty[0]} (num_tokens {empty[0] * bin_size + 1}-"
                            f"{(empty[0] + 1) * bin_size}) has no instances; every bin needs one, "
                            "so use a larger --bin-size")
    plans: list[FilePlan] = []
    summary = []
    for b in range(num_bins):
        sizes, dropped = balanced_sizes(rows_in[b], num_shards)
        if not min(sizes):  # a rank or loader worker given only empty files would have nothing to read
            what = f"bin {b} (num_tokens {b * bin_size + 1}-{(b + 1) * bin_size})" if binned else "the phase"
            raise BertdataError(f"{where}: {what} has {rows_in[b]} instances, too few for {num_shards} files of "
                                "at least one row each (the largest one row longer than the smallest); choose "
                                "fewer files per bin")
        pieces = [(r.path, 0, r.rows) for r in by_bin[b] if r.rows]
        for shard, size in enumerate(sizes):
            taken: list[tuple[str, int, int]] = []
            while size:
                path, start, count = pieces[0]
                step = min(size, count)
                taken.append((path, start, step))
                size -= step
                pieces[0] = (path, start + step, count - step)
                if step == count:
                    pieces.pop(0)
            plans.append(FilePlan(file_name(shard, b if binned else None), b if binned else None, tuple(taken)))
        summary.append({"bin": b if binned else None, "rows_in": rows_in[b], "rows": rows_in[b] - dropped,
                        "dropped": dropped, "dropped_row": rows_in[b] - 1 if dropped else None,
                        "min_rows": min(sizes), "max_rows": max(sizes)})
    return plans, summary


def _piece_batches(path: str, start: int, count: int) -> Iterator[pa.RecordBatch]:
    """Rows start:start+count of a run, reading only the row groups that hold them."""
    meta = pq.ParquetFile(path)
    groups, offset, first = [], 0, 0
    for g in range(meta.num_row_groups):
        n = meta.metadata.row_group(g).num_rows
        if first + n > start and first < start + count:
            if not groups:
                offset = start - first
            groups.append(g)
        first += n
    for batch in meta.iter_batches(batch_size=ROW_GROUP_ROWS, row_groups=groups):
        if offset >= batch.num_rows:
            offset -= batch.num_rows
            continue
        batch = batch.slice(offset, count)
        offset = 0
        count -= batch.num_rows
        yield batch
        if not count:
            return


def write_file(plan: FilePlan, path: str | os.PathLike, schema: pa.Schema) -> int:
    """Write one planned file atomically (row groups of ROW_GROUP_ROWS, whatever the pieces, so
    the same rows give the same bytes); returns its size in bytes."""
    stream = _RowStream(batch for piece in plan.pieces for batch in _piece_batches(*piece))
    rows = plan.rows
    with atomic_path(Path(path)) as tmp:
        with contextlib.closing(parquet_writer(tmp, schema)) as writer:
            for start in range(0, rows, ROW_GROUP_ROWS):
                writer.write_table(stream.take(min(ROW_GROUP_ROWS, rows - start)), row_group_size=ROW_GROUP_ROWS)
    return Path(path).stat().st_size


def num_samples_json(files: Mapping[str, int]) -> bytes:
    """The `.num_samples.json` (file name -> rows) that spares the loader counting every file."""
    return (json.dumps(dict(files), sort_keys=True) + "\n").encode()


def write_phase(batches: Iterable[Mapping[str, np.ndarray]], out_dir: str | os.PathLike,
                tokens: Sequence[str], *, seq_len: int, num_shards: int, masking: str,
                bin_size: int | None = None, ranks: int = 1, force: bool = False) -> dict[str, Any]:
    """Write one phase's instances (batches of the six hdf5 arrays, e.g. from
    `hdf5io.iter_slices`) as an LDDL folder and return what was written.

    Each bin gets `num_shards` files, contiguous runs of its rows in input order, sized as the
    loader demands; `num_shards` must divide by `ranks` (training ranks x loader workers per
    rank). Memory stays at a few row groups: rows are spilled per bin to hidden temporary files
    first. The same rows give the same bytes (for one pyarrow version, which parquet records).

    Returns {"files": {name: rows}, "bins": (see `plan_files`), "rows_in", "rows", "dropped",
    "bytes", and the options}."""
    out_dir = Path(out_dir)
    num_bins = check_options(str(out_dir), seq_len=seq_len, num_shards=num_shards, bin_size=bin_size, ranks=ranks)
    schema = schema_for(masking, binned=bin_size is not None)
    _prepare_folder(out_dir, force)
    spills = {b: str(out_dir / temp_basename()) for b in range(num_bins)}
    files: dict[str, int] = {}
    try:
        runs = spill_runs(batches, tokens, spills.__getitem__, seq_len=seq_len, masking=masking,
                          bin_size=bin_size, where=str(out_dir))
        plans, bins = plan_files(runs, num_bins=num_bins, bin_size=bin_size, num_shards=num_shards,
                                 where=str(out_dir))
        size = 0
        for plan in plans:
            size += write_file(plan, out_dir / plan.name, schema)
            files[plan.name] = plan.rows
        with atomic_path(out_dir / NUM_SAMPLES_JSON) as tmp:
            tmp.write_bytes(num_samples_json(files))
    except BaseException:
        for name in files:
            with contextlib.suppress(FileNotFoundError):
                (out_dir / name).unlink()
        raise
    finally:
        for spill in spills.values():
            with contextlib.suppress(FileNotFoundError):
                os.unlink(spill)
    return {
        "path": str(out_dir), "masking": masking, "seq_len": seq_len, "bin_size": bin_size,
        "num_shards": num_shards, "ranks": ranks, "bins": bins, "files": files,
        "rows_in": sum(b["rows_in"] for b in bins), "rows": sum(files.values()),
        "dropped": sum(b["dropped"] for b in bins), "bytes": size,
    }
