"""The frame the formats cut per split share, stated once, so that a format states its own
hooks alone, as mosaicml/streaming's `Writer` and `Reader` subclasses do:

- `SplitFolder`, every `PER_SPLIT` format's base (megatron, mds, parquet): the registry's
  fields, the folder `<name>/<tokenizer>`, the options its manifest records, the files it owns
  (`files`, patterns), the build's summary line (`counted`), the options its manifest records
  (`recorded`), no last files by default. A format
  states two writing hooks: `write_part` (a text shard's part) and `finish_split` (a split's
  parts made into its files); `joined` is the split's file for a format whose parts are pieces
  of one file.
- `DocumentFolder`, a `DocumentFormat` whose unit is the folder a build wrote, known by the
  format its manifest records: finding, reading and checking it come from the manifest's split
  entries and two reading hooks, `read` (a split's samples) and `check` (a split's files
  validated, its figures' line).
"""

from __future__ import annotations

import contextlib
import fnmatch
import hashlib
import os
from abc import ABC, abstractmethod
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from bertdata.errors import BertdataError, ValidationError
from bertdata.formats.contract import (DOCUMENTS, PER_SPLIT, Described, FormatFlag, LocatedPart, Report, SplitEntry,
                                       SplitFiles, SplitSettings, hidden)
from bertdata.fsutil import load_json, read_bounded
from bertdata.manifest import MANIFEST, MANIFEST_LIMIT, recorded_options

if TYPE_CHECKING:
    import numpy as np

    from bertdata.instances.documents import Documents
    from bertdata.text.shards import TextShard


class SplitFolder(ABC):
    """A format cut per split (`bertdata.formats.contract.SplitFormat`), written under
    OUTPUT/<name>/<tokenizer>/. A subclass states `name`, `holds`, `writes`,
    `disk_per_text_byte`, `files` (fnmatch patterns of the files it writes, relative to its
    folder, each matching as deep as it is), `counted` (the manifest's counts its summary line
    gives) and `files_counted` (the count of its files and their noun), and the writing hooks."""

    cut: ClassVar[str] = PER_SPLIT
    takes_any_file: ClassVar[bool] = False
    describe: ClassVar[str] = ""  # a plugin's --help line (a built-in format's is its registry entry's)
    flags: ClassVar[tuple[FormatFlag, ...]] = ()  # a plugin's own build flags (a built-in format's: its entry's)
    name: ClassVar[str]
    holds: ClassVar[str]
    writes: ClassVar[str]
    disk_per_text_byte: ClassVar[dict]
    files: ClassVar[tuple[str, ...]]
    counted: ClassVar[tuple[str, ...]]
    files_counted: ClassVar[tuple[str, str]]

    def folder(self, settings: SplitSettings) -> str:
        """One folder per tokenizer (a vocab's case, a tokenizer file's folder), since another
        tokenizer's ids differ."""
        return f"{self.name}/{settings.label}"

    def options(self, settings: SplitSettings) -> dict:
        return settings.samples_options()

    @abstractmethod
    def write_part(self, shard: TextShard, documents: Documents, settings: SplitSettings, local: str) -> Described:
        """A text shard's documents as files in the local folder `local`; their description."""

    @abstractmethod
    def finish_split(self, split: str, parts: list[LocatedPart], settings: SplitSettings, folder: str,
                     files: SplitFiles) -> SplitEntry:
        """The split's parts, in text shard order, made into its files; its manifest entry."""

    def finish_folder(self, entries: list[SplitEntry], settings: SplitSettings, folder: str, files: SplitFiles) -> dict:
        return {}

    def ours(self, path: str) -> bool:
        return any(fnmatch.fnmatchcase(path, p) and path.count("/") == p.count("/") for p in self.files)

    def summary(self, folder: str, manifest: dict) -> str:
        """The build's line for a folder it wrote, from its manifest's counts."""
        counts = manifest["counts"]
        key, noun = self.files_counted
        figures = ", ".join(f"{counts[k]:,} {k}" for k in self.counted)
        return f"{self.name}: {figures} in {counts[key]} {noun}{'s' if counts[key] != 1 else ''} -> {folder}"

    def recorded(self, unit: str) -> dict:
        """The options its build's manifest records (tokenizer, vocab size, samples' length): in
        the unit's folder where the unit is one (parquet's, a DocumentFolder's), else in the
        folder the unit is in (an mds split folder, a megatron prefix); {} where there is none."""
        return recorded_options(Path(unit) / MANIFEST, Path(unit).parent / MANIFEST)

    def joined(self, parts: list[LocatedPart], name: str, folder: str, files: SplitFiles) -> dict:
        """The parts' files (each part's description its file's name) joined in order into the
        file `name` of the folder: its entry in the split's "files"."""
        digest, size = hashlib.sha256(), 0
        with files.atomic_writer(files.join(folder, name)) as out:
            for where, part in parts:
                with files.open_file(files.join(where, part)) as f:
                    for block in iter(lambda: f.read(1 << 20), b""):
                        digest.update(block)
                        size += out.write(block)
        return {"file": name, "bytes": size, "sha256": digest.hexdigest()}


def manifest_of(unit: str) -> dict:
    """The manifest.json a build wrote in the folder; {} where there is none readable."""
    with contextlib.suppress(BertdataError, ValueError):
        found = load_json(read_bounded(Path(unit) / MANIFEST, MANIFEST_LIMIT, "manifest"))
        return found if isinstance(found, dict) else {}
    return {}


class DocumentFolder(SplitFolder):
    """A format holding documents (`bertdata.formats.contract.DocumentFormat`) whose unit is
    the folder a build wrote, with the manifest that names the format and each split's entry."""

    holds: ClassVar[str] = DOCUMENTS

    @abstractmethod
    def read(self, unit: str, entry: SplitEntry, options: dict) -> Iterator[np.ndarray]:
        """Each sample's ids of the split `entry` records, in order; `options`: the manifest's."""

    @abstractmethod
    def check(self, unit: str, entry: SplitEntry, vocab_size: int | None) -> str:
        """The split's files validated (ids below `vocab_size` where known; ValidationError
        naming the file and the fault); its figures, as `inspect` prints them."""

    def claims(self, path: str) -> bool:
        return os.path.isdir(path) and manifest_of(path).get("format") == self.name

    def find(self, folder: str) -> list[str]:
        root = Path(folder)
        return sorted(d for d, _dirs, names in os.walk(root) if MANIFEST in names
                      and not hidden(Path(d) / MANIFEST, root) and self.claims(d))

    def _split(self, unit: str, split: str = "training") -> SplitEntry | None:
        return next((e for e in manifest_of(unit).get("splits", []) if e.get("split") == split), None)

    def training(self, units: list[str]) -> list[str]:
        return [u for u in units if self._split(u) is not None]

    def count(self, unit: str) -> int:
        return int(self._split(unit)["samples"])

    def samples(self, unit: str) -> Iterator[np.ndarray]:
        return self.read(unit, self._split(unit), self.recorded(unit))

    def inspect(self, units: list[str], report: Report) -> None:
        """Each split of each folder: its listed files there, then checked by the format."""
        for unit in units:
            vocab_size = len(report.vocab) if report.vocab is not None else self.recorded(unit).get("vocab_size")
            for entry in manifest_of(unit).get("splits", []):
                try:
                    for listed in entry["files"]:
                        if not (Path(unit) / listed["file"]).is_file():
                            raise ValidationError(f"{Path(unit) / listed['file']}: missing, but the manifest lists it")
                    line = self.check(unit, entry, vocab_size)
                except ValidationError as err:
                    report.failures.append(str(err))
                    report.out(f"{self.name} {unit} {entry.get('split')}: INVALID")
                    continue
                report.out(f"{self.name} {unit} {entry['split']}: {line}"
                           + ("" if vocab_size else " (ids not checked: no vocab size known)"))
