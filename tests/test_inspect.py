"""`bertdata inspect`: valid shards pass with statistics; each kind of corruption fails with exit 1."""

from __future__ import annotations

import shutil

import h5py
import numpy as np
import pytest

from bertdata.hdf5io import read_shard, write_shard
from conftest import PARITY, VOCAB, need_shared, run_cli

PHASE1 = "A_s12345_128_20_p15_d5.hdf5"


def test_parity_files_validate_with_statistics():
    need_shared(PARITY)
    proc = run_cli("inspect", PARITY, "--show", "1", "--vocab", VOCAB)
    assert proc.returncode == 0
    row = next(line for line in proc.stdout.splitlines() if line.endswith(PHASE1))
    instances, seq, real, short, masked, random_next = row.split()[:6]
    assert (int(instances), int(seq)) == (12355, 128)
    assert 100 < float(real) <= 128 and 15 < float(masked) <= 20
    assert 40 < float(random_next.rstrip("%")) < 60
    assert "[MASK]→" in proc.stdout
    assert "total of 1 valid file(s) with sequence length 128" in proc.stdout
    assert "total of 1 valid file(s) with sequence length 512" in proc.stdout


@pytest.fixture
def shard(tmp_path):
    need_shared(PARITY)
    arrays = read_shard(PARITY / PHASE1, 0, 200)
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
    ({"segment_ids": _set((2, 127), 1)}, "segment_ids"),
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
    data = (PARITY / PHASE1).read_bytes()
    path.write_bytes(data[: len(data) // 2])
    proc = run_cli("inspect", path, check=False)
    assert proc.returncode == 1 and f"invalid shard: {path}" in proc.stdout
    assert "Traceback" not in proc.stderr


def test_one_bad_file_among_good_ones(shard):
    tmp_path, arrays = shard
    shutil.copy(PARITY / PHASE1, tmp_path / "good.hdf5")
    corrupt(tmp_path, arrays, input_mask=_set((0, 0), 2))
    proc = run_cli("inspect", tmp_path, check=False)
    assert proc.returncode == 1
    assert "good.hdf5" in proc.stdout and "invalid shard" in proc.stdout and "bad.hdf5" in proc.stdout
