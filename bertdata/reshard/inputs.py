"""`bertdata shard`'s inputs: finding the shard files to read, reading them in slices, and
refusing inputs that cannot be mixed (settings, masking, vocab, dtypes) before anything is written."""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bertdata import formats
from bertdata.errors import BertdataError, ValidationError
from bertdata.formats import PartInfo
from bertdata.formats.hdf5 import HDF5, SUFFIX
from bertdata.fsutil import load_json
from bertdata.instances.schema import DTYPES
from bertdata.instances.vocab import Vocab, check_vocab, load_vocab, vocab_for_shard
from bertdata.manifest import MANIFEST

# The writer named in this command's manifests: a folder with one is not searched for inputs.
RESHARD_TOOL = "bertdata shard"
# The format of the parts (LDDL output aside), which names their files: <name>_<split>_<index>
# and its suffix, as the build names its shards.
PARTS = HDF5
PART_PATTERN = re.compile(rf"^(?P<name>.+)_(?P<split>training|test)_(?P<index>\d+){re.escape(SUFFIX)}$")
# Attributes that describe one part, not the generation settings, so they never carry over.
PART_ATTRS = ("shard_seed", "part_index", "num_parts")


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
    others: list = []  # units of formats holding no instances (documents, sentences)
    for given in paths:
        units = formats.find([given])
        if any(fmt.claims(given) for fmt in formats.all_formats()) or os.path.isfile(given):
            if out in (resolved := Path(given).resolve()).parents or resolved == out:
                raise BertdataError(f"{given}: input is inside the output folder {output}; "
                                    "write the parts to another folder")
            found.setdefault(os.path.realpath(given), given)
            continue
        earlier = dict.fromkeys(reshard_outputs_inside(Path(given)), 0)
        for unit in units:
            if unit.format.holds != formats.INSTANCES:
                others.append(unit)
                continue
            if split != "all" and f"_{split}_" not in Path(unit.path).name:
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
    if not found and others:
        fmt = others[0].format
        raise BertdataError(f"{others[0].path}: {fmt.name} files hold {fmt.holds}, not instances to re-partition")
    if not found:
        which = "shard" if split == "all" else f"*_{split}_* shard"
        raise BertdataError(f"no {which} files found in {', '.join(paths)}"
                            + (f" ({skipped} inside the output folder are not read)" if skipped else "")
                            + ("" if split == "all" else " (--split all takes every shard file)"))
    return sorted(found.values(), key=os.path.abspath), notes


def reshard_outputs_inside(folder: Path) -> list[Path]:
    """The folders below `folder` (resolved) whose manifest says `bertdata shard` wrote them."""
    found = []
    for manifest in folder.rglob(MANIFEST):
        if manifest.parent == folder:
            continue
        try:
            tool = load_json(manifest.read_text()).get("tool")
        except (OSError, ValueError, AttributeError):  # not a manifest of ours: its folder is searched
            continue
        if isinstance(tool, dict) and tool.get("name") == RESHARD_TOOL:
            found.append(manifest.parent.resolve())
    return found


def part_name(stem: str, split: str, index: int) -> str:
    """The file of one part: `stem` (a shard's stem, or a temporary one) in the parts' format."""
    (name,) = PARTS.file_names(stem, split, index)
    return name


def dataset_name(paths: Iterable[str]) -> str:
    """The name the inputs share before `_training_<i>` / `_test_<i>`, else "shards"."""
    names = {m["name"] if (m := PART_PATTERN.match(Path(p).name)) else None for p in paths}
    return names.pop() if len(names) == 1 and None not in names else "shards"


@contextlib.contextmanager
def refuse_invalid() -> Iterator[None]:
    """An invalid input stops `shard` with exit code 2: it is bad input, not a finding of `inspect`."""
    try:
        yield
    except ValidationError as err:
        raise BertdataError(f"invalid input shard: {err}") from None


@dataclass(frozen=True)
class Input:
    """One input unit: its shape and attributes, its format, its parts and how to read them."""

    info: PartInfo
    format: formats.InstanceFormat
    parts: tuple[PartInfo, ...]
    reading: formats.Reading


def read_input(path: str, vocab: str | None = None) -> Input:
    """One input unit, checked as its format checks it without reading rows (other integer dtypes
    allowed: they are cast), before anything is written; its rows are checked as they are read.
    `vocab` reads a format whose rows are text (refused if the unit records another)."""
    with refuse_invalid():
        fmt = formats.find([path])[0].format
        if fmt.holds != formats.INSTANCES:
            raise BertdataError(f"{path}: {fmt.name} files hold {fmt.holds}, not instances to re-partition")
        parts = fmt.parts(path)
        first = parts[0]
        info = PartInfo(path, sum(p.num_instances for p in parts), first.max_seq_length,
                         first.max_predictions_per_seq, first.attrs)
        return Input(info, fmt, tuple(parts), fmt.reading(parts, vocab if fmt.rows_as_text else None, None))


def input_slices(source: Input, rows: int) -> Iterator[tuple[int, dict[str, np.ndarray]]]:
    """(start, the six arrays of rows start..) through one input, in its order."""
    start = 0
    with refuse_invalid():
        for part in source.parts:
            for arrays in source.format.slices(part, source.reading, rows):
                yield start, arrays
                start += len(arrays["input_ids"])


def input_vocab(infos: list[PartInfo], given: str | None) -> Vocab:
    """The vocab the inputs were made with: `given` (refused if an input records another), else
    the one whose sha256 they record (see `vocab_for_shard`)."""
    if given is None:
        return vocab_for_shard(infos[0].attrs, infos[0].path)
    vocab = load_vocab(given)
    for info in infos:
        check_vocab(vocab, info.attrs, info.path)
    return vocab


def check_inputs(infos: list[PartInfo]) -> dict[str, Any]:
    """Refuse inputs that cannot be mixed; return the generation attributes they all agree on."""
    first = infos[0]
    vocab_ref: PartInfo | None = None
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


def as_field(path: str, name: str, values: np.ndarray) -> np.ndarray:
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
