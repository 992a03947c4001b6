"""BERT pretraining data as LDDL parquet folders, the input of NVIDIA's current BERT recipe.

DeepLearningExamples' PyTorch BERT reads its data with `lddl.torch.get_bert_pretrain_data_loader`.
That loader takes every file under a folder whose last extension contains ".parquet":
`shard-<i>.parquet` unbinned, `shard-<i>.parquet_<bin>` binned by sequence length. Each row is
one instance: segments `A` and `B` as space-separated WordPieces (no [CLS]/[SEP]),
`is_random_next`, `num_tokens` (A + B + 3), and, for static masking, `masked_lm_positions` (an
`np.save`d uint16 array of positions in `[CLS] A [SEP] B [SEP]`) and `masked_lm_labels` (the
original tokens there). Without those two columns the loader masks each epoch anew, so A and B
then hold the original tokens.

The loader refuses a bin unless its file count divides by ranks x workers and its largest file
holds exactly one row more than its smallest; `write_phase` balances every bin that way.
"""


from __future__ import annotations

import itertools
import os
from dataclasses import dataclass
from collections.abc import Iterator
from typing import ClassVar

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from bertdata.config import MASKING_SCHEMES
from bertdata.errors import BertdataError, ValidationError
from bertdata.formats.contract import ACROSS_SHARDS, INSTANCES, Reading, Report, PartInfo
from bertdata.formats.lddl import check, codec, layout, writer
from bertdata.formats.lddl.check import read_folder, validate_folder
from bertdata.formats.lddl.codec import arrays_from_rows, file_arrays, row_words, rows_from_arrays
from bertdata.formats.lddl.layout import (BASE_SCHEMA, BIN_FIELD, COMPRESSION, DICTIONARY_COLUMNS, MASK_FIELDS,
                                         MASKINGS, NUM_SAMPLES_JSON, ROW_GROUP_ROWS, bin_of, file_name,
                                         folder_name,
                                         find_phase_folders, is_phase_folder, loader_visible, name_parts,
                                         phase_layout, phase_settings, read_manifest, schema_for)
from bertdata.formats.lddl.writer import (FilePlan, Run, balanced_sizes, check_options, num_samples_json,
                                         parquet_writer, plan_files, spill_runs, write_file, write_phase)
from bertdata.formats.report import NSP_MIN_INSTANCES, NSP_TOLERANCE, print_words

__all__ = ["BASE_SCHEMA", "BIN_FIELD", "COMPRESSION", "DICTIONARY_COLUMNS", "LDDL", "MASKINGS", "MASK_FIELDS",
           "NUM_SAMPLES_JSON", "ROW_GROUP_ROWS", "folder_name", "FilePlan", "LddlFolders", "Run", "arrays_from_rows",
           "balanced_sizes", "bin_of", "check", "check_options", "codec", "file_arrays", "file_name",
           "find_phase_folders", "is_phase_folder", "layout", "loader_visible", "name_parts", "num_samples_json",
           "parquet_writer", "phase_layout", "phase_settings", "plan_files", "read_folder", "read_manifest",
           "row_words", "rows_from_arrays", "schema_for", "spill_runs", "validate_folder", "write_file",
           "write_phase", "writer"]

@dataclass(frozen=True)
class LddlFolders:
    """LDDL phase folders: one unit per folder, its files cut across text shards and balanced for
    LDDL's loader, so the build writes them in a stage of their own."""

    name: ClassVar[str] = "lddl"
    cut: ClassVar[str] = ACROSS_SHARDS
    holds: ClassVar[str] = INSTANCES
    # Bytes written per byte of clean text, by phase, at dupe factor 5 (scripts/perf_disk.py on the
    # fragment): what the build's disk check counts on.
    disk_per_text_byte: ClassVar[dict] = {1: 4.981, 2: 5.051}
    takes_any_file: ClassVar[bool] = False
    rows_as_text: ClassVar[bool] = True

    def claims(self, path: str) -> bool:
        return is_phase_folder(path)

    def summary(self, folder: str, manifest: dict) -> str:
        """The build's line for a folder it wrote, from the folder's manifest."""
        counts, bins = manifest["counts"], len(manifest["bins"])
        return (f"{self.name}: {counts['instances']:,} training instances ({counts['dropped']} dropped to balance) in "
                f"{counts['lddl_files']} files ({bins} bin{'s' if bins > 1 else ''}, "
                f"{manifest['options']['lddl']['masking']} masking) -> {folder}")

    def find(self, folder: str) -> list[str]:
        return [str(p) for p in find_phase_folders(folder)]

    def training(self, units: list[str]) -> list[str]:
        return units  # NGC's recipe reads no held-out set from LDDL folders: all is training

    def parts(self, unit: str) -> list[PartInfo]:
        """The folder's files with their bins and rows, from the footers; the sequence length,
        predictions and generation attributes from the folder's manifest (the rows do not say)."""
        settings = phase_settings(unit)
        return [PartInfo(os.fspath(path), rows, settings["max_seq_length"], settings["max_predictions_per_seq"],
                          settings["attrs"], bin_id)
                for bin_id, files in phase_layout(unit)["bins"].items() for path, rows in files.items()]

    def reading(self, parts: list[PartInfo], vocab_path: str | None, masking_scheme: str | None) -> Reading:
        """Rows are text: the vocab the manifest records, or `vocab_path` (refused if another);
        masking as the files hold it; batches padded to their longest row, as LDDL's loader does."""
        from bertdata.instances.vocab import check_vocab, load_vocab, vocab_for_shard

        folder = os.path.dirname(parts[0].path)
        attrs = parts[0].attrs
        vocab = vocab_for_shard(attrs, folder) if vocab_path is None else load_vocab(vocab_path)
        if vocab_path is not None:
            check_vocab(vocab, attrs, folder)
        masking = phase_layout(folder)["masking"]
        recorded = attrs.get("masking_scheme", MASKING_SCHEMES[0])  # absent: token (InstanceConfig.record)
        if masking_scheme is not None and masking != "dynamic":
            raise BertdataError(f"{folder}: --masking-scheme is for LDDL folders with dynamic masking; this one "
                                f"holds its masks ({recorded})")
        return Reading(self.name, vocab, masking, masking_scheme or recorded, pad_to_longest=True)

    def load(self, part: PartInfo, reading: Reading) -> dict[str, np.ndarray]:
        return file_arrays(part.path, reading.vocab.tokens, part.max_seq_length, part.max_predictions_per_seq)

    def slices(self, part: PartInfo, reading: Reading, rows: int) -> Iterator[dict[str, np.ndarray]]:
        """Row group by row group: rows are text, so they are turned into arrays as they are read."""
        try:
            batches = pq.ParquetFile(part.path).iter_batches(batch_size=ROW_GROUP_ROWS)
            for batch in batches:
                yield arrays_from_rows(pa.Table.from_batches([batch]), reading.vocab.tokens, part.max_seq_length,
                                       part.max_predictions_per_seq, source=part.path)
        except (pa.ArrowException, OSError) as err:
            raise ValidationError(f"{part.path}: not a readable parquet file ({err})") from None

    def inspect(self, units: list[str], report: Report) -> None:
        for folder in units:
            _inspect_folder(folder, report)


def _inspect_folder(folder: str, report: Report) -> None:
    """Validate one folder as LDDL's loader will use it, print its statistics per bin and
    `report.show` rows."""
    from bertdata.formats.hdf5io import decode_words
    from bertdata.instances.vocab import check_vocab, vocab_for_shard

    report.out(f"LDDL folder {folder}")
    try:
        manifest = read_manifest(folder) or {}
    except BertdataError as err:
        manifest = {}
        report.warnings.append(f"{err}; checked without it")
    attrs = manifest.get("attrs", {})
    vocab = report.vocab
    if vocab is not None:
        check_vocab(vocab, attrs, folder)
    elif attrs.get("vocab_sha256"):
        try:
            vocab = vocab_for_shard(attrs, folder)
        except BertdataError as err:
            report.warnings.append(f"{err} (tokens not checked against a vocab)")
    try:
        found = validate_folder(folder, ranks=report.ranks, bin_size=manifest.get("options", {}).get("bin_size"),
                                seq_len=manifest.get("max_seq_length"), tokens=vocab.tokens if vocab else None)
    except ValidationError as err:
        report.failures.append(str(err))
        report.out(f"{'INVALID':>10}")
        return
    report.out(f"{'bin':>10} {'files':>6} {'rows':>10} {'mean tok':>8} {'masked':>6} {'random next':>11}  "
               f"({found['masking']} masking)")
    total = {"files": 0, "rows": 0, "tokens": 0, "masked": 0, "random_next": 0}
    for bin_id, sizes in found["bins"].items():
        row = {"files": len(sizes), "rows": sum(sizes), **found["stats"][bin_id]}
        _print_bin(report, "-" if bin_id is None else bin_id, row)
        total = {k: total[k] + row[k] for k in total}
    if len(found["bins"]) > 1:
        _print_bin(report, "total", total)
    share = total["random_next"] / max(total["rows"], 1)
    if total["rows"] >= NSP_MIN_INSTANCES and abs(share - 0.5) > NSP_TOLERANCE:
        report.warnings.append(f"{folder}: {share:.1%} random next, far from 50%: its rows came from too few documents")
    if vocab is not None and found["masking"] == "static" and "max_seq_length" in manifest:
        print_words(report, _folder_words(folder, manifest, vocab), manifest.get("options", {}).get("instances", {}))
    if report.show:
        rows = (row for _path, _bin, batch in read_folder(folder)
                for row in pa.Table.from_batches([batch]).to_pylist())
        for i, row in enumerate(itertools.islice(rows, report.show)):
            label = "random next" if row["is_random_next"] else "actual next"
            report.out(f"  #{i} ({label}): {decode_words(*row_words(row))}")


def _folder_words(folder: str, manifest: dict, vocab):
    """A folder's (valid, statically masked) rows counted as `checks.word_masking` counts."""
    from bertdata.formats.checks import ShardStats, word_masking

    stats = ShardStats(str(folder))
    for path in (path for files in phase_layout(folder)["bins"].values() for path in files):
        arrays = file_arrays(path, vocab.tokens, manifest["max_seq_length"], manifest["max_predictions_per_seq"])
        stats.instances += len(arrays["input_ids"])
        stats.masked += int(np.count_nonzero(np.cumprod(arrays["masked_lm_positions"] != 0, axis=1)))
        word_masking(arrays, vocab, stats)
    return stats


def _print_bin(report: Report, label, row: dict) -> None:
    rows = max(row["rows"], 1)
    report.out(f"{label:>10} {row['files']:>6} {row['rows']:>10,} {row['tokens'] / rows:>8.1f} "
               f"{row['masked'] / rows:>6.2f} {row['random_next'] / rows:>11.1%}")


LDDL = LddlFolders()
