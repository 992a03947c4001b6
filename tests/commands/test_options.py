"""The commands' flags: left out, each gives the config dataclass's default."""

from __future__ import annotations

import pytest

from bertdata import formats
from bertdata.cli import build_parser
from bertdata.commands.build import config_from_args
from bertdata.commands.options import instance_fields
from bertdata.config import PHASE2, BuildConfig, InstanceConfig, LddlConfig, ReshardConfig
from bertdata.download.dumps import DumpSpec
from bertdata.errors import BertdataError


def parse(*argv: str):
    return build_parser().parse_args(list(argv))


def test_build_defaults_are_build_configs():
    assert config_from_args(parse("build", "--wiki-only")) == BuildConfig(wiki_only=True)


def test_build_instance_flags_set_every_phase_chosen():
    cfg = config_from_args(parse("build", "--wiki-only", "--phase", "2", "--dupe-factor", "2", "--masked-lm-prob",
                                 "0.2", "--short-seq-prob", "0", "--random-seed", "9"))
    assert cfg.phases == (InstanceConfig(max_seq_length=PHASE2.max_seq_length,
                                         max_predictions_per_seq=PHASE2.max_predictions_per_seq, dupe_factor=2,
                                         masked_lm_prob=0.2, short_seq_prob=0.0, random_seed=9),)


def test_instances_defaults_and_flags_are_instance_configs():
    args = parse("instances", "in.txt", "--output", "out.hdf5")
    assert InstanceConfig(**instance_fields(args)) == InstanceConfig()
    assert args.vocab is None and not args.cased
    args = parse("instances", "in.txt", "--output", "out.hdf5", "--max-seq-length", "64", "--max-predictions-per-seq",
                 "9", "--masked-lm-prob", "0.25", "--short-seq-prob", "0.5", "--dupe-factor", "3", "--random-seed", "4")
    assert InstanceConfig(**instance_fields(args)) == InstanceConfig(64, 9, 0.25, 0.5, 3, 4)


def test_download_defaults_are_the_dump_spec_and_builds_folder():
    args = parse("download")
    assert DumpSpec(wiki=args.wiki, date=args.date, mirror=args.mirror) == DumpSpec()
    assert (args.wiki, args.date, args.mirror) == (BuildConfig.wiki, BuildConfig.date, BuildConfig.mirror)
    assert args.output == f"{BuildConfig.output}/download"


def test_shard_defaults_are_shard_configs():
    args = parse("shard", "in.hdf5", "--output", "parts", "--parts", "2")
    defaults = ReshardConfig(inputs=("in.hdf5",), output="parts", parts=2)
    assert (args.seed, args.split, args.format, args.workers) == (defaults.seed, defaults.split, defaults.format,
                                                                  defaults.workers)


def test_numbers_past_any_sane_size_are_refused_naming_the_bound_and_why():
    assert InstanceConfig(max_seq_length=512, max_predictions_per_seq=80, dupe_factor=1000)
    with pytest.raises(BertdataError, match=r"--max-seq-length must be at most 512: BERT's position embeddings "
                                            r"\(max_position_embeddings\) hold 512 positions \(got 513\)"):
        InstanceConfig(max_seq_length=513)
    with pytest.raises(BertdataError, match=r"--dupe-factor must be between 1 and 1000: each pass adds a copy of "
                                            r"a shard's instances, all held in memory"):
        InstanceConfig(dupe_factor=1001)
    assert LddlConfig(num_shards=100_000)
    with pytest.raises(BertdataError, match="--num-shards must be at most 100,000"):
        LddlConfig(num_shards=100_001)
    with pytest.raises(BertdataError, match="--max-seq-length must be at most 512"):
        InstanceConfig(**instance_fields(parse("instances", "in.txt", "--output", "o.hdf5", "--max-seq-length",
                                               "1024")))


def test_workers_past_the_cores_are_capped_with_a_note(capsys, monkeypatch):
    from bertdata.pipelines.runtime import pool

    monkeypatch.setattr(pool, "cores", lambda: 2)
    cfg = config_from_args(parse("build", "--wiki-only", "--workers", "64"))
    assert cfg.runner.workers == 2
    [line] = capsys.readouterr().err.splitlines()
    assert line == ("bertdata build: --workers 64 is more than the 2 cores this process may use: running 2, "
                    "as more would only take turns on them")
    assert config_from_args(parse("build", "--wiki-only", "--workers", "2")).runner.workers == 2
    # A cluster's workers are not this machine's cores.
    assert config_from_args(parse("build", "--wiki-only", "--workers", "64", "--runner", "dask")).runner.workers == 64
    assert not capsys.readouterr().err


@pytest.mark.parametrize("length", [65_537, 10**9, 2**63 - 1, 2**64, 10**20])
def test_a_document_length_past_the_bound_is_refused_before_any_work(length):
    with pytest.raises(BertdataError, match=f"--max-seq-length must be at most 65,536 .* \\(got {length:,}\\)"):
        config_from_args(parse("build", "--wiki-only", "--format", "mds", "--max-seq-length", str(length)))
    assert config_from_args(parse("build", "--wiki-only", "--format", "mds", "--max-seq-length",
                                  "65536")).documents.max_seq_length == 65_536


# The formats that read --tokenizer (cut per split) and --max-seq-length (holding documents), from the registry.
SPLIT_FORMATS = ", ".join(n for n in formats.names() if formats.get(n).cut == formats.PER_SPLIT)
DOCUMENT_FORMATS = ", ".join(n for n in formats.names() if formats.get(n).holds == formats.DOCUMENTS)


@pytest.mark.parametrize("args, message", [
    (("--format", "hdf5", "--tokenizer", "/no/such.json"),
     f"--tokenizer is read by {SPLIT_FORMATS} alone, and --format names none of them (hdf5)"),
    (("--format", "hdf5", "--max-seq-length", "256"),
     f"--max-seq-length is read by {DOCUMENT_FORMATS} alone, and --format names none of them (hdf5)"),
    (("--format", "megatron", "--max-seq-length", "256"), f"--max-seq-length is read by {DOCUMENT_FORMATS} alone"),
    (("--format", "parquet", "--mds-compression", "zstd"),
     "--mds-compression is mds's, and --format does not name mds (parquet)"),
])
def test_a_documents_flag_without_a_format_that_reads_it_is_refused(args, message):
    with pytest.raises(BertdataError) as err:
        config_from_args(parse("build", "--wiki-only", *args))
    assert str(err.value) == message or str(err.value).startswith(message)


def test_format_given_twice_adds_up():
    cfg = config_from_args(parse("build", "--wiki-only", "--format", "mds", "--format", "parquet", "--tokenizer",
                                 "t.json", "--mds-compression", "zstd"))
    assert cfg.formats == ("mds", "parquet") and cfg.format_flags == (("mds", "compression", "zstd"),)
    assert config_from_args(parse("build", "--wiki-only", "--format", "megatron", "--tokenizer", "t.json"))
    with pytest.raises(BertdataError, match="each once"):
        config_from_args(parse("build", "--wiki-only", "--format", "mds", "--format", "mds"))


def test_ctrl_c_while_the_parser_is_made_names_the_command(monkeypatch, capsys):
    from bertdata import cli

    def interrupted():
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "build_parser", interrupted)
    assert cli.main(["build", "--wiki-only"]) == 130
    assert capsys.readouterr().err == "bertdata build: interrupted\n"
    assert cli.main(["--version"]) == 130
    assert capsys.readouterr().err == "bertdata: interrupted\n"
