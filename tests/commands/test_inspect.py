"""`bertdata inspect`: valid shards pass with statistics; each kind of corruption fails with exit 1."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import h5py
import numpy as np
import pytest

from bertdata.formats.hdf5io import read_shard, write_shard
from bertdata.instances.vocab import load_vocab
from bertdata.text.wikidump import sample_paths
from conftest import PARITY, PARITY_128, SHARD_A, VOCAB, need, run_cli
from shards import hostile_files, valid_rows


def test_parity_files_validate_with_statistics():
    need(PARITY)
    proc = run_cli("inspect", PARITY, "--show", "1", "--vocab", VOCAB)
    assert proc.returncode == 0
    row = next(line for line in proc.stdout.splitlines() if line.endswith(PARITY_128.name))
    instances, seq, real, short, masked, random_next = row.split()[:6]
    assert (int(instances), int(seq)) == (11631, 128)
    assert 100 < float(real) <= 128 and 15 < float(masked) <= 20
    assert 40 < float(random_next.rstrip("%")) < 60
    assert "[MASK]→" in proc.stdout
    assert "total of 1 valid file(s) with sequence length 128" in proc.stdout
    assert "total of 1 valid file(s) with sequence length 512" in proc.stdout


@pytest.fixture
def shard(tmp_path):
    need(PARITY)
    arrays = read_shard(PARITY_128, 0, 200)
    return tmp_path, arrays


def corrupt(tmp_path, arrays, **changes):
    arrays = {k: v.copy() for k, v in arrays.items()}
    for name, fn in changes.items():
        arrays[name] = fn(arrays[name])
    path = tmp_path / "bad.hdf5"
    write_shard(path, arrays)
    return path


def _set(index, value):
    def apply(a):
        a[index] = value
        return a
    return apply


@pytest.mark.parametrize("changes, reason", [
    ({"masked_lm_positions": _set((3, 1), 0)}, "0-padded"),
    ({"masked_lm_positions": lambda a: a[:, ::-1].copy()}, "masked_lm_positions"),
    ({"input_ids": _set((5, 2), 99999)}, "vocab size"),
    ({"input_mask": _set((7, 1), 0)}, "input_mask"),
    ({"segment_ids": _set((6, 127), 1)}, "segment_ids"),
    ({"next_sentence_labels": _set(4, 3)}, "next_sentence_labels"),
])
def test_corruption_is_reported(shard, changes, reason):
    tmp_path, arrays = shard
    path = corrupt(tmp_path, arrays, **changes)
    proc = run_cli("inspect", path, "--vocab", VOCAB, check=False)
    assert proc.returncode == 1
    assert f"invalid shard: {path}: instance" in proc.stdout and reason in proc.stdout


def test_missing_dataset_and_wrong_dtype(shard):
    tmp_path, arrays = shard
    path = corrupt(tmp_path, arrays)
    with h5py.File(path, "a") as f:
        del f["masked_lm_ids"]
    proc = run_cli("inspect", path, check=False)
    assert proc.returncode == 1 and "missing dataset masked_lm_ids" in proc.stdout
    with h5py.File(path, "a") as f:
        f.create_dataset("masked_lm_ids", data=arrays["masked_lm_ids"].astype(np.int64))
    proc = run_cli("inspect", path, check=False)
    assert proc.returncode == 1 and "dtype int64" in proc.stdout


def test_truncated_file_is_not_a_crash(shard):
    tmp_path, _ = shard
    path = tmp_path / "cut.hdf5"
    data = (PARITY_128).read_bytes()
    path.write_bytes(data[: len(data) // 2])
    proc = run_cli("inspect", path, check=False)
    assert proc.returncode == 1 and f"invalid shard: {path}" in proc.stdout
    assert "Traceback" not in proc.stderr


def test_one_bad_file_among_good_ones(shard):
    tmp_path, arrays = shard
    shutil.copy(PARITY_128, tmp_path / "good.hdf5")
    corrupt(tmp_path, arrays, input_mask=_set((0, 0), 2))
    proc = run_cli("inspect", tmp_path, check=False)
    assert proc.returncode == 1
    assert "good.hdf5" in proc.stdout and "invalid shard" in proc.stdout and "bad.hdf5" in proc.stdout


def test_every_file_is_checked_and_each_bad_one_reported(tmp_path):
    write_shard(tmp_path / "good.hdf5", valid_rows(30, np.random.default_rng(2)))
    bad = hostile_files(tmp_path)
    # A running `bertdata shard` keeps unfinished parts in a hidden folder: not shards to check.
    hidden = tmp_path / ".bertdata-shard-x"
    hidden.mkdir()
    (hidden / "part_000000.hdf5").write_bytes(b"half written")
    proc = run_cli("inspect", tmp_path, check=False)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert next(line for line in proc.stdout.splitlines() if line.endswith("good.hdf5")).split()[0] == "30"
    for path, reason in bad.values():
        assert f"invalid shard: {path}: {reason}" in proc.stdout, (reason, proc.stdout)
    assert "part_000000" not in proc.stdout


def sample_vocab_shard(tmp_path, **attrs):
    vocab = load_vocab(sample_paths()[2])
    path = tmp_path / "demo_training_0.hdf5"
    arrays = valid_rows(5, np.random.default_rng(3), vocab_size=len(vocab))
    write_shard(path, arrays, {"vocab_sha256": vocab.sha256, "vocab_size": len(vocab), **attrs})
    return path, vocab, arrays


# No network: a download attempt fails at once instead of fetching a vocab.
OFFLINE = {"HTTPS_PROXY": "http://127.0.0.1:9", "HTTP_PROXY": "http://127.0.0.1:9"}


def test_show_decodes_with_the_vocab_the_shard_records_offline(tmp_path):
    path, vocab, arrays = sample_vocab_shard(tmp_path)
    env = {**os.environ, **OFFLINE, "XDG_CACHE_HOME": str(tmp_path / "empty-cache")}
    proc = run_cli("inspect", path, "--show", "1", check=False, env=env)
    assert proc.returncode == 0, proc.stderr
    first = vocab.tokens[arrays["input_ids"][0, 0]]
    assert "#0 " in proc.stdout and first.lstrip("#") in proc.stdout


def test_a_vocab_other_than_the_recorded_one_is_refused(tmp_path):
    need(VOCAB)
    path, vocab, _ = sample_vocab_shard(tmp_path)
    proc = run_cli("inspect", path, "--show", "1", "--vocab", VOCAB, check=False)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1
    assert f"{path}: made with a vocab of {len(vocab):,} tokens, sha256 {vocab.sha256}" in proc.stderr
    assert "#0" not in proc.stdout


def test_a_recorded_vocab_found_nowhere_is_named(tmp_path):
    path, _, _ = sample_vocab_shard(tmp_path, vocab_sha256="cd" * 32)
    env = {**os.environ, **OFFLINE, "XDG_CACHE_HOME": str(tmp_path / "empty-cache")}
    proc = run_cli("inspect", path, "--show", "1", check=False, env=env)
    assert proc.returncode == 2
    assert f"{path}: made with a vocab of sha256 {'cd' * 32}" in proc.stderr and "--vocab PATH" in proc.stderr


@pytest.mark.slow
def test_show_on_the_demo_build_works_offline(tmp_path):
    env = {**os.environ, **OFFLINE, "XDG_CACHE_HOME": str(tmp_path / "empty-cache")}
    run_cli("build", "--wiki-only", "--sample", "--output", tmp_path / "demo", env=env)
    proc = run_cli("inspect", tmp_path / "demo", "--show", "1", check=False, env=env)
    assert proc.returncode == 0, proc.stderr
    assert "INVALID" not in proc.stdout and proc.stdout.count("#0 ") >= 2 and "[MASK]→" in proc.stdout


def test_a_shard_of_one_document_draws_a_next_sentence_warning(tmp_path):
    need(PARITY)
    lines = [line for line in SHARD_A.read_text().splitlines() if line]
    one_doc = tmp_path / "one_doc.txt"
    one_doc.write_text("\n".join(lines[:400]) + "\n")  # one document: no other to draw from
    run_cli("instances", one_doc, "--output", tmp_path / "one.hdf5", "--vocab", VOCAB)
    proc = run_cli("inspect", tmp_path / "one.hdf5", PARITY_128)
    assert proc.returncode == 0
    warnings = [line for line in proc.stdout.splitlines() if "warning" in line]
    assert len(warnings) == 1 and "one.hdf5" in warnings[0] and "far from 50%" in warnings[0]


def test_output_cut_short_by_its_reader_ends_quietly():
    """`bertdata inspect ... | head -1`: the reader leaves after one line; the command ends with
    the shell's code for a closed pipe and no traceback."""
    need(PARITY)
    proc = subprocess.Popen([sys.executable, "-m", "bertdata.cli", "inspect", str(PARITY), "--show", "3",
                             "--vocab", str(VOCAB)], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    first = proc.stdout.readline()
    proc.stdout.close()  # as `head -1` exits
    stderr = proc.stderr.read().decode()
    assert first and proc.wait(timeout=120) == 141
    assert "Traceback" not in stderr, stderr


def test_vocab_may_be_a_tokenizer_json_as_bench_takes_it(tmp_path, capsys):
    from bertdata.cli import main
    from bertdata.formats import mds
    from conftest import text_samples, trained_tokenizer

    parts = tmp_path / ".parts"
    parts.mkdir()
    mds.finish_local_split([mds.write_part(text_samples(), parts)], parts, tmp_path / "train")
    assert main(["inspect", str(tmp_path / "train"), "--vocab", str(trained_tokenizer("wordpiece"))]) == 0
    out = capsys.readouterr().out
    assert "MDS split" in out and "ids not checked" not in out
