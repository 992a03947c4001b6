"""The reference's hdf5 layout as a format: one `<stem>.hdf5` of six datasets per text shard.

The instance stage writes a shard's files through the per-shard file contract below
(`file_names`, `write`, `info`, `read`), which every `PER_SHARD` format follows:

- `file_names(stem, split, index)`: the shard's files, relative to its phase folder; one or
  more, distinct for distinct shards. The text shard's stem is `<dataset>_<split>_<index>`.
- `write(paths, instances, attrs)`: the files at `paths` (one per file name, in order),
  parent folders made as needed. Each is written under a temporary name in its final folder
  and renamed when complete, so a file under its final name is whole, and a shard is whole
  once all its files are. Temporary names are hidden, never contain "train" and have no
  extension containing ".parquet": NGC's loader takes every file whose name contains
  "training", PaddleNLP's every one containing "train", LDDL's every one whose extension
  contains ".parquet". `attrs` (JSON values: how the shard was made, its statistics) are
  recorded in the files. The same instances and attrs give the same bytes.
- `info(paths)`: a `PartInfo` without reading rows: enough to decide a shard can be reused.
- `read(paths)`: the six arrays of `schema` in their dtypes, in slices, in row order.

The codec and writer are `hdf5io`; the checks `inspect` runs are `checks`.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import h5py
import numpy as np

from bertdata.config import MASKING_SCHEMES, InstanceConfig
from bertdata.errors import BertdataError, ValidationError
from bertdata.formats.checks import ShardStats, read_layout, validate_shard
from bertdata.formats.contract import INSTANCES, PER_SHARD, PathLike, Reading, Report, PartInfo, hidden
from bertdata.formats.hdf5io import LAYOUT, WRITE_ORDER, ShardWriter, chunk_rows, decode_instance, iter_instances, iter_slices, part_info
from bertdata.formats.report import NSP_MIN_INSTANCES, NSP_TOLERANCE, print_row, print_words
from bertdata.instances.schema import BY_NAME, FIELDS
from bertdata.manifest import RUN_KEY

if TYPE_CHECKING:
    from bertdata.instances.create import Instances

SUFFIX = ".hdf5"
# Rows per slice that `read` yields.
READ_ROWS = 8192
# Rows materialised per write: about this many bytes at a time, rounded to whole chunk rows
# so each chunk is compressed once, as in a single write.
WRITE_BLOCK_BYTES = 4 << 20


def write_instances(path: str | os.PathLike, instances: Instances,
                    attrs: Mapping[str, Any] | None = None, *, helper_thread: bool = True) -> None:
    """Write the six datasets atomically, building a few MB of rows at a time (`helper_thread`:
    see `ShardWriter`)."""
    n, seq, pred = len(instances), instances.max_seq_length, instances.max_predictions_per_seq
    with ShardWriter(path, n, seq, pred, attrs, helper_thread=helper_thread) as writer:
        chunks = chunk_rows(writer)
        for name in WRITE_ORDER if n else ():  # the datasets of an empty shard stay empty
            row_bytes = BY_NAME[name].row_bytes(seq, pred)
            block = chunks[name] * max(1, WRITE_BLOCK_BYTES // (chunks[name] * row_bytes))
            for start in range(0, n, block):
                writer.write(name, start, instances.array(name, start, start + block))


def _one(paths: Sequence[PathLike], fmt: str) -> str:
    if isinstance(paths, (str, os.PathLike)) or len(paths) != 1:
        raise ValueError(f"a {fmt} shard is one file: pass a sequence of one path, not {paths!r}")
    return os.fspath(paths[0])


def _make_parent(path: str) -> None:
    Path(path).parent.mkdir(parents=True, exist_ok=True)


@dataclass(frozen=True)
class Hdf5Shards:
    """The reference's layout: one `<stem>.hdf5` of six datasets (see `hdf5io`)."""

    name: ClassVar[str] = "hdf5"
    cut: ClassVar[str] = PER_SHARD
    holds: ClassVar[str] = INSTANCES
    # Bytes written per byte of clean text, by phase, at dupe factor 5 (scripts/perf_disk.py on the
    # fragment): what the build's disk check counts on.
    disk_per_text_byte: ClassVar[dict] = {1: 2.775, 2: 2.945}
    # The reference's shards come under any name: a file no other format claims is taken as one.
    takes_any_file: ClassVar[bool] = True
    rows_as_text: ClassVar[bool] = False
    layout: ClassVar[dict] = LAYOUT

    def summary(self, folder: str, manifest: dict) -> str:
        """The build's line for a phase folder it wrote, from the folder's manifest."""
        counts = manifest["counts"]
        reused = manifest[RUN_KEY].get("reused_shards", 0)
        return (f"{self.name}: {counts['instances']:,} instances "
                f"({100 * manifest['quality']['random_next_share']:.1f}% random next), {counts['tokens']:,} tokens "
                f"in {counts[f'{self.name}_shards']} shards" + (f" ({reused} reused)" if reused else "") + f" -> {folder}")

    # --- the per-shard files the build writes ---

    def folder(self, cfg: InstanceConfig, lowercase: bool = True) -> str:
        """The reference's name of a phase's folder, so NGC scripts find the data unchanged;
        whole-word masking adds a suffix, so token folders keep NGC's names and the two schemes
        never share a folder."""
        return (f"hdf5_lower_case_{int(lowercase)}_seq_len_{cfg.max_seq_length}"
                f"_max_pred_{cfg.max_predictions_per_seq}_masked_lm_prob_{cfg.masked_lm_prob}"
                f"_random_seed_{cfg.random_seed}_dupe_factor_{cfg.dupe_factor}"
                f"{'_whole_word_mask' if cfg.masking_scheme == 'whole-word' else ''}")

    def file_names(self, stem: str, split: str, index: int) -> tuple[str, ...]:
        return (f"{stem}{SUFFIX}",)

    def write(self, paths: Sequence[PathLike], instances: Instances, attrs: Mapping[str, Any], *,
              helper_thread: bool = True) -> None:
        path = _one(paths, self.name)
        _make_parent(path)
        write_instances(path, instances, attrs, helper_thread=helper_thread)

    def info(self, paths: Sequence[PathLike]) -> PartInfo:
        return part_info(_one(paths, self.name))

    def read(self, paths: Sequence[PathLike]) -> Iterator[dict[str, np.ndarray]]:
        path = _one(paths, self.name)
        try:
            for _start, arrays in iter_slices(path, READ_ROWS):
                yield arrays
        except OSError as err:  # a truncated file, a corrupt chunk
            raise BertdataError(f"{path}: unreadable data ({err})") from None

    def pattern(self) -> str:
        """The glob of a phase folder's shard files."""
        return f"*{SUFFIX}"

    # --- finding, reading and checking what is written ---

    def claims(self, path: str) -> bool:
        return os.path.isfile(path) and path.endswith(SUFFIX)

    def find(self, folder: str) -> list[str]:
        root = Path(folder)
        return sorted(str(p) for p in root.rglob(f"*{SUFFIX}") if not hidden(p, root))

    def training(self, units: list[str]) -> list[str]:
        """NGC's rule: a trainer given a folder reads every file whose name contains "training"."""
        return [u for u in units if "training" in Path(u).name]

    def parts(self, unit: str) -> list[PartInfo]:
        """The file, checked as `inspect` checks its layout (any integer dtype: rows are cast)."""
        layout = read_layout(unit, exact_dtypes=False)
        return [PartInfo(unit, layout.instances, layout.max_seq_length, layout.max_predictions_per_seq, layout.attrs)]

    def reading(self, parts: list[PartInfo], vocab_path: str | None, masking_scheme: str | None) -> Reading:
        where = os.path.dirname(parts[0].path)
        if vocab_path is not None:
            raise BertdataError(f"{where}: --vocab is for LDDL folders; hdf5 shards hold token ids")
        if masking_scheme is not None:
            raise BertdataError(f"{where}: --masking-scheme is for LDDL folders with dynamic masking; hdf5 "
                                "shards hold their masks")
        # Absent from a shard's attrs: token masking (InstanceConfig.record).
        return Reading(self.name, masking_scheme=parts[0].attrs.get("masking_scheme", MASKING_SCHEMES[0]))

    def load(self, part: PartInfo, reading: Reading) -> dict[str, np.ndarray]:
        # Opened here, inside a loader's worker: h5py handles must not cross a fork.
        with h5py.File(part.path, "r") as f:
            return {k: f[k][()] for k in FIELDS}

    def slices(self, part: PartInfo, reading: Reading, rows: int) -> Iterator[dict[str, np.ndarray]]:
        for _start, arrays in iter_slices(part.path, rows):
            yield arrays

    def inspect(self, units: list[str], report: Report) -> None:
        """Validate each file against the reference layout, print a row of statistics per file
        and totals per sequence length, and decode `report.show` instances."""
        from bertdata.instances.vocab import check_vocab, vocab_for_shard

        totals: dict[int, ShardStats] = {}  # by sequence length: phase 1 and 2 do not average together
        counts: dict[int, int] = {}
        report.out(f"{'instances':>10} {'seq':>4} {'real tok':>8} {'short':>6} {'masked':>6} {'random next':>11}  file")
        for path in units:
            try:
                attrs = read_layout(path).attrs
                if report.vocab is not None:
                    check_vocab(report.vocab, attrs, path)
                vocab = report.vocab or (vocab_for_shard(attrs, path) if report.show else None)
                if vocab is None and attrs.get("masking_scheme") == "whole-word":
                    try:
                        vocab = vocab_for_shard(attrs, path)
                    except BertdataError as err:
                        report.warnings.append(f"{err} (word figures left out)")
                stats = validate_shard(path, len(vocab) if vocab else None, vocab)
            except ValidationError as err:
                report.failures.append(str(err))
                report.out(f"{'INVALID':>10} {'':>4} {'':>8} {'':>6} {'':>6} {'':>11}  {path}")
                continue
            totals.setdefault(stats.max_seq_length, ShardStats("total")).add(stats)
            counts[stats.max_seq_length] = counts.get(stats.max_seq_length, 0) + 1
            print_row(report, stats, path)
            if vocab is not None:
                print_words(report, stats, attrs)
            share = stats.row()["random_next_share"]
            if stats.instances >= NSP_MIN_INSTANCES and abs(share - 0.5) > NSP_TOLERANCE:
                report.warnings.append(f"{path}: {share:.1%} random next, far from 50%: its text shard has too few "
                                       "documents (or one document) for next-sentence pairs")
            for i, inst in enumerate(itertools.islice(iter_instances(path), report.show)):
                label = "random next" if inst.next_sentence_label else "actual next"
                report.out(f"  #{i} ({label}): {decode_instance(inst, vocab.tokens)}")
        for seq, total in sorted(totals.items()):
            if len(units) > 1:
                print_row(report, total, f"total of {counts[seq]} valid file(s) with sequence length {seq}")


HDF5 = Hdf5Shards()
