"""The corpus types: what each reads of its files, and each bad file as one line naming it."""

from __future__ import annotations

import gzip
import json
from collections import Counter
from pathlib import Path

import pytest
import zstandard

from bertdata import corpora
from bertdata.corpora.contract import CorpusSpec
from bertdata.corpora.where import parse
from bertdata.errors import BertdataError

DOCS = [{"id": f"d{i}", "text": f"Document {i} says hello.", "score": i, "meta": {"lang": "en" if i % 2 else "de"}}
        for i in range(10)]


def opener(path: str):
    return open(path, "rb")


def read(spec: CorpusSpec, path: Path) -> tuple[list, Counter]:
    counts: Counter = Counter()
    ctype = corpora.get(spec.type)
    ctype.check(spec, str(path), opener)
    return list(ctype.documents(spec, str(path), opener, counts)), counts


def lines(docs=DOCS) -> bytes:
    return b"".join(json.dumps(d).encode() + b"\n" for d in docs)


@pytest.mark.parametrize("suffix, encode", [
    (".jsonl", lambda b: b),
    (".json.gz", gzip.compress),
    (".jsonl.zst", lambda b: zstandard.ZstdCompressor().compress(b)),
    (".jsonl.zst", lambda b: b"".join(zstandard.ZstdCompressor().compress(b[i:i + 50]) for i in range(0, len(b), 50))),
])
def test_json_lines_plain_and_compressed(tmp_path, suffix, encode):
    path = tmp_path / f"part{suffix}"
    path.write_bytes(encode(lines()))
    spec = CorpusSpec("c", "jsonl", (str(path),), where=parse("score >= 4 and meta.lang == 'en'"))
    docs, counts = read(spec, path)
    assert docs == [(f"d{i}", f"Document {i} says hello.") for i in (5, 7, 9)]  # its id key, named or not
    assert counts == {"filtered": 7}
    docs, _ = read(CorpusSpec("c", "jsonl", (str(path),), id="meta.lang"), path)
    assert [d[0] for d in docs] == ["de", "en"] * 5
    path.write_bytes(encode(lines([{k: v for k, v in d.items() if k != "id"} for d in DOCS])))
    docs, _ = read(CorpusSpec("c", "jsonl", (str(path),)), path)  # none: the file and line
    assert [d[0] for d in docs] == [f"part{suffix}:{i + 1}" for i in range(10)]


@pytest.mark.parametrize("suffix, encode, said", [
    (".json.gz", lambda b: gzip.compress(b)[:-30], "truncated (its gzip stream ends before its end marker)"),
    (".jsonl.zst", lambda b: zstandard.ZstdCompressor().compress(b)[:-9], "truncated (its zstd stream"),
    (".json.gz", lambda b: b"not gzip at all" * 10, "not a valid gzip stream"),
    (".jsonl.zst", lambda b: b"not zstd at all" * 10, "not a valid zstd stream"),
])
def test_a_broken_compressed_file_is_one_line_naming_it(tmp_path, suffix, encode, said):
    path = tmp_path / f"part{suffix}"
    path.write_bytes(encode(lines(DOCS * 50)))
    spec = CorpusSpec("c", "jsonl", (str(path),))
    with pytest.raises(BertdataError) as err:
        list(corpora.get("jsonl").documents(spec, str(path), opener, Counter()))
    assert str(err.value).startswith(f"{path}: ") and said in str(err.value)


@pytest.mark.parametrize("content, spec_args, said", [
    (b'{"text": "a"}\n{"text": "b"\n', {}, "part.jsonl:2: not JSON"),
    (b'{"text": "a"}\n[1, 2]\n', {}, "part.jsonl:2: a JSON line must be an object, not list"),
    (b'{"text": "a"}\n{"body": "b"}\n', {}, "part.jsonl:2: no key 'text'"),
    (b'{"text": "a", "url": "u"}\n{"text": "b"}\n', {"id": "url"}, "part.jsonl:2: no key 'url'"),
    (b'{"text": 3}\n', {}, "part.jsonl:1: key 'text': the text is int, not a string"),
    (b'{"text": "a", "s": 1}\n{"text": "b"}\n', {"where": parse("s > 0")}, "part.jsonl:2: no key 's', which where: reads"),
    (b'[[' * 100_000 + b"\n", {}, "part.jsonl:1:"),
])
def test_a_bad_json_line_is_one_line_naming_file_and_line(tmp_path, content, spec_args, said):
    path = tmp_path / "part.jsonl"
    path.write_bytes(content)
    with pytest.raises(BertdataError) as err:
        list(corpora.get("jsonl").documents(CorpusSpec("c", "jsonl", (str(path),), **spec_args), str(path), opener,
                                            Counter()))
    assert said in str(err.value) and "\n" not in str(err.value)


def test_the_first_line_is_checked_before_any_output(tmp_path):
    path = tmp_path / "part.jsonl.gz"
    path.write_bytes(gzip.compress(b'\n{"body": "x", "url": "u"}\n'))
    with pytest.raises(BertdataError, match=r"part.jsonl.gz:2: no key 'text' \(the text: key\); its keys are body, url"):
        corpora.get("jsonl").check(CorpusSpec("c", "jsonl", (str(path),)), str(path), opener)
    with pytest.raises(BertdataError, match="not a JSON-lines file name"):
        corpora.get("jsonl").check(CorpusSpec("c", "jsonl", ("x",)), str(tmp_path / "x.csv"), opener)


def write_parquet(path: Path, rows: list) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.Table.from_pylist(rows), path, row_group_size=3)


def test_parquet_reads_only_what_it_needs_through_the_filter(tmp_path):
    path = tmp_path / "000.parquet"
    write_parquet(path, DOCS)
    docs, counts = read(CorpusSpec("edu", "parquet", (str(path),), id="id", where=parse("score >= 7")), path)
    assert docs == [(f"d{i}", f"Document {i} says hello.") for i in (7, 8, 9)] and counts == {"filtered": 7}
    docs, _ = read(CorpusSpec("edu", "parquet", (str(path),), where=parse("meta.lang == 'de'")), path)
    assert [d[0] for d in docs] == [f"d{i}" for i in range(0, 10, 2)]
    write_parquet(path, [{k: v for k, v in d.items() if k != "id"} for d in DOCS])
    docs, _ = read(CorpusSpec("edu", "parquet", (str(path),), where=parse("meta.lang == 'de'")), path)
    assert [d[0] for d in docs] == [f"000.parquet:{i}" for i in range(0, 10, 2)]


@pytest.mark.parametrize("spec_args, said", [
    ({"text": "body"}, "no column 'body' (the text: column); its columns are id, text, score, meta"),
    ({"id": "url"}, "no column 'url' (the id: column)"),
    ({"where": parse("int_score >= 3")}, "no column 'int_score' (which where: reads)"),
    ({"text": "score"}, "column 'score' (the text) holds int64, not strings"),
])
def test_parquet_columns_are_checked_from_the_footer(tmp_path, spec_args, said):
    path = tmp_path / "000.parquet"
    write_parquet(path, DOCS)
    with pytest.raises(BertdataError) as err:
        corpora.get("parquet").check(CorpusSpec("edu", "parquet", (str(path),), **spec_args), str(path), opener)
    assert str(err.value).startswith(f"{path}: {said}")


@pytest.mark.parametrize("damage", [lambda b: b[:len(b) // 2], lambda b: b"PAR1" + b"\0" * 100, lambda b: b""])
def test_a_corrupt_parquet_is_one_line(tmp_path, damage):
    path = tmp_path / "000.parquet"
    write_parquet(path, DOCS)
    path.write_bytes(damage(path.read_bytes()))
    with pytest.raises(BertdataError) as err:
        corpora.get("parquet").check(CorpusSpec("edu", "parquet", (str(path),)), str(path), opener)
    assert str(err.value).startswith(f"{path}: not a readable parquet file")


def test_text_files_are_one_document_each_named_by_file(tmp_path):
    (tmp_path / "a.txt").write_text("A book.\n\nIts second paragraph.\n")
    (tmp_path / "b.txt").write_text("  \n")
    spec = CorpusSpec("books", "text", (str(tmp_path / "*.txt"),))
    found = corpora.get("text").files(spec, lambda p: sorted(str(x) for x in tmp_path.glob("*.txt")))
    assert [Path(p).name for p in found] == ["a.txt", "b.txt"]
    docs, counts = [], Counter()
    for path in found:
        docs += corpora.get("text").documents(spec, path, opener, counts)
    assert docs == [("a.txt", "A book.\n\nIts second paragraph.\n")] and counts == {"empty": 1}
    with pytest.raises(BertdataError, match="no file matches"):
        corpora.get("text").files(CorpusSpec("books", "text", ("nothing/*.txt",)), lambda p: [])


def test_a_parquet_file_is_cut_into_parts_of_row_groups_that_read_as_the_whole(tmp_path, monkeypatch):
    from bertdata.corpora import parquet

    path = tmp_path / "000.parquet"
    rows = [{"text": f"Row {i} " + "x" * 500} for i in range(40)]
    write_parquet(path, rows)  # row groups of 3 rows
    monkeypatch.setattr(parquet, "PART_BYTES", 4000)
    spec = CorpusSpec("edu", "parquet", (str(path),))
    parts = corpora.get("parquet").parts(spec, str(path), opener, path.stat().st_size)
    assert len(parts) > 3 and parts[0][0] == 0 and parts[-1][1] == 14  # 40 rows in 14 groups of 3
    assert all(a[1] == b[0] for a, b in zip(parts, parts[1:]))
    whole = list(corpora.get("parquet").documents(spec, str(path), opener, Counter()))
    pieces = [d for start, end, _ in parts
              for d in corpora.get("parquet").documents(spec, str(path), opener, Counter(), start, end)]
    assert pieces == whole and whole[39] == ("000.parquet:39", rows[39]["text"])
