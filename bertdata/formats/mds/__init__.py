"""MosaicML Streaming's MDS: the format ModernBERT and MosaicBERT pretrain from, one sample per
document or piece of one (`bertdata.instances.samples`).

A split folder (`train/`, `val/`) holds `index.json` and the shard files `shard.NNNNN.mds`
(`shard.NNNNN.mds.zstd` compressed). Written from streaming's format (version 2, its MDSWriter):

- A shard file, little-endian: the sample count n (u32); n + 1 byte offsets (u32), each from the
  file's start, the last one its size; the shard's config as JSON (`json.dumps(sort_keys=True)`,
  UTF-8: what the index entry says of columns, compression, hashes, size limit, format and
  version); the samples.
- A sample: the byte size (u32) of each variable-size column, in column order; then each
  column's bytes, in column order. Columns are sorted by name: `id` (`str`: UTF-8),
  `input_ids` (`ndarray:uint16`, `ndarray:uint32` for a vocab of more than 65,536 entries,
  `ndarray:int64` with `--mds-schema int64` for ModernBERT's StreamingTextDataset:
  one byte `ndim << 2 | shape dtype code` (codes 0-3: uint8-uint64, the smallest that holds
  the length), the length in that dtype, the ids) and `len` (`int32`, fixed: no size).
  `--mds-schema eurobert` writes EuroBERT's columns instead: `metadata` (`json`, the id) and
  `tokens` (`ndarray:int32`); see codec.SCHEMAS.
- `index.json`: `{"shards": [entry, ...], "version": 2}` (`sort_keys=True`); an entry is the
  shard's config plus its sample count and `raw_data` / `zip_data`: basename, bytes and hashes
  of the file as written and, compressed, of the zstd file (`zip_data` null uncompressed).

A file is cut as streaming's writer cuts them: it starts a new one before a sample that would take
it past `size_limit` (counting 4 bytes per sample besides its encoding), never an empty one.
Uncompressed by default: ModernBERT's `NoStreamingDataset` reads only raw files.

The build writes each text shard's files on its own (`write_part`, under part names) and then
names them in order across the split and writes the index (`finish_split`), the I/O of that last
step through callables so that any file system does it.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from bertdata.errors import BertdataError, ValidationError
from bertdata.formats.base import SplitFolder
from bertdata.formats.contract import DOCUMENTS, LocatedPart, Report, SplitEntry, SplitFiles, SplitSettings, hidden
from bertdata.formats.mds import codec, reader, writer
from bertdata.formats.report import from_recipe, print_corpora, print_removed
from bertdata.formats.mds.codec import (COLUMN_NAMES, DEFAULT_SCHEMA, FORMAT, HASHES, INDEX, SCHEMAS, SIZE_LIMIT,
                                        SPLIT_FOLDERS, TOKEN_DTYPES, ZSTD_LEVEL, column_encodings, encode_sample,
                                        encode_shard, index_bytes, part_name, schema_dtype, shard_config, shard_name)
from bertdata.formats.mds.reader import (SplitInfo, is_split_folder, read_index, read_input_ids, read_samples,
                                         validate_split)
from bertdata.formats.mds.writer import finish_local_split, finish_split, write_part
from bertdata.fsutil import load_json, read_bounded
from bertdata.manifest import MANIFEST, MANIFEST_LIMIT

if TYPE_CHECKING:
    import numpy as np

__all__ = ["COLUMN_NAMES", "DEFAULT_SCHEMA", "FORMAT", "HASHES", "INDEX", "MDS", "SCHEMAS", "SIZE_LIMIT",
           "SPLIT_FOLDERS", "TOKEN_DTYPES", "ZSTD_LEVEL", "MdsSplits", "SplitInfo", "codec", "column_encodings", "encode_sample", "encode_shard",
           "finish_local_split", "finish_split", "index_bytes", "is_split_folder", "part_name",
           "read_index", "read_input_ids", "read_samples", "reader", "schema_dtype", "shard_config", "shard_name", "validate_split",
           "write_part", "writer"]


def _manifest_splits(manifest: Path) -> list[str]:
    """The split folders an MDS manifest of a build names; none where it is no such manifest."""
    with contextlib.suppress(BertdataError, ValueError, AttributeError, TypeError):
        recorded = load_json(read_bounded(manifest, MANIFEST_LIMIT, "manifest"))
        if recorded.get("format") == FORMAT:
            return [SPLIT_FOLDERS[entry["split"]] for entry in recorded.get("splits", [])
                    if entry.get("split") in SPLIT_FOLDERS]
    return []


def _split_folder(unit: str) -> Path:
    return Path(unit).parent if os.path.basename(unit) == INDEX else Path(unit)


@dataclass(frozen=True)
class MdsSplits(SplitFolder):
    """MosaicML Streaming's MDS: one unit per split folder (index.json and its shards); a build
    writes a text shard's files where its samples are made and indexes them per split."""

    name: ClassVar[str] = "mds"
    holds: ClassVar[str] = DOCUMENTS
    # Bytes written per byte of clean text (uint16 ids, uncompressed), measured on tests/data/shard_A.txt
    # in samples of 128 ids (0.398 at 1,024; zstd 0.313): what the build's disk check counts on.
    disk_per_text_byte: ClassVar[dict] = {None: 0.453}
    writes: ClassVar[str] = "train/ and val/ folders of MDS shard files and index.json, whatever the phases"
    files: ClassVar[tuple[str, ...]] = tuple(f"{split}/{name}" for split in SPLIT_FOLDERS.values()
                                             for name in (INDEX, "shard.*"))
    counted: ClassVar[tuple[str, ...]] = ("samples", "tokens")
    files_counted: ClassVar[tuple[str, str]] = ("shards", "shard file")

    # --- how a build writes it (bertdata.formats.SplitFormat) ---

    def options(self, settings: SplitSettings) -> dict:
        return {**settings.samples_options(),
                "dtype": schema_dtype(settings.flag("schema"), settings.tokenizer.id_dtype).name,
                "compression": settings.flag("compression"), "schema": settings.flag("schema") or DEFAULT_SCHEMA}

    def write_part(self, shard, documents, settings: SplitSettings, local: str) -> dict:
        """The text shard's samples as MDS files in `local`: their index entries and tokens."""
        from bertdata.instances.samples import make_samples

        samples = make_samples(documents, settings.tokenizer, settings.max_seq_length, shard.stem)
        return {"entries": write_part(samples, local, compression=settings.flag("compression"),
                                      schema=settings.flag("schema")),
                "tokens": int(samples.offsets[-1])}

    def finish_split(self, split: str, parts: list[LocatedPart], settings: SplitSettings, folder: str,
                     files: SplitFiles) -> SplitEntry:
        """The parts' files named in order across the split and its index.json written last."""
        where = files.join(folder, SPLIT_FOLDERS[split])
        located = {(e["zip_data"] or e["raw_data"])["basename"]: files.join(part, (e["zip_data"] or e["raw_data"])["basename"])
                   for part, described in parts for e in described["entries"]}
        figures = finish_split([described["entries"] for _part, described in parts],
                               lambda old, new: files.replace(located[old], files.join(where, new)),
                               lambda name, data: files.write_bytes(files.join(where, name), data))
        compression = settings.flag("compression")
        names = [shard_name(i, compression) for i in range(figures["shards"])] + [INDEX]
        return {**figures, "tokens": sum(described["tokens"] for _part, described in parts),
                "files": [{"file": f"{SPLIT_FOLDERS[split]}/{name}"} for name in names]}

    # --- finding, reading and checking what is written ---

    def claims(self, path: str) -> bool:
        """A split folder, or its index.json."""
        return is_split_folder(path) or (os.path.basename(path) == INDEX and is_split_folder(os.path.dirname(path)))

    def find(self, folder: str) -> list[str]:
        """The split folders below `folder`, and every split a build's manifest names there even
        where its index is gone or garbled: its check then names the fault."""
        root = Path(folder)
        found = set()
        for d, _dirs, files in os.walk(root):
            if INDEX in files and not hidden(Path(d) / INDEX, root) and is_split_folder(d):
                found.add(str(Path(d)))
            if MANIFEST in files and not hidden(Path(d) / MANIFEST, root):
                found.update(str(Path(d) / split) for split in _manifest_splits(Path(d) / MANIFEST))
        return sorted(found)

    # --- what bench trains on (bertdata.formats.DocumentFormat) ---

    def training(self, units: list[str]) -> list[str]:
        """The split folders of the build's training split (train/)."""
        return [u for u in units if _split_folder(u).name == SPLIT_FOLDERS["training"]]

    def count(self, unit: str) -> int:
        try:
            return sum(int(entry["samples"]) for entry in read_index(_split_folder(unit)))
        except (TypeError, ValueError):
            raise ValidationError(f"{_split_folder(unit) / INDEX}: a shard's sample count is not a number") from None

    def samples(self, unit: str) -> Iterator[np.ndarray]:
        return read_input_ids(_split_folder(unit))

    def recorded(self, unit: str) -> dict:
        return super().recorded(str(_split_folder(unit)))

    def inspect(self, units: list[str], report: Report) -> None:
        """Validate each split folder and print its figures; ids are checked against the report's
        vocab, else the vocab size a manifest beside it records."""
        for unit in units:
            folder = _split_folder(unit)
            vocab_size = len(report.vocab) if report.vocab is not None else self.recorded(unit).get("vocab_size")
            try:
                info = validate_split(folder, vocab_size)
            except ValidationError as err:
                report.failures.append(str(err))
                report.out(f"MDS split {folder}: INVALID")
                continue
            report.out(f"MDS split {folder}: {info.shards} shard files ({info.compression or 'uncompressed'}), "
                       f"{info.samples:,} samples, {info.tokens:,} {info.dtype} tokens, {info.mean_length:.1f} "
                       f"per sample (longest {info.longest:,})"
                       + ("" if vocab_size else " (ids not checked: no vocab size known)"))
            if from_recipe(folder):
                print_corpora(report, ((s.get("id"), len(s["input_ids"])) for s in read_samples(folder)))
                print_removed(report, folder)
            if report.show:
                for i, sample in zip(range(report.show), read_samples(folder)):
                    report.out(f"  #{i} {sample.get('id')}: {sample['input_ids'][:32].tolist()}"
                               + (" ..." if len(sample["input_ids"]) > 32 else ""))


MDS = MdsSplits()
