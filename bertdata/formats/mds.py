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
  `input_ids` (`ndarray:uint16`, `ndarray:uint32` for a vocab of more than 65,536 entries:
  one byte `ndim << 2 | shape dtype code` (codes 0-3: uint8-uint64, the smallest that holds
  the length), the length in that dtype, the ids) and `len` (`int32`, fixed: no size).
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
import hashlib
import json
import os
import struct
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import zstandard

from bertdata.errors import BertdataError, ValidationError
from bertdata.formats.contract import PER_SPLIT, Report, hidden
from bertdata.fsutil import atomic_path
from bertdata.instances.samples import Samples
from bertdata.manifest import MANIFEST

PathLike = str | os.PathLike
INDEX = "index.json"
VERSION = 2
FORMAT = "mds"
# The build's splits and the folders ModernBERT's configs name (`split: train`, `split: val`).
SPLIT_FOLDERS = {"training": "train", "test": "val"}
SIZE_LIMIT = 1 << 26  # streaming's default
# Offsets are u32: a shard file stays under 4 GiB.
MAX_SIZE_LIMIT = (1 << 32) - 1
COMPRESSIONS = (None, "zstd")
ZSTD_LEVEL = 3  # streaming's `zstd`; `zstd:<level>` names another
# Written by default so that `inspect` (and streaming with `validate_hash`) can check every file.
HASHES = ("sha1",)
COLUMN_NAMES = ("id", "input_ids", "len")
TOKEN_DTYPES = (np.dtype(np.uint16), np.dtype(np.uint32))
# streaming's NDArray encoding: the code of the dtype a shape is stored in.
_SHAPE_DTYPES = (np.dtype(np.uint8), np.dtype(np.uint16), np.dtype(np.uint32), np.dtype(np.uint64))
_U32 = struct.Struct("<I")
# The id dtypes a reader takes (other writers' MDS too), by streaming's NDArray dtype codes.
_ID_DTYPE_CODES = {8: "uint8", 16: "uint16", 32: "uint32", 33: "int32", 64: "uint64", 65: "int64"}
_ID_DTYPES = set(_ID_DTYPE_CODES.values())


def column_encodings(dtype: np.dtype) -> list[str]:
    """The encodings of COLUMN_NAMES for ids of `dtype`."""
    return ["str", f"ndarray:{np.dtype(dtype).name}", "int32"]


COLUMN_SIZES = [None, None, 4]


def _level(compression: str | None) -> int | None:
    """zstd's level for a `compression` streaming names, None uncompressed; others refused."""
    if compression is None:
        return None
    name, _, level = compression.partition(":")
    if name != "zstd" or (level and not (level.isdigit() and 1 <= int(level) <= 22)):
        raise BertdataError(f"MDS compression {compression!r}: bertdata writes none or zstd (zstd:1 ... zstd:22)")
    return int(level) if level else ZSTD_LEVEL


def shard_config(dtype: np.dtype, compression: str | None, hashes: Sequence[str], size_limit: int) -> dict:
    """What every shard file's header and index entry say of how it was written."""
    return {"column_encodings": column_encodings(dtype), "column_names": list(COLUMN_NAMES),
            "column_sizes": list(COLUMN_SIZES), "compression": compression, "format": FORMAT,
            "hashes": list(hashes), "size_limit": size_limit, "version": VERSION}


def encode_sample(sample_id: str, ids: np.ndarray) -> bytes:
    """One sample as a shard file holds it."""
    n = len(ids)
    if n == 0:
        raise ValueError(f"sample {sample_id}: no ids (streaming's ndarray encoding refuses an empty array)")
    code = next(c for c, dt in enumerate(_SHAPE_DTYPES) if n < (1 << (8 * dt.itemsize)))
    key = sample_id.encode("utf-8")
    array = bytes((1 << 2 | code,)) + np.array([n], _SHAPE_DTYPES[code]).tobytes() + ids.tobytes()
    return b"".join((_U32.pack(len(key)), _U32.pack(len(array)), key, array, np.int32(n).tobytes()))


def encode_shard(samples: Sequence[bytes], config: bytes) -> bytes:
    """A shard file of encoded `samples`, its header holding `config`."""
    sizes = np.fromiter(map(len, samples), np.int64, len(samples))
    offsets = np.zeros(len(samples) + 1, np.int64)
    np.cumsum(sizes, out=offsets[1:])
    offsets += 4 + 4 * (len(samples) + 1) + len(config)
    if offsets[-1] > MAX_SIZE_LIMIT:
        raise ValueError(f"a shard of {int(offsets[-1]):,} bytes: MDS offsets are u32")
    return b"".join((_U32.pack(len(samples)), offsets.astype("<u4").tobytes(), config, *samples))


def _hashes(data: bytes, algorithms: Sequence[str]) -> dict[str, str]:
    return {algo: hashlib.new(algo, data).hexdigest() for algo in algorithms}


def part_name(source: str, index: int, compression: str | None) -> str:
    """A text shard's `index`-th file before `finish_split` names it: hidden, so that nothing
    reading the folder takes it for a shard."""
    return f".part.{source}.{index:05}.{FORMAT}" + (".zstd" if compression else "")


def shard_name(index: int, compression: str | None) -> str:
    """A split's `index`-th file, as streaming's writer names it."""
    return f"shard.{index:05}.{FORMAT}" + (".zstd" if compression else "")


def write_part(samples: Samples, folder: PathLike, size_limit: int = SIZE_LIMIT, compression: str | None = None,
               hashes: Sequence[str] = HASHES) -> list[dict]:
    """One text shard's samples as one or more shard files in the local `folder`, each written
    under a temporary name and renamed to its part name when whole. Returns each file's index
    entry, in order, its basename the part name (`finish_split` renames it). Bad arguments are
    refused before anything is written."""
    level = _level(compression)
    dtype = np.dtype(samples.tokens.dtype)
    if dtype not in TOKEN_DTYPES:
        raise ValueError(f"{samples.source}: ids of {dtype.name}; MDS columns here hold uint16 or uint32")
    if not 0 < size_limit <= MAX_SIZE_LIMIT:
        raise BertdataError(f"MDS size limit {size_limit:,}: between 1 and {MAX_SIZE_LIMIT:,} bytes (u32 offsets)")
    if list(hashes) != sorted(set(hashes)) or any(algo not in hashlib.algorithms_guaranteed for algo in hashes):
        raise BertdataError(f"MDS hashes {list(hashes)}: distinct, sorted, of {sorted(hashlib.algorithms_guaranteed)}")
    lengths = np.diff(samples.offsets)
    if len(lengths) and int(lengths.min()) <= 0:
        raise ValueError(f"{samples.source}: sample {int(np.argmin(lengths))} holds no ids")
    config = shard_config(dtype, compression, hashes, size_limit)
    config_bytes = json.dumps(config, sort_keys=True).encode("utf-8")
    compressor = None if level is None else zstandard.ZstdCompressor(level=level)
    entries: list[dict] = []

    def flush(encoded: list[bytes]) -> None:
        raw = encode_shard(encoded, config_bytes)
        name = part_name(samples.source, len(entries), compression)
        raw_info = {"basename": name, "bytes": len(raw), "hashes": _hashes(raw, hashes)}
        zip_info = None
        data = raw
        if compressor is not None:
            data = compressor.compress(raw)
            zip_info = {"basename": name, "bytes": len(data), "hashes": _hashes(data, hashes)}
            raw_info["basename"] = name[:-len(".zstd")]
        with atomic_path(Path(folder) / name) as tmp:
            tmp.write_bytes(data)
        entries.append({**config, "raw_data": raw_info, "samples": len(encoded), "zip_data": zip_info})

    # streaming's rule: a shard starts at its header's fixed bytes; each sample adds its bytes and
    # 4 of offset; a sample that would pass the limit goes to the next shard.
    empty = 4 + 4 + len(config_bytes)
    encoded: list[bytes] = []
    size = empty
    for i in range(len(samples)):
        sample = encode_sample(samples.sample_id(i), samples.sample(i))
        if encoded and size + len(sample) + 4 > size_limit:
            flush(encoded)
            encoded, size = [], empty
        encoded.append(sample)
        size += len(sample) + 4
    if encoded:
        flush(encoded)
    return entries


def _renamed(info: dict | None, basename: str) -> dict | None:
    return None if info is None else {**info, "basename": basename}


def finish_split(entries_per_part: Sequence[Sequence[dict]], rename: Callable[[str, str], None],
                 write_file: Callable[[str, bytes], None]) -> dict:
    """Name the parts' files of one split `shard.00000.mds`, ... in the order given (the text
    shards' order) and write its `index.json`: `rename(part basename, final basename)` moves
    each file, `write_file(INDEX, data)` writes the index, last (the caller binds the folders
    and makes each write whole). The same entries give the same bytes whatever order the parts
    were written in. Parts of different columns or settings are refused before any rename.
    Returns the split's figures: {"shards", "samples", "raw_bytes", "zip_bytes"}."""
    entries = [entry for part in entries_per_part for entry in part]
    settings = ("column_encodings", "column_names", "column_sizes", "compression", "hashes", "size_limit")
    for entry in entries[1:]:
        if any(entry[k] != entries[0][k] for k in settings):
            raise BertdataError(f"{entry['raw_data']['basename']}: written with other MDS settings than "
                                f"{entries[0]['raw_data']['basename']}; a split's parts must match")
    shards = []
    for i, entry in enumerate(entries):
        compression = entry["compression"]
        final = shard_name(i, compression)
        written = entry["zip_data"] or entry["raw_data"]
        rename(written["basename"], final)
        shards.append({**entry, "raw_data": _renamed(entry["raw_data"], shard_name(i, None)),
                       "zip_data": _renamed(entry["zip_data"], final if compression else None)})
    write_file(INDEX, index_bytes(shards))
    return {"shards": len(shards), "samples": sum(e["samples"] for e in shards),
            "raw_bytes": sum(e["raw_data"]["bytes"] for e in shards),
            "zip_bytes": sum(e["zip_data"]["bytes"] for e in shards if e["zip_data"])}


def index_bytes(shards: list[dict]) -> bytes:
    """`index.json` as streaming's writer writes it."""
    return json.dumps({"shards": shards, "version": VERSION}, sort_keys=True).encode("utf-8")


def finish_local_split(entries_per_part: Sequence[Sequence[dict]], parts_folder: PathLike,
                       split_folder: PathLike) -> dict:
    """`finish_split` on the local file system: the parts' files moved from `parts_folder` into
    `split_folder` (made if absent), the index written whole."""
    split = Path(split_folder)
    split.mkdir(parents=True, exist_ok=True)

    def write_file(name: str, data: bytes) -> None:
        with atomic_path(split / name) as tmp:
            tmp.write_bytes(data)

    return finish_split(entries_per_part, lambda old, new: os.replace(Path(parts_folder) / old, split / new),
                        write_file)


# ---------------------------------------------------------------- reading and checking


def read_index(folder: PathLike) -> list[dict]:
    """The shard entries of the split folder's index.json; a bad one raises ValidationError."""
    path = Path(folder) / INDEX
    try:
        index = json.loads(path.read_bytes())
    except FileNotFoundError:
        raise ValidationError(f"{path}: missing (an MDS split folder holds index.json and its shard files)") from None
    except (OSError, ValueError) as err:
        raise ValidationError(f"{path}: not a readable JSON index ({err})") from None
    if not isinstance(index, dict) or index.get("version") != VERSION or not isinstance(index.get("shards"), list):
        raise ValidationError(f"{path}: not an MDS index (version {VERSION} with a list of shards)")
    for i, entry in enumerate(index["shards"]):
        if not isinstance(entry, dict) or entry.get("format") != FORMAT:
            raise ValidationError(f"{path}: shard {i} is not of format {FORMAT!r}")
        for key in ("column_encodings", "column_names", "column_sizes", "raw_data", "samples"):
            if key not in entry:
                raise ValidationError(f"{path}: shard {i} has no {key!r}")
    return index["shards"]


def _file(folder: Path, info: dict, where: str) -> bytes:
    """A shard's file checked against its entry: its size and every recorded hash."""
    path = folder / info["basename"]
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise ValidationError(f"{path}: missing, but {where} lists it") from None
    if len(data) != info["bytes"]:
        raise ValidationError(f"{path}: {len(data):,} bytes, but {where} says {info['bytes']:,} (truncated, or "
                              "not this index's file)")
    for algo, digest in (info.get("hashes") or {}).items():
        if algo in hashlib.algorithms_available and hashlib.new(algo, data).hexdigest() != digest:
            raise ValidationError(f"{path}: its {algo} differs from the one {where} records")
    return data


def _raw(folder: Path, entry: dict, where: str) -> bytes:
    """A shard's raw bytes, decompressed where the file is zstd."""
    if entry.get("zip_data"):
        if not str(entry.get("compression") or "").startswith("zstd"):
            raise ValidationError(f"{folder / entry['zip_data']['basename']}: compression "
                                  f"{entry.get('compression')!r}; bertdata reads raw or zstd shards")
        data = _file(folder, entry["zip_data"], where)
        raw_info = entry["raw_data"]
        try:
            raw = zstandard.ZstdDecompressor().decompress(data, max_output_size=raw_info["bytes"])
        except zstandard.ZstdError as err:
            raise ValidationError(f"{folder / entry['zip_data']['basename']}: not a zstd stream ({err})") from None
        if len(raw) != raw_info["bytes"]:
            raise ValidationError(f"{folder / entry['zip_data']['basename']}: {len(raw):,} bytes decompressed, "
                                  f"but {where} says {raw_info['bytes']:,}")
        for algo, digest in (raw_info.get("hashes") or {}).items():
            if algo in hashlib.algorithms_available and hashlib.new(algo, raw).hexdigest() != digest:
                raise ValidationError(f"{folder / entry['zip_data']['basename']}: decompressed, its {algo} differs "
                                      f"from the one {where} records")
        return raw
    return _file(folder, entry["raw_data"], where)


@dataclass(frozen=True)
class _Layout:
    """Where a shard's samples' columns lie, from its entry."""

    names: list[str]
    dtypes: list[np.dtype | None]  # an ndarray column's fixed dtype, else None
    sizes: list[int | None]


def _layout(entry: dict, where: str) -> _Layout:
    names, encodings, sizes = entry["column_names"], entry["column_encodings"], entry["column_sizes"]
    if "input_ids" not in names:
        raise ValidationError(f"{where}: no input_ids column ({', '.join(names)})")
    dtypes = []
    for name, encoding in zip(names, encodings):
        kind, _, dtype = encoding.partition(":")
        if name == "input_ids" and not (encoding == "ndarray" or (kind == "ndarray" and dtype in _ID_DTYPES)):
            raise ValidationError(f"{where}: input_ids encoded as {encoding!r}, not a 1-d ndarray of integer ids")
        dtypes.append(np.dtype(dtype) if name == "input_ids" and dtype else None)
    return _Layout(names, dtypes, sizes)


def _samples_of(raw: bytes, layout: _Layout, count: int, path: str) -> Iterator[dict[str, Any]]:
    """Every sample of a shard's raw bytes, its structure checked; `input_ids` as an array,
    `id` as str, `len` as int."""
    if len(raw) < 4 or _U32.unpack_from(raw)[0] != count:
        found = _U32.unpack_from(raw)[0] if len(raw) >= 4 else None
        raise ValidationError(f"{path}: holds {found} samples, but the index says {count}")
    offsets = np.frombuffer(raw, "<u4", count + 1, 4).astype(np.int64)
    if offsets[-1] != len(raw) or (np.diff(offsets) < 0).any() or offsets[0] < 4 * (count + 2):
        raise ValidationError(f"{path}: sample offsets do not run through the file's {len(raw):,} bytes")
    try:
        header = json.loads(raw[4 * (count + 2):offsets[0]])
    except ValueError:
        raise ValidationError(f"{path}: the config between the offsets and the samples is not JSON") from None
    if header.get("column_names") != layout.names:
        raise ValidationError(f"{path}: its header's columns {header.get('column_names')} are not the index's")
    for i in range(count):
        data = raw[offsets[i]:offsets[i + 1]]
        pos, sizes = 0, []
        for size in layout.sizes:
            if size is None:
                if pos + 4 > len(data):
                    raise ValidationError(f"{path}: sample {i} ends inside its column sizes")
                size = _U32.unpack_from(data, pos)[0]
                pos += 4
            sizes.append(size)
        if pos + sum(sizes) != len(data):
            raise ValidationError(f"{path}: sample {i} is {len(data)} bytes, its columns {pos + sum(sizes)}")
        sample: dict[str, Any] = {}
        for name, dtype, size in zip(layout.names, layout.dtypes, sizes):
            value = data[pos:pos + size]
            pos += size
            if name == "input_ids":
                sample[name] = _decode_ids(value, dtype, f"{path}: sample {i}")
            elif name == "id":
                sample[name] = value.decode("utf-8", "replace")
            elif name == "len":
                sample[name] = int(np.frombuffer(value, "<i4")[0]) if size == 4 else None
        yield sample


def _decode_ids(value: bytes, dtype: np.dtype | None, where: str) -> np.ndarray:
    pos = 0
    if dtype is None:  # streaming's dynamic dtype: its code first
        if not value or value[0] not in _ID_DTYPE_CODES:
            raise ValidationError(f"{where}: input_ids of a dtype code that is not an integer id's")
        dtype, pos = np.dtype(_ID_DTYPE_CODES[value[0]]), 1
    if pos >= len(value):
        raise ValidationError(f"{where}: input_ids without a shape")
    ndim, code = value[pos] >> 2, value[pos] & 3
    shape_dtype = _SHAPE_DTYPES[code]
    pos += 1
    shape = np.frombuffer(value, shape_dtype, ndim, pos) if pos + ndim * shape_dtype.itemsize <= len(value) else None
    pos += ndim * shape_dtype.itemsize
    if ndim != 1 or shape is None or int(shape[0]) * dtype.itemsize != len(value) - pos:
        raise ValidationError(f"{where}: input_ids' shape does not match its {len(value) - pos} bytes")
    return np.frombuffer(value, dtype.newbyteorder("<"), int(shape[0]), pos)


def read_samples(folder: PathLike) -> Iterator[dict[str, Any]]:
    """Every sample of a split folder, in order, as {"id", "input_ids", "len"} (the columns it
    has); one shard file in memory at a time. A fault raises ValidationError naming the file."""
    folder = Path(folder)
    for i, entry in enumerate(read_index(folder)):
        where = f"{folder / INDEX} (shard {i})"
        layout = _layout(entry, where)
        yield from _samples_of(_raw(folder, entry, where), layout, entry["samples"],
                               str(folder / (entry.get("zip_data") or entry["raw_data"])["basename"]))


def read_input_ids(folder: PathLike) -> Iterator[np.ndarray]:
    """Each sample's ids, in order: what a trainer reads."""
    for sample in read_samples(folder):
        yield sample["input_ids"]


@dataclass(frozen=True)
class SplitInfo:
    """A valid split folder's figures."""

    folder: str
    shards: int
    samples: int
    tokens: int
    dtype: str
    compression: str | None
    longest: int

    @property
    def mean_length(self) -> float:
        return self.tokens / max(self.samples, 1)


def validate_split(folder: PathLike, vocab_size: int | None = None) -> SplitInfo:
    """Check a split folder as streaming reads it: every file its index lists, of its size and
    recorded hashes, its sample count, offsets and columns; `len` equal to the ids' count; every
    id below `vocab_size` when given; no shard file the index does not list. A fault raises
    ValidationError naming the file."""
    folder = Path(folder)
    entries = read_index(folder)
    listed = {(e.get("zip_data") or e["raw_data"])["basename"] for e in entries}
    strays = sorted(p.name for p in folder.glob(f"shard.*.{FORMAT}*") if p.name not in listed)
    if strays:
        raise ValidationError(f"{folder / strays[0]}: a shard file {INDEX} does not list")
    samples = tokens = longest = 0
    dtypes = set()
    for i, entry in enumerate(entries):
        where = f"{folder / INDEX} (shard {i})"
        path = str(folder / (entry.get("zip_data") or entry["raw_data"])["basename"])
        layout = _layout(entry, where)
        for sample in _samples_of(_raw(folder, entry, where), layout, entry["samples"], path):
            ids = sample["input_ids"]
            if "len" in sample and sample["len"] is not None and sample["len"] != len(ids):
                raise ValidationError(f"{path}: sample {sample.get('id', samples)} has len {sample['len']}, "
                                      f"but {len(ids)} ids")
            if vocab_size is not None and len(ids) and (int(ids.max()) >= vocab_size or int(ids.min()) < 0):
                bad = int(ids.max()) if int(ids.max()) >= vocab_size else int(ids.min())
                raise ValidationError(f"{path}: sample {sample.get('id', samples)} has id {bad}, "
                                      f"outside the vocab's {vocab_size:,} tokens")
            samples += 1
            tokens += len(ids)
            longest = max(longest, len(ids))
            dtypes.add(ids.dtype.name)
    return SplitInfo(str(folder), len(entries), samples, tokens, "/".join(sorted(dtypes)) or "-",
                     entries[0].get("compression") if entries else None, longest)


def is_split_folder(path: PathLike) -> bool:
    """Whether `path` is a folder holding an MDS index.json."""
    index = Path(path) / INDEX
    if not index.is_file():
        return False
    with contextlib.suppress(OSError, ValueError):
        shards = json.loads(index.read_bytes()).get("shards")
        return isinstance(shards, list) and all(isinstance(s, dict) and s.get("format") == FORMAT for s in shards)
    return False


def _vocab_size(folder: Path) -> int | None:
    """The vocab size a manifest beside the split (in it or its parent) records, if any."""
    for manifest in (folder / MANIFEST, folder.parent / MANIFEST):
        if manifest.is_file():
            with contextlib.suppress(OSError, ValueError, AttributeError):
                return json.loads(manifest.read_text(encoding="utf-8")).get("options", {}).get("vocab_size")
    return None


def folder_name(tokenizer: str) -> str:
    """A build's MDS dataset: one folder per tokenizer (named by the caller: a vocab's case, a
    tokenizer file's stem), its splits in SPLIT_FOLDERS below it."""
    return f"mds/{tokenizer}"


@dataclass(frozen=True)
class MdsSplits:
    """MosaicML Streaming's MDS: one unit per split folder (index.json and its shards); a build
    writes a text shard's files where its samples are made and indexes them per split."""

    name: ClassVar[str] = "mds"
    cut: ClassVar[str] = PER_SPLIT
    holds: ClassVar[str] = "documents"
    takes_any_file: ClassVar[bool] = False
    # Bytes written per byte of clean text (uint16 ids, uncompressed), measured on tests/data/shard_A.txt
    # in samples of 128 ids (0.398 at 1,024; zstd 0.313): what the build's disk check counts on.
    disk_per_text_byte: ClassVar[dict] = {None: 0.453}
    build_stages: ClassVar[str | None] = None  # wired by the build's format layer

    def claims(self, path: str) -> bool:
        """A split folder, or its index.json."""
        return is_split_folder(path) or (os.path.basename(path) == INDEX and is_split_folder(os.path.dirname(path)))

    def find(self, folder: str) -> list[str]:
        root = Path(folder)
        return sorted(str(Path(d)) for d, _dirs, files in os.walk(root)
                      if INDEX in files and not hidden(Path(d) / INDEX, root) and is_split_folder(d))

    def summary(self, folder: str, manifest: dict) -> str:
        """The build's line for a folder it wrote, from its manifest's counts ("samples",
        "tokens", "shards")."""
        counts = manifest["counts"]
        return (f"{self.name}: {counts['samples']:,} samples, {counts['tokens']:,} tokens in {counts['shards']} "
                f"shard file{'s' if counts['shards'] != 1 else ''} -> {folder}")

    def inspect(self, units: list[str], report: Report) -> None:
        """Validate each split folder and print its figures; ids are checked against the report's
        vocab, else the vocab size a manifest beside it records."""
        for unit in units:
            folder = Path(unit).parent if os.path.basename(unit) == INDEX else Path(unit)
            vocab_size = len(report.vocab) if report.vocab is not None else _vocab_size(folder)
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
            if report.show:
                for i, sample in zip(range(report.show), read_samples(folder)):
                    report.out(f"  #{i} {sample.get('id')}: {sample['input_ids'][:32].tolist()}"
                               + (" ..." if len(sample["input_ids"]) > 32 else ""))


MDS = MdsSplits()
