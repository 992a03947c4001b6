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
from dataclasses import dataclass, replace

import apache_beam as beam

from bertdata.corpora.mix import Tally, cuts, draw
from bertdata.corpora.read import copies, corpus_key, file_documents
from bertdata.text.articles import BOOKS_SOURCE, Document, count_dict, merge_counts, page_document, sentence_counts
from bertdata.text.books import book_document
from bertdata.config import TextConfig
from bertdata.text.shards import IDS_SUFFIX, TextShard, shard_stem, text_folder, assign, fewer_shards, render_ids, render_shard
from bertdata.text.spill import Run, RunBuffer, merge_blocks, run_name
from bertdata.text.wikidump import Page, iter_pages
from bertdata.text.multistream import iter_pages_in_ranges
from bertdata.errors import BertdataError
from bertdata.manifest import MANIFEST
from bertdata.pipelines.stages.dedup import AUDIT, MatchBands, Screen, Screening, plan_bands, plan_removals
from bertdata.pipelines.cleanup import remove_leftovers, remove_temporaries
from bertdata.pipelines.manifests import Provenance, write_text_manifest
from bertdata.pipelines.records import Counts, Gather, Spread, StageRecords, StepDoFn, TextPlan
from bertdata.pipelines.resume import reusable_text_stage, text_stage_folders
from bertdata.pipelines.runtime import fsio, progress
from bertdata.pipelines.runtime.pool import working_on
from bertdata.pipelines.runtime.runners import spare_cores
from bertdata.pipelines.stage import BuildInputs, Decision, Folders, Stage
from bertdata.pipelines.work import WorkItem, open_raw, work_groups, work_items

RUNS = "runs"
# Counts of pages skipped for their namespace, by number: "skipped_namespace" says how many,
# these say which, so the summary can name them as the dump does.
NAMESPACE_PREFIX = "outside_namespace_"


@dataclass(frozen=True)
class ShardJob:
    """One text shard to write from its blocks, in run (dump) order."""

    folder: str
    split: str
    index: int
    blocks: tuple  # (run path, offset, length), ...
    mix: tuple = ()  # a recipe's: (corpus, first bin it does not keep) for each corpus (bertdata.corpora.mix)
    removed: tuple = ()  # keys (corpus rank, id) of the documents dedup removes, every copy of each


@dataclass(frozen=True)
class MixTally:
    """A work group's tokens and documents per bin of a recipe's mix, for each corpus:
    {corpus: (bins, tokens, documents)} (bertdata.corpora.mix.Tally.sparse)."""

    tallies: dict


def runs_folder(work_dir: str) -> str:
    return fsio.join(work_dir, RUNS)


@dataclass(frozen=True)
class RecipeReading:
    """What the text stage reads a recipe's corpora with: the recipe, a sentence splitter per
    language, and, where its mix or a min_tokens counts tokens, the tokenizer that counts them
    (--tokenizer's file, else the vocab)."""

    recipe: object  # bertdata.corpora.recipe.Recipe
    splitters: dict  # language -> splitter
    tokenizer: object = None  # the TokenizerSpec that counts (BuildInputs'), where one counts

    @property
    def counts_tokens(self) -> bool:
        return self.tokenizer is not None

    def token_counter(self):
        """A function from a document's text (its sentences, as a text shard holds them) to its tokens."""
        if not self.counts_tokens:
            return None
        import numpy as np

        tokenizer = self.tokenizer.open()

        def count(text: bytes) -> int:
            # Its sentences tokenized as one document, as the instance stage tokenizes them.
            starts = np.concatenate(([0], np.flatnonzero(np.frombuffer(text, dtype=np.uint8) == 10) + 1))
            return int(tokenizer.encode_joined(text, starts.astype(np.int64),
                                               documents=np.zeros(len(starts), np.int64))[1].sum())

        return count


def _documents(item: WorkItem, cfg: TextConfig, splitter, markup, counts: Counter, namespaces: Counter,
               range_pages: Iterator[Iterator[Page]], recipe: RecipeReading | None = None, count_tokens=None):
    """(shard, document) for every document of the item; a dump range's pages are the next of
    `range_pages`."""
    if item.kind == "book":
        with open_raw(item.path) as f:
            doc = book_document(item.path, f.read(), splitter, counts)
        docs = [] if doc is None else [(f"book:{fsio.split(item.path)[1]}", doc)]
    elif item.kind == "corpus":
        spec = next(c for c in recipe.recipe.corpora if c.name == item.corpus)
        docs = file_documents(spec, recipe.recipe.names.index(spec.name), item.path, open_raw,
                              recipe.splitters[spec.language], counts, count_tokens, item.start, item.end)
    else:
        pages = (iter_pages(item.path, open_raw, max_page_chars=cfg.max_page_chars) if item.start is None
                 else next(range_pages))
        # A recipe's text shards count their sentences as they are written, once mixed.
        page_counts = counts if recipe is None else Counter()
        docs = ((str(page.page_id), page_document(page, splitter, cfg.max_page_chars, page_counts,
                                                  keep_lists=cfg.keep_lists, markup=markup,
                                                  namespaces=namespaces)) for page in pages)
        if recipe is not None:
            docs = _recipe_pages(docs, recipe, counts, page_counts, count_tokens)
    for key, doc in docs:
        if doc is not None:
            yield assign(key, cfg.training_shards, cfg.test_shards, cfg.test_fraction), doc


def _recipe_pages(docs, recipe: RecipeReading, counts: Counter, page_counts: Counter, count_tokens):
    """A recipe's wikipedia corpus's articles, keyed by its rank and name like every corpus's;
    of what the cleaner counted (`page_counts`), the pages, the articles and why pages were skipped."""
    from bertdata.corpora.wikipedia import Wikipedia

    spec = next(c for c in recipe.recipe.corpora if c.type == Wikipedia.name)
    rank = recipe.recipe.names.index(spec.name)
    for key, doc in docs:
        if doc is None:
            continue
        counts[corpus_key(spec.name, "read")] += 1
        tokens = count_tokens(doc.text) if count_tokens is not None else 0
        if tokens < spec.min_tokens:
            counts[corpus_key(spec.name, "dropped_too_short")] += 1
            continue
        yield from copies(spec, f"{spec.name}/{key}", Document((rank, doc.key[1]), doc.packed, tokens))
    counts.update({k: v for k, v in page_counts.items() if k in ("pages", "articles") or k.startswith("skipped_")})


def _describe(items: list[WorkItem]) -> str:
    dump = [item for item in items if item.kind == "dump"]
    files = [item for item in items if item.kind == "corpus"]
    books = len(items) - len(dump) - len(files)
    parts = []
    if dump:
        ranges = [item for item in dump if item.start is not None]
        parts.append(f"{fsio.split(dump[0].path)[1]} bytes {ranges[0].start:,}-{ranges[-1].end:,}" if ranges
                     else f"all of {fsio.split(dump[0].path)[1]}")
    if books:
        parts.append(f"{books} book{'s' if books > 1 else ''}")
    if files:
        parts.append(f"{len(files)} file{'s' if len(files) > 1 else ''} of {', '.join(sorted({i.corpus for i in files}))}")
    return " and ".join(parts)


class _CleanAndSpill(fsio.FilesDoFn):
    """A work group -> its documents cleaned, split into sentences and written as runs;
    yields a Run record per run and one Counts record."""

    def __init__(self, cfg: TextConfig, work_dir: str, splitter, markup, prefetch: bool,
                 recipe: RecipeReading | None = None, screening: Screening | None = None):
        super().__init__()
        self.cfg, self.work_dir, self.splitter, self.markup, self.prefetch = cfg, work_dir, splitter, markup, prefetch
        self.recipe, self.screening = recipe, screening

    def setup(self):
        super().setup()
        self.count_tokens = self.recipe.token_counter() if self.recipe is not None else None

    def process(self, group: tuple[int, list[WorkItem]]):
        number, items = group
        working_on(f"the text stage, work group {number} ({_describe(items)})")
        counts: Counter = Counter()
        namespaces: Counter = Counter()
        buffer = RunBuffer()
        sequence = 0
        mix = self.recipe.recipe if self.recipe is not None and self.recipe.recipe.mix else None
        tallies: dict = {}
        screen = Screen(self.screening, self.work_dir, number) if self.screening is not None else None
        # The group's dump ranges read as one run, decoded back to back (see iter_pages_in_ranges).
        ranged = [item for item in items if item.kind == "dump" and item.start is not None]
        range_pages = iter_pages_in_ranges(ranged[0].path if ranged else "", [(i.start, i.end) for i in ranged],
                                           open_raw, max_page_chars=self.cfg.max_page_chars, prefetch=self.prefetch)
        with contextlib.closing(range_pages):
            for item in items:
                for shard, doc in _documents(item, self.cfg, self.splitter, self.markup, counts, namespaces,
                                             range_pages, self.recipe, self.count_tokens):
                    if screen is not None:
                        keep, made = screen.keeps(shard, doc)
                        yield from made
                        if not keep:
                            if self.recipe is None:
                                counts.update(_uncounted([doc]))
                            continue
                    if mix is not None:
                        name = mix.names[doc.key[0]]
                        if name not in tallies:
                            tallies[name] = Tally(mix.corpora[doc.key[0]].repeat)
                        tallies[name].add(place(mix.seed, name, doc.key), doc.tokens)
                    if buffer.add(shard, doc):
                        yield self._write(buffer, number, sequence)
                        sequence += 1
                if item.marker is not None:
                    progress.mark_done(self.work_dir, item.marker)
        if buffer:
            yield self._write(buffer, number, sequence)
        if screen is not None:
            yield from screen.close()
        counts.update({f"{NAMESPACE_PREFIX}{n}": c for n, c in namespaces.items()})
        if tallies:
            yield MixTally({name: tally.sparse() for name, tally in tallies.items()})
        yield Counts(count_dict(counts))

    def _write(self, buffer: RunBuffer, group: int, sequence: int) -> Run:
        # The name depends only on the plan, so a retried group overwrites its own runs.
        path = fsio.join(runs_folder(self.work_dir), run_name(group, sequence))
        with fsio.scratch_writer(path) as f:
            blocks = buffer.write_to(f)
        return Run(path, (group, sequence), blocks)


def plan_mix(records: list, recipe, removed: list = ()) -> tuple:
    """A recipe's corpora checked for documents, and its mix's cuts ((corpus, first bin not kept),
    ...; () without a mix), from the gathered Counts and MixTally records, less the documents
    dedup `removed` ((corpus, key, tokens) each)."""
    counts = merge_counts(r.values for r in records if isinstance(r, Counts))
    for spec in recipe.corpora:
        read = counts.get(corpus_key(spec.name, "read"), 0)
        dropped = {k.rsplit(":", 1)[1].removeprefix("dropped_"): v for k, v in counts.items()
                   if k.startswith(corpus_key(spec.name, "dropped_"))}
        if read - sum(dropped.values()) <= 0:
            said = ", ".join(f"{reason} {n:,}" for reason, n in sorted(dropped.items()) if n) or "none"
            raise BertdataError(f"{recipe.path}: corpus {spec.name} holds no document after its filters "
                                f"({read:,} read; dropped: {said})")
    if not recipe.mix:
        return ()
    tallies: dict = {}
    repeats = {spec.name: spec.repeat for spec in recipe.corpora}
    for record in records:
        if isinstance(record, MixTally):
            for name, sparse in record.tallies.items():
                tallies.setdefault(name, Tally(repeats[name])).add_sparse(*sparse)
    for name, key, tokens in removed:
        for copy in range(repeats[name]):
            tallies[name].remove(place(recipe.seed, name, (*key, copy) if copy else key), tokens)
    return tuple(sorted(cuts(tallies, dict(recipe.mix)).items()))


def plan_shards(records: list, cfg: TextConfig, output: str, dataset: str, recipe: RecipeReading | None = None,
                screening: Screening | None = None) -> list:
    """Gathered Run, Counts (and a recipe's MixTally) records -> the TextPlan, the summed Counts,
    and a ShardJob per text shard with documents."""
    runs = sorted((r for r in records if isinstance(r, Run)), key=lambda r: r.order)
    documents: Counter = Counter()
    for run in runs:
        for (split, _), (_, _, count) in run.blocks.items():
            documents[split] += count
    requested = {"training": cfg.training_shards, "test": cfg.test_shards}
    shards = dict(requested) if cfg.fixed_shards else {
        split: fewer_shards(n, documents[split], cfg.min_shard_documents) for split, n in requested.items()}
    folder = fsio.join(output, text_folder(shards["training"], shards["test"], cfg.test_fraction), dataset)
    removed, extra = {}, []
    if screening is not None:
        removed, gone, counts, summary = plan_removals(records, screening, folder)
        extra = [counts, summary]
    else:
        gone = []
    mix = plan_mix(records, recipe.recipe, gone) if recipe is not None else ()
    dropped = defaultdict(list)
    for (split, index), keys in removed.items():
        dropped[(split, index * shards[split] // requested[split])] += keys
    blocks = defaultdict(list)
    for run in runs:
        for (split, index), (offset, length, _) in run.blocks.items():
            # Halving keeps shards nested: shard index of n is shard index >> k of n >> k.
            blocks[(split, index * shards[split] // requested[split])].append((run.path, offset, length))
    return [TextPlan(folder, shards["training"], shards["test"]),
            Counts(merge_counts(r.values for r in records if isinstance(r, Counts))), *extra,
            *(ShardJob(folder, split, index, tuple(b), mix, tuple(sorted(dropped.get((split, index), ()))))
              for (split, index), b in sorted(blocks.items()))]


class _WriteTextShard(StepDoFn):
    """A ShardJob -> the text shard, written; yields its TextShard record, and a Counts
    record correcting the totals when a page id occurred more than once."""

    takes = (ShardJob,)

    def __init__(self, dataset: str, recipe=None):
        super().__init__()
        self.dataset, self.recipe = dataset, recipe

    def work(self, job: ShardJob):
        stem = shard_stem(self.dataset, job.split, job.index)
        working_on(f"the text stage, writing {stem}.txt")
        documents, repeated = merge_blocks(fsio.read_range(*block) for block in job.blocks)
        if job.removed:
            removed = set(job.removed)
            if self.recipe is None:  # a dump's build counted its articles and books as it read them
                yield Counts(_uncounted([d for d in documents if d.key[:2] in removed]))
            documents = [d for d in documents if d.key[:2] not in removed]
        path = fsio.join(job.folder, stem + ".txt")
        if self.recipe is not None:
            documents, counts = _mixed(documents, self.recipe, dict(job.mix))
            yield Counts(counts)
        data, record = render_shard(documents, stem, job.split, job.index, path)
        if self.recipe is not None:
            record = replace(record, ids=True)
            fsio.write_bytes(record.ids_path, render_ids(documents, self.recipe.names))
        fsio.write_bytes(path, data)
        yield record
        if repeated and self.recipe is not None:
            yield Counts(dict(Counter(corpus_key(self.recipe.names[d.key[0]], "dropped_duplicate_id")
                                      for d in repeated)))
        elif repeated:
            yield Counts({"skipped_duplicate_id": len(repeated), **_uncounted(repeated)})


def _uncounted(documents: list) -> dict:
    """The counts that a dump's build's documents left out of its shards (by dedup, decontamination,
    or as a page id's repeat) take back: its articles and their sentence figures, its books and
    their sentences."""
    counts: Counter = Counter()
    for doc in documents:
        if doc.key[0] == BOOKS_SOURCE:
            counts.update({"books": -1, "book_sentences": -len(doc.sentences)})
        else:
            counts.update({"articles": -1, **{k: -v for k, v in sentence_counts(doc.sentences).items()}})
    return dict(counts)


def place(seed: int, corpus: str, key: tuple) -> int:
    """A recipe's document's place in its corpus's mix (bertdata.corpora.mix.draw), from its key:
    (rank, id), and the copy for a repeat's copies."""
    return draw(seed, corpus, str(key[1]), key[2] if len(key) > 2 else 0)


def _mixed(documents: list, recipe, mix: dict) -> tuple[list, dict]:
    """A recipe's shard's documents that its mix keeps, and its counts: per corpus what it keeps
    (documents, tokens) and leaves out, and the sentence figures of what it keeps."""
    kept, counts = [], Counter()
    for doc in documents:
        name = recipe.names[doc.key[0]]
        if name in mix and place(recipe.seed, name, doc.key) >= mix[name]:
            counts[corpus_key(name, "dropped_mix")] += 1
            continue
        kept.append(doc)
        counts[corpus_key(name, "documents")] += 1
        counts[corpus_key(name, "tokens")] += doc.tokens
        counts.update(sentence_counts(doc.sentences))
    counts["documents"] += len(kept)
    return kept, count_dict(counts)


class DumpToTextShards(beam.PTransform):
    """Work groups (lists of WorkItems) -> written text shards (TextShard records), the
    TextPlan and one Counts record. Run files and progress markers go to `work_dir`;
    `splitter` and `markup` are the dump's language's; `prefetch`: whether workers have a
    spare core to decompress on."""

    def __init__(self, groups: list[list[WorkItem]], cfg: TextConfig, output: str, dataset: str, work_dir: str,
                 splitter, markup, prefetch: bool = True, recipe: RecipeReading | None = None,
                 screening: Screening | None = None):
        super().__init__()
        self.groups, self.cfg, self.output, self.dataset, self.work_dir = groups, cfg, output, dataset, work_dir
        self.splitter, self.markup, self.prefetch, self.recipe = splitter, markup, prefetch, recipe
        self.screening = screening

    @property
    def _recipe(self):
        return self.recipe.recipe if self.recipe is not None else None

    def _matching(self) -> beam.PTransform:
        if self.screening is not None and self.screening.dedup is not None:
            return "MatchingBands" >> _MatchingBands()
        return "NoDedup" >> beam.Map(lambda records: records)

    def expand(self, pbegin):
        return (
            pbegin
            # Spread deals them out: Create's own reshuffle would be a stage more, to no end.
            | "WorkGroups" >> beam.Create(list(enumerate(self.groups)), reshuffle=False)
            | "SpreadGroups" >> Spread()
            | "CleanAndSpill" >> beam.ParDo(_CleanAndSpill(self.cfg, self.work_dir, self.splitter, self.markup,
                                                          self.prefetch, self.recipe, self.screening))
            | "GatherRuns" >> Gather()
            | self._matching()
            | "PlanShards" >> beam.FlatMap(plan_shards, self.cfg, self.output, self.dataset, self.recipe,
                                           self.screening)
            | "SpreadShards" >> Spread()
            | "WriteTextShards" >> beam.ParDo(_WriteTextShard(self.dataset, self._recipe))
        )


class _MatchingBands(beam.PTransform):
    """A recipe's dedup: the gathered records -> the same, one element, with its bands' Matches."""

    def expand(self, gathered):
        return (gathered
                | "PlanBands" >> beam.FlatMap(plan_bands)
                | "SpreadBands" >> Spread()
                | "MatchBands" >> beam.ParDo(MatchBands())
                | "GatherMatches" >> Gather())


@dataclass
class TextFolders(Folders):
    """The text stage's folders: one of `paths`, chosen as it runs; a finished one is reused by
    its manifest (bertdata.pipelines.resume). Its run files go once its manifest is written."""

    inputs: BuildInputs  # in a worker, its EndInputs (which clean_up reads)

    @property
    def paths(self) -> tuple[str, ...]:
        i = self.inputs
        return tuple(text_stage_folders(i.cfg.output, i.text, i.dataset))

    def decide(self, force: bool) -> Decision:
        i = self.inputs
        reuse = reusable_text_stage(list(self.paths), i.dump_record, i.text_options, force)
        if reuse is not None:
            return Decision(False, f"text stage already complete in {reuse.plan.folder}: reusing "
                                   f"{len(reuse.of_kind(TextShard))} text shards", reuse)
        books = f" + {len(i.books)} books" if i.books else ""
        read = (f"recipe {i.dump_record['name']} ({', '.join(i.corpora.recipe.names)})" if i.corpora is not None
                else i.dump_record['name'])
        return Decision(True, f"text stage: {read}{books} -> {fsio.join(i.cfg.output, 'sharded_*', i.dataset)}")

    def clear(self) -> None:
        # A dump or option change could leave old shards this run would not write.
        remove_leftovers(list(self.paths), also=("*.txt", "*" + IDS_SUFFIX, AUDIT, MANIFEST))

    def clean_up(self) -> None:
        remove_temporaries(self.inputs.work_dir)  # the runs' disk is free before instances start


@dataclass
class TextStage(Stage):
    """Dump (and books) -> text shards."""

    inputs: BuildInputs
    name = "Text"
    makes = (TextShard,)

    @property
    def folders(self) -> TextFolders:
        return TextFolders(self.inputs)

    @functools.cached_property
    def items(self) -> list:
        i = self.inputs
        dump = work_items(i.dump, i.index, i.cfg.runner.workers) if i.dump is not None else []
        if i.corpora is None:
            return dump
        return dump + [WorkItem("corpus", path, start, end, corpus=name, weight=size) for name in i.corpora.recipe.names
                       for path, start, end, size in i.corpora.parts[name] if i.dump is None or path != i.dump]

    def steps(self) -> beam.PTransform:
        i = self.inputs
        workers = i.cfg.runner.workers
        return DumpToTextShards(work_groups(self.items, i.books, workers), i.text, i.cfg.output, i.dataset,
                                i.work_dir, i.splitter, i.site.markup, prefetch=spare_cores(i.cfg.runner),
                                recipe=self._reading(), screening=i.screening)

    def _reading(self) -> RecipeReading | None:
        i = self.inputs
        if i.corpora is None:
            return None
        counted = i.counted_by
        tokenizer = (i.tokenizer_file or i.vocab_tokenizer) if counted is not None else None
        return RecipeReading(i.corpora.recipe, dict(i.splitters), tokenizer)

    def counts(self, stage: StageRecords) -> dict:
        return {"text_shards": len(stage.of_kind(TextShard))}

    def write_manifests(self, stage: StageRecords, provenance: Provenance) -> None:
        write_text_manifest(stage, provenance, self.inputs.text_options)
