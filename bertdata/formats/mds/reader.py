"""Reading and checking MDS split folders (see `bertdata.formats.mds`), one shard file in memory at
a time."""

from __future__ import annotations

import contextlib
import hashlib
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bertdata.errors import ValidationError
from bertdata.formats.mds.codec import FORMAT, INDEX, VERSION, PathLike, decode_samples, layout_of

# The hashes streaming writes: those hashlib makes, checked; xxhash's, which needs a package
# bertdata does not install, taken unchecked.
CHECKED_HASHES = frozenset({"md5", "sha1", "sha224", "sha256", "sha384", "sha512", "sha3_224", "sha3_256",
                            "sha3_384", "sha3_512", "blake2b", "blake2s"})
UNCHECKED_HASHES = frozenset({"xxh32", "xxh64", "xxh128", "xxh3_64", "xxh3_128"})
from bertdata.fsutil import load_json


def read_index(folder: PathLike) -> list[dict]:
    """The shard entries of the split folder's index.json; a bad one raises ValidationError."""
    path = Path(folder) / INDEX
    try:
        index = load_json(path.read_bytes())
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
        _check_entry(entry, f"{path}: shard {i}")
    return index["shards"]


def _count(value: Any) -> bool:
    return type(value) is int and value >= 0


def _check_entry(entry: dict, where: str) -> None:
    """An index entry's fields of the types streaming writes, before any is used: its columns,
    its count, and its files (a plain name in the split folder, a byte count, hashes this
    reader checks)."""
    names, encodings, sizes = entry["column_names"], entry["column_encodings"], entry["column_sizes"]
    if not (isinstance(names, list) and isinstance(encodings, list) and isinstance(sizes, list)
            and len(names) == len(encodings) == len(sizes) and all(isinstance(n, str) for n in names)
            and all(isinstance(e, str) for e in encodings) and all(z is None or _count(z) for z in sizes)):
        raise ValidationError(f"{where}: its column names, encodings and sizes are not three lists of one length")
    if not _count(entry["samples"]):
        raise ValidationError(f"{where}: its sample count {entry['samples']!r} is not a whole number")
    for key in ("raw_data", "zip_data"):
        info = entry.get(key)
        if info is None and key == "zip_data":
            continue
        name = info.get("basename") if isinstance(info, dict) else None
        if not (isinstance(name, str) and name not in ("", ".", "..") and "/" not in name and "\\" not in name
                and "\0" not in name):
            raise ValidationError(f"{where}: its {key} names no file of the split folder ({name!r})")
        if not _count(info.get("bytes")):
            raise ValidationError(f"{where}: its {key} size {info.get('bytes')!r} is not a byte count")
        hashes = info.get("hashes") or {}
        if not isinstance(hashes, dict) or not all(isinstance(d, str) for d in hashes.values()):
            raise ValidationError(f"{where}: its {key} hashes are not a mapping of algorithm to hex digest")
        unknown = sorted(algo for algo in hashes if algo not in CHECKED_HASHES and algo not in UNCHECKED_HASHES)
        if unknown:
            raise ValidationError(f"{where}: its {key} hashes {unknown[0]!r}, not one streaming writes "
                                  f"({', '.join(sorted(CHECKED_HASHES | UNCHECKED_HASHES))})")


def _file(folder: Path, info: dict, where: str) -> bytes:
    """A shard's file checked against its entry: its size, before it is read (a device named as
    a shard would be read without end), and every recorded hash."""
    path = folder / info["basename"]
    try:
        mode = path.stat()
        if not stat.S_ISREG(mode.st_mode):
            raise ValidationError(f"{path}: not a regular file, but {where} lists it as a shard file")
        size = mode.st_size
        data = path.read_bytes() if size == info["bytes"] else b""
    except FileNotFoundError:
        raise ValidationError(f"{path}: missing, but {where} lists it") from None
    except OSError as err:
        raise ValidationError(f"{path}: unreadable ({err.strerror or err}), but {where} lists it") from None
    if size != info["bytes"] or len(data) != size:
        raise ValidationError(f"{path}: {size:,} bytes, but {where} says {info['bytes']:,} (truncated, or "
                              "not this index's file)")
    for algo, digest in (info.get("hashes") or {}).items():
        if algo in CHECKED_HASHES and hashlib.new(algo, data).hexdigest() != digest:
            raise ValidationError(f"{path}: its {algo} differs from the one {where} records")
    return data


def _raw(folder: Path, entry: dict, where: str) -> bytes:
    """A shard's raw bytes, decompressed where the file is zstd."""
    if entry.get("zip_data"):
        if not str(entry.get("compression") or "").startswith("zstd"):
            raise ValidationError(f"{folder / entry['zip_data']['basename']}: compression "
                                  f"{entry.get('compression')!r}; bertdata reads raw or zstd shards")
        # Imported here: the GPU check's machine reads raw shards and has no zstandard.
        import zstandard

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
            if algo in CHECKED_HASHES and hashlib.new(algo, raw).hexdigest() != digest:
                raise ValidationError(f"{folder / entry['zip_data']['basename']}: decompressed, its {algo} differs "
                                      f"from the one {where} records")
        return raw
    return _file(folder, entry["raw_data"], where)


def read_samples(folder: PathLike) -> Iterator[dict[str, Any]]:
    """Every sample of a split folder, in order, as {"id", "input_ids", "len"} (the columns it
    has); one shard file in memory at a time. A fault raises ValidationError naming the file."""
    folder = Path(folder)
    for i, entry in enumerate(read_index(folder)):
        where = f"{folder / INDEX} (shard {i})"
        layout = layout_of(entry, where)
        yield from decode_samples(_raw(folder, entry, where), layout, entry["samples"],
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
        layout = layout_of(entry, where)
        for sample in decode_samples(_raw(folder, entry, where), layout, entry["samples"], path):
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
        shards = load_json(index.read_bytes()).get("shards")
        return isinstance(shards, list) and all(isinstance(s, dict) and s.get("format") == FORMAT for s in shards)
    return False


