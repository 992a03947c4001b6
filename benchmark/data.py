"""Input pipeline: pretraining batches from the hdf5 shards, as NGC's run_pretraining.py reads them.

Training reads every file in the data folder whose name contains `training` (the NGC rule),
so our shards and the reference's are read alike. The gzip chunks make random row access
slow, so -- like NGC -- a worker reads one whole file, shuffles its rows and cuts batches;
a batch may span two files so no rows are dropped at file ends. The stream is endless
(reshuffled each pass), which keeps every rank supplied for any number of steps, so DDP
ranks never wait on one that ran dry.

Work is handed out twice with the same rule: files to ranks, then a rank's files to its
loader workers -- whole files when there are enough, else every file's rows interleaved.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import h5py
import numpy as np
import torch
from torch.utils.data import DataLoader, IterableDataset, get_worker_info

from bertdata.errors import BertdataError, ValidationError
from bertdata.validate import check_batch, read_layout

FIELDS = ("input_ids", "input_mask", "segment_ids", "masked_lm_positions", "masked_lm_ids",
          "next_sentence_labels")


@dataclass(frozen=True)
class ShardInfo:
    path: str
    instances: int
    seq_len: int
    max_predictions: int


class Unit(NamedTuple):
    """Rows start, start + stride, ... of one file (which holds `rows` instances)."""

    path: str
    start: int
    stride: int
    rows: int

    @property
    def count(self) -> int:
        return len(range(self.start, self.rows, self.stride))


def find_training_shards(data_dir: str | os.PathLike) -> list[Path]:
    folder = Path(data_dir)
    if not folder.is_dir():
        raise BertdataError(f"{folder}: --data must be a folder of shards")
    files = sorted(p for p in folder.iterdir() if p.is_file() and "training" in p.name)
    if not files:
        raise BertdataError(f"{folder}: no shards to train on (no file whose name contains 'training')")
    return files


def default_workers() -> int:
    """Loader workers per rank: 4, or fewer on a machine with fewer cores (torch warns when
    workers outnumber the cores, and they would only compete with training for them)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return min(4, cores)


def read_shard_info(path: str | os.PathLike) -> ShardInfo:
    """The shard's layout, checked as `bertdata inspect` checks it (any integer dtype: rows are cast)."""
    try:
        layout = read_layout(os.fspath(path), exact_dtypes=False)
    except ValidationError as err:
        raise BertdataError(f"invalid shard: {err}") from None
    return ShardInfo(os.fspath(path), layout.instances, layout.max_seq_length, layout.max_predictions_per_seq)


def survey(data_dir: str | os.PathLike) -> list[ShardInfo]:
    """Shapes of every training shard; all must share one sequence length and prediction count."""
    infos = [read_shard_info(p) for p in find_training_shards(data_dir)]
    first = infos[0]
    for info in infos[1:]:
        if (info.seq_len, info.max_predictions) != (first.seq_len, first.max_predictions):
            raise BertdataError(
                f"{info.path}: seq length {info.seq_len} / {info.max_predictions} predictions differs "
                f"from {first.path} ({first.seq_len} / {first.max_predictions}); one phase per folder")
    return infos


def divide(units: list[Unit], parts: int, index: int) -> list[Unit]:
    """Share `index` of `parts`: whole units if there are enough, else every unit's rows interleaved."""
    if len(units) >= parts:
        return units[index::parts]
    return [Unit(u.path, u.start + index * u.stride, u.stride * parts, u.rows) for u in units]


def rank_units(infos: list[ShardInfo], rank: int, world: int) -> list[Unit]:
    units = divide([Unit(i.path, 0, 1, i.instances) for i in infos], world, rank)
    if sum(u.count for u in units) == 0:
        total = sum(i.instances for i in infos)
        raise BertdataError(f"{total} instances cannot feed {world} ranks: rank {rank} gets none")
    return units


def mlm_labels(positions: np.ndarray, ids: np.ndarray, seq_len: int) -> np.ndarray:
    """[N, L] labels: -1 except at the masked positions, whose list ends at the first 0."""
    valid = np.cumprod(positions != 0, axis=1).astype(bool)
    labels = np.full((positions.shape[0], seq_len), -1, dtype=np.int64)
    rows, cols = np.nonzero(valid)
    labels[rows, positions[rows, cols]] = ids[rows, cols]
    return labels


class InvalidShard(NamedTuple):
    """Yielded in place of a batch when a worker finds invalid rows: raised in a worker, the
    error would reach the trainer wrapped in a many-line traceback."""

    message: str


def next_batch(batches: Iterator) -> tuple[torch.Tensor, ...]:
    batch = next(batches)
    if isinstance(batch, InvalidShard):
        raise BertdataError(batch.message)
    return batch


def load_unit(unit: Unit, vocab_size: int | None = None) -> dict[str, np.ndarray]:
    """The unit's rows, checked (whole file, so errors name its row numbers) when `vocab_size`
    is given: an id past the embedding or a position past the sequence would stop training with
    an IndexError."""
    # Opened here, inside the worker: h5py handles must not cross a fork.
    with h5py.File(unit.path, "r") as f:
        rows = {k: f[k][()] for k in FIELDS}
    if vocab_size is not None:
        try:
            check_batch(unit.path, 0, rows, vocab_size)
        except ValidationError as err:
            raise BertdataError(f"invalid shard: {err}") from None
    return {k: v[unit.start::unit.stride] for k, v in rows.items()}


def to_batch(rows: dict[str, np.ndarray]) -> tuple[torch.Tensor, ...]:
    """(input_ids, segment_ids, input_mask, labels, nsp_labels) as int64, NGC's order."""
    seq_len = rows["input_ids"].shape[1]
    labels = mlm_labels(rows["masked_lm_positions"], rows["masked_lm_ids"], seq_len)
    return tuple(torch.from_numpy(np.ascontiguousarray(a, dtype=np.int64)) for a in (
        rows["input_ids"], rows["segment_ids"], rows["input_mask"], labels, rows["next_sentence_labels"]))


class ShardStream(IterableDataset):
    """Endless stream of batches from `units`, shuffled per file pass, split among loader workers."""

    def __init__(self, units: list[Unit], batch_size: int, seed: int, rank: int = 0,
                 vocab_size: int | None = None):
        self.units = units
        self.batch_size = batch_size
        self.seed = (seed, rank)
        self.vocab_size = vocab_size

    def __iter__(self) -> Iterator[tuple[torch.Tensor, ...]]:
        worker = get_worker_info()
        units = divide(self.units, worker.num_workers, worker.id) if worker else self.units
        if sum(u.count for u in units) == 0:
            return  # more workers than rows: this one has nothing; the others carry on
        rng = np.random.default_rng([*self.seed, worker.id if worker else 0])
        pending: dict[str, np.ndarray] | None = None
        checked: set[int] = set()
        while True:
            for i in rng.permutation(len(units)):
                try:
                    rows = load_unit(units[i], None if i in checked else self.vocab_size)
                except BertdataError as err:
                    yield InvalidShard(str(err))
                    return
                checked.add(i)
                order = rng.permutation(len(rows["input_ids"]))
                rows = {k: v[order] for k, v in rows.items()}
                if pending is not None:
                    rows = {k: np.concatenate([pending[k], v]) for k, v in rows.items()}
                n = len(rows["input_ids"])
                full = n - n % self.batch_size
                for start in range(0, full, self.batch_size):
                    yield to_batch({k: v[start:start + self.batch_size] for k, v in rows.items()})
                pending = {k: v[full:] for k, v in rows.items()}


def build_loader(infos: list[ShardInfo], batch_size: int, rank: int, world: int, workers: int,
                 seed: int, pin_memory: bool, vocab_size: int | None = None) -> DataLoader:
    """Batches for `rank`; with `vocab_size`, every file's rows are checked when first read."""
    stream = ShardStream(rank_units(infos, rank, world), batch_size, seed, rank, vocab_size)
    # Workers build whole batches (no per-sample collate); batch_size=None passes them through.
    return DataLoader(stream, batch_size=None, num_workers=workers, pin_memory=pin_memory,
                      persistent_workers=workers > 0, prefetch_factor=4 if workers else None)
