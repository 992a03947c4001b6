"""The small records that travel between the stages as data, and the barrier that gathers them.

The DaskRunner computes only the last transform's ancestors, drops tagged outputs and
finish_bundle output, and collects no metrics, so what a later stage or a manifest needs
travels down the one chain beside the shards; a stage's end gathers it all in one element.
"""

from __future__ import annotations

import random
import sys
from dataclasses import dataclass

import apache_beam as beam

from bertdata.text.articles import merge_counts


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
    """What a finished stage handed on, by kind: the text stage's plan, the shards the stage
    wrote (TextShard or HDF5Shard records), and the counts summed so far."""

    plan: TextPlan
    shards: tuple
    counts: dict

    @classmethod
    def of(cls, records: list, shard_type: type) -> StageRecords:
        return cls(next(r for r in records if isinstance(r, TextPlan)),
                   tuple(r for r in records if isinstance(r, shard_type)),
                   merge_counts(r.values for r in records if isinstance(r, Counts)))

    def records(self) -> list:
        """The records again, one element each, for the next stage to spread over workers: the
        largest text shards first, so that the last to finish, on whichever worker, are small
        (and the local runner, which deals elements out in turn, gives workers near-equal work)."""
        largest_first = sorted(self.shards, key=lambda r: -r.bytes)
        return [self.plan, *largest_first, Counts(self.counts)]


class Gather(beam.PTransform):
    """All records of a PCollection as one element, a list: a barrier. Only small records
    may pass: they all meet in one process."""

    def expand(self, records):
        return (records
                | "OneKey" >> beam.Map(lambda r: (None, r))
                | "GroupAll" >> beam.GroupByKey()
                | "Values" >> beam.Map(lambda kv: list(kv[1])))


class GatherStage(beam.PTransform):
    """The records that end a stage as one StageRecords element; `shard_type`: the stage's shards."""

    def __init__(self, shard_type: type):
        super().__init__()
        self.shard_type = shard_type

    def expand(self, records):
        return (records
                | "Gather" >> Gather()
                | "ByKind" >> beam.Map(StageRecords.of, self.shard_type))


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

