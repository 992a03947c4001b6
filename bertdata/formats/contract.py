"""The format contract (see `bertdata.formats`): what every format states and offers, and the
records that cross it."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, NamedTuple, Protocol

if TYPE_CHECKING:  # numpy is imported where used: the CLI makes its flags from this layer
    import numpy as np

    from bertdata.instances.documents import Documents
    from bertdata.text.shards import TextShard

PathLike = str | os.PathLike

PER_SHARD, ACROSS_SHARDS, PER_SPLIT = "per-shard", "across-shards", "per-split"
INSTANCES, SENTENCES, DOCUMENTS = "instances", "sentences", "documents"


@dataclass(frozen=True)
class PartInfo:
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
    # What `build --help` says of it under --format: what it holds, where, for which trainer (a
    # format registered at run time; a built-in one's is in its registry entry, bertdata.formats.BUILTIN).
    describe: ClassVar[str]

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

    def parts(self, unit: str) -> list[PartInfo]: ...

    def reading(self, parts: list[PartInfo], vocab_path: str | None, masking_scheme: str | None) -> Reading: ...

    def load(self, part: PartInfo, reading: Reading) -> dict[str, np.ndarray]: ...

    def slices(self, part: PartInfo, reading: Reading, rows: int) -> Iterator[dict[str, np.ndarray]]:
        """The part's rows in order, about `rows` at a time: memory bounded by a slice, not a part."""


class DocumentFormat(Format, Protocol):
    """A format holding documents (`DOCUMENTS`): what `bench` trains masked LM alone on, as
    today's encoders do. Every sample's ids hold the tokenizer's special tokens, its prefix first
    and its suffix last."""

    def training(self, units: list[str]) -> list[str]:
        """The units a trainer given their folder takes as training data (the build's training split)."""

    def count(self, unit: str) -> int:
        """The unit's training samples, from its index or metadata, without reading them."""

    def samples(self, unit: str) -> Iterator[np.ndarray]:
        """Each training sample's ids, in order; memory bounded by one file of the unit (or one row group)."""

    def recorded(self, unit: str) -> dict:
        """The options the unit's manifest.json records of how it was made (tokenizer,
        tokenizer_sha256, vocab_size, max_seq_length); {} where it has none."""


class PerShardFormat(Protocol):
    """The files a `PER_SHARD` format writes for one text shard (see `bertdata.formats.hdf5`)."""

    name: ClassVar[str]
    # How the files encode the arrays (filters, levels) where readers could tell; each phase
    # folder's manifest records it, so a change of encoding is on record beside the files.
    layout: ClassVar[dict]

    def folder(self, cfg: Any, lowercase: bool) -> str:
        """A phase's folder, relative to the output (the phase's InstanceConfig `cfg`)."""

    def file_names(self, stem: str, split: str, index: int) -> tuple[str, ...]: ...

    def write(self, paths: Sequence[PathLike], instances: Any, attrs: Mapping[str, Any], *,
              helper_thread: bool = True) -> None:
        """`helper_thread`: whether the writer may use a helper thread, as on a core of its own
        (False for a worker that shares every core with other workers)."""

    def info(self, paths: Sequence[PathLike]) -> PartInfo: ...

    def read(self, paths: Sequence[PathLike]) -> Iterator[dict[str, np.ndarray]]: ...

    def pattern(self) -> str:
        """A glob matching one file of every shard in a phase folder (its first file name)."""


@dataclass(frozen=True)
class FormatFlag:
    """A build flag of one format, `--<format>-<name>` (e.g. --mds-compression): its registry entry
    states it (bertdata.formats.BUILTIN, or the `flags` of a format registered at run time), the
    build's parser makes it, and `SplitSettings.flag` hands its value to the format's writer."""

    name: str
    help: str
    choices: tuple[str, ...] | None = None
    default: Any = None


@dataclass(frozen=True)
class DocumentTokenizer:
    """What a format holding documents records of the tokenizer that made its ids."""

    name: str  # the file's name, or "vocab.txt" for a WordPiece vocab
    sha256: str
    vocab_size: int
    prefix: tuple[int, ...]  # the special tokens its post-processor puts before one sequence ([CLS])
    suffix: tuple[int, ...]  # and after it ([SEP])
    path: str = ""  # its file, as errors name it
    max_length: int | None = None  # the longest sequence its file states, if any

    @property
    def id_dtype(self) -> np.dtype:
        import numpy as np

        return np.dtype(np.uint16 if self.vocab_size <= 1 << 16 else np.uint32)


@dataclass(frozen=True)
class SplitSettings:
    """What a `PER_SPLIT` format's writer is told of the build: the text's dataset name and case,
    the tokenizer of its documents, the samples' length (formats holding DOCUMENTS), and the
    values of the format's own flags."""

    dataset: str
    lowercase: bool
    tokenizer: DocumentTokenizer | None  # None only where the folder's name is all that is asked
    max_seq_length: int
    flags: tuple[tuple[str, Any], ...] = ()
    # True where --tokenizer gave the tokenizer (a file of Hugging Face tokenizers); False: the
    # build's WordPiece vocab, as the instance formats use it.
    tokenizer_file: bool = False
    # The tokenizer's part of a folder's name, known before the tokenizer is read (a dry run):
    # the vocab's case (lower_case_1), or the tokenizer file's name.
    label: str = ""
    language: str = ""  # the wiki's language code
    dump: str = ""  # the dump's file name

    def flag(self, name: str) -> Any:
        return dict(self.flags).get(name)

    def samples_options(self) -> dict:
        """What a manifest of samples records of how they were made (a format adds its own)."""
        t = self.tokenizer
        return {"dataset": self.dataset, "tokenizer": t.name, "tokenizer_sha256": t.sha256,
                "vocab_size": t.vocab_size, "lowercase": self.lowercase, "max_seq_length": self.max_seq_length}


class SplitFiles(Protocol):
    """The file operations a `PER_SPLIT` writer's `finish_split` and `finish_folder` are handed
    (the build's, through Beam's FileSystems, so that s3:// and gs:// work): `join`,
    `open_file(path)` (binary reading), `atomic_writer(path)` (a binary file, renamed into place
    when its block ends), `local_output(path)` (a local path whose file is put at `path` when the
    block ends), `replace(src, dest)` (its folder made) and `write_bytes(path, data)` (atomic)."""

    def join(self, *parts: str) -> str: ...

    def open_file(self, path: str) -> Any: ...

    def atomic_writer(self, path: str) -> Any: ...

    def local_output(self, path: str) -> Any: ...

    def replace(self, src: str, dest: str) -> None: ...

    def write_bytes(self, path: str, data: bytes) -> None: ...


# What a `PER_SPLIT` format's `write_part` says of the files it wrote, handed back to its
# `finish_split`: small, picklable and JSON-able (it travels between workers as a record).
Described = str | dict[str, Any] | list[Any]


class LocatedPart(NamedTuple):
    """A text shard's part as `finish_split` gets it: the folder its files are now in (under
    the build's work folder, any file system) and `write_part`'s description of them."""

    folder: str
    described: Described


# A split's manifest entry, as `finish_split` returns it: JSON-able, "files": [{"file": path
# relative to the format's folder, ...}], and counts such as "samples" (whole numbers, summed
# into the manifest's counts).
SplitEntry = dict[str, Any]


class SplitFormat(Protocol):
    """How a build writes a `PER_SPLIT` format (see `bertdata.formats`): each text shard's part,
    then each split's parts made into the format's files, then the folder's last files.
    `bertdata.formats.base.SplitFolder` states all but the two writing hooks.

    - `folder(settings)`: the folder it writes, relative to the build's output (from the
      settings' dataset, case and flags: a dry run knows no tokenizer yet).
    - `writes`: what it writes, as a dry run's line says it.
    - `options(settings)`: what its manifest records of how it was made; a finished folder of
      other options is refused without --force, one of the same reused.
    - `write_part(shard, documents, settings, local)`: a text shard's `Documents`, tokenized by
      `settings.tokenizer`, as files in the local folder `local` (the part's own, scratch),
      returning their description, which `finish_split` gets back.
    - `finish_split(split, parts, settings, folder, files)`: the split's parts, in text shard
      order (shards without a token left out), made into its files under the format's `folder`;
      returns the split's manifest entry (`SplitEntry`). The same parts give the same bytes.
    - `finish_folder(entries, settings, folder, files)`: once every split is finished, what the
      folder needs besides (a dataset card); returns what the manifest adds ({} if nothing).
    - `ours(path)`: whether a file in its folder (its path relative to the folder) is one it writes
      (cleared before a rerun).
    """

    name: ClassVar[str]
    writes: ClassVar[str]

    def folder(self, settings: SplitSettings) -> str: ...

    def options(self, settings: SplitSettings) -> dict: ...

    def write_part(self, shard: TextShard, documents: Documents, settings: SplitSettings, local: str) -> Described: ...

    def finish_split(self, split: str, parts: list[LocatedPart], settings: SplitSettings, folder: str,
                     files: SplitFiles) -> SplitEntry: ...

    def finish_folder(self, entries: list[SplitEntry], settings: SplitSettings, folder: str,
                      files: SplitFiles) -> dict: ...

    def ours(self, path: str) -> bool: ...


# The counts every text shard's part brings to its folder's manifest.
PART_COUNTS = ("documents", "sentences", "tokens")


@dataclass(frozen=True)
class SplitManifest:
    """What a `PER_SPLIT` folder's manifest.json records (besides the build's provenance), in
    its order: the format, the options it was made with (`SplitFormat.options`), what
    `finish_folder` added, the counts, each split's entry and the text shards it is made of."""

    format: str
    options: dict
    counts: dict[str, int]
    splits: list[SplitEntry]
    sources: list[dict]
    extra: dict = field(default_factory=dict)

    @classmethod
    def made(cls, format: str, options: dict, parts: list[tuple[dict, bool]], entries: list[SplitEntry],
             sources: list[dict], extra: dict) -> SplitManifest:
        """From every text shard's (counts, whether it made a part) and the splits' entries:
        the parts' counts summed, and every whole-number count all entries hold (samples, shard
        files, ...; their own tokens, special tokens included)."""
        counts = {k: sum(c.get(k, 0) for c, _made in parts) for k in PART_COUNTS}
        counts.update({k: sum(e[k] for e in entries) for k in dict.fromkeys(k for e in entries for k in e)
                       if all(type(e.get(k)) is int for e in entries)})
        counts.update(splits=len(entries), skipped_empty_text_shards=sum(not made for _c, made in parts))
        return cls(format, options, counts, entries, sources, extra)

    def record(self) -> dict:
        return {"format": self.format, "options": self.options, **self.extra, "counts": self.counts,
                "splits": self.splits, "sources": self.sources}


def hidden(path: Path, root: Path) -> bool:
    """Whether `path` is hidden below `root`: a temporary file, or inside a running tool's folder."""
    return any(part.startswith(".") for part in path.relative_to(root).parts)
