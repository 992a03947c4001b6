"""BERT pretraining data as LDDL parquet folders, the input of NVIDIA's current BERT recipe.

DeepLearningExamples' PyTorch BERT reads its data with `lddl.torch.get_bert_pretrain_data_loader`.
That loader takes every file under a folder whose last extension contains ".parquet":
`shard-<i>.parquet` unbinned, `shard-<i>.parquet_<bin>` binned by sequence length. Each row is
one instance: segments `A` and `B` as space-separated WordPieces (no [CLS]/[SEP]),
`is_random_next`, `num_tokens` (A + B + 3), and, for static masking, `masked_lm_positions` (an
`np.save`d uint16 array of positions in `[CLS] A [SEP] B [SEP]`) and `masked_lm_labels` (the
original tokens there). Without those two columns the loader masks each epoch anew, so A and B
then hold the original tokens.

The loader refuses a bin unless its file count divides by ranks x workers and its largest file
holds exactly one row more than its smallest; `write_phase` balances every bin that way.
"""

from __future__ import annotations

import contextlib
import functools
import io
import json
import os
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from bertdata.errors import BertdataError, ValidationError
from bertdata.fsutil import atomic_path, temp_basename
from bertdata.manifest import MANIFEST
from bertdata.schema import zeros

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


# --- rows <-> the six hdf5 arrays ---

@functools.lru_cache(maxsize=4)
def _token_table(tokens: tuple[str, ...]) -> tuple[pa.Array, np.ndarray]:
    """The vocab as an arrow array, and which ids survive the trip through text: the loader maps
    a token back with a dict, so a token listed twice reads back as its last id, and one with
    whitespace (or empty) would split into other tokens."""
    token_array = pa.array(list(tokens), pa.string())
    last_id: dict[str, int] = {}
    for i, t in enumerate(tokens):
        last_id[t] = i
    ok = np.fromiter((last_id[t] == i and t != "" and len(t.split()) == 1 for i, t in enumerate(tokens)),
                     dtype=bool, count=len(tokens))
    return token_array, ok


def _join_rows(token_array: pa.Array, ids: np.ndarray, keep: np.ndarray) -> pa.Array:
    """Per row, the tokens of `ids` where `keep`, joined by single spaces."""
    offsets = np.zeros(len(ids) + 1, np.int32)
    np.cumsum(keep.sum(axis=1), out=offsets[1:])
    words = token_array.take(pa.array(ids[keep]))
    return pc.binary_join(pa.ListArray.from_arrays(pa.array(offsets), words), " ")


def _special_id(tokens: Sequence[str], token: str, source: str) -> int:
    try:
        return list(tokens).index(token)
    except ValueError:
        raise BertdataError(f"{source}: the vocab has no {token}") from None


_NPY_HEADERS: dict[int, bytes] = {}


def _npy_uint16(values: np.ndarray) -> bytes:
    """`np.save` of a uint16 vector, with the header (fixed for a length) made once by np.save."""
    header = _NPY_HEADERS.get(len(values))
    if header is None:
        buf = io.BytesIO()
        np.save(buf, np.zeros(len(values), np.uint16))
        header = _NPY_HEADERS[len(values)] = buf.getvalue()[:len(buf.getvalue()) - 2 * len(values)]
    return header + values.astype("<u2").tobytes()


def rows_from_arrays(arrays: Mapping[str, np.ndarray], tokens: Sequence[str], masking: str,
                     source: str = "instances") -> pa.Table:
    """A batch of instances (the six hdf5 arrays) as LDDL rows, in the same order.

    Static: A and B as the model sees them (with [MASK], random and kept tokens) plus positions
    and labels. Dynamic: A and B with the original tokens put back and no masking columns.
    `source` names the input in errors."""
    schema = schema_for(masking, binned=False)
    ids = np.asarray(arrays["input_ids"])
    mask = np.asarray(arrays["input_mask"]) != 0
    segment = np.asarray(arrays["segment_ids"])
    positions = np.asarray(arrays["masked_lm_positions"])
    labels = np.asarray(arrays["masked_lm_ids"])
    n, seq_len = ids.shape
    if n == 0:
        return schema.empty_table()
    if seq_len > np.iinfo(np.uint16).max:
        raise BertdataError(f"{source}: sequence length {seq_len} does not fit LDDL's uint16 num_tokens")
    num_tokens = mask.sum(axis=1)
    # Segment 0 is [CLS] A [SEP], segment 1 is B [SEP]; padding is segment 0 outside the mask.
    len_a = (mask & (segment == 0)).sum(axis=1) - 2
    len_b = (mask & (segment == 1)).sum(axis=1) - 1
    rows = np.arange(n)
    col = np.arange(seq_len)
    inside = col[None, :] < num_tokens[:, None]
    expected_segment = inside & (col[None, :] >= (len_a + 2)[:, None])
    cls_id, sep_id = _special_id(tokens, "[CLS]", source), _special_id(tokens, "[SEP]", source)
    bad = (mask != inside).any(axis=1) | (segment != expected_segment).any(axis=1) | (len_a < 0) | (len_b < 0)
    if not bad.any():
        bad = ((ids[:, 0] != cls_id) | (ids[rows, len_a + 1] != sep_id) | (ids[rows, num_tokens - 1] != sep_id)
               | (ids * ~inside != 0).any(axis=1))
    if bad.any():
        raise BertdataError(f"{source}: row {int(np.flatnonzero(bad)[0])} is not [CLS] A [SEP] B [SEP] "
                            "then padding (input_ids, input_mask and segment_ids disagree)")
    num_masked = (positions != 0).sum(axis=1)
    slot = np.arange(positions.shape[1])
    in_list = slot[None, :] < num_masked[:, None]
    bad = ((positions != 0) != in_list).any(axis=1) | (in_list & (positions >= num_tokens[:, None])).any(axis=1)
    bad |= (in_list & (labels <= 0)).any(axis=1) | (~in_list & (labels != 0)).any(axis=1)
    if bad.any():
        r = int(np.flatnonzero(bad)[0])
        raise BertdataError(f"{source}: row {r} has masked_lm_positions/ids that are not a 0-padded list "
                            "of positions inside the sequence with their original token ids")
    token_array, ok = _token_table(tuple(tokens))
    shown = ids
    if masking == "dynamic":
        shown = ids.copy()
        shown[np.repeat(rows, num_masked), positions[in_list]] = labels[in_list]
    used = np.concatenate([shown[mask], labels[in_list]])
    if used.size and (used.min() < 0 or used.max() >= len(tokens)):
        raise BertdataError(f"{source}: token id {int(used.max() if used.max() >= len(tokens) else used.min())} "
                            f"is outside the vocab ({len(tokens)} tokens)")
    if not ok[used].all():
        token = tokens[int(used[~ok[used]][0])]
        raise BertdataError(f"{source}: vocab token {token!r} cannot be written as LDDL text (it is listed twice, "
                            "empty, or contains whitespace)")
    keep_a = (col[None, :] >= 1) & (col[None, :] <= len_a[:, None])
    keep_b = (col[None, :] >= (len_a + 2)[:, None]) & (col[None, :] < (num_tokens - 1)[:, None])
    columns: dict[str, Any] = {
        "A": _join_rows(token_array, shown, keep_a),
        "B": _join_rows(token_array, shown, keep_b),
        "is_random_next": pa.array(np.asarray(arrays["next_sentence_labels"]) != 0),
        "num_tokens": pa.array(num_tokens.astype(np.uint16)),
    }
    if masking == "static":
        columns["masked_lm_positions"] = pa.array(
            [_npy_uint16(positions[r, :num_masked[r]]) for r in range(n)], pa.binary())
        columns["masked_lm_labels"] = _join_rows(token_array, labels, in_list)
    return pa.Table.from_pydict(columns, schema=schema)


def _words(strings: pa.Array | pa.ChunkedArray, what: str, source: str,
           error: type[BertdataError]) -> tuple[pa.Array, np.ndarray]:
    """Space-separated tokens per row -> (all tokens flat, tokens per row), as the loader's
    `str.split()` reads them: no empty tokens, so "" is no tokens at all."""
    if isinstance(strings, pa.ChunkedArray):
        strings = strings.combine_chunks()
    if strings.null_count:
        raise error(f"{source}: column {what} has nulls")
    words = pc.utf8_split_whitespace(strings)
    flat = pc.list_flatten(words)
    counts = pc.list_value_length(words).to_numpy(zero_copy_only=False).astype(np.int64)
    nonempty = pc.not_equal(flat, "").to_numpy(zero_copy_only=False)
    if not nonempty.all():
        # arrow's split keeps the empty pieces around leading, trailing or lone whitespace.
        parent = pc.list_parent_indices(words).to_numpy()
        counts -= np.bincount(parent[~nonempty], minlength=len(counts))
        flat = flat.filter(pa.array(nonempty))
    return flat, counts


def _split_rows(strings: pa.Array | pa.ChunkedArray, token_array: pa.Array, what: str, source: str,
                error: type[BertdataError] = BertdataError) -> tuple[np.ndarray, np.ndarray]:
    """Space-separated tokens per row -> (their ids flat, tokens per row)."""
    flat, counts = _words(strings, what, source, error)
    found = pc.index_in(flat, value_set=token_array)
    if found.null_count:
        missing = flat.filter(pc.is_null(found))[0].as_py()
        raise error(f"{source}: token {missing!r} in column {what} is not in the vocab")
    return found.to_numpy(zero_copy_only=False).astype(np.int64), counts


def arrays_from_rows(table: pa.Table, tokens: Sequence[str], seq_len: int, max_predictions: int,
                     source: str = "rows") -> dict[str, np.ndarray]:
    """LDDL rows back as the six hdf5 arrays, read the way LDDL's loader reads them.

    Static rows give back exactly the arrays they were made from. Dynamic rows have no masking
    columns, so positions and ids come back as zeros and input_ids as the original tokens."""
    n = table.num_rows
    token_array, _ = _token_table(tuple(tokens))
    cls_id, sep_id = _special_id(tokens, "[CLS]", source), _special_id(tokens, "[SEP]", source)
    ids_a, len_a = _split_rows(table.column("A"), token_array, "A", source)
    ids_b, len_b = _split_rows(table.column("B"), token_array, "B", source)
    num_tokens = len_a + len_b + 3
    stored = table.column("num_tokens").to_numpy().astype(np.int64)
    if (stored != num_tokens).any():
        r = int(np.flatnonzero(stored != num_tokens)[0])
        raise BertdataError(f"{source}: row {r} has num_tokens {stored[r]} but A and B hold {num_tokens[r] - 3} tokens")
    if n and num_tokens.max() > seq_len:
        r = int(np.argmax(num_tokens))
        raise BertdataError(f"{source}: row {r} has {num_tokens[r]} tokens, more than the sequence length {seq_len}")
    col = np.arange(seq_len)
    out = zeros(n, seq_len, max_predictions)
    rows = np.arange(n)
    inside = col[None, :] < num_tokens[:, None]
    out["input_mask"][inside] = 1
    out["segment_ids"][inside & (col[None, :] >= (len_a + 2)[:, None])] = 1
    input_ids = out["input_ids"]
    input_ids[:, 0] = cls_id
    input_ids[rows, len_a + 1] = sep_id
    input_ids[rows, num_tokens - 1] = sep_id
    input_ids[(col[None, :] >= 1) & (col[None, :] <= len_a[:, None])] = ids_a
    input_ids[(col[None, :] >= (len_a + 2)[:, None]) & (col[None, :] < (num_tokens - 1)[:, None])] = ids_b
    out["next_sentence_labels"][:] = table.column("is_random_next").to_numpy(zero_copy_only=False)
    if "masked_lm_positions" in table.column_names:
        label_ids, num_labels = _split_rows(table.column("masked_lm_labels"), token_array, "masked_lm_labels", source)
        blobs = table.column("masked_lm_positions").to_pylist()
        num_positions = np.zeros(n, np.int64)
        for r, blob in enumerate(blobs):
            try:
                pos = np.load(io.BytesIO(blob), allow_pickle=False)
            except (ValueError, OSError, TypeError):
                raise BertdataError(f"{source}: row {r} masked_lm_positions is not an np.save'd array") from None
            if pos.ndim != 1 or len(pos) > max_predictions or (len(pos) and (pos.min() < 1 or pos.max() >= num_tokens[r])):
                raise BertdataError(f"{source}: row {r} masked_lm_positions {pos.tolist()} do not fit "
                                    f"{max_predictions} predictions inside its {num_tokens[r]} tokens")
            out["masked_lm_positions"][r, :len(pos)] = pos
            num_positions[r] = len(pos)
        if (num_positions != num_labels).any():
            r = int(np.flatnonzero(num_positions != num_labels)[0])
            raise BertdataError(f"{source}: row {r} has {num_positions[r]} masked positions but {num_labels[r]} labels")
        out["masked_lm_ids"][np.arange(max_predictions)[None, :] < num_labels[:, None]] = label_ids
    return out


# --- writing a phase folder ---

def parquet_writer(path: Path, schema: pa.Schema) -> pq.ParquetWriter:
    """A writer of LDDL files as `write_phase` makes them (compression, dictionaries, statistics)."""
    small = [name for name in DICTIONARY_COLUMNS if name in schema.names]
    return pq.ParquetWriter(path, schema, compression=COMPRESSION, use_dictionary=small,
                            write_statistics=small)


def loader_visible(name: str) -> bool:
    """Whether LDDL's loader would read a file of this name (its test: the last extension)."""
    return ".parquet" in os.path.splitext(name)[1]


def _prepare_folder(out_dir: Path, force: bool) -> None:
    if out_dir.exists() and not out_dir.is_dir():
        raise BertdataError(f"{out_dir}: exists and is not a folder")
    if not out_dir.parent.is_dir():
        raise BertdataError(f"{out_dir}: parent folder {out_dir.parent} does not exist")
    out_dir.mkdir(exist_ok=True)
    entries = sorted(out_dir.iterdir())
    if entries and not force:
        raise BertdataError(f"{out_dir}: folder is not empty; pass --force to replace the parquet files in it")
    for entry in entries:
        if entry.is_dir():
            # The loader walks subfolders too: their parquet files would join this phase.
            raise BertdataError(f"{entry}: a subfolder in an LDDL phase folder; the loader would read it too")
        if loader_visible(entry.name) or entry.name == NUM_SAMPLES_JSON:
            entry.unlink()


class _RowStream:
    """Rows of record batches handed out in exact counts, one row group's worth at a time."""

    def __init__(self, batches: Iterator[pa.RecordBatch]):
        self._batches = batches
        self._pending: list[pa.RecordBatch] = []
        self._pending_rows = 0

    def take(self, count: int) -> pa.Table:
        while self._pending_rows < count:
            batch = next(self._batches)
            self._pending.append(batch)
            self._pending_rows += batch.num_rows
        table = pa.Table.from_batches(self._pending)
        rest = table.slice(count)
        self._pending = rest.to_batches()
        self._pending_rows = rest.num_rows
        return table.slice(0, count).combine_chunks()


def balanced_sizes(rows: int, num_files: int) -> tuple[list[int], int]:
    """File sizes for one bin as LDDL's loader demands (largest = smallest + 1), and how many
    rows must go for that: with `rows` a multiple of `num_files` every file would be equal,
    which the loader refuses, so the last row is dropped."""
    dropped = 1 if rows % num_files == 0 else 0
    q, r = divmod(rows - dropped, num_files)
    return [q + 1] * r + [q] * (num_files - r), dropped


def check_options(where: str, *, seq_len: int, num_shards: int, bin_size: int | None, ranks: int) -> int:
    """Refuse options the loader cannot use, naming `where`; returns the number of bins."""
    if num_shards < 2:
        raise BertdataError(f"{where}: LDDL needs at least 2 files per bin (its loader wants the largest "
                            f"file one row longer than the smallest), not --num-shards {num_shards}")
    if ranks < 1 or num_shards % ranks:
        raise BertdataError(f"{where}: --num-shards {num_shards} does not divide by {ranks} ranks x workers; "
                            "LDDL's loader gives every rank and worker the same number of files")
    if not 0 < seq_len <= np.iinfo(np.uint16).max:
        raise BertdataError(f"{where}: sequence length {seq_len} does not fit LDDL's uint16 num_tokens")
    if bin_size is not None and not 0 < bin_size <= seq_len:
        raise BertdataError(f"{where}: bin size {bin_size} must be between 1 and the sequence length {seq_len}")
    return 1 if bin_size is None else seq_len // bin_size


# A phase is written in three steps, so that many workers can share it: rows are spilled per bin
# in input order ("runs": one per bin for `write_phase`, one per bin and text shard in a build),
# the runs' counts fix every file's rows (`plan_files`), and each file is then written on its own
# (`write_file`). A file's rows are known only once a whole bin is counted: that is the reason.

@dataclass(frozen=True)
class Run:
    """Rows of one bin (0 when unbinned), spilled in input order to a parquet file at `path`."""

    path: str
    bin: int
    rows: int


@dataclass(frozen=True)
class FilePlan:
    """One output file: its name, bin (None unbinned), and its rows as (run path, first row,
    row count) pieces, in order."""

    name: str
    bin: int | None
    pieces: tuple[tuple[str, int, int], ...]

    @property
    def rows(self) -> int:
        return sum(count for _path, _start, count in self.pieces)


def spill_runs(batches: Iterable[Mapping[str, np.ndarray]], tokens: Sequence[str], run_path: Callable[[int], str],
               *, seq_len: int, masking: str, bin_size: int | None, where: str) -> list[Run]:
    """Instances (batches of the six hdf5 arrays) -> rows spilled per bin to `run_path(bin)`,
    in input order; the runs of the bins that got rows, by bin."""
    writers: dict[int, pq.ParquetWriter] = {}
    rows: dict[int, int] = {}
    try:
        for index, batch in enumerate(batches):
            width = np.asarray(batch["input_ids"]).shape[1]
            if width != seq_len:
                raise BertdataError(f"{where}: input batch {index} has sequence length {width}, not {seq_len}")
            table = rows_from_arrays(batch, tokens, masking, source=f"input batch {index}")
            if bin_size is None:
                parts = {0: table}
            else:
                bins = bin_of(table.column("num_tokens").to_numpy(), seq_len, bin_size)
                parts = {int(b): table.filter(pa.array(bins == b)).append_column(
                    BIN_FIELD, pa.array(np.full(int((bins == b).sum()), b, np.int64))) for b in np.unique(bins)}
            for b, part in parts.items():
                if b not in writers:
                    writers[b] = pq.ParquetWriter(run_path(b), part.schema, compression="lz4")
                writers[b].write_table(part)
                rows[b] = rows.get(b, 0) + part.num_rows
    finally:
        for writer in writers.values():
            writer.close()
    return [Run(run_path(b), b, rows[b]) for b in sorted(rows)]


def plan_files(runs: Sequence[Run], *, num_bins: int, bin_size: int | None, num_shards: int,
               where: str) -> tuple[list[FilePlan], list[dict[str, Any]]]:
    """Cut each bin's runs (concatenated in the order given) into `num_shards` contiguous files
    of the sizes the loader demands. Returns the files and, per bin, {"bin", "rows_in", "rows",
    "dropped", "dropped_row" (the dropped row's index among its bin's rows, or None),
    "min_rows", "max_rows"}."""
    binned = bin_size is not None
    by_bin: dict[int, list[Run]] = {b: [] for b in range(num_bins)}
    for run in runs:
        by_bin[run.bin].append(run)
    rows_in = {b: sum(r.rows for r in bin_runs) for b, bin_runs in by_bin.items()}
    if not any(rows_in.values()):
        raise BertdataError(f"{where}: no instances to write")
    empty = [b for b in range(num_bins) if not rows_in[b]]
    if empty:
        # The loader refuses a bin of empty files, and would mis-number bins after a gap;
        # NGC's launch script also expects all seq_len // bin_size bins.
        raise BertdataError(f"{where}: bin {empty[0]} (num_tokens {empty[0] * bin_size + 1}-"
                            f"{(empty[0] + 1) * bin_size}) has no instances; every bin needs one, "
                            "so use a larger --bin-size")
    plans: list[FilePlan] = []
    summary = []
    for b in range(num_bins):
        sizes, dropped = balanced_sizes(rows_in[b], num_shards)
        if not min(sizes):  # a rank or loader worker given only empty files would have nothing to read
            what = f"bin {b} (num_tokens {b * bin_size + 1}-{(b + 1) * bin_size})" if binned else "the phase"
            raise BertdataError(f"{where}: {what} has {rows_in[b]} instances, too few for {num_shards} files of "
                                "at least one row each (the largest one row longer than the smallest); choose "
                                "fewer files per bin")
        pieces = [(r.path, 0, r.rows) for r in by_bin[b] if r.rows]
        for shard, size in enumerate(sizes):
            taken: list[tuple[str, int, int]] = []
            while size:
                path, start, count = pieces[0]
                step = min(size, count)
                taken.append((path, start, step))
                size -= step
                pieces[0] = (path, start + step, count - step)
                if step == count:
                    pieces.pop(0)
            plans.append(FilePlan(file_name(shard, b if binned else None), b if binned else None, tuple(taken)))
        summary.append({"bin": b if binned else None, "rows_in": rows_in[b], "rows": rows_in[b] - dropped,
                        "dropped": dropped, "dropped_row": rows_in[b] - 1 if dropped else None,
                        "min_rows": min(sizes), "max_rows": max(sizes)})
    return plans, summary


def _piece_batches(path: str, start: int, count: int) -> Iterator[pa.RecordBatch]:
    """Rows start:start+count of a run, reading only the row groups that hold them."""
    meta = pq.ParquetFile(path)
    groups, offset, first = [], 0, 0
    for g in range(meta.num_row_groups):
        n = meta.metadata.row_group(g).num_rows
        if first + n > start and first < start + count:
            if not groups:
                offset = start - first
            groups.append(g)
        first += n
    for batch in meta.iter_batches(batch_size=ROW_GROUP_ROWS, row_groups=groups):
        if offset >= batch.num_rows:
            offset -= batch.num_rows
            continue
        batch = batch.slice(offset, count)
        offset = 0
        count -= batch.num_rows
        yield batch
        if not count:
            return


def write_file(plan: FilePlan, path: str | os.PathLike, schema: pa.Schema) -> int:
    """Write one planned file atomically (row groups of ROW_GROUP_ROWS, whatever the pieces, so
    the same rows give the same bytes); returns its size in bytes."""
    stream = _RowStream(batch for piece in plan.pieces for batch in _piece_batches(*piece))
    rows = plan.rows
    with atomic_path(Path(path)) as tmp:
        with contextlib.closing(parquet_writer(tmp, schema)) as writer:
            for start in range(0, rows, ROW_GROUP_ROWS):
                writer.write_table(stream.take(min(ROW_GROUP_ROWS, rows - start)), row_group_size=ROW_GROUP_ROWS)
    return Path(path).stat().st_size


def num_samples_json(files: Mapping[str, int]) -> bytes:
    """The `.num_samples.json` (file name -> rows) that spares the loader counting every file."""
    return (json.dumps(dict(files), sort_keys=True) + "\n").encode()


def write_phase(batches: Iterable[Mapping[str, np.ndarray]], out_dir: str | os.PathLike,
                tokens: Sequence[str], *, seq_len: int, num_shards: int, masking: str,
                bin_size: int | None = None, ranks: int = 1, force: bool = False) -> dict[str, Any]:
    """Write one phase's instances (batches of the six hdf5 arrays, e.g. from
    `hdf5io.iter_slices`) as an LDDL folder and return what was written.

    Each bin gets `num_shards` files, contiguous runs of its rows in input order, sized as the
    loader demands; `num_shards` must divide by `ranks` (training ranks x loader workers per
    rank). Memory stays at a few row groups: rows are spilled per bin to hidden temporary files
    first. The same rows give the same bytes (for one pyarrow version, which parquet records).

    Returns {"files": {name: rows}, "bins": (see `plan_files`), "rows_in", "rows", "dropped",
    "bytes", and the options}."""
    out_dir = Path(out_dir)
    num_bins = check_options(str(out_dir), seq_len=seq_len, num_shards=num_shards, bin_size=bin_size, ranks=ranks)
    schema = schema_for(masking, binned=bin_size is not None)
    _prepare_folder(out_dir, force)
    spills = {b: str(out_dir / temp_basename()) for b in range(num_bins)}
    files: dict[str, int] = {}
    try:
        runs = spill_runs(batches, tokens, spills.__getitem__, seq_len=seq_len, masking=masking,
                          bin_size=bin_size, where=str(out_dir))
        plans, bins = plan_files(runs, num_bins=num_bins, bin_size=bin_size, num_shards=num_shards,
                                 where=str(out_dir))
        size = 0
        for plan in plans:
            size += write_file(plan, out_dir / plan.name, schema)
            files[plan.name] = plan.rows
        with atomic_path(out_dir / NUM_SAMPLES_JSON) as tmp:
            tmp.write_bytes(num_samples_json(files))
    except BaseException:
        for name in files:
            with contextlib.suppress(FileNotFoundError):
                (out_dir / name).unlink()
        raise
    finally:
        for spill in spills.values():
            with contextlib.suppress(FileNotFoundError):
                os.unlink(spill)
    return {
        "path": str(out_dir), "masking": masking, "seq_len": seq_len, "bin_size": bin_size,
        "num_shards": num_shards, "ranks": ranks, "bins": bins, "files": files,
        "rows_in": sum(b["rows_in"] for b in bins), "rows": sum(files.values()),
        "dropped": sum(b["dropped"] for b in bins), "bytes": size,
    }


# --- reading and checking a phase folder ---

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
        recorded = json.loads(recorded_path.read_text())
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
                raise ValidationError(f"{path}: columns {file_schema.remove_metadata().to_string()!r} are not "
                                      f"LDDL's {schema.to_string()!r}".replace("\n", ", "))
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


# --- finding phase folders and what they hold ---

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
        manifest = json.loads(path.read_text())
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


def file_arrays(path: str | os.PathLike, tokens: Sequence[str], seq_len: int,
                max_predictions: int) -> dict[str, np.ndarray]:
    """All rows of one LDDL file as the six hdf5 arrays (see `arrays_from_rows`)."""
    try:
        table = pq.read_table(path)
    except (pa.ArrowException, OSError) as err:
        raise ValidationError(f"{path}: not a readable parquet file ({err})") from None
    return arrays_from_rows(table, tokens, seq_len, max_predictions, source=str(path))


def row_words(row: Mapping[str, Any]) -> tuple[list[str], dict[int, str]]:
    """One row (as `to_pylist` gives it) as the model sees its tokens, [CLS] A [SEP] B [SEP],
    and the original token at each masked position (none with dynamic masking)."""
    words = ["[CLS]", *row["A"].split(), "[SEP]", *row["B"].split(), "[SEP]"]
    if row.get("masked_lm_positions") is None:
        return words, {}
    positions = np.load(io.BytesIO(row["masked_lm_positions"]), allow_pickle=False)
    return words, dict(zip(positions.tolist(), row["masked_lm_labels"].split()))
