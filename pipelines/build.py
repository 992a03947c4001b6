"""`bertdata build`: dump (and books) -> text shards -> hdf5 shards and/or LDDL folders for each
phase, with manifests.

The launcher resolves the inputs (bertdata.pipelines.inputs), plans the stages and what a
re-run reuses of them (bertdata.pipelines.chain), runs them as ONE Beam pipeline (one
start-up) in which each stage ends by writing its manifests, then reads a summary back from
them, which the command prints.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import os
import tempfile
import time
from dataclasses import replace

import apache_beam as beam

from bertdata.config import BuildConfig
from bertdata.dedup.evals import flag_decontamination, flag_set
from bertdata.errors import BertdataError, WorkerLost
from bertdata.fsutil import folder_lock, make_output_folder, remove_made
from bertdata.text.languages import ENGLISH_CODES
from bertdata.text.shards import BOOKS_WIKI_DATASET
from bertdata.manifest import MANIFEST, Run, tool_record
from bertdata.text.sentences import choose_punkt
from bertdata.instances.vocab import is_cased
from bertdata.pipelines.chain import chain_stages, plan_stages, prepare_stages
from bertdata.pipelines.corpora import eval_files, store_paths
from bertdata.pipelines.cleanup import clean_up_failed_run, remove_temporaries
from bertdata.pipelines.inputs import (Inputs, corpus_splitter, list_books, resolve_inputs, resolve_recipe,
                                      sentence_splitter)
from bertdata.pipelines.stages.instances import InstancesStage
from bertdata.pipelines.manifests import Provenance
from bertdata.pipelines.plan import check_disk, local_dump
from bertdata.pipelines.resume import BUILD_TOOL, StageManifest, read_manifest, refuse_another_build, \
    this_runs_text_manifest
from bertdata.pipelines.runtime import fsio, progress
from bertdata.pipelines.runtime.failures import user_error
from bertdata.pipelines.runtime.log import beam_output_to, note
from bertdata.pipelines.runtime.pool import WorkerDied, WorkerPool
from bertdata.pipelines.runtime.runners import check_runner, make_pipeline, runner_workers
from bertdata.pipelines.runtime.stores import store_lock, store_of, use_stores
from bertdata.pipelines.stage import BuildInputs


def run_build(cfg: BuildConfig, pool: WorkerPool | None = None) -> dict:
    """Run the build `cfg` describes; local workers are forked by `pool` when given."""
    started = time.time()
    check_runner(cfg.runner)
    paths = (cfg.output, cfg.dump, cfg.index, cfg.vocab, cfg.books, cfg.recipe,
             *(flag_set(value).files[0] for value in cfg.decontaminate))
    args = use_stores(paths, cfg.runner.beam_args)
    if cfg.recipe is not None:  # and the stores its corpora name, once it can be read
        args = use_stores(paths + store_paths(cfg.recipe), args)
    cfg = replace(cfg, runner=replace(cfg.runner, beam_args=args))
    made = check_output(cfg.output)
    try:
        dump = local_dump(cfg)
        if dump is not None:  # else once it is downloaded
            check_disk(cfg, dump)
        # One build per output folder: two would replace each other's shards and temporaries.
        with output_lock(cfg.output, BUILD_TOOL) as notes:
            for line in notes:
                note(line)
            return _build(cfg, started, pool)
    except BaseException:
        remove_made(made)  # a build refused (or stopped) before it wrote anything leaves no folder behind
        raise


def output_lock(folder: str, what: str):
    """One writer per output folder, on local disk or an object store (elsewhere, as on
    hdfs://, the user keeps builds apart)."""
    if fsio.is_local(folder):
        return folder_lock(folder, what)
    if store_of(folder) is not None:
        return store_lock(folder, what, fsio.options())
    return contextlib.nullcontext([])


def check_output(output: str) -> list[str]:
    """Make the output folder before any work, refusing one that cannot be made or hold a
    build's files (see bertdata.fsutil); returns the folders it made, outermost first."""
    return make_output_folder(output, below=BUILD_PATHS) if fsio.is_local(output) else []


# The longest path a build writes below its output folder, with room to spare: a phase folder's
# name (about 110 bytes with whole-word masking), the dataset's folder, a file's name.
BUILD_PATHS = 256


def _build(cfg: BuildConfig, started: float, pool: WorkerPool | None) -> dict:
    """Resolve the inputs, plan the stages, run them; the summary is read back from the manifests."""
    found = None
    if cfg.recipe is not None:
        resolved, found = resolve_recipe(cfg)
    else:
        resolved = resolve_inputs(cfg)
    record, vocab = resolved.record, resolved.vocab
    tokens = (f"vocab {vocab.path} ({len(vocab)} tokens)" if vocab is not None
              else f"tokenizer {cfg.documents.tokenizer} (no WordPiece vocab: no format uses one)")
    if found is not None:
        files = sum(len(f) for f in found.files.values())
        note(f"recipe {record['name']}: {len(found.recipe.corpora)} corpora ({', '.join(found.recipe.names)}), "
             f"{files} files, {record['bytes'] / 1e6:.1f} MB; {tokens}")
    else:
        note(f"dump {record['name']} ({record['bytes'] / 1e6:.1f} MB, sha1 {record['sha1'][:12]}…), {tokens}")
    if cfg.stop_after == "download":
        return {"dump": record}
    inputs = _stage_inputs(cfg, resolved, found)
    planned = plan_stages(inputs)
    # After the stages' own checks (which name their folder), before anything is written.
    refuse_another_build(cfg.output, record, inputs.site.language, vocab, cfg.force)
    for p in planned:
        if p.decision.line:
            note(p.decision.line)
    prepare_stages(planned, inputs.work_dir)
    cfg, dump_record = inputs.cfg, inputs.dump_record
    run = Run(started, cfg.runner.runner, cfg.runner.workers)
    pipeline = make_pipeline(cfg.runner, pool)
    chain_stages(pipeline, planned, Provenance(tool_record(BUILD_TOOL), run, dump_record))

    text_stage, text_decision = planned[0].stage, planned[0].decision
    finder = functools.partial(this_runs_text_manifest, cfg.output, list(text_stage.folders.paths), run.started_at)
    reading = progress.reading_bars([i.marker for i in text_stage.items if i.marker is not None]) \
        if text_decision.run else []
    # The instance stage's progress: the files of its first format cut per shard, one per text shard and phase.
    per_shard = [(outs[0].format, outs[0].folder) for p in planned if isinstance(p.stage, InstancesStage)
                 for outs in p.stage.shards.values() if outs]
    note(f"running on {cfg.runner.runner} runner, {cfg.runner.workers} worker(s); Beam's own output goes to build.log")
    run_pipeline(pipeline, cfg.output, inputs.work_dir, finder, reading,
                 [fsio.join(folder, fmt.pattern()) for fmt, folder in per_shard], pool,
                 [cfg.output, *(folder for p in planned for folder in p.stage.folders.paths)])

    reused = text_decision.handed_on
    text = finder() if reused is None else StageManifest(reused.plan.folder, read_manifest(reused.plan.folder))
    counts = text.manifest["counts"]
    if not counts.get("articles") and not counts.get("books") and not counts.get("documents"):
        _refuse_empty_build(inputs.dump or cfg.recipe, text, [folder for p in planned[1:] for folder in p.stage.folders.paths])
    # What each stage's format wrote, in chain order: (format, folder, manifest).
    outputs = [(name, folder, read_manifest(folder)) for p in planned[1:] for name, folder in p.stage.folders.folder_formats()]
    return {"seconds": time.time() - started, "text": text.manifest, "text_dir": text.folder,
            "requested": inputs.text, "siteinfo": inputs.site.siteinfo, "outputs": outputs}


def _stage_inputs(cfg: BuildConfig, inputs: Inputs, found=None) -> BuildInputs:
    """What the stages are planned from: the inputs, the dataset's name, the text's settings."""
    dump, dump_record, vocab, site = inputs.dump, inputs.record, inputs.vocab, inputs.site
    if local_dump(cfg) is None and dump is not None and fsio.is_local(dump):
        check_disk(cfg, dump)
    books = list_books(cfg.books)
    english = site.language in ENGLISH_CODES
    dataset = (BOOKS_WIKI_DATASET if english else f"books_wiki_{site.language}_corpus") if books else site.dataset
    if found is not None:
        dataset = found.recipe.name
    t = cfg.text
    if t.lowercase and vocab is not None and is_cased(vocab):
        if cfg.vocab is None:  # the multilingual vocab: cased text is what it was made from
            t = replace(t, lowercase=False)
        else:
            note(f"warning: {vocab.path} is a cased vocab but text is lower-cased; pass --cased to keep case")
    punkt = choose_punkt(site.language, cfg.punkt_language)
    note(punkt.notice)
    splitter = sentence_splitter(punkt, dump, site, cfg.splitter) if dump is not None else None
    splitters = ()
    if found is not None:
        splitters = tuple((language, corpus_splitter(language, cfg.punkt_language, cfg.splitter))
                          for language in sorted({c.language for c in found.recipe.corpora}))
    evals = eval_files(flag_decontamination(cfg.decontaminate), "", "--decontaminate:") if found is None else ()
    workers = runner_workers(cfg.runner)
    cfg = replace(cfg, runner=replace(cfg.runner, workers=workers))  # asked once of a cluster
    return BuildInputs(cfg, dump, inputs.index, dump_record, vocab, site, t, dataset, books, splitter, punkt.model,
                       found, splitters, evals)


def run_pipeline(pipeline: beam.Pipeline, output: str, work_dir: str, text_manifest, reading: list,
                 phase_dirs: list[str], pool: WorkerPool | None = None, folders: list[str] = ()) -> None:
    """Run the pipeline; if it fails or is stopped, end its workers and remove what it left in
    the work folder and in `folders` (every folder the build writes) before the error goes on."""
    shown = fsio.join(output, "build.log")  # where the user finds it
    if fsio.is_local(output):
        log_path = shown
    else:  # an object store has no appends: the log grows on local disk and is uploaded at the end
        handle, log_path = tempfile.mkstemp(prefix="bertdata-build-", suffix=".log")
        os.close(handle)
    pump = None
    try:
        with out_of_collection(), beam_output_to(log_path) as (console, pump), \
                progress.Watcher(console, work_dir, text_manifest, reading, phase_dirs), \
                pool.stop_on_death() if pool else contextlib.nullcontext():
            pipeline.run().wait_until_finish()
    except BaseException as err:  # a failure, Ctrl-C or a stop signal alike
        death = err.death if isinstance(err, WorkerDied) else None
        message = user_error(err) if isinstance(err, Exception) else None
        if death is None and message is None and isinstance(err, Exception) and pool is not None:
            # Beam may see the broken channel before the pool's report of why arrives.
            death = pool.first_death(timeout=DEATH_REPORT_SECONDS)
        removed = clean_up_failed_run(pool, output, work_dir, folders)
        if death is not None:
            raise WorkerLost(f"{death.describe()}; build stopped, {removed}: run it again to resume "
                             f"(Beam's log: {shown})") from None
        if message is not None:
            incomplete = f", incomplete: {pump.failed.strerror}" if pump and pump.failed else ""
            raise BertdataError(f"{message} (Beam's log: {shown}{incomplete})") from None
        raise
    else:
        remove_temporaries(work_dir)
    finally:
        if log_path != shown:
            _upload_log(log_path, shown)


@contextlib.contextmanager
def out_of_collection():
    """What this process has loaded and planned (Beam's modules are objects by the million) lives
    to the build's end: it is kept out of the collector's full passes, which walked all of it
    again and again while the in-process runner's bundles ran, and handed back after."""
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def _upload_log(local: str, target: str) -> None:
    """The log of a build on an object store, to its place there; kept locally if that fails."""
    try:
        fsio.upload(local, target)
    except Exception as err:  # the store's own error, whatever client raised it; the build's outcome stands
        note(f"Beam's log stays at {local}: it could not be written to {target} ({err})")
    else:
        os.remove(local)


# How long a failed run waits for the pool's report of a dead worker (it takes milliseconds).
DEATH_REPORT_SECONDS = 2.0


def _refuse_empty_build(dump: str, text: StageManifest, phase_dirs: list[str]) -> None:
    """Undo a build that found nothing to write, and say so: its manifests would make a later
    run "resume" from nothing."""
    folders = [text.folder, *phase_dirs]
    fsio.delete([fsio.join(f, MANIFEST) for f in folders if fsio.exists(fsio.join(f, MANIFEST))])
    for folder in folders:  # and the folders it made, now empty, so nothing looks built
        if fsio.is_local(folder):
            with contextlib.suppress(OSError):
                os.removedirs(folder)
    counts = text.manifest["counts"]
    skipped = ", ".join(f"{k.removeprefix('skipped_')} {v}" for k, v in counts.items() if k.startswith("skipped_"))
    raise BertdataError(f"{dump}: no articles in this dump ({counts.get('pages', 0)} pages; "
                        f"skipped: {skipped or 'none'})")
