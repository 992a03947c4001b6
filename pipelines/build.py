"""`bertdata build`: dump (and books) -> text shards -> hdf5 shards for each phase, with manifests.

The launcher resolves inputs, decides what a re-run can reuse, runs ONE Beam pipeline
(one start-up), then prints a summary read back from the manifests the pipeline wrote.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import hashlib
import importlib
import json
import os
import re
import sys
import threading
import time
from collections import Counter
from dataclasses import asdict, dataclass, replace

import apache_beam as beam

from bertdata import __version__
from bertdata.articles import merge_counts, quality
from bertdata.books import SNIFF_BYTES, check_text_file
from bertdata.config import BuildConfig, TextConfig
from bertdata.errors import BertdataError
from bertdata.languages import ENGLISH_CODES, describe_skipped_namespaces, dump_language
from bertdata.layout import BOOKS_WIKI_DATASET, WORK_FOLDER, hdf5_folder, text_folder
from bertdata.sentences import choose_punkt, splitter_for
from bertdata.wikidump import Site
from bertdata.manifest import RUN_KEY, HDF5Shard, dumps, library_versions
from bertdata.sharding import TextShard
from bertdata.vocab import Vocab, is_cased, load_vocab, resolve_vocab
from bertdata.wikitext import RULES_VERSION
from bertdata.pipelines import fsio, progress
from bertdata.fsutil import TEMP_PREFIX, folder_lock, input_errors
from bertdata.pipelines.instances import PhaseOutput, TextShardsToInstances
from bertdata.pipelines.runners import make_pipeline, spare_cores, worker_count
from bertdata.pipelines.text import NAMESPACE_PREFIX, Counts, DumpToTextShards, Gather, TextPlan, WorkItem, open_raw, runs_folder

MANIFEST = "manifest.json"
# The text options' key for the cleaner's rules version: a new release's rules redo the text.
RULES = "cleaning_rules"
# Work groups (what one worker cleans and spills in one go) per worker: each makes at least
# one run file, and the local runner hands every worker the same number of them, fixed in
# advance, so groups must be of equal weight and several per worker to even out the rest.
GROUPS_PER_WORKER = 4
# Compressed bytes per read work item (the unit of progress): a few MB, and small enough
# that every group is made of several, or groups could not be of equal size.
WORK_ITEM_BYTES = 4 << 20
ITEMS_PER_GROUP = 16
# A byte of book text is worth about a third of a byte of bz2 dump in cleaning work.
BOOK_BYTE_WEIGHT = 1 / 3
_DUMP_DATE = re.compile(r"-(\d{8}|latest)-")


def _log(message: str) -> None:
    print(f"bertdata build: {message}", file=sys.stderr, flush=True)


# --- inputs ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Inputs:
    """What a build reads: the dump, its index, its record for the manifest, its wiki, the vocab."""

    dump: str
    index: str | None
    record: dict
    site: Site
    vocab: Vocab


def resolve_inputs(cfg: BuildConfig) -> Inputs:
    from bertdata import wikidump

    if cfg.sample:
        dump, index, sample_vocab = (str(p) for p in wikidump.sample_paths())
        return _inputs(dump, index, None, wikidump.read_site(dump, cfg.lang, open_raw),
                       load_vocab(cfg.vocab or sample_vocab))
    if cfg.dump is None:
        from bertdata.download import DumpSpec, download_dump

        # The vocab first: offline without one, fail before a download of hours.
        vocab = resolve_vocab(cfg.vocab, dump_language(f"{cfg.wiki}-", None, cfg.lang))
        got = download_dump(DumpSpec(wiki=cfg.wiki, date=cfg.date, mirror=cfg.mirror),
                            fsio.join(cfg.output, "download"))
        record = {"name": os.path.basename(got["dump"]["path"]), "date": got["date"],
                  "source": got["mirror"], "sha1": got["dump"]["sha1"], "bytes": got["dump"]["bytes"]}
        dump = got["dump"]["path"]
        return _inputs(dump, got["index"]["path"], record, wikidump.read_site(dump, cfg.lang, open_raw), vocab)
    dump = cfg.dump
    if re.match(r"https?://", dump):
        from bertdata.download import fetch

        local = fsio.join(cfg.output, "download", dump.rstrip("/").rsplit("/", 1)[-1])
        os.makedirs(os.path.dirname(local), exist_ok=True)
        dump = str(fetch(cfg.dump, local))
    if not fsio.exists(dump):
        raise BertdataError(f"{dump}: dump file not found")
    index = cfg.index or _index_beside(dump)
    if index is not None and not fsio.exists(index):
        raise BertdataError(f"{index}: multistream index not found")
    with input_errors(dump, "dump file"):
        site = wikidump.read_site(dump, cfg.lang, open_raw)
    return _inputs(dump, index, None, site, resolve_vocab(cfg.vocab, site.language))


def _inputs(dump: str, index: str | None, record: dict | None, site: Site, vocab: Vocab) -> Inputs:
    record = {**(record or _dump_record(dump, index)), "wiki": site.siteinfo.get("dbname"),
              "language": site.language}
    return Inputs(dump, index, record, site, vocab)


def _splitter(punkt, dump: str, site: Site):
    """The sentence splitter `punkt` names; punkt trained on the dump's first articles for a
    language without a model of its own."""
    from bertdata.articles import article_texts
    from bertdata.wikidump import iter_pages

    if punkt.model is not None:
        return splitter_for(punkt)
    with contextlib.closing(iter_pages(dump, open_raw)) as pages:
        return splitter_for(punkt, article_texts(pages, site.markup))


def _index_beside(dump: str) -> str | None:
    if "-multistream" not in dump:
        return None
    candidate = re.sub(r"(-multistream)\.xml(\.bz2)?$", r"\1-index.txt.bz2", dump)
    return candidate if candidate != dump and fsio.exists(candidate) else None


def _dump_record(dump: str, index: str | None) -> dict:
    """Name, date and sha1 (what Wikimedia publishes) of a dump given as a path."""
    from tqdm import tqdm

    digest = hashlib.sha1()
    size = 0
    with input_errors(dump, "dump file"), open_raw(dump) as f, tqdm(
            desc="sha1 of dump", unit="B", unit_scale=True, leave=False, disable=None) as bar:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
            size += len(block)
            bar.update(len(block))
    name = fsio.FileSystems.split(dump)[1]
    date = _DUMP_DATE.search(name)
    return {"name": name, "date": date.group(1) if date else "unknown", "sha1": digest.hexdigest(),
            "bytes": size, "index": fsio.FileSystems.split(index)[1] if index else None}


def list_books(folder: str | None) -> list[str]:
    if not folder:
        return []
    books = [p for p in fsio.match(fsio.join(folder, "*")) if not fsio.FileSystems.split(p)[1].startswith(".")]
    if not books:
        raise BertdataError(f"{folder}: no book files found (expected plain-text files, one book each)")
    for path in books:
        with fsio.FileSystems.open(path, compression_type="uncompressed") as f:
            check_text_file(path, f.read(SNIFF_BYTES))
    return books


def work_items(dump: str, index: str | None, workers: int) -> list[WorkItem]:
    """Byte ranges of a multistream dump, or the whole file as one item (a single bz2
    stream cannot be cut: one worker reads it all)."""
    from bertdata.wikidump import plan_ranges, stream_ranges

    if index is None:
        return [WorkItem("dump", dump)]
    ranges = stream_ranges(dump, index, open_raw)
    total = ranges[-1][1] - ranges[0][0]
    target = max(1, min(WORK_ITEM_BYTES, total // (ITEMS_PER_GROUP * GROUPS_PER_WORKER * workers)))
    return [WorkItem("dump", dump, start, end) for start, end in plan_ranges(ranges, target)]


def work_groups(items: list[WorkItem], books: list[str], workers: int) -> list[list[WorkItem]]:
    """Dump items and books cut into about GROUPS_PER_WORKER x workers groups of equal
    weight. Dump ranges stay in dump order, group after group, so (group, run) order is
    dump order: the first copy of a repeated page id is the one kept."""
    weighted = [(item, (item.end - item.start) if item.start is not None else 1) for item in items]
    weighted += [(WorkItem("book", b), fsio.size(b) * BOOK_BYTE_WEIGHT) for b in books]
    count = max(1, min(len(weighted), GROUPS_PER_WORKER * workers))
    total = sum(w for _, w in weighted) or 1
    groups: list[list[WorkItem]] = [[] for _ in range(count)]
    done = 0.0
    for item, weight in weighted:
        # The group its midpoint falls in: contiguous groups, each off by at most half an item.
        groups[min(count - 1, int((done + weight / 2) * count / total))].append(item)
        done += weight
    return [g for g in groups if g]


# --- what a re-run may reuse ------------------------------------------------------------


def _read_json(path: str) -> dict | None:
    if not fsio.exists(path):
        return None
    try:
        return json.loads(fsio.read_bytes(path))
    except ValueError:
        return None  # written atomically, so only a hand edit breaks it: redo the stage


def text_stage_folders(output: str, t: TextConfig, dataset: str) -> list[str]:
    """Every text shard folder this build may write: default shard counts may be halved
    (see bertdata.sharding.fewer_shards), and the folder is named after the counts."""
    def halvings(n: int) -> list[int]:
        counts = [n]
        while not t.fixed_shards and counts[-1] > 1 and counts[-1] % 2 == 0:
            counts.append(counts[-1] // 2)
        return counts

    return [fsio.join(output, text_folder(n, m, t.test_fraction), dataset)
            for n in halvings(t.training_shards) for m in halvings(t.test_shards)]


def reusable_text_stage(folders: list[str], dump: dict, text_options: dict, force: bool) -> list | None:
    """The records (TextPlan, TextShards, Counts) of a finished text stage for these inputs
    in one of `folders`, else None. A folder holding another build's text is refused."""
    finished = [(f, m) for f, m in ((f, _read_json(fsio.join(f, MANIFEST))) for f in folders) if m is not None]
    if force:
        return None
    for folder, manifest in finished:
        if manifest.get("dump", {}).get("sha1") == dump["sha1"] and manifest.get("options") == text_options:
            records = _finished_records(folder, manifest)
            if records is not None:
                return records
    for folder, manifest in finished:
        old = manifest.get("options", {})
        if {**old, RULES: None} == {**text_options, RULES: None}:
            _log(f"{folder}: text shards made with cleaning rules {old.get(RULES)}, now {text_options[RULES]}: "
                 "rebuilding them")
            continue
        if manifest.get("dump", {}).get("sha1") != dump["sha1"] or old != text_options:
            raise BertdataError(
                f"{folder} holds text shards built from another dump or options "
                f"({manifest.get('dump', {}).get('name')}); pass --force to rebuild them, or choose another --output")
    return None


def _finished_records(folder: str, manifest: dict) -> list | None:
    shards = [TextShard(path=fsio.join(folder, e["file"]), **{k: e[k] for k in
              ("split", "index", "stem", "documents", "sentences", "bytes", "sha256")}) for e in manifest["shards"]]
    if not all(fsio.exists(s.path) for s in shards):
        return None
    effective = manifest["effective_shards"]
    return [TextPlan(folder, effective["training"], effective["test"]), *shards, Counts(manifest["counts"])]


def this_runs_text_manifest(output: str, folders: list[str], started: str) -> tuple[str, dict] | tuple[None, None]:
    """(folder, manifest) of the text stage this run wrote, once it has; the folder's name
    is decided inside the pipeline."""
    # One listing, not a read per candidate: the progress bars ask every second.
    written = set(fsio.match(fsio.join(output, "sharded_*", "*", MANIFEST)))
    for folder in folders:
        path = fsio.join(folder, MANIFEST)
        manifest = _read_json(path) if path in written else None
        if manifest is not None and manifest.get(RUN_KEY, {}).get("started") == started:
            return folder, manifest
    return None, None


def check_vocab_unchanged(phase_dirs: list[str], vocab: Vocab, force: bool) -> None:
    """Refuse to mix shards of two vocabs in one folder (a half-done run, then a new vocab)."""
    if force:
        return
    from bertdata.hdf5io import shard_attrs

    for folder in phase_dirs:
        for path in fsio.match(fsio.join(folder, "*.hdf5"))[:1]:
            with fsio.local_input(path) as local:
                recorded = shard_attrs(local).get("vocab_sha256")
            if recorded is not None and recorded != vocab.sha256:
                raise BertdataError(
                    f"{path} was made with another vocab (sha256 {recorded[:12]}…, now {vocab.sha256[:12]}…); "
                    "pass --force to rebuild every shard with the new vocab")


def remove_leftovers(phase_dirs: list[str], text_dirs: list[str], work_dir: str, redo_text: bool) -> None:
    """Temporary files of a killed run, and, when the text stage is redone, the old text
    shards (a dump or option change could leave shards this run would not write)."""
    doomed = []
    for folder in [*text_dirs, *phase_dirs]:
        doomed += fsio.match(fsio.join(folder, TEMP_PREFIX + "*"))
        if redo_text and folder in text_dirs:
            doomed += fsio.match(fsio.join(folder, "*.txt")) + fsio.match(fsio.join(folder, MANIFEST))
    if doomed:
        fsio.FileSystems.delete(doomed)
    remove_temporaries(work_dir)


def remove_temporaries(work_dir: str) -> None:
    """The text stage's run files and progress markers."""
    fsio.remove_folder(runs_folder(work_dir))
    progress.clear_markers(work_dir)
    if fsio.is_local(work_dir) and fsio.exists(work_dir):
        fsio.FileSystems.delete([work_dir])


# --- manifests ---------------------------------------------------------------------------


def _run_record(common: dict) -> dict:
    run = {**common[RUN_KEY], "finished": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
    run["seconds"] = round(time.time() - run.pop("started_epoch"), 2)
    return run


class _WriteTextManifest(beam.DoFn):
    """Records the finished text stage, so a re-run resumes after it; passes every record on."""

    def __init__(self, common: dict, text_options: dict, work_dir: str):
        self.common, self.text_options, self.work_dir = common, text_options, work_dir

    def process(self, records):
        plan = next(r for r in records if isinstance(r, TextPlan))
        counts = merge_counts(r.values for r in records if isinstance(r, Counts))
        texts = sorted((r for r in records if isinstance(r, TextShard)), key=lambda r: (r.split, r.index))
        counts["text_shards"] = len(texts)
        base = {k: v for k, v in self.common.items() if k != RUN_KEY}
        manifest = {**base, "options": self.text_options, "counts": counts, "quality": quality(counts),
                    "effective_shards": {"training": plan.training_shards, "test": plan.test_shards},
                    RUN_KEY: _run_record(self.common),
                    "shards": [{**t.manifest_entry(), "split": t.split, "index": t.index, "stem": t.stem}
                               for t in texts]}
        fsio.write_bytes(fsio.join(plan.folder, MANIFEST), dumps(manifest))
        remove_temporaries(self.work_dir)  # the runs' disk is free before instances start
        yield plan
        yield from texts
        yield Counts(counts)


class _WriteHDF5Manifests(beam.DoFn):
    """Writes each phase folder's manifest.json from all records of the instance stage."""

    def __init__(self, common: dict, phases: dict[str, dict]):
        self.common, self.phases = common, phases

    def process(self, records):
        counts = merge_counts(r.values for r in records if isinstance(r, Counts))
        hdf5 = [r for r in records if isinstance(r, HDF5Shard)]
        base = {k: v for k, v in self.common.items() if k != RUN_KEY}
        run = _run_record(self.common)
        for folder, options in self.phases.items():
            shards = sorted((r for r in hdf5 if r.folder == folder), key=lambda r: _natural(r.file))
            phase_counts = {**counts, "hdf5_shards": len(shards), "tokens": sum(r.tokens for r in shards),
                            "instances": sum(r.instances for r in shards),
                            "random_next": sum(r.random_next for r in shards),
                            "documents": sum(r.documents for r in shards)}
            random_next = round(phase_counts["random_next"] / max(1, phase_counts["instances"]), 4)
            manifest = {**base, "options": options, "counts": phase_counts,
                        "quality": {**quality(counts), "random_next_share": random_next},
                        "shards": [r.manifest_entry() for r in shards],
                        RUN_KEY: {**run, "reused_shards": sum(r.reused for r in shards)}}
            fsio.write_bytes(fsio.join(folder, MANIFEST), dumps(manifest))
        yield len(hdf5)


def _natural(name: str) -> tuple:
    return tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", name))


# --- the run -----------------------------------------------------------------------------

# How a BertdataError raised in a worker reads once Beam has wrapped it, in this process or
# as the text of a remote traceback: "bertdata.wikidump.BertdataError: MESSAGE [while running ...]".
_REMOTE_ERROR = re.compile(r"^(bertdata(?:\.\w+)*)\.(\w+): (.+?)(?: \[while running '[^']*'\])*$", re.M)


# A write that failed for lack of room or rights, as a remote traceback states it.
_OUTPUT_ERROR = re.compile(r"(?:OSError|PermissionError): \[Errno (\d+)\] ([^\n\[]+)")
_OUTPUT_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM}


# HDF5 tells a failed write in its own words, with the system's inside.
_HDF5_WRITE = re.compile(r"filename = '([^']*)'.*?error message = '([^']*)'", re.S)


def _output_error(text: str, message: str, filename: str | None) -> str:
    hdf5 = _HDF5_WRITE.search(text)
    if hdf5:
        message, filename = hdf5.group(2), hdf5.group(1)
    return f"cannot write output: {message}" + (f": {filename}" if filename else "")


def user_error(err: BaseException) -> str | None:
    """The message behind a pipeline failure the user can fix (a BertdataError, or a full or
    read-only output disk), if that is what it was."""
    seen = set()
    while err is not None and id(err) not in seen:
        seen.add(id(err))
        if isinstance(err, BertdataError):  # raised in this process; Beam appends the step's name
            return re.sub(r"( \[while running '[^']*'\])+$", "", str(err))
        if isinstance(err, OSError) and err.errno in _OUTPUT_ERRNOS:
            return _output_error(str(err), err.strerror, err.filename)
        for module, name, message in _REMOTE_ERROR.findall(str(err)):
            with contextlib.suppress(ImportError):
                cls = getattr(importlib.import_module(module), name, None)
                if isinstance(cls, type) and issubclass(cls, BertdataError):
                    return message
        for number, message in _OUTPUT_ERROR.findall(str(err)):
            if int(number) in _OUTPUT_ERRNOS:
                return _output_error(str(err), message.strip(), None)
        err = err.__cause__ or err.__context__
    return None


def check_output(output: str) -> None:
    """Fail before any work when the output folder cannot be created or written."""
    if not fsio.is_local(output):
        return
    try:
        os.makedirs(output, exist_ok=True)
    except OSError as err:
        raise BertdataError(f"{output}: cannot create the output folder ({err.strerror})") from None
    if not os.access(output, os.W_OK | os.X_OK):
        raise BertdataError(f"{output}: output folder is not writable")


class _LogPump:
    """Copies what its pipe receives into the log file. When the disk refuses (full, say),
    it goes on draining the pipe, so no process ever fails or blocks writing its stderr:
    a Beam worker that cannot report its error leaves the run waiting forever."""

    def __init__(self, log_path: str):
        self.read_fd, self.write_fd = os.pipe()
        self.log = open(log_path, "ab", buffering=0)
        self.failed: OSError | None = None
        self.thread = threading.Thread(target=self._pump, name="build-log", daemon=True)
        self.thread.start()

    def _pump(self) -> None:
        while chunk := os.read(self.read_fd, 1 << 16):
            if self.failed is None:
                try:
                    self.log.write(chunk)
                except OSError as err:
                    self.failed = err

    def close(self) -> None:
        os.close(self.write_fd)
        self.thread.join(timeout=5)  # a worker that outlives the run keeps its end open
        with contextlib.suppress(OSError):
            self.log.close()


@contextlib.contextmanager
def beam_output_to(log_path: str):
    """Send stderr -- Beam's and its worker processes', which inherit it -- to `log_path`,
    so the console shows the build's own lines; the log keeps the details. Yields the
    console and the pump (whose `failed` says whether the log is complete)."""
    sys.stderr.flush()
    saved = os.dup(2)
    pump = _LogPump(log_path)
    os.dup2(pump.write_fd, 2)
    console = os.fdopen(os.dup(saved), "w")
    try:
        yield console, pump  # the terminal, for progress bars
    finally:
        console.close()
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)
        pump.close()


def run_pipeline(pipeline: beam.Pipeline, output: str, work_dir: str, text_manifest, ranges: int | None,
                 phase_dirs: list[str]) -> None:
    log_path = os.path.join(output if fsio.is_local(output) else ".", "build.log")
    os.makedirs(os.path.dirname(log_path) or ".", exist_ok=True)
    pump = None
    try:
        with beam_output_to(log_path) as (console, pump), progress.Watcher(console, work_dir, text_manifest, ranges,
                                                                           phase_dirs):
            pipeline.run().wait_until_finish()
    except Exception as err:
        message = user_error(err)
        if message is None:
            raise
        incomplete = f", incomplete: {pump.failed.strerror}" if pump and pump.failed else ""
        raise BertdataError(f"{message} (Beam's log: {log_path}{incomplete})") from None
    finally:  # success, failure and Ctrl-C alike; a killed run's are removed by the next
        remove_temporaries(work_dir)


def run_build(cfg: BuildConfig) -> dict:
    started = time.time()
    check_output(cfg.output)
    # One build per output folder: two would replace each other's shards and temporaries.
    # (Object stores have no exclusive create: there the user keeps builds apart.)
    with folder_lock(cfg.output, "bertdata build") if fsio.is_local(cfg.output) else contextlib.nullcontext([]) \
            as notes:
        for note in notes:
            _log(note)
        return _build(cfg, started)


def _build(cfg: BuildConfig, started: float) -> dict:
    inputs = resolve_inputs(cfg)
    dump, index, dump_record, vocab, site = inputs.dump, inputs.index, inputs.record, inputs.vocab, inputs.site
    _log(f"dump {dump_record['name']} ({dump_record['bytes'] / 1e6:.1f} MB, sha1 {dump_record['sha1'][:12]}…), "
         f"vocab {vocab.path} ({len(vocab)} tokens)")
    if cfg.stop_after == "download":
        return {"dump": dump_record}
    books = list_books(cfg.books)
    english = site.language in ENGLISH_CODES
    dataset = (BOOKS_WIKI_DATASET if english else f"books_wiki_{site.language}_corpus") if books else site.dataset
    t = cfg.text
    if t.lowercase and is_cased(vocab):
        if cfg.vocab is None:  # the multilingual vocab: cased text is what it was made from
            t = replace(t, lowercase=False)
        else:
            _log(f"warning: {vocab.path} is a cased vocab but text is lower-cased; pass --cased to keep case")
    punkt = choose_punkt(site.language, cfg.punkt_language)
    _log(punkt.notice)
    splitter = _splitter(punkt, dump, site)
    text_dirs = text_stage_folders(cfg.output, t, dataset)
    work_dir = fsio.join(cfg.output, WORK_FOLDER)
    phases = [] if cfg.stop_after == "text" else [
        (p, fsio.join(cfg.output, hdf5_folder(p, t.lowercase), dataset)) for p in cfg.phases]
    text_options = {"text": asdict(t), "books": [fsio.FileSystems.split(b)[1] for b in books],
                    "dataset": dataset, RULES: RULES_VERSION, "language": site.language,
                    "punkt": punkt.model or "trained on the dump"}
    check_vocab_unchanged([d for _, d in phases], vocab, cfg.force)
    reuse = reusable_text_stage(text_dirs, dump_record, text_options, cfg.force)
    remove_leftovers([d for _, d in phases], text_dirs, work_dir, redo_text=reuse is None)
    workers = worker_count(cfg.runner)

    common = {"tool": {"name": "bertdata", "version": __version__, **library_versions()}, "dump": dump_record,
              RUN_KEY: {"started": time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(started)),
                        "started_epoch": started, "runner": cfg.runner.runner, "workers": workers}}
    phase_options = {folder: {**text_options, "instances": asdict(p), "vocab_sha256": vocab.sha256,
                              "vocab_size": len(vocab), "lowercase": t.lowercase,
                              "seed_per_shard": "same" if cfg.same_seed_per_shard else "derived"}
                     for p, folder in phases}

    pipeline = make_pipeline(cfg.runner)
    items = None
    finder = functools.partial(this_runs_text_manifest, cfg.output, text_dirs, common[RUN_KEY]["started"])
    if reuse is None:
        _log(f"text stage: {dump_record['name']}{f' + {len(books)} books' if books else ''} -> "
             f"{fsio.join(cfg.output, 'sharded_*', dataset)}")
        items = work_items(dump, index, workers)
        records = (pipeline
                   | "Text" >> DumpToTextShards(work_groups(items, books, workers), t, cfg.output, dataset, work_dir,
                                                splitter, site.markup, prefetch=spare_cores(cfg.runner))
                   | "GatherText" >> Gather()
                   | "TextManifest" >> beam.ParDo(_WriteTextManifest(common, text_options, work_dir)))
    else:
        _log(f"text stage already complete in {reuse[0].folder}: reusing {len(reuse) - 2} text shards")
        records = pipeline | "FinishedTextShards" >> beam.Create(reuse)
    if phases:
        _ = (records
             | "Instances" >> TextShardsToInstances(vocab, [PhaseOutput(p, folder) for p, folder in phases], t.lowercase,
                                                    cfg.same_seed_per_shard, cfg.force)
             | "GatherHDF5" >> Gather()
             | "HDF5Manifests" >> beam.ParDo(_WriteHDF5Manifests(common, phase_options)))
    _log(f"running on {cfg.runner.runner} runner, {workers} worker(s); Beam's own output goes to build.log")
    ranges = sum(item.marker is not None for item in items) if items else 0
    run_pipeline(pipeline, cfg.output, work_dir, finder, ranges or None, [d for _, d in phases])

    text_dir, text_manifest = finder() if reuse is None else (reuse[0].folder, _read_json(
        fsio.join(reuse[0].folder, MANIFEST)))
    summary = {"seconds": time.time() - started, "text": text_manifest, "text_dir": text_dir, "requested": t,
               "siteinfo": site.siteinfo,
               "phases": {folder: _read_json(fsio.join(folder, MANIFEST)) for _, folder in phases}}
    counts = summary["text"]["counts"]
    if not counts.get("articles") and not counts.get("books"):
        # Manifests of an empty build would make a later run "resume" from nothing.
        folders = [text_dir, *(f for _, f in phases)]
        fsio.FileSystems.delete([fsio.join(f, MANIFEST) for f in folders if fsio.exists(fsio.join(f, MANIFEST))])
        for folder in folders:  # and the folders it made, now empty, so nothing looks built
            if fsio.is_local(folder):
                with contextlib.suppress(OSError):
                    os.removedirs(folder)
        skipped = ", ".join(f"{k.removeprefix('skipped_')} {v}" for k, v in counts.items() if k.startswith("skipped_"))
        raise BertdataError(f"{dump}: no articles in this dump ({counts.get('pages', 0)} pages; "
                            f"skipped: {skipped or 'none'})")
    print_summary(summary)
    return summary


def print_shard_choice(text: dict, requested: TextConfig) -> None:
    """Say when default shard counts were lowered, and warn when chosen ones are too many."""
    effective = text["effective_shards"]
    asked = {"training": requested.training_shards, "test": requested.test_shards}
    if effective != asked:
        print(f"text shards: {effective['training']} training + {effective['test']} test instead of "
              f"{asked['training']} + {asked['test']}, so that shards hold {requested.min_shard_documents}+ "
              f"articles for next-sentence pairs (--training-shards/--test-shards choose the counts)")
    small = Counter(e["split"] for e in text["shards"] if e["documents"] < requested.min_shard_documents)
    if requested.fixed_shards and small:
        print("warning: " + ", ".join(f"{n} of {effective[split]} {split} shards" for split, n in sorted(small.items()))
              + f" hold fewer than {requested.min_shard_documents} documents: their next-sentence pairs rarely "
              "come from another document; choose fewer shards")


def print_summary(summary: dict) -> None:
    text = summary["text"]
    c = Counter(text["counts"]) if text else Counter()
    q = text.get("quality", {}) if text else {}
    skipped = [f"{k.removeprefix('skipped_')} {v:,}" for k, v in sorted(c.items())
               if k.startswith("skipped_") and k != "skipped_namespace"]
    outside = {int(k.removeprefix(NAMESPACE_PREFIX)): v for k, v in c.items() if k.startswith(NAMESPACE_PREFIX)}
    if outside:
        skipped.insert(0, describe_skipped_namespaces(outside, summary["siteinfo"]))
    print(f"pages {c['pages']:,} -> articles {c['articles']:,} (skipped: {', '.join(skipped) or 'none'})"
          + (f", books {c['books']:,}" if c["books"] else ""))
    print(f"text: {c['sentences'] + c['book_sentences']:,} sentences in {c['text_shards']} shards"
          + (f"; {q['sentences_per_article']} sentences per article, {q['words_per_sentence']} words per sentence, "
             f"{100 * q['unterminated_share']:.1f}% without end punctuation" if q else ""))
    if text:
        print_shard_choice(text, summary["requested"])
    for folder, manifest in summary["phases"].items():
        pc = manifest["counts"]
        reused = manifest[RUN_KEY].get("reused_shards", 0)
        print(f"hdf5: {pc['instances']:,} instances ({100 * manifest['quality']['random_next_share']:.1f}% random "
              f"next), {pc['tokens']:,} tokens in {pc['hdf5_shards']} shards"
              + (f" ({reused} reused)" if reused else "") + f" -> {folder}")
    print(f"done in {summary['seconds']:.1f} s")
    if summary["phases"]:
        first = next(iter(summary["phases"]))
        print(f"next:\n  bertdata inspect {first}\n  bertdata shard {first} --parts 100 --output PARTS\n"
              f"  bertdata bench --data {first}")
