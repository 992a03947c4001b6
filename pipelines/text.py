"""The text stage: dump (and books) -> clean sentence text shards, as composite transforms, and
the stage that runs them (its folders, reuse and manifest).

Documents reach their shard through run files (bertdata.text.spill), not through the
runner's shuffle: Beam's local runner keeps shuffled data in the launcher's memory,
and every byte of it would also cross the launcher's data plane, one process for all
workers. Only small records (where a run's blocks lie, counts) travel through Beam, down
one linear chain (see bertdata.pipelines.records for why).
"""

from __future__ import annotations

import contextlib
import functools
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass

import apache_beam as beam

from bertdata.text.articles import count_dict, merge_counts, page_document, sentence_counts
from bertdata.text.books import book_document
from bertdata.config import TextConfig
from bertdata.text.shards import TextShard, shard_stem, text_folder, assign, fewer_shards, render_shard
from bertdata.text.spill import Run, RunBuffer, merge_blocks, run_name
from bertdata.text.wikidump import Page, iter_pages
from bertdata.text.multistream import iter_pages_in_ranges
from bertdata.manifest import MANIFEST
from bertdata.pipelines.cleanup import remove_leftovers, remove_temporaries
from bertdata.pipelines.manifests import Provenance, write_text_manifest
from bertdata.pipelines.records import Counts, Gather, ShardJob, Spread, StageRecords, StepDoFn, TextPlan
from bertdata.pipelines.resume import reusable_text_stage, text_stage_folders
from bertdata.pipelines.runtime import fsio, progress
from bertdata.pipelines.runtime.pool import working_on
from bertdata.pipelines.runtime.runners import spare_cores
from bertdata.pipelines.stage import BuildInputs, Decision, Stage
from bertdata.pipelines.work import WorkItem, open_raw, work_groups, work_items

RUNS = "runs"
# Counts of pages skipped for their namespace, by number: "skipped_namespace" says how many,
# these say which, so the summary can name them as the dump does.
NAMESPACE_PREFIX = "outside_namespace_"


def runs_folder(work_dir: str) -> str:
    return fsio.join(work_dir, RUNS)


def _documents(item: WorkItem, cfg: TextConfig, splitter, markup, counts: Counter, namespaces: Counter,
               range_pages: Iterator[Iterator[Page]]):
    """(shard, document) for every document of the item; a dump range's pages are the next of
    `range_pages`."""
    if item.kind == "book":
        with open_raw(item.path) as f:
            doc = book_document(item.path, f.read(), splitter, counts)
        docs = [] if doc is None else [(f"book:{fsio.split(item.path)[1]}", doc)]
    else:
        pages = (iter_pages(item.path, open_raw, max_page_chars=cfg.max_page_chars) if item.start is None
                 else next(range_pages))
        docs = ((str(page.page_id), page_document(page, splitter, cfg.max_page_chars, counts,
                                                  keep_lists=cfg.keep_lists, markup=markup,
                                                  namespaces=namespaces)) for page in pages)
    for key, doc in docs:
        if doc is not None:
            yield assign(key, cfg.training_shards, cfg.test_shards, cfg.test_fraction), doc


def _describe(items: list[WorkItem]) -> str:
    dump = [item for item in items if item.kind == "dump"]
    books = len(items) - len(dump)
    parts = []
    if dump:
        ranges = [item for item in dump if item.start is not None]
        parts.append(f"{fsio.split(dump[0].path)[1]} bytes {ranges[0].start:,}-{ranges[-1].end:,}" if ranges
                     else f"all of {fsio.split(dump[0].path)[1]}")
    if books:
        parts.append(f"{books} book{'s' if books > 1 else ''}")
    return " and ".join(parts)


class _CleanAndSpill(fsio.FilesDoFn):
    """A work group -> its documents cleaned, split into sentences and written as runs;
    yields a Run record per run and one Counts record."""

    def __init__(self, cfg: TextConfig, work_dir: str, splitter, markup, prefetch: bool):
        super().__init__()
        self.cfg, self.work_dir, self.splitter, self.markup, self.prefetch = cfg, work_dir, splitter, markup, prefetch

    def process(self, group: tuple[int, list[WorkItem]]):
        number, items = group
        working_on(f"the text stage, work group {number} ({_describe(items)})")
        counts: Counter = Counter()
        namespaces: Counter = Counter()
        buffer = RunBuffer()
        sequence = 0
        # The group's dump ranges read as one run, decoded back to back (see iter_pages_in_ranges).
        ranged = [item for item in items if item.kind == "dump" and item.start is not None]
        range_pages = iter_pages_in_ranges(ranged[0].path if ranged else "", [(i.start, i.end) for i in ranged],
                                           open_raw, max_page_chars=self.cfg.max_page_chars, prefetch=self.prefetch)
        with contextlib.closing(range_pages):
            for item in items:
                for shard, doc in _documents(item, self.cfg, self.splitter, self.markup, counts, namespaces,
                                             range_pages):
                    if buffer.add(shard, doc):
                        yield self._write(buffer, number, sequence)
                        sequence += 1
                if item.marker is not None:
                    progress.mark_done(self.work_dir, item.marker)
        if buffer:
            yield self._write(buffer, number, sequence)
        counts.update({f"{NAMESPACE_PREFIX}{n}": c for n, c in namespaces.items()})
        yield Counts(count_dict(counts))

    def _write(self, buffer: RunBuffer, group: int, sequence: int) -> Run:
        # The name depends only on the plan, so a retried group overwrites its own runs.
        path = fsio.join(runs_folder(self.work_dir), run_name(group, sequence))
        with fsio.scratch_writer(path) as f:
            blocks = buffer.write_to(f)
        return Run(path, (group, sequence), blocks)


def plan_shards(records: list, cfg: TextConfig, output: str, dataset: str) -> list:
    """Gathered Run and Counts records -> the TextPlan, the summed Counts, and a ShardJob per
    text shard with documents."""
    runs = sorted((r for r in records if isinstance(r, Run)), key=lambda r: r.order)
    documents: Counter = Counter()
    for run in runs:
        for (split, _), (_, _, count) in run.blocks.items():
            documents[split] += count
    requested = {"training": cfg.training_shards, "test": cfg.test_shards}
    shards = dict(requested) if cfg.fixed_shards else {
        split: fewer_shards(n, documents[split], cfg.min_shard_documents) for split, n in requested.items()}
    folder = fsio.join(output, text_folder(shards["training"], shards["test"], cfg.test_fraction), dataset)
    blocks = defaultdict(list)
    for run in runs:
        for (split, index), (offset, length, _) in run.blocks.items():
            # Halving keeps shards nested: shard index of n is shard index >> k of n >> k.
            blocks[(split, index * shards[split] // requested[split])].append((run.path, offset, length))
    return [TextPlan(folder, shards["training"], shards["test"]),
            Counts(merge_counts(r.values for r in records if isinstance(r, Counts))),
            *(ShardJob(folder, split, index, tuple(b)) for (split, index), b in sorted(blocks.items()))]


class _WriteTextShard(StepDoFn):
    """A ShardJob -> the text shard, written; yields its TextShard record, and a Counts
    record correcting the totals when a page id occurred more than once."""

    takes = (ShardJob,)

    def __init__(self, dataset: str):
        super().__init__()
        self.dataset = dataset

    def work(self, job: ShardJob):
        stem = shard_stem(self.dataset, job.split, job.index)
        working_on(f"the text stage, writing {stem}.txt")
        documents, repeated = merge_blocks(fsio.read_range(*block) for block in job.blocks)
        path = fsio.join(job.folder, stem + ".txt")
        data, record = render_shard(documents, stem, job.split, job.index, path)
        fsio.write_bytes(path, data)
        yield record
        if repeated:
            dropped = sentence_counts(s for doc in repeated for s in doc.sentences)
            yield Counts({"skipped_duplicate_id": len(repeated), "articles": -len(repeated),
                          **{k: -v for k, v in dropped.items()}})


class DumpToTextShards(beam.PTransform):
    """Work groups (lists of WorkItems) -> written text shards (TextShard records), the
    TextPlan and one Counts record. Run files and progress markers go to `work_dir`;
    `splitter` and `markup` are the dump's language's; `prefetch`: whether workers have a
    spare core to decompress on."""

    def __init__(self, groups: list[list[WorkItem]], cfg: TextConfig, output: str, dataset: str, work_dir: str,
                 splitter, markup, prefetch: bool = True):
        super().__init__()
        self.groups, self.cfg, self.output, self.dataset, self.work_dir = groups, cfg, output, dataset, work_dir
        self.splitter, self.markup, self.prefetch = splitter, markup, prefetch

    def expand(self, pbegin):
        return (
            pbegin
            # Spread deals them out: Create's own reshuffle would be a stage more, to no end.
            | "WorkGroups" >> beam.Create(list(enumerate(self.groups)), reshuffle=False)
            | "SpreadGroups" >> Spread()
            | "CleanAndSpill" >> beam.ParDo(_CleanAndSpill(self.cfg, self.work_dir, self.splitter, self.markup,
                                                          self.prefetch))
            | "GatherRuns" >> Gather()
            | "PlanShards" >> beam.FlatMap(plan_shards, self.cfg, self.output, self.dataset)
            | "SpreadShards" >> Spread()
            | "WriteTextShards" >> beam.ParDo(_WriteTextShard(self.dataset))
        )


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
                                   f"{len(reuse.of_kind(TextShard))} text shards", reuse)
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

    def clean_up(self) -> None:
        remove_temporaries(self.inputs.work_dir)  # the runs' disk is free before instances start
