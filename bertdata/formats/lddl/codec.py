"""LDDL rows <-> the six arrays of `bertdata.instances.schema`, as LDDL's loader reads rows."""

from __future__ import annotations

import functools
import io
import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from bertdata.errors import BertdataError, ValidationError
from bertdata.formats.lddl.layout import schema_for
from bertdata.instances.schema import zeros


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
