"""The build's stages, each under one contract, and the runner that chains them.

A stage (the text; the instances, with the files cut per text shard; the Megatron folder; an
LDDL folder per phase) names the folders it writes, decides before any work whether this run
reuses what is there, runs, or is refused (one line naming the folder), clears what a killed
run left before it runs, gives the Beam steps that make its records, and writes its manifests.

The runner does the rest the same way for every stage. It starts each from what the stages
before it handed on (one StageRecords element), gathers everything its steps yield (its own
records, and the others, which every step passes on: bertdata.pipelines.records.StepDoFn) at
one barrier, sums the counts, writes the stage's manifests there and hands on all but the
records no later stage reads. So no step can lose counts or another stage's records, and a
stage gets its manifests by being in the chain. `plan_stages` is the one place a build's
stages, their folders and their decisions come from.
"""

from __future__ import annotations

import functools
from dataclasses import asdict, dataclass, field, replace

import apache_beam as beam

from bertdata.config import BuildConfig, InstanceConfig, TextConfig, phase_number
from bertdata.errors import BertdataError
from bertdata.formats import ACROSS_SHARDS, PER_SHARD, PER_SPLIT, PerShardFormat, lddl
from bertdata.formats.megatron import folder_name as megatron_folder, token_dtype
from bertdata.instances.create import generation_attrs
from bertdata.manifest import MANIFEST, HDF5Shard
from bertdata.text.shards import WORK_FOLDER, TextShard
from bertdata.text.wikidump import Site
from bertdata.instances.vocab import VOCAB_PATH, Vocab
from bertdata.text.wikitext import RULES_VERSION
from bertdata.pipelines import fsio
from bertdata.pipelines.formats import chosen_format
from bertdata.pipelines.instances import PhaseOutput, ShardOutput, TextShardsToInstances
from bertdata.pipelines.lddl import (LddlPhase, WriteLddlFiles, clear_folder as clear_lddl, needs_writing as lddl_needed,
                                     plan_phase, runs_folder as lddl_runs_folder, write_manifest as write_lddl_manifest)
from bertdata.pipelines.manifests import Provenance, write_shard_manifests, write_text_manifest
from bertdata.pipelines.megatron import (MegatronOutput, MergeParts, clear_folder as clear_megatron,
                                         needs_writing as megatron_needed, parts_folder as megatron_parts_folder,
                                         plan_merges, sources as megatron_sources,
                                         write_manifest as write_megatron_manifest)
from bertdata.pipelines.records import (Gather, LddlFile, MegatronPair, MegatronPart, PhasePlan, ShardRuns,
                                        StageRecords)
from bertdata.pipelines.resume import (RULES, check_vocab_unchanged, remove_leftovers, remove_temporaries,
                                       reusable_text_stage, text_stage_folders)
from bertdata.pipelines.runners import spare_cores
from bertdata.pipelines.text import DumpToTextShards
from bertdata.pipelines.work import work_groups, work_items


@dataclass(frozen=True)
class Decision:
    """What a build does with a stage: run it, or reuse what a finished one wrote (`handed_on`:
    what it hands the stages after, when they need it). `line`: what the user is told, if anything.
    A refusal is no decision: `decide` raises a BertdataError naming the folder."""

    run: bool
    line: str | None = None
    handed_on: StageRecords | None = None


class Stage:
    """One step of the build, as the runner sees it."""

    name: str  # the Beam steps' label
    summary: str  # the summary's heading for the stage's folders
    folders: tuple[str, ...] = ()
    reads: tuple[type, ...] = ()  # the kinds of record it needs of what the stages before hand on
    makes: tuple[type, ...] = ()  # the kinds of record its steps (or, reused, its manifest) hand on
    ends: tuple[type, ...] = ()  # the kinds of record no stage after this one reads

    def decide(self, force: bool) -> Decision:
        """Reads the stage's folders, writes nothing."""
        raise NotImplementedError

    def clear(self) -> None:
        """Before a stage that runs: remove what a killed run of it left."""
        remove_leftovers(list(self.folders))

    def start(self, handed: StageRecords) -> list:
        """The elements the stage's steps begin from; what the stages before handed on is among them."""
        return handed.records()

    def steps(self) -> beam.PTransform:
        raise NotImplementedError

    def counts(self, stage: StageRecords) -> dict:
        """Counts the finished stage adds to what its steps counted."""
        return {}

    def write_manifests(self, stage: StageRecords, provenance: Provenance) -> None:
        raise NotImplementedError

    def ended(self, record) -> bool:
        return isinstance(record, self.ends)

    def __getstate__(self) -> dict:
        # A stage is pickled for the steps that start and end it: without what only planning
        # reads (see EndInputs).
        state = dict(self.__dict__)
        if isinstance(state.get("inputs"), BuildInputs):
            state["inputs"] = state["inputs"].at_end()
        return state


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


@dataclass(frozen=True)
class BuildInputs:
    """What the stages are planned from: the config and the resolved inputs."""

    cfg: BuildConfig  # its runner's workers resolved
    dump: str
    index: str | None
    dump_record: dict
    vocab: Vocab
    site: Site
    text: TextConfig  # lowercase settled against the vocab
    dataset: str
    books: list[str]
    splitter: object
    punkt_model: str | None

    @property
    def work_dir(self) -> str:
        return fsio.join(self.cfg.output, WORK_FOLDER)

    @functools.cached_property
    def text_options(self) -> dict:
        return {"text": asdict(self.text), "books": [fsio.split(b)[1] for b in self.books],
                "dataset": self.dataset, RULES: RULES_VERSION, "language": self.site.language,
                "punkt": self.punkt_model or "trained on the dump"}

    def instance_options(self, p: InstanceConfig) -> dict:
        return self.at_end().instance_options(p)

    def at_end(self) -> EndInputs:
        return EndInputs(self.text_options, self.work_dir, self.vocab.sha256, len(self.vocab), self.text.lowercase,
                         self.cfg.same_seed_per_shard)


@dataclass(frozen=True)
class EndInputs:
    """What a stage's start and end (its counts and manifests, in a worker) read of its inputs. A
    stage pickles with these in place of its BuildInputs, whose vocab (30,000 tokens) and sentence
    splitter serve the launcher's planning only: Beam pickles each step that carries a stage in the
    launcher and again in every worker (bz2 at level 9), and the vocab made each such pickle ~25 ms."""

    text_options: dict
    work_dir: str
    vocab_sha256: str
    vocab_size: int
    lowercase: bool
    same_seed_per_shard: bool

    def instance_options(self, p: InstanceConfig) -> dict:
        return {**self.text_options, "instances": p.record(), "vocab_sha256": self.vocab_sha256,
                "vocab_size": self.vocab_size, "lowercase": self.lowercase,
                "seed_per_shard": "same" if self.same_seed_per_shard else "derived"}


@dataclass
class TextStage(Stage):
    """Dump (and books) -> text shards; its folder is one of `folders`, chosen as it runs."""

    inputs: BuildInputs
    name = "Text"
    summary = "text"
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
    """Text shards -> instances of every phase from one tokenization: the files cut per text shard
    (`per_shard`, in `folders`), and what the stages after need of each shard (LDDL runs,
    Megatron parts). Its shard files are reused one by one (bertdata.pipelines.instances)."""

    inputs: BuildInputs
    per_shard: PerShardFormat | None
    phases: dict  # {InstanceConfig: folder}, the per-shard folders
    lddl: dict = field(default_factory=dict)  # {InstanceConfig: LddlPhase}, the LDDL folders written
    megatron: MegatronOutput | None = None
    name = "Instances"
    summary = "phases"
    reads = (TextShard,)
    makes = (HDF5Shard, ShardRuns, MegatronPart)
    ends = (TextShard, HDF5Shard)  # its steps take the text shards

    @property
    def folders(self) -> tuple[str, ...]:
        return tuple(self.phases.values())

    def decide(self, force: bool) -> Decision:
        if self.per_shard is not None:
            check_vocab_unchanged(self.per_shard, list(self.folders), self.inputs.vocab, force)
        return Decision(bool(self.outputs) or self.megatron is not None)

    @property
    def outputs(self) -> list[PhaseOutput]:
        chosen = [p for p in self.inputs.cfg.phases if p in self.phases or p in self.lddl]
        return [PhaseOutput(p, ShardOutput(self.per_shard, self.phases[p]) if p in self.phases else None,
                            self.lddl.get(p)) for p in chosen]

    def steps(self) -> beam.PTransform:
        i = self.inputs
        return TextShardsToInstances(i.vocab, self.outputs, i.text.lowercase, i.cfg.same_seed_per_shard,
                                     i.cfg.force, self.megatron, helper_threads=spare_cores(i.cfg.runner))

    def write_manifests(self, stage: StageRecords, provenance: Provenance) -> None:
        write_shard_manifests(stage, provenance,
                              {folder: self.inputs.instance_options(p) for p, folder in self.phases.items()},
                              self.per_shard.layout if self.per_shard else {})


@dataclass
class MegatronStage(Stage):
    """The instance stage's parts -> one Megatron pair per split (bertdata.pipelines.megatron)."""

    out: MegatronOutput
    options: dict
    finished_sources: list[dict] | None  # the reused text stage's shards; None: text made anew
    name = "Megatron"
    summary = "megatron"
    reads = (MegatronPart,)
    makes = (MegatronPair,)
    ends = (MegatronPart, MegatronPair)

    @property
    def folders(self) -> tuple[str, ...]:
        return (self.out.folder,)

    def decide(self, force: bool) -> Decision:
        if megatron_needed(self.out, self.options, self.finished_sources, force):
            return Decision(True)
        return Decision(False, f"{self.out.folder}: already complete, kept")

    def clear(self) -> None:
        clear_megatron(self.out)

    def start(self, handed: StageRecords) -> list:
        return [*handed.records(), *plan_merges(handed, self.out)]

    def steps(self) -> beam.PTransform:
        return MergeParts()

    def write_manifests(self, stage: StageRecords, provenance: Provenance) -> None:
        write_megatron_manifest(stage, provenance, self.out, self.options)


@dataclass
class LddlStage(Stage):
    """One phase's LDDL folder: the instance stage's runs -> balanced files (bertdata.pipelines.lddl)."""

    phase: LddlPhase
    fields: dict  # the manifest's options, lengths and attrs

    @property
    def name(self) -> str:
        return f"Lddl{self.phase.tag.capitalize()}"

    summary = "lddl"
    reads = (ShardRuns,)
    makes = (PhasePlan, LddlFile)  # what it ends is its own folder's: see `ended`

    @property
    def folders(self) -> tuple[str, ...]:
        return (self.phase.folder,)

    def decide(self, force: bool) -> Decision:
        if lddl_needed(self.phase, self.fields["options"], force):
            return Decision(True)
        return Decision(False, f"{self.phase.folder}: already complete, kept")

    def clear(self) -> None:
        clear_lddl(self.phase)

    def start(self, handed: StageRecords) -> list:
        return [*handed.records(), *plan_phase(handed, self.phase)]

    def steps(self) -> beam.PTransform:
        return WriteLddlFiles(self.phase)

    def ended(self, record) -> bool:
        return isinstance(record, (ShardRuns, PhasePlan, LddlFile)) and record.folder == self.phase.folder

    def write_manifests(self, stage: StageRecords, provenance: Provenance) -> None:
        write_lddl_manifest(stage, provenance, self.phase.folder, self.fields)


def chosen_phases(cfg: BuildConfig) -> tuple[InstanceConfig, ...]:
    return () if cfg.stop_after == "text" else cfg.phases


def shard_folder(cfg: BuildConfig, fmt: PerShardFormat, p: InstanceConfig, lowercase: bool, dataset: str) -> str:
    """Where a phase's files cut per text shard go."""
    return fsio.join(cfg.output, fmt.folder(p, lowercase), dataset)


def lddl_folder(cfg: BuildConfig, p: InstanceConfig) -> str:
    return fsio.join(cfg.output, lddl.folder_name(phase_number(p), cfg.lddl.bin_size_for(p)))


def megatron_output_folder(cfg: BuildConfig, lowercase: bool) -> str:
    return fsio.join(cfg.output, megatron_folder(lowercase))


def plan_stages(inputs: BuildInputs) -> list[PlannedStage]:
    """The build's stages in chain order, each with its decision, once every stage has been
    decided (a refusal comes before anything is cleared) and those that run are cleared."""
    cfg, lowercase = inputs.cfg, inputs.text.lowercase
    chosen = chosen_phases(cfg)
    # The stages follow from how each chosen format is cut (bertdata.formats): files per text shard
    # are written where the shard's instances are made; the other cuts have stages of their own.
    per_shard = chosen_format(cfg, PER_SHARD)
    text = TextStage(inputs)
    planned = [PlannedStage(text, text.decide(cfg.force))]
    lddl_stages = [LddlStage(phase, fields) for phase, fields in _lddl_phases(inputs, chosen)]
    lddl_planned = [PlannedStage(stage, stage.decide(cfg.force)) for stage in lddl_stages]
    megatron = _megatron_stage(inputs, chosen, planned[0].decision.handed_on)
    megatron_planned = [PlannedStage(megatron, megatron.decide(cfg.force))] if megatron else []
    if chosen:
        instances = InstancesStage(
            inputs, per_shard,
            {p: shard_folder(cfg, per_shard, p, lowercase, inputs.dataset) for p in chosen}
            if per_shard else {},
            {p: ps.stage.phase for p, ps in zip(chosen, lddl_planned) if ps.decision.run},
            next((ps.stage.out for ps in megatron_planned if ps.decision.run), None))
        planned += [PlannedStage(instances, instances.decide(cfg.force)), *megatron_planned, *lddl_planned]
    if lddl_stages:
        _place_lddl_vocab(inputs)
    for p in planned:
        if p.decision.run:
            p.stage.clear()
    remove_temporaries(inputs.work_dir)  # a killed run's, which this run's progress would count
    return planned


def _place_lddl_vocab(inputs: BuildInputs) -> None:
    """The vocab where NGC's script looks; another one there is refused unless --force."""
    vocab_path = fsio.join(inputs.cfg.output, VOCAB_PATH)
    vocab_bytes = fsio.read_bytes(inputs.vocab.path)
    if fsio.exists(vocab_path) and fsio.read_bytes(vocab_path) != vocab_bytes and not inputs.cfg.force:
        raise BertdataError(f"{vocab_path}: holds another vocab than {inputs.vocab.path}; pass --force to replace "
                            "it (and the LDDL folders made with it), or choose another --output")
    fsio.write_bytes(vocab_path, vocab_bytes)


def _lddl_phases(inputs: BuildInputs, chosen) -> list[tuple[LddlPhase, dict]]:
    """Each chosen phase's LDDL folder, and its manifest's fields."""
    cfg = inputs.cfg
    if chosen_format(cfg, ACROSS_SHARDS) is None:
        return []
    phases = []
    for p in chosen:
        n = phase_number(p)
        phase = LddlPhase(lddl_folder(cfg, p),
                          lddl_runs_folder(inputs.work_dir), f"phase{n}", p.max_seq_length, cfg.lddl.masking,
                          cfg.lddl.bin_size_for(p), cfg.lddl.num_shards)
        options = {**inputs.instance_options(p), "lddl": {"masking": phase.masking, "bin_size": phase.bin_size,
                                                          "num_shards": phase.num_shards}}
        phases.append((phase, {"options": options, "max_seq_length": p.max_seq_length,
                               "max_predictions_per_seq": p.max_predictions_per_seq,
                               "attrs": generation_attrs(inputs.vocab, p, inputs.text.lowercase, p.random_seed)}))
    return phases


def _megatron_stage(inputs: BuildInputs, chosen, reused_text: StageRecords | None) -> MegatronStage | None:
    if chosen_format(inputs.cfg, PER_SPLIT) is None or not chosen:
        return None
    vocab, lowercase = inputs.vocab, inputs.text.lowercase
    options = {"dataset": inputs.dataset, "vocab_sha256": vocab.sha256, "vocab_size": len(vocab),
               "lowercase": lowercase, "dtype": token_dtype(len(vocab)).name}
    out = MegatronOutput(megatron_output_folder(inputs.cfg, lowercase),
                         megatron_parts_folder(inputs.work_dir), inputs.dataset, len(vocab))
    finished = None if reused_text is None else megatron_sources(reused_text.of_kind(TextShard))
    return MegatronStage(out, options, finished)
