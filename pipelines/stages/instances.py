"""The instance stage: text shards -> instances of every phase from one tokenization, written as shard files (hdf5, or
any `bertdata.formats.PerShardFormat`, as many as chosen) and/or handed to the sinks of the
stages after (LDDL's runs per phase; per text shard, its documents: the part of each format cut
per split), one element per text shard. Each shard is tokenized once for every tokenizer in use
(each a TokenizerSpec the build made once: the WordPiece vocab's, and --tokenizer's file where the
formats holding documents take it), each opened once per worker."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar, Protocol

import apache_beam as beam
import numpy as np

from bertdata.config import BuildConfig, InstanceConfig
from bertdata.formats import PerShardFormat
from bertdata.manifest import ShardFiles, file_sha256
from bertdata.text.shards import TextShard, derive_seed
from bertdata.instances.vocab import Vocab
from bertdata.text.wikitext import RULES_VERSION
from bertdata.pipelines.manifests import Provenance, write_shard_manifests
from bertdata.pipelines.records import Counts, Spread, StageRecords, StepDoFn
from bertdata.pipelines.resume import check_vocab_unchanged
from bertdata.pipelines.runtime import fsio
from bertdata.pipelines.runtime.pool import working_on
from bertdata.pipelines.runtime.runners import spare_cores
from bertdata.pipelines.stage import BuildInputs, Decision, Folders, Stage


# What each shard file records about itself, and a re-run reads back instead of redoing it.
STATS = ("documents", "sentences", "tokens", "instances", "random_next")
# Every option of the algorithm. Attrs leave one out at its default (the token masking scheme,
# see InstanceConfig.record): absent from this run's attrs, it must be absent from the file's.
OPTIONS = tuple(f.name for f in fields(InstanceConfig))
# Instance rows made into LDDL rows per step.
SPILL_ROWS = 8192


@dataclass(frozen=True)
class ShardOutput:
    """A phase's shard files: one or more per text shard, of one format, in one folder."""

    format: PerShardFormat
    folder: str


class PhaseSink(Protocol):
    """What a later stage takes of a phase's instances of each text shard it `wants` (its
    `record` kind: LDDL's runs)."""

    record: ClassVar[type]

    def wants(self, shard: TextShard) -> bool: ...

    def take(self, shard: TextShard, batches: Iterable[Mapping[str, np.ndarray]], tokens: tuple[str, ...]) -> Any: ...


class ShardSink(Protocol):
    """What a later stage takes of every text shard's documents, whatever the phases (its
    `record` kind: a format's part), tokenized by its `tokenizer` (a TokenizerSpec: sinks with
    equal ones share one tokenization); `documents` is None for a shard that tokenized to nothing."""

    record: ClassVar[type]
    tokenizer: Any

    def take(self, shard: TextShard, documents: Any) -> Any: ...


@dataclass(frozen=True)
class PhaseOutput:
    """One phase's instances and where they go: shard files, the sinks of stages of their own
    (files cut across text shards: bertdata.pipelines.stages.lddl), or both."""

    cfg: InstanceConfig
    shards: tuple[ShardOutput, ...] = ()
    sinks: tuple[PhaseSink, ...] = ()


class _MakeInstances(StepDoFn):
    takes = (TextShard,)

    def __init__(self, vocab: Vocab | None, phases: list[PhaseOutput], lowercase: bool, same_seed_per_shard: bool,
                 force: bool, shard_sinks: tuple[ShardSink, ...] = (), helper_threads: bool = True,
                 vocab_tokenizer=None):
        super().__init__()
        self.vocab, self.phases, self.shard_sinks = vocab, phases, shard_sinks
        self.lowercase, self.same_seed, self.force = lowercase, same_seed_per_shard, force
        self.helper_threads = helper_threads
        # The phases' tokenizer: the vocab's TokenizerSpec (BuildInputs.vocab_tokenizer); None where
        # --tokenizer's file serves every format (pipelines.inputs.uses_vocab).
        if vocab_tokenizer is None and vocab is not None:
            from bertdata.instances.tokenizer_spec import TokenizerSpec

            vocab_tokenizer = TokenizerSpec.of_vocab(vocab, lowercase)
        self.vocab_tokenizer = vocab_tokenizer

    def setup(self):
        super().setup()
        # Workers are the parallelism: the tokenizer's own thread pool only spins on busy
        # cores (a 32x build was slower with it).
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        for spec in self._specs():  # opened once here, kept for every shard
            spec.open()

    def _specs(self) -> list:
        """The tokenizers in use, each once (equal specs are one tokenizer)."""
        used = [sink.tokenizer for sink in self.shard_sinks]
        if self.vocab_tokenizer is not None and any(phase.shards or phase.sinks for phase in self.phases):
            used.append(self.vocab_tokenizer)
        return list(dict.fromkeys(used))

    def work(self, record: TextShard):
        working_on(f"the instance stage, text shard {record.stem}")
        tokenized: dict[Any, Any] = {}  # each tokenizer's Documents of the shard, made once

        def documents(spec):
            if spec not in tokenized:
                tokenized[spec] = self._tokenize(record, spec.open())
            return tokenized[spec]

        for sink in self.shard_sinks:  # whatever the phases: these formats hold documents, not instances
            yield sink.take(record, documents(sink.tokenizer))
        yield from self._phases(record, documents)
        if any(docs is None for docs in tokenized.values()):
            yield Counts({"skipped_empty_text_shards": 1})

    def _phases(self, record: TextShard, documents):
        from bertdata.instances.create import create_instances, generation_attrs

        for phase in self.phases:
            cfg = phase.cfg
            sinks = [sink for sink in phase.sinks if sink.wants(record)]
            if not phase.shards and not sinks:
                continue
            seed = cfg.random_seed if self.same_seed else derive_seed(cfg.random_seed, record.stem)
            attrs = {**generation_attrs(self.vocab, cfg, self.lowercase, seed),
                     "source": record.stem + ".txt", "source_sha256": record.sha256,
                     "cleaning_rules": RULES_VERSION}
            files = [_ShardFiles(out, record, attrs, self.force) for out in phase.shards]
            instances = stats = None
            if not files or not all(f.reused for f in files):
                docs = documents(self.vocab_tokenizer)
                if docs is None:
                    return
                instances = create_instances(docs, self.vocab, cfg, seed)
                stats = {"documents": docs.num_documents, "sentences": docs.num_sentences,
                         "tokens": docs.num_tokens, "instances": len(instances),
                         "random_next": int(instances.random_next[:len(instances)].sum())}
            for f in files:
                if not f.reused:
                    f.write(instances, stats, self.helper_threads)
            for sink in sinks:
                yield sink.take(record, _batches(instances, files[0] if files else None), self.vocab.tokens)
            del instances
            for f in files:
                yield f.record(seed)

    def _tokenize(self, record: TextShard, tokenizer):
        """The text shard's Documents, or None when every sentence tokenized to nothing (e.g. only
        symbols out of vocab)."""
        from bertdata.instances.documents import EmptyShard, read_documents

        with fsio.local_input(record.path) as local:
            try:
                documents = read_documents(local, tokenizer)
            except EmptyShard:
                return None
        if record.ids_path is not None:
            from bertdata.text.shards import read_ids

            documents = documents.named(read_ids(fsio.read_bytes(record.ids_path)))
        return documents


class _ShardFiles:
    """A text shard's files of one phase in one format cut per shard: reused where an earlier run
    left them made with exactly these attributes, else written."""

    def __init__(self, out: ShardOutput, record: TextShard, attrs: dict, force: bool):
        self.out, self.source, self.attrs = out, record, attrs
        self.names = out.format.file_names(record.stem, record.split, record.index)
        self.paths = [fsio.join(out.folder, name) for name in self.names]
        self.stats = None if force else _reusable(out.format, self.paths, attrs)
        self.reused = self.stats is not None
        self.sha = None

    def write(self, instances, stats: dict, helper_thread: bool) -> None:
        self.stats = stats
        with contextlib.ExitStack() as stack:
            local = [stack.enter_context(fsio.local_output(path)) for path in self.paths]
            self.out.format.write(local, instances, {**self.attrs, **stats}, helper_thread=helper_thread)
            with open(local[0], "rb") as f:  # here, not read back from a store
                self.sha = file_sha256(f)

    def record(self, seed: int) -> ShardFiles:
        if self.sha is None:
            with fsio.open_file(self.paths[0]) as f:
                self.sha = file_sha256(f)
        s = self.stats
        return ShardFiles(self.out.folder, self.names[0], self.source.stem + ".txt", seed, s["documents"],
                          s["sentences"], s["tokens"], s["instances"], s["random_next"], self.sha, self.reused)


def _batches(instances, files: _ShardFiles | None):
    """The shard's instances as batches of the six arrays: made now, or read back from the shard
    files an earlier run wrote."""
    from bertdata.instances.schema import FIELDS

    if instances is not None:
        for start in range(0, len(instances), SPILL_ROWS):
            yield {name: instances.array(name, start, start + SPILL_ROWS) for name in FIELDS}
        return
    with contextlib.ExitStack() as stack:
        yield from files.out.format.read([stack.enter_context(fsio.local_input(path)) for path in files.paths])


def _reusable(fmt: PerShardFormat, paths: list[str], attrs: dict) -> dict | None:
    """The stats of an existing complete shard made with exactly these parameters, else None.

    Writes are atomic, so files under their final names are complete; matching attributes
    (source checksum, seed, vocab, lengths) make it the same shard this run would write.
    """
    if not all(fsio.exists(path) for path in paths):
        return None
    with contextlib.ExitStack() as stack:
        found = fmt.info([stack.enter_context(fsio.local_input(path)) for path in paths]).attrs
    if any(found.get(k) != attrs.get(k) for k in {*attrs, *OPTIONS} if k != "bertdata_version"):
        return None
    if any(k not in found for k in STATS):
        return None  # made by a release that recorded less
    return {k: int(found[k]) for k in STATS}


class TextShardsToInstances(beam.PTransform):
    """TextShard records -> per phase, a ShardFiles record for each format cut per shard (the
    shard's files) and/or what its sinks take (LDDL's ShardRuns, of training shards); once per text
    shard, what `shard_sinks` take (each format cut per split: its SplitPart). `helper_threads`:
    whether workers have a spare core to compress on; `vocab_tokenizer`: the vocab's TokenizerSpec,
    the build's (the sinks carry their own)."""

    def __init__(self, vocab: Vocab, phases: list[PhaseOutput], lowercase: bool,
                 same_seed_per_shard: bool, force: bool = False, shard_sinks: tuple[ShardSink, ...] = (),
                 helper_threads: bool = True, vocab_tokenizer=None):
        super().__init__()
        self.fn = _MakeInstances(vocab, phases, lowercase, same_seed_per_shard, force, shard_sinks, helper_threads,
                                 vocab_tokenizer)

    def expand(self, records):
        return (
            records
            | "SpreadShards" >> Spread()
            | "MakeInstances" >> beam.ParDo(self.fn)
        )


@dataclass
class ShardFolders(Folders):
    """The instance stage's folders: one per phase and format cut per text shard. No folder is
    reused whole: the stage runs where it has anything to make, and reuses its shard files one by
    one as it makes them (`_ShardFiles`); another vocab's files are refused unless forced."""

    stage: InstancesStage

    @property
    def format(self) -> str | None:
        return next((out.format.name for outs in self.stage.shards.values() for out in outs), None)

    @property
    def paths(self) -> tuple[str, ...]:
        return tuple(folder for _fmt, folder in self.folder_formats())

    def folder_formats(self) -> list[tuple[str, str]]:
        return [(out.format.name, out.folder) for outs in self.stage.shards.values() for out in outs]

    def decide(self, force: bool) -> Decision:
        for outs in zip(*self.stage.shards.values()):  # each format's folders, all phases at once
            check_vocab_unchanged(outs[0].format, [out.folder for out in outs], self.stage.inputs.vocab, force)
        return Decision(bool(self.stage.outputs) or bool(self.stage.shard_sinks))


@dataclass
class InstancesStage(Stage):
    """Text shards -> instances of every phase from one tokenization: the files of every format
    cut per text shard (`shards`: each phase's, one folder per format), and what the stages after
    take of each shard (their sinks: LDDL runs, the parts of the formats cut per split)."""

    inputs: BuildInputs
    shards: dict  # {InstanceConfig: (ShardOutput, ...)}, the per-shard folders of the chosen phases
    phase_sinks: dict = field(default_factory=dict)  # {InstanceConfig: the sinks of the stages that run}
    shard_sinks: tuple = ()  # the sinks of every text shard's documents
    name = "Instances"
    reads = (TextShard,)
    ends = (TextShard, ShardFiles)  # its steps take the text shards

    @property
    def makes(self) -> tuple[type, ...]:
        sinks = [*self.shard_sinks, *(s for sinks in self.phase_sinks.values() for s in sinks)]
        return (ShardFiles, *dict.fromkeys(sink.record for sink in sinks))

    @property
    def folders(self) -> ShardFolders:
        return ShardFolders(self)

    @property
    def outputs(self) -> list[PhaseOutput]:
        chosen = [p for p in self.inputs.cfg.phases if self.shards.get(p) or self.phase_sinks.get(p)]
        return [PhaseOutput(p, self.shards.get(p, ()), self.phase_sinks.get(p, ())) for p in chosen]

    def steps(self) -> beam.PTransform:
        i = self.inputs
        return TextShardsToInstances(i.vocab, self.outputs, i.text.lowercase, i.cfg.same_seed_per_shard,
                                     i.cfg.force, self.shard_sinks, helper_threads=spare_cores(i.cfg.runner),
                                     vocab_tokenizer=i.vocab_tokenizer)

    def write_manifests(self, stage: StageRecords, provenance: Provenance) -> None:
        for p, outs in self.shards.items():
            for out in outs:
                write_shard_manifests(stage, provenance, out.folder, self.inputs.instance_options(p), out.format)


def shard_folder(cfg: BuildConfig, fmt: PerShardFormat, p: InstanceConfig, lowercase: bool, dataset: str) -> str:
    """Where a phase's files cut per text shard go."""
    return fsio.join(cfg.output, fmt.folder(p, lowercase), dataset)
