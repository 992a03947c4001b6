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
import json
import os
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, replace

import apache_beam as beam
import numpy as np

from bertdata.formats import lddl
from bertdata.text.articles import quality
from bertdata.errors import BertdataError
from bertdata.fsutil import TEMP_PREFIX
from bertdata.manifest import MANIFEST, Run, write_manifest
from bertdata.pipelines import fsio
from bertdata.pipelines.pool import working_on
from bertdata.pipelines.records import Counts, Spread, StageRecords

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
    num_shards: int | None  # files per bin; None: one per training text shard

    @property
    def num_bins(self) -> int:
        return 1 if self.bin_size is None else self.seq_len // self.bin_size


@dataclass(frozen=True)
class ShardRuns:
    """The runs of one text shard (by its index among the training shards) for one phase."""

    folder: str
    index: int
    runs: tuple[lddl.Run, ...]


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


def plan_phases(stage: StageRecords, phases: dict[str, LddlPhase]) -> Iterator:
    """The instance stage's ShardRuns -> one PlannedFile per file to write (by phase, bin, file)
    and each phase's PhasePlan; the text plan and counts pass on to the manifests."""
    yield stage.plan
    yield Counts(stage.counts)
    for folder, phase in phases.items():
        shards = sorted((s for s in stage.shards if isinstance(s, ShardRuns) and s.folder == folder),
                        key=lambda s: s.index)
        runs = [run for shard in shards for run in shard.runs]
        num_shards = phase.num_shards or stage.plan.training_shards
        plans, bins = lddl.plan_files(runs, num_bins=phase.num_bins, bin_size=phase.bin_size, num_shards=num_shards,
                                      where=folder)
        yield PhasePlan(folder, tuple(bins))
        for plan in plans:
            yield PlannedFile(folder, plan)


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


class _WriteFile(fsio.FilesDoFn):
    def __init__(self, phases: dict[str, LddlPhase]):
        super().__init__()
        self.phases = phases

    def process(self, record):
        if not isinstance(record, PlannedFile):
            yield record
            return
        from bertdata.manifest import file_sha256

        working_on(f"the LDDL stage, {record.plan.name} of {record.folder}")
        phase = self.phases[record.folder]
        path = fsio.join(record.folder, record.plan.name)
        schema = lddl.schema_for(phase.masking, binned=phase.bin_size is not None)
        with _local_pieces(record.plan) as plan, fsio.local_output(path) as local:
            size = lddl.write_file(plan, local, schema)
            with open(local, "rb") as f:  # here, not read back from a store
                sha = file_sha256(f)
        yield LddlFile(record.folder, record.plan.name, record.plan.bin, record.plan.rows, size, sha)


class InstancesToLddl(beam.PTransform):
    """The instance stage's StageRecords (its shards: ShardRuns) -> a written LddlFile record
    per file, a PhasePlan per phase, the text plan and the counts."""

    def __init__(self, phases: dict[str, LddlPhase]):
        super().__init__()
        self.phases = phases

    def expand(self, gathered):
        return (
            gathered
            | "PlanLddlFiles" >> beam.FlatMap(plan_phases, self.phases)
            | "SpreadLddlFiles" >> Spread()
            | "WriteLddlFiles" >> beam.ParDo(_WriteFile(self.phases))
        )


# In a phase folder while a build writes it: the next build may then replace the folder's
# files, which otherwise only --force may. Hidden and without an extension, so no loader reads it.
WRITING = ".bertdata-writing"


def prepare_folder(phase: LddlPhase, options: dict, force: bool) -> bool:
    """Decide what a build does with a phase folder: False when it already holds this build's
    finished output (its manifest records the same options), else True after clearing what an
    interrupted build of ours left there. Files that no bertdata build wrote stay: refused
    unless `force`."""
    listed = {fsio.split(path)[1]: path for path in fsio.match(fsio.join(phase.folder, "*"))}
    if MANIFEST in listed and not force:
        try:
            manifest = json.loads(fsio.read_bytes(listed[MANIFEST]))
        except ValueError:
            raise BertdataError(f"{listed[MANIFEST]}: not a readable JSON manifest; pass --force to replace "
                                "the folder's files") from None
        if manifest.get("options") != options:
            raise BertdataError(f"{phase.folder}: holds LDDL files made with other options (see its "
                                f"{MANIFEST}); pass --force to replace them, or choose another --output")
        if WRITING not in listed and {f["file"] for f in manifest.get("files", [])} <= listed.keys():
            return False
    ours = WRITING in listed or MANIFEST in listed
    data = [name for name in listed if lddl.loader_visible(name)]
    if data and not (ours or force):
        raise BertdataError(f"{phase.folder}: holds parquet files that no bertdata build recorded ({data[0]}); "
                            "pass --force to replace them, or choose another --output")
    fsio.write_bytes(fsio.join(phase.folder, WRITING), b"")
    stale = [path for name, path in listed.items()
             if name in data or name in (lddl.NUM_SAMPLES_JSON, MANIFEST) or name.startswith(TEMP_PREFIX)]
    if stale:
        fsio.delete(stale)
    return True


class WriteLddlManifests(fsio.FilesDoFn):
    """Each LDDL folder's .num_samples.json, then its manifest.json (written last, so a folder
    with a manifest is complete); `phases`: each folder's manifest fields (options, lengths, attrs)."""

    def __init__(self, tool: dict, run: Run, dump: dict, phases: dict[str, dict]):
        super().__init__()
        self.tool, self.run, self.dump, self.phases = tool, run, dump, phases

    def process(self, stage: StageRecords):
        for folder, fields in self.phases.items():
            files = sorted((r for r in stage.shards if isinstance(r, LddlFile) and r.folder == folder),
                           key=lambda r: lddl.name_parts(r.file)[::-1])
            bins = next(r.bins for r in stage.shards if isinstance(r, PhasePlan) and r.folder == folder)
            counts = {**stage.counts, "lddl_files": len(files), "instances_in": sum(b["rows_in"] for b in bins),
                      "instances": sum(f.rows for f in files), "dropped": sum(b["dropped"] for b in bins)}
            fsio.write_bytes(fsio.join(folder, lddl.NUM_SAMPLES_JSON), lddl.num_samples_json({f.file: f.rows for f in files}))
            write_manifest(fsio.join(folder, MANIFEST), {
                "dump": self.dump, "format": "lddl", **fields, "counts": counts, "quality": quality(stage.counts),
                "bins": list(bins),
                "files": [{"file": f.file, "bin": f.bin, "rows": f.rows, "sha256": f.sha256, "bytes": f.bytes}
                          for f in files]},
                self.tool, self.run.record(), fsio.write_bytes)
            fsio.delete([fsio.join(folder, WRITING)])
        yield len(self.phases)
