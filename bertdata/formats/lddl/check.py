"""Checking an LDDL phase folder as LDDL's loader will use it, reading every row."""

from __future__ import annotations

import functools
import io
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from bertdata.errors import ValidationError
from bertdata.formats.lddl.codec import _split_rows, _token_table, _words
from bertdata.formats.lddl.layout import (
    NUM_SAMPLES_JSON,
    ROW_GROUP_ROWS,
    _phase_files,
    bin_of,
    schema_for,
)
from bertdata.fsutil import load_json


def read_folder(folder: str | os.PathLike) -> Iterator[tuple[Path, int | None, pa.RecordBatch]]:
    """(file, bin or None, a batch of its rows) through a phase folder, bin by bin, file by file."""
    for bin_id, shards in _phase_files(Path(folder)).items():
        for shard in sorted(shards):
            path = shards[shard]
            try:
                batches = pq.ParquetFile(path).iter_batches(batch_size=ROW_GROUP_ROWS)
                for batch in batches:
                    yield path, bin_id, batch
            except (pa.ArrowException, OSError) as err:
                raise ValidationError(f"{path}: not a readable parquet file ({err})") from None


def _columns_differ(found: pa.Schema, expected: pa.Schema) -> str:
    """How a file's columns differ from the expected ones, on one line."""
    missing = [name for name in expected.names if name not in found.names]
    extra = [name for name in found.names if name not in expected.names]
    retyped = [f"{f.name} is {found.field(f.name).type}, not {f.type}" for f in expected
               if f.name in found.names and found.field(f.name).type != f.type]
    said = ([f"missing {', '.join(missing)}"] if missing else []) + ([f"extra {', '.join(extra)}"] if extra else []) \
        + retyped
    return "; ".join(said) or f"in another order: {', '.join(found.names)}"


def _check_rows(path: Path, batch: pa.RecordBatch, first_row: int,
                token_array: pa.Array | None) -> tuple[np.ndarray, int]:
    """Row checks the loader would trip on later, or silently train on; returns num_tokens and
    the number of masked positions."""
    for name in batch.schema.names:
        if batch.column(name).null_count:
            raise ValidationError(f"{path}: column {name} has nulls")
    num_tokens = batch.column("num_tokens").to_numpy(zero_copy_only=False).astype(np.int64)
    # With a vocab, every token must be in it; without, only counted.
    split = _words if token_array is None else functools.partial(_split_rows, token_array=token_array)
    counts = []
    for what in ("A", "B"):
        counts.append(split(batch.column(what), what=what, source=str(path), error=ValidationError)[1])
    bad = np.flatnonzero(counts[0] + counts[1] + 3 != num_tokens)
    if bad.size:
        r = int(bad[0])
        raise ValidationError(f"{path}: row {first_row + r} has num_tokens {num_tokens[r]} but A and B hold "
                              f"{counts[0][r] + counts[1][r]} tokens (+3 for [CLS] [SEP] [SEP])")
    if "masked_lm_positions" not in batch.schema.names:
        return num_tokens, 0
    num_labels = split(batch.column("masked_lm_labels"), what="masked_lm_labels", source=str(path),
                       error=ValidationError)[1]
    for r, blob in enumerate(batch.column("masked_lm_positions").to_pylist()):
        try:
            pos = np.load(io.BytesIO(blob), allow_pickle=False)
        except (ValueError, OSError, TypeError):
            raise ValidationError(f"{path}: row {first_row + r} masked_lm_positions is not an np.save'd array") from None
        special = (0, counts[0][r] + 1, num_tokens[r] - 1)
        if (pos.ndim != 1 or len(pos) != num_labels[r] or np.isin(pos, special).any()
                or (len(pos) and (pos.min() < 0 or pos.max() >= num_tokens[r]))):
            raise ValidationError(f"{path}: row {first_row + r} masked_lm_positions {pos.tolist()} are not "
                                  f"{num_labels[r]} positions of A or B tokens within its {num_tokens[r]} tokens")
    return num_tokens, int(num_labels.sum())


def validate_folder(folder: str | os.PathLike, *, ranks: int = 1, bin_size: int | None = None,
                    seq_len: int | None = None, tokens: Sequence[str] | None = None) -> dict[str, Any]:
    """Check a phase folder as LDDL's loader will use it, reading every row; raise ValidationError
    naming the file and the fault, else return {"bins": {bin: [rows per file]}, "masking", "rows"}.

    Checked: file names and contiguous bins; one schema with LDDL's column types; per bin a file
    count that divides by `ranks` and sizes with largest = smallest + 1; `.num_samples.json`
    matching the files; per row num_tokens = A + B + 3 tokens, masking columns consistent, the
    row in its file's bin (exactly with `bin_size` and `seq_len`, else bins ordered by length),
    and with `tokens` every token in the vocab.

    Also returns "stats": {bin: {"tokens", "random_next", "masked"}}, totals over the bin's rows."""
    folder = Path(folder)
    phase = _phase_files(folder)
    binned = None not in phase
    token_array = None if tokens is None else _token_table(tuple(tokens))[0]
    recorded_path = folder / NUM_SAMPLES_JSON
    try:
        recorded = load_json(recorded_path.read_text())
    except FileNotFoundError:
        raise ValidationError(f"{recorded_path}: missing; LDDL's loader would count every file's rows itself") from None
    except (OSError, ValueError) as err:
        raise ValidationError(f"{recorded_path}: not a JSON object of file name -> rows ({err})") from None
    if not isinstance(recorded, dict):
        raise ValidationError(f"{recorded_path}: not a JSON object of file name -> rows")
    schema = None
    masking = None
    sizes: dict[int | None, list[int]] = {}
    stats: dict[int | None, dict[str, int]] = {}
    previous_max = 0
    for bin_id, shards in phase.items():
        where = "" if bin_id is None else f" in bin {bin_id}"
        if len(shards) % ranks:
            raise ValidationError(f"{folder}: {len(shards)} files{where} do not divide by {ranks} ranks x workers")
        bin_min, bin_max = None, 0
        sizes[bin_id] = []
        totals = stats[bin_id] = {"tokens": 0, "random_next": 0, "masked": 0}
        for shard in sorted(shards):
            path = shards[shard]
            try:
                meta = pq.ParquetFile(path)
                file_schema = meta.schema_arrow
            except (pa.ArrowException, OSError) as err:
                raise ValidationError(f"{path}: not a readable parquet file ({err})") from None
            if schema is None:
                has_mask = "masked_lm_positions" in file_schema.names
                masking = "static" if has_mask else "dynamic"
                schema = schema_for(masking, binned)
                if not binned or "bin_id" not in file_schema.names:
                    schema = pa.schema([f for f in schema if f.name != "bin_id"])
            if not file_schema.remove_metadata().equals(schema):
                raise ValidationError(f"{path}: not LDDL's columns ({_columns_differ(file_schema, schema)}); "
                                      f"LDDL's are {', '.join(f'{f.name} ({f.type})' for f in schema)}")
            rows = meta.metadata.num_rows
            if recorded.get(path.name) != rows:
                raise ValidationError(f"{path}: holds {rows} rows but {NUM_SAMPLES_JSON} says {recorded.get(path.name)}")
            sizes[bin_id].append(rows)
            first_row = 0
            for batch in meta.iter_batches(batch_size=ROW_GROUP_ROWS):
                num_tokens, masked = _check_rows(path, batch, first_row, token_array)
                totals["tokens"] += int(num_tokens.sum())
                totals["masked"] += masked
                totals["random_next"] += int(pc.sum(batch.column("is_random_next").cast(pa.int64())).as_py() or 0)
                if seq_len is not None and batch.num_rows and num_tokens.max() > seq_len:
                    raise ValidationError(f"{path}: a row has {num_tokens.max()} tokens, more than {seq_len}")
                if binned and "bin_id" in batch.schema.names and (batch.column("bin_id").to_numpy() != bin_id).any():
                    raise ValidationError(f"{path}: bin_id column disagrees with the file's bin {bin_id}")
                if binned and bin_size is not None and seq_len is not None and batch.num_rows:
                    wrong = np.flatnonzero(bin_of(num_tokens, seq_len, bin_size) != bin_id)
                    if wrong.size:
                        r = int(wrong[0])
                        raise ValidationError(f"{path}: row {first_row + r} has {num_tokens[r]} tokens, which "
                                              f"belongs in bin {int(bin_of(num_tokens[r:r + 1], seq_len, bin_size)[0])}")
                if batch.num_rows:
                    low, high = int(num_tokens.min()), int(num_tokens.max())
                    bin_min = low if bin_min is None else min(bin_min, low)
                    bin_max = max(bin_max, high)
                first_row += batch.num_rows
        if max(sizes[bin_id]) != min(sizes[bin_id]) + 1:
            raise ValidationError(f"{folder}: files{where} hold {min(sizes[bin_id])} to {max(sizes[bin_id])} rows; "
                                  "LDDL's loader needs the largest to hold exactly one more than the smallest")
        if binned and bin_min is not None and bin_min <= previous_max:
            raise ValidationError(f"{folder}: bin {bin_id} holds a row of {bin_min} tokens, no longer than "
                                  f"one of {previous_max} in a lower bin")
        previous_max = max(previous_max, bin_max)
    extra = sorted(set(recorded) - {p.name for shards in phase.values() for p in shards.values()})
    if extra:
        raise ValidationError(f"{recorded_path}: lists {extra[0]}, which is not in the folder")
    return {"masking": masking, "bins": sizes, "rows": sum(sum(v) for v in sizes.values()), "stats": stats}
