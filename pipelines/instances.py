"""Text shards -> instances of every phase from one tokenization, written as shard files (hdf5, or
any `bertdata.formats.PerShardFormat`) and/or handed to the sinks of the stages after (LDDL's runs
per phase; per text shard, its documents: Megatron's part), one element per text shard."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields
from typing import Any, ClassVar, Protocol

import apache_beam as beam
import numpy as np

from bertdata.config import InstanceConfig
from bertdata.formats import PerShardFormat
from bertdata.manifest import HDF5Shard, file_sha256
from bertdata.text.shards import TextShard, derive_seed
from bertdata.instances.vocab import Vocab
from bertdata.text.wikitext import RULES_VERSION
from bertdata.pipelines import fsio
from bertdata.pipelines.pool import working_on
from bertdata.pipelines.records import Counts, Spread, StepDoFn


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
    `record` kind: Megatron's part); `documents` is None for a shard that tokenized to nothing."""

    record: ClassVar[type]

    def take(self, shard: TextShard, documents: Any) -> Any: ...


@dataclass(frozen=True)
class PhaseOutput:
    """One phase's instances and where they go: shard files, the sinks of stages of their own
    (files cut across text shards: bertdata.pipelines.lddl), or both."""

    cfg: InstanceConfig
    shards: ShardOutput | None
    sinks: tuple[PhaseSink, ...] = ()


class _MakeInstances(StepDoFn):
    takes = (TextShard,)

    def __init__(self, vocab: Vocab, phases: list[PhaseOutput], lowercase: bool, same_seed_per_shard: bool,
                 force: bool, shard_sinks: tuple[ShardSink, ...] = (), helper_threads: bool = True):
        super().__init__()
        self.vocab, self.phases, self.shard_sinks = vocab, phases, shard_sinks
        self.lowercase, self.same_seed, self.force = lowercase, same_seed_per_shard, force
        self.helper_threads = helper_threads

    def setup(self):
        super().setup()
        from bertdata.instances.tokenize import WordPiece

        # Workers are the parallelism: the tokenizer's own thread pool only spins on busy
        # cores (a 32x build was slower with it).
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

        self.tokenizer = WordPiece(self.vocab, self.lowercase)

    def work(self, record: TextShard):
        working_on(f"the instance stage, text shard {record.stem}")
        from bertdata.instances.create import create_instances, generation_attrs

        documents = None
        if self.shard_sinks:  # whatever the phases: Megatron's pairs hold sentences, not instances
            documents = self._tokenize(record)
            for sink in self.shard_sinks:
                yield sink.take(record, documents)
            if documents is None:
                yield Counts({"skipped_empty_text_shards": 1})
                return
        for phase in self.phases:
            cfg, out = phase.cfg, phase.shards
            sinks = [sink for sink in phase.sinks if sink.wants(record)]
            if out is None and not sinks:
                continue
            seed = cfg.random_seed if self.same_seed else derive_seed(cfg.random_seed, record.stem)
            names = () if out is None else out.format.file_names(record.stem, record.split, record.index)
            paths = [fsio.join(out.folder, name) for name in names]
            attrs = {**generation_attrs(self.vocab, cfg, self.lowercase, seed),
                     "source": record.stem + ".txt", "source_sha256": record.sha256,
                     "cleaning_rules": RULES_VERSION}
            stats = None if self.force or out is None else _reusable(out.format, paths, attrs)
            reused = stats is not None
            instances = None
            if not reused:
                if documents is None:
                    documents = self._tokenize(record)
                    if documents is None:
                        yield Counts({"skipped_empty_text_shards": 1})
                        return
                instances = create_instances(documents, self.vocab, cfg, seed)
                stats = {"documents": documents.num_documents, "sentences": documents.num_sentences,
                         "tokens": documents.num_tokens, "instances": len(instances),
                         "random_next": int(instances.random_next[:len(instances)].sum())}
                if out is not None:
                    with contextlib.ExitStack() as stack:
                        local = [stack.enter_context(fsio.local_output(path)) for path in paths]
                        out.format.write(local, instances, {**attrs, **stats}, helper_thread=self.helper_threads)
                        with open(local[0], "rb") as f:  # here, not read back from a store
                            sha = file_sha256(f)
            for sink in sinks:
                yield sink.take(record, _batches(instances, out, paths), self.vocab.tokens)
            del instances
            if out is not None:
                if reused:
                    with fsio.open_file(paths[0]) as f:
                        sha = file_sha256(f)
                yield HDF5Shard(out.folder, names[0], record.stem + ".txt", seed, stats["documents"],
                                stats["sentences"], stats["tokens"], stats["instances"], stats["random_next"], sha,
                                reused)

    def _tokenize(self, record: TextShard):
        """The text shard's Documents, or None when every sentence tokenized to nothing (e.g. only
        symbols out of vocab)."""
        from bertdata.instances.documents import EmptyShard, read_documents

        with fsio.local_input(record.path) as local:
            try:
                return read_documents(local, self.tokenizer)
            except EmptyShard:
                return None


def _batches(instances, out: ShardOutput | None, paths: list[str]):
    """The shard's instances as batches of the six arrays: made now, or read back from the shard
    files an earlier run wrote."""
    from bertdata.instances.schema import FIELDS

    if instances is not None:
        for start in range(0, len(instances), SPILL_ROWS):
            yield {name: instances.array(name, start, start + SPILL_ROWS) for name in FIELDS}
        return
    with contextlib.ExitStack() as stack:
        yield from out.format.read([stack.enter_context(fsio.local_input(path)) for path in paths])


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
    """TextShard records -> per phase, an HDF5Shard record (the shard's files, whatever their
    format) and/or what its sinks take (LDDL's ShardRuns, of training shards); once per text
    shard, what `shard_sinks` take (Megatron's MegatronPart). `helper_threads`: whether workers
    have a spare core to compress on."""

    def __init__(self, vocab: Vocab, phases: list[PhaseOutput], lowercase: bool,
                 same_seed_per_shard: bool, force: bool = False, shard_sinks: tuple[ShardSink, ...] = (),
                 helper_threads: bool = True):
        super().__init__()
        self.fn = _MakeInstances(vocab, phases, lowercase, same_seed_per_shard, force, shard_sinks, helper_threads)

    def expand(self, records):
        return (
            records
            | "SpreadShards" >> Spread()
            | "MakeInstances" >> beam.ParDo(self.fn)
        )

