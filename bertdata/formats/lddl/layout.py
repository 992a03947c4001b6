"""LDDL folder layout: file names, the schema, the bin rule, and finding phase folders and
what their manifests and footers record."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from bertdata.errors import BertdataError, ValidationError
from bertdata.fsutil import load_json
from bertdata.manifest import MANIFEST

MASKINGS = ("static", "dynamic")
BASE_SCHEMA = pa.schema([
    ("A", pa.string()),
    ("B", pa.string()),
    ("is_random_next", pa.bool_()),
    ("num_tokens", pa.uint16()),
])
MASK_FIELDS = [pa.field("masked_lm_positions", pa.binary()), pa.field("masked_lm_labels", pa.string())]
# LDDL's binned files carry their bin as a column too; its loader ignores it, we check it.
BIN_FIELD = pa.field("bin_id", pa.int64())
NUM_SAMPLES_JSON = ".num_samples.json"
# Fixed so the same rows give the same bytes whatever batches they arrived in. The loader reads
# whole files, so row groups only bound the writer's memory.
ROW_GROUP_ROWS = 8192
COMPRESSION = "snappy"  # what LDDL's own preprocessor writes
# Dictionaries pay only on the small columns; A, B and the labels are nearly all distinct.
DICTIONARY_COLUMNS = ["is_random_next", "num_tokens", "bin_id"]
_NAME = re.compile(r"shard-(\d+)\.parquet(?:_(\d+))?")


def schema_for(masking: str, binned: bool) -> pa.Schema:
    if masking not in MASKINGS:
        raise BertdataError(f"masking must be one of {', '.join(MASKINGS)}, not {masking!r}")
    fields = list(BASE_SCHEMA) + (MASK_FIELDS if masking == "static" else []) + ([BIN_FIELD] if binned else [])
    return pa.schema(fields)


def bin_of(num_tokens: np.ndarray, seq_len: int, bin_size: int) -> np.ndarray:
    """LDDL's bin rule: bins of `bin_size` tokens, the last one also taking whatever is longer."""
    return np.minimum((np.asarray(num_tokens, np.int64) - 1) // bin_size, seq_len // bin_size - 1)


def file_name(shard: int, bin_id: int | None) -> str:
    return f"shard-{shard}.parquet" + ("" if bin_id is None else f"_{bin_id}")


def name_parts(name: str) -> tuple[int, int | None]:
    """(shard, bin or None) of a `file_name`."""
    match = _NAME.fullmatch(name)
    if not match:
        raise BertdataError(f"{name}: not an LDDL file name (shard-<i>.parquet or shard-<i>.parquet_<bin>)")
    return int(match.group(1)), None if match.group(2) is None else int(match.group(2))


def loader_visible(name: str) -> bool:
    """Whether LDDL's loader would read a file of this name (its test: the last extension)."""
    return ".parquet" in os.path.splitext(name)[1]



def _phase_files(folder: Path) -> dict[int | None, dict[int, Path]]:
    """{bin (None unbinned): {shard: path}}, refusing any file the loader would read that is
    not ours to name."""
    if not folder.is_dir():
        raise ValidationError(f"{folder}: no such folder")
    found: dict[int | None, dict[int, Path]] = {}
    for root, _dirs, names in os.walk(folder):
        for name in sorted(names):
            if not loader_visible(name):
                continue
            path = Path(root) / name
            match = _NAME.fullmatch(name)
            if Path(root) != folder or not match:
                raise ValidationError(f"{path}: LDDL's loader would read this file, but it is not "
                                      "shard-<i>.parquet or shard-<i>.parquet_<bin> in the phase folder")
            bin_id = None if match.group(2) is None else int(match.group(2))
            found.setdefault(bin_id, {})[int(match.group(1))] = path
    if not found:
        raise ValidationError(f"{folder}: no shard-<i>.parquet files")
    if None in found and len(found) > 1:
        raise ValidationError(f"{found[None][min(found[None])]}: an unbinned file among binned ones; "
                              "the loader would silently skip it")
    bins = sorted(b for b in found if b is not None)
    if bins != list(range(len(bins))):
        missing = min(set(range(len(bins) + 1)) - set(bins))
        raise ValidationError(f"{folder}: bins must run 0, 1, 2, ... without gaps; bin {missing} is missing")
    return dict(sorted(found.items(), key=lambda kv: -1 if kv[0] is None else kv[0]))


def is_phase_folder(path: str | os.PathLike) -> bool:
    """Whether `path` is an LDDL phase folder: it holds shard-*.parquet* files or a .num_samples.json."""
    path = Path(path)
    return path.is_dir() and ((path / NUM_SAMPLES_JSON).exists() or any(path.glob("shard-*.parquet*")))


def find_phase_folders(root: str | os.PathLike) -> list[Path]:
    """`root` if it is a phase folder, else the phase folders below it in sorted order (not
    looking inside one, nor inside hidden folders: those of a running `bertdata shard`)."""
    root = Path(root)
    if is_phase_folder(root):
        return [root]
    found = []
    for folder, dirs, _files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        if Path(folder) != root and is_phase_folder(folder):
            found.append(Path(folder))
            dirs[:] = []
    return found


def read_manifest(folder: str | os.PathLike) -> dict[str, Any] | None:
    """The folder's manifest.json as `bertdata build` or `bertdata shard --format lddl` wrote it, or None."""
    path = Path(folder) / MANIFEST
    try:
        manifest = load_json(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as err:
        raise BertdataError(f"{path}: not a readable JSON manifest ({err})") from None
    if not isinstance(manifest, dict) or manifest.get("format") != "lddl":
        raise BertdataError(f"{path}: not the manifest of an LDDL folder written by bertdata")
    return manifest


def phase_settings(folder: str | os.PathLike) -> dict[str, Any]:
    """The sequence length, predictions per sequence and generation attributes (vocab_sha256
    among them) that the folder's manifest records: the rows alone do not tell them."""
    manifest = read_manifest(folder)
    keys = ("max_seq_length", "max_predictions_per_seq", "attrs")
    if manifest is None or not all(k in manifest for k in keys):
        raise BertdataError(f"{folder}: an LDDL folder without the {MANIFEST} that `bertdata build` "
                            "and `bertdata shard --format lddl` write; its sequence length, predictions per sequence and vocab are unknown")
    return {k: manifest[k] for k in keys}


def phase_layout(folder: str | os.PathLike) -> dict[str, Any]:
    """What the file footers say, without reading rows: {"masking", "bins": {bin: {path: rows}},
    "rows"}. Raises ValidationError for a folder the loader would trip on by name or schema."""
    layout: dict[int | None, dict[Path, int]] = {}
    masking = None
    for bin_id, shards in _phase_files(Path(folder)).items():
        layout[bin_id] = {}
        for shard in sorted(shards):
            path = shards[shard]
            try:
                meta = pq.ParquetFile(path)
            except (pa.ArrowException, OSError) as err:
                raise ValidationError(f"{path}: not a readable parquet file ({err})") from None
            file_masking = "static" if "masked_lm_positions" in meta.schema_arrow.names else "dynamic"
            if masking not in (None, file_masking):
                raise ValidationError(f"{path}: {file_masking} masking among files with {masking} masking")
            masking = file_masking
            layout[bin_id][path] = meta.metadata.num_rows
    return {"masking": masking, "bins": layout, "rows": sum(sum(v.values()) for v in layout.values())}


def folder_name(phase: int, bin_size: int | None) -> str:
    """pretrain/phase1/unbinned/parquet, pretrain/phase2/bin_size_64/parquet, ..."""
    return f"pretrain/phase{phase}/{'unbinned' if bin_size is None else f'bin_size_{bin_size}'}/parquet"
