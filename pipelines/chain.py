"""The build's stages, and the runner that chains them.

The stages follow one contract (bertdata.pipelines.stage): the text; the instances, with the
files of every format cut per text shard; and the stages of the formats cut otherwise, planned
by the module of their cut (bertdata.pipelines.formats: an LDDL folder per phase, a folder per
format cut per split).
`plan_stages` is the one place a build's stages, their folders and their decisions come from,
and it only reads; `prepare_stages`, run by the launcher once every stage is decided and before
any work, puts in place what stages need and clears what a killed run left.

The runner does the rest the same way for every stage. It starts each from what the stages
before it handed on (one StageRecords element), gathers everything its steps yield (its own
records, and the others, which every step passes on: bertdata.pipelines.records.StepDoFn) at
one barrier, sums the counts, writes the stage's manifests there and hands on all but the
records no later stage reads. So no step can lose counts or another stage's records, and a
stage gets its manifests by being in the chain.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field, replace

import apache_beam as beam

from bertdata import formats
from bertdata.config import BuildConfig, InstanceConfig
from bertdata.formats import PER_SHARD, PerShardFormat
from bertdata.manifest import MANIFEST, ShardFiles
from bertdata.text.shards import TextShard
from bertdata.pipelines.runtime import fsio
from bertdata.pipelines.formats import chosen_formats, stage_module
from bertdata.pipelines.instances import PhaseOutput, ShardOutput, TextShardsToInstances
from bertdata.pipelines.manifests import Provenance, write_shard_manifests, write_text_manifest
from bertdata.pipelines.records import Gather, StageRecords
from bertdata.pipelines.resume import (check_vocab_unchanged, remove_leftovers, remove_temporaries,
                                       reusable_text_stage, text_stage_folders)
from bertdata.pipelines.runtime.runners import spare_cores
from bertdata.pipelines.stage import BuildInputs, Decision, Stage
from bertdata.pipelines.text import DumpToTextShards
from bertdata.pipelines.work import work_groups, work_items


@dataclass(frozen=True)
class PlannedStage:
    stage: Stage
    decision: Decision


class _EndStage(fsio.FilesDoFn):
    """A stage's gathered records -> its manifests written; hands on what later stages read."""

    def __init__(self, stage: Stage, provenance: Provenance):
        super().__init__()
        self.stage, self.provenance = stage, provenance

    def process(self, records: list):
        gathered = StageRecords.of(records)
        gathered = replace(gathered, counts={**gathered.counts, **self.stage.counts(gathered)})
        self.stage.write_manifests(gathered, self.provenance)
        yield StageRecords(gathered.plan, tuple(r for r in gathered.shards if not self.stage.ended(r)),
                           gathered.counts)


def chain_stages(pipeline: beam.Pipeline, planned: list[PlannedStage], provenance: Provenance) -> None:
    """The stages that run, chained in `pipeline` after what the reused ones hand on."""
    check_chain(planned)
    records = None
    for p in planned:
        stage = p.stage
        if not p.decision.run:
            if p.decision.handed_on is not None:
                records = pipeline | f"Finished{stage.name}" >> beam.Create([p.decision.handed_on])
            continue
        begun = pipeline if records is None else records | f"Start{stage.name}" >> beam.FlatMap(stage.start)
        records = (begun
                   | stage.name >> stage.steps()
                   | f"Gather{stage.name}" >> Gather()
                   | f"{stage.name}Manifests" >> beam.ParDo(_EndStage(stage, provenance)))


def check_chain(planned: list[PlannedStage]) -> None:
    """Refuse a chain in which a stage that runs reads a kind of record that no stage before it
    hands on: its steps would find nothing, and its manifests would say so as if it were true."""
    handed: set[type] = set()
    for p in planned:
        missing = [kind.__name__ for kind in p.stage.reads if kind not in handed]
        if p.decision.run and missing:
            raise ValueError(f"the {p.stage.name} stage reads {', '.join(missing)}, which no stage before it "
                             "hands on")
        if p.decision.run or p.decision.handed_on is not None:
            handed = (handed | set(p.stage.makes)) - set(p.stage.ends)


@dataclass
class TextStage(Stage):
    """Dump (and books) -> text shards; its folder is one of `folders`, chosen as it runs."""

    inputs: BuildInputs
    name = "Text"
    makes = (TextShard,)

    @property
    def folders(self) -> tuple[str, ...]:
        i = self.inputs
        return tuple(text_stage_folders(i.cfg.output, i.text, i.dataset))

    def decide(self, force: bool) -> Decision:
        i = self.inputs
        reuse = reusable_text_stage(list(self.folders), i.dump_record, i.text_options, force)
        if reuse is not None:
            return Decision(False, f"text stage already complete in {reuse.plan.folder}: reusing "
                                   f"{len(reuse.shards)} text shards", reuse)
        books = f" + {len(i.books)} books" if i.books else ""
        return Decision(True, f"text stage: {i.dump_record['name']}{books} -> "
                              f"{fsio.join(i.cfg.output, 'sharded_*', i.dataset)}")

    def clear(self) -> None:
        # A dump or option change could leave old shards this run would not write.
        remove_leftovers(list(self.folders), also=("*.txt", MANIFEST))

    @functools.cached_property
    def items(self) -> list:
        return work_items(self.inputs.dump, self.inputs.index, self.inputs.cfg.runner.workers)

    def steps(self) -> beam.PTransform:
        i = self.inputs
        workers = i.cfg.runner.workers
        return DumpToTextShards(work_groups(self.items, i.books, workers), i.text, i.cfg.output, i.dataset,
                                i.work_dir, i.splitter, i.site.markup, prefetch=spare_cores(i.cfg.runner))

    def counts(self, stage: StageRecords) -> dict:
        return {"text_shards": len(stage.of_kind(TextShard))}

    def write_manifests(self, stage: StageRecords, provenance: Provenance) -> None:
        write_text_manifest(stage, provenance, self.inputs.text_options)
        remove_temporaries(self.inputs.work_dir)  # the runs' disk is free before instances start


@dataclass
class InstancesStage(Stage):
    """Text shards -> instances of every phase from one tokenization: the files of every format
    cut per text shard (`shards`: each phase's, one folder per format), and what the stages after
    take of each shard (their sinks: LDDL runs, the parts of the formats cut per split). Its shard
    files are reused one by one (bertdata.pipelines.instances)."""

    inputs: BuildInputs
    shards: dict  # {InstanceConfig: (ShardOutput, ...)}, the per-shard folders of the chosen phases
    phase_sinks: dict = field(default_factory=dict)  # {InstanceConfig: the sinks of the stages that run}
    shard_sinks: tuple = ()  # the sinks of every text shard's documents
    name = "Instances"
    reads = (TextShard,)
    ends = (TextShard, ShardFiles)  # its steps take the text shards

    @property
    def format(self) -> str | None:
        return next((out.format.name for outs in self.shards.values() for out in outs), None)

    @property
    def makes(self) -> tuple[type, ...]:
        sinks = [*self.shard_sinks, *(s for sinks in self.phase_sinks.values() for s in sinks)]
        return (ShardFiles, *dict.fromkeys(sink.record for sink in sinks))

    @property
    def folders(self) -> tuple[str, ...]:
        return tuple(folder for _fmt, folder in self.folder_formats())

    def folder_formats(self) -> list[tuple[str, str]]:
        return [(out.format.name, out.folder) for outs in self.shards.values() for out in outs]

    def decide(self, force: bool) -> Decision:
        for outs in zip(*self.shards.values()):  # each format's folders, all phases at once
            check_vocab_unchanged(outs[0].format, [out.folder for out in outs], self.inputs.vocab, force)
        return Decision(bool(self.outputs) or bool(self.shard_sinks))

    @property
    def outputs(self) -> list[PhaseOutput]:
        chosen = [p for p in self.inputs.cfg.phases if self.shards.get(p) or self.phase_sinks.get(p)]
        return [PhaseOutput(p, self.shards.get(p, ()), self.phase_sinks.get(p, ())) for p in chosen]

    def steps(self) -> beam.PTransform:
        i = self.inputs
        return TextShardsToInstances(i.vocab, self.outputs, i.text.lowercase, i.cfg.same_seed_per_shard,
                                     i.cfg.force, self.shard_sinks, helper_threads=spare_cores(i.cfg.runner),
                                     tokenizer_file=i.cfg.documents.tokenizer)

    def write_manifests(self, stage: StageRecords, provenance: Provenance) -> None:
        for p, outs in self.shards.items():
            for out in outs:
                write_shard_manifests(stage, provenance, out.folder, self.inputs.instance_options(p), out.format)


def chosen_phases(cfg: BuildConfig) -> tuple[InstanceConfig, ...]:
    return () if cfg.stop_after == "text" else cfg.phases


def shard_folder(cfg: BuildConfig, fmt: PerShardFormat, p: InstanceConfig, lowercase: bool, dataset: str) -> str:
    """Where a phase's files cut per text shard go."""
    return fsio.join(cfg.output, fmt.folder(p, lowercase), dataset)


def plan_stages(inputs: BuildInputs) -> list[PlannedStage]:
    """The build's stages in chain order, each with its decision. Reads only: a refusal comes
    before anything is written, and `prepare_stages` does the writing once the plan stands."""
    cfg, lowercase = inputs.cfg, inputs.text.lowercase
    chosen = chosen_phases(cfg)
    text = TextStage(inputs)
    planned = [PlannedStage(text, text.decide(cfg.force))]
    # The stages of the chosen formats not cut per text shard, planned by their cut's module; a
    # PER_SHARD format's files are written where the shard's instances are made, by the instance stage.
    own = [stage for fmt in map(formats.get, cfg.formats) if (module := stage_module(fmt)) is not None
           for stage in module.plan(fmt, inputs, chosen, planned[0].decision.handed_on)]
    own_planned = [PlannedStage(stage, stage.decide(cfg.force)) for stage in own]
    if chosen:
        per_shard = chosen_formats(cfg, PER_SHARD)
        sinks = [(key, sink) for p in own_planned if p.decision.run for key, sink in p.stage.sinks().items()]
        instances = InstancesStage(
            inputs,
            {p: tuple(ShardOutput(fmt, shard_folder(cfg, fmt, p, lowercase, inputs.dataset)) for fmt in per_shard)
             for p in chosen if per_shard},
            {p: tuple(sink for key, sink in sinks if key == p) for p in chosen},
            tuple(sink for key, sink in sinks if key is None))
        planned += [PlannedStage(instances, instances.decide(cfg.force)), *own_planned]
    return planned


def prepare_stages(planned: list[PlannedStage], work_dir: str) -> None:
    """Once every stage is decided, before any work: what each stage puts in place, and what a
    killed run left cleared from each stage that runs."""
    for p in planned:
        p.stage.place()
    for p in planned:
        if p.decision.run:
            p.stage.clear()
    remove_temporaries(work_dir)  # a killed run's, which this run's progress would count
