"""`bertdata build`: the whole job, dump -> text shards -> hdf5 shards, as one Beam pipeline."""

from __future__ import annotations

import argparse
import copy
import gc
import importlib.util
import signal
from collections import Counter

from bertdata.commands.options import add_dump_options, add_instance_options, add_tokenizer_options, instance_fields
from bertdata.commands.stops import STOP_SIGNALS, stopped_by_signals
from bertdata.config import (BOTH_FORMATS, PHASE1, PHASE2, SPLITTERS, BuildConfig, DocumentConfig, LddlConfig,
                             RunnerConfig, TextConfig)
from bertdata.errors import BertdataError

HELP = """\
Build BERT pretraining data the way the NGC PyTorch BERT recipe lays it out:

  1. download the English Wikipedia multistream dump (or take --dump / --sample)
  2. clean the wikitext, split sentences (NLTK punkt), write text shards
     OUTPUT/sharded_training_shards_256_test_shards_256_fraction_0.1/wikicorpus_en/
  3. tokenize (WordPiece) and make masked-LM / next-sentence instances, written as
     OUTPUT/hdf5_lower_case_1_seq_len_128_max_pred_20_masked_lm_prob_0.15_random_seed_12345_dupe_factor_5/wikicorpus_en/
     (phase 1) and ..._seq_len_512_max_pred_80_... (phase 2); with
     --masking-scheme whole-word the names end in _whole_word_mask
  4. with --format lddl or both: the same training instances as LDDL parquet, the
     input of NGC's current recipe (lddl.torch.get_bert_pretrain_data_loader):
     OUTPUT/pretrain/phase1/unbinned/parquet/shard-<i>.parquet,
     OUTPUT/pretrain/phase2/bin_size_64/parquet/shard-<i>.parquet_<bin>, and the
     vocab at OUTPUT/vocab/vocab, where NGC's run_pretraining.sh looks. Each bin's
     files are balanced as LDDL's loader demands (the largest one row longer than
     the smallest: a bin whose rows divide evenly loses its last row)
  5. with --format megatron: Megatron-LM's indexed dataset, every document's
     tokenized sentences (one sequence per sentence), one pair per split:
     OUTPUT/megatron/lower_case_1/wikicorpus_en_training_text_sentence.bin/.idx,
     read by Megatron-LM and NeMo with --data-path PREFIX (without .bin/.idx)
  6. with a format holding documents (see --format): the data of today's
     MLM-only encoders, one sample per document (or per piece of a longer one,
     cut at sentence boundaries; --max-seq-length, 1,024 by default), in
     --tokenizer's ids (any Hugging Face tokenizer.json: BPE, Unigram,
     WordPiece) or the vocab's

Each folder gets a manifest.json (versions, dump checksum, options, counts, each
shard's sha256); Beam's own output goes to OUTPUT/build.log. Re-running the same
command resumes: finished stages and shards are kept, missing ones are made;
--force redoes everything. Outputs are byte-identical for the same inputs and
seed whatever the runner or worker count.

Before any work the free disk at OUTPUT is checked against an estimate of the
output plus temporaries (from the dump's size, formats and phases); a build that
would not fit is refused with the numbers (--ignore-disk-check goes on). --dry-run
prints the plan -- stages to run or reuse, shard counts, workers, the disk and
time estimates -- and writes nothing. A worker process that dies (killed, out of
memory) stops the build with one line naming it and the cause; re-run to resume.
Ctrl-C, Ctrl-\\, SIGTERM and SIGHUP stop it too. Either way its workers are
ended and its temporaries (the work folder, half-written files) and lock removed;
a build refused before any work leaves no folder behind.

Each shard's seed is derived from --random-seed and the shard's name;
--same-seed-per-shard reproduces the reference, where every shard uses the seed.

runners (--runner):
  local      Beam FnApiRunner, one process per worker (default; --workers N)
  in-memory  FnApiRunner inside this process (debugging)
  dask       Beam's DaskRunner: pass the scheduler after --, e.g.
             -- --dask_client_address=tcp://10.0.0.5:8786
  other      any Beam runner name (DataflowRunner, FlinkRunner, SparkRunner...):
             its pipeline options go after --, and --output, --dump may be
             gs://, s3:// or hdfs:// paths

examples:
  bertdata build --wiki-only                          latest enwiki, both phases
  bertdata build --wiki-only --sample --output demo   bundled sample, offline
  bertdata build --wiki-only --dump enwiki-20240601-pages-articles-multistream.xml.bz2 --phase 1
  bertdata build --wiki-only --dump dump.xml.bz2 --stop-after text
  bertdata build --wiki-only --format lddl --num-shards 256   NGC's current recipe
  bertdata build --wiki-only --format hdf5 megatron   hdf5 shards and Megatron pairs
  bertdata build --books books/ --phase both          Wikipedia + your books
  bertdata build --books books/ --dedup --decontaminate squad/dev-v1.1.json
                                                      copies and SQuAD's paragraphs out (docs/dedup.md)
  bertdata build --recipe mixture.yaml --format mds parquet --tokenizer tokenizer.json
                                                      FineWeb-Edu, C4, Dolma... mixed (docs/recipes.md)
  bertdata build --wiki-only --runner DataflowRunner --output gs://bucket/bert -- \\
      --project my-project --region us-central1 --temp_location gs://bucket/tmp
"""

PHASES = {"1": (PHASE1,), "2": (PHASE2,), "both": (PHASE1, PHASE2)}


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("build", help="dump -> text shards -> hdf5 shards (the whole job)",
                       description=HELP, formatter_class=_HelpFormatter)
    src = p.add_argument_group("sources")
    src.add_argument("--wiki-only", action="store_true", help="Wikipedia alone (BookCorpus has no public download)")
    src.add_argument("--books", metavar="DIR", help="plain-text books, one per file, mixed in (dataset books_wiki_en_corpus)")
    src.add_argument("--recipe", metavar="YAML",
                     help="build from a recipe's corpora instead of a dump: parquet, JSON lines, text and Wikipedia "
                          "corpora, each filtered (where:, min_tokens:), mixed by shares of the output's tokens "
                          "(mix:); every sample's id names its corpus and document (docs/recipes.md)")
    src.add_argument("--sample", action="store_true",
                     help="use the small bundled dump and vocab (offline)")
    src.add_argument("--dump", metavar="PATH|URL", help="a dump to use instead of downloading (.xml, .bz2, multistream .bz2)")
    src.add_argument("--index", metavar="PATH", help="its multistream index (default: found beside the dump)")
    add_dump_options(src)
    src.add_argument("--lang", metavar="CODE",
                     help="the dump's language, where neither its <siteinfo> nor its file name (bgwiki-...) "
                          "says; refused if it contradicts the dump")
    src.add_argument("--punkt-language", metavar="MODEL",
                     help="split sentences with this NLTK punkt model (e.g. russian for Bulgarian) instead of the "
                          "language's own; a language without one otherwise gets punkt trained on the dump's text")
    src.add_argument("--splitter", choices=SPLITTERS, default=BuildConfig.splitter,
                     help="fast: punkt's boundaries found by bertdata's own code, several times faster; nltk: by "
                          f"NLTK's, the reference; both give the same sentences (default: {BuildConfig.splitter})")
    add_tokenizer_options(src, "bert-base-uncased's for English, bert-base-multilingual-cased's for "
                               "other languages, downloaded once and cached")

    text = p.add_argument_group("text shards")
    text.add_argument("--training-shards", type=int, metavar="N",
                      help=f"training text shards (default {TextConfig.training_shards}, halved while a shard "
                           f"would hold fewer than {TextConfig.min_shard_documents} articles: next-sentence pairs "
                           "need other documents in the shard; a count you give is kept, with a warning if its "
                           "shards come out that small)")
    text.add_argument("--test-shards", type=int, metavar="N",
                      help=f"test text shards (default {TextConfig.test_shards}, likewise)")
    text.add_argument("--test-fraction", type=float, default=TextConfig.test_fraction, metavar="F",
                      help=f"share of articles for test (default: {TextConfig.test_fraction})")
    text.add_argument("--keep-lists", action="store_true",
                      help="keep every list item (bullets, numbered items, indented lines, definitions) whole, "
                           "and 'List of' pages whatever they hold. By default only prose is kept, as BERT's "
                           "recipe ignores lists, tables and headers: indented lines and definitions where they "
                           "are whole sentences, no bullet or numbered item; and a page that says it is a list "
                           "or a disambiguation (its title, a disambiguation template, a first paragraph that "
                           "'may refer to:') is skipped, and counted as list_page or disambiguation, where its "
                           "list items outweigh its prose")

    text.add_argument("--dedup", action="store_true",
                      help="remove exact copies and MinHash near-duplicates (word 5-grams, 14 bands of 8) among "
                           "the dump's articles and the books, keeping the first (wiki before books, then the "
                           "smallest page id or name); dedup.jsonl beside the text shards names each one removed "
                           "(a recipe's dedup: does the same: docs/dedup.md)")
    text.add_argument("--decontaminate", nargs="+", metavar="FILE[=KEY]", default=[],
                      help="remove every article or book that shares a 13-gram with these evaluation files: a "
                           "SQuAD .json as it is; a .tsv, .jsonl, .json or .parquet file with its text column "
                           "or key named (glue/sst2/dev.tsv=sentence)")

    inst = p.add_argument_group("instances (reference flags)")
    inst.add_argument("--phase", choices=tuple(PHASES), default="both",
                      help=f"1: seq {PHASE1.max_seq_length} / {PHASE1.max_predictions_per_seq} predictions, "
                           f"2: seq {PHASE2.max_seq_length} / {PHASE2.max_predictions_per_seq}, both (default)")
    add_instance_options(inst, phase_fields=False)
    inst.add_argument("--same-seed-per-shard", action="store_true",
                      help="every shard uses --random-seed as is, like the reference")

    out = p.add_argument_group("output format")
    # The formats' lines are theirs (bertdata.formats), read only when the help is shown.
    # Given twice, its values add up (--format mds --format parquet: both).
    out.add_argument("--format", nargs="+", action="extend", metavar="FORMAT", help=_format_help)
    out.add_argument("--masking", choices=("static", "dynamic"), default=LddlConfig.masking,
                     help="lddl: keep the instances' masks, or leave masking to the loader each epoch "
                          f"(default: {LddlConfig.masking})")
    out.add_argument("--bin-size", type=int, default=LddlConfig.bin_size, metavar="N",
                     help="lddl: phase 2 in bins of N tokens by length, so batches pad less; 0: unbinned; "
                          f"phase 1 is unbinned, as NGC's script (default: {LddlConfig.bin_size})")
    out.add_argument("--num-shards", type=int, metavar="N",
                     help="lddl: parquet files per bin; must divide by training ranks x loader workers "
                          "(default: one per training text shard, 2 at least)")

    docs = p.add_argument_group("formats holding documents")
    # Its own dest: the phases' max_seq_length is --phase's, never a flag of build's.
    docs.add_argument("--max-seq-length", dest="document_length", type=int, metavar="N",
                      help="tokens per sample at most, special tokens included; a longer document "
                           "is cut at sentence boundaries into pieces, one sample each (default: "
                           f"{DocumentConfig.max_seq_length})")
    docs.add_argument("--tokenizer", metavar="FILE",
                      help="a Hugging Face tokenizers file (tokenizer.json: BPE, Unigram or WordPiece) for the "
                           "formats holding documents, its own special tokens around each sample (default: the "
                           "WordPiece --vocab, [CLS] ... [SEP])")
    _add_format_flags(docs)

    run_ = p.add_argument_group("run")
    run_.add_argument("--output", default=BuildConfig.output, metavar="DIR",
                      help=f"output folder (default: ./{BuildConfig.output})")
    run_.add_argument("--stop-after", choices=("download", "text"), help="stop after this stage")
    run_.add_argument("--force", action="store_true", help="redo every stage and shard")
    run_.add_argument("--dry-run", action="store_true",
                      help="print the plan -- stages to run or reuse, shard counts, workers, the disk and time "
                           "estimates -- and write nothing")
    run_.add_argument("--ignore-disk-check", action="store_true",
                      help="go on when the free disk at --output is less than the estimate of the output plus "
                           "temporaries (checked before any work; --force is not it: that redoes every stage)")
    run_.add_argument("--runner", default=RunnerConfig.runner, metavar="NAME",
                      help=f"local, in-memory, dask, or a Beam runner (default: {RunnerConfig.runner})")
    run_.add_argument("--workers", type=int, metavar="N",
                      help="local worker processes, at most one per core (default: one per core; 1 runs in "
                           "this process)")
    p.add_argument("beam_args", nargs="*", metavar="-- BEAM_OPTION", help="Beam pipeline options, after --")
    p.set_defaults(run=run)


def _format_help() -> str:
    from bertdata import formats

    lines = "; ".join(f"{name}: {_described(name)}" for name in formats.names())
    return (f"one or more of: {lines}; both: hdf5 and lddl, the same instances in each "
            f"(default: {BuildConfig.formats[0]})")


def _described(name: str) -> str:
    from bertdata import formats

    try:
        return formats.describe(name)
    except BertdataError as err:  # a plugin that fails to import: --help still shows, naming it
        return f"(cannot be loaded: {err})"


class _HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Help that may be a function, called when the help is shown (so that making the parser
    imports no format's module)."""

    def _format_action(self, action):
        if callable(action.help):
            action = copy.copy(action)
            action.help = action.help()
        return super()._format_action(action)


def _add_format_flags(group) -> None:
    """Each format's own flags, --<format>-<flag>. Formats register lazily, so the flags of the
    built-in ones are known by name: their modules state them (FormatFlag)."""
    from bertdata import formats

    for name in formats.names():
        try:
            flags = formats.flags_of(name)
        except BertdataError:  # a plugin that fails to import: a build naming it says so, in one line
            continue
        for flag in flags:
            group.add_argument(f"--{name}-{flag.name}", dest=f"format_flag:{name}:{flag.name}", default=flag.default,
                               choices=flag.choices, help=f"{name}: {flag.help}")


def _format_flags(args) -> tuple[tuple[str, str, object], ...]:
    return tuple((*dest.split(":")[1:], value) for dest, value in sorted(vars(args).items())
                 if dest.startswith("format_flag:") and value is not None)


def config_from_args(args: argparse.Namespace):
    from dataclasses import replace

    if args.workers is not None and args.workers < 1:
        raise BertdataError(f"--workers must be at least 1 (got {args.workers}); leave it out for one per core")
    workers = args.workers
    if workers is not None and args.runner == "local":
        from bertdata.pipelines.runtime.log import note
        from bertdata.pipelines.runtime.pool import cores

        if workers > cores():
            note(f"--workers {workers} is more than the {cores()} cores this process may use: running "
                 f"{cores()}, as more would only take turns on them")
            workers = cores()
    fixed = args.training_shards is not None or args.test_shards is not None
    text = TextConfig(
        training_shards=args.training_shards if args.training_shards is not None else TextConfig.training_shards,
        test_shards=args.test_shards if args.test_shards is not None else TextConfig.test_shards,
        fixed_shards=fixed,
        test_fraction=args.test_fraction,
        lowercase=not args.cased,
        keep_lists=args.keep_lists,
    )
    phases = tuple(replace(p, **instance_fields(args)) for p in PHASES[args.phase])
    formats = _formats(args.format or list(BuildConfig.formats))
    documents = DocumentConfig(tokenizer=args.tokenizer, **({} if args.document_length is None else
                                                            {"max_seq_length": args.document_length}))
    _check_flags_have_a_format(args, formats)
    if args.decontaminate:  # each value's shape, before anything is read
        from bertdata.dedup.evals import flag_set

        for value in args.decontaminate:
            flag_set(value)
    _check_formats_reach_workers(formats, args.runner, workers)
    return BuildConfig(
        output=args.output, dump=args.dump, index=args.index, date=args.date, mirror=args.mirror, wiki=args.wiki,
        lang=args.lang, punkt_language=args.punkt_language, splitter=args.splitter,
        sample=args.sample, wiki_only=args.wiki_only, books=args.books, recipe=args.recipe, vocab=args.vocab,
        dedup=args.dedup, decontaminate=tuple(args.decontaminate),
        text=text,
        phases=phases, same_seed_per_shard=args.same_seed_per_shard, stop_after=args.stop_after,
        force=args.force, runner=RunnerConfig(args.runner, workers or 0, tuple(args.beam_args)),
        formats=formats,
        lddl=LddlConfig(masking=args.masking, bin_size=args.bin_size or None, num_shards=args.num_shards),
        documents=documents,
        format_flags=_format_flags(args),
        check_disk=not args.ignore_disk_check,
    )


def _formats(given: list[str]) -> tuple[str, ...]:
    """--format's values in the order given, `both` spelled out, each format loaded."""

    from bertdata.formats import get, names

    chosen = tuple(f for value in given for f in (BOTH_FORMATS if value == "both" else (value,)))
    if set(chosen) - set(names()) or len(set(chosen)) != len(chosen):
        raise BertdataError(f"--format must be one or more of {', '.join(names())}, each once, or both "
                            f"(hdf5 and lddl) (got {', '.join(chosen) or 'none'})")
    for name in chosen:  # a plugin that fails to import is refused here, in one line, before any output
        get(name)
    return chosen


def _check_formats_reach_workers(chosen: tuple[str, ...], runner: str, workers: int | None) -> None:
    """Refuse a format `formats.register` added (it lives in this process alone) where the
    build's work runs in other processes: local workers, Dask, a cluster."""
    from bertdata import formats

    in_process = runner == "in-memory" or (runner == "local" and workers == 1)
    registered = [name for name in chosen if formats.in_process_only(name)]
    if registered and not in_process:
        raise BertdataError(f"--format {registered[0]}: registered in this process (formats.register), which no "
                            "worker process sees; install it as a plugin (entry point group bertdata.formats), "
                            "or build with --workers 1 or --runner in-memory")


def _check_flags_have_a_format(args: argparse.Namespace, chosen: tuple[str, ...]) -> None:
    """Refuse a flag that no format --format names would read: left, it would be ignored without
    a word (as `shard` refuses --masking without lddl)."""
    from bertdata import formats

    given = [("--tokenizer", args.tokenizer is not None, lambda f: f.cut == formats.PER_SPLIT),
             ("--max-seq-length", args.document_length is not None, lambda f: f.holds == formats.DOCUMENTS)]
    for flag, used, reads in given:
        if used and not any(reads(formats.get(name)) for name in chosen):
            readers = [name for name in formats.names() if reads(formats.get(name))]
            raise BertdataError(f"{flag} is read by {', '.join(readers)} alone, and --format names none of them "
                                f"({', '.join(chosen)})")
    for name, flag, _value in _format_flags(args):
        if name not in chosen:
            raise BertdataError(f"--{name}-{flag} is {name}'s, and --format does not name {name} "
                                f"({', '.join(chosen)})")


def run(args: argparse.Namespace) -> int:
    cfg = config_from_args(args)
    if args.dry_run:
        from bertdata.pipelines.plan import dry_run
        from bertdata.pipelines.runtime.runners import check_runner, runner_workers

        check_runner(cfg.runner)
        print("\n".join(dry_run(cfg, runner_workers(cfg.runner))))
        return 0
    from bertdata.pipelines.runtime.pool import worker_pool

    # The pool's server imports Beam and our modules on another core while this process does.
    with stopped_by_signals(signal.SIGINT, *STOP_SIGNALS) as on_stop, worker_pool(cfg.runner) as pool:
        if pool is not None:
            on_stop.append(pool.stop)
        # Beam's import makes objects by the million, all for the life of the process: the
        # collector's full passes over them as they come find nothing (the build hands them
        # back when its pipeline has run).
        gc.disable()
        try:
            from bertdata.pipelines.build import run_build
        finally:
            gc.freeze()
            gc.enable()

        summary = run_build(cfg, pool)
    if "text" in summary:  # not after --stop-after download
        print_summary(summary)
    return 0


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


def print_corpora(text: dict) -> None:
    """A recipe build's line per corpus: documents read, kept and dropped by reason, its tokens' share."""
    for name, figures in text["corpora"].items():
        dropped = ", ".join(f"{reason} {n:,}" for reason, n in figures["dropped"].items() if n) or "none"
        share = (f"; share {figures['share']:.3f}" + (f" (asked {figures['asked']:.3f})"
                 if figures.get("asked") is not None else "")) if figures.get("share") is not None else ""
        print(f"{name}: {figures['read']:,} documents read -> {figures['documents']:,} kept (dropped: {dropped})"
              + share)


def print_summary(summary: dict) -> None:
    """What a build made, read back from its manifests (see bertdata.pipelines.build)."""
    from bertdata import formats
    from bertdata.text.languages import describe_skipped_namespaces
    from bertdata.pipelines.stages.text import NAMESPACE_PREFIX

    text = summary["text"]
    if text and "corpora" in text:
        print_corpora(text)
    c = Counter(text["counts"]) if text else Counter()
    q = text.get("quality", {}) if text else {}
    skipped = [f"{k.removeprefix('skipped_')} {v:,}" for k, v in sorted(c.items())
               if k.startswith("skipped_") and k != "skipped_namespace"]
    outside = {int(k.removeprefix(NAMESPACE_PREFIX)): v for k, v in c.items() if k.startswith(NAMESPACE_PREFIX)}
    if outside:
        skipped.insert(0, describe_skipped_namespaces(outside, summary["siteinfo"]))
    if c["pages"] or not text or "corpora" not in text:
        print(f"pages {c['pages']:,} -> articles {c['articles']:,} (skipped: {', '.join(skipped) or 'none'})"
              + (f", books {c['books']:,}" if c["books"] else ""))
    print(f"text: {c['sentences'] + c['book_sentences']:,} sentences in {c['text_shards']} shards"
          + (f"; {q['sentences_per_article']} sentences per article, {q['words_per_sentence']} words per sentence, "
             f"{100 * q['unterminated_share']:.1f}% without end punctuation" if q else ""))
    if text:
        print_shard_choice(text, summary["requested"])
    for name, folder, manifest in summary["outputs"]:  # each format says its own line
        print(formats.get(name).summary(folder, manifest))
    print(f"done in {summary['seconds']:.1f} s")
    # Where a trainer's data is: the first folder of a format holding instances.
    first = next((folder for name, folder, _ in summary["outputs"] if formats.get(name).holds == formats.INSTANCES),
                 None)
    if first is not None:
        # bench needs torch, which only the bench extra installs: the line says so where it is missing.
        torch = "" if importlib.util.find_spec("torch") else "   (needs torch: pip install 'bertdata[bench]')"
        print(f"next:\n  bertdata inspect {first}\n  bertdata shard {first} --parts 100 --output parts\n"
              f"  bertdata bench --data {first} --model tiny --device cpu --batch-size 8 --steps 5{torch}")
