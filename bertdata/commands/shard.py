"""`bertdata shard`: re-partition shards into N balanced, globally shuffled parts, as hdf5 or LDDL."""

from __future__ import annotations

import argparse

from bertdata.config import RESHARD_FORMATS, ReshardConfig

DESCRIPTION = """\
Re-partition hdf5 BERT shards into N parts whose sizes differ by at most one
instance, with the instances of all inputs shuffled together, so every part
mixes every input. Parts are written as `build` writes its hdf5 shards and
are named <name>_training_<i>.hdf5 (i = 0..N-1; <name>_test_<i>.hdf5 with
--split test), which is what the NGC trainer picks up from a folder.

INPUT is an hdf5 shard or a folder searched recursively for *_training_*
files (--split test: *_test_*; --split all: every .hdf5), leaving out --output
and folders an earlier `bertdata shard` wrote there (their manifest says so),
whose parts repeat their inputs' instances. Inputs must agree
on max_seq_length, max_predictions_per_seq and, where recorded, the vocab.
The order of the result depends only on the inputs (sorted by path) and
--seed: same inputs, same seed -> byte-identical parts, whatever --workers.

Memory stays flat whatever the input size: instances are first scattered at
random into temporary bucket files (at most ~48 MB each) in a hidden folder
inside --output, then each bucket is shuffled in memory and streamed into the
parts. That folder needs free disk of about the inputs' uncompressed size
(roughly 3x their hdf5 size), checked before anything is written, and is
removed at the end, also on error, Ctrl-C, SIGTERM or SIGHUP; one left by a run killed
outright (SIGKILL) is removed by the next run here, once its process is gone.
Inputs are checked as `bertdata inspect` checks them; an invalid one stops
the run with its name and the reason. Parts appear only when all are
complete, with manifest.json (inputs
and parts with sha256, instance counts, options). A folder that already holds
parts or a manifest is replaced only with --force, which also removes old
parts the new set does not overwrite.

--format lddl writes the same shuffled instances as an LDDL folder, the input
of NVIDIA's current BERT recipe (lddl.torch.get_bert_pretrain_data_loader):
--parts files per bin, named shard-<i>.parquet (unbinned) or
shard-<i>.parquet_<bin> (--bin-size N: bins of N tokens by length), with a
.num_samples.json and manifest.json. --masking static (default) keeps the
shards' masks; dynamic writes the original tokens and lets the loader mask.
The loader needs every bin's file count to divide by training ranks x loader
workers per rank (--ranks, default 1) and its files to differ by exactly one
row: where a bin's rows divide evenly, its last row in the shuffled order is
dropped (the manifest lists each bin's drop). An LDDL folder written so is
also an input: shard it again for other --ranks, --parts or --bin-size. The
vocab (for the text of the rows) is --vocab, else the one whose sha256 the
inputs record. Files appear one by one under their final names, each complete;
--sample, --max-instances and --seed work as for hdf5. The temporary folder
sits beside --output here, not inside: the loader reads subfolders too.

examples:
  bertdata shard data/hdf5_lower_case_1_seq_len_128_*/wikicorpus_en --output parts --parts 256
  # the NGC 100-part benchmark sample: 100 parts from 5% of the instances
  bertdata shard data/hdf5_.../wikicorpus_en --output parts --parts 100 --sample 0.05
  bertdata shard a_training_0.hdf5 b_training_0.hdf5 --output mixed --parts 4 --name mixed
  bertdata shard data/hdf5_.../wikicorpus_en --split test --output parts --parts 8 --workers 4
  bertdata shard data/hdf5_..._seq_len_512_*/wikicorpus_en --format lddl --bin-size 64 --parts 64 \
      --ranks 16 --output lddl_512
  bertdata shard lddl_512 --format lddl --bin-size 64 --parts 128 --ranks 32 --output lddl_512_r32
"""


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "shard", help="re-partition shards into N balanced, globally shuffled parts (hdf5 or LDDL)",
        description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("inputs", nargs="+", metavar="INPUT", help="hdf5 shards, folders of them, or LDDL folders")
    p.add_argument("--output", required=True, metavar="DIR", help="folder for the parts (created if missing)")
    p.add_argument("--parts", required=True, type=int, metavar="N",
                   help="number of parts to write (--format lddl: files per bin)")
    p.add_argument("--format", choices=RESHARD_FORMATS, default=ReshardConfig.format,
                   help=f"output format (default: {ReshardConfig.format})")
    p.add_argument("--masking", choices=("static", "dynamic"),
                   help="lddl: keep the shards' masks (static, default) or leave masking to the loader")
    p.add_argument("--bin-size", type=int, metavar="N",
                   help="lddl: bin instances by length into bins of N tokens (default: unbinned)")
    p.add_argument("--ranks", type=int, metavar="N",
                   help="lddl: training ranks x loader workers per rank; --parts must divide by it (default: 1)")
    p.add_argument("--vocab", metavar="PATH",
                   help="vocab of the inputs, for LDDL text (default: the one whose sha256 they record)")
    p.add_argument("--split", choices=("training", "test", "all"), default=ReshardConfig.split,
                   help=f"which files to take from folders, by name (default: {ReshardConfig.split})")
    p.add_argument("--name", metavar="NAME",
                   help="part name prefix (default: the inputs' common dataset name, e.g. wikicorpus_en, "
                        "else 'shards')")
    p.add_argument("--seed", type=int, default=ReshardConfig.seed, metavar="N",
                   help=f"shuffle and sampling seed (default: {ReshardConfig.seed})")
    subset = p.add_mutually_exclusive_group()
    subset.add_argument("--sample", type=float, metavar="FRACTION",
                        help="keep a uniform random FRACTION (0 < F <= 1) of the instances")
    subset.add_argument("--max-instances", type=int, metavar="K",
                        help="keep a uniform random K instances (all, if there are fewer)")
    p.add_argument("--force", action="store_true",
                   help="replace parts and manifest already in --output")
    p.add_argument("--workers", type=int, default=ReshardConfig.workers, metavar="N",
                   help=f"processes shuffling buckets and compressing parts, at most one per core (default: "
                        f"{ReshardConfig.workers}); the output does not depend on it")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    import sys

    from bertdata.pipelines.runtime.pool import cores
    from bertdata.reshard.repartition import repartition

    workers = args.workers
    if workers > cores():
        print(f"bertdata shard: --workers {workers} is more than the {cores()} cores this process may use: "
              f"running {cores()}, as more would only take turns on them", file=sys.stderr)
        workers = cores()
    config = ReshardConfig(
        inputs=tuple(args.inputs), output=args.output, parts=args.parts, split=args.split,
        name=args.name, seed=args.seed, sample=args.sample, max_instances=args.max_instances,
        force=args.force, workers=workers, format=args.format, masking=args.masking,
        bin_size=args.bin_size, ranks=args.ranks, vocab=args.vocab,
    )
    if any("://" in p for p in [*config.inputs, config.output, config.vocab or ""]):
        from dataclasses import replace

        from bertdata.pipelines.runtime import fsio
        from bertdata.pipelines.runtime.stores import use_stores

        # Parts are made locally from local copies of the inputs, then copied onto the store.
        use_stores([*config.inputs, config.output, config.vocab])
        with fsio.staged_inputs([*config.inputs, *([config.vocab] if config.vocab else [])]) as local, \
                fsio.staged_output(config.output, config.force) as output:
            result = repartition(replace(config, inputs=tuple(local[:len(config.inputs)]), output=output,
                                         vocab=local[len(config.inputs)] if config.vocab else None))
    else:
        result = repartition(config)
    for note in result.notes:
        print(f"bertdata shard: {note}", file=sys.stderr)
    for path in result.removed:
        print(f"removed old part {path}")
    print(f"bertdata shard: {result.summary()}")
    return 0
