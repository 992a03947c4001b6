"""`bertdata vocab`: train a WordPiece vocab on sentence files or a dump."""

from __future__ import annotations

import argparse

from bertdata.commands.options import add_cased_option
from bertdata.config import VocabConfig

DESCRIPTION = """\
Train a BERT WordPiece vocab.txt with Hugging Face tokenizers' WordPiece trainer:
BERT normalisation (lower-cased and accent-stripped unless --cased) and BERT
pre-tokenization, special tokens first ([PAD] [UNK] [CLS] [SEP] [MASK] = ids 0-4),
then single characters, then learned word pieces (## marks a continuation).

Input is text with one sentence per line (the text shards that `bertdata build
--wiki-only --stop-after text` writes; blank lines between documents are ignored), or a
MediaWiki dump with --dump, whose articles are cleaned and split into sentences
first. --dump cleans in one process: fine for the bundled sample or a small wiki;
for enwiki build the text shards with the parallel pipeline and train on those.

The same inputs and options give a byte-identical vocab.txt. The file is written
under a temporary name and renamed when complete; an existing file is kept
unless --force.

examples:
  bertdata vocab data/sharded_*/wikicorpus_en/*_training_*.txt --output vocab.txt
  bertdata vocab --dump simplewiki-20240601-pages-articles-multistream.xml.bz2 \\
      --output simple-vocab.txt --size 16000
  bertdata vocab shard.txt --output cased-vocab.txt --cased --min-frequency 5
"""


def add_parser(subparsers) -> None:
    defaults = VocabConfig()
    parser = subparsers.add_parser(
        "vocab",
        help="train a WordPiece vocab.txt on sentence files or a dump",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("inputs", nargs="*", metavar="INPUT", help="text files, one sentence per line")
    parser.add_argument(
        "--dump", action="append", default=[], metavar="PATH",
        help="a MediaWiki dump (.xml, .xml.bz2, multistream or not) to clean and train on; repeatable",
    )
    parser.add_argument("--output", required=True, metavar="FILE", help="vocab.txt to write")
    parser.add_argument(
        "--size", type=int, default=defaults.size,
        help=f"target vocab size, special tokens and characters included (default: {defaults.size}, BERT's)",
    )
    parser.add_argument(
        "--min-frequency", type=int, default=defaults.min_frequency, metavar="N",
        help=f"merge only pairs seen at least N times (default: {defaults.min_frequency})",
    )
    parser.add_argument(
        "--limit-alphabet", type=int, default=defaults.limit_alphabet, metavar="N",
        help=f"keep the N most frequent characters; rarer ones become [UNK] (default: {defaults.limit_alphabet})",
    )
    add_cased_option(parser, "for cased BERT models; pass --cased to `build` too")
    parser.add_argument("--force", action="store_true", help="overwrite --output if it exists")
    parser.set_defaults(run=run)


def run(args) -> int:
    from bertdata.instances.vocabtrain import build_vocab

    config = VocabConfig(
        size=args.size,
        min_frequency=args.min_frequency,
        lowercase=not args.cased,
        limit_alphabet=args.limit_alphabet,
    )
    summary = build_vocab(args.inputs, args.output, config, dumps=args.dump, force=args.force)
    source = f"{summary.lines:,} lines"
    if summary.articles:
        source += f" ({summary.articles:,} articles cleaned from {len(args.dump)} dump(s))"
    print(
        f"wrote {args.output}: {summary.tokens:,} tokens "
        f"({'cased' if args.cased else 'uncased'}, {summary.alphabet:,} of "
        f"{summary.distinct_characters:,} characters kept) from {source}"
    )
    if summary.tokens < config.size:
        print(f"note: the text supports only {summary.tokens:,} of the {config.size:,} tokens asked for "
              f"(lower --min-frequency or add text to get more)")
    return 0
