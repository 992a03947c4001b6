"""The commands' flags: left out, each gives the config dataclass's default."""

from __future__ import annotations

from bertdata.cli import build_parser
from bertdata.commands.build import config_from_args
from bertdata.commands.options import instance_fields
from bertdata.config import PHASE2, BuildConfig, InstanceConfig, ShardConfig
from bertdata.download import DumpSpec


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
    defaults = ShardConfig(inputs=("in.hdf5",), output="parts", parts=2)
    assert (args.seed, args.split, args.format, args.workers) == (defaults.seed, defaults.split, defaults.format,
                                                                  defaults.workers)
