"""`bertdata inspect`: validate shards, print statistics, decode a few instances."""

from __future__ import annotations

import argparse

HELP = """\
Validate hdf5 shards against the reference layout, and LDDL parquet folders as
LDDL's loader will read them, and print statistics.

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

A Megatron-LM pair (PREFIX.bin/.idx, `build --format megatron`), given as its
prefix, either file, or found in a folder: the index's header, dtype and sizes,
pointers agreeing with the lengths, document indices from 0 up to the sequence
count, the .bin's size, and ids below the vocab size (--vocab's, else the one
the folder's manifest.json records). Figures: documents, sentences, tokens.

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
                   help="hdf5 files, LDDL folders, Megatron pairs, or folders searched recursively for them")
    p.add_argument("--show", type=int, default=0, metavar="N",
                   help="decode the first N instances of each file to text ([shown→original] marks predictions)")
    p.add_argument("--vocab", metavar="PATH",
                   help="vocab for --show and the id range check; refused if the shard records another "
                        "(default for --show: the vocab whose sha256 the shard records -- the bundled "
                        "sample vocab or one in the cache -- else the bert-base-uncased vocab)")
    p.add_argument("--ranks", type=int, default=1, metavar="N",
                   help="LDDL folders: training ranks x loader workers per rank that every bin's file "
                        "count must divide by (default: 1)")
    p.set_defaults(run=run)


# The reference pairs about half of its segments at random (a little more: a chunk of one
# segment always is); a share far off means a shard with too few documents.
NSP_TOLERANCE = 0.15
NSP_MIN_INSTANCES = 50


def run(args: argparse.Namespace) -> int:
    if not any("://" in p for p in [*args.paths, args.vocab or ""]):
        return _inspect(args)
    from bertdata.pipelines import fsio
    from bertdata.pipelines.stores import use_stores

    # Shards on an object store are read from a local copy, made for this run.
    use_stores([*args.paths, args.vocab])
    with fsio.staged_inputs([*args.paths, *([args.vocab] if args.vocab else [])]) as local:
        return _inspect(argparse.Namespace(**{**vars(args), "paths": local[:len(args.paths)],
                                              "vocab": local[len(args.paths)] if args.vocab else None}))


def _inspect(args: argparse.Namespace) -> int:
    import itertools
    import os

    from bertdata.errors import BertdataError, ValidationError
    from bertdata.hdf5io import decode_instance, iter_instances
    from bertdata.validate import ShardStats, read_layout, validate_shard
    from bertdata.vocab import check_vocab, load_vocab, vocab_for_shard

    if args.show < 0:
        raise BertdataError("--show must be >= 0")
    if args.ranks < 1:
        raise BertdataError("--ranks must be at least 1")
    given = load_vocab(args.vocab) if args.vocab else None
    pairs, rest = _megatron_inputs(args.paths)
    try:
        shards, folders = _find_inputs(rest) if rest else ([], [])
    except BertdataError:
        if not (pairs and all(os.path.isdir(p) for p in rest)):  # folders holding Megatron pairs only
            raise
        shards, folders = [], []
    totals: dict[int, ShardStats] = {}  # by sequence length: phase 1 and 2 do not average together
    counts: dict[int, int] = {}
    failures, warnings = [], []
    header = f"{'instances':>10} {'seq':>4} {'real tok':>8} {'short':>6} {'masked':>6} {'random next':>11}  file"
    if shards:
        print(header)
    for path in shards:
        try:
            attrs = read_layout(path).attrs
            if given is not None:
                check_vocab(given, attrs, path)
            vocab = given or (vocab_for_shard(attrs, path) if args.show else None)
            if vocab is None and attrs.get("masking_scheme") == "whole-word":
                try:
                    vocab = vocab_for_shard(attrs, path)
                except BertdataError as err:
                    warnings.append(f"{err} (word figures left out)")
            stats = validate_shard(path, len(vocab) if vocab else None, vocab)
        except ValidationError as err:
            failures.append(str(err))
            print(f"{'INVALID':>10} {'':>4} {'':>8} {'':>6} {'':>6} {'':>11}  {path}", flush=True)
            continue
        totals.setdefault(stats.max_seq_length, ShardStats("total")).add(stats)
        counts[stats.max_seq_length] = counts.get(stats.max_seq_length, 0) + 1
        _print_row(stats, path)
        if vocab is not None:
            _print_words(stats, attrs)
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
    for folder in folders:
        _inspect_folder(folder, args, given, failures, warnings)
    for prefix in pairs:
        _inspect_megatron(prefix, given, failures)
    for warning in warnings:
        print(f"bertdata inspect: warning: {warning}")
    for failure in failures:
        print(f"bertdata inspect: invalid shard: {failure}")
    return 1 if failures else 0


def _megatron_inputs(paths: list[str]) -> tuple[list[str], list[str]]:
    """(Megatron pair prefixes, the other paths): a .bin or .idx file or a prefix is a pair; a
    folder's pairs (any *.idx below it, outside hidden folders) are found, and the folder also
    searched for the other formats."""
    import os
    from pathlib import Path

    from bertdata.megatron import BIN, IDX

    pairs, rest = [], []
    for path in paths:
        if path.endswith((BIN, IDX)) and os.path.isfile(path):
            pairs.append(path[:-len(IDX)])
        elif not os.path.exists(path) and os.path.isfile(path + IDX):
            pairs.append(path)
        else:
            if os.path.isdir(path):
                pairs += sorted(str(p)[:-len(IDX)] for p in Path(path).rglob("*" + IDX)
                                if not any(part.startswith(".") for part in p.relative_to(path).parts))
            rest.append(path)
    return list(dict.fromkeys(pairs)), rest


def _inspect_megatron(prefix: str, given, failures: list[str]) -> None:
    """Validate one Megatron pair and print its figures; ids are checked against --vocab, else
    the vocab size the folder's manifest records."""
    import contextlib
    import json
    from pathlib import Path

    from bertdata.errors import ValidationError
    from bertdata.megatron import validate_pair
    from bertdata.vocab import check_vocab

    manifest_path = Path(prefix).parent / "manifest.json"
    options = {}
    if manifest_path.is_file():
        with contextlib.suppress(ValueError):
            options = json.loads(manifest_path.read_text(encoding="utf-8")).get("options", {})
    if given is not None:
        check_vocab(given, options, prefix)
    vocab_size = len(given) if given is not None else options.get("vocab_size")
    try:
        info = validate_pair(prefix, vocab_size)
    except ValidationError as err:
        failures.append(str(err))
        print(f"Megatron pair {prefix}: INVALID")
        return
    print(f"Megatron pair {prefix}: {info.documents:,} documents, {info.sentences:,} sentences, {info.tokens:,} "
          f"{info.dtype.name} tokens, {info.mean_sentence_length:.1f} tokens per sentence"
          + ("" if vocab_size else " (ids not checked: no vocab size known)"))


def _print_row(stats, label: str) -> None:
    r = stats.row()
    print(f"{r['instances']:>10} {stats.max_seq_length:>4} {r['mean_real_tokens']:>8.1f} "
          f"{r['short_share']:>6.1%} {r['masked_per_instance']:>6.2f} {r['random_next_share']:>11.1%}  {label}")


def _print_words(stats, attrs: dict) -> None:
    """How the masks fall on words (see validate.word_masking)."""
    starts = stats.word_starts / max(stats.masked, 1)
    whole = ("every mask covers whole words" if not stats.split_words else
             f"masks cover part of a word in {stats.split_words:,} of {stats.instances:,} instances")
    print(f"{'':>10} {attrs.get('masking_scheme', 'token')} masking: {starts:.1%} of masked positions start a "
          f"word; {whole}")


def _find_inputs(paths: list[str]) -> tuple[list[str], list]:
    """(hdf5 files, LDDL folders) among `paths`: a folder is one LDDL folder, or is searched
    for both."""
    import os

    from bertdata import lddl
    from bertdata.errors import BertdataError
    from bertdata.validate import find_shards

    folders, rest = [], []
    for path in paths:
        found = lddl.find_phase_folders(path) if os.path.isdir(path) else []
        folders += found
        if not (found and os.path.samefile(found[0], path)):
            rest.append(path)
    try:
        return (find_shards(rest) if rest else []), folders
    except BertdataError:
        if folders and all(os.path.isdir(p) for p in rest):  # folders holding LDDL folders only
            return [], folders
        raise


def _inspect_folder(folder, args: argparse.Namespace, given, failures: list[str], warnings: list[str]) -> None:
    """Validate one LDDL folder, print its statistics per bin and --show rows; a failure is
    added to `failures`."""
    import itertools

    import pyarrow as pa

    from bertdata import lddl
    from bertdata.errors import BertdataError, ValidationError
    from bertdata.hdf5io import decode_words
    from bertdata.vocab import check_vocab, vocab_for_shard

    print(f"LDDL folder {folder}")
    try:
        manifest = lddl.read_manifest(folder) or {}
    except BertdataError as err:
        manifest = {}
        warnings.append(f"{err}; checked without it")
    attrs = manifest.get("attrs", {})
    vocab = given
    if given is not None:
        check_vocab(given, attrs, folder)
    elif attrs.get("vocab_sha256"):
        try:
            vocab = vocab_for_shard(attrs, folder)
        except BertdataError as err:
            warnings.append(f"{err} (tokens not checked against a vocab)")
    try:
        report = lddl.validate_folder(folder, ranks=args.ranks, bin_size=manifest.get("options", {}).get("bin_size"),
                                      seq_len=manifest.get("max_seq_length"),
                                      tokens=vocab.tokens if vocab else None)
    except ValidationError as err:
        failures.append(str(err))
        print(f"{'INVALID':>10}")
        return
    print(f"{'bin':>10} {'files':>6} {'rows':>10} {'mean tok':>8} {'masked':>6} {'random next':>11}  "
          f"({report['masking']} masking)")
    total = {"files": 0, "rows": 0, "tokens": 0, "masked": 0, "random_next": 0}
    for bin_id, sizes in report["bins"].items():
        row = {"files": len(sizes), "rows": sum(sizes), **report["stats"][bin_id]}
        _print_bin("-" if bin_id is None else bin_id, row)
        total = {k: total[k] + row[k] for k in total}
    if len(report["bins"]) > 1:
        _print_bin("total", total)
    share = total["random_next"] / max(total["rows"], 1)
    if total["rows"] >= NSP_MIN_INSTANCES and abs(share - 0.5) > NSP_TOLERANCE:
        warnings.append(f"{folder}: {share:.1%} random next, far from 50%: its rows came from too few documents")
    if vocab is not None and report["masking"] == "static" and "max_seq_length" in manifest:
        _print_words(_folder_words(folder, manifest, vocab), manifest.get("options", {}).get("instances", {}))
    if args.show:
        rows = (row for _path, _bin, batch in lddl.read_folder(folder)
                for row in pa.Table.from_batches([batch]).to_pylist())
        for i, row in enumerate(itertools.islice(rows, args.show)):
            label = "random next" if row["is_random_next"] else "actual next"
            print(f"  #{i} ({label}): {decode_words(*lddl.row_words(row))}")


def _folder_words(folder, manifest: dict, vocab):
    """An LDDL folder's (valid, statically masked) rows counted as `validate.word_masking` counts."""
    import numpy as np

    from bertdata import lddl
    from bertdata.validate import ShardStats, word_masking

    stats = ShardStats(str(folder))
    for path in (path for files in lddl.phase_layout(folder)["bins"].values() for path in files):
        arrays = lddl.file_arrays(path, vocab.tokens, manifest["max_seq_length"], manifest["max_predictions_per_seq"])
        stats.instances += len(arrays["input_ids"])
        stats.masked += int(np.count_nonzero(np.cumprod(arrays["masked_lm_positions"] != 0, axis=1)))
        word_masking(arrays, vocab, stats)
    return stats


def _print_bin(label, row: dict) -> None:
    rows = max(row["rows"], 1)
    print(f"{label:>10} {row['files']:>6} {row['rows']:>10,} {row['tokens'] / rows:>8.1f} "
          f"{row['masked'] / rows:>6.2f} {row['random_next'] / rows:>11.1%}")
