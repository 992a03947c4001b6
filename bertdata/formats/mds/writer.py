"""Writing MDS (see `bertdata.formats.mds`): a text shard's files under part names, then a split's
files named in order and its index.json."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from bertdata.errors import BertdataError
from bertdata.formats.mds.codec import (HASHES, INDEX, MAX_SIZE_LIMIT, SIZE_LIMIT, TOKEN_DTYPES, PathLike,
                                        encode_sample, encode_shard, index_bytes, level_of, part_name, schema_dtype,
                                        schema_of, shard_config, shard_name)
from bertdata.fsutil import atomic_path
from bertdata.instances.samples import Samples


def _hashes(data: bytes, algorithms: Sequence[str]) -> dict[str, str]:
    return {algo: hashlib.new(algo, data).hexdigest() for algo in algorithms}


def write_part(samples: Samples, folder: PathLike, size_limit: int = SIZE_LIMIT, compression: str | None = None,
               hashes: Sequence[str] = HASHES, schema: str | None = None) -> list[dict]:
    """One text shard's samples as one or more shard files in the local `folder`, each written
    under a temporary name and renamed to its part name when whole, their ids in the dtype of
    `schema` (codec.SCHEMAS; None: the default). Returns each file's index entry, in order, its
    basename the part name (`finish_split` renames it). Bad arguments are refused before anything
    is written."""
    level = level_of(compression)
    if np.dtype(samples.tokens.dtype) not in TOKEN_DTYPES[:2]:
        raise ValueError(f"{samples.source}: ids of {samples.tokens.dtype}; a tokenizer's ids are uint16 or uint32")
    layout = schema_of(schema)
    dtype = schema_dtype(schema, samples.tokens.dtype)
    tokens = samples.tokens.astype(dtype, copy=False)
    if not 0 < size_limit <= MAX_SIZE_LIMIT:
        raise BertdataError(f"MDS size limit {size_limit:,}: between 1 and {MAX_SIZE_LIMIT:,} bytes (u32 offsets)")
    if list(hashes) != sorted(set(hashes)) or any(algo not in hashlib.algorithms_guaranteed for algo in hashes):
        raise BertdataError(f"MDS hashes {list(hashes)}: distinct, sorted, of {sorted(hashlib.algorithms_guaranteed)}")
    lengths = np.diff(samples.offsets)
    if len(lengths) and int(lengths.min()) <= 0:
        raise ValueError(f"{samples.source}: sample {int(np.argmin(lengths))} holds no ids")
    config = shard_config(dtype, compression, hashes, size_limit, layout)
    config_bytes = json.dumps(config, sort_keys=True).encode("utf-8")
    compressor = None
    if level is not None:
        # Imported here: the GPU check's machine writes raw shards and has no zstandard.
        import zstandard

        compressor = zstandard.ZstdCompressor(level=level)
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
        sample = encode_sample(samples.sample_id(i), tokens[samples.offsets[i]:samples.offsets[i + 1]], layout)
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


