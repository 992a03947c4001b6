"""LDDL parquet output: exact round trips on the reference shards, the loader's balance and bin
rules, determinism, and clear errors for folders the loader would trip on."""

from __future__ import annotations

import hashlib
import io
import json
import os
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from bertdata.formats import lddl
from bertdata.errors import BertdataError, ValidationError
from bertdata.formats.hdf5io import iter_slices, read_shard
from conftest import PARITY, need
from shards import row_keys

SHARDS = {  # name: (seq_len, max_predictions)
    "A_s12345_128_20_p15_d5": (128, 20),
    "A_s12345_512_80_p15_d2": (512, 80),
}


@pytest.fixture(scope="module")
def parity() -> dict[str, dict[str, np.ndarray]]:
    return {name: read_shard(need(PARITY / f"{name}.hdf5")) for name in SHARDS}


def batches(arrays: dict[str, np.ndarray], rows: int):
    for start in range(0, len(arrays["input_ids"]), rows):
        yield {k: v[start:start + rows] for k, v in arrays.items()}


def head(arrays: dict[str, np.ndarray], n: int) -> dict[str, np.ndarray]:
    return {k: v[:n] for k, v in arrays.items()}


def unmasked(arrays: dict[str, np.ndarray]) -> np.ndarray:
    ids = arrays["input_ids"].copy()
    for r in range(len(ids)):
        k = int((arrays["masked_lm_positions"][r] != 0).sum())
        ids[r, arrays["masked_lm_positions"][r, :k]] = arrays["masked_lm_ids"][r, :k]
    return ids


def read_back(folder: Path, tokens, seq_len: int, max_predictions: int) -> dict[str, np.ndarray]:
    tables = [pa.Table.from_batches([b]) for _path, _bin, b in lddl.read_folder(folder)]
    parts = [lddl.arrays_from_rows(t, tokens, seq_len, max_predictions) for t in tables]
    return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}


def folder_hashes(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir())}


@pytest.mark.parametrize("name", SHARDS)
def test_static_rows_give_back_the_exact_arrays(parity, tokens, name):
    arrays = parity[name]
    table = lddl.rows_from_arrays(arrays, tokens, "static")
    assert table.schema.names == ["A", "B", "is_random_next", "num_tokens", "masked_lm_positions", "masked_lm_labels"]
    back = lddl.arrays_from_rows(table, tokens, *SHARDS[name])
    for field in arrays:
        np.testing.assert_array_equal(back[field], arrays[field], err_msg=field)
        assert back[field].dtype == arrays[field].dtype


def test_row_text_is_segments_without_specials(parity, tokens):
    arrays = parity["A_s12345_128_20_p15_d5"]
    row = lddl.rows_from_arrays(head(arrays, 1), tokens, "static").to_pylist()[0]
    length = int(arrays["input_mask"][0].sum())
    words = [tokens[i] for i in arrays["input_ids"][0, :length]]
    sep = words.index("[SEP]")
    assert row["A"] == " ".join(words[1:sep])
    assert row["B"] == " ".join(words[sep + 1:length - 1])
    assert row["num_tokens"] == length
    assert row["is_random_next"] == bool(arrays["next_sentence_labels"][0])
    k = int((arrays["masked_lm_positions"][0] != 0).sum())
    buf = io.BytesIO()
    np.save(buf, arrays["masked_lm_positions"][0, :k].astype(np.uint16))
    assert row["masked_lm_positions"] == buf.getvalue()  # byte-identical to LDDL's np.save
    assert row["masked_lm_labels"] == " ".join(tokens[i] for i in arrays["masked_lm_ids"][0, :k])


def test_dynamic_rows_hold_the_original_tokens(parity, tokens):
    arrays = head(parity["A_s12345_128_20_p15_d5"], 500)
    table = lddl.rows_from_arrays(arrays, tokens, "dynamic")
    assert table.schema.names == ["A", "B", "is_random_next", "num_tokens"]
    back = lddl.arrays_from_rows(table, tokens, 128, 20)
    np.testing.assert_array_equal(back["input_ids"], unmasked(arrays))
    assert not (back["input_ids"] == tokens.index("[MASK]")).any()
    assert not back["masked_lm_positions"].any() and not back["masked_lm_ids"].any()
    for field in ("input_mask", "segment_ids", "next_sentence_labels"):
        np.testing.assert_array_equal(back[field], arrays[field])


@pytest.mark.parametrize("name,bin_size", [("A_s12345_128_20_p15_d5", 32), ("A_s12345_512_80_p15_d2", 64),
                                           ("A_s12345_128_20_p15_d5", None)])
def test_folder_round_trip_keeps_every_row_but_the_documented_drop(parity, tokens, tmp_path, name, bin_size):
    arrays = parity[name]
    seq_len, max_predictions = SHARDS[name]
    summary = lddl.write_phase(batches(arrays, 3000), tmp_path / "phase", tokens, seq_len=seq_len, num_shards=4,
                               masking="static", bin_size=bin_size)
    back = read_back(tmp_path / "phase", tokens, seq_len, max_predictions)
    # The writer drops the last row (input order) of a bin whose count divides by num_shards.
    expected_bins = (np.zeros(len(arrays["input_ids"]), int) if bin_size is None
                     else lddl.bin_of(arrays["input_mask"].sum(axis=1), seq_len, bin_size))
    dropped = [int(np.flatnonzero(expected_bins == (b["bin"] or 0))[-1]) for b in summary["bins"] if b["dropped"]]
    keep = np.setdiff1d(np.arange(len(expected_bins)), dropped)
    assert sorted(row_keys(back)) == sorted(row_keys({k: v[keep] for k, v in arrays.items()}))
    assert summary["rows"] == len(keep) == summary["rows_in"] - summary["dropped"]
    assert summary["bytes"] == sum(os.path.getsize(tmp_path / "phase" / f) for f in summary["files"])
    assert json.loads((tmp_path / "phase" / ".num_samples.json").read_text()) == summary["files"]


def test_bins_follow_lddls_rule():
    # Bin b holds b*bin_size+1 .. (b+1)*bin_size tokens; the last bin also takes anything longer.
    assert lddl.bin_of(np.array([1, 32, 33, 64, 65, 96, 97, 128]), 128, 32).tolist() == [0, 0, 1, 1, 2, 2, 3, 3]
    assert lddl.bin_of(np.array([64, 65, 100]), 100, 32).tolist() == [1, 2, 2]
    assert lddl.file_name(3, None) == "shard-3.parquet" and lddl.file_name(3, 2) == "shard-3.parquet_2"


def test_binned_files_hold_only_their_bin(parity, tokens, tmp_path):
    arrays = parity["A_s12345_512_80_p15_d2"]
    lddl.write_phase(batches(arrays, 500), tmp_path, tokens, seq_len=512, num_shards=2, masking="dynamic",
                     bin_size=64, force=True)
    bins_seen = set()
    for path, bin_id, batch in lddl.read_folder(tmp_path):
        assert path.name.endswith(f".parquet_{bin_id}")
        num_tokens = batch.column("num_tokens").to_numpy()
        assert (lddl.bin_of(num_tokens, 512, 64) == bin_id).all()
        assert (batch.column("bin_id").to_numpy() == bin_id).all()
        bins_seen.add(bin_id)
    assert bins_seen == set(range(8))


@pytest.mark.parametrize("ranks", [1, 2, 3, 6])
def test_every_bin_is_balanced_for_the_ranks(parity, tokens, tmp_path, ranks):
    summary = lddl.write_phase(batches(parity["A_s12345_128_20_p15_d5"], 4096), tmp_path / "p", tokens, seq_len=128,
                               num_shards=6, masking="static", bin_size=32, ranks=ranks)
    report = lddl.validate_folder(tmp_path / "p", ranks=ranks, bin_size=32, seq_len=128, tokens=tokens)
    for sizes in report["bins"].values():
        assert len(sizes) == 6 and max(sizes) == min(sizes) + 1
    assert report["rows"] == summary["rows"]
    with pytest.raises(ValidationError, match="do not divide by 4"):
        lddl.validate_folder(tmp_path / "p", ranks=4)


def test_shard_count_must_suit_ranks_and_the_loader(parity, tokens, tmp_path):
    some = head(parity["A_s12345_128_20_p15_d5"], 100)
    with pytest.raises(BertdataError, match="does not divide by 4"):
        lddl.write_phase([some], tmp_path / "a", tokens, seq_len=128, num_shards=6, masking="static", ranks=4)
    with pytest.raises(BertdataError, match="at least 2 files"):
        lddl.write_phase([some], tmp_path / "b", tokens, seq_len=128, num_shards=1, masking="static")
    # No empty parquet files: a bin must fill every file with a row, the largest with one more.
    for files in (100, 200):
        with pytest.raises(BertdataError, match=f"the phase has 100 instances, too few for {files} files"):
            lddl.write_phase([some], tmp_path / f"c{files}", tokens, seq_len=128, num_shards=files,
                             masking="static")
        assert not list((tmp_path / f"c{files}").glob("*.parquet*"))
    summary = lddl.write_phase([some], tmp_path / "d", tokens, seq_len=128, num_shards=99, masking="static")
    assert sorted(set(summary["files"].values())) == [1, 2]  # 100 rows in 99 files: none dropped


def test_equal_counts_drop_the_last_row_of_the_bin(parity, tokens, tmp_path):
    arrays = head(parity["A_s12345_128_20_p15_d5"], 400)
    summary = lddl.write_phase(batches(arrays, 128), tmp_path, tokens, seq_len=128, num_shards=4, masking="static",
                               force=True)
    assert summary["bins"] == [{"bin": None, "rows_in": 400, "rows": 399, "dropped": 1, "dropped_row": 399,
                                "min_rows": 99, "max_rows": 100}]
    assert sorted(summary["files"].values()) == [99, 100, 100, 100]
    back = read_back(tmp_path, tokens, 128, 20)
    assert sorted(row_keys(back)) == sorted(row_keys(head(arrays, 399)))
    assert lddl.balanced_sizes(401, 4) == ([101, 100, 100, 100], 0)
    assert lddl.balanced_sizes(3, 4) == ([1, 1, 1, 0], 0)


def test_same_rows_same_bytes_whatever_the_batching(parity, tokens, tmp_path):
    arrays = parity["A_s12345_128_20_p15_d5"]
    for folder, rows in (("one", 4096), ("two", 1000)):
        lddl.write_phase(batches(arrays, rows), tmp_path / folder, tokens, seq_len=128, num_shards=4,
                         masking="static", bin_size=64)
    assert folder_hashes(tmp_path / "one") == folder_hashes(tmp_path / "two")
    shard = iter_slices(PARITY / "A_s12345_128_20_p15_d5.hdf5", 2048)
    lddl.write_phase((b for _start, b in shard), tmp_path / "three", tokens, seq_len=128, num_shards=4,
                     masking="static", bin_size=64)
    assert folder_hashes(tmp_path / "three") == folder_hashes(tmp_path / "one")


def test_temporary_names_are_never_read_by_the_loader(parity, tokens, tmp_path, monkeypatch):
    opened: list[str] = []

    class Recording(pq.ParquetWriter):
        def __init__(self, where, *args, **kwargs):
            opened.append(os.path.basename(where))
            super().__init__(where, *args, **kwargs)

    monkeypatch.setattr(lddl.writer.pq, "ParquetWriter", Recording)
    lddl.write_phase(batches(parity["A_s12345_128_20_p15_d5"], 2000), tmp_path / "p", tokens, seq_len=128,
                     num_shards=2, masking="static", bin_size=32)
    assert opened and all(name.startswith(".bertdata-tmp-") and ".parquet" not in name for name in opened)
    assert not [p for p in (tmp_path / "p").iterdir() if p.name.startswith(".bertdata-tmp-")]


def test_a_failed_write_leaves_nothing_the_loader_reads(parity, tokens, tmp_path):
    def failing():
        yield head(parity["A_s12345_128_20_p15_d5"], 100)
        raise RuntimeError("input died")

    with pytest.raises(RuntimeError):
        lddl.write_phase(failing(), tmp_path / "p", tokens, seq_len=128, num_shards=2, masking="static")
    assert list((tmp_path / "p").iterdir()) == []


def test_writer_refuses_bad_input(parity, tokens, tmp_path):
    arrays = head(parity["A_s12345_128_20_p15_d5"], 50)
    with pytest.raises(BertdataError, match="sequence length 128, not 512"):
        lddl.write_phase([arrays], tmp_path / "a", tokens, seq_len=512, num_shards=2, masking="static")
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "old.txt").write_text("x")
    with pytest.raises(BertdataError, match="not empty"):
        lddl.write_phase([arrays], tmp_path / "b", tokens, seq_len=128, num_shards=2, masking="static")
    # Only instances of 33-64 tokens: bin 0 (1-32) would be empty, and bins must start at 0.
    lengths = parity["A_s12345_128_20_p15_d5"]["input_mask"].sum(axis=1)
    long_rows = {k: v[(lengths > 32) & (lengths <= 64)] for k, v in parity["A_s12345_128_20_p15_d5"].items()}
    with pytest.raises(BertdataError, match="bin 0 .* has no instances"):
        lddl.write_phase([long_rows], tmp_path / "c", tokens, seq_len=128, num_shards=2, masking="static",
                         bin_size=32)
    with pytest.raises(BertdataError, match="bin 2 .* has no instances"):  # a trailing gap too
        lddl.write_phase([{k: v[lengths <= 64] for k, v in parity["A_s12345_128_20_p15_d5"].items()}], tmp_path / "d",
                         tokens, seq_len=128, num_shards=2, masking="static", bin_size=32)
    broken = dict(arrays, segment_ids=np.zeros_like(arrays["segment_ids"]))
    with pytest.raises(BertdataError, match="row 0 is not"):
        lddl.rows_from_arrays(broken, tokens, "static")
    with pytest.raises(BertdataError, match="masking must be"):
        lddl.rows_from_arrays(arrays, tokens, "sometimes")


@pytest.fixture
def good_folder(parity, tokens, tmp_path) -> Path:
    lddl.write_phase(batches(head(parity["A_s12345_128_20_p15_d5"], 3000), 1000), tmp_path / "p", tokens,
                     seq_len=128, num_shards=2, masking="static", bin_size=64)
    lddl.validate_folder(tmp_path / "p", bin_size=64, seq_len=128, tokens=tokens)
    return tmp_path / "p"


def rewrite(path: Path, table: pa.Table, counts: dict[str, int] | None = None) -> None:
    pq.write_table(table, path)
    if counts is not None:
        json_path = path.parent / ".num_samples.json"
        json_path.write_text(json.dumps({**json.loads(json_path.read_text()), **counts}))


def test_validator_names_the_file_and_the_fault(good_folder, tokens):
    folder = good_folder
    shard = folder / "shard-0.parquet_1"
    table = pq.read_table(shard)
    cases = []

    def case(pattern, prepare):
        cases.append((pattern, prepare))

    case(r"\.num_samples\.json: missing", lambda: (folder / ".num_samples.json").unlink())
    case(r"shard-0\.parquet_1: holds \d+ rows but", lambda: rewrite(shard, table.slice(1)))
    case(r"files in bin 1 hold \d+ to \d+ rows", lambda: rewrite(shard, table.slice(1), {shard.name: table.num_rows - 1}))
    case(r"stray\.parquet: LDDL's loader would read", lambda: (folder / "stray.parquet").write_bytes(b""))
    case(r"sub/shard-9\.parquet: LDDL's loader would read",
         lambda: ((folder / "sub").mkdir(), (folder / "sub" / "shard-9.parquet").write_bytes(b"")))
    case(r"bin 0 is missing", lambda: [(folder / f"shard-{i}.parquet_0").unlink() for i in range(2)])
    case(r"shard-0\.parquet_1: row 0 has \d+ tokens, which belongs in bin 0",
         lambda: rewrite(shard, pa.concat_tables([pq.read_table(folder / "shard-0.parquet_0").slice(0, 1)
                                                   .set_column(6, "bin_id", pa.array([1], pa.int64())), table.slice(1)])))
    case(r"shard-0\.parquet_1: row 0 has num_tokens", lambda: rewrite(
        shard, table.set_column(0, "A", pa.concat_arrays([pa.array(["the"]), table.column("A").combine_chunks()[1:]]))))
    case(r"shard-0\.parquet_1: token 'zzzqqq' in column B is not in the vocab", lambda: rewrite(
        shard, table.set_column(1, "B", pa.concat_arrays([pa.array([table.column("B")[0].as_py().rsplit(" ", 1)[0]
                                                                    + " zzzqqq"]), table.column("B").combine_chunks()[1:]]))))
    # One line that says what differs (it once printed the schemas' literal "\n"s).
    case(r"shard-0\.parquet_1: not LDDL's columns \(missing masked_lm_labels\); LDDL's are A \(string\), [^\\\n]*$",
         lambda: rewrite(shard, table.drop_columns(["masked_lm_labels"])))
    case(r"shard-0\.parquet_1: not LDDL's columns \(num_tokens is int64, not uint16\)", lambda: rewrite(
        shard, table.set_column(3, "num_tokens", table.column("num_tokens").cast(pa.int64()))))
    case(r"shard-0\.parquet_1: not a readable parquet file", lambda: shard.write_bytes(b"not parquet"))

    pristine = {p.name: p.read_bytes() for p in folder.iterdir()}
    for pattern, prepare in cases:
        prepare()
        with pytest.raises(ValidationError, match=pattern):
            lddl.validate_folder(folder, bin_size=64, seq_len=128, tokens=tokens)
        for p in sorted(folder.rglob("*"), reverse=True):
            p.rmdir() if p.is_dir() else p.unlink()
        for name, data in pristine.items():
            (folder / name).write_bytes(data)
        lddl.validate_folder(folder, bin_size=64, seq_len=128, tokens=tokens)
    # Text is read as the loader's str.split() reads it: stray spaces are not tokens.
    rewrite(shard, table.set_column(0, "A", pc.utf8_replace_slice(table.column("A"), 0, 0, "  ")))
    lddl.validate_folder(folder, bin_size=64, seq_len=128, tokens=tokens)
    with pytest.raises(ValidationError, match="no such folder"):
        lddl.validate_folder(folder / "absent")


def test_force_replaces_an_earlier_phase(parity, tokens, good_folder):
    summary = lddl.write_phase(batches(head(parity["A_s12345_128_20_p15_d5"], 301), 1000), good_folder, tokens,
                               seq_len=128, num_shards=2, masking="dynamic", force=True)
    assert sorted(p.name for p in good_folder.iterdir()) == [".num_samples.json", "shard-0.parquet", "shard-1.parquet"]
    assert lddl.validate_folder(good_folder)["rows"] == summary["rows"] == 301


@pytest.mark.parametrize("bin_size", [None, 32])
def test_runs_from_many_shards_give_the_bytes_of_one_pass(tmp_path, tokens, parity, bin_size):
    """A build spills runs per text shard and cuts files across them; the files must be those
    `write_phase` makes from the same rows in one pass."""
    arrays = head(parity["A_s12345_128_20_p15_d5"], 7000)
    whole = lddl.write_phase(batches(arrays, 1000), tmp_path / "whole", tokens, seq_len=128, num_shards=4,
                             masking="static", bin_size=bin_size)
    num_bins = lddl.check_options("x", seq_len=128, num_shards=4, bin_size=bin_size, ranks=1)
    runs = []
    # Uneven shards, and batches that do not line up with the writer's row groups.
    for shard, (start, stop) in enumerate([(0, 1), (1, 2500), (2500, 2600), (2600, 7000)]):
        part = {k: v[start:stop] for k, v in arrays.items()}
        runs += lddl.spill_runs(batches(part, 777), tokens, lambda b, s=shard: str(tmp_path / f"run-{s}-{b}"),
                                seq_len=128, masking="static", bin_size=bin_size, where="test")
    runs.sort(key=lambda r: r.bin)  # stable: shard order within a bin
    plans, bins = lddl.plan_files(runs, num_bins=num_bins, bin_size=bin_size, num_shards=4, where="test")
    assert bins == whole["bins"]
    out = tmp_path / "split"
    out.mkdir()
    schema = lddl.schema_for("static", binned=bin_size is not None)
    for plan in plans:
        assert len(plan.pieces) >= 1 and plan.rows == whole["files"][plan.name]
        lddl.write_file(plan, out / plan.name, schema)
    assert any(len(p.pieces) > 1 for p in plans)  # some file really was cut across shards
    for name in whole["files"]:
        assert (out / name).read_bytes() == (tmp_path / "whole" / name).read_bytes(), name
