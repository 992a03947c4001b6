"""The output formats behind one contract: `build`, `inspect`, `shard` and `bench` ask this layer
and never branch on a format's name, except for what `shard` writes (hdf5 parts, or one LDDL
folder: `--format`).

A format is a module (or package) of its own with its names and layout, its codec, an atomic
writer, a reader, a validator and a finder, and one entry in `BUILTIN` (or an entry point of the
group `bertdata.formats` in a package installed beside bertdata, `bertdata.plugins`; or one
`register` call, which reaches this process alone: a test's) naming the object that states:

- `name`: its `--format` value; `describe`: what `build --help` says of it (a built-in format's
  is its registry entry's, so that the help imports no format's module).
- `cut`: how the build cuts it, which decides the build stage that writes it (the pipelines
  have one kind of stage per cut, none per format). `PER_SHARD`: files per text shard and phase,
  written where the shard's instances are made (hdf5; `PerShardFormat`). `PER_SPLIT`: a part per
  text shard, then each split's parts made into the format's files (Megatron's pairs merged, MDS
  shards numbered and indexed; `SplitFormat`). `ACROSS_SHARDS`: files cut from every shard's rows,
  balanced for a loader, in a stage of their own (LDDL).
- `holds`: `INSTANCES` (rows of the six arrays of `bertdata.instances.schema`: `bench` trains on
  them and `shard` re-partitions them), `SENTENCES` (token ids of documents' sentences, which the
  trainer masks itself) or `DOCUMENTS` (token ids of whole documents, or of pieces of them, one
  sample each: today's MLM-only encoders mask and pack them as they load).
- `claims(path)`: whether `path` (a file, a folder or a prefix) is one unit of the format: an
  hdf5 file, an LDDL phase folder, a Megatron pair. A format with `takes_any_file` also takes a
  file given by name that no format claims (hdf5: the reference's shards come under any name).
- `find(folder)`: the units below a folder, sorted, skipping hidden files and folders.
- `inspect(units, report)`: validate units and print their figures through `report`.
- `summary(folder, manifest)`: the build's line for a folder it wrote.
- Formats holding instances also have `training(units)` (the units a trainer given their
  folder reads: hdf5's NGC rule, names containing "training"), `parts(unit)` (the unit's files
  as `PartInfo`s, checked without reading rows; settings the files do not hold come from the
  unit's manifest), `reading(parts, vocab, masking_scheme)` (what a loader needs besides the
  rows: see `Reading`), `load(part, reading)` (all rows of one part as the six arrays, for
  `bench`) and `slices(part, reading, rows)` (the same in slices, for `shard`), and say with
  `rows_as_text` whether reading their rows needs the vocab.
- Formats holding documents also have `training(units)` (the units of the training split),
  `count(unit)` (its samples, from its index), `samples(unit)` (each sample's ids, in order, for
  `bench`'s masked-LM-only training) and `recorded(unit)` (the options its manifest records:
  tokenizer, vocab size, samples' length): see `DocumentFormat`.

`find(paths)` is the one finder every command uses. The names are known without importing any
format's module (`names`), so that flags are made without loading h5py or pyarrow; a format's
module is imported when the format is first asked for.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass

from bertdata import plugins
from bertdata.errors import BertdataError
from bertdata.formats.contract import (ACROSS_SHARDS, DOCUMENTS, INSTANCES, PER_SHARD, PER_SPLIT, SENTENCES,
                                       Described, DocumentFormat, DocumentTokenizer, Format, FormatFlag,
                                       InstanceFormat, LocatedPart, PerShardFormat, Reading, Report, PartInfo,
                                       SplitEntry, SplitFiles, SplitFormat, SplitManifest, SplitSettings)

__all__ = ["ACROSS_SHARDS", "BUILTIN", "DOCUMENTS", "INSTANCES", "PER_SHARD", "PER_SPLIT", "SENTENCES",
           "Described", "DocumentFormat", "DocumentTokenizer", "Format", "FormatFlag", "Found", "InstanceFormat",
           "LocatedPart", "PerShardFormat", "Reading", "Report", "PartInfo", "SplitEntry", "SplitFiles", "SplitFormat",
           "SplitManifest", "SplitSettings", "all_formats", "by_format", "describe", "find", "flags_of", "get",
           "in_process_only", "names", "register", "same_shape", "unregister"]


@dataclass(frozen=True)
class Found:
    """A unit of a format: `path` names an hdf5 file, an LDDL folder, a Megatron prefix..."""

    format: Format
    path: str


@dataclass(frozen=True)
class Entry:
    """A built-in format's registry entry: where its object is ("module:object"), imported when
    the format is first asked for, and what the CLI says and makes of it without importing it:
    its `build --help` line (`describe`) and its own build flags."""

    where: str
    describe: str
    flags: tuple[FormatFlag, ...] = ()


# The built-in formats, in the order commands list them.
BUILTIN = {
    "hdf5": Entry("bertdata.formats.hdf5:HDF5",
                  "the reference's shards (NGC's recipe until 2021, PaddleNLP), one folder per phase"),
    "lddl": Entry("bertdata.formats.lddl:LDDL",
                  "LDDL parquet for NGC's current recipe, under OUTPUT/pretrain/phase{1,2}/.../parquet with the "
                  "vocab at OUTPUT/vocab/vocab, training instances only"),
    "megatron": Entry("bertdata.formats.megatron:MEGATRON",
                      "Megatron-LM's indexed dataset (.bin/.idx, one pair per split of every document's tokenized "
                      "sentences, for Megatron-LM and NeMo: --data-path PREFIX), under OUTPUT/megatron/<tokenizer>/, "
                      "made once whatever the phases"),
    "mds": Entry("bertdata.formats.mds:MDS",
                 "MosaicML Streaming's MDS, which ModernBERT and MosaicBERT train from: one sample per document or "
                 "piece of one, train/ and val/ folders of shard.NNNNN.mds files and index.json, under "
                 "OUTPUT/mds/<tokenizer>/, made once whatever the phases", (
                     FormatFlag("compression", "compress the shard files (streaming's StreamingDataset reads them; "
                                "ModernBERT's NoStreamingDataset reads only uncompressed ones; default: "
                                "uncompressed)", ("zstd",)),
                     FormatFlag("schema", "how the ids are stored, by the reader: input_ids (the tokenizer's uint16 or "
                                "uint32; streaming's StreamingDataset, ModernBERT's NoStreamingDataset; the default), "
                                "int64 (ModernBERT's streaming: true, StreamingTextDataset, which reads them as int64 "
                                "bytes) or eurobert (EuroBERT's optimus: tokens as int32 beside a metadata json)",
                                ("input_ids", "int64", "eurobert")))),
    "parquet": Entry("bertdata.formats.hfparquet:PARQUET",
                     "Hugging Face parquet (datasets.load_dataset, transformers' Trainer): train/ and validation/ "
                     "files of input_ids and id, one row per document or piece of one, and a dataset card "
                     "(README.md), under OUTPUT/parquet/<tokenizer>/, made once whatever the phases"),
}
_loaded: dict[str, Format] = {}


def register(fmt: Format) -> Format:
    """Add `fmt` (replacing one of the same name) and return it: in this process alone, so a
    build writes it only in this process (`in_process_only`); a plugin reaches every worker."""
    _loaded[fmt.name] = fmt
    return fmt


def unregister(name: str) -> None:
    """Take a format added by `register` out again (a built-in one is loaded anew when asked for)."""
    _loaded.pop(name, None)


def names() -> tuple[str, ...]:
    """Every format's name, without importing any format's module: the built-in ones, the
    plugins' (by their entry points), then those `register` added."""
    return tuple(dict.fromkeys([*BUILTIN, *plugins.entry_points(plugins.FORMATS), *_loaded]))


def get(name: str) -> Format:
    if name not in _loaded:
        if name in BUILTIN:
            _loaded[name] = plugins.load(BUILTIN[name].where, f"format {name}")
        elif name in plugins.entry_points(plugins.FORMATS):
            _loaded[name] = plugins.load_plugin(plugins.FORMATS, name)
        else:
            raise BertdataError(f"no format {name!r}; known: {', '.join(names())}")
    return _loaded[name]


def in_process_only(name: str) -> bool:
    """Whether the format is known to this process alone: added by `register`, neither built in
    nor a plugin, so no other process (a worker) can load it by its name."""
    return name not in BUILTIN and name not in plugins.entry_points(plugins.FORMATS) and name in _loaded


def flags_of(name: str) -> tuple[FormatFlag, ...]:
    """The format's own build flags, without importing its module where it is built in."""
    return _stated(name, "flags", ())


def describe(name: str) -> str:
    """What `build --help` says of the format, without importing its module where it is built in."""
    return _stated(name, "describe", "")


def _stated(name: str, what: str, default):
    """What a format states of itself (a plugin, a registered one) or its registry entry states
    of it (a built-in one, loaded or not)."""
    if name not in BUILTIN:
        return getattr(get(name), what, default)
    return getattr(BUILTIN[name], what)


def all_formats() -> list[Format]:
    """Every format, its module imported."""
    return [get(name) for name in names()]


def find(paths: Iterable[str], formats: Iterable[Format] | None = None) -> list[Found]:
    """The units among `paths`: a path a format claims is one unit; a folder is searched by every
    format for its units. In the order given, each format's units sorted; a unit found twice
    counts once. Raises BertdataError for a missing path or when nothing is found."""
    formats = all_formats() if formats is None else list(formats)
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
    order = list(names())
    return [groups[name] for name in sorted(groups, key=lambda n: order.index(n) if n in order else len(order))]


def same_shape(parts: list[PartInfo]) -> None:
    """Refuse parts of different sequence lengths or prediction counts: one phase at a time."""
    first = parts[0]
    for info in parts[1:]:
        if (info.max_seq_length, info.max_predictions_per_seq) != (first.max_seq_length, first.max_predictions_per_seq):
            raise BertdataError(
                f"{info.path}: seq length {info.max_seq_length} / {info.max_predictions_per_seq} predictions "
                f"differs from {first.path} ({first.max_seq_length} / {first.max_predictions_per_seq}); "
                "one phase per folder")
