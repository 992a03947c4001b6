"""Hugging Face parquet (bertdata.formats.hfparquet, `--format parquet`): the files and the card, the
same bytes whatever order the parts were written in, the checks, and the readers that train from
it: `datasets.load_dataset` (both splits, by the card and by data_dir) and `transformers`'
DataCollatorForLanguageModeling."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from bertdata.errors import ValidationError
from bertdata.formats import Report, hfparquet
from bertdata.instances.samples import Samples
from conftest import VOCAB, text_samples
from readers import DATASETS_CHECK, run_in_venv

CARD = hfparquet.Card(pretty_name="English Wikipedia fragment, test vocab", language="en",
                      dump="enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2",
                      build="bertdata 0.1.0 build --format parquet --max-seq-length 128",
                      tokenizer="WordPiece tests/data/vocab.txt, lower case")


def shards(count: int, split: str = "training") -> list[Samples]:
    whole = text_samples()
    cuts = np.linspace(0, len(whole), count + 1).astype(int)
    return [Samples(f"wikicorpus_en_{split}_{k}", whole.tokens[whole.offsets[a]:whole.offsets[b]].copy(),
                    whole.offsets[a:b + 1] - whole.offsets[a], whole.document[a:b].copy(), whole.piece[a:b].copy())
            for k, (a, b) in enumerate(zip(cuts[:-1], cuts[1:]))]


def write_dataset(folder: Path, splits: dict[str, list[Samples]], order=None) -> list[dict]:
    """Each split's parts written (in `order` of their indices, default as given), named, then the card."""
    work = folder / ".parts"
    work.mkdir(parents=True)
    figures = []
    for split, parts in splits.items():
        entries = {k: hfparquet.write_part(parts[k], work)
                   for k in (order if order and len(order) == len(parts) else range(len(parts)))}
        figures.append(hfparquet.finish_local_split(split, [entries[k] for k in range(len(parts))], work, folder))
    hfparquet.write_card(figures, CARD, lambda name, data: (folder / name).write_bytes(data))
    work.rmdir()
    return figures


def expected(parts: list[Samples]) -> list[tuple[str, list[int]]]:
    return [(p.sample_id(i), p.sample(i).tolist()) for p in parts for i in range(len(p))]


def tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_layout_schema_and_card(tmp_path, monkeypatch):
    monkeypatch.setattr(hfparquet, "ROW_GROUP_ROWS", 50)
    train, test = shards(3), shards(1, "test")
    figures = write_dataset(tmp_path / "ds", {"train": train, "validation": test})
    assert sorted(tree(tmp_path / "ds")) == ["README.md", "train/train-00000-of-00003.parquet",
                                             "train/train-00001-of-00003.parquet", "train/train-00002-of-00003.parquet",
                                             "validation/validation-00000-of-00001.parquet"]
    f = pq.ParquetFile(tmp_path / "ds" / "train" / "train-00000-of-00003.parquet")
    assert f.schema_arrow.equals(pa.schema([("input_ids", pa.list_(pa.int32())), ("id", pa.string())]))
    assert f.num_row_groups == -(-len(train[0]) // 50) and max(f.metadata.row_group(i).num_rows
                                                               for i in range(f.num_row_groups)) == 50
    assert list(hfparquet.read_rows(tmp_path / "ds", "train")) != []
    assert [(i, ids.tolist()) for i, ids in hfparquet.read_rows(tmp_path / "ds", "train")] == expected(train)
    assert figures[0]["rows"] == sum(map(len, train)) and figures[0]["tokens"] == sum(len(p.tokens) for p in train)
    card = (tmp_path / "ds" / "README.md").read_text()
    header = card.split("---\n")[1]
    assert "license: cc-by-sa-4.0\n" in header and "language:\n- en\n" in header
    assert "size_categories:\n- n<1K\n" in header or "size_categories:\n- 1K<n<10K\n" in header
    assert 'pretty_name: "English Wikipedia fragment, test vocab"\n' in header
    assert ("configs:\n- config_name: default\n  data_files:\n  - split: train\n    path: train/train-*.parquet\n"
            "  - split: validation\n    path: validation/validation-*.parquet\n") in header
    assert CARD.dump in card and CARD.build in card and CARD.tokenizer in card
    assert hfparquet.size_category(999) == "n<1K" and hfparquet.size_category(2_500_000) == "1M<n<10M"


def test_a_name_with_quotes_a_newline_and_dashes_stays_one_value_of_the_card(tmp_path):
    yaml = pytest.importorskip("yaml")
    name = 'wiki "20240601"\n---\nlicense: mit'
    figures = [{"split": "train", "files": 1, "rows": 2, "tokens": 9}]
    card = hfparquet.card_text(figures, hfparquet.Card(name, "en", "dump", "build", "tokenizer"))
    header = yaml.safe_load(card.split("---\n")[1])
    assert header["pretty_name"] == name and header["license"] == "cc-by-sa-4.0"


def test_same_bytes_whatever_order_the_parts_were_written_in(tmp_path):
    splits = {"train": shards(3), "validation": shards(1, "test")}
    write_dataset(tmp_path / "a", splits)
    write_dataset(tmp_path / "b", splits, order=[2, 1, 0])
    write_dataset(tmp_path / "c", splits)
    assert tree(tmp_path / "a") == tree(tmp_path / "b") == tree(tmp_path / "c")


def broken(tmp_path: Path, fault: str) -> tuple[Path, str]:
    folder = tmp_path / "ds"
    write_dataset(folder, {"train": shards(3), "validation": shards(1, "test")})
    victim = folder / "train" / "train-00001-of-00003.parquet"
    if fault == "truncated":
        victim.write_bytes(victim.read_bytes()[:-200])
    elif fault == "missing":
        victim.unlink()
    elif fault == "schema":
        pq.write_table(pa.table({"input_ids": pa.array([[1, 2]], pa.list_(pa.int64())), "id": ["x"]}), victim)
    elif fault == "card":
        (folder / "README.md").unlink()
        victim = folder / "README.md"
    elif fault.startswith("card "):
        card = folder / "README.md"
        card.unlink()
        if fault == "card binary":
            card.write_bytes(b"---\n\xff\xfe\n---\n")
        elif fault == "card folder":
            card.mkdir()
        else:  # the hub's cache is links: one to a device is not read without end
            card.symlink_to("/dev/zero")
        victim = card
    elif fault == "split gone":
        import shutil

        shutil.rmtree(folder / "train")
        victim = folder / "train"
    return folder, str(victim)


@pytest.mark.parametrize(("fault", "message"), [("truncated", "not a readable parquet file"), ("missing", "missing"),
                                                ("schema", "not input_ids list<int32>"), ("card", "missing"),
                                                ("card binary", "not UTF-8 at byte 4"),
                                                ("card folder", "not a readable dataset card (Is a directory)"),
                                                ("card zero", "more than 16.8 MB, not a dataset card"),
                                                ("split gone", "missing, but")])
def test_inspect_names_the_fault_in_one_line(tmp_path, fault, message):
    folder, path = broken(tmp_path, fault)
    lines = []
    report = Report(out=lines.append)
    hfparquet.PARQUET.inspect([str(folder)], report)
    assert len(report.failures) == 1 and report.failures[0].startswith(path), report.failures
    assert message in report.failures[0] and "\n" not in report.failures[0]
    assert lines[-1].strip() == "INVALID"


def test_inspect_find_claims(tmp_path):
    from bertdata.formats import lddl

    train, test = shards(2), shards(1, "test")
    write_dataset(tmp_path / "out" / "parquet", {"train": train, "validation": test})
    (tmp_path / "out" / "parquet" / "manifest.json").write_text(json.dumps({"options": {"vocab_size": 30522}}))
    assert hfparquet.PARQUET.find(str(tmp_path)) == [str(tmp_path / "out" / "parquet")]
    assert hfparquet.PARQUET.claims(str(tmp_path / "out" / "parquet"))
    assert not lddl.LDDL.claims(str(tmp_path / "out" / "parquet")) and lddl.LDDL.find(str(tmp_path)) == []
    assert not lddl.LDDL.claims(str(tmp_path / "out" / "parquet" / "train"))
    lines = []
    report = Report(out=lines.append, show=1)
    hfparquet.PARQUET.inspect([str(tmp_path / "out" / "parquet")], report)
    assert not report.failures, report.failures
    rows, tokens = sum(map(len, train)), sum(len(p.tokens) for p in train)
    assert lines[2].split() == ["train", "2", f"{rows:,}", f"{tokens:,}", f"{tokens / rows:.1f}", "128"]
    assert lines[-1].startswith("  #0 wikicorpus_en_training_0/0/0: [2, ")
    with pytest.raises(ValidationError, match="outside the vocab's 1,000 tokens"):
        hfparquet.validate_split(tmp_path / "out" / "parquet", "train", vocab_size=1000)


def test_lddl_folders_are_not_claimed(tmp_path):
    """An LDDL phase folder (shard-<i>.parquet files) is not a Hugging Face dataset folder."""
    folder = tmp_path / "lddl" / "train"
    folder.mkdir(parents=True)
    pq.write_table(pa.table({"A": ["a"]}), folder / "shard-0.parquet")
    assert not hfparquet.PARQUET.claims(str(tmp_path / "lddl")) and hfparquet.PARQUET.find(str(tmp_path)) == []


@pytest.mark.slow
def test_datasets_loads_both_splits_and_the_collator_batches_them(tmp_path):
    """`datasets` loads the folder by its card (`load_dataset(folder)`) and as the packaged parquet
    builder with data_dir: both splits, every row; `transformers`' DataCollatorForLanguageModeling,
    with a tokenizer built from the test vocab, masks and pads a batch of its rows (both in a
    virtualenv of their own: readers.DATASETS_CHECK)."""
    train, test = shards(3), shards(1, "test")
    folder = tmp_path / "ds"
    write_dataset(folder, {"train": train, "validation": test})
    found = run_in_venv("datasets", DATASETS_CHECK,
                        {"folder": str(folder), "cache": str(tmp_path / "hf-cache"), "vocab": str(VOCAB)}, tmp_path)
    for how in ("card", "data_dir"):
        assert sorted(found[how]) == ["train", "validation"]
        for split, parts in (("train", train), ("validation", test)):
            assert [tuple(row) for row in found[how][split]] == [tuple(e) for e in expected(parts)]
    batch = found["batch"]
    rows, inputs_all, labels_all = batch["rows"], np.array(batch["input_ids"]), np.array(batch["labels"])
    longest = max(map(len, rows))
    assert inputs_all.shape == labels_all.shape == (len(rows), longest)
    masked = total = 0
    for r, ids in enumerate(rows):
        n = len(ids)
        labels, inputs = labels_all[r], inputs_all[r]
        assert (labels[n:] == -100).all() and (inputs[n:] == batch["pad"]).all()
        chosen = labels[:n] != -100
        assert (labels[:n][chosen] == np.array(ids)[chosen]).all()  # the labels are the original ids
        assert (inputs[:n][~chosen] == np.array(ids)[~chosen]).all()  # the rest untouched
        assert labels[0] == -100 and labels[n - 1] == -100  # [CLS] and [SEP] never masked
        masked += int(chosen.sum())
        total += n - 2
    assert 0.2 < masked / total < 0.4
