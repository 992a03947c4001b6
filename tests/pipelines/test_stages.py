"""The stage contract (bertdata.pipelines.stage) and its runner (bertdata.pipelines.chain): the
runner, not each stage, carries counts and other stages' records, writes every stage's manifests
and hands on what later stages read; a stage's decision, and the whole plan, read the folders
and write nothing, and a refusal names the folder."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import apache_beam as beam
import pytest

from bertdata.config import RunnerConfig
from bertdata.errors import BertdataError
from bertdata.manifest import Run, tool_record
from bertdata.pipelines.manifests import Provenance
from bertdata.pipelines.records import StageRecords, StepDoFn, TextPlan
from bertdata.pipelines.runtime.runners import make_pipeline
from bertdata.pipelines.stage import Decision, Folders, Stage
from bertdata.pipelines.chain import PlannedStage, chain_stages


@dataclass(frozen=True)
class Item:
    n: int


@dataclass(frozen=True)
class Made:
    n: int


@dataclass(frozen=True)
class Passenger:
    """A record of an earlier stage that the toy stages never take."""

    name: str


class _Double(StepDoFn):
    """Takes Items only; says nothing of the other records, which must go on all the same."""

    takes = (Item,)

    def work(self, record: Item):
        from bertdata.pipelines.records import Counts

        yield Made(2 * record.n)
        yield Counts({"made": 1})


class _Steps(beam.PTransform):
    def expand(self, records):
        return records | "Double" >> beam.ParDo(_Double())


@dataclass
class ToyFolder(Folders):
    folder: str

    @property
    def paths(self) -> tuple[str, ...]:
        return (self.folder,)

    def decide(self, force: bool) -> Decision:
        return Decision(True)


@dataclass
class ToyStage(Stage):
    """Makes a Made per Item; its manifest lists what its end received."""

    folder: str
    name = "Toy"
    summary = "toy"
    reads = (Item,)
    makes = (Made,)
    ends = (Item, Made)

    @property
    def folders(self) -> Folders:
        return ToyFolder(self.folder)

    def steps(self) -> beam.PTransform:
        return _Steps()

    def counts(self, stage: StageRecords) -> dict:
        return {"toy_files": len(stage.of_kind(Made))}

    def write_manifests(self, stage: StageRecords, provenance: Provenance) -> None:
        provenance.write(self.folder, {"counts": stage.counts, "plan": stage.plan.folder,
                                       "made": sorted(r.n for r in stage.of_kind(Made)),
                                       "passengers": sorted(r.name for r in stage.of_kind(Passenger)),
                                       "items": len(stage.of_kind(Item))})


@dataclass
class SourceStage(ToyStage):
    """A finished stage that hands on Items and a Passenger."""

    name = "Source"
    reads = ()
    makes = (Item, Passenger)
    ends = ()


@dataclass
class AfterStage(ToyStage):
    """A later stage, to see what the toy stage handed on."""

    name = "After"
    reads = (Passenger,)
    ends = (Passenger,)

    def counts(self, stage: StageRecords) -> dict:
        return {}


def _manifest(folder) -> dict:
    return json.loads((folder / "manifest.json").read_text())


def test_the_runner_writes_each_stages_manifest_and_carries_counts_and_records(tmp_path):
    first, second = tmp_path / "toy", tmp_path / "after"
    handed = StageRecords(TextPlan("text-folder", 2, 1), (Item(1), Item(2), Item(5), Passenger("runs")),
                          {"pages": 7})
    planned = [PlannedStage(SourceStage(str(tmp_path / "unused")), Decision(False, "reused", handed)),
               PlannedStage(ToyStage(str(first)), Decision(True)),
               PlannedStage(AfterStage(str(second)), Decision(True))]
    provenance = Provenance(tool_record("test"), Run(0.0, "in-memory", 1), {"name": "dump"})
    pipeline = make_pipeline(RunnerConfig("in-memory", 1))
    chain_stages(pipeline, planned, provenance)
    pipeline.run().wait_until_finish()

    toy = _manifest(first)
    # The stage's own counts summed with the ones handed in, and the one it adds at its end.
    assert toy["counts"] == {"pages": 7, "made": 3, "toy_files": 3}
    assert toy["made"] == [2, 4, 10] and toy["passengers"] == ["runs"] and toy["items"] == 0
    assert toy["plan"] == "text-folder" and toy["dump"] == {"name": "dump"}
    after = _manifest(second)
    # Made records end with the toy stage; the passenger, which no step took, reaches the next.
    assert after["made"] == [] and after["passengers"] == ["runs"]
    assert after["counts"] == {"pages": 7, "made": 3, "toy_files": 3}
    assert not (tmp_path / "unused").exists()  # a reused stage is not run again


class TidyFolder(ToyFolder):
    """Notes, as it cleans up, whether its manifest was written first."""

    def clean_up(self) -> None:
        (Path(self.folder) / "cleaned").write_text(str((Path(self.folder) / "manifest.json").exists()))


@dataclass
class TidyStage(ToyStage):
    name = "Tidy"

    @property
    def folders(self) -> Folders:
        return TidyFolder(self.folder)


def test_the_runner_cleans_up_after_a_stage_once_its_manifests_are_written(tmp_path):
    handed = StageRecords(TextPlan("text-folder", 1, 1), (Item(1),), {})
    planned = [PlannedStage(SourceStage(str(tmp_path / "unused")), Decision(False, "reused", handed)),
               PlannedStage(TidyStage(str(tmp_path / "tidy")), Decision(True))]
    pipeline = make_pipeline(RunnerConfig("in-memory", 1))
    chain_stages(pipeline, planned, Provenance(tool_record("test"), Run(0.0, "in-memory", 1), {"name": "dump"}))
    pipeline.run().wait_until_finish()
    assert (tmp_path / "tidy" / "cleaned").read_text() == "True"


def test_a_stage_whose_records_no_stage_before_it_hands_on_is_refused(tmp_path):
    from bertdata.pipelines.chain import check_chain

    toy, source = ToyStage(str(tmp_path / "toy")), SourceStage(str(tmp_path / "source"))
    with pytest.raises(ValueError, match="^the Toy stage reads Item, which no stage before it hands on$"):
        check_chain([PlannedStage(toy, Decision(True))])
    # A source that is neither run nor reused with records to hand on hands nothing on.
    with pytest.raises(ValueError, match="reads Item"):
        check_chain([PlannedStage(source, Decision(False)), PlannedStage(toy, Decision(True))])
    # The toy stage ends the Items: a second one after it would find none.
    with pytest.raises(ValueError, match="reads Item"):
        check_chain([PlannedStage(source, Decision(True)), PlannedStage(toy, Decision(True)),
                     PlannedStage(ToyStage(str(tmp_path / "again")), Decision(True))])
    check_chain([PlannedStage(source, Decision(True)), PlannedStage(toy, Decision(True)),
                 PlannedStage(AfterStage(str(tmp_path / "after")), Decision(True))])


def _lddl_stage(folder):
    from bertdata.config import PHASE1
    from bertdata.pipelines.stages.lddl import LddlPhase, LddlStage

    phase = LddlPhase(str(folder), str(folder.parent / "runs"), "phase1", 128, "static", None, None)
    return LddlStage(phase, PHASE1, {"options": {"seed": 1}})


def test_a_refusal_names_the_folder_and_deciding_writes_nothing(tmp_path):
    folder = tmp_path / "pretrain"
    folder.mkdir()
    (folder / "shard-0.parquet").write_bytes(b"someone else's")
    before = sorted(p.name for p in folder.iterdir())
    with pytest.raises(BertdataError, match=f"^{folder}: holds parquet files that no bertdata build recorded"):
        _lddl_stage(folder).folders.decide(force=False)
    assert sorted(p.name for p in folder.iterdir()) == before
    stage = _lddl_stage(folder)
    assert stage.folders.decide(force=True).run
    assert sorted(p.name for p in folder.iterdir()) == before  # cleared only once every stage is decided
    stage.folders.clear()
    assert sorted(p.name for p in folder.iterdir()) == [".bertdata-writing"]


def test_a_finished_folder_is_reused_with_one_line(tmp_path):
    folder = tmp_path / "pretrain"
    folder.mkdir()
    (folder / "shard-0.parquet").write_bytes(b"rows")
    (folder / "manifest.json").write_text(json.dumps({"options": {"seed": 1}, "files": [{"file": "shard-0.parquet"}]}))
    decision = _lddl_stage(folder).folders.decide(force=False)
    assert not decision.run and decision.line == f"{folder}: already complete, kept"
    with pytest.raises(BertdataError, match=f"^{folder}: holds LDDL files made with other options"):
        stage = _lddl_stage(folder)
        stage.fields = {"options": {"seed": 2}}
        stage.folders.decide(force=False)


def _inputs(output, **changes):
    from types import SimpleNamespace

    from bertdata.config import BuildConfig
    from bertdata.pipelines.stage import BuildInputs
    from bertdata.instances.vocab import load_vocab
    from conftest import SAMPLE_VOCAB

    changes = {"formats": ("lddl",), **changes}
    cfg = BuildConfig(output=str(output), wiki_only=True, runner=RunnerConfig("in-memory", 1), **changes)
    site = SimpleNamespace(language="en", markup=None, siteinfo=None)
    return BuildInputs(cfg, "dump.xml.bz2", None, {"name": "dump.xml.bz2", "sha1": "0" * 40}, load_vocab(SAMPLE_VOCAB),
                       site, cfg.text, "wikicorpus_en", [], None, "english")


def test_every_stage_is_decided_before_any_is_cleared(tmp_path):
    from bertdata.pipelines.stages.lddl import folder as lddl_folder
    from bertdata.pipelines.chain import plan_stages, prepare_stages

    inputs = _inputs(tmp_path)
    phase1, phase2 = (Path(lddl_folder(inputs.cfg, p)) for p in inputs.cfg.phases)
    phase1.mkdir(parents=True)
    phase2.mkdir(parents=True)
    (phase1 / ".bertdata-writing").write_bytes(b"")  # a killed build of ours: cleared when this one runs
    (phase1 / "shard-0.parquet").write_bytes(b"half of it")
    (phase2 / "shard-0.parquet_0").write_bytes(b"someone else's")
    with pytest.raises(BertdataError, match=f"^{phase2}: holds parquet files that no bertdata build recorded"):
        plan_stages(inputs)
    assert sorted(p.name for p in phase1.iterdir()) == [".bertdata-writing", "shard-0.parquet"]

    (phase2 / "shard-0.parquet_0").unlink()
    planned = plan_stages(inputs)
    assert [(p.stage.name, p.decision.run) for p in planned] == [
        ("Text", True), ("Instances", True), ("LddlPhase1", True), ("LddlPhase2", True)]
    # Planning wrote nothing: the run clears and puts the vocab in place, before any work.
    assert sorted(p.name for p in phase1.iterdir()) == [".bertdata-writing", "shard-0.parquet"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pretrain"]
    prepare_stages(planned, inputs.work_dir)
    assert sorted(p.name for p in phase1.iterdir()) == [".bertdata-writing"]
    assert (tmp_path / "vocab" / "vocab").read_bytes() == Path(inputs.vocab.path).read_bytes()
    assert planned[1].stage.folders.paths == ()  # LDDL alone: no files cut per text shard


def test_another_vocab_where_ngc_looks_is_refused_by_planning(tmp_path):
    from bertdata.pipelines.chain import plan_stages, prepare_stages

    inputs = _inputs(tmp_path)
    (tmp_path / "vocab").mkdir()
    (tmp_path / "vocab" / "vocab").write_text("[PAD]\nanother\n")
    with pytest.raises(BertdataError, match=f"^{tmp_path / 'vocab' / 'vocab'}: holds another vocab than"):
        plan_stages(inputs)
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["vocab", "vocab"]
    forced = _inputs(tmp_path, force=True)
    prepare_stages(plan_stages(forced), forced.work_dir)
    assert (tmp_path / "vocab" / "vocab").read_bytes() == Path(forced.vocab.path).read_bytes()


def test_each_format_supplies_its_stages_and_dry_run_lines(tmp_path):
    """Nothing outside a format's own modules names it: the build's stages and the dry run's
    lines come from the registry entry and the stage module of its cut."""
    from bertdata import formats
    from bertdata.pipelines.formats import stage_module
    from bertdata.pipelines.plan import dry_run
    from bertdata.pipelines.stages import documents, lddl
    from bertdata.pipelines.chain import plan_stages

    inputs = _inputs(tmp_path, formats=("hdf5", "lddl", "megatron"))
    planned = plan_stages(inputs)
    assert [(p.stage.name, p.stage.format) for p in planned] == [
        ("Text", None), ("Instances", "hdf5"), ("LddlPhase1", "lddl"), ("LddlPhase2", "lddl"),
        ("Megatron", "megatron")]
    instances = planned[1].stage
    assert {s.record.__name__ for s in instances.shard_sinks} == {"SplitPart"}
    assert all(len(sinks) == 1 for sinks in instances.phase_sinks.values())
    assert stage_module(formats.get("hdf5")) is None  # the instance stage writes it
    assert stage_module(formats.get("lddl")) is lddl
    assert stage_module(formats.get("megatron")) is documents
    lines = dry_run(inputs.cfg, 1)
    assert [line.split(":")[0] for line in lines if line.startswith(("hdf5", "lddl", "megatron"))] == [
        "hdf5 phase 1 (seq 128, dupe 5)", "hdf5 phase 2 (seq 512, dupe 5)", "lddl phase 1", "lddl phase 2", "megatron"]
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # planning and the dry run wrote nothing
