"""The shard format seam (bertdata.formats): a shard's files written atomically under names no
trainer takes, read back as the instances, the same bytes for the same instances, bad files named."""

from __future__ import annotations

import os
import re
from pathlib import Path

import numpy as np
import pytest

from bertdata.config import InstanceConfig
from bertdata.errors import BertdataError
from bertdata.formats.hdf5 import Hdf5Shards
from bertdata.instances.create import create_instances
from bertdata.instances.schema import FIELDS
from bertdata.instances.documents import read_documents
from bertdata.instances.tokenize import WordPiece
from bertdata.instances.vocab import load_vocab
from conftest import SHARD_A, VOCAB

CFG = InstanceConfig(max_seq_length=64, max_predictions_per_seq=10, dupe_factor=2)
FORMATS = [Hdf5Shards()]


@pytest.fixture(scope="module")
def vocab():
    return load_vocab(VOCAB)


@pytest.fixture(scope="module")
def instances(vocab, tmp_path_factory):
    """A few hundred instances from the first articles of the parity text shard."""
    documents = SHARD_A.read_text(encoding="utf-8").split("\n\n")[:12]
    text = tmp_path_factory.mktemp("text") / "wiki_training_0.txt"
    text.write_text("\n\n".join(documents) + "\n\n", encoding="utf-8")
    made = create_instances(read_documents(text, WordPiece(vocab)), vocab, CFG, seed=3)
    assert len(made) > 300
    return made


def write(fmt, folder: Path, instances, attrs, split="training", index=0) -> list[Path]:
    paths = [folder / name for name in fmt.file_names(f"wiki_{split}_{index}", split, index)]
    fmt.write(paths, instances, attrs)
    return paths


@pytest.mark.parametrize("fmt", FORMATS, ids=lambda f: f.name)
def test_written_shard_reads_back_as_its_instances(tmp_path, instances, fmt):
    paths = write(fmt, tmp_path, instances, {"seed": 3, "note": "x"})
    info = fmt.info(paths)
    assert (info.num_instances, info.max_seq_length, info.max_predictions_per_seq) == (len(instances), 64, 10)
    assert info.attrs["seed"] == 3 and info.attrs["note"] == "x"
    parts = list(fmt.read(paths))
    for name in FIELDS:
        assert np.array_equal(np.concatenate([p[name] for p in parts]), instances.array(name)), name
    assert len({p for split, index in (("training", 0), ("training", 1), ("test", 0))
                for p in fmt.file_names(f"wiki_{split}_{index}", split, index)}) == 3


@pytest.mark.parametrize("fmt", FORMATS, ids=lambda f: f.name)
def test_same_instances_same_bytes(tmp_path, instances, fmt):
    first, second = (write(fmt, tmp_path / f"{fmt.name}{i}", instances, {"a": 1})[0] for i in (1, 2))
    assert first.read_bytes() == second.read_bytes()


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


@pytest.mark.parametrize("fmt", FORMATS, ids=lambda f: f.name)
def test_writes_are_atomic_under_names_no_trainer_takes(tmp_path, instances, fmt):
    folder = tmp_path / fmt.name
    watched = Watched(instances, folder)
    paths = write(fmt, folder, watched, {})
    temporaries = watched.seen - set(paths)
    assert temporaries
    for temp in temporaries:
        assert temp.name.startswith(".") and "train" not in temp.name
        assert ".parquet" not in os.path.splitext(temp.name)[1]
    assert {p for p in folder.rglob("*") if p.is_file()} == set(paths)

    failing = Watched(instances, folder, fail_after=2)
    with pytest.raises(RuntimeError):
        write(fmt, folder, failing, {}, index=1)
    assert {p for p in folder.rglob("*") if p.is_file()} == set(paths)


@pytest.mark.parametrize("fmt", FORMATS, ids=lambda f: f.name)
def test_bad_files_are_named(tmp_path, instances, fmt):
    with pytest.raises(ValueError, match="one file"):
        fmt.info(str(tmp_path / "a"))
    missing = tmp_path / f"missing_{fmt.name}"
    with pytest.raises(BertdataError, match=re.escape(f"{missing}: no such file")):
        fmt.info([missing])
    garbage = tmp_path / f"garbage.{fmt.name}"
    garbage.write_text("not a shard\n")
    with pytest.raises(BertdataError, match=re.escape(f"{garbage}: not a readable")):
        fmt.info([garbage])
    good = write(fmt, tmp_path / fmt.name, instances, {})[0]
    truncated = tmp_path / f"truncated.{fmt.name}"
    truncated.write_bytes(good.read_bytes()[:len(good.read_bytes()) // 2])
    with pytest.raises(BertdataError, match=re.escape(f"{truncated}: ")):
        list(fmt.read([truncated]))
