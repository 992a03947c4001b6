"""Shard file formats behind one interface, so the build writes any of them without knowing which.

The instance engine makes one shard's instances once (`instances.create_instances`); a
`ShardFormat` turns them into files, one set per text shard, and reads them back. The build's
instance stage and its resume check need nothing else (bertdata.pipelines.instances). LDDL's
parquet is not one: its files are cut across text shards to balance them for its loader, so it
has a stage of its own (bertdata.lddl, bertdata.pipelines.lddl). The contract:

- `file_names(stem, split, index)`: the shard's files, relative to its phase folder; one or
  more (Megatron's format keeps an index beside its data), distinct for distinct shards. The
  text shard's stem is `<dataset>_<split>_<index>`.
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

Bad input raises `BertdataError` naming the file. A new format is a class with these members
in its own module, chosen in bertdata.pipelines.build for its --format value.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Protocol

import numpy as np

from bertdata.errors import BertdataError
from bertdata.hdf5io import ShardInfo, iter_slices, shard_info
from bertdata.instances import Instances, write_instances

PathLike = str | os.PathLike
# Rows per slice that `read` yields.
READ_ROWS = 8192


class ShardFormat(Protocol):
    name: ClassVar[str]

    def file_names(self, stem: str, split: str, index: int) -> tuple[str, ...]: ...

    def write(self, paths: Sequence[PathLike], instances: Instances, attrs: Mapping[str, Any]) -> None: ...

    def info(self, paths: Sequence[PathLike]) -> ShardInfo: ...

    def read(self, paths: Sequence[PathLike]) -> Iterator[dict[str, np.ndarray]]: ...

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
