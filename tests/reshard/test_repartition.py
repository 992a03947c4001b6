"""`bertdata shard`: balanced, globally shuffled, deterministic re-partitioning of hdf5 shards."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import socket
import subprocess
import sys
from collections import Counter
from pathlib import Path

import h5py
import numpy as np
import pytest

from bertdata import estimate
from bertdata.reshard import publish, shuffle
from bertdata.reshard import repartition as rp
from bertdata.reshard.publish import OWNER, TEMP_PREFIX
from bertdata.reshard.workers import Terminated
from bertdata.cli import main
from bertdata.fsutil import this_process
from bertdata.errors import BertdataError
from bertdata.instances.schema import record_dtype
from bertdata.formats.hdf5io import DTYPES, FIELDS, file_attrs, part_info, write_shard
from conftest import PARITY_128, PARITY_512, signals_default, needs_test_data
from shards import GEN_ATTRS, STORED, filters, hostile_files, random_shard, reshard, valid_rows


def read_all(path: Path) -> dict[str, np.ndarray]:
    with h5py.File(path, "r") as f:
        return {name: f[name][...] for name in FIELDS}


def row_hashes(path: Path) -> list[str]:
    """One digest per instance over all six fields."""
    a = read_all(path)
    return [hashlib.sha256(b"".join(a[name][i].tobytes() for name in FIELDS)).hexdigest()
            for i in range(len(a["input_ids"]))]


def multiset(paths) -> Counter:
    counts: Counter = Counter()
    for path in paths:
        counts.update(row_hashes(path))
    return counts


def file_bytes(paths) -> list[bytes]:
    return [Path(p).read_bytes() for p in paths]


@pytest.fixture
def inputs(tmp_path) -> list[Path]:
    """Three inputs of different sizes and distinct content, named like a build's shards."""
    folder = tmp_path / "in"
    folder.mkdir()
    rng = np.random.default_rng(0)
    return [random_shard(folder / f"wikicorpus_en_training_{i}.hdf5", n, rng)
            for i, n in enumerate((700, 1100, 901))]


def test_balanced_parts_hold_exactly_the_input_instances(inputs, tmp_path):
    result = reshard(inputs[0].parent, output=tmp_path / "out", parts=7)
    sizes = [h5py.File(p, "r")["input_ids"].shape[0] for p in result.parts]
    assert sum(sizes) == 2701 and max(sizes) - min(sizes) <= 1
    assert [Path(p).name for p in result.parts] == [f"wikicorpus_en_training_{i}.hdf5" for i in range(7)]
    assert multiset(result.parts) == multiset(inputs)
    assert not [p for p in (tmp_path / "out").iterdir() if p.name.startswith(".")], "temporary files left"


def test_parts_are_shuffled_and_mix_every_input(inputs, tmp_path):
    result = reshard(*inputs, output=tmp_path / "out", parts=4)
    owner = {h: i for i, path in enumerate(inputs) for h in row_hashes(path)}
    for part in result.parts:
        sources = [owner[h] for h in row_hashes(part)]
        assert set(sources) == {0, 1, 2}
        # Shuffled, not concatenated: input order changes often along a part.
        assert sum(a != b for a, b in zip(sources, sources[1:])) > len(sources) / 3


def test_parts_readable_by_plain_h5py_in_reference_layout(inputs, tmp_path):
    result = reshard(*inputs, output=tmp_path / "out", parts=3, seed=99)
    for index, part in enumerate(result.parts):
        with h5py.File(part, "r") as f:
            assert sorted(f) == sorted(FIELDS)
            for name in FIELDS:
                assert f[name].dtype == DTYPES[name]
                assert filters(f[name]) == STORED
            assert f["input_ids"].shape[1] == 16 and f["masked_lm_ids"].shape[1] == 4
            attrs = file_attrs(f)
        assert attrs["part_index"] == index and attrs["num_parts"] == 3 and attrs["shard_seed"] == 99
        assert attrs["vocab_sha256"] == GEN_ATTRS["vocab_sha256"] and attrs["seed"] == 7


def test_attrs_that_disagree_are_dropped(tmp_path):
    rng = np.random.default_rng(1)
    a = random_shard(tmp_path / "x_training_0.hdf5", 50, rng, attrs={"seed": 1})
    b = random_shard(tmp_path / "x_training_1.hdf5", 50, rng, attrs={"seed": 2})
    result = reshard(a, b, output=tmp_path / "out", parts=2)
    attrs = part_info(result.parts[0]).attrs
    assert "seed" not in attrs and attrs["masked_lm_prob"] == pytest.approx(0.15)


def test_same_inputs_and_seed_give_byte_identical_parts(inputs, tmp_path):
    first = reshard(inputs[0].parent, output=tmp_path / "a", parts=3)
    # Inputs named in another order, as files: the order is a function of the sorted inputs.
    second = reshard(*reversed(inputs), output=tmp_path / "b", parts=3)
    assert file_bytes(first.parts) == file_bytes(second.parts)
    other_seed = reshard(*inputs, output=tmp_path / "c", parts=3, seed=1)
    assert file_bytes(other_seed.parts) != file_bytes(first.parts)
    assert multiset(other_seed.parts) == multiset(first.parts)


def test_order_does_not_depend_on_slice_or_flush_sizes(inputs, tmp_path, monkeypatch):
    reference = reshard(*inputs, output=tmp_path / "a", parts=3)
    monkeypatch.setattr(shuffle, "SLICE_BYTES", 97 * record_dtype(16, 4).itemsize)
    monkeypatch.setattr(shuffle, "FLUSH_BYTES", 1)
    again = reshard(*inputs, output=tmp_path / "b", parts=3)
    assert file_bytes(reference.parts) == file_bytes(again.parts)


@pytest.mark.slow
def test_many_buckets_and_blocks_same_bytes_with_any_worker_count(inputs, tmp_path, monkeypatch):
    # Small buckets and blocks make parts span buckets and slices span blocks. Both constants
    # are used by the main process only, so the spawned workers need not see the patch.
    monkeypatch.setattr(shuffle, "BUCKET_BYTES", 300 * record_dtype(16, 4).itemsize)
    monkeypatch.setattr(shuffle, "BLOCK", 256)
    one = reshard(*inputs, output=tmp_path / "w1", parts=5)
    manifest = json.loads((tmp_path / "w1" / "manifest.json").read_text())
    assert manifest["buckets"] == 10
    assert multiset(one.parts) == multiset(inputs)
    three = reshard(*inputs, output=tmp_path / "w3", parts=5, workers=3)
    assert file_bytes(one.parts) == file_bytes(three.parts)
    sampled = [reshard(*inputs, output=tmp_path / f"s{w}", parts=5, workers=w, sample=0.5) for w in (1, 2)]
    assert file_bytes(sampled[0].parts) == file_bytes(sampled[1].parts)


def test_sample_and_max_instances_take_a_uniform_subset(inputs, tmp_path):
    everything = multiset(inputs)
    result = reshard(*inputs, output=tmp_path / "s", parts=4, sample=0.25)
    taken = multiset(result.parts)
    assert sum(taken.values()) == round(0.25 * 2701)
    assert not taken - everything
    owner = {h: i for i, path in enumerate(inputs) for h in row_hashes(path)}
    per_input = Counter(owner[h] for h in taken)
    # Proportional to input size (700, 1100, 901), not the first file first.
    assert all(abs(per_input[i] - n / 4) < n / 8 for i, n in enumerate((700, 1100, 901)))

    capped = reshard(*inputs, output=tmp_path / "m", parts=3, max_instances=1000)
    assert sum(multiset(capped.parts).values()) == 1000 and not multiset(capped.parts) - everything
    again = reshard(*inputs, output=tmp_path / "m2", parts=3, max_instances=1000)
    assert file_bytes(capped.parts) == file_bytes(again.parts)
    other = reshard(*inputs, output=tmp_path / "m3", parts=3, max_instances=1000, seed=5)
    assert multiset(other.parts) != multiset(capped.parts)
    assert sum(multiset(reshard(*inputs, output=tmp_path / "all", parts=2, max_instances=10**6).parts).values()) == 2701


@pytest.mark.parametrize("what,change", [
    ("max_seq_length", {"seq": 32}),
    ("max_predictions_per_seq", {"preds": 5}),
    ("vocab_sha256", {"attrs": {"vocab_sha256": "cd" * 32}}),
])
def test_inputs_that_disagree_are_refused_naming_both(tmp_path, what, change):
    rng = np.random.default_rng(2)
    a = random_shard(tmp_path / "x_training_0.hdf5", 20, rng)
    b = random_shard(tmp_path / "x_training_1.hdf5", 20, rng, **change)
    with pytest.raises(BertdataError, match=what) as err:
        reshard(a, b, output=tmp_path / "out", parts=2)
    assert str(a) in str(err.value) and str(b) in str(err.value)
    assert not (tmp_path / "out").exists()


def test_vocab_recorded_by_one_input_only_is_no_conflict(tmp_path):
    rng = np.random.default_rng(3)
    a = random_shard(tmp_path / "x_training_0.hdf5", 20, rng)
    b = tmp_path / "x_training_1.hdf5"
    write_shard(b, {k: v for k, v in read_all(random_shard(tmp_path / "y.hdf5", 20, rng)).items()})
    result = reshard(a, b, output=tmp_path / "out", parts=2)
    assert "vocab_sha256" not in part_info(result.parts[0]).attrs


def test_existing_parts_need_force_and_force_leaves_a_consistent_folder(inputs, tmp_path):
    out = tmp_path / "out"
    reshard(*inputs, output=out, parts=5)
    before = file_bytes(sorted(out.glob("*.hdf5")))
    with pytest.raises(BertdataError, match="--force"):
        reshard(*inputs, output=out, parts=2)
    assert file_bytes(sorted(out.glob("*.hdf5"))) == before
    result = reshard(*inputs, output=out, parts=2, force=True)
    assert sorted(p.name for p in out.iterdir()) == [
        "manifest.json", "wikicorpus_en_training_0.hdf5", "wikicorpus_en_training_1.hdf5"]
    assert len(result.removed) == 3
    # A renamed set replaces the old one (listed in the old manifest) as well.
    reshard(*inputs, output=out, parts=2, force=True, name="mix")
    assert sorted(p.name for p in out.glob("*.hdf5")) == ["mix_training_0.hdf5", "mix_training_1.hdf5"]
    # A manifest alone also counts as earlier output.
    for part in out.glob("*.hdf5"):
        part.unlink()
    with pytest.raises(BertdataError, match="manifest"):
        reshard(*inputs, output=out, parts=2)


def test_manifest_records_inputs_options_and_parts(inputs, tmp_path):
    result = reshard(*inputs, output=tmp_path / "out", parts=3, sample=0.5)
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert [i["instances"] for i in manifest["inputs"]] == [700, 1100, 901]
    assert manifest["inputs"][0]["sha256"] == hashlib.sha256(inputs[0].read_bytes()).hexdigest()
    assert manifest["options"]["sample"] == 0.5 and manifest["options"]["parts"] == 3
    assert manifest["instances_in"] == 2701 and manifest["instances_out"] == round(0.5 * 2701)
    for entry, part in zip(manifest["parts"], result.parts):
        assert entry["sha256"] == hashlib.sha256(Path(part).read_bytes()).hexdigest()
        assert entry["instances"] == h5py.File(part, "r")["input_ids"].shape[0]


def test_split_selects_files_and_names_parts(tmp_path):
    rng = np.random.default_rng(4)
    folder = tmp_path / "in"
    folder.mkdir()
    train = random_shard(folder / "books_training_0.hdf5", 30, rng)
    test = random_shard(folder / "books_test_0.hdf5", 20, rng)
    result = reshard(folder, output=tmp_path / "tr", parts=2)
    assert multiset(result.parts) == multiset([train])
    result = reshard(folder, output=tmp_path / "te", parts=2, split="test")
    assert [Path(p).name for p in result.parts] == ["books_test_0.hdf5", "books_test_1.hdf5"]
    assert multiset(result.parts) == multiset([test])
    result = reshard(folder, output=tmp_path / "all", parts=2, split="all")
    assert multiset(result.parts) == multiset([train, test])
    other = random_shard(tmp_path / "other.hdf5", 10, rng)
    assert Path(reshard(train, other, output=tmp_path / "mixed", parts=1).parts[0]).name == "shards_training_0.hdf5"


def test_earlier_parts_inside_an_input_folder_are_not_read_again(inputs, tmp_path):
    out = inputs[0].parent / "parts"
    reshard(inputs[0].parent, output=out, parts=2)
    again = reshard(inputs[0].parent, output=out, parts=3, force=True)
    assert multiset(again.parts) == multiset(inputs)
    with pytest.raises(BertdataError, match="inside the output folder"):
        reshard(out / "wikicorpus_en_training_0.hdf5", output=out, parts=1, force=True)


def test_earlier_outputs_inside_an_input_folder_are_never_read_as_input(inputs, tmp_path, capsys):
    folder = inputs[0].parent
    for output in ("parts", "parts", "more"):  # the same command twice, then another output
        argv = ["shard", str(folder), "--output", str(folder / output), "--parts", "2", "--force"]
        assert main(argv) == 0
        assert multiset((folder / output).glob("*.hdf5")) == multiset(inputs)
    err = capsys.readouterr().err
    assert f"{folder / 'parts'}: the output of an earlier bertdata shard, 2 files not read as input" in err
    # Named as an input itself, such a folder is read.
    assert multiset(reshard(folder / "parts", output=tmp_path / "again", parts=1).parts) == multiset(inputs)
    # A manifest of another writer, or none at all, does not hide a folder's shards.
    (folder / "parts" / "manifest.json").write_text('{"tool": {"name": "bertdata build"}}')
    twice = multiset(inputs) + multiset(inputs)  # the inputs and the parts; not "more", still ours
    assert multiset(reshard(folder, output=tmp_path / "all", parts=2).parts) == twice


def test_interrupted_run_leaves_no_temporary_files_and_no_parts(inputs, tmp_path, monkeypatch):
    def interrupted(*args):
        raise KeyboardInterrupt

    monkeypatch.setattr(rp, "write_part", interrupted)
    with pytest.raises(KeyboardInterrupt):
        reshard(*inputs, output=tmp_path / "out", parts=2)
    assert list((tmp_path / "out").iterdir()) == []


@pytest.mark.parametrize("argv,message", [
    (["--parts", "0"], "--parts must be at least 1"),
    (["--parts", "2702"], "more than the 2,701 instances"),
    (["--parts", "100", "--sample", "0.01"], "--sample keeps 27"),
    (["--parts", "2", "--sample", "0"], r"--sample must be in \(0, 1\]"),
    (["--parts", "2", "--sample", "1.5"], r"--sample must be in \(0, 1\]"),
    (["--parts", "2", "--split", "test"], "no \\*_test_\\* shard files found"),
])
def test_cli_errors_exit_2(inputs, tmp_path, capsys, argv, message):
    assert main(["shard", str(inputs[0].parent), "--output", str(tmp_path / "out"), *argv]) == 2
    err = capsys.readouterr().err
    assert "bertdata shard: error:" in err
    assert __import__("re").search(message, err), err


def test_workers_past_the_cores_are_capped_with_a_note(inputs, tmp_path, capsys, monkeypatch):
    from bertdata.pipelines.runtime import pool

    monkeypatch.setattr(pool, "cores", lambda: 1)
    assert main(["shard", str(inputs[0].parent), "--output", str(tmp_path / "out"), "--parts", "2",
                 "--workers", "8"]) == 0
    assert ("bertdata shard: --workers 8 is more than the 1 cores this process may use: running 1, as more would "
            "only take turns on them") in capsys.readouterr().err.splitlines()


def test_cli_writes_parts_and_prints_a_summary(inputs, tmp_path, capsys):
    assert main(["shard", str(inputs[0].parent), "--output", str(tmp_path / "out"), "--parts", "2",
                 "--max-instances", "500", "--seed", "3"]) == 0
    captured = capsys.readouterr()
    assert "2,701 instances in, 500 out, 2 parts" in captured.out and "MB/s" in captured.out
    assert captured.err == ""  # no progress bars drawn into a pipe or a log
    assert sorted(p.name for p in (tmp_path / "out").glob("*.hdf5")) == [
        "wikicorpus_en_training_0.hdf5", "wikicorpus_en_training_1.hdf5"]


@needs_test_data
@pytest.mark.parametrize("real,parts", [(PARITY_128, 5), (PARITY_512, 3)])
def test_real_shards_keep_every_instance(tmp_path, real, parts):
    result = reshard(real, output=tmp_path / "out", parts=parts)
    assert multiset(result.parts) == multiset([real])
    sizes = [h5py.File(p, "r")["input_ids"].shape[0] for p in result.parts]
    assert max(sizes) - min(sizes) <= 1
    with h5py.File(real, "r") as ref, h5py.File(result.parts[0], "r") as part:
        for name in FIELDS:
            assert part[name].dtype == ref[name].dtype and part[name].compression == ref[name].compression
            assert part[name].shape[1:] == ref[name].shape[1:]
    # The reference writes no attributes, so only the part's own are recorded.
    assert set(part_info(result.parts[0]).attrs) == {"shard_seed", "part_index", "num_parts"}


def test_shards_of_different_masking_schemes_are_refused(tmp_path):
    rng = np.random.default_rng(8)
    token = random_shard(tmp_path / "a_training_0.hdf5", 20, rng)
    whole = random_shard(tmp_path / "b_training_0.hdf5", 20, rng, attrs={"masking_scheme": "whole-word"})
    with pytest.raises(BertdataError, match="masking scheme whole-word differs") as err:
        reshard(token, whole, output=tmp_path / "out", parts=2)
    assert str(whole) in str(err.value)
    result = reshard(whole, random_shard(tmp_path / "c_training_0.hdf5", 20, rng, attrs={"masking_scheme": "whole-word"}),
                   output=tmp_path / "same", parts=2)
    assert part_info(result.parts[0]).attrs["masking_scheme"] == "whole-word"


@needs_test_data
def test_real_shards_of_different_lengths_are_refused(tmp_path):
    with pytest.raises(BertdataError, match="max_seq_length") as err:
        reshard(PARITY_128, PARITY_512, output=tmp_path / "out", parts=2)
    assert str(PARITY_128) in str(err.value) and str(PARITY_512) in str(err.value)


@needs_test_data
def test_real_and_synthetic_shards_mix(tmp_path):
    rng = np.random.default_rng(5)
    synthetic = random_shard(tmp_path / "syn_training_0.hdf5", 500, rng, seq=128, preds=20)
    result = reshard(PARITY_128, synthetic, output=tmp_path / "out", parts=4, sample=0.5)
    taken = multiset(result.parts)
    assert sum(taken.values()) == round(0.5 * (11631 + 500)) and not taken - multiset([PARITY_128, synthetic])
    names = [os.path.basename(p) for p in result.parts]
    assert names == [f"shards_training_{i}.hdf5" for i in range(4)]


def test_other_integer_dtypes_are_cast_and_bad_ones_refused_without_leftovers(tmp_path):
    rng = np.random.default_rng(6)
    good = random_shard(tmp_path / "x_training_0.hdf5", 40, rng)
    wide = tmp_path / "x_training_1.hdf5"
    arrays = read_all(random_shard(tmp_path / "src.hdf5", 40, rng))
    with h5py.File(wide, "w") as f:
        for name in FIELDS:
            f.create_dataset(name, data=arrays[name].astype(np.int64))
    result = reshard(good, wide, output=tmp_path / "ok", parts=2)
    assert multiset(result.parts) == multiset([good, tmp_path / "src.hdf5"])

    with h5py.File(wide, "r+") as f:
        f["input_ids"][0, 1] = 1 << 33  # a valid id for a vocab that big (none recorded), but not int32
    with pytest.raises(BertdataError, match=f"{wide}: dataset input_ids has values outside int32"):
        reshard(good, wide, output=tmp_path / "bad", parts=2)
    with h5py.File(wide, "r+") as f:
        f["input_ids"][0, 1] = 1
        del f["segment_ids"]
        f.create_dataset("segment_ids", data=arrays["segment_ids"].astype(np.float32))
    with pytest.raises(BertdataError, match="segment_ids has dtype float32"):
        reshard(good, wide, output=tmp_path / "bad", parts=2)
    assert list((tmp_path / "bad").iterdir()) == []


def test_corrupt_input_data_is_a_clear_error(inputs, tmp_path):
    broken = tmp_path / "broken_training_0.hdf5"
    data = bytearray(inputs[1].read_bytes())
    # Zero a stretch in the middle of the file: compressed chunks, not the metadata up front.
    middle = len(data) // 2
    data[middle:middle + 4096] = bytes(4096)
    broken.write_bytes(bytes(data))
    with pytest.raises(BertdataError, match=f"{broken}: unreadable data"):
        reshard(inputs[0], broken, output=tmp_path / "out", parts=2)
    assert list((tmp_path / "out").iterdir()) == []


def test_output_folder_that_is_the_input_folder_is_explained(inputs, tmp_path):
    reshard(inputs[0].parent, output=tmp_path / "parts", parts=2)
    with pytest.raises(BertdataError, match="2 inside the output folder are not read"):
        reshard(tmp_path / "parts", output=tmp_path / "parts", parts=2, force=True)


# ---------------------------------------------------------------- hostile and careless input

def test_invalid_layouts_are_refused_by_name_before_anything_is_written(tmp_path, capsys):
    for name, (path, reason) in hostile_files(tmp_path).items():
        out = tmp_path / f"out_{name}"
        assert main(["shard", str(path), "--output", str(out), "--parts", "1"]) == 2, name
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and f"{path}: {reason}" in err, err
        assert not out.exists()


@pytest.mark.parametrize("field, index, value, reason", [
    ("input_ids", (3, 1), 50, "token id >= vocab size 50"),
    ("input_ids", (3, 1), -7, "negative token id"),
    ("masked_lm_ids", (4, 0), -1, "masked_lm_ids has a negative id"),
    ("next_sentence_labels", 5, 3, "next_sentence_labels not 0 or 1"),
    ("masked_lm_positions", (6, 0), 16, "masked position outside the real tokens"),
])
def test_invalid_rows_are_refused_naming_file_instance_and_reason(tmp_path, capsys, field, index, value, reason):
    rng = np.random.default_rng(8)
    good = random_shard(tmp_path / "a_training_0.hdf5", 30, rng)
    arrays = valid_rows(30, rng, vocab_size=50)
    arrays["masked_lm_positions"][6] = [15, 0, 0, 0]  # then position 16 is past the last real token only
    arrays["input_mask"][6], arrays["segment_ids"][6] = 1, 0
    arrays["input_ids"][6] = 9
    arrays[field][index] = value
    bad = tmp_path / "b_training_0.hdf5"
    write_shard(bad, arrays, {"vocab_size": 50})
    out = tmp_path / "out"
    assert main(["shard", str(good), str(bad), "--output", str(out), "--parts", "2"]) == 2
    err = capsys.readouterr().err
    assert f"invalid input shard: {bad}: instance {index if np.isscalar(index) else index[0]}: {reason}" in err, err
    assert list(out.iterdir()) == []


def test_float_ids_are_refused_before_anything_is_written(tmp_path):
    rng = np.random.default_rng(9)
    arrays = valid_rows(10, rng)
    path = tmp_path / "f_training_0.hdf5"
    with h5py.File(path, "w") as f:
        for name in FIELDS:
            f[name] = arrays[name].astype(np.float64 if name == "input_ids" else DTYPES[name])
    with pytest.raises(BertdataError, match=f"{path}: dataset input_ids has dtype float64, expected int32"):
        reshard(path, output=tmp_path / "out", parts=1)
    assert not (tmp_path / "out").exists()


def test_too_little_free_disk_is_refused_saying_how_much_is_needed(inputs, tmp_path, monkeypatch):
    monkeypatch.setattr(estimate.shutil, "disk_usage", lambda path: __import__("shutil")._ntuple_diskusage(1, 1, 1000))
    # 2,701 rows of 101 bytes uncompressed, plus the parts about as large as the inputs.
    needed = 2701 * record_dtype(16, 4).itemsize + sum(p.stat().st_size for p in inputs)
    with pytest.raises(BertdataError, match=rf"need about {needed / 1e6:.1f} MB, but only 1 kB is free"):
        reshard(*inputs, output=tmp_path / "out", parts=2)
    assert not (tmp_path / "out").exists()


def test_read_only_output_is_one_line(inputs, tmp_path, monkeypatch, capsys):
    out = tmp_path / "locked"
    out.mkdir()
    out.chmod(0o555)
    if os.geteuid() == 0:  # root writes anyway: fail as the kernel does for everyone else
        def refuse(*args, **kwargs):
            raise PermissionError(13, "Permission denied")
        monkeypatch.setattr(publish.tempfile, "mkdtemp", refuse)
    assert main(["shard", str(inputs[0]), "--output", str(out), "--parts", "1"]) == 2
    err = capsys.readouterr().err
    assert err == f"bertdata shard: error: {out}: cannot write the parts there (Permission denied)\n"


def test_sigterm_cleans_up_like_ctrl_c_and_exits_143(inputs, tmp_path, monkeypatch):
    def terminated(plan, part, progress):
        os.kill(os.getpid(), signal.SIGTERM)
        progress(1)

    monkeypatch.setattr(rp, "write_part", terminated)
    with pytest.raises(Terminated) as caught:
        reshard(*inputs, output=tmp_path / "out", parts=2)
    assert caught.value.exit_code == 143
    assert list((tmp_path / "out").iterdir()) == []
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL


def _temp_folder(output: Path, owner) -> Path:
    folder = output / f"{TEMP_PREFIX}{len(list(output.iterdir()))}"
    folder.mkdir(parents=True)
    (folder / "bucket_000000.bin").write_bytes(bytes(100))
    if owner is not None:
        (folder / OWNER).write_text(json.dumps(owner))
    return folder


def test_next_run_removes_only_temp_folders_of_dead_runs(inputs, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    ended = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    host = socket.gethostname()
    dead = _temp_folder(out, {"pid": int(ended.stdout), "host": host, "start": None})
    reused = _temp_folder(out, {"pid": os.getpid(), "host": host, "start": "1"})  # pid now someone else's
    live = _temp_folder(out, {"pid": os.getpid(), "host": host, "start": this_process()["start"]})
    elsewhere = _temp_folder(out, {"pid": int(ended.stdout), "host": host + "-other", "start": None})
    unknown = _temp_folder(out, None)
    result = reshard(*inputs, output=out, parts=1)
    assert not dead.exists() and not reused.exists()
    assert live.exists() and elsewhere.exists() and unknown.exists()
    assert sum(note.startswith("removed") for note in result.notes) == 2
    assert sum(note.startswith("left") for note in result.notes) == 3
    assert sorted(p.name for p in out.iterdir() if p.name.startswith(TEMP_PREFIX)) == \
        sorted(p.name for p in (live, elsewhere, unknown))


_STALLED_RUN = """
import sys, time
from bertdata.reshard import repartition as rp
real = rp.write_part
def stalled(plan, part, progress):
    real(plan, part, progress)
    print("stalled", flush=True)
    while True:
        time.sleep(0.05)
        progress(0)
rp.write_part = stalled
from bertdata.cli import main
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.parametrize("signum, code", [(signal.SIGTERM, 143), (signal.SIGHUP, 129), (signal.SIGQUIT, 131),
                                          (signal.SIGKILL, -9)])
def test_killed_run_leaves_nothing_a_loader_would_take_and_nothing_the_next_run_keeps(inputs, tmp_path, signum, code):
    out = tmp_path / "out"
    argv = ["shard", str(inputs[0].parent), "--output", str(out), "--parts", "2"]
    proc = subprocess.Popen([sys.executable, "-c", _STALLED_RUN, *argv], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, preexec_fn=signals_default)
    try:
        assert proc.stdout.readline() == "stalled\n"
        temp = [p for p in out.rglob("*") if p.is_file()]
        assert any(p.name.endswith(".hdf5") for p in temp) and any(p.name == OWNER for p in temp)
        assert not [p for p in temp if "train" in str(p.relative_to(out))]
        proc.send_signal(signum)
        assert proc.wait(timeout=60) == code
    finally:
        proc.kill()
        proc.wait()
    if signum != signal.SIGKILL:
        stderr = proc.stderr.read()
        assert stderr.splitlines()[-1] == (f"bertdata shard: error: stopped by {signal.Signals(signum).name}; "
                                           "temporary files removed, no parts written") and "Traceback" not in stderr
        assert list(out.iterdir()) == []
    else:
        assert len(list(out.iterdir())) == 1
        again = subprocess.run([sys.executable, "-m", "bertdata.cli", *argv], capture_output=True, text=True)
        assert again.returncode == 0 and "left by a run that was killed" in again.stderr
        assert sorted(p.name for p in out.iterdir()) == [
            "manifest.json", "wikicorpus_en_training_0.hdf5", "wikicorpus_en_training_1.hdf5"]
