"""`bertdata build`: dump (and books) -> text shards -> hdf5 shards and/or LDDL folders for each
phase, with manifests.

The launcher resolves the inputs (bertdata.pipelines.inputs), decides what a re-run can reuse
(resume), runs ONE Beam pipeline (one start-up) whose last steps write the manifests
(manifests), then prints a summary read back from them.
"""

from __future__ import annotations

import contextlib
import functools
import os
import time
from collections import Counter
from dataclasses import asdict, replace

import apache_beam as beam

from bertdata.config import BuildConfig, TextConfig, phase_number
from bertdata.errors import BertdataError, WorkerLost
from bertdata.fsutil import folder_lock
from bertdata.text.languages import ENGLISH_CODES, describe_skipped_namespaces
from bertdata.formats import ACROSS_SHARDS, PER_SHARD, PER_SPLIT, lddl
from bertdata.formats.megatron import folder_name as megatron_folder
from bertdata.instances.create import generation_attrs
from bertdata.text.shards import BOOKS_WIKI_DATASET, TextShard, WORK_FOLDER
from bertdata.manifest import MANIFEST, RUN_KEY, HDF5Shard, Run, tool_record
from bertdata.text.sentences import choose_punkt
from bertdata.instances.vocab import is_cased
from bertdata.text.wikitext import RULES_VERSION
from bertdata.pipelines import fsio, progress
from bertdata.pipelines.formats import chosen_format
from bertdata.pipelines.failures import user_error
from bertdata.pipelines.inputs import list_books, resolve_inputs, sentence_splitter
from bertdata.pipelines.instances import PhaseOutput, ShardOutput, TextShardsToInstances
from bertdata.pipelines.lddl import (InstancesToLddl, LddlFile, LddlPhase, PhasePlan, ShardRuns, WriteLddlManifests,
                                     prepare_folder, runs_folder as lddl_runs_folder)
from bertdata.pipelines.log import beam_output_to, note
from bertdata.pipelines.manifests import WriteHDF5Manifests, WriteTextManifest
from bertdata.pipelines.megatron import (MegatronOutput, MegatronPart, MergeMegatronParts,
                                         parts_folder as megatron_parts_folder, prepare_folder as prepare_megatron,
                                         sources as megatron_sources)
from bertdata.pipelines.records import GatherStage
from bertdata.pipelines.resume import (RULES, StageManifest, check_vocab_unchanged, read_manifest, remove_leftovers,
                                       remove_temporaries, reusable_text_stage, text_stage_folders,
                                       this_runs_text_manifest)
from bertdata.pipelines.plan import check_disk, local_dump
from bertdata.pipelines.pool import WorkerDied, WorkerPool
from bertdata.pipelines.runners import check_runner, make_pipeline, runner_workers, spare_cores
from bertdata.pipelines.stores import store_lock, store_of, use_stores
from bertdata.pipelines.text import NAMESPACE_PREFIX, DumpToTextShards
from bertdata.pipelines.work import work_groups, work_items


def run_build(cfg: BuildConfig, pool: WorkerPool | None = None) -> dict:
    """Run the build `cfg` describes; local workers are forked by `pool` when given."""
    started = time.time()
    check_runner(cfg.runner)
    args = use_stores((cfg.output, cfg.dump, cfg.index, cfg.vocab, cfg.books), cfg.runner.beam_args)
    cfg = replace(cfg, runner=replace(cfg.runner, beam_args=args))
    dump = local_dump(cfg)
    if dump is not None:  # else once it is downloaded
        check_disk(cfg, dump)
    check_output(cfg.output)
    # One build per output folder: two would replace each other's shards and temporaries.
    with output_lock(cfg.output, "bertdata build") as notes:
        for line in notes:
            note(line)
        return _build(cfg, started, pool)


def output_lock(folder: str, what: str):
    """One writer per output folder, on local disk or an object store (elsewhere, as on
    hdfs://, the user keeps builds apart)."""
    if fsio.is_local(folder):
        return folder_lock(folder, what)
    if store_of(folder) is not None:
        return store_lock(folder, what, fsio.options())
    return contextlib.nullcontext([])


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


def _build(cfg: BuildConfig, started: float, pool: WorkerPool | None) -> dict:
    inputs = resolve_inputs(cfg)
    dump, index, dump_record, vocab, site = inputs.dump, inputs.index, inputs.record, inputs.vocab, inputs.site
    note(f"dump {dump_record['name']} ({dump_record['bytes'] / 1e6:.1f} MB, sha1 {dump_record['sha1'][:12]}…), "
         f"vocab {vocab.path} ({len(vocab)} tokens)")
    if cfg.stop_after == "download":
        return {"dump": dump_record}
    if local_dump(cfg) is None and fsio.is_local(dump):
        check_disk(cfg, dump)
    books = list_books(cfg.books)
    english = site.language in ENGLISH_CODES
    dataset = (BOOKS_WIKI_DATASET if english else f"books_wiki_{site.language}_corpus") if books else site.dataset
    t = cfg.text
    if t.lowercase and is_cased(vocab):
        if cfg.vocab is None:  # the multilingual vocab: cased text is what it was made from
            t = replace(t, lowercase=False)
        else:
            note(f"warning: {vocab.path} is a cased vocab but text is lower-cased; pass --cased to keep case")
    punkt = choose_punkt(site.language, cfg.punkt_language)
    note(punkt.notice)
    splitter = sentence_splitter(punkt, dump, site, cfg.splitter)
    text_dirs = text_stage_folders(cfg.output, t, dataset)
    work_dir = fsio.join(cfg.output, WORK_FOLDER)
    chosen = () if cfg.stop_after == "text" else cfg.phases
    # The stages follow from how each chosen format is cut (bertdata.formats): files per text shard
    # are written where the shard's instances are made; the other cuts have stages of their own.
    per_shard = chosen_format(cfg, PER_SHARD)
    phases = [(p, fsio.join(cfg.output, per_shard.folder(p, t.lowercase), dataset)) for p in chosen] \
        if per_shard else []
    text_options = {"text": asdict(t), "books": [fsio.split(b)[1] for b in books],
                    "dataset": dataset, RULES: RULES_VERSION, "language": site.language,
                    "punkt": punkt.model or "trained on the dump"}
    if per_shard:
        check_vocab_unchanged(per_shard, [d for _, d in phases], vocab, cfg.force)
    reuse = reusable_text_stage(text_dirs, dump_record, text_options, cfg.force)
    remove_leftovers([d for _, d in phases], text_dirs, work_dir, redo_text=reuse is None)
    workers = runner_workers(cfg.runner)
    cfg = replace(cfg, runner=replace(cfg.runner, workers=workers))  # asked once of a cluster

    tool, run = tool_record("bertdata build"), Run(started, cfg.runner.runner, workers)

    def instance_options(p) -> dict:
        return {**text_options, "instances": p.record(), "vocab_sha256": vocab.sha256, "vocab_size": len(vocab),
                "lowercase": t.lowercase, "seed_per_shard": "same" if cfg.same_seed_per_shard else "derived"}

    phase_options = {folder: instance_options(p) for p, folder in phases}
    lddl_phases, lddl_fields = _lddl_phases(cfg, chosen, work_dir, instance_options, vocab, t.lowercase)
    folders = dict(phases)
    outputs = [PhaseOutput(p, ShardOutput(per_shard, folders[p]) if p in folders else None, lddl_phases.get(p))
               for p in chosen]
    outputs = [o for o in outputs if o.shards is not None or o.lddl is not None]
    megatron, megatron_options = _megatron_output(cfg, dataset, vocab, t.lowercase, work_dir, reuse)

    pipeline = make_pipeline(cfg.runner, pool)
    items = None
    finder = functools.partial(this_runs_text_manifest, cfg.output, text_dirs, run.started_at)
    if reuse is None:
        note(f"text stage: {dump_record['name']}{f' + {len(books)} books' if books else ''} -> "
             f"{fsio.join(cfg.output, 'sharded_*', dataset)}")
        items = work_items(dump, index, workers)
        records = (pipeline
                   | "Text" >> DumpToTextShards(work_groups(items, books, workers), t, cfg.output, dataset, work_dir,
                                                splitter, site.markup, prefetch=spare_cores(cfg.runner))
                   | "GatherText" >> GatherStage(TextShard)
                   | "TextManifest" >> beam.ParDo(WriteTextManifest(tool, run, dump_record, text_options, work_dir)))
    else:
        note(f"text stage already complete in {reuse.plan.folder}: reusing {len(reuse.shards)} text shards")
        records = pipeline | "FinishedTextShards" >> beam.Create(reuse.records())
    if outputs or megatron is not None:
        records = (records
                   | "Instances" >> TextShardsToInstances(vocab, outputs, t.lowercase, cfg.same_seed_per_shard,
                                                          cfg.force, megatron)
                   | "GatherInstances" >> GatherStage((HDF5Shard, ShardRuns, MegatronPart))
                   | "HDF5Manifests" >> beam.ParDo(WriteHDF5Manifests(tool, run, dump_record, phase_options)))
    if megatron is not None:
        records = records | "Megatron" >> MergeMegatronParts(megatron, tool, run, dump_record, megatron_options)
    if lddl_phases:
        by_folder = {phase.folder: phase for phase in lddl_phases.values()}
        _ = (records
             | "Lddl" >> InstancesToLddl(by_folder)
             | "GatherLddl" >> GatherStage((LddlFile, PhasePlan))
             | "LddlManifests" >> beam.ParDo(WriteLddlManifests(tool, run, dump_record, lddl_fields)))
    note(f"running on {cfg.runner.runner} runner, {workers} worker(s); Beam's own output goes to build.log")
    ranges = sum(item.marker is not None for item in items) if items else 0
    run_pipeline(pipeline, cfg.output, work_dir, finder, ranges or None,
                 [fsio.join(d, per_shard.pattern()) for _, d in phases], pool)

    text = finder() if reuse is None else StageManifest(reuse.plan.folder, read_manifest(reuse.plan.folder))
    if not text.manifest["counts"].get("articles") and not text.manifest["counts"].get("books"):
        _refuse_empty_build(dump, text, [d for _, d in phases] + _megatron_folders(cfg, t.lowercase))
    summary = {"seconds": time.time() - started, "text": text.manifest, "text_dir": text.folder, "requested": t,
               "siteinfo": site.siteinfo, "phases": {folder: read_manifest(folder) for _, folder in phases},
               "lddl": {folder: read_manifest(folder) for folder in _lddl_folders(cfg, chosen)},
               "megatron": {folder: read_manifest(folder) for folder in _megatron_folders(cfg, t.lowercase)}}
    print_summary(summary)
    return summary


def _megatron_folders(cfg: BuildConfig, lowercase: bool) -> list[str]:
    if chosen_format(cfg, PER_SPLIT) is None or cfg.stop_after == "text":
        return []
    return [fsio.join(cfg.output, megatron_folder(lowercase))]


def _megatron_output(cfg: BuildConfig, dataset: str, vocab, lowercase: bool, work_dir: str,
                     reuse) -> tuple[MegatronOutput | None, dict]:
    """The Megatron folder this run writes (None: not asked for, or already finished), and its
    manifest's options."""
    from bertdata.formats.megatron import token_dtype

    options = {"dataset": dataset, "vocab_sha256": vocab.sha256, "vocab_size": len(vocab), "lowercase": lowercase,
               "dtype": token_dtype(len(vocab)).name}
    for folder in _megatron_folders(cfg, lowercase):
        out = MegatronOutput(folder, megatron_parts_folder(work_dir), dataset, len(vocab))
        finished = None if reuse is None else megatron_sources(list(reuse.shards))
        if prepare_megatron(out, options, finished, cfg.force):
            return out, options
        note(f"{folder}: already complete, kept")
    return None, options


def _lddl_folders(cfg: BuildConfig, chosen) -> list[str]:
    if chosen_format(cfg, ACROSS_SHARDS) is None:
        return []
    return [fsio.join(cfg.output, lddl.folder_name(phase_number(p), cfg.lddl.bin_size_for(p))) for p in chosen]


def _lddl_phases(cfg: BuildConfig, chosen, work_dir: str, instance_options, vocab,
                 lowercase: bool) -> tuple[dict, dict[str, dict]]:
    """The LDDL folders this run writes, by phase ({InstanceConfig: LddlPhase}; a finished one is
    left out), and each folder's manifest fields; the vocab goes where NGC's script looks."""
    phases, fields = {}, {}
    folders = _lddl_folders(cfg, chosen)
    if not folders:
        return phases, fields
    vocab_path = fsio.join(cfg.output, lddl.VOCAB_PATH)
    vocab_bytes = fsio.read_bytes(vocab.path)
    if fsio.exists(vocab_path) and fsio.read_bytes(vocab_path) != vocab_bytes and not cfg.force:
        raise BertdataError(f"{vocab_path}: holds another vocab than {vocab.path}; pass --force to replace it "
                            "(and the LDDL folders made with it), or choose another --output")
    fsio.write_bytes(vocab_path, vocab_bytes)
    for p, folder in zip(chosen, folders):
        phase = LddlPhase(folder, lddl_runs_folder(work_dir), f"phase{phase_number(p)}", p.max_seq_length,
                          cfg.lddl.masking, cfg.lddl.bin_size_for(p), cfg.lddl.num_shards)
        options = {**instance_options(p), "lddl": {"masking": phase.masking, "bin_size": phase.bin_size,
                                                   "num_shards": phase.num_shards}}
        if prepare_folder(phase, options, cfg.force):
            phases[p] = phase
            fields[folder] = {"options": options, "max_seq_length": p.max_seq_length,
                              "max_predictions_per_seq": p.max_predictions_per_seq,
                              "attrs": generation_attrs(vocab, p, lowercase, p.random_seed)}
        else:
            note(f"{folder}: already complete, kept")
    return phases, fields


def run_pipeline(pipeline: beam.Pipeline, output: str, work_dir: str, text_manifest, ranges: int | None,
                 phase_dirs: list[str], pool: WorkerPool | None = None) -> None:
    log_path = os.path.join(output if fsio.is_local(output) else ".", "build.log")
    os.makedirs(os.path.dirname(log_path) or ".", exist_ok=True)
    pump = None

    def lost(death) -> WorkerLost:
        return WorkerLost(f"{death.describe()}; build stopped, temporaries and lock removed: run it again to "
                          f"resume (Beam's log: {log_path})")

    try:
        with beam_output_to(log_path) as (console, pump), progress.Watcher(console, work_dir, text_manifest, ranges,
                                                                           phase_dirs), \
                pool.stop_on_death() if pool else contextlib.nullcontext():
            pipeline.run().wait_until_finish()
    except WorkerDied as died:
        raise lost(died.death) from None
    except Exception as err:
        message = user_error(err)
        if message is None:
            # Beam may see the broken channel before the pool's report of why arrives.
            death = pool.first_death(timeout=DEATH_REPORT_SECONDS) if pool else None
            if death is not None:
                raise lost(death) from None
            raise
        incomplete = f", incomplete: {pump.failed.strerror}" if pump and pump.failed else ""
        raise BertdataError(f"{message} (Beam's log: {log_path}{incomplete})") from None
    finally:  # success, failure and Ctrl-C alike; a killed run's are removed by the next
        remove_temporaries(work_dir)


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
    for folder, manifest in summary["lddl"].items():
        lc, bins = manifest["counts"], len(manifest["bins"])
        print(f"lddl: {lc['instances']:,} training instances ({lc['dropped']} dropped to balance) in {lc['lddl_files']} "
              f"files ({bins} bin{'s' if bins > 1 else ''}, {manifest['options']['lddl']['masking']} masking) -> {folder}")
    for folder, manifest in summary["megatron"].items():
        mc = manifest["counts"]
        print(f"megatron: {mc['documents']:,} documents, {mc['sentences']:,} sentences, {mc['tokens']:,} tokens in "
              f"{mc['pairs']} pair{'s' if mc['pairs'] != 1 else ''} -> {folder}")
    print(f"done in {summary['seconds']:.1f} s")
    first = next(iter({**summary["phases"], **summary["lddl"]}), None)
    if first is not None:
        print(f"next:\n  bertdata inspect {first}\n  bertdata shard {first} --parts 100 --output PARTS\n"
              f"  bertdata bench --data {first}")
