"""The runner of the build's stages: it plans them, prepares them, and chains them.

The stages follow one contract (bertdata.pipelines.stage): the text (bertdata.pipelines.stages.text);
the instances, with the files of every format cut per text shard (bertdata.pipelines.stages.instances);
and the stages of the formats cut otherwise, planned by the module of their cut
(bertdata.pipelines.formats: an LDDL folder per phase, a folder per format cut per split).
`plan_stages` is the one place a build's stages, their folders and their decisions come from,
and it only reads; `prepare_stages`, run by the launcher once every stage is decided and before
any work, puts in place what stages need and clears what a killed run left. Both apply the one
folder policy (bertdata.pipelines.stage.FolderPolicy) to every stage's folders alike.

The runner does the rest the same way for every stage. It starts each from what the stages
before it handed on (one StageRecords element), gathers everything its steps yield (its own
records, and the others, which every step passes on: bertdata.pipelines.records.StepDoFn) at
one barrier, sums the counts, writes the stage's manifests there, has the folder policy clean up, and
hands on all but the records no later stage reads. So no step can lose counts or another
stage's records, and a stage gets its manifests by being in the chain.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import apache_beam as beam

from bertdata import formats
from bertdata.config import BuildConfig, InstanceConfig
from bertdata.formats import PER_SHARD
from bertdata.pipelines.formats import chosen_formats, stage_module
from bertdata.pipelines.stages.instances import InstancesStage, ShardOutput, shard_folder
from bertdata.pipelines.manifests import Provenance
from bertdata.pipelines.records import Gather, StageRecords
from bertdata.pipelines.runtime import fsio
from bertdata.pipelines.stage import BuildInputs, Decision, FolderPolicy, Stage
from bertdata.pipelines.stages.text import TextStage


@dataclass(frozen=True)
class PlannedStage:
    stage: Stage
    decision: Decision


class _EndStage(fsio.FilesDoFn):
    """A stage's gathered records -> its manifests written, its temporaries removed; hands on what
    later stages read."""

    def __init__(self, stage: Stage, provenance: Provenance):
        super().__init__()
        self.stage, self.provenance = stage, provenance

    def process(self, records: list):
        gathered = StageRecords.of(records)
        gathered = replace(gathered, counts={**gathered.counts, **self.stage.counts(gathered)})
        self.stage.write_manifests(gathered, self.provenance)
        FolderPolicy.finish(self.stage)
        yield StageRecords(gathered.plan, tuple(r for r in gathered.records if not self.stage.ended(r)),
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


def chosen_phases(cfg: BuildConfig) -> tuple[InstanceConfig, ...]:
    return () if cfg.stop_after == "text" else cfg.phases


def plan_stages(inputs: BuildInputs) -> list[PlannedStage]:
    """The build's stages in chain order, each with its decision. Reads only: a refusal comes
    before anything is written, and `prepare_stages` does the writing once the plan stands."""
    cfg, lowercase = inputs.cfg, inputs.text.lowercase
    policy = FolderPolicy(cfg.force)
    chosen = chosen_phases(cfg)
    text = TextStage(inputs)
    planned = [PlannedStage(text, policy.decide(text))]
    # The stages of the chosen formats not cut per text shard, planned by their cut's module; a
    # PER_SHARD format's files are written where the shard's instances are made, by the instance stage.
    own = [stage for fmt in map(formats.get, cfg.formats) if (module := stage_module(fmt)) is not None
           for stage in module.plan(fmt, inputs, chosen, planned[0].decision.handed_on)]
    own_planned = [PlannedStage(stage, policy.decide(stage)) for stage in own]
    if chosen:
        per_shard = chosen_formats(cfg, PER_SHARD)
        sinks = [(key, sink) for p in own_planned if p.decision.run for key, sink in p.stage.sinks().items()]
        instances = InstancesStage(
            inputs,
            {p: tuple(ShardOutput(fmt, shard_folder(cfg, fmt, p, lowercase, inputs.dataset)) for fmt in per_shard)
             for p in chosen if per_shard},
            {p: tuple(sink for key, sink in sinks if key == p) for p in chosen},
            tuple(sink for key, sink in sinks if key is None))
        planned += [PlannedStage(instances, policy.decide(instances)), *own_planned]
    return planned


def prepare_stages(planned: list[PlannedStage], work_dir: str) -> None:
    """Once every stage is decided, before any work: what each stage puts in place, and what a
    killed run left cleared from each stage that runs (FolderPolicy.prepare)."""
    FolderPolicy.prepare([(p.stage, p.decision) for p in planned], work_dir)
