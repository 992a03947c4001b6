"""`bertdata build --format lddl|both`: NGC's LDDL layout, the rows of the hdf5 output, same bytes
whatever the runner, resume and refusals."""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from bertdata.formats import lddl
from bertdata.manifest import MANIFEST
from bertdata.formats.hdf5io import iter_slices
from bertdata.instances.vocab import VOCAB_PATH, load_vocab
from conftest import VOCAB, WIKI_FRAGMENT, need, run_cli
from shards import row_keys

PHASE1 = Path("pretrain/phase1/unbinned/parquet")
PHASE2 = Path("pretrain/phase2/bin_size_64/parquet")
HDF5 = {1: "hdf5_lower_case_1_seq_len_128_max_pred_20_masked_lm_prob_0.15_random_seed_12345_dupe_factor_5",
        2: "hdf5_lower_case_1_seq_len_512_max_pred_80_masked_lm_prob_0.15_random_seed_12345_dupe_factor_5"}
SETTINGS = {1: (PHASE1, 128, 20, None), 2: (PHASE2, 512, 80, 64)}


def fragment(out: Path, *extra: str, check: bool = True):
    need(WIKI_FRAGMENT)
    return run_cli("build", "--wiki-only", "--dump", WIKI_FRAGMENT, "--vocab", VOCAB, "--output", out,
                   "--training-shards", "4", "--test-shards", "1", *extra, check=check)


def files_digest(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir())
            if p.name != MANIFEST}


def hdf5_rows(folder: Path) -> Counter:
    rows = Counter()
    for path in folder.glob("*_training_*.hdf5"):
        for _start, arrays in iter_slices(path, 4096):
            rows.update(row_keys(arrays))
    return rows


def lddl_rows(folder: Path, tokens, seq_len: int, pred: int) -> Counter:
    rows = Counter()
    for path in sorted(folder.glob("shard-*")):
        rows.update(row_keys(lddl.file_arrays(path, tokens, seq_len, pred)))
    return rows


@pytest.fixture(scope="module")
def both(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("lddl") / "both"
    fragment(out, "--format", "both", "--workers", "2")
    return out


@pytest.mark.slow
def test_layout_vocab_and_loader_checks(both):
    assert (both / "vocab" / "vocab").read_bytes() == Path(VOCAB).read_bytes()
    tokens = load_vocab(VOCAB).tokens
    for phase, (folder, seq, pred, bin_size) in SETTINGS.items():
        checked = lddl.validate_folder(both / folder, bin_size=bin_size, seq_len=seq, tokens=tokens)
        manifest = json.loads((both / folder / MANIFEST).read_text())
        assert manifest["format"] == "lddl" and manifest["max_seq_length"] == seq
        assert manifest["max_predictions_per_seq"] == pred
        assert checked["masking"] == "static" and checked["rows"] == manifest["counts"]["instances"]
        assert len(checked["bins"]) == (1 if bin_size is None else seq // bin_size)
        # Default: one file per bin for every training text shard.
        assert {len(sizes) for sizes in checked["bins"].values()} == {4}
        for entry in manifest["files"]:
            assert hashlib.sha256((both / folder / entry["file"]).read_bytes()).hexdigest() == entry["sha256"]
        # No temporaries, no marker, nothing else a loader could pick up.
        assert not [p.name for p in (both / folder).iterdir()
                    if not re.fullmatch(r"shard-\d+\.parquet(_\d+)?|\.num_samples\.json|manifest\.json", p.name)]
    assert not (both / ".bertdata-work").exists()
    assert run_cli("inspect", both / PHASE2).returncode == 0


@pytest.mark.slow
@pytest.mark.parametrize("phase", [1, 2])
def test_rows_are_the_hdf5_training_rows(both, phase):
    """The multiset of decoded parquet rows is the hdf5 build's, less the rows balancing dropped;
    and the files are what `lddl.write_phase` makes from the hdf5 shards in shard order."""
    folder, seq, pred, bin_size = SETTINGS[phase]
    tokens = load_vocab(VOCAB).tokens
    expected = hdf5_rows(both / HDF5[phase] / "wikicorpus_en")
    found = lddl_rows(both / folder, tokens, seq, pred)
    manifest = json.loads((both / folder / MANIFEST).read_text())
    dropped = manifest["counts"]["dropped"]
    assert not found - expected
    assert sum((expected - found).values()) == dropped
    assert sum(found.values()) == manifest["counts"]["instances"] > 1000

    shards = sorted((both / HDF5[phase] / "wikicorpus_en").glob("*_training_*.hdf5"),
                    key=lambda p: int(p.stem.rsplit("_", 1)[1]))
    again = Path(str(both) + f"-write-phase-{phase}")
    lddl.write_phase((a for p in shards for _s, a in iter_slices(p, 3000)), again, tokens, seq_len=seq,
                     num_shards=4, masking="static", bin_size=bin_size)
    assert files_digest(again) == files_digest(both / folder)


@pytest.mark.slow
def test_lddl_alone_same_bytes_on_every_runner_and_resumes(both, tmp_path):
    alone = tmp_path / "alone"
    fragment(alone, "--format", "lddl", "--runner", "in-memory")
    assert not list(alone.glob("hdf5_*"))
    for folder, *_ in SETTINGS.values():
        assert files_digest(alone / folder) == files_digest(both / folder)
    before = {folder: files_digest(alone / folder) for folder, *_ in SETTINGS.values()}
    stamp = (alone / PHASE1 / "shard-0.parquet").stat().st_mtime_ns
    fragment(alone, "--format", "lddl", "--workers", "2")  # finished: kept as it is
    assert (alone / PHASE1 / "shard-0.parquet").stat().st_mtime_ns == stamp
    assert {folder: files_digest(alone / folder) for folder, *_ in SETTINGS.values()} == before


@pytest.mark.slow
def test_dynamic_masking_and_other_shard_counts(tmp_path):
    out = tmp_path / "dyn"
    fragment(out, "--format", "lddl", "--phase", "1", "--masking", "dynamic", "--num-shards", "6", "--workers", "2")
    schema = pq.read_schema(out / PHASE1 / "shard-0.parquet")
    assert "masked_lm_positions" not in schema.names and "masked_lm_labels" not in schema.names
    checked = lddl.validate_folder(out / PHASE1, seq_len=128, tokens=load_vocab(VOCAB).tokens)
    assert checked["masking"] == "dynamic" and len(checked["bins"][None]) == 6
    assert "[MASK]" not in pq.read_table(out / PHASE1 / "shard-0.parquet").column("A").to_pylist()[0]
    # Other options for the same folder: refused without --force, replaced with it.
    proc = fragment(out, "--format", "lddl", "--phase", "1", "--num-shards", "8", check=False)
    assert proc.returncode != 0 and "other options" in proc.stderr and "--force" in proc.stderr
    assert len(list((out / PHASE1).glob("shard-*"))) == 6
    fragment(out, "--format", "lddl", "--phase", "1", "--num-shards", "8", "--force")
    assert len(list((out / PHASE1).glob("shard-*"))) == 8


@pytest.mark.slow
def test_interrupted_folder_is_redone_foreign_files_are_refused(tmp_path):
    out = tmp_path / "out"
    fragment(out, "--format", "lddl", "--phase", "1")
    folder = out / PHASE1
    good = files_digest(folder)
    # As a build killed while writing files leaves it: no manifest, the marker, a file short.
    (folder / MANIFEST).unlink()
    (folder / "shard-3.parquet").unlink()
    (folder / ".bertdata-writing").write_bytes(b"")
    (folder / ".bertdata-tmp-1-ab").write_bytes(b"half a file")
    fragment(out, "--format", "lddl", "--phase", "1")
    assert files_digest(folder) == good and not (folder / ".bertdata-writing").exists()

    foreign = tmp_path / "foreign"
    (foreign / PHASE1).mkdir(parents=True)
    (foreign / PHASE1 / "mine.parquet").write_bytes(b"not ours")
    proc = fragment(foreign, "--format", "lddl", "--phase", "1", check=False)
    assert proc.returncode != 0 and "no bertdata build recorded" in proc.stderr
    assert (foreign / PHASE1 / "mine.parquet").read_bytes() == b"not ours"


def test_a_folder_in_ngc_layout_finds_the_vocab_the_build_left_above_it(tmp_path):
    from bertdata.instances.vocab import vocab_for_shard

    need(VOCAB)
    (tmp_path / "vocab").mkdir()
    (tmp_path / "vocab" / "vocab").write_bytes(Path(VOCAB).read_bytes())
    folder = tmp_path / PHASE2
    folder.mkdir(parents=True)
    sha = load_vocab(VOCAB).sha256
    # Offline, the standard vocab could not be downloaded: the one beside the data is taken.
    found = vocab_for_shard({"vocab_sha256": sha, "vocab_size": len(load_vocab(VOCAB))}, folder)
    assert Path(found.path) == tmp_path / "vocab" / "vocab" and found.sha256 == sha


@pytest.mark.slow
def test_whole_word_build_reads_in_both_loaders_and_masks_whole_words(tmp_path):
    torch = pytest.importorskip("torch", reason="the bench extra (torch) is not installed")
    from bertdata.benchmark.data import ShardStream, rank_units, survey
    from bertdata.formats.checks import ShardStats, validate_shard, word_masking

    out = tmp_path / "ww"
    fragment(out, "--format", "both", "--phase", "1", "--masking-scheme", "whole-word", "--workers", "1")
    vocab = load_vocab(VOCAB)
    hdf5 = out / (HDF5[1] + "_whole_word_mask") / "wikicorpus_en"
    assert json.loads((hdf5 / "manifest.json").read_text())["options"]["instances"]["masking_scheme"] == "whole-word"
    manifest = json.loads((out / PHASE1 / MANIFEST).read_text())
    assert manifest["options"]["instances"]["masking_scheme"] == manifest["attrs"]["masking_scheme"] == "whole-word"
    shards = sorted(hdf5.glob("*.hdf5"))
    stats = [validate_shard(str(path), vocab=vocab) for path in shards]
    assert len(shards) == 5 and sum(s.masked for s in stats) > 10_000
    assert all(s.split_words == 0 for s in stats)
    # Words of several pieces are masked whole, not only one-piece words.
    assert sum(s.word_starts for s in stats) < 0.97 * sum(s.masked for s in stats)
    folder_stats = ShardStats("lddl")
    for path in sorted((out / PHASE1).glob("shard-*")):
        word_masking(lddl.file_arrays(path, vocab.tokens, 128, 20), vocab, folder_stats)
    assert folder_stats.split_words == 0 and lddl_rows(out / PHASE1, vocab.tokens, 128, 20) <= hdf5_rows(hdf5)

    for infos, fmt in (survey(hdf5), survey(out / PHASE1)):
        assert fmt.masking_scheme == "whole-word"
        batch = next(iter(ShardStream(rank_units(infos, 0, 1), batch_size=16, seed=1, infos=infos, reading=fmt)))
        assert all(isinstance(t, torch.Tensor) for t in batch) and ((batch[3] != -1).sum(1) > 0).all()

    # A re-run with the other scheme makes its own hdf5 folder, and refuses the LDDL one made with this.
    proc = fragment(out, "--format", "lddl", "--phase", "1", "--workers", "1", check=False)
    assert proc.returncode != 0 and "made with other options" in proc.stderr


@pytest.mark.slow
def test_one_training_shard_still_makes_two_files_per_bin_that_pass_the_check(tmp_path):
    """The default is a file per training text shard; with one (the bundled sample) a bin of one
    file could never hold a largest file one row longer than its smallest, as the loader wants."""
    out = tmp_path / "sample"
    run_cli("build", "--wiki-only", "--sample", "--format", "lddl", "--phase", "1", "--output", out)
    checked = lddl.validate_folder(out / PHASE1, seq_len=128, tokens=load_vocab(out / VOCAB_PATH).tokens)
    assert len(checked["bins"][None]) == 2
    assert run_cli("inspect", out / PHASE1).returncode == 0
