"""`bertdata build`: the whole job, dump -> text shards -> hdf5 shards, as one Beam pipeline."""

from __future__ import annotations

import argparse

from bertdata.errors import BertdataError

HELP = """\
Build BERT pretraining data the way the NGC PyTorch BERT recipe lays it out:

  1. download the English Wikipedia multistream dump (or take --dump / --sample)
  2. clean the wikitext, split sentences (NLTK punkt), write text shards
     OUTPUT/sharded_training_shards_256_test_shards_256_fraction_0.1/wikicorpus_en/
  3. tokenize (WordPiece) and make masked-LM / next-sentence instances, written as
     OUTPUT/hdf5_lower_case_1_seq_len_128_max_pred_20_masked_lm_prob_0.15_random_seed_12345_dupe_factor_5/wikicorpus_en/
     (phase 1) and ..._seq_len_512_max_pred_80_... (phase 2)

Each folder gets a manifest.json (versions, dump checksum, options, counts, each
shard's sha256); Beam's own output goes to OUTPUT/build.log. Re-running the same
command resumes: finished stages and shards are kept, missing ones are made;
--force redoes everything. Outputs are byte-identical for the same inputs and
seed whatever the runner or worker count.

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
  bertdata build --books books/ --phase both          Wikipedia + your books
  bertdata build --wiki-only --runner DataflowRunner --output gs://bucket/bert -- \\
      --project my-project --region us-central1 --temp_location gs://bucket/tmp
"""


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("build", help="dump -> text shards -> hdf5 shards (the whole job)",
                       description=HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    src = p.add_argument_group("sources")
    src.add_argument("--wiki-only", action="store_true", help="Wikipedia alone (BookCorpus has no public download)")
    src.add_argument("--books", metavar="DIR", help="plain-text books, one per file, mixed in (dataset books_wiki_en_corpus)")
    src.add_argument("--sample", action="store_true",
                     help="use the small bundled dump and vocab (offline)")
    src.add_argument("--dump", metavar="PATH|URL", help="a dump to use instead of downloading (.xml, .bz2, multistream .bz2)")
    src.add_argument("--index", metavar="PATH", help="its multistream index (default: found beside the dump)")
    src.add_argument("--date", default="latest", metavar="YYYYMMDD", help="dump date to download (default: latest)")
    src.add_argument("--mirror", default="https://dumps.wikimedia.org", metavar="URL", help="dump host")
    src.add_argument("--wiki", default="enwiki", metavar="DBNAME",
                     help="which Wikipedia to download (default enwiki; e.g. dewiki, bgwiki)")
    src.add_argument("--lang", metavar="CODE",
                     help="the dump's language, where neither its <siteinfo> nor its file name (bgwiki-...) "
                          "says; refused if it contradicts the dump")
    src.add_argument("--punkt-language", metavar="MODEL",
                     help="split sentences with this NLTK punkt model (e.g. russian for Bulgarian) instead of the "
                          "language's own; a language without one otherwise gets punkt trained on the dump's text")
    src.add_argument("--vocab", metavar="PATH",
                     help="WordPiece vocab (default: bert-base-uncased for English, bert-base-multilingual-cased "
                          "for other languages, downloaded once)")
    src.add_argument("--cased", action="store_true", help="keep case and accents (use a cased vocab)")

    text = p.add_argument_group("text shards")
    text.add_argument("--training-shards", type=int, metavar="N",
                      help="training text shards (default 256, halved while a shard would hold fewer than 32 "
                           "articles: next-sentence pairs need other documents in the shard; a count you give "
                           "is kept, with a warning if its shards come out that small)")
    text.add_argument("--test-shards", type=int, metavar="N", help="test text shards (default 256, likewise)")
    text.add_argument("--test-fraction", type=float, default=0.1, metavar="F", help="share of articles for test (0.1)")
    text.add_argument("--keep-lists", action="store_true",
                      help="keep list items and 'List of' pages; by default only prose passages are kept, "
                           "as BERT's recipe ignores lists, tables and headers")

    inst = p.add_argument_group("instances (reference flags)")
    inst.add_argument("--phase", choices=("1", "2", "both"), default="both",
                      help="1: seq 128 / 20 predictions, 2: seq 512 / 80, both (default)")
    inst.add_argument("--dupe-factor", type=int, default=5, metavar="N", help="times each document is used (5)")
    inst.add_argument("--masked-lm-prob", type=float, default=0.15, metavar="P", help="masking probability (0.15)")
    inst.add_argument("--short-seq-prob", type=float, default=0.1, metavar="P", help="share of short targets (0.1)")
    inst.add_argument("--random-seed", type=int, default=12345, metavar="N", help="run seed (12345)")
    inst.add_argument("--same-seed-per-shard", action="store_true",
                      help="every shard uses --random-seed as is, like the reference")

    run_ = p.add_argument_group("run")
    run_.add_argument("--output", default="data", metavar="DIR", help="output folder (default ./data)")
    run_.add_argument("--stop-after", choices=("download", "text"), help="stop after this stage")
    run_.add_argument("--force", action="store_true", help="redo every stage and shard")
    run_.add_argument("--runner", default="local", metavar="NAME", help="local (default), in-memory, dask, or a Beam runner")
    run_.add_argument("--workers", type=int, metavar="N",
                      help="local worker processes (default: one per core; 1 runs in this process)")
    p.add_argument("beam_args", nargs="*", metavar="-- BEAM_OPTION", help="Beam pipeline options, after --")
    p.set_defaults(run=run)


def config_from_args(args: argparse.Namespace):
    from dataclasses import replace

    from bertdata.config import PHASE1, PHASE2, BuildConfig, RunnerConfig, TextConfig

    if args.workers is not None and args.workers < 1:
        raise BertdataError(f"--workers must be at least 1 (got {args.workers}); leave it out for one per core")
    fixed = args.training_shards is not None or args.test_shards is not None
    text = TextConfig(
        training_shards=args.training_shards if args.training_shards is not None else TextConfig.training_shards,
        test_shards=args.test_shards if args.test_shards is not None else TextConfig.test_shards,
        fixed_shards=fixed,
        test_fraction=args.test_fraction,
        lowercase=not args.cased,
        keep_lists=args.keep_lists,
    )
    chosen = {"1": (PHASE1,), "2": (PHASE2,), "both": (PHASE1, PHASE2)}[args.phase]
    phases = tuple(replace(p, dupe_factor=args.dupe_factor, masked_lm_prob=args.masked_lm_prob,
                           short_seq_prob=args.short_seq_prob, random_seed=args.random_seed) for p in chosen)
    return BuildConfig(
        output=args.output, dump=args.dump, index=args.index, date=args.date, mirror=args.mirror, wiki=args.wiki,
        lang=args.lang, punkt_language=args.punkt_language,
        sample=args.sample, wiki_only=args.wiki_only, books=args.books, vocab=args.vocab, text=text,
        phases=phases, same_seed_per_shard=args.same_seed_per_shard, stop_after=args.stop_after,
        force=args.force, runner=RunnerConfig(args.runner, args.workers or 0, tuple(args.beam_args)),
    )


def run(args: argparse.Namespace) -> int:
    cfg = config_from_args(args)
    from bertdata.pipelines.build import run_build

    run_build(cfg)
    return 0
