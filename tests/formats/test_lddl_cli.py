"""LDDL folders through the CLI: `inspect` validates them, `shard --format lddl` writes and
re-balances them, `bench` trains on them as LDDL's loader feeds a trainer."""

from __future__ import annotations

import collections
import json
import math
import os
import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from bertdata.formats import lddl
from bertdata.formats.hdf5io import read_shard
from bertdata.instances.vocab import load_vocab
from conftest import PARITY_128, PARITY_512, VOCAB, folder_bytes, installed, need, needs_extra, run_cli
from shards import row_keys


def folder_arrays(folder: Path, tokens, seq_len: int, max_predictions: int) -> dict[str, np.ndarray]:
    parts = [lddl.arrays_from_rows(pa.Table.from_batches([b]), tokens, seq_len, max_predictions)
             for _path, _bin, b in lddl.read_folder(folder)]
    return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}


def shard_lddl(output: Path, *inputs, **options) -> dict:
    args = ["shard", *inputs, "--output", output, "--format", "lddl", "--vocab", VOCAB]
    for key, value in options.items():
        args += [f"--{key.replace('_', '-')}", value]
    run_cli(*args)
    return json.loads((output / "manifest.json").read_text())


@pytest.fixture(scope="module")
def phase1(tmp_path_factory) -> tuple[Path, dict]:
    """The 128 parity shard as a binned LDDL folder, 4 files per bin for 2 ranks."""
    folder = tmp_path_factory.mktemp("lddl") / "phase1"
    return folder, shard_lddl(folder, need(PARITY_128), parts=4, bin_size=32, ranks=2)


# ---------------------------------------------------------------- shard --format lddl

def test_shard_writes_a_valid_folder_holding_the_shards_rows(phase1, tokens):
    folder, manifest = phase1
    report = lddl.validate_folder(folder, ranks=2, bin_size=32, seq_len=128, tokens=tokens)
    assert report["masking"] == "static" and sorted(report["bins"]) == [0, 1, 2, 3]
    assert all(len(sizes) == 4 for sizes in report["bins"].values())
    source = read_shard(PARITY_128)
    back = folder_arrays(folder, tokens, 128, 20)
    # Every row written is a row of the shard; the rows missing are the documented balance drop,
    # one per bin whose count divided by 4, from that bin.
    missing = collections.Counter(row_keys(source)) - collections.Counter(row_keys(back))
    assert not collections.Counter(row_keys(back)) - collections.Counter(row_keys(source))
    dropped = [b["bin"] for b in manifest["bins"] if b["dropped"]]
    assert sum(missing.values()) == manifest["dropped"] == len(dropped) == len(source["input_ids"]) - report["rows"]
    lengths = dict(zip(row_keys(source), source["input_mask"].sum(axis=1)))
    assert sorted(int(lddl.bin_of(lengths[k], 128, 32)) for k in missing) == sorted(dropped)
    assert manifest["max_seq_length"] == 128 and manifest["max_predictions_per_seq"] == 20
    assert manifest["attrs"]["vocab_sha256"] == load_vocab(VOCAB).sha256
    assert {f["file"]: f["rows"] for f in manifest["files"]} == json.loads((folder / ".num_samples.json").read_text())
    # The rows are shuffled across the files, not laid out in the shard's order.
    index = {key: i for i, key in enumerate(row_keys(source))}
    order = [index[key] for key in row_keys(back)[:100]]
    assert order != sorted(order)


def test_shard_is_deterministic_and_follows_the_seed(phase1, tmp_path):
    folder, _ = phase1
    again = tmp_path / "again"
    shard_lddl(again, PARITY_128, parts=4, bin_size=32, ranks=2)
    assert folder_bytes(again) == folder_bytes(folder)
    other = tmp_path / "other"
    shard_lddl(other, PARITY_128, parts=4, bin_size=32, ranks=2, seed=7)
    assert folder_bytes(other)["shard-0.parquet_3"] != folder_bytes(folder)["shard-0.parquet_3"]


def test_sampling_keeps_working(tokens, tmp_path):
    manifest = shard_lddl(tmp_path / "some", need(PARITY_512), parts=2, max_instances=301)
    assert manifest["instances_in"] == 1397 and manifest["instances_sampled"] == 301
    assert manifest["instances_out"] == lddl.validate_folder(tmp_path / "some", tokens=tokens)["rows"] == 301
    source = collections.Counter(row_keys(read_shard(PARITY_512)))
    back = collections.Counter(row_keys(folder_arrays(tmp_path / "some", tokens, 512, 80)))
    assert not back - source


def test_an_lddl_folder_is_rebalanced_for_other_ranks(phase1, tokens, tmp_path):
    folder, _ = phase1
    out = tmp_path / "r3"
    manifest = shard_lddl(out, folder, parts=6, ranks=3, masking="dynamic")
    report = lddl.validate_folder(out, ranks=3, seq_len=128, tokens=tokens)
    assert report["masking"] == "dynamic" and list(report["bins"]) == [None] and len(report["bins"][None]) == 6
    # Dynamic rows hold the original tokens: the same instances as the static folder, unmasked.
    static = folder_arrays(folder, tokens, 128, 20)
    unmasked = static["input_ids"].copy()
    for r in range(len(unmasked)):
        k = int((static["masked_lm_positions"][r] != 0).sum())
        unmasked[r, static["masked_lm_positions"][r, :k]] = static["masked_lm_ids"][r, :k]
    back = folder_arrays(out, tokens, 128, 20)
    assert report["rows"] == manifest["instances_out"] == len(unmasked) - manifest["dropped"]
    assert collections.Counter(map(bytes, back["input_ids"])) <= collections.Counter(map(bytes, unmasked))
    assert manifest["inputs"][0]["path"] == str(folder)


def test_dynamic_input_cannot_become_static(phase1, tmp_path):
    folder, _ = phase1
    shard_lddl(tmp_path / "dyn", folder, parts=2, masking="dynamic")
    proc = run_cli("shard", tmp_path / "dyn", "--output", tmp_path / "back", "--parts", "2", "--vocab", VOCAB,
                   check=False)
    assert proc.returncode == 2 and "holds no masks" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("args, message", [
    (["--masking", "dynamic"], "apply to --format lddl only"),
    (["--format", "lddl", "--ranks", "3"], "does not divide by 3 ranks"),
    (["--format", "lddl", "--name", "x"], "--name does not apply"),
    (["--format", "lddl", "--bin-size", "0"], "--bin-size must be at least 1"),
    ([], "--vocab is for LDDL output or input"),
])
def test_bad_options_are_one_line(tmp_path, args, message):
    proc = run_cli("shard", need(PARITY_512), "--output", tmp_path / "o", "--parts", "4", "--vocab", VOCAB,
                   *args, check=False)
    assert proc.returncode == 2 and message in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "o").exists() or not any((tmp_path / "o").iterdir())


def test_a_non_empty_output_is_refused_before_reading_inputs(tmp_path):
    (tmp_path / "o").mkdir()
    (tmp_path / "o" / "notes.txt").write_text("x")
    proc = run_cli("shard", need(PARITY_512), "--output", tmp_path / "o", "--parts", "2", "--format", "lddl",
                   "--vocab", VOCAB, check=False)
    assert proc.returncode == 2 and "not empty" in proc.stderr
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".bertdata-")]  # no temporary folder left


# ---------------------------------------------------------------- inspect

def test_inspect_validates_hdf5_and_lddl_together(phase1, tmp_path):
    folder, _ = phase1
    proc = run_cli("inspect", need(PARITY_128), folder, "--vocab", VOCAB, "--ranks", "2", "--show", "1")
    lines = proc.stdout.splitlines()
    assert any(line.endswith(PARITY_128.name) and line.split()[0] == "11631" for line in lines)
    bins = [line.split() for line in lines if line.split()[:1] in (["0"], ["1"], ["2"], ["3"])]
    assert [b[:2] for b in bins] == [["0", "4"], ["1", "4"], ["2", "4"], ["3", "4"]]
    total = next(line.split() for line in lines if line.split()[:1] == ["total"] and len(line.split()) == 6)
    assert total[1] == "16" and 11627 <= int(total[2].replace(",", "")) <= 11631
    assert 100 < float(total[3]) <= 128 and 15 < float(total[4]) <= 20 and 40 < float(total[5].rstrip("%")) < 60
    assert "[MASK]→" in proc.stdout
    # A folder of folders is searched; --ranks that the files do not divide by fails.
    shutil.copytree(folder, tmp_path / "data" / "phase1")
    proc = run_cli("inspect", tmp_path / "data", "--ranks", "3", "--vocab", VOCAB, check=False)
    assert proc.returncode == 1
    assert f"invalid shard: {tmp_path / 'data' / 'phase1'}: 4 files in bin 0 do not divide by 3" in proc.stdout


def test_inspect_finds_the_vocab_the_manifest_records(phase1, tmp_path):
    folder, _ = phase1
    broken = tmp_path / "broken"
    shutil.copytree(folder, broken)
    shard = broken / "shard-1.parquet_2"
    table = pq.read_table(shard)
    b = table.column("B").combine_chunks()
    pq.write_table(table.set_column(1, "B", pa.concat_arrays([pa.array([b[0].as_py().rsplit(" ", 1)[0] + " zzzqqq"]),
                                                               b[1:]])), shard)
    # The manifest records the bert-base-uncased vocab; it is found in the cache, not downloaded.
    cache = tmp_path / "cache"
    (cache / "bertdata").mkdir(parents=True)
    shutil.copy(VOCAB, cache / "bertdata" / "bert-base-uncased-vocab.txt")
    env = {**os.environ, "XDG_CACHE_HOME": str(cache)}
    proc = run_cli("inspect", broken, check=False, env=env)
    assert proc.returncode == 1
    assert f"invalid shard: {shard}: token 'zzzqqq' in column B is not in the vocab" in proc.stdout
    assert run_cli("inspect", folder, check=False, env=env).returncode == 0
    # Another vocab than the recorded one: refused, as for hdf5.
    other = tmp_path / "other.txt"
    other.write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nthe\n")
    proc = run_cli("inspect", folder, "--vocab", other, check=False)
    assert proc.returncode == 2 and "pass the vocab the shard was made with" in proc.stderr


def test_inspect_flags_broken_lddl_folders(phase1, tmp_path):
    folder, _ = phase1
    cases = {
        "unbalanced": (lambda f: pq.write_table(pq.read_table(f / "shard-0.parquet_3").slice(1), f / "shard-0.parquet_3"),
                       "shard-0.parquet_3: holds"),
        "stray": (lambda f: (f / "extra.parquet").write_bytes(b""), "extra.parquet: LDDL's loader would read"),
        "counts": (lambda f: (f / ".num_samples.json").unlink(), ".num_samples.json: missing"),
    }
    for name, (damage, reason) in cases.items():
        broken = tmp_path / name
        shutil.copytree(folder, broken)
        damage(broken)
        proc = run_cli("inspect", broken, "--vocab", VOCAB, check=False)
        assert proc.returncode == 1, name
        assert "invalid shard: " in proc.stdout and reason in proc.stdout, (name, proc.stdout)


# ---------------------------------------------------------------- bench

needs_bench = needs_extra("bench", "torch")
if installed("torch"):  # the bench's modules import torch; the tests above need none of it
    from bertdata.benchmark.data import ShardStream, build_loader, mask_dynamic, rank_units, survey
    from bertdata.benchmark.train import run
    from bertdata.config import BenchConfig


@needs_bench
def test_binned_batches_come_from_one_bin_padded_to_their_longest(phase1):
    folder, _ = phase1
    infos, fmt = survey(folder, str(VOCAB))
    stream = iter(ShardStream(rank_units(infos, 0, 1), batch_size=16, seed=3, infos=infos, reading=fmt))
    widths = collections.Counter()
    for _ in range(60):
        input_ids, segment_ids, input_mask, labels, nsp = next(stream)
        lengths = input_mask.sum(1)
        bins = set(lddl.bin_of(lengths.numpy(), 128, 32).tolist())
        assert len(bins) == 1
        assert input_ids.shape[1] == min(128, -(-int(lengths.max()) // 8) * 8)
        assert ((labels == -1) | (input_mask == 1)).all()
        widths[bins.pop()] += 1
    # Bins come in proportion to their rows: the long bin (~84% of the rows) most, the others too.
    assert widths[3] > 35 and sum(widths[b] for b in (0, 1, 2)) > 0


@needs_bench
def test_dynamic_masking_follows_the_reference_rule(phase1, tokens, tmp_path):
    folder, _ = phase1
    dynamic = tmp_path / "dyn"
    shard_lddl(dynamic, folder, parts=2, masking="dynamic")
    infos, fmt = survey(dynamic, str(VOCAB))
    rows = lddl.file_arrays(infos[0].path, tokens, 128, 20)
    masked = mask_dynamic(rows, fmt, 20, np.random.default_rng(0))
    count = (masked["masked_lm_positions"] != 0).sum(axis=1)
    length = rows["input_mask"].sum(axis=1)
    np.testing.assert_array_equal(count, np.minimum(20, np.maximum(1, np.round(length * 0.15))))
    r = np.repeat(np.arange(len(count)), count)
    pos = masked["masked_lm_positions"][masked["masked_lm_positions"] != 0]
    np.testing.assert_array_equal(masked["masked_lm_ids"][masked["masked_lm_positions"] != 0], rows["input_ids"][r, pos])
    assert not np.isin(rows["input_ids"][r, pos], [tokens.index("[CLS]"), tokens.index("[SEP]")]).any()
    assert (np.diff(masked["masked_lm_positions"], axis=1)[:, :19][np.arange(19) < count[:, None] - 1] > 0).all()
    share = (masked["input_ids"][r, pos] == tokens.index("[MASK]")).mean()
    assert 0.77 < share < 0.83
    changed = masked["input_ids"] != rows["input_ids"]
    assert not changed[rows["input_mask"] == 0].any() and changed.sum() <= len(pos)


@needs_bench
def test_dynamic_whole_word_masking_takes_whole_words_while_they_fit(phase1, tokens, tmp_path):
    from bertdata.errors import BertdataError
    from bertdata.formats.checks import ShardStats, word_masking
    from bertdata.instances.vocab import load_vocab

    folder, _ = phase1
    dynamic = tmp_path / "dyn"
    shard_lddl(dynamic, folder, parts=2, masking="dynamic")
    infos, fmt = survey(dynamic, str(VOCAB), "whole-word")
    assert fmt.masking_scheme == "whole-word"
    rows = lddl.file_arrays(infos[0].path, tokens, 128, 20)
    masked = mask_dynamic(rows, fmt, 20, np.random.default_rng(0))
    stats = ShardStats("dyn", instances=len(rows["input_ids"]))
    count = (masked["masked_lm_positions"] != 0).sum(axis=1)
    stats.masked = int(count.sum())
    word_masking(masked, load_vocab(VOCAB), stats)
    assert stats.split_words == 0 and stats.word_starts < stats.masked
    target = np.minimum(20, np.maximum(1, np.round(rows["input_mask"].sum(axis=1) * 0.15)))
    # Whole words fill the count but where a word would pass it (then a shorter one is tried).
    assert (count <= target).all() and (count == target).mean() > 0.9
    with pytest.raises(BertdataError, match="for LDDL folders with dynamic masking"):
        survey(folder, str(VOCAB), "whole-word")


@needs_bench
@pytest.mark.parametrize("masking", ["static", "dynamic"])
def test_bench_trains_tiny_on_an_lddl_folder(phase1, tmp_path, masking):
    folder, _ = phase1
    if masking == "dynamic":
        folder = tmp_path / "dyn"
        shard_lddl(folder, phase1[0], parts=2, masking="dynamic")
    record = run(BenchConfig(data=str(folder), vocab=str(VOCAB), model="tiny", device="cpu", batch_size=8, steps=3,
                             warmup_steps=1, workers=0, precision="fp32"))
    assert all(math.isfinite(loss) for loss in record["losses"])
    assert record["data_format"] == "lddl" and record["masking"] == masking
    assert record["bins"] == (4 if masking == "static" else 1)
    assert record["real_tokens"] <= record["tokens"] <= record["sequences"] * 128
    assert record["tokens_per_second"] == pytest.approx(record["tokens"] / record["elapsed_s"])
    assert 10 * record["sequences"] < record["masked_tokens"] <= 20 * record["sequences"]


@needs_bench
def test_bench_refuses_a_folder_without_manifest_and_vocab_for_hdf5(phase1, tmp_path):
    folder, _ = phase1
    bare = tmp_path / "bare"
    shutil.copytree(folder, bare)
    (bare / "manifest.json").unlink()
    proc = run_cli("bench", "--data", bare, "--model", "tiny", "--device", "cpu", check=False)
    assert proc.returncode == 2 and "without the manifest.json" in proc.stderr
    hdf5 = tmp_path / "hdf5"
    hdf5.mkdir()
    (hdf5 / "parity_training_0.hdf5").symlink_to(PARITY_128)
    proc = run_cli("bench", "--data", hdf5, "--vocab", VOCAB, "--model", "tiny", "--device", "cpu", check=False)
    assert proc.returncode == 2 and "--vocab is for LDDL folders" in proc.stderr


@needs_bench
def test_loader_gives_every_rank_the_same_bins(phase1):
    folder, _ = phase1
    infos, fmt = survey(folder, str(VOCAB))
    widths = []
    for rank in range(2):
        loader = iter(build_loader(infos, fmt, 8, rank, 2, 0, 5, pin_memory=False))
        bins = [int(lddl.bin_of(next(loader)[2].sum(1).numpy(), 128, 32).max()) for _ in range(20)]
        widths.append(bins)
    assert widths[0] == widths[1]
