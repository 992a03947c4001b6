"""The format contract (see `bertdata.formats`): what every format states and offers, and the
records that cross it."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

import numpy as np

if TYPE_CHECKING:
    from bertdata.instances.create import Instances

PathLike = str | os.PathLike

PER_SHARD, ACROSS_SHARDS, PER_SPLIT = "per-shard", "across-shards", "per-split"
INSTANCES, SENTENCES = "instances", "sentences"


@dataclass(frozen=True)
class ShardInfo:
    """One readable part of a unit of instances (an hdf5 file, an LDDL file) and its shape."""

    path: str
    num_instances: int
    max_seq_length: int
    max_predictions_per_seq: int
    attrs: dict[str, Any] = field(default_factory=dict)
    bin: int | None = None  # a part of a unit binned by sequence length (LDDL)


@dataclass(frozen=True)
class Reading:
    """How a loader reads a format's parts besides their rows: `vocab` (rows held as text need
    it; None for ids), `masking` ("static": the masks are in the rows; "dynamic": a loader
    masks each batch anew, by `masking_scheme`), and `pad_to_longest` (the format's own loader
    pads a batch only to its longest sequence, as LDDL's does)."""

    format: str
    vocab: Any = None
    masking: str = "static"
    masking_scheme: str = "token"
    pad_to_longest: bool = False


@dataclass
class Report:
    """Where `inspect` sends what it finds: lines to print, failures (exit 1) and warnings,
    with the options every format's validator may use."""

    vocab: Any = None  # a Vocab given with --vocab: ids checked against it, refused if a unit records another
    show: int = 0
    ranks: int = 1
    out: Callable[[str], None] = print
    failures: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


class Format(Protocol):
    name: ClassVar[str]
    cut: ClassVar[str]
    holds: ClassVar[str]
    takes_any_file: ClassVar[bool]
    # Bytes written per byte of clean text, by phase number (None: once, whatever the phases).
    disk_per_text_byte: ClassVar[dict]
    # The module (of bertdata.pipelines) that plans the format's own build stages: `plan(inputs,
    # phases, reused_text)` -> its stages, `dry_run(cfg, phases, dataset, lowercase, training_shards)`
    # -> their lines. None: it has none (a PER_SHARD format's files are written by the instance stage).
    build_stages: ClassVar[str | None]

    def claims(self, path: str) -> bool: ...

    def find(self, folder: str) -> list[str]: ...

    def inspect(self, units: list[str], report: "Report") -> None: ...

    def summary(self, folder: str, manifest: dict) -> str:
        """The build's line for a folder of the format it wrote, from the folder's manifest."""


class InstanceFormat(Format, Protocol):
    """A format holding instances: what `bench` and `shard` read. `rows_as_text`: its rows hold
    tokens as text, so reading them needs the vocab (LDDL)."""

    rows_as_text: ClassVar[bool]

    def training(self, units: list[str]) -> list[str]:
        """The units a trainer given their folder takes as training data."""

    def parts(self, unit: str) -> list[ShardInfo]: ...

    def reading(self, parts: list[ShardInfo], vocab_path: str | None, masking_scheme: str | None) -> Reading: ...

    def load(self, part: ShardInfo, reading: Reading) -> dict[str, np.ndarray]: ...

    def slices(self, part: ShardInfo, reading: Reading, rows: int) -> Iterator[dict[str, np.ndarray]]:
        """The part's rows in order, about `rows` at a time: memory bounded by a slice, not a part."""


class PerShardFormat(Protocol):
    """The files a `PER_SHARD` format writes for one text shard (see `bertdata.formats.hdf5`)."""

    name: ClassVar[str]
    # How the files encode the arrays (filters, levels) where readers could tell; each phase
    # folder's manifest records it, so a change of encoding is on record beside the files.
    layout: ClassVar[dict]

    def folder(self, cfg: Any, lowercase: bool) -> str:
        """A phase's folder, relative to the output (the phase's InstanceConfig `cfg`)."""

    def file_names(self, stem: str, split: str, index: int) -> tuple[str, ...]: ...

    def write(self, paths: Sequence[PathLike], instances: "Instances", attrs: Mapping[str, Any], *,
              helper_thread: bool = True) -> None:
        """`helper_thread`: whether the writer may use a helper thread, as on a core of its own
        (False for a worker that shares every core with other workers)."""

    def info(self, paths: Sequence[PathLike]) -> ShardInfo: ...

    def read(self, paths: Sequence[PathLike]) -> Iterator[dict[str, np.ndarray]]: ...

    def pattern(self) -> str:
        """A glob matching one file of every shard in a phase folder (its first file name)."""


def hidden(path: Path, root: Path) -> bool:
    """Whether `path` is hidden below `root`: a temporary file, or inside a running tool's folder."""
    return any(part.startswith(".") for part in path.relative_to(root).parts)
