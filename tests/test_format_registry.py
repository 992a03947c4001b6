"""A fourth format is one class and its registry entry: a plain `.npz` shard, written here,
registered, then found by `inspect`, trained on by `bench --loader-only` and re-partitioned by
`shard` through the format layer alone; and the one finder that every command uses."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import numpy as np
import pytest

from bertdata import cli, formats
from bertdata.errors import BertdataError, ValidationError
from bertdata.formats import INSTANCES, PER_SHARD, Reading, Report, ShardInfo
from bertdata.formats.checks import ShardStats, check_batch
from bertdata.formats.report import print_row
from bertdata.instances.schema import DTYPES, FIELDS
from shards import valid_rows


@dataclass(frozen=True)
class NpzShards:
    """The six arrays in one numpy `.npz` file per shard."""

    name: ClassVar[str] = "npz"
    cut: ClassVar[str] = PER_SHARD
    holds: ClassVar[str] = INSTANCES
    takes_any_file: ClassVar[bool] = False
    disk_per_text_byte: ClassVar[dict] = {1: 3.0, 2: 3.0}
    rows_as_text: ClassVar[bool] = False

    def claims(self, path: str) -> bool:
        return os.path.isfile(path) and path.endswith(".npz")

    def find(self, folder: str) -> list[str]:
        return sorted(str(p) for p in Path(folder).rglob("*.npz"))

    def training(self, units: list[str]) -> list[str]:
        return [u for u in units if "training" in Path(u).name]

    def parts(self, unit: str) -> list[ShardInfo]:
        with np.load(unit) as f:
            missing = set(FIELDS) - set(f.files)
            if missing:
                raise ValidationError(f"{unit}: missing array {sorted(missing)[0]}")
            n, seq = f["input_ids"].shape
            return [ShardInfo(unit, n, seq, f["masked_lm_positions"].shape[1])]

    def reading(self, parts, vocab_path, masking_scheme) -> Reading:
        return Reading(self.name)

    def load(self, part: ShardInfo, reading: Reading) -> dict[str, np.ndarray]:
        with np.load(part.path) as f:
            return {name: f[name] for name in FIELDS}

    def slices(self, part: ShardInfo, reading: Reading, rows: int):
        arrays = self.load(part, reading)
        for start in range(0, part.num_instances, rows):
            yield {name: values[start:start + rows] for name, values in arrays.items()}

    def inspect(self, units: list[str], report: Report) -> None:
        report.out(f"npz shards: {len(units)}")
        for unit in units:
            try:
                part = self.parts(unit)[0]
                stats = ShardStats(unit, instances=part.num_instances, max_seq_length=part.max_seq_length)
                check_batch(unit, 0, self.load(part, Reading(self.name)), 30522, stats)
            except ValidationError as err:
                report.failures.append(str(err))
                continue
            print_row(report, stats, unit)


@pytest.fixture
def npz_registered():
    fmt = formats.register(NpzShards())
    yield fmt
    del formats.REGISTRY[fmt.name]


def write_npz(path: Path, n: int, seed: int, **changes) -> dict[str, np.ndarray]:
    rows = {name: values.astype(DTYPES[name]) for name, values in valid_rows(n, np.random.default_rng(seed)).items()}
    rows.update(changes)
    np.savez(path, **rows)
    return rows


def test_inspect_finds_and_checks_a_registered_format(npz_registered, tmp_path, capsys):
    write_npz(tmp_path / "toy_training_0.npz", 40, 1)
    write_npz(tmp_path / "toy_training_1.npz", 30, 2)
    assert cli.main(["inspect", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "npz shards: 2" in out and "toy_training_0.npz" in out and "toy_training_1.npz" in out
    rows = write_npz(tmp_path / "toy_training_2.npz", 10, 3)
    broken = rows["input_mask"].copy()
    broken[4, 0] = 5
    np.savez(tmp_path / "toy_training_2.npz", **{**rows, "input_mask": broken})
    assert cli.main(["inspect", str(tmp_path)]) == 1
    assert "toy_training_2.npz: instance 4: input_mask has values other than 0 and 1" in capsys.readouterr().out


@pytest.mark.integration  # the bench end to end, torch imported
def test_bench_reads_a_registered_format(npz_registered, tmp_path, capsys):
    pytest.importorskip("torch", reason="the bench extra (torch) is not installed")
    write_npz(tmp_path / "toy_training_0.npz", 64, 1)
    write_npz(tmp_path / "toy_test_0.npz", 64, 2)  # not training data: left out
    report = tmp_path / "report.json"
    assert cli.main(["bench", "--data", str(tmp_path), "--loader-only", "--device", "cpu", "--batch-size", "8",
                     "--steps", "4", "--warmup-steps", "1", "--workers", "0", "--json", str(report)]) == 0
    [record] = json.loads(report.read_text())
    assert record["data_format"] == "npz" and record["shards"] == 1 and record["sequences"] == 4 * 8


def test_without_its_entry_the_format_is_not_read(tmp_path):
    write_npz(tmp_path / "toy_training_0.npz", 8, 1)
    with pytest.raises(BertdataError, match="no shards of any format"):
        formats.find([str(tmp_path)])


def test_one_finder_for_every_format(npz_registered, tmp_path):
    from bertdata.formats.hdf5io import write_shard

    (tmp_path / "a").mkdir()
    write_npz(tmp_path / "a" / "x_training_0.npz", 8, 1)
    write_shard(tmp_path / "a" / "y_training_0.hdf5", valid_rows(8, np.random.default_rng(4)))
    (tmp_path / "a" / ".hidden").mkdir()
    write_shard(tmp_path / "a" / ".hidden" / "z_training_0.hdf5", valid_rows(8, np.random.default_rng(5)))
    found = formats.find([str(tmp_path / "a"), str(tmp_path / "a" / "x_training_0.npz")])
    assert sorted((f.format.name, Path(f.path).name) for f in found) == [("hdf5", "y_training_0.hdf5"),
                                                                         ("npz", "x_training_0.npz")]
    assert [fmt.name for fmt, _units in formats.by_format(found)] == ["hdf5", "npz"]
    with pytest.raises(BertdataError, match="no such file or folder"):
        formats.find([str(tmp_path / "missing")])


def test_shard_re_partitions_a_registered_format(npz_registered, tmp_path):
    from bertdata.formats.hdf5io import read_shard

    (tmp_path / "in").mkdir()
    first = write_npz(tmp_path / "in" / "toy_training_0.npz", 30, 1)
    second = write_npz(tmp_path / "in" / "toy_training_1.npz", 20, 2)
    assert cli.main(["shard", str(tmp_path / "in"), "--output", str(tmp_path / "parts"), "--parts", "3"]) == 0
    parts = [read_shard(p) for p in sorted((tmp_path / "parts").glob("*.hdf5"))]
    assert [len(p["input_ids"]) for p in parts] == [17, 17, 16]
    given = np.concatenate([first["input_ids"], second["input_ids"]])
    written = np.concatenate([p["input_ids"] for p in parts])
    assert sorted(map(bytes, given)) == sorted(map(bytes, written))  # every instance once, shuffled


def test_the_flags_name_the_registered_formats():
    from bertdata.config import FORMATS

    assert FORMATS == tuple(formats.REGISTRY)
