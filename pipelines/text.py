"""Dump -> clean sentence text shards, as composite transforms.

The flow is one linear chain, with counts travelling beside the documents as
records keyed COUNTS_KEY: the DaskRunner computes only the last transform's
ancestors, drops tagged outputs and finish_bundle output, and collects no metrics,
so everything the manifest needs must reach the end of the chain as data.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import apache_beam as beam
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

from bertdata.articles import count_dict, merge_counts, page_document
from bertdata.books import book_document
from bertdata.config import TextConfig
from bertdata.layout import shard_stem
from bertdata.sharding import assign, render_shard
from bertdata.wikidump import iter_pages, iter_pages_in_range
from pipelines import fsio, progress

COUNTS_KEY = ("~counts", -1)
# Pages per element when a single-stream dump is read in one piece: big enough to amortise
# per-element cost, small enough that cleaning still spreads across workers.
PAGES_PER_BATCH = 32


@dataclass(frozen=True)
class Counts:
    """Counters travelling through the pipeline as data (summed at the end)."""

    values: dict


def open_raw(path: str):
    # FileSystems would decompress .bz2 by its extension; the readers need the raw bytes.
    return FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED)


def _page_batches(dump: str, item: tuple[int | None, int | None]):
    start, end = item
    pages = iter_pages(dump, open_raw) if start is None else iter_pages_in_range(dump, start, end, open_raw)
    batch = []
    for page in pages:
        batch.append(page)
        if len(batch) == PAGES_PER_BATCH:
            yield batch
            batch = []
    if batch:
        yield batch


class _ReadPages(beam.DoFn):
    """A whole single-stream dump -> batches of pages, spread over workers for cleaning."""

    def __init__(self, dump: str):
        self.dump = dump

    def process(self, item):
        yield from _page_batches(self.dump, item)


class _CleanPages(beam.DoFn):
    def __init__(self, cfg: TextConfig):
        self.cfg = cfg

    def setup(self):
        from bertdata.sentences import SentenceSplitter

        self.splitter = SentenceSplitter()

    def process(self, batch):
        counts: Counter = Counter()
        yield from self._clean(batch, counts)
        yield COUNTS_KEY, Counts(count_dict(counts))

    def _clean(self, batch, counts: Counter):
        for page in batch:
            doc = page_document(page, self.splitter, self.cfg.max_page_chars, counts)
            if doc is not None:
                yield self._key(str(page.page_id)), doc

    def _key(self, doc_key: str) -> tuple[str, int]:
        c = self.cfg
        return assign(doc_key, c.training_shards, c.test_shards, c.test_fraction)


class _ReadAndCleanPages(_CleanPages):
    """A byte range of a multistream dump -> documents, in one step: workers read their
    own ranges, so raw pages never travel between processes."""

    def __init__(self, cfg: TextConfig, dump: str, folder: str):
        super().__init__(cfg)
        self.dump, self.folder = dump, folder

    def process(self, item):
        counts: Counter = Counter()
        for batch in _page_batches(self.dump, item):
            yield from self._clean(batch, counts)
        yield COUNTS_KEY, Counts(count_dict(counts))
        progress.mark_done(self.folder, item)


class _CleanBooks(_CleanPages):
    def process(self, path):
        counts: Counter = Counter()
        name = FileSystems.split(path)[1]
        with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as f:
            doc = book_document(path, f.read(), self.splitter, counts)
        if doc is not None:
            yield self._key(f"book:{name}"), doc
        yield COUNTS_KEY, Counts(count_dict(counts))


class _WriteTextShard(beam.DoFn):
    def __init__(self, folder: str, dataset: str):
        self.folder = folder
        self.dataset = dataset

    def process(self, kv):
        key, values = kv
        if key == COUNTS_KEY:
            yield Counts(merge_counts(c.values for c in values))
            return
        split, index = key
        stem = shard_stem(self.dataset, split, index)
        path = fsio.join(self.folder, stem + ".txt")
        data, record = render_shard(list(values), stem, split, index, path)
        fsio.write_bytes(path, data)
        yield record


class DumpToTextShards(beam.PTransform):
    """Work items (byte ranges of the dump, or (None, None) for the whole file) and book
    paths -> written text shards (TextShard records) and one Counts record."""

    def __init__(self, dump: str, work_items: list, books: list[str], cfg: TextConfig,
                 folder: str, dataset: str):
        super().__init__()
        self.dump, self.work_items, self.books = dump, work_items, books
        self.cfg, self.folder, self.dataset = cfg, folder, dataset

    def expand(self, pbegin):
        items = pbegin | "DumpRanges" >> beam.Create(self.work_items) | "SpreadRanges" >> beam.Reshuffle()
        if self.work_items == [(None, None)]:
            documents = (
                items
                | "ReadPages" >> beam.ParDo(_ReadPages(self.dump))
                | "SpreadPages" >> beam.Reshuffle()
                | "CleanAndSplit" >> beam.ParDo(_CleanPages(self.cfg))
            )
        else:
            documents = items | "ReadCleanAndSplit" >> beam.ParDo(_ReadAndCleanPages(self.cfg, self.dump, self.folder))
        if self.books:
            books = (
                pbegin
                | "BookFiles" >> beam.Create(self.books)
                | "SpreadBooks" >> beam.Reshuffle()
                | "CleanBooks" >> beam.ParDo(_CleanBooks(self.cfg))
            )
            documents = (documents, books) | "WikiAndBooks" >> beam.Flatten()
        return (
            documents
            | "GroupByShard" >> beam.GroupByKey()
            | "WriteTextShards" >> beam.ParDo(_WriteTextShard(self.folder, self.dataset))
        )
