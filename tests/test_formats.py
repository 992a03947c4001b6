"""The shard format seam: the same instances written as hdf5 and as LDDL parquet read back as the
same rows; atomic writes with temporary names no trainer takes; clear errors for bad files."""

from __future__ import annotations

import hashlib
import os
import re
from collections import Counter
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from bertdata import formats, lddl
from bertdata.config import InstanceConfig
from bertdata.errors import BertdataError, ValidationError
from bertdata.formats import Hdf5Shards, LddlShards, shard_format
from bertdata.instances import create_instances, generation_attrs
from bertdata.schema import FIELDS
from bertdata.textshard import read_documents
from bertdata.tokenize import WordPiece
from bertdata.vocab import load_vocab
from conftest import PARITY, VOCAB, need_shared

CFG = InstanceConfig(max_seq_length=64, max_predictions_per_seq=10, dupe_factor=2)


@pytest.fixture(scope="module")
def vocab():
    return load_vocab(need_shared(VOCAB))


@pytest.fixture(scope="module")
def instances(vocab, tmp_path_factory):
    """A few hundred instances from the first articles of the parity text shard."""
    documents = (need_shared(PARITY) / "shard_A.txt").read_text(encoding="utf-8").split("\n\n")[:12]
    text = tmp_path_factory.mktemp("text") / "wiki_training_0.txt"
    text.write_text("\n\n".join(documents) + "\n\n", encoding="utf-8")
    made = create_instances(read_documents(text, WordPiece(vocab)), vocab, CFG, seed=3)
    assert len(made) > 300
    return made


@pytest.fixture(scope="module")
def both(vocab):
    return [Hdf5Shards(), LddlShards(vocab.tokens)]


def row_keys(arrays: dict[str, np.ndarray]) -> Counter:
    """The rows as a multiset: one hash per instance over its six arrays."""
    return Counter(hashlib.sha256(b"".join(np.ascontiguousarray(arrays[k][r]).tobytes() for k in FIELDS)).digest()
                   for r in range(len(arrays["input_ids"])))


def read_all(fmt, paths) -> dict[str, np.ndarray]:
    parts = list(fmt.read(paths))
    return {k: np.concatenate([p[k] for p in parts]) for k in FIELDS}


def write(fmt, folder: Path, instances, attrs, split="training", index=0) -> list[Path]:
    paths = [folder / name for name in fmt.file_names(f"wiki_{split}_{index}", split, index)]
    fmt.write(paths, instances, attrs)
    return paths


def test_both_formats_hold_the_same_rows(tmp_path, monkeypatch, vocab, instances, both):
    # Small row groups and read slices, so both cross several of them.
    monkeypatch.setattr(lddl, "ROW_GROUP_ROWS", 100)
    monkeypatch.setattr(formats, "READ_ROWS", 77)
    attrs = {**generation_attrs(vocab, CFG, True, 3), "source": "wiki_training_0.txt"}
    expected = instances.arrays()
    stats = []
    for fmt in both:
        paths = write(fmt, tmp_path / fmt.name, instances, attrs)
        back = read_all(fmt, paths)
        for name in FIELDS:
            assert back[name].dtype == expected[name].dtype, (fmt.name, name)
        assert row_keys(back) == row_keys(expected), fmt.name
        info = fmt.info(paths)
        assert (info.num_instances, info.max_seq_length, info.max_predictions_per_seq) == (len(instances), 64, 10)
        assert info.attrs == attrs
        stats.append(fmt.validate(paths).row())
    assert stats[0] == stats[1]
    parquet = tmp_path / "lddl" / "training" / "shard-0.parquet"
    assert pq.ParquetFile(parquet).metadata.num_row_groups == -(-len(instances) // 100)


def test_dynamic_lddl_shards_hold_the_original_tokens(tmp_path, vocab, instances):
    fmt = LddlShards(vocab.tokens, masking="dynamic")
    back = read_all(fmt, write(fmt, tmp_path, instances, {}))
    expected = instances.arrays()
    original = expected["input_ids"].copy()
    rows, slots = np.nonzero(expected["masked_lm_positions"])
    original[rows, expected["masked_lm_positions"][rows, slots]] = expected["masked_lm_ids"][rows, slots]
    unmasked = {**expected, "input_ids": original, "masked_lm_positions": np.zeros_like(expected["masked_lm_positions"]),
                "masked_lm_ids": np.zeros_like(expected["masked_lm_ids"])}
    assert row_keys(back) == row_keys(unmasked)
    assert fmt.validate(write(fmt, tmp_path, instances, {})).instances == len(instances)


def test_globs_find_each_finished_shard_once(tmp_path, instances, both):
    for fmt in both:
        folder = tmp_path / fmt.name
        written = [p for split, index in (("training", 0), ("training", 1), ("test", 0))
                   for p in write(fmt, folder, instances, {}, split, index)]
        assert len(set(written)) == 3
        assert sorted(folder.glob(fmt.glob)) == sorted(written)
        assert not list(folder.glob(fmt.temp_glob))


def test_same_instances_same_bytes(tmp_path, instances, both):
    for fmt in both:
        first, second = (write(fmt, tmp_path / f"{fmt.name}{i}", instances, {"a": 1})[0] for i in (1, 2))
        assert first.read_bytes() == second.read_bytes(), fmt.name


class Watched:
    """Instances that look at the output folder each time a writer asks for rows (so while the
    temporary file is open), and can fail part way."""

    def __init__(self, inner, folder: Path, fail_after: int | None = None):
        self.inner, self.folder, self.fail_after = inner, folder, fail_after
        self.max_seq_length, self.max_predictions_per_seq = inner.max_seq_length, inner.max_predictions_per_seq
        self.seen: set[Path] = set()
        self.calls = 0

    def __len__(self) -> int:
        return len(self.inner)

    def array(self, name, start=0, stop=None):
        self.seen |= {p for p in self.folder.rglob("*") if p.is_file()}
        self.calls += 1
        if self.fail_after is not None and self.calls > self.fail_after:
            raise RuntimeError("killed")
        return self.inner.array(name, start, stop)


def test_writes_are_atomic_under_names_no_trainer_takes(tmp_path, instances, both):
    for fmt in both:
        folder = tmp_path / fmt.name
        watched = Watched(instances, folder)
        paths = write(fmt, folder, watched, {})
        temporaries = watched.seen - set(paths)
        assert temporaries, fmt.name
        for temp in temporaries:
            assert temp.name.startswith(".") and "train" not in temp.name
            assert ".parquet" not in os.path.splitext(temp.name)[1]
            assert temp.relative_to(folder).match(fmt.temp_glob)
        assert {p for p in folder.rglob("*") if p.is_file()} == set(paths)

        failing = Watched(instances, folder, fail_after=2)
        with pytest.raises(RuntimeError):
            write(fmt, folder, failing, {}, index=1)
        assert {p for p in folder.rglob("*") if p.is_file()} == set(paths), fmt.name


def test_unknown_format_and_masking_are_refused(vocab):
    assert isinstance(shard_format("hdf5", vocab), Hdf5Shards)
    assert shard_format("lddl", vocab) == LddlShards(vocab.tokens)
    with pytest.raises(BertdataError, match="unknown shard format 'csv'; one of hdf5, lddl"):
        shard_format("csv", vocab)
    with pytest.raises(BertdataError, match="masking must be one of static, dynamic"):
        LddlShards(vocab.tokens, masking="none")
    with pytest.raises(ValueError, match="one file"):
        Hdf5Shards().info("a.hdf5")


def test_bad_files_are_named(tmp_path, vocab, instances, both):
    for fmt in both:
        missing = tmp_path / f"missing_{fmt.name}"
        with pytest.raises(BertdataError, match=re.escape(f"{missing}: no such file")):
            fmt.info([missing])
        garbage = tmp_path / f"garbage.{fmt.name}"
        garbage.write_text("not a shard\n")
        with pytest.raises(BertdataError, match=re.escape(f"{garbage}: not a readable")):
            fmt.info([garbage])
        with pytest.raises(ValidationError, match=re.escape(f"{garbage}: not a readable")):
            fmt.validate([garbage])
        good = write(fmt, tmp_path / fmt.name, instances, {})[0]
        truncated = tmp_path / f"truncated.{fmt.name}"
        truncated.write_bytes(good.read_bytes()[:len(good.read_bytes()) // 2])
        with pytest.raises(ValidationError, match=re.escape(f"{truncated}: ")):
            fmt.validate([truncated])


def test_lddl_shards_refuse_files_they_cannot_read(tmp_path, vocab, instances):
    fmt = LddlShards(vocab.tokens)
    # An LDDL phase folder's file holds rows only: without bertdata's metadata its widths are unknown.
    lddl.write_phase([instances.arrays()], tmp_path / "phase", vocab.tokens, seq_len=64, num_shards=2, masking="static")
    plain = tmp_path / "phase" / "shard-0.parquet"
    with pytest.raises(BertdataError, match=re.escape(f"{plain}: no 'bertdata_layout' metadata; not a shard written by bertdata")):
        fmt.info([plain])
    # Rows written with one vocab, read with another.
    path = write(fmt, tmp_path / "shards", instances, {})
    other = LddlShards(vocab.tokens[:1000])
    with pytest.raises(ValidationError, match=re.escape(f"{path[0]}: token ") + "'.+' in column A is not in the vocab"):
        other.validate(path)
    # A dynamic-masking file is not a valid static-masking shard.
    dynamic = write(LddlShards(vocab.tokens, "dynamic"), tmp_path / "dynamic", instances, {})
    with pytest.raises(ValidationError, match=re.escape(f"{dynamic[0]}: columns ") + ".* are not those of LDDL's static masking"):
        fmt.validate(dynamic)
