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
from bertdata.formats import DOCUMENTS, INSTANCES, PER_SHARD, PER_SPLIT, FormatFlag, Reading, Report, PartInfo
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

    def parts(self, unit: str) -> list[PartInfo]:
        with np.load(unit) as f:
            missing = set(FIELDS) - set(f.files)
            if missing:
                raise ValidationError(f"{unit}: missing array {sorted(missing)[0]}")
            n, seq = f["input_ids"].shape
            return [PartInfo(unit, n, seq, f["masked_lm_positions"].shape[1])]

    def reading(self, parts, vocab_path, masking_scheme) -> Reading:
        return Reading(self.name)

    def load(self, part: PartInfo, reading: Reading) -> dict[str, np.ndarray]:
        with np.load(part.path) as f:
            return {name: f[name] for name in FIELDS}

    def slices(self, part: PartInfo, reading: Reading, rows: int):
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
    formats.unregister(fmt.name)


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


def test_the_names_are_known_without_importing_a_format(npz_registered):
    import subprocess
    import sys

    code = ("import sys; from bertdata import formats; from bertdata.commands import build; "
            "print(formats.names(), sorted(m for m in ('h5py', 'pyarrow', 'numpy') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == f"{tuple(formats.BUILTIN)} []"
    assert formats.names() == (*formats.BUILTIN, "npz")
    assert [f.name for f in formats.all_formats()] == list(formats.names())


def test_build_help_describes_every_format_without_importing_one():
    """Each format's --help line is its registry entry's: importing every format to describe it
    took `build --help` from 54 ms to 337-430 ms."""
    import subprocess
    import sys

    code = ("import atexit, sys; atexit.register(lambda: print(sorted(m for m in sys.modules if m.split('.')[0] in "
            "('h5py', 'pyarrow', 'numpy', 'zstandard') or m.startswith('bertdata.formats.')))); "
            "from bertdata.cli import main; main(['build', '--help'])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout
    help_text, imported = " ".join(out.split()[:-1]), out.splitlines()[-1]
    assert imported == "['bertdata.formats.contract']"
    for name, entry in formats.BUILTIN.items():
        assert " ".join(f"{name}: {entry.describe}".split()) in help_text


# --- writing: a format cut per shard and one cut per split, each one class and one `register`,
# written by a real build beside the built-in ones ---

@dataclass(frozen=True)
class NpzWriter(NpzShards):
    """NpzShards as a format the build writes, one `.npz` per text shard and phase."""

    name: ClassVar[str] = "npzw"
    describe: ClassVar[str] = "the six arrays in one .npz per text shard (a test's format)"
    layout: ClassVar[dict] = {"container": "npz"}

    def summary(self, folder: str, manifest: dict) -> str:
        return f"npzw: {manifest['counts']['instances']} instances in {manifest['counts']['npzw_shards']} files"

    def folder(self, cfg, lowercase: bool = True) -> str:
        return f"npz_seq_len_{cfg.max_seq_length}"

    def file_names(self, stem: str, split: str, index: int) -> tuple[str, ...]:
        return (f"{stem}.npz",)

    def write(self, paths, instances, attrs, *, helper_thread: bool = True) -> None:
        [path] = paths
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(path).with_name(".tmp-" + Path(path).name)
        with open(tmp, "wb") as f:
            np.savez(f, **{name: instances.array(name, 0, len(instances)) for name in FIELDS},
                     attrs=np.array(json.dumps(dict(attrs), sort_keys=True)))
        os.replace(tmp, path)

    def info(self, paths) -> PartInfo:
        [path] = paths
        with np.load(path) as f:
            attrs = json.loads(str(f["attrs"]))
            n, seq = f["input_ids"].shape
            return PartInfo(str(path), n, seq, f["masked_lm_positions"].shape[1], attrs)

    def read(self, paths):
        [path] = paths
        with np.load(path) as f:
            yield {name: f[name] for name in FIELDS}

    def pattern(self) -> str:
        return "*.npz"


@dataclass(frozen=True)
class JsonLines:
    """Documents as JSON lines, one file per split: a part per text shard, joined in order."""

    name: ClassVar[str] = "jsonl"
    cut: ClassVar[str] = PER_SPLIT
    holds: ClassVar[str] = DOCUMENTS
    takes_any_file: ClassVar[bool] = False
    disk_per_text_byte: ClassVar[dict] = {None: 2.0}
    describe: ClassVar[str] = "documents as JSON lines (a test's format)"
    writes: ClassVar[str] = "one .jsonl per split"
    flags: ClassVar[tuple] = (FormatFlag("indent", "spaces before each line", None),)

    def folder(self, settings) -> str:
        return "jsonl"

    def options(self, settings) -> dict:
        return {"tokenizer": settings.tokenizer.sha256, "max_seq_length": settings.max_seq_length}

    def write_part(self, shard, documents, settings, local) -> str:
        indent = " " * int(settings.flag("indent") or 0)
        prefix, suffix = list(settings.tokenizer.prefix), list(settings.tokenizer.suffix)
        with open(os.path.join(local, "part.jsonl"), "wb") as f:
            for d in range(documents.num_documents):
                start, end = documents.sentence_offsets[documents.doc_offsets[d:d + 2]]
                ids = prefix + documents.tokens[start:end].tolist() + suffix
                f.write((indent + json.dumps({"id": f"{shard.stem}/{d}", "input_ids": ids}) + "\n").encode())
        return "part.jsonl"

    def finish_split(self, split, parts, settings, folder, files) -> dict:
        path = files.join(folder, f"{split}.jsonl")
        lines = 0
        with files.atomic_writer(path) as out:
            for where, name in parts:
                with files.open_file(files.join(where, name)) as f:
                    data = f.read()
                lines += data.count(b"\n")
                out.write(data)
        return {"samples": lines, "files": [{"file": f"{split}.jsonl"}]}

    def finish_folder(self, entries, settings, folder, files) -> dict:
        files.write_bytes(files.join(folder, "SPLITS"), " ".join(e["split"] for e in entries).encode())
        return {}

    def ours(self, path: str) -> bool:
        return path.endswith(".jsonl") or path == "SPLITS"

    def summary(self, folder: str, manifest: dict) -> str:
        return f"jsonl: {manifest['counts']['samples']} documents in {manifest['counts']['splits']} files -> {folder}"

    def claims(self, path: str) -> bool:
        return os.path.isfile(path) and path.endswith(".jsonl")

    def find(self, folder: str) -> list[str]:
        return sorted(str(p) for p in Path(folder).rglob("*.jsonl"))

    def inspect(self, units: list[str], report: Report) -> None:
        report.out(f"jsonl files: {len(units)}")


@pytest.fixture
def writers_registered():
    written = [formats.register(NpzWriter()), formats.register(JsonLines())]
    yield written
    for fmt in written:
        formats.unregister(fmt.name)


@pytest.mark.slow
def test_a_registered_format_is_written_by_a_real_build(writers_registered, tmp_path, capsys):
    """Two formats beside hdf5, each one class and one `register` call: every --format named is
    written, from one tokenization, and the per-shard one holds hdf5's instances exactly."""
    from bertdata.formats.hdf5io import read_shard
    from conftest import SAMPLE_SHARDS

    out = tmp_path / "out"
    args = ["build", "--wiki-only", "--sample", "--output", str(out), "--phase", "1", *SAMPLE_SHARDS,
            "--runner", "in-memory", "--format", "hdf5", "npzw", "jsonl", "--jsonl-indent", "2"]
    assert cli.main(args) == 0
    printed = capsys.readouterr().out
    assert "npzw: " in printed and "jsonl: " in printed
    hdf5 = sorted(out.glob("hdf5_*/wikicorpus_en/*.hdf5"))
    npz = sorted(out.glob("npz_seq_len_128/wikicorpus_en/*.npz"))
    assert [p.stem for p in hdf5] == [p.stem for p in npz] and len(npz) > 1
    for h, n in zip(hdf5, npz):
        expected = read_shard(h)
        with np.load(n) as f:
            assert all(np.array_equal(f[name], expected[name]) for name in FIELDS)
    manifest = json.loads((npz[0].parent / "manifest.json").read_text())
    assert manifest["layout"] == {"container": "npz"} and manifest["counts"]["npzw_shards"] == len(npz)
    lines = {split: (out / "jsonl" / f"{split}.jsonl").read_text().splitlines() for split in ("training", "test")}
    assert all(line.startswith('  {"id": ') for split in lines.values() for line in split)
    assert (out / "jsonl" / "SPLITS").read_text() == "training test"
    jsonl = json.loads((out / "jsonl" / "manifest.json").read_text())
    assert jsonl["counts"]["samples"] == sum(map(len, lines.values())) == jsonl["counts"]["documents"]
    assert not list(out.glob(".bertdata-work"))  # the parts were scratch
    # Rerun: every folder reused as it is.
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file() and p.name not in ("manifest.json", "build.log")}
    assert cli.main(args) == 0
    assert before == {p: p.read_bytes() for p in before}
