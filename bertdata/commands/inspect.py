"""`bertdata inspect`: validate shards, print statistics, decode a few instances."""

from __future__ import annotations

import argparse
import functools

from bertdata.commands.options import add_config_flag
from bertdata.config import InspectConfig

HELP = """\
Validate hdf5 shards against the reference layout, LDDL parquet folders as
LDDL's loader will read them, and Megatron-LM pairs as its IndexedDataset reads
them, and print statistics.

hdf5 checks: the six datasets, their dtypes, that shapes agree, token ids below
the vocab size (from --vocab, else the vocab_size the shard records), input_mask
a run of 1s, masked positions strictly increasing then 0-padded and inside the
real tokens. With a vocab (--vocab, --show, or the recorded one of a shard made
with --masking-scheme whole-word): the masking scheme, the share of masked
positions that start a word, and whether the masks cover whole words (a word is
a piece and the "##" pieces after it, as whole-word masking groups them).

A folder holding shard-*.parquet* files or a .num_samples.json is an LDDL
folder (one phase); a folder given is also searched for such folders. Checks:
file names and bins, the columns, .num_samples.json, every bin's file count
dividing by --ranks (training ranks x loader workers) and its files' sizes
differing by exactly one row, every row's token count, masking and bin, and
with a vocab (--vocab, or the one whose sha256 the folder's manifest.json
records) every token. Statistics are per bin; with static masking and a vocab,
the word figures above for the whole folder.

A Megatron-LM pair (PREFIX.bin and PREFIX.idx, named by either file or by
PREFIX; a folder is searched for *.idx): the header, the dtype, the lengths,
pointers and document indices against each other and the .bin's size, and
every id below the vocab size (from --vocab, else the one the folder's
manifest.json records); figures: documents, sentences, tokens.

Every path is searched by every format bertdata knows (bertdata.formats).
A file or folder that fails: its name and the reason, exit code 1; every one
is checked. A --vocab other than the one a shard or folder records: exit code 2.

examples:
  bertdata inspect data/hdf5_lower_case_1_seq_len_128_*/
  bertdata inspect shard.hdf5 --show 3 --vocab vocab.txt
  bertdata inspect data/lddl_512 --ranks 64 --show 2
"""


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("inspect", help="validate shards and print statistics",
                       description=HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("paths", nargs="+", metavar="PATH",
                   help="hdf5 files, LDDL folders, Megatron pairs, or folders searched recursively for all of them")
    flag = functools.partial(add_config_flag, p, InspectConfig)
    flag("show", "decode the first N instances of each file to text ([shown→original] marks predictions)",
         metavar="N")
    flag("vocab", "vocab for --show and the id range check; refused if the shard records another",
         "for --show, the vocab whose sha256 the shard records -- the bundled sample vocab or one in the cache -- "
         "else the bert-base-uncased vocab", metavar="PATH")
    flag("ranks", "LDDL folders: training ranks x loader workers per rank that every bin's file count must divide "
                  "by", metavar="N")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if not any("://" in p for p in [*args.paths, args.vocab or ""]):
        return _inspect(args)
    from bertdata.pipelines.runtime import fsio
    from bertdata.pipelines.runtime.stores import use_stores

    # Shards on an object store are read from a local copy, made for this run.
    use_stores([*args.paths, args.vocab])
    with fsio.staged_inputs([*args.paths, *([args.vocab] if args.vocab else [])]) as local:
        return _inspect(argparse.Namespace(**{**vars(args), "paths": local[:len(args.paths)],
                                              "vocab": local[len(args.paths)] if args.vocab else None}))


def _inspect(args: argparse.Namespace) -> int:
    import os

    from bertdata import formats

    given = {name: value for name in ("show", "vocab", "ranks") if (value := getattr(args, name)) is not None}
    cfg = InspectConfig(tuple(args.paths), **given)
    for path in cfg.paths:
        _refuse_a_folders_file(path)
    report = formats.Report(vocab=_vocab(cfg.vocab) if cfg.vocab else None, show=cfg.show, ranks=cfg.ranks,
                            out=lambda line: print(line, flush=True))
    found = formats.find(cfg.paths)
    # An empty file is no format's: said as such, not as a file its format cannot read.
    empty = [unit for unit in found if os.path.isfile(unit.path) and os.path.getsize(unit.path) == 0]
    report.failures += [f"{unit.path}: empty (0 bytes)" for unit in empty]
    for fmt, units in formats.by_format(unit for unit in found if unit not in empty):
        fmt.inspect(units, report)
    for warning in report.warnings:
        print(f"bertdata inspect: warning: {warning}")
    for failure in report.failures:
        print(f"bertdata inspect: invalid shard: {failure}")
    return 1 if report.failures else 0


# The first bytes of a parquet file, and its files' extension. LDDL's parquet files are checked
# by their folder (its .num_samples.json, its bins and the files' balance are part of the
# check), never alone.
PARQUET_MAGIC = b"PAR1"
PARQUET_EXTENSION = ".parquet"


def _vocab(path: str):
    """--vocab's file, read once: a WordPiece vocab.txt, or a tokenizer.json (as `bench --vocab`
    takes it) as its tokens by id."""
    from bertdata.fsutil import read_bounded
    from bertdata.instances.tokenizer_file import MAX_FILE_BYTES, TokenizerFile
    from bertdata.instances.vocab import load_vocab

    data = read_bounded(path, MAX_FILE_BYTES, "vocab file")
    return TokenizerFile(path, data).as_vocab() if data.lstrip().startswith(b"{") else load_vocab(path, data)


def _refuse_a_folders_file(path: str) -> None:
    """A file given alone that a format reads only as part of its folder (one of an LDDL phase
    folder's parquet files): say so and name the folder to give, rather than fail it as a file of
    the format that takes any file (hdf5)."""
    import os

    from bertdata import formats
    from bertdata.errors import BertdataError

    if not os.path.isfile(path) or any(f.claims(path) for f in formats.all_formats()):
        return
    # Its folder, or the folder above (a dataset folder's split folders hold the files).
    parent = os.path.dirname(path) or "."
    for folder in (parent, os.path.dirname(os.path.abspath(parent))):
        unit = next((f for f in formats.all_formats() if f.claims(folder)), None)
        if unit is not None:
            raise BertdataError(f"{path}: one file of the {unit.name} folder {folder}, which is checked as a "
                                f"whole: bertdata inspect {folder}")
    with open(path, "rb") as f:
        head = f.read(len(PARQUET_MAGIC))
    if head == PARQUET_MAGIC:
        raise BertdataError(f"{path}: a parquet file outside the folder of any format; LDDL's and Hugging Face's "
                            "parquet are checked by their folders (an LDDL phase with its .num_samples.json, a "
                            "dataset with its README.md): bertdata inspect FOLDER")
    if head and os.path.splitext(path)[1] == PARQUET_EXTENSION:  # an empty one is said to be empty
        raise BertdataError(f"{path}: named as a parquet file but not one (it does not begin with "
                            f"{PARQUET_MAGIC.decode()}): broken, or another kind of file")
