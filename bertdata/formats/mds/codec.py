"""MDS's names and bytes (see `bertdata.formats.mds`): the shard files' and samples' codec, both ways."""

from __future__ import annotations

import contextlib
import json
import os
import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from bertdata.errors import BertdataError, ValidationError
from bertdata.fsutil import load_json

PathLike = str | os.PathLike
INDEX = "index.json"
VERSION = 2
FORMAT = "mds"
# The build's splits and the folders ModernBERT's configs name (`split: train`, `split: val`).
SPLIT_FOLDERS = {"training": "train", "test": "val"}
SIZE_LIMIT = 1 << 26  # streaming's default
# Offsets are u32: a shard file stays under 4 GiB.
MAX_SIZE_LIMIT = (1 << 32) - 1
ZSTD_LEVEL = 3  # streaming's `zstd`; `zstd:<level>` names another
# Written by default so that `inspect` (and streaming with `validate_hash`) can check every file.
HASHES = ("sha1",)
COLUMN_NAMES = ("id", "input_ids", "len")


@dataclass(frozen=True)
class Schema:
    """A sample's columns, as one trainer's loader reads them: `names` sorted, as streaming's
    writer orders them; `ids` the one holding the sample's ids, in `dtype` (None: the tokenizer's,
    uint16 or uint32). The others: `id` (str), `len` (int32, the ids' count) and `metadata` (json:
    {"id": the sample's id})."""

    names: tuple[str, ...]
    ids: str
    dtype: np.dtype | None


# --mds-schema, by the reader each is written for. `input_ids`: streaming's StreamingDataset,
# ModernBERT's NoStreamingDataset; `int64`: ModernBERT's StreamingTextDataset (`streaming: true`)
# takes the column's buffer as int64 (np.frombuffer), whatever dtype it was written in;
# `eurobert`: EuroBERT's optimus (MaskingDataset reads `tokens`; its tokenize_dataset.py writes
# `tokens` as ndarray:int32 beside a `metadata` json).
SCHEMAS = {"input_ids": Schema(COLUMN_NAMES, "input_ids", None),
           "int64": Schema(COLUMN_NAMES, "input_ids", np.dtype(np.int64)),
           "eurobert": Schema(("metadata", "tokens"), "tokens", np.dtype(np.int32))}
DEFAULT_SCHEMA = "input_ids"
ID_COLUMNS = ("input_ids", "tokens")
TOKEN_DTYPES = (np.dtype(np.uint16), np.dtype(np.uint32), np.dtype(np.int64), np.dtype(np.int32))
ENCODINGS = {"id": "str", "len": "int32", "metadata": "json"}
# streaming's NDArray encoding: the code of the dtype a shape is stored in.
SHAPE_DTYPES = (np.dtype(np.uint8), np.dtype(np.uint16), np.dtype(np.uint32), np.dtype(np.uint64))
U32 = struct.Struct("<I")
# The id dtypes a reader takes (other writers' MDS too), by streaming's NDArray dtype codes.
ID_DTYPE_CODES = {8: "uint8", 16: "uint16", 32: "uint32", 33: "int32", 64: "uint64", 65: "int64"}
ID_DTYPES = set(ID_DTYPE_CODES.values())


def schema_of(name: str | None) -> Schema:
    """The schema --mds-schema names (None: the default)."""
    if (name or DEFAULT_SCHEMA) not in SCHEMAS:
        raise BertdataError(f"MDS schema {name!r}: one of {', '.join(SCHEMAS)}")
    return SCHEMAS[name or DEFAULT_SCHEMA]


def schema_dtype(schema: str | None, dtype: np.dtype) -> np.dtype:
    """The dtype ids of the tokenizer's `dtype` are stored in under `schema` (None: the default)."""
    return schema_of(schema).dtype or np.dtype(dtype)


def column_encodings(dtype: np.dtype, schema: Schema = SCHEMAS[DEFAULT_SCHEMA]) -> list[str]:
    """The encodings of the schema's columns for ids of `dtype`."""
    return [f"ndarray:{np.dtype(dtype).name}" if name == schema.ids else ENCODINGS[name] for name in schema.names]


def column_sizes(schema: Schema) -> list[int | None]:
    """Each column's fixed size in bytes (`len`'s int32), None for one of variable size."""
    return [4 if name == "len" else None for name in schema.names]


def level_of(compression: str | None) -> int | None:
    """zstd's level for a `compression` streaming names, None uncompressed; others refused."""
    if compression is None:
        return None
    name, _, level = compression.partition(":")
    if name != "zstd" or (level and not (level.isdigit() and 1 <= int(level) <= 22)):
        raise BertdataError(f"MDS compression {compression!r}: bertdata writes none or zstd (zstd:1 ... zstd:22)")
    return int(level) if level else ZSTD_LEVEL


def shard_config(dtype: np.dtype, compression: str | None, hashes: Sequence[str], size_limit: int,
                 schema: Schema = SCHEMAS[DEFAULT_SCHEMA]) -> dict:
    """What every shard file's header and index entry say of how it was written."""
    return {"column_encodings": column_encodings(dtype, schema), "column_names": list(schema.names),
            "column_sizes": column_sizes(schema), "compression": compression, "format": FORMAT,
            "hashes": list(hashes), "size_limit": size_limit, "version": VERSION}


def encode_sample(sample_id: str, ids: np.ndarray, schema: Schema = SCHEMAS[DEFAULT_SCHEMA]) -> bytes:
    """One sample as a shard file holds it: the byte sizes of its variable-size columns, then every
    column's bytes, in the schema's order."""
    n = len(ids)
    if n == 0:
        raise ValueError(f"sample {sample_id}: no ids (streaming's ndarray encoding refuses an empty array)")
    code = next(c for c, dt in enumerate(SHAPE_DTYPES) if n < (1 << (8 * dt.itemsize)))
    array = (bytes((1 << 2 | code,)) + np.array([n], SHAPE_DTYPES[code]).tobytes()
             + ids.astype(ids.dtype.newbyteorder("<")).tobytes())
    columns = {schema.ids: array, "id": sample_id.encode("utf-8"), "len": np.int32(n).tobytes(),
               "metadata": json.dumps({"id": sample_id}).encode("utf-8")}
    data = [columns[name] for name in schema.names]
    sizes = [U32.pack(len(value)) for value, size in zip(data, column_sizes(schema)) if size is None]
    return b"".join((*sizes, *data))


def encode_shard(samples: Sequence[bytes], config: bytes) -> bytes:
    """A shard file of encoded `samples`, its header holding `config`."""
    sizes = np.fromiter(map(len, samples), np.int64, len(samples))
    offsets = np.zeros(len(samples) + 1, np.int64)
    np.cumsum(sizes, out=offsets[1:])
    offsets += 4 + 4 * (len(samples) + 1) + len(config)
    if offsets[-1] > MAX_SIZE_LIMIT:
        raise ValueError(f"a shard of {int(offsets[-1]):,} bytes: MDS offsets are u32")
    return b"".join((U32.pack(len(samples)), offsets.astype("<u4").tobytes(), config, *samples))


def part_name(source: str, index: int, compression: str | None) -> str:
    """A text shard's `index`-th file before `finish_split` names it: hidden, so that nothing
    reading the folder takes it for a shard."""
    return f".part.{source}.{index:05}.{FORMAT}" + (".zstd" if compression else "")


def shard_name(index: int, compression: str | None) -> str:
    """A split's `index`-th file, as streaming's writer names it."""
    return f"shard.{index:05}.{FORMAT}" + (".zstd" if compression else "")


def index_bytes(shards: list[dict]) -> bytes:
    """`index.json` as streaming's writer writes it."""
    return json.dumps({"shards": shards, "version": VERSION}, sort_keys=True).encode("utf-8")


@dataclass(frozen=True)
class Layout:
    """Where a shard's samples' columns lie, from its entry."""

    names: list[str]
    dtypes: list[np.dtype | None]  # an ndarray column's fixed dtype, else None
    sizes: list[int | None]
    ids: str = "input_ids"  # the column of the ids (ID_COLUMNS)


def layout_of(entry: dict, where: str) -> Layout:
    names, encodings, sizes = entry["column_names"], entry["column_encodings"], entry["column_sizes"]
    ids = next((name for name in ID_COLUMNS if name in names), None)
    if ids is None:
        raise ValidationError(f"{where}: no input_ids column ({', '.join(names)})")
    dtypes = []
    for name, encoding in zip(names, encodings):
        kind, _, dtype = encoding.partition(":")
        if name == ids and not (encoding == "ndarray" or (kind == "ndarray" and dtype in ID_DTYPES)):
            raise ValidationError(f"{where}: {ids} encoded as {encoding!r}, not a 1-d ndarray of integer ids")
        dtypes.append(np.dtype(dtype) if name == ids and dtype else None)
    return Layout(names, dtypes, sizes, ids)


def decode_samples(raw: bytes, layout: Layout, count: int, path: str) -> Iterator[dict[str, Any]]:
    """Every sample of a shard's raw bytes, its structure checked; its ids (`input_ids`, or
    EuroBERT's `tokens`) as the array `input_ids`,
    `id` as str, `len` as int."""
    if len(raw) < 4 or U32.unpack_from(raw)[0] != count:
        found = U32.unpack_from(raw)[0] if len(raw) >= 4 else None
        raise ValidationError(f"{path}: holds {found} samples, but the index says {count}")
    if len(raw) < 4 * (count + 2):
        raise ValidationError(f"{path}: {len(raw):,} bytes, too few for the offsets of its {count:,} samples")
    offsets = np.frombuffer(raw, "<u4", count + 1, 4).astype(np.int64)
    if offsets[-1] != len(raw) or (np.diff(offsets) < 0).any() or offsets[0] < 4 * (count + 2):
        raise ValidationError(f"{path}: sample offsets do not run through the file's {len(raw):,} bytes")
    try:
        header = load_json(raw[4 * (count + 2):offsets[0]])
    except ValueError:
        raise ValidationError(f"{path}: the config between the offsets and the samples is not JSON") from None
    if not isinstance(header, dict):
        raise ValidationError(f"{path}: the config between the offsets and the samples is not a JSON object")
    if header.get("column_names") != layout.names:
        raise ValidationError(f"{path}: its header's columns {header.get('column_names')} are not the index's")
    for i in range(count):
        data = raw[offsets[i]:offsets[i + 1]]
        pos, sizes = 0, []
        for size in layout.sizes:
            if size is None:
                if pos + 4 > len(data):
                    raise ValidationError(f"{path}: sample {i} ends inside its column sizes")
                size = U32.unpack_from(data, pos)[0]
                pos += 4
            sizes.append(size)
        if pos + sum(sizes) != len(data):
            raise ValidationError(f"{path}: sample {i} is {len(data)} bytes, its columns {pos + sum(sizes)}")
        sample: dict[str, Any] = {}
        for name, dtype, size in zip(layout.names, layout.dtypes, sizes):
            value = data[pos:pos + size]
            pos += size
            if name == layout.ids:
                sample["input_ids"] = decode_ids(value, dtype, f"{path}: sample {i}")
            elif name == "id":
                sample[name] = value.decode("utf-8", "replace")
            elif name == "len":
                sample[name] = int(np.frombuffer(value, "<i4")[0]) if size == 4 else None
            elif name == "metadata":  # EuroBERT's: the sample's id, where it is ours
                with contextlib.suppress(ValueError, AttributeError):
                    sample["id"] = str(json.loads(value).get("id"))
        yield sample


def decode_ids(value: bytes, dtype: np.dtype | None, where: str) -> np.ndarray:
    pos = 0
    if dtype is None:  # streaming's dynamic dtype: its code first
        if not value or value[0] not in ID_DTYPE_CODES:
            raise ValidationError(f"{where}: input_ids of a dtype code that is not an integer id's")
        dtype, pos = np.dtype(ID_DTYPE_CODES[value[0]]), 1
    if pos >= len(value):
        raise ValidationError(f"{where}: input_ids without a shape")
    ndim, code = value[pos] >> 2, value[pos] & 3
    shape_dtype = SHAPE_DTYPES[code]
    pos += 1
    shape = np.frombuffer(value, shape_dtype, ndim, pos) if pos + ndim * shape_dtype.itemsize <= len(value) else None
    pos += ndim * shape_dtype.itemsize
    if ndim != 1 or shape is None or int(shape[0]) * dtype.itemsize != len(value) - pos:
        raise ValidationError(f"{where}: input_ids' shape does not match its {len(value) - pos} bytes")
    return np.frombuffer(value, dtype.newbyteorder("<"), int(shape[0]), pos)


