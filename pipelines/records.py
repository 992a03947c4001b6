"""The records several stages share (the rest live with the one stage that makes and reads them,
in bertdata.pipelines.stages), the barrier that gathers every record, and the DoFn base that
passes on what a step does not take.

The DaskRunner computes only the last transform's ancestors, drops tagged outputs and
finish_bundle output, and collects no metrics, so what a later stage or a manifest needs
travels down the one chain beside the shards; a stage's end gathers it all in one element
(StageRecords), which bertdata.pipelines.chain hands to the next stage.
"""

from __future__ import annotations

import random
import sys
from collections.abc import Iterator
from dataclasses import dataclass

import apache_beam as beam

from bertdata.text.articles import merge_counts
from bertdata.formats import lddl
from bertdata.text.shards import TextShard
from bertdata.pipelines.runtime import fsio


@dataclass(frozen=True)
class Counts:
    """Counters travelling through the pipeline as data (summed at the end)."""

    values: dict


@dataclass(frozen=True)
class TextPlan:
    """Where the text shards go and how many there are, decided once every document is
    counted (default counts shrink until shards are big enough for next-sentence pairs)."""

    folder: str
    training_shards: int
    test_shards: int


@dataclass(frozen=True)
class StageRecords:
    """What the stages so far handed on: the text stage's plan, every other record (text shards,
    LDDL runs, Megatron parts, ...), and the counts summed so far."""

    plan: TextPlan | None
    records: tuple
    counts: dict

    @classmethod
    def of(cls, records: list) -> StageRecords:
        return cls(next((r for r in records if isinstance(r, TextPlan)), None),
                   tuple(r for r in records if not isinstance(r, (TextPlan, Counts))),
                   merge_counts(r.values for r in records if isinstance(r, Counts)))

    def of_kind(self, kinds: type | tuple[type, ...]) -> list:
        return [r for r in self.records if isinstance(r, kinds)]

    def without(self, kinds: tuple[type, ...]) -> StageRecords:
        return StageRecords(self.plan, tuple(r for r in self.records if not isinstance(r, kinds)), self.counts)

    def elements(self) -> list:
        """The records again, one element each, for the next stage to spread over workers: the
        largest text shards first, so that the last to finish, on whichever worker, are small
        (and the local runner, which deals elements out in turn, gives workers near-equal work)."""
        largest_first = sorted(self.records, key=lambda r: -r.bytes if isinstance(r, TextShard) else 0)
        return [*([self.plan] if self.plan is not None else []), *largest_first, Counts(self.counts)]


class StepDoFn(fsio.FilesDoFn):
    """A step of a stage: works on the records of the kinds it `takes` and passes every other
    record on as it is, so counts and other stages' records reach the stage's end whatever the
    step does with its own."""

    takes: tuple[type, ...] = ()

    def process(self, record):
        if isinstance(record, self.takes):
            yield from self.work(record)
        else:
            yield record

    def work(self, record) -> Iterator:
        raise NotImplementedError


# Records two stages share: made by the instance stage for a later one. The records only one
# stage makes and reads live in its module (bertdata.pipelines.stages).

@dataclass(frozen=True)
class ShardRuns:
    """The runs of one text shard (by its index among the training shards) for one phase, for
    the LDDL stage of that phase (bertdata.pipelines.stages.lddl)."""

    folder: str
    index: int
    runs: tuple[lddl.Run, ...]


@dataclass(frozen=True)
class SplitPart:
    """One text shard's part of a format cut per split: its format's description of the files
    it wrote under the work folder (None: the shard had no tokens), and the shard's counts, for
    that format's stage (bertdata.pipelines.stages.documents)."""

    format: str
    split: str
    index: int
    source: str
    source_sha256: str
    part: object
    counts: dict

    def source_entry(self) -> dict:
        """Its text shard, as the folder's manifest records it (see documents.sources)."""
        return {"split": self.split, "file": self.source, "sha256": self.source_sha256}


class Gather(beam.PTransform):
    """All records of a PCollection as one element, a list: a barrier. Only small records
    may pass: they all meet in one process."""

    def expand(self, records):
        return (records
                | "OneKey" >> beam.Map(lambda r: (None, r))
                | "GroupAll" >> beam.GroupByKey()
                | "Values" >> beam.Map(lambda kv: list(kv[1])))


class _Number(beam.DoFn):
    """(number, element): consecutive numbers within a bundle, from a random start. After a
    barrier one bundle holds every element, which are then dealt out exactly in turn; elements
    already spread one to a bundle (from a Create) get random numbers."""

    def start_bundle(self):
        self.position = random.randrange(1 << 30)

    def process(self, element):
        yield self.position, element
        self.position += 1


class Spread(beam.PTransform):
    """The elements dealt out over the workers, as beam.Reshuffle does on most runners. Beam's
    DaskRunner makes Reshuffle a no-op, so what a barrier hands on would stay in one partition,
    on one worker; there the elements are numbered and grouped by number instead, which deals
    them into the bag's partitions by number, and Dask gives those to whichever worker is free.
    Which worker makes a shard never changes its bytes."""

    def expand(self, pcoll):
        # A DaskRunner's module is imported by whoever made it; importing it here would load
        # Dask, which takes a while, into every build.
        dask = sys.modules.get("apache_beam.runners.dask.dask_runner")
        if dask is None or not isinstance(pcoll.pipeline.runner, dask.DaskRunner):
            return pcoll | "Reshuffle" >> beam.Reshuffle()
        return (pcoll
                | "Number" >> beam.ParDo(_Number())
                | "Deal" >> beam.GroupByKey()
                | "Values" >> beam.FlatMap(lambda kv: kv[1]))

