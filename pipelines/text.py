"""Dump (and books) -> clean sentence text shards, as composite transforms.

Documents reach their shard through run files (bertdata.spill), not through the
runner's shuffle: Beam's local runner keeps shuffled data in the launcher's memory,
and every byte of it would also cross the launcher's data plane, one process for all
workers. Only small records (where a run's blocks lie, counts) travel through Beam.

The flow is one linear chain, with counts travelling beside the other records: the
DaskRunner computes only the last transform's ancestors, drops tagged outputs and
finish_bundle output, and collects no metrics, so everything the manifest needs must
reach the end of the chain as data.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass

import apache_beam as beam
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

from bertdata.articles import count_dict, merge_counts, page_document, sentence_counts
from bertdata.books import book_document
from bertdata.config import TextConfig
from bertdata.layout import shard_stem
from bertdata.sharding import assign, render_shard
from bertdata.spill import Run, RunBuffer, merge_blocks, run_name
from bertdata.wikidump import iter_pages, iter_pages_in_range
from pipelines import fsio, progress

SPILL = ".spill"


@dataclass(frozen=True)
class Counts:
    """Counters travelling through the pipeline as data (summed at the end)."""

    values: dict


@dataclass(frozen=True)
class WorkItem:
    """What one worker reads in one piece: a byte range of a multistream dump (the whole
    dump when `start` is None), or one book file."""

    kind: str  # "dump" or "book"
    path: str
    start: int | None = None
    end: int | None = None

    @property
    def marker(self) -> tuple | None:
        """The progress marker of a dump range, None for anything else."""
        return (self.start, self.end) if self.kind == "dump" and self.start is not None else None


def open_raw(path: str):
    # FileSystems would decompress .bz2 by its extension; the readers need the raw bytes.
    return FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED)


def spill_folder(text_dir: str) -> str:
    return fsio.join(text_dir, SPILL)


def _documents(item: WorkItem, cfg: TextConfig, splitter, counts: Counter):
    """(shard, document) for every document of the item."""
    if item.kind == "book":
        with open_raw(item.path) as f:
            doc = book_document(item.path, f.read(), splitter, counts)
        docs = [] if doc is None else [(f"book:{FileSystems.split(item.path)[1]}", doc)]
    else:
        pages = (iter_pages(item.path, open_raw) if item.start is None
                 else iter_pages_in_range(item.path, item.start, item.end, open_raw))
        docs = ((str(page.page_id), page_document(page, splitter, cfg.max_page_chars, counts,
                                                  keep_lists=cfg.keep_lists)) for page in pages)
    for key, doc in docs:
        if doc is not None:
            yield assign(key, cfg.training_shards, cfg.test_shards, cfg.test_fraction), doc


class _CleanAndSpill(beam.DoFn):
    """A work group -> its documents cleaned, split into sentences and written as runs;
    yields a Run record per run and one Counts record."""

    def __init__(self, cfg: TextConfig, text_dir: str):
        self.cfg, self.text_dir = cfg, text_dir

    def setup(self):
        from bertdata.sentences import SentenceSplitter

        self.splitter = SentenceSplitter()

    def process(self, group: tuple[int, list[WorkItem]]):
        number, items = group
        counts: Counter = Counter()
        buffer = RunBuffer()
        sequence = 0
        for item in items:
            for shard, doc in _documents(item, self.cfg, self.splitter, counts):
                if buffer.add(shard, doc):
                    yield self._write(buffer, number, sequence)
                    sequence += 1
            if item.marker is not None:
                progress.mark_done(self.text_dir, item.marker)
        if buffer:
            yield self._write(buffer, number, sequence)
        yield Counts(count_dict(counts))

    def _write(self, buffer: RunBuffer, group: int, sequence: int) -> Run:
        # The name depends only on the plan, so a retried group overwrites its own runs.
        path = fsio.join(spill_folder(self.text_dir), run_name(group, sequence))
        with fsio.atomic_writer(path) as f:
            blocks = buffer.write_to(f)
        return Run(path, (group, sequence), blocks)


def plan_shards(records: list) -> list:
    """Gathered Run and Counts records -> one (shard, [(path, offset, length)...]) element per
    shard with documents, its blocks in run (dump) order, and the summed Counts."""
    blocks = defaultdict(list)
    for run in sorted((r for r in records if isinstance(r, Run)), key=lambda r: r.order):
        for shard, (offset, length) in run.blocks.items():
            blocks[shard].append((run.path, offset, length))
    counts = Counts(merge_counts(r.values for r in records if isinstance(r, Counts)))
    return [counts, *sorted(blocks.items())]


class _WriteTextShard(beam.DoFn):
    """(shard, its blocks) -> the text shard, written; yields its TextShard record, and a
    Counts record correcting the totals when a page id occurred more than once."""

    def __init__(self, folder: str, dataset: str):
        self.folder = folder
        self.dataset = dataset

    def process(self, element):
        if isinstance(element, Counts):
            yield element
            return
        (split, index), blocks = element
        documents, repeated = merge_blocks(fsio.read_range(*block) for block in blocks)
        stem = shard_stem(self.dataset, split, index)
        path = fsio.join(self.folder, stem + ".txt")
        data, record = render_shard(documents, stem, split, index, path)
        fsio.write_bytes(path, data)
        yield record
        if repeated:
            dropped = sentence_counts(s for doc in repeated for s in doc.sentences)
            yield Counts({"skipped_duplicate_id": len(repeated), "articles": -len(repeated),
                          **{k: -v for k, v in dropped.items()}})


class Gather(beam.PTransform):
    """All records of a PCollection as one element: the barrier that ends a stage.
    Only small records may pass: they all meet in one process."""

    def expand(self, records):
        return (records
                | "OneKey" >> beam.Map(lambda r: (None, r))
                | "GroupAll" >> beam.GroupByKey()
                | "Values" >> beam.Map(lambda kv: list(kv[1])))


class DumpToTextShards(beam.PTransform):
    """Work groups (lists of WorkItems) -> written text shards (TextShard records) and
    one Counts record."""

    def __init__(self, groups: list[list[WorkItem]], cfg: TextConfig, folder: str, dataset: str):
        super().__init__()
        self.groups, self.cfg, self.folder, self.dataset = groups, cfg, folder, dataset

    def expand(self, pbegin):
        return (
            pbegin
            | "WorkGroups" >> beam.Create(list(enumerate(self.groups)))
            | "SpreadGroups" >> beam.Reshuffle()
            | "CleanAndSpill" >> beam.ParDo(_CleanAndSpill(self.cfg, self.folder))
            | "GatherRuns" >> Gather()
            | "PlanShards" >> beam.FlatMap(plan_shards)
            | "SpreadShards" >> beam.Reshuffle()
            | "WriteTextShards" >> beam.ParDo(_WriteTextShard(self.folder, self.dataset))
        )
