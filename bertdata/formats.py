"""Shard file formats behind one interface, so the build writes any of them without knowing which.

The instance engine makes one shard's instances once (`instances.create_instances`); a
`ShardFormat` turns them into files and reads them back. The shard stage of a build, its
resume check, manifests and progress bars need nothing else. The contract:

- `file_names(stem, split, index)`: the shard's files, relative to its phase folder; one or
  more (Megatron's format keeps an index beside its data), distinct for distinct shards. The
  text shard's stem is `<dataset>_<split>_<index>`; a format may use a subfolder per split.
- `glob`: relative to the phase folder, matches exactly one file of every finished shard
  (to count them); `temp_glob` matches the leftovers of writes that were killed.
- `write(paths, instances, attrs)`: the files at `paths` (one per file name, in order),
  parent folders made as needed. Each is written under a temporary name in its final folder
  and renamed when complete, so a file under its final name is whole, and a shard is whole
  once all its files are. Temporary names are hidden, never contain "train" and have no
  extension containing ".parquet": NGC's loader takes every file whose name contains
  "training", PaddleNLP's every one containing "train", LDDL's every one whose extension
  contains ".parquet". `attrs` (JSON values: how the shard was made, its statistics) are
  recorded in the files. The same instances and attrs give the same bytes.
- `info(paths)`: an `hdf5io.ShardInfo` (instances, sequence length, predictions per
  sequence, the recorded attrs) without reading rows: enough to decide a shard can be reused.
- `read(paths)`: the six arrays of `schema` in their dtypes, in slices, in row order.
- `validate(paths, vocab_size)`: every row checked as `bertdata inspect` checks hdf5 shards;
  returns `validate.ShardStats`, raises `ValidationError` naming the file and the fault.

Bad input raises `BertdataError` naming the file. A new format is a class with these members
in its own module, and an entry in `FORMATS`.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Protocol

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from bertdata import lddl
from bertdata.errors import BertdataError, ValidationError
from bertdata.fsutil import TEMP_PREFIX, atomic_path
from bertdata.hdf5io import ShardInfo, iter_slices, shard_info
from bertdata.instances import Instances, write_instances
from bertdata.schema import ATTRS_KEY, FIELDS
from bertdata.validate import ShardStats, check_batch, validate_shard
from bertdata.vocab import Vocab

PathLike = str | os.PathLike
# Rows per slice that `read` yields.
READ_ROWS = 8192


class ShardFormat(Protocol):
    name: ClassVar[str]
    glob: ClassVar[str]
    temp_glob: ClassVar[str]

    def file_names(self, stem: str, split: str, index: int) -> tuple[str, ...]: ...

    def write(self, paths: Sequence[PathLike], instances: Instances, attrs: Mapping[str, Any]) -> None: ...

    def info(self, paths: Sequence[PathLike]) -> ShardInfo: ...

    def read(self, paths: Sequence[PathLike]) -> Iterator[dict[str, np.ndarray]]: ...

    def validate(self, paths: Sequence[PathLike], vocab_size: int | None = None) -> ShardStats: ...


def _one(paths: Sequence[PathLike], fmt: str) -> str:
    if isinstance(paths, (str, os.PathLike)) or len(paths) != 1:
        raise ValueError(f"a {fmt} shard is one file: pass a sequence of one path, not {paths!r}")
    return os.fspath(paths[0])


def _make_parent(path: str) -> None:
    Path(path).parent.mkdir(parents=True, exist_ok=True)


@dataclass(frozen=True)
class Hdf5Shards:
    """The reference's layout: one `<stem>.hdf5` of six gzip datasets (see `hdf5io`)."""

    name: ClassVar[str] = "hdf5"
    glob: ClassVar[str] = "*.hdf5"
    temp_glob: ClassVar[str] = TEMP_PREFIX + "*"

    def file_names(self, stem: str, split: str, index: int) -> tuple[str, ...]:
        return (f"{stem}.hdf5",)

    def write(self, paths: Sequence[PathLike], instances: Instances, attrs: Mapping[str, Any]) -> None:
        path = _one(paths, self.name)
        _make_parent(path)
        write_instances(path, instances, attrs)

    def info(self, paths: Sequence[PathLike]) -> ShardInfo:
        return shard_info(_one(paths, self.name))

    def read(self, paths: Sequence[PathLike]) -> Iterator[dict[str, np.ndarray]]:
        path = _one(paths, self.name)
        try:
            for _start, arrays in iter_slices(path, READ_ROWS):
                yield arrays
        except OSError as err:  # a truncated file, a corrupt chunk
            raise BertdataError(f"{path}: unreadable data ({err})") from None

    def validate(self, paths: Sequence[PathLike], vocab_size: int | None = None) -> ShardStats:
        return validate_shard(_one(paths, self.name), vocab_size)


# Parquet key-value metadata of a shard file: the attrs (as in hdf5, under ATTRS_KEY), and the
# array widths, which LDDL's rows do not say (their sequences are unpadded text).
LAYOUT_KEY = "bertdata_layout"


@dataclass(frozen=True)
class LddlShards:
    """One LDDL parquet file per shard, `<split>/shard-<index>.parquet`: each split's folder
    is named as an LDDL phase folder is (see `lddl`). The rows are text, so reading them back
    needs the vocab's `tokens`. Balancing files for LDDL's loader and its `.num_samples.json`
    are a step over the whole folder (`lddl.write_phase`), not part of one shard."""

    tokens: tuple[str, ...]
    masking: str = "static"

    name: ClassVar[str] = "lddl"
    glob: ClassVar[str] = "*/shard-*.parquet"
    temp_glob: ClassVar[str] = f"*/{TEMP_PREFIX}*"

    def __post_init__(self) -> None:
        lddl.schema_for(self.masking, binned=False)  # refuses an unknown masking

    def file_names(self, stem: str, split: str, index: int) -> tuple[str, ...]:
        return (f"{split}/{lddl.file_name(index, None)}",)

    def write(self, paths: Sequence[PathLike], instances: Instances, attrs: Mapping[str, Any]) -> None:
        path = _one(paths, self.name)
        _make_parent(path)
        n, seq, pred = len(instances), instances.max_seq_length, instances.max_predictions_per_seq
        schema = lddl.schema_for(self.masking, binned=False).with_metadata({
            ATTRS_KEY: json.dumps(dict(attrs), sort_keys=True),
            LAYOUT_KEY: json.dumps({"max_seq_length": seq, "max_predictions_per_seq": pred}, sort_keys=True),
        })
        rows = lddl.ROW_GROUP_ROWS
        with atomic_path(path) as tmp, contextlib.closing(lddl.parquet_writer(tmp, schema)) as writer:
            for start in range(0, n, rows):
                batch = {name: instances.array(name, start, start + rows) for name in FIELDS}
                writer.write_table(lddl.rows_from_arrays(batch, self.tokens, self.masking, source=path),
                                   row_group_size=rows)

    def _file(self, path: str) -> pq.ParquetFile:
        if not os.path.exists(path):
            raise BertdataError(f"{path}: no such file")
        try:
            return pq.ParquetFile(path)
        except (pa.ArrowException, OSError) as err:
            raise BertdataError(f"{path}: not a readable parquet file ({err})") from None

    def info(self, paths: Sequence[PathLike]) -> ShardInfo:
        path = _one(paths, self.name)
        file = self._file(path)
        metadata = file.schema_arrow.metadata or {}
        if LAYOUT_KEY.encode() not in metadata:
            raise BertdataError(f"{path}: no {LAYOUT_KEY!r} metadata; not a shard written by bertdata "
                                "(an LDDL phase folder is read with `lddl.read_folder`)")
        try:
            layout = json.loads(metadata[LAYOUT_KEY.encode()])
            attrs = json.loads(metadata.get(ATTRS_KEY.encode(), b"{}"))
            seq, pred = int(layout["max_seq_length"]), int(layout["max_predictions_per_seq"])
        except (ValueError, TypeError, KeyError):
            raise BertdataError(f"{path}: metadata {LAYOUT_KEY!r} or {ATTRS_KEY!r} is not the JSON bertdata writes") from None
        if not isinstance(attrs, dict):
            raise BertdataError(f"{path}: metadata {ATTRS_KEY!r} is not a JSON object")
        return ShardInfo(path, file.metadata.num_rows, seq, pred, attrs)

    def read(self, paths: Sequence[PathLike]) -> Iterator[dict[str, np.ndarray]]:
        info = self.info(paths)
        try:
            for batch in self._file(info.path).iter_batches(batch_size=READ_ROWS):
                yield lddl.arrays_from_rows(pa.Table.from_batches([batch]), self.tokens, info.max_seq_length,
                                            info.max_predictions_per_seq, source=info.path)
        except (pa.ArrowException, OSError) as err:
            raise BertdataError(f"{info.path}: not a readable parquet file ({err})") from None

    def validate(self, paths: Sequence[PathLike], vocab_size: int | None = None) -> ShardStats:
        path = _one(paths, self.name)
        try:
            info = self.info(paths)
            expected = lddl.schema_for(self.masking, binned=False)
            found = self._file(path).schema_arrow.remove_metadata()
            if not found.equals(expected):
                raise ValidationError(f"{path}: columns {found.to_string()!r} are not those of LDDL's "
                                      f"{self.masking} masking {expected.to_string()!r}".replace("\n", ", "))
            if vocab_size is None:
                vocab_size = info.attrs.get("vocab_size")
            stats = ShardStats(path, instances=info.num_instances, max_seq_length=info.max_seq_length)
            start = 0
            for arrays in self.read(paths):
                check_batch(path, start, arrays, vocab_size, stats)
                start += len(arrays["input_ids"])
            return stats
        except ValidationError:
            raise
        except BertdataError as err:
            raise ValidationError(str(err)) from None


# Flag value -> the format, made for the build's vocab.
FORMATS: dict[str, Callable[[Vocab], ShardFormat]] = {
    Hdf5Shards.name: lambda vocab: Hdf5Shards(),
    LddlShards.name: lambda vocab: LddlShards(vocab.tokens),
}


def shard_format(name: str, vocab: Vocab) -> ShardFormat:
    if name not in FORMATS:
        raise BertdataError(f"unknown shard format {name!r}; one of {', '.join(FORMATS)}")
    return FORMATS[name](vocab)
