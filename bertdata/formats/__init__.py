"""The output formats behind one contract: `build`, `inspect`, `shard` and `bench` ask this layer
and never branch on a format's name, except for what `shard` writes (hdf5 parts, or one LDDL
folder: `--format`).

A format is a module (or package) of its own with its names and layout, its codec, an atomic
writer, a reader, a validator and a finder, and one object in `REGISTRY` that states:

- `name`: its `--format` value.
- `cut`: how the build cuts it. `PER_SHARD`: files per text shard, written where the shard's
  instances are made (hdf5). `ACROSS_SHARDS`: files cut from every shard's rows, balanced for a
  loader, in a stage of their own (LDDL). `PER_SPLIT`: every shard's part merged into one file
  set per split (Megatron). The build plans its stages from this.
- `holds`: `INSTANCES` (rows of the six arrays of `bertdata.instances.schema`: `bench` trains on them and
  `shard` re-partitions them) or `SENTENCES` (token ids of documents' sentences, which the
  trainer masks itself).
- `claims(path)`: whether `path` (a file, a folder or a prefix) is one unit of the format: an
  hdf5 file, an LDDL phase folder, a Megatron pair. A format with `takes_any_file` also takes a
  file given by name that no format claims (hdf5: the reference's shards come under any name).
- `find(folder)`: the units below a folder, sorted, skipping hidden files and folders.
- `inspect(units, report)`: validate units and print their figures through `report`.
- `build_stages`: the module of `bertdata.pipelines` that plans the format's own stages of a
  build (and their `--dry-run` lines); None for a `PER_SHARD` format, whose files the instance
  stage writes. `summary(folder, manifest)`: the build's line for a folder it wrote.
- Formats holding instances also have `training(units)` (the units a trainer given their
  folder reads: hdf5's NGC rule, names containing "training"), `parts(unit)` (the unit's files
  as `ShardInfo`s, checked without reading rows; settings the files do not hold come from the
  unit's manifest), `reading(parts, vocab, masking_scheme)` (what a loader needs besides the
  rows: see `Reading`), `load(part, reading)` (all rows of one part as the six arrays, for
  `bench`) and `slices(part, reading, rows)` (the same in slices, for `shard`), and say with
  `rows_as_text` whether reading their rows needs the vocab.
- A `PER_SHARD` format also writes a text shard's files (`PerShardFormat`: `folder`,
  `file_names`, `write`, `info`, `read`, `pattern`), which the build's instance stage calls.

`find(paths)` is the one finder every command uses. A new format is one module and its entry in
`REGISTRY` (and, for a stage of its own, its pipeline module); `register` adds one at run time
(a plugin, or a test).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass

from bertdata.errors import BertdataError
from bertdata.formats.contract import (ACROSS_SHARDS, INSTANCES, PER_SHARD, PER_SPLIT, SENTENCES, Format,
                                       InstanceFormat, PerShardFormat, Reading, Report, ShardInfo)

__all__ = ["ACROSS_SHARDS", "INSTANCES", "PER_SHARD", "PER_SPLIT", "SENTENCES", "REGISTRY", "Format", "Found",
           "InstanceFormat", "PerShardFormat", "Reading", "Report", "ShardInfo", "by_format", "find", "get", "register", "same_shape"]

@dataclass(frozen=True)
class Found:
    """A unit of a format: `path` names an hdf5 file, an LDDL folder, a Megatron prefix..."""

    format: Format
    path: str


REGISTRY: dict[str, Format] = {}


def register(fmt: Format) -> Format:
    """Add `fmt` to the registry (replacing one of the same name) and return it."""
    REGISTRY[fmt.name] = fmt
    return fmt


def get(name: str) -> Format:
    try:
        return REGISTRY[name]
    except KeyError:
        raise BertdataError(f"no format {name!r}; known: {', '.join(REGISTRY)}") from None


def find(paths: Iterable[str], formats: Iterable[Format] | None = None) -> list[Found]:
    """The units among `paths`: a path a format claims is one unit; a folder is searched by every
    format for its units. In the order given, each format's units sorted; a unit found twice
    counts once. Raises BertdataError for a missing path or when nothing is found."""
    formats = list(REGISTRY.values() if formats is None else formats)
    found: dict[str, Found] = {}
    paths = list(paths)
    for path in paths:
        claimed = next((f for f in formats if f.claims(path)), None)
        if claimed is None and os.path.isfile(path):
            claimed = next((f for f in formats if f.takes_any_file), None)
        if claimed is not None:
            found.setdefault(os.path.realpath(path), Found(claimed, path))
        elif os.path.isdir(path):
            for fmt in formats:
                for unit in fmt.find(path):
                    found.setdefault(os.path.realpath(unit), Found(fmt, unit))
        elif os.path.exists(path):
            raise BertdataError(f"{path}: not a file of any format bertdata reads ({', '.join(f.name for f in formats)})")
        else:
            raise BertdataError(f"{path}: no such file or folder")
    if not found:
        raise BertdataError(f"no shards of any format ({', '.join(f.name for f in formats)}) found in {', '.join(paths)}")
    return list(found.values())


def by_format(found: Iterable[Found]) -> list[tuple[Format, list[str]]]:
    """(format, its units) for each format among `found`, in registry order."""
    groups: dict[str, tuple[Format, list[str]]] = {}
    for unit in found:
        groups.setdefault(unit.format.name, (unit.format, []))[1].append(unit.path)
    order = list(REGISTRY)
    return [groups[name] for name in sorted(groups, key=lambda n: order.index(n) if n in order else len(order))]


def same_shape(parts: list[ShardInfo]) -> None:
    """Refuse parts of different sequence lengths or prediction counts: one phase at a time."""
    first = parts[0]
    for info in parts[1:]:
        if (info.max_seq_length, info.max_predictions_per_seq) != (first.max_seq_length, first.max_predictions_per_seq):
            raise BertdataError(
                f"{info.path}: seq length {info.max_seq_length} / {info.max_predictions_per_seq} predictions "
                f"differs from {first.path} ({first.max_seq_length} / {first.max_predictions_per_seq}); "
                "one phase per folder")


def _register_builtin() -> None:
    from bertdata.formats import hdf5, lddl, megatron

    register(hdf5.HDF5)
    register(lddl.LDDL)
    register(megatron.MEGATRON)


_register_builtin()
