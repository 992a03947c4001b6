"""`bertdata bench`: pretrain BERT on the shards and report throughput like the NGC tables."""

from __future__ import annotations

import argparse
import functools

from bertdata.commands.options import add_config_flag
from bertdata.config import (DOCUMENT_MLM_PROBABILITY, MASKING_SCHEMES, MODELS, OPTIMIZERS, PRECISIONS,
                             BenchConfig)

HELP = """\
Pretrain BERT (masked LM + next sentence, LAMB) on shards for a fixed number
of steps and report throughput as NVIDIA's NGC tables do: sequences/s for all GPUs
together, plus tokens/s, step time p50/p95, time spent waiting on the input
pipeline and model FLOPs utilisation. --data is a folder of one format that
holds instances (hdf5 or lddl; Megatron pairs hold sentences and are refused),
or of documents (a build's mds or parquet folder): these train today's objective,
masked LM alone with no next sentence, each sample a packed row, --mlm-probability
of its tokens masked as batches are loaded (30%), never its special tokens.
hdf5: every file below --data whose name contains 'training' (the NGC rule), so
our shards and the reference's alike.

One optimizer step = --accumulation micro-batches of --batch-size per GPU; the
gradient all-reduce runs once, on the last micro-batch.

Only real tokens are computed: the loader's workers take the padding out of each
batch and pack its rows' tokens end to end; the encoder's dense layers run on
those, and attention runs within each row (flash attention's variable-length
kernel on CUDA in bf16/fp16). --padded runs the shards' padded rows instead. Both
report MFU on real tokens: the FLOPs a batch needs (its real tokens, attention
over each row's own length, the MLM head on masked tokens) over the time taken,
against the device's dense peak for the precision; a padded run also reports
the FLOPs it ran with its padding.

--data may also be an LDDL folder (`bertdata shard --format lddl`), read as
LDDL's loader reads it: with --padded, batches padded to their longest sequence
(rounded up to 8); one bin per batch in a binned folder, static masks from the files or
dynamic masking per batch (the reference's rule: 15% of the tokens, at most the
phase's predictions per sequence). tokens/s counts the tokens run with padding
and, apart, the real ones: compare binned and unbinned phase 2 on those. --global-batch 67584
reproduces the NGC phase-1 setup (accumulation = 67584 / (batch x GPUs)).
The first --warmup-steps are not timed, nor any step before the optimizer's first
real one (fp16 loss scaling skips steps whose gradients overflow; the first real one
allocates the optimizer state) or before every loader worker's first batch (each
reads a whole file first); the record gives the warm-up actually run. Each step is
timed on the device from the end of the one before (CUDA events, read after the
run: no host sync between steps). Shards are checked as `bertdata inspect` checks them:
an id past the model's vocab or a position past the sequence stops the run with
the file and the reason.

precisions:
  fp32   full IEEE fp32 matmuls (TF32 off, also on Ampere and later)
  tf32   fp32 with TensorFloat-32 matmuls (Ampere and later)
  amp    fp16 autocast + dynamic loss scaling (GradScaler): NGC's "AMP"
  fp16   the same as amp (NGC's flag for it is --fp16)
  bf16   bf16 autocast, no loss scaling needed
  default: amp on CUDA, fp32 on CPU

multi-GPU and multi-node:
  --gpus N re-runs the benchmark under torchrun with N processes on this machine
  (DDP over NCCL). For several machines, or for CPU processes (DDP over gloo),
  start torchrun yourself and leave --gpus out; every node runs:
    torchrun --nnodes 4 --node_rank R --nproc_per_node 8 \\
             --master_addr HOST0 --master_port 29500 \\
             -m bertdata.cli bench --data DIR --global-batch 67584
  or with elastic rendezvous instead of --node_rank/--master_*:
    torchrun --nnodes 4 --nproc_per_node 8 --rdzv_backend c10d \\
             --rdzv_endpoint HOST0:29500 --rdzv_id bert -m bertdata.cli bench ...

examples:
  bertdata bench --data parts --precision bf16 --batch-size 256 --compile
  bertdata bench --data parts --gpus 8 --batch-size 128 --global-batch 67584
  bertdata bench --data parts --matrix --json matrix.json
  bertdata bench --data parts --loader-only --batch-size 256
  bertdata bench --data parts --model tiny --device cpu --batch-size 8 --steps 5

Needs torch: pip install 'bertdata[bench]'.
"""

DEFAULT_MATRIX_BATCH = (96, 128)  # the published V100 and A100 batch sizes
DEFAULT_MATRIX_PRECISION = ("fp32", "tf32", "amp", "bf16")


def _int_list(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(x) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected integers separated by commas, got {text!r}") from None


def _str_list(text: str) -> tuple[str, ...]:
    return tuple(x.strip() for x in text.split(","))


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("bench", help="train BERT on shards and report sequences/s",
                       description=HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    flag = functools.partial(add_config_flag, p, BenchConfig)
    flag("data", "local folder of shards of one format that holds instances: hdf5 files named *training*, or "
                 "an LDDL folder; or a build's mds or parquet folder (masked LM alone); shards on an object store are read from a local copy: `bertdata shard s3://... "
                 "--output DIR` makes one", required=True, metavar="DIR")
    flag("model", "the model preset", choices=MODELS)
    flag("bert_config", "a reference bert_config.json (overrides --model)", metavar="FILE")
    p.add_argument("--batch-size", type=_int_list, metavar="N", help="sequences per GPU per micro-batch "
                   f"(default: {BenchConfig.batch_size}; with --matrix a comma list, default "
                   f"{','.join(map(str, DEFAULT_MATRIX_BATCH))})")
    p.add_argument("--precision", type=_str_list, metavar="P", help=f"{', '.join(PRECISIONS)} (default: amp on CUDA, "
                   f"fp32 on CPU; with --matrix a comma list, default {','.join(DEFAULT_MATRIX_PRECISION)})")
    group = p.add_mutually_exclusive_group()
    flag_in_group = functools.partial(add_config_flag, group, BenchConfig)
    flag_in_group("global_batch", "sequences per optimizer step, all GPUs", type=int, metavar="N")
    flag_in_group("accumulation", "micro-batches per optimizer step", "1", type=int, metavar="K")
    flag("steps", "timed optimizer steps", metavar="N")
    flag("warmup_steps", "untimed steps first", metavar="N")
    flag("gpus", "GPUs on this machine; more than 1 relaunches under torchrun", metavar="N")
    flag("compile", "torch.compile the model's step and LAMB's update")
    flag("padded", "run every row at the shards' full length, pad positions included (for comparison); by "
                   "default only the real tokens run, packed end to end")
    flag("token_buckets", "round each packed batch's token count up to one of N sizes (dummy rows no loss "
                          "reads), so that --compile sees N shapes at most and on CUDA replays a CUDA graph per size "
                          "(torch.compile's reduce-overhead mode)", "off: one dynamic shape", type=int, metavar="N")
    flag("profile", "after the timed steps, run a few more under torch.profiler and write the kernels that took "
                    "the time to FILE (and a Chrome trace to FILE.trace.json)", metavar="FILE")
    flag("device", "where to train", "cuda if available", choices=("cuda", "cpu"))
    flag("loader_only", "time the input pipeline alone: disk to device, no model")
    p.add_argument("--matrix", action="store_true", help="one run per batch size x precision, like the table")
    flag("workers", "loader worker processes per GPU", "4, or the number of cores if fewer", type=int, metavar="N")
    flag("lr", "learning rate, constant: throughput does not depend on the schedule (NGC phase 1's)")
    flag("optimizer", "the update rule (lamb is NGC's)", choices=OPTIMIZERS)
    flag("seed", "seed of the initial weights, dropout, data order and dynamic masks", metavar="N")
    flag("vocab", "an LDDL folder's vocab; an mds or parquet folder's tokenizer (vocab.txt or tokenizer.json), "
                  "whose mask token masking shows", "the one whose sha256 its manifest.json records", metavar="PATH")
    flag("masking_scheme", "an LDDL folder with dynamic masking: mask word pieces one at a time (token) or whole "
                           "words, a word being a piece and the '##' pieces after it (every character of text "
                           "without spaces, such as Chinese)", "the scheme its manifest.json records",
         choices=MASKING_SCHEMES)
    flag("mlm_probability", "a documents folder (mds, parquet): the share of each sample's tokens masked, "
                            "its special tokens never (80%% [MASK], 10%% random, 10%% kept)",
         f"{DOCUMENT_MLM_PROBABILITY:g}, today's encoders' (instance shards keep the masking they were made with)",
         type=float, metavar="P")
    p.add_argument("--json", metavar="PATH", help="write the run records as JSON")
    p.add_argument("--force", action="store_true", help="overwrite an existing --json or --profile file")
    p.set_defaults(run=run)


def configs_from_args(args: argparse.Namespace, config_cls) -> list:
    import dataclasses

    from bertdata.errors import BertdataError

    # None: the flag was left out, so `config_cls`'s default holds -- the one source of them.
    batch_sizes = args.batch_size or (DEFAULT_MATRIX_BATCH if args.matrix else (None,))
    precisions = args.precision or (DEFAULT_MATRIX_PRECISION if args.matrix else (None,))
    if not args.matrix and (len(batch_sizes) > 1 or len(precisions) > 1):
        raise BertdataError("several --batch-size or --precision values need --matrix")
    if args.matrix and args.loader_only:
        raise BertdataError("--matrix and --loader-only do not combine")
    named = {f.name for f in dataclasses.fields(config_cls)} - {"batch_size", "precision"}
    given = {name: getattr(args, name) for name in named if getattr(args, name, None) is not None}
    runs = ({k: v for k, v in (("batch_size", b), ("precision", p)) if v is not None}
            for b in batch_sizes for p in precisions)
    return [config_cls(**given, **run) for run in runs]


def run(args: argparse.Namespace) -> int:
    from bertdata.errors import BertdataError
    from bertdata.fsutil import check_output_path

    if "://" in args.data:
        raise BertdataError(f"{args.data}: bench reads local folders only; copy the shards down first, e.g. "
                            f"bertdata shard {args.data} --parts N --output DIR")
    try:
        import torch  # noqa: F401
    except ImportError:
        raise BertdataError("needs torch: install the bench extra: pip install 'bertdata[bench]'") from None
    from bertdata.benchmark.train import execute

    configs = configs_from_args(args, BenchConfig)
    for path in (args.json, args.profile):
        if path:
            check_output_path(path, force=args.force)
    return execute(configs, args.json)
