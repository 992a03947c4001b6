"""`bertdata inspect`: validate shards, print statistics, decode a few instances."""

from __future__ import annotations

import argparse

HELP = """\
Validate hdf5 shards against the reference layout and print statistics.

Checks: the six datasets, their dtypes, that shapes agree, token ids below the
vocab size (from --vocab, else the vocab_size the shard records), input_mask a
run of 1s, masked positions strictly increasing then 0-padded and inside the
real tokens. A file that fails: its name and the reason, exit code 1; every
file is checked. A --vocab other than the one a shard records: exit code 2.

examples:
  bertdata inspect data/hdf5_lower_case_1_seq_len_128_*/
  bertdata inspect shard.hdf5 --show 3 --vocab vocab.txt
"""


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("inspect", help="validate shards and print statistics",
                       description=HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("paths", nargs="+", metavar="PATH", help="hdf5 files or folders (searched recursively)")
    p.add_argument("--show", type=int, default=0, metavar="N",
                   help="decode the first N instances of each file to text ([shown→original] marks predictions)")
    p.add_argument("--vocab", metavar="PATH",
                   help="vocab for --show and the id range check; refused if the shard records another "
                        "(default for --show: the vocab whose sha256 the shard records -- the bundled "
                        "sample vocab or one in the cache -- else the bert-base-uncased vocab)")
    p.set_defaults(run=run)


# The reference pairs about half of its segments at random (a little more: a chunk of one
# segment always is); a share far off means a shard with too few documents.
NSP_TOLERANCE = 0.15
NSP_MIN_INSTANCES = 50


def run(args: argparse.Namespace) -> int:
    import itertools

    from bertdata.errors import BertdataError, ValidationError
    from bertdata.hdf5io import decode_instance, iter_instances
    from bertdata.validate import ShardStats, find_shards, read_layout, validate_shard
    from bertdata.vocab import check_vocab, load_vocab, vocab_for_shard

    if args.show < 0:
        raise BertdataError("--show must be >= 0")
    given = load_vocab(args.vocab) if args.vocab else None
    shards = find_shards(args.paths)
    totals: dict[int, ShardStats] = {}  # by sequence length: phase 1 and 2 do not average together
    counts: dict[int, int] = {}
    failures, warnings = [], []
    header = f"{'instances':>10} {'seq':>4} {'real tok':>8} {'short':>6} {'masked':>6} {'random next':>11}  file"
    print(header)
    for path in shards:
        try:
            attrs = read_layout(path).attrs
            if given is not None:
                check_vocab(given, attrs, path)
            vocab = given or (vocab_for_shard(attrs, path) if args.show else None)
            stats = validate_shard(path, len(vocab) if vocab else None)
        except ValidationError as err:
            failures.append(str(err))
            print(f"{'INVALID':>10} {'':>4} {'':>8} {'':>6} {'':>6} {'':>11}  {path}", flush=True)
            continue
        totals.setdefault(stats.max_seq_length, ShardStats("total")).add(stats)
        counts[stats.max_seq_length] = counts.get(stats.max_seq_length, 0) + 1
        _print_row(stats, path)
        share = stats.row()["random_next_share"]
        if stats.instances >= NSP_MIN_INSTANCES and abs(share - 0.5) > NSP_TOLERANCE:
            warnings.append(f"{path}: {share:.1%} random next, far from 50%: its text shard has too few "
                            "documents (or one document) for next-sentence pairs")
        if args.show:
            for i, inst in enumerate(itertools.islice(iter_instances(path), args.show)):
                label = "random next" if inst.next_sentence_label else "actual next"
                print(f"  #{i} ({label}): {decode_instance(inst, vocab.tokens)}")
    for seq, total in sorted(totals.items()):
        if len(shards) > 1:
            _print_row(total, f"total of {counts[seq]} valid file(s) with sequence length {seq}")
    for warning in warnings:
        print(f"bertdata inspect: warning: {warning}")
    for failure in failures:
        print(f"bertdata inspect: invalid shard: {failure}")
    return 1 if failures else 0


def _print_row(stats, label: str) -> None:
    r = stats.row()
    print(f"{r['instances']:>10} {stats.max_seq_length:>4} {r['mean_real_tokens']:>8.1f} "
          f"{r['short_share']:>6.1%} {r['masked_per_instance']:>6.2f} {r['random_next_share']:>11.1%}  {label}")
