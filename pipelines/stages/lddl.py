"""Instances -> LDDL parquet folders (NVIDIA's current BERT recipe), written by all workers.

A folder's files hold contiguous rows of its bins, sized as LDDL's loader demands, which
is known only once every row is counted. So each worker spills the rows of the text shards
it makes instances for ("runs", per shard and bin, under the work folder), one small step
cuts every bin's runs, in text shard order, into files (`lddl.plan_files`), and workers
then write the files one each. Rows never pass through the launcher: only run and file
records do. The files are the bytes `lddl.write_phase` makes from the same rows in one pass.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, replace
from typing import ClassVar

import apache_beam as beam
import numpy as np

from bertdata.config import BuildConfig, InstanceConfig, lddl_files_per_bin, phase_number
from bertdata import formats
from bertdata.formats import lddl
from bertdata.instances.create import generation_attrs
from bertdata.instances.vocab import VOCAB_PATH
from bertdata.text.articles import quality
from bertdata.text.shards import TextShard
from bertdata.errors import BertdataError
from bertdata.manifest import MANIFEST
from bertdata.pipelines.cleanup import mark_and_clear
from bertdata.pipelines.manifests import WRITING, Provenance, recorded_manifest
from bertdata.pipelines.records import ShardRuns, Spread, StageRecords, StepDoFn
from bertdata.pipelines.runtime import fsio
from bertdata.pipelines.runtime.pool import working_on
from bertdata.pipelines.stage import BuildInputs, Decision, Folders, Stage


@dataclass(frozen=True)
class PhasePlan:
    """How a phase's bins were cut (see `lddl.plan_files`), for its manifest."""

    folder: str
    bins: tuple[dict, ...]


@dataclass(frozen=True)
class PlannedFile:
    folder: str
    plan: lddl.FilePlan


@dataclass(frozen=True)
class LddlFile:
    """A written LDDL file, as the manifest sees it."""

    folder: str
    file: str
    bin: int | None
    rows: int
    bytes: int
    sha256: str


def runs_folder(work_dir: str) -> str:
    return fsio.join(work_dir, "lddl")


@dataclass(frozen=True)
class LddlPhase:
    """One phase's LDDL folder: where, how, and where its runs go meanwhile (`runs`, a folder
    shared by the phases: their run files start with `tag`)."""

    folder: str
    runs: str
    tag: str
    seq_len: int
    masking: str
    bin_size: int | None
    num_shards: int | None  # files per bin; None: config.lddl_files_per_bin's default

    @property
    def num_bins(self) -> int:
        return 1 if self.bin_size is None else self.seq_len // self.bin_size

    # As the instance stage's sink for the phase (see Stage.sinks): each training shard's runs.
    record: ClassVar[type] = ShardRuns

    def wants(self, shard: TextShard) -> bool:
        return shard.split == "training"  # NGC's recipe reads no held-out set from LDDL folders

    def take(self, shard: TextShard, batches: Iterable[Mapping[str, np.ndarray]], tokens: tuple[str, ...]) -> ShardRuns:
        return spill_shard(self, shard.index, batches, tokens)


def spill_shard(phase: LddlPhase, index: int, batches: Iterable[Mapping[str, np.ndarray]],
                tokens: tuple[str, ...]) -> ShardRuns:
    """One text shard's instances -> its runs under the phase's run folder."""
    def target(b: int) -> str:
        return fsio.join(phase.runs, f"{phase.tag}-{index}-{b}.rows")

    options = {"seq_len": phase.seq_len, "masking": phase.masking, "bin_size": phase.bin_size,
               "where": phase.folder}
    if fsio.is_local(phase.runs):
        os.makedirs(phase.runs, exist_ok=True)
        return ShardRuns(phase.folder, index, tuple(lddl.spill_runs(batches, tokens, target, **options)))
    with tempfile.TemporaryDirectory(prefix="bertdata-") as tmp:
        runs = lddl.spill_runs(batches, tokens, lambda b: os.path.join(tmp, str(b)), **options)
        for run in runs:
            fsio.upload(run.path, target(run.bin))
        return ShardRuns(phase.folder, index, tuple(replace(r, path=target(r.bin)) for r in runs))


def plan_phase(stage: StageRecords, phase: LddlPhase) -> Iterator:
    """The instance stage's ShardRuns for the phase -> its PhasePlan, and a PlannedFile per file to
    write (by bin, file)."""
    shards = sorted((s for s in stage.of_kind(ShardRuns) if s.folder == phase.folder), key=lambda s: s.index)
    runs = [run for shard in shards for run in shard.runs]
    num_shards = lddl_files_per_bin(phase.num_shards, stage.plan.training_shards)
    plans, bins = lddl.plan_files(runs, num_bins=phase.num_bins, bin_size=phase.bin_size, num_shards=num_shards,
                                  where=phase.folder)
    yield PhasePlan(phase.folder, tuple(bins))
    for plan in plans:
        yield PlannedFile(phase.folder, plan)


@contextlib.contextmanager
def _local_pieces(plan: lddl.FilePlan) -> Iterator[lddl.FilePlan]:
    """The plan with its runs readable as local files (downloaded where the work folder is not)."""
    remote = sorted({path for path, _start, _count in plan.pieces if not fsio.is_local(path)})
    if not remote:
        yield plan
        return
    with contextlib.ExitStack() as stack:
        local = {path: stack.enter_context(fsio.local_input(path)) for path in remote}
        yield replace(plan, pieces=tuple((local.get(p, p), s, c) for p, s, c in plan.pieces))


class _WriteFile(StepDoFn):
    takes = (PlannedFile,)

    def __init__(self, phase: LddlPhase):
        super().__init__()
        self.phase = phase

    def work(self, record: PlannedFile):
        from bertdata.manifest import file_sha256

        working_on(f"the LDDL stage, {record.plan.name} of {record.folder}")
        path = fsio.join(record.folder, record.plan.name)
        schema = lddl.schema_for(self.phase.masking, binned=self.phase.bin_size is not None)
        with _local_pieces(record.plan) as plan, fsio.local_output(path) as local:
            size = lddl.write_file(plan, local, schema)
            with open(local, "rb") as f:  # here, not read back from a store
                sha = file_sha256(f)
        yield LddlFile(record.folder, record.plan.name, record.plan.bin, record.plan.rows, size, sha)


class WriteLddlFiles(beam.PTransform):
    """PlannedFile records (see `plan_phase`) -> a written LddlFile record per file, written by
    whichever worker is free."""

    def __init__(self, phase: LddlPhase):
        super().__init__()
        self.phase = phase

    def expand(self, records):
        return (
            records
            | "SpreadLddlFiles" >> Spread()
            | "WriteLddlFiles" >> beam.ParDo(_WriteFile(self.phase))
        )


def needs_writing(phase: LddlPhase, options: dict, force: bool) -> bool:
    """Whether a build writes a phase folder: not when it already holds this build's finished
    output (its manifest records the same options). Reads only: files that no bertdata build
    wrote, or made with other options, are refused unless `force`."""
    listed = fsio.listing(phase.folder)
    manifest = recorded_manifest(phase.folder, listed, options, force, "files", "LDDL files made with other options")
    if manifest is not None and WRITING not in listed \
            and {f["file"] for f in manifest.get("files", [])} <= listed.keys():
        return False
    ours = WRITING in listed or MANIFEST in listed
    data = [name for name in listed if lddl.loader_visible(name)]
    if data and not (ours or force):
        raise BertdataError(f"{phase.folder}: holds parquet files that no bertdata build recorded ({data[0]}); "
                            "pass --force to replace them, or choose another --output")
    return True


def clear_folder(phase: LddlPhase) -> None:
    """Mark the folder as being written, and clear what an earlier build of ours (or, with
    --force, anyone) left there: `needs_writing` said it may."""
    mark_and_clear(phase.folder, lambda name: lddl.loader_visible(name) or name == lddl.NUM_SAMPLES_JSON)


def write_manifest(stage: StageRecords, provenance: Provenance, folder: str, fields: dict) -> None:
    """The folder's .num_samples.json, then its manifest.json (written last, so a folder with a
    manifest is complete); `fields`: the manifest's options, lengths and attrs."""
    files = sorted((r for r in stage.of_kind(LddlFile) if r.folder == folder), key=lambda r: lddl.name_parts(r.file)[::-1])
    bins = next(r.bins for r in stage.of_kind(PhasePlan) if r.folder == folder)
    counts = {**stage.counts, "lddl_files": len(files), "instances_in": sum(b["rows_in"] for b in bins),
              "instances": sum(f.rows for f in files), "dropped": sum(b["dropped"] for b in bins)}
    fsio.write_bytes(fsio.join(folder, lddl.NUM_SAMPLES_JSON), lddl.num_samples_json({f.file: f.rows for f in files}))
    provenance.write(folder, {
        "format": "lddl", **fields, "counts": counts, "quality": quality(stage.counts), "bins": list(bins),
        "files": [{"file": f.file, "bin": f.bin, "rows": f.rows, "sha256": f.sha256, "bytes": f.bytes}
                  for f in files]})
    fsio.delete([fsio.join(folder, WRITING)])


def folder(cfg: BuildConfig, p: InstanceConfig) -> str:
    """A phase's LDDL folder below the output."""
    return fsio.join(cfg.output, lddl.folder_name(phase_number(p), cfg.lddl.bin_size_for(p)))


@dataclass
class LddlFolder(Folders):
    """A phase's LDDL folder: reused when its manifest records the same options (`needs_writing`),
    marked as being written and cleared before it runs. It puts the build's vocab where NGC's
    script looks (`vocab`: where it is, `vocab_at`: where it goes), refusing another one there."""

    phase: LddlPhase
    options: dict
    vocab: str | None = None
    vocab_at: str | None = None
    format = lddl.LDDL.name

    @property
    def paths(self) -> tuple[str, ...]:
        return (self.phase.folder,)

    def decide(self, force: bool) -> Decision:
        if self.vocab_at is not None and not force and fsio.exists(self.vocab_at) \
                and fsio.read_bytes(self.vocab_at) != fsio.read_bytes(self.vocab):
            raise BertdataError(f"{self.vocab_at}: holds another vocab than {self.vocab}; pass --force to replace "
                                "it (and the LDDL folders made with it), or choose another --output")
        if needs_writing(self.phase, self.options, force):
            return Decision(True)
        return Decision(False, f"{self.phase.folder}: already complete, kept")

    def place(self) -> None:
        if self.vocab_at is None:
            return
        vocab = fsio.read_bytes(self.vocab)
        if not fsio.exists(self.vocab_at) or fsio.read_bytes(self.vocab_at) != vocab:
            fsio.write_bytes(self.vocab_at, vocab)

    def clear(self) -> None:
        clear_folder(self.phase)


@dataclass
class LddlStage(Stage):
    """One phase's LDDL folder: the instance stage's runs -> balanced files."""

    phase: LddlPhase
    cfg: InstanceConfig
    fields: dict  # the manifest's options, lengths and attrs
    vocab: str | None = None
    vocab_at: str | None = None

    @property
    def name(self) -> str:
        return f"Lddl{self.phase.tag.capitalize()}"

    reads = (ShardRuns,)
    makes = (PhasePlan, LddlFile)  # what it ends is its own folder's: see `ended`

    @property
    def folders(self) -> LddlFolder:
        return LddlFolder(self.phase, self.fields["options"], self.vocab, self.vocab_at)

    def sinks(self) -> dict:
        return {self.cfg: self.phase}

    def start(self, handed: StageRecords) -> list:
        return [*handed.elements(), *plan_phase(handed, self.phase)]

    def steps(self) -> beam.PTransform:
        return WriteLddlFiles(self.phase)

    def ended(self, record) -> bool:
        return isinstance(record, (ShardRuns, PhasePlan, LddlFile)) and record.folder == self.phase.folder

    def write_manifests(self, stage: StageRecords, provenance: Provenance) -> None:
        write_manifest(stage, provenance, self.phase.folder, self.fields)


def plan(fmt: formats.Format, inputs: BuildInputs, chosen: tuple[InstanceConfig, ...],
         reused_text: StageRecords | None) -> list[Stage]:
    """The format's stages in a build (bertdata.pipelines.formats: the stages of the formats cut
    across shards): one per chosen phase, undecided."""
    cfg = inputs.cfg
    stages = []
    for p in chosen:
        n = phase_number(p)
        phase = LddlPhase(folder(cfg, p), runs_folder(inputs.work_dir), f"phase{n}", p.max_seq_length,
                          cfg.lddl.masking, cfg.lddl.bin_size_for(p), cfg.lddl.num_shards)
        options = {**inputs.instance_options(p), "lddl": {"masking": phase.masking, "bin_size": phase.bin_size,
                                                          "num_shards": phase.num_shards}}
        fields = {"options": options, "max_seq_length": p.max_seq_length,
                  "max_predictions_per_seq": p.max_predictions_per_seq,
                  "attrs": generation_attrs(inputs.vocab, p, inputs.text.lowercase, p.random_seed)}
        stages.append(LddlStage(phase, p, fields, inputs.vocab.path, fsio.join(cfg.output, VOCAB_PATH)))
    return stages


def dry_run(fmt: formats.Format, cfg: BuildConfig, chosen: tuple[InstanceConfig, ...], dataset: str,
            lowercase: bool, training_shards: int) -> list[str]:
    """`build --dry-run`'s lines for the format's stages."""
    lines = []
    for p in chosen:
        bin_size = cfg.lddl.bin_size_for(p)
        where = folder(cfg, p)
        done = fsio.exists(fsio.join(where, MANIFEST)) and not cfg.force
        bins = "unbinned" if bin_size is None else f"bins of {bin_size} tokens"
        files = lddl_files_per_bin(cfg.lddl.num_shards, training_shards)
        lines.append(f"{fmt.name} phase {phase_number(p)}: {'reuse (complete)' if done else 'run'}: {files} "
                     f"files per bin, {bins}, {cfg.lddl.masking} masking -> {where}")
    return lines
