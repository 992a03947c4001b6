"""`bertdata instances`: one text shard -> one hdf5 shard of MLM/NSP training instances."""

from __future__ import annotations

import argparse

from bertdata.commands.options import add_instance_options, add_tokenizer_options, instance_fields

DESCRIPTION = """\
Turn one text shard (one sentence per line, a blank line between documents)
into the MLM/NSP training instances of the reference BERT data script, written
as an hdf5 shard with its six datasets (input_ids, input_mask, segment_ids,
masked_lm_positions, masked_lm_ids, next_sentence_labels).

The output is bit-identical to the reference script's for the same text,
vocab, seed and parameters: documents are shuffled, each is cut into
segment pairs dupe-factor times (half of them with a random next segment),
tokens are masked 80/10/10, and the instances are shuffled -- all from one
random.Random(seed). Several INPUT files make one shard, read in order.
--masking-scheme whole-word masks whole words instead of single word pieces,
bit-identical to Google's create_pretraining_data.py --do_whole_word_mask=True.

The file is written under a temporary name and renamed when complete; an
existing --output is kept unless --force. Parameters are stored as attributes.

The instance loop is a small C extension (bertdata.instances._engine) that replays CPython's
random stream. BERTDATA_PROFILE=1 prints the seconds spent tokenizing, making
instances and writing.

examples:
  bertdata instances wikicorpus_en_training_0.txt --output wikicorpus_en_training_0.hdf5
  bertdata instances shard.txt --output phase2.hdf5 --max-seq-length 512 \\
      --max-predictions-per-seq 80
  bertdata instances shard.txt --output cased.hdf5 --vocab cased-vocab.txt --cased
  bertdata instances shard.txt --output wwm.hdf5 --masking-scheme whole-word
  bertdata instances bad-bytes.txt --output out.hdf5 --errors replace
"""


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "instances",
        help="turn a text shard into an hdf5 shard of MLM/NSP instances (bit-exact with the reference)",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("inputs", nargs="+", metavar="INPUT",
                        help="text shard(s): UTF-8, one sentence per line, blank line between documents")
    parser.add_argument("--output", required=True, metavar="FILE", help="hdf5 shard to write")
    add_instance_options(parser)
    add_tokenizer_options(parser, "bert-base-uncased's for English, bert-base-multilingual-cased's for "
                                  "other languages, downloaded once and cached")
    parser.add_argument("--lang", default="en", metavar="CODE",
                        help="the text's language (a Wikipedia code: de, ru, ...), which picks the default "
                             "vocab (default: en)")
    parser.add_argument("--errors", choices=("strict", "replace"), default="strict",
                        help="on bytes that are not UTF-8: stop with their location (strict, default), "
                             "or replace them with U+FFFD and go on")
    parser.add_argument("--force", action="store_true", help="overwrite --output if it exists")
    parser.set_defaults(run=run)


def run(args) -> int:
    import os
    import sys
    import time

    from tqdm import tqdm

    from bertdata.config import InstanceConfig
    from bertdata.fsutil import check_output_path

    start = time.perf_counter()
    cfg = InstanceConfig(**instance_fields(args))
    check_output_path(args.output, force=args.force, inputs=[*args.inputs, *([args.vocab] if args.vocab else [])])

    from bertdata.formats.hdf5 import write_instances
    from bertdata.instances.create import make_shard
    from bertdata.instances.vocab import is_cased, resolve_vocab

    vocab = resolve_vocab(args.vocab, args.lang)
    lowercase = not args.cased
    if lowercase and is_cased(vocab):
        if args.vocab is None:  # the multilingual vocab: cased text is what it was made from
            lowercase = False
        else:
            print(f"bertdata instances: warning: {vocab.path} is a cased vocab but text is lower-cased; "
                  "pass --cased to keep case", file=sys.stderr)
    total = sum(os.path.getsize(p) for p in args.inputs if os.path.isfile(p))
    with tqdm(total=total, unit="B", unit_scale=True, desc="tokenize", file=sys.stderr,
              disable=None, leave=False) as bar:
        shard = make_shard(args.inputs, vocab, cfg, lowercase=lowercase, errors=args.errors, progress=bar.update)
    started = time.perf_counter()
    write_instances(args.output, shard.instances, shard.attrs)
    stats = shard.stats
    stats["seconds"]["write"] = time.perf_counter() - started
    seconds = time.perf_counter() - start
    print(f"wrote {args.output}: {stats['instances']:,} instances from {stats['documents']:,} documents "
          f"({stats['sentences']:,} sentences, {stats['tokens']:,} tokens) in {seconds:.1f} s")
    if os.environ.get("BERTDATA_PROFILE"):
        stages = ", ".join(f"{k} {v:.2f} s" for k, v in stats["seconds"].items())
        print(f"stages: {stages}", file=sys.stderr)
    return 0
