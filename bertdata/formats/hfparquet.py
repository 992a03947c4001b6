"""Tokenized parquet as Hugging Face `datasets` loads it (`--format parquet`): one row per document
or piece of one, the same samples as MDS (`bertdata.instances.samples`).

A dataset folder holds a dataset card `README.md` and one folder per split, `train/` and
`validation/` (the build's training and test splits), each with files named as the hub names a
split's shards: `train/train-00000-of-00012.parquet`. Every file has two columns, `input_ids`
(list<int32>: the sample's ids, special tokens included) and `id` (string: its text shard,
document and piece), in row groups of at most ROW_GROUP_ROWS rows, so that a reader's memory is
bounded by one. The card's YAML header names each split's files (`configs`), so that
`datasets.load_dataset("parquet", data_dir=folder)` and the hub take the folder as it is.

The build writes one file per text shard (`write_part`, under a part name), then names them per
split in the text shards' order (`finish_split`) and writes the card (`write_card`), the I/O of
those steps through callables so that any file system does it. These files are not LDDL's:
LDDL's are `shard-<i>.parquet[_<bin>]` in phase folders, and neither format claims the other's.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from bertdata.errors import ValidationError
from bertdata.formats.base import SplitFolder
from bertdata.formats.contract import DOCUMENTS, LocatedPart, Report, SplitEntry, SplitFiles, SplitSettings
from bertdata.formats.report import from_recipe, print_corpora, print_removed
from bertdata.fsutil import atomic_path, size_text
from bertdata.instances.samples import Samples

PathLike = str | os.PathLike
SCHEMA = pa.schema([("input_ids", pa.list_(pa.int32())), ("id", pa.string())])
# The build's splits and the names the hub gives them.
SPLIT_FOLDERS = {"training": "train", "test": "validation"}
# Fixed, so that the same rows make the same bytes; 2,048 rows of 1,024 ids are 8 MiB.
ROW_GROUP_ROWS = 2048
COMPRESSION = "zstd"
CARD = "README.md"
# A card is a page of text; a bound keeps a link to /dev/zero (the hub's cache is links) from being
# read until memory runs out.
CARD_LIMIT = 1 << 24
LICENSE = "cc-by-sa-4.0"  # Wikipedia's text license
_NAME = re.compile(r"(?P<split>[a-z]+)-(?P<index>\d{5})-of-(?P<count>\d{5})\.parquet")
# The hub's size categories, by rows: the first whose bound exceeds the count.
_SIZES = [(10 ** 3, "n<1K"), (10 ** 4, "1K<n<10K"), (10 ** 5, "10K<n<100K"), (10 ** 6, "100K<n<1M"),
          (10 ** 7, "1M<n<10M"), (10 ** 8, "10M<n<100M"), (10 ** 9, "100M<n<1B"), (10 ** 10, "1B<n<10B"),
          (10 ** 11, "10B<n<100B"), (10 ** 12, "100B<n<1T")]


def part_name(source: str) -> str:
    """A text shard's file before `finish_split` names it: hidden, so that no reader of the
    folder takes it for a split's file."""
    return f".part.{source}.parquet"


def file_name(split: str, index: int, count: int) -> str:
    """A split's `index`-th of `count` files, relative to the dataset folder."""
    return f"{split}/{split}-{index:05}-of-{count:05}.parquet"


def table_of(samples: Samples) -> pa.Table:
    """The samples as rows (ids widened to int32, the one list type the schema has)."""
    values = pa.array(np.asarray(samples.tokens, dtype=np.int32))
    ids = pa.ListArray.from_arrays(pa.array(np.asarray(samples.offsets, dtype=np.int32)), values)
    return pa.Table.from_arrays([ids, pa.array([samples.sample_id(i) for i in range(len(samples))],
                                               pa.string())], schema=SCHEMA)


def write_part(samples: Samples, folder: PathLike) -> dict:
    """One text shard's samples as one parquet file in the local `folder`, written under a
    temporary name and renamed to its part name when whole. Returns its entry for
    `finish_split`: {"basename", "rows", "tokens", "bytes", "sha256"}."""
    if int(samples.offsets[-1]) >= 1 << 31:
        raise ValueError(f"{samples.source}: {int(samples.offsets[-1]):,} ids, past a list<int32> column's offsets")
    table = table_of(samples)
    path = Path(folder) / part_name(samples.source)
    with atomic_path(path) as tmp:
        pq.write_table(table, tmp, row_group_size=ROW_GROUP_ROWS, compression=COMPRESSION,
                       use_dictionary=False, write_statistics=False)
        data = tmp.read_bytes()
    return {"basename": path.name, "rows": len(samples), "tokens": int(samples.offsets[-1]), "bytes": len(data),
            "sha256": hashlib.sha256(data).hexdigest()}


def finish_split(split: str, entries: Sequence[dict], rename: Callable[[str, str], None]) -> dict:
    """Name one split's files in the order given (the text shards'): `rename(part basename,
    file_name(split, i, n))` moves each. Returns the split's figures: {"split", "files", "rows",
    "tokens", "bytes", "sha256": {file: digest}}, what `write_card` and the manifest take."""
    if split not in SPLIT_FOLDERS.values():
        raise ValueError(f"split {split!r}: one of {', '.join(SPLIT_FOLDERS.values())}")
    names = [file_name(split, i, len(entries)) for i in range(len(entries))]
    for entry, name in zip(entries, names):
        rename(entry["basename"], name)
    return {"split": split, "files": len(entries), "rows": sum(e["rows"] for e in entries),
            "tokens": sum(e["tokens"] for e in entries), "bytes": sum(e["bytes"] for e in entries),
            "sha256": {name: e["sha256"] for name, e in zip(names, entries)}}


def finish_local_split(split: str, entries: Sequence[dict], parts_folder: PathLike, dataset_folder: PathLike) -> dict:
    """`finish_split` on the local file system: the parts moved from `parts_folder` into
    `dataset_folder/split/` (made if absent)."""
    (Path(dataset_folder) / split).mkdir(parents=True, exist_ok=True)
    return finish_split(split, entries, lambda old, new: os.replace(Path(parts_folder) / old,
                                                                  Path(dataset_folder) / new))


@dataclass(frozen=True)
class Card:
    """What the dataset card says besides its splits' figures."""

    pretty_name: str  # e.g. "English Wikipedia 20240601, bert-base-uncased WordPiece"
    language: str  # the wiki's language code, e.g. "en"
    dump: str  # the dump that made it, e.g. "enwiki-20240601-pages-articles-multistream.xml.bz2"
    build: str  # the build that made it: bertdata's version and the options that shape the rows
    tokenizer: str  # e.g. "WordPiece vocab.txt (sha256 ...), lower case"


def size_category(rows: int) -> str:
    return next((name for bound, name in _SIZES if rows < bound), "n>1T")


def card_text(figures: Sequence[Mapping], card: Card) -> str:
    """The dataset card: the hub's YAML header (license, language, size category, pretty name,
    a default config whose data_files name each split's files) and a body saying what made it.
    `figures`: `finish_split`'s, one per split, in the order to list them."""
    rows = sum(f["rows"] for f in figures)
    files = "\n".join(f"  - split: {f['split']}\n    path: {f['split']}/{f['split']}-*.parquet" for f in figures)
    table = "\n".join(f"| {f['split']} | {f['files']:,} | {f['rows']:,} | {f['tokens']:,} |" for f in figures)
    # A JSON string is a YAML double-quoted scalar: a name holding quotes, a newline or "---"
    # stays one value of the header.
    name = json.dumps(card.pretty_name, ensure_ascii=False)
    return f"""---
license: {LICENSE}
language:
- {card.language}
size_categories:
- {size_category(rows)}
task_categories:
- fill-mask
pretty_name: {name}
configs:
- config_name: default
  data_files:
{files}
---

# {" ".join(card.pretty_name.split())}

Wikipedia text tokenized for masked-language-model pretraining: one row per article, or per piece
of an article longer than the samples' length, cut at sentence boundaries, with the tokenizer's
special tokens around each. `input_ids` holds the ids; `id` names the text shard, the article's
place in it and the piece.

| split | files | rows | tokens |
| --- | ---: | ---: | ---: |
{table}

- Dump: {card.dump}
- Tokenizer: {card.tokenizer}
- Made by: {card.build}

The text is Wikipedia's, under the Creative Commons Attribution-ShareAlike 4.0 license.
"""


def write_card(figures: Sequence[Mapping], card: Card, write_file: Callable[[str, bytes], None]) -> None:
    """`write_file(CARD, data)`: the dataset card, written once every split is finished."""
    write_file(CARD, card_text(figures, card).encode("utf-8"))


# ---------------------------------------------------------------- reading and checking


def split_files(folder: PathLike, split: str) -> list[Path]:
    """A split's files in order, checked by name: `<split>-<i>-of-<n>.parquet` for every i below
    one n, no gap, no other parquet file; ValidationError naming what is wrong."""
    root = Path(folder) / split
    found: dict[int, Path] = {}
    counts = set()
    for path in sorted(root.glob("*.parquet")):
        match = _NAME.fullmatch(path.name)
        if not match or match["split"] != split:
            raise ValidationError(f"{path}: not a file of split {split} ({split}-<i>-of-<n>.parquet)")
        found[int(match["index"])] = path
        counts.add(int(match["count"]))
    if not found:
        raise ValidationError(f"{root}: no {split}-<i>-of-<n>.parquet files")
    if len(counts) > 1:
        raise ValidationError(f"{root}: its files say different counts ({', '.join(map(str, sorted(counts)))})")
    count = counts.pop()
    missing = sorted(set(range(count)) - set(found))
    if missing or max(found) >= count:
        raise ValidationError(f"{root / file_name(split, missing[0] if missing else max(found), count).split('/')[1]}: "
                              f"{'missing' if missing else 'past the count'}; the split has {count} files")
    return [found[i] for i in range(count)]


def splits_of(folder: PathLike) -> list[str]:
    """The split folders a dataset folder holds, in SPLIT_FOLDERS' order."""
    return [s for s in SPLIT_FOLDERS.values() if (Path(folder) / s).is_dir()]


def _parquet(path: Path) -> pq.ParquetFile:
    try:
        f = pq.ParquetFile(path)
    except (pa.ArrowException, OSError) as err:
        raise ValidationError(f"{path}: not a readable parquet file ({err})") from None
    if not f.schema_arrow.equals(SCHEMA):
        raise ValidationError(f"{path}: columns {f.schema_arrow.to_string(show_schema_metadata=False)!r}, not "
                              "input_ids list<int32> and id string")
    return f


def read_rows(folder: PathLike, split: str) -> Iterator[tuple[str, np.ndarray]]:
    """Every row of a split, in order, as (id, input_ids); one row group in memory at a time."""
    for path in split_files(folder, split):
        f = _parquet(path)
        try:
            for group in range(f.num_row_groups):
                table = f.read_row_group(group)
                lists = table.column("input_ids").combine_chunks()
                values = lists.values.to_numpy(zero_copy_only=False)
                offsets = lists.offsets.to_numpy()
                for i, sample_id in enumerate(table.column("id").to_pylist()):
                    yield sample_id, values[offsets[i]:offsets[i + 1]]
        except (pa.ArrowException, OSError) as err:
            raise ValidationError(f"{path}: unreadable rows ({err})") from None


def read_input_ids(folder: PathLike, split: str) -> Iterator[np.ndarray]:
    """Each row's ids, in order: what a trainer reads."""
    for _id, ids in read_rows(folder, split):
        yield ids


@dataclass(frozen=True)
class SplitInfo:
    split: str
    files: int
    rows: int
    tokens: int
    longest: int

    @property
    def mean_length(self) -> float:
        return self.tokens / max(self.rows, 1)


def validate_split(folder: PathLike, split: str, vocab_size: int | None = None) -> SplitInfo:
    """Check one split: its files by name, each a whole parquet file of the schema, every row
    read (no null, no empty list), every id below `vocab_size` when given."""
    rows = tokens = longest = 0
    files = split_files(folder, split)
    for path in files:
        f = _parquet(path)
        try:
            for group in range(f.num_row_groups):
                table = f.read_row_group(group)
                lists = table.column("input_ids").combine_chunks()
                if table.column("input_ids").null_count or table.column("id").null_count:
                    raise ValidationError(f"{path}: row group {group} holds nulls")
                lengths = np.diff(lists.offsets.to_numpy())
                if len(lengths) and lengths.min() == 0:
                    raise ValidationError(f"{path}: row {rows + int(np.argmin(lengths))} holds no ids")
                values = lists.values.to_numpy(zero_copy_only=False)
                if vocab_size is not None and len(values) and (values.max() >= vocab_size or values.min() < 0):
                    bad = int(values.max()) if values.max() >= vocab_size else int(values.min())
                    raise ValidationError(f"{path}: id {bad} in row group {group}, outside the vocab's "
                                          f"{vocab_size:,} tokens")
                rows += len(lengths)
                tokens += int(lengths.sum())
                longest = max(longest, int(lengths.max()) if len(lengths) else 0)
        except (pa.ArrowException, OSError) as err:
            raise ValidationError(f"{path}: unreadable rows ({err})") from None
    return SplitInfo(split, len(files), rows, tokens, longest)


def check_card(folder: PathLike) -> None:
    """The card exists and its header names a file pattern for each split folder."""
    path = Path(folder) / CARD
    try:
        with open(path, "rb") as f:
            data = f.read(CARD_LIMIT + 1)
    except FileNotFoundError:
        raise ValidationError(f"{path}: missing (the dataset card names the splits' files)") from None
    except OSError as err:
        raise ValidationError(f"{path}: not a readable dataset card ({err.strerror or err})") from None
    if len(data) > CARD_LIMIT:
        raise ValidationError(f"{path}: more than {size_text(CARD_LIMIT)}, not a dataset card")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise ValidationError(f"{path}: not a dataset card (not UTF-8 at byte {err.start})") from None
    header = text.split("---\n")[1] if text.startswith("---\n") and text.count("---\n") >= 2 else ""
    for split in splits_of(folder):
        if f"split: {split}\n" not in header:
            raise ValidationError(f"{path}: its YAML header's data_files name no split {split}")
    for split in re.findall(r"^  - split: (.+)$", header, re.M):
        if not (Path(folder) / split).is_dir():
            raise ValidationError(f"{Path(folder) / split}: missing, but {path} names the split")


def is_dataset_folder(path: PathLike) -> bool:
    """Whether `path` holds a split folder with a file named as a split's (not an LDDL folder:
    those hold shard-<i>.parquet files)."""
    path = Path(path)
    return path.is_dir() and any(_NAME.fullmatch(p.name) and p.name.startswith(f"{split}-")
                                 for split in splits_of(path) for p in (path / split).glob("*.parquet"))


@dataclass(frozen=True)
class HfParquet(SplitFolder):
    """Hugging Face parquet datasets: one unit per dataset folder (its card and split folders);
    a build writes a text shard's file where its samples are made and names them per split."""

    name: ClassVar[str] = "parquet"
    holds: ClassVar[str] = DOCUMENTS
    # Bytes written per byte of clean text, measured on tests/data/shard_A.txt in samples of 128
    # ids (0.337 at 1,024): what the build's disk check counts on.
    disk_per_text_byte: ClassVar[dict] = {None: 0.345}
    writes: ClassVar[str] = "train/ and validation/ parquet files and a dataset card, whatever the phases"
    files: ClassVar[tuple[str, ...]] = (CARD, *(f"{split}/*.parquet" for split in SPLIT_FOLDERS.values()))
    counted: ClassVar[tuple[str, ...]] = ("rows", "tokens")
    files_counted: ClassVar[tuple[str, str]] = ("parquet_files", "file")

    # --- how a build writes it (bertdata.formats.SplitFormat) ---

    def write_part(self, shard, documents, settings: SplitSettings, local: str) -> dict:
        from bertdata.instances.samples import make_samples

        return write_part(make_samples(documents, settings.tokenizer, settings.max_seq_length, shard.stem), local)

    def finish_split(self, split: str, parts: list[LocatedPart], settings: SplitSettings, folder: str,
                     files: SplitFiles) -> SplitEntry:
        located = {described["basename"]: files.join(part, described["basename"]) for part, described in parts}
        figures = finish_split(SPLIT_FOLDERS[split], [described for _part, described in parts],
                               lambda old, new: files.replace(located[old], files.join(folder, new)))
        return {"rows": figures["rows"], "tokens": figures["tokens"], "bytes": figures["bytes"],
                "parquet_files": figures["files"],
                "files": [{"file": name, "sha256": sha} for name, sha in figures["sha256"].items()]}

    def finish_folder(self, entries: list[SplitEntry], settings: SplitSettings, folder: str, files: SplitFiles) -> dict:
        """The dataset card, once every split is written."""
        figures = [{"split": SPLIT_FOLDERS[e["split"]], "files": e["parquet_files"], "rows": e["rows"],
                    "tokens": e["tokens"]} for e in entries]
        t = settings.tokenizer
        kind = f"{t.name} (sha256 {t.sha256[:12]}…)" + (", lower case" if settings.lowercase and not settings.tokenizer_file
                                                      else "")
        # A tokenizer file is named by its folder (every tokenizer.json is named alike), as the
        # dataset's folder is; a vocab by its file.
        by = settings.label if settings.tokenizer_file else t.name
        card = Card(pretty_name=f"{settings.dataset} tokenized by {by}", language=settings.language,
                    dump=settings.dump, build=f"bertdata, samples of at most {settings.max_seq_length} tokens",
                    tokenizer=kind)
        write_card(figures, card, lambda name, data: files.write_bytes(files.join(folder, name), data))
        return {}

    # --- finding, reading and checking what is written ---

    def claims(self, path: str) -> bool:
        return is_dataset_folder(path)

    def find(self, folder: str) -> list[str]:
        root = Path(folder)
        found = []
        for d, dirs, _files in os.walk(root):
            dirs[:] = sorted(x for x in dirs if not x.startswith("."))  # a running tool's folders
            if is_dataset_folder(d):
                found.append(str(Path(d)))
                dirs[:] = []
        return sorted(found)

    # --- what bench trains on (bertdata.formats.DocumentFormat) ---

    def training(self, units: list[str]) -> list[str]:
        """The dataset folders holding a training split (train/)."""
        return [u for u in units if SPLIT_FOLDERS["training"] in splits_of(u)]

    def count(self, unit: str) -> int:
        return sum(_parquet(path).metadata.num_rows for path in split_files(unit, SPLIT_FOLDERS["training"]))

    def samples(self, unit: str) -> Iterator[np.ndarray]:
        return read_input_ids(unit, SPLIT_FOLDERS["training"])

    def inspect(self, units: list[str], report: Report) -> None:
        """Validate each dataset folder (card, every split's files and rows) and print its
        figures; ids are checked against the report's vocab, else the vocab size its manifest
        records."""
        for unit in units:
            folder = Path(unit)
            vocab_size = len(report.vocab) if report.vocab is not None else self.recorded(unit).get("vocab_size")
            report.out(f"Hugging Face parquet {folder}" + ("" if vocab_size else " (ids not checked: no vocab size known)"))
            try:
                check_card(folder)
                infos = [validate_split(folder, split, vocab_size) for split in splits_of(folder)]
            except ValidationError as err:
                report.failures.append(str(err))
                report.out(f"{'INVALID':>12}")
                continue
            report.out(f"{'split':>12} {'files':>6} {'rows':>12} {'tokens':>14} {'mean':>7} {'longest':>8}")
            for info in infos:
                report.out(f"{info.split:>12} {info.files:>6} {info.rows:>12,} {info.tokens:>14,} "
                           f"{info.mean_length:>7.1f} {info.longest:>8,}")
            if from_recipe(folder):
                print_corpora(report, ((sample_id, len(ids)) for info in infos
                                       for sample_id, ids in read_rows(folder, info.split)))
                print_removed(report, folder)
            if report.show and infos:
                for i, (sample_id, ids) in zip(range(report.show), read_rows(folder, infos[0].split)):
                    report.out(f"  #{i} {sample_id}: {ids[:32].tolist()}" + (" ..." if len(ids) > 32 else ""))


PARQUET = HfParquet()
