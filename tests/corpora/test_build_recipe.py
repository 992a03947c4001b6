"""`build --recipe`: four corpora in the layouts of FineWeb-Edu, Dolma, C4 and books, filtered and
mixed, built into mds and parquet with a byte-level BPE and into hdf5 with a vocab; every sample
traced to its document; bad inputs one line each with nothing written."""

from __future__ import annotations

import gzip
import json
import re
from collections import Counter
from pathlib import Path

import pytest

from conftest import VOCAB, build_files, run_cli, trained_tokenizer
from corpus_inputs import MIX, RECIPE, int_score, write_corpora

pytestmark = pytest.mark.slow


def build(out: Path, recipe: Path, *args: str, check: bool = True):
    return run_cli("build", "--recipe", recipe, "--output", out, *args, check=check)


@pytest.fixture(scope="module")
def mixture(tmp_path_factory):
    root = tmp_path_factory.mktemp("mixture")
    written = write_corpora(root / "data")
    (root / "data" / "mixture.yaml").write_text(RECIPE + MIX)
    tokenizer = trained_tokenizer("bpe")
    for workers in ("2", "1"):
        build(root / f"w{workers}", root / "data" / "mixture.yaml", "--format", "mds", "parquet", "--tokenizer",
              tokenizer, "--vocab", VOCAB, "--workers", workers)
    return root, written, tokenizer


def samples(folder: Path) -> list[dict]:
    from bertdata.formats.mds import read_samples

    return [s for split in ("train", "val") for s in read_samples(folder / split)]


def squeezed(text: str) -> str:
    """Text without whitespace: what a decoded piece and its document share, however sentences were joined."""
    import unicodedata

    return re.sub(r"\s+", "", unicodedata.normalize("NFC", text))


def test_the_same_bytes_for_one_and_two_workers(mixture):
    root, _, _ = mixture
    assert build_files(root / "w1") == build_files(root / "w2")


def test_every_sample_names_a_real_document_of_its_corpus_and_holds_its_text(mixture):
    from tokenizers import Tokenizer

    root, written, path = mixture
    tokenizer = Tokenizer.from_file(str(path))
    found = samples(root / "w2" / "mds" / path.parent.name)
    assert found
    for sample in found:
        corpus, rest = sample["id"].split("/", 1)
        doc_id, piece = rest.rsplit("/", 1)
        assert doc_id in written[corpus] and piece.isdigit()
        text = tokenizer.decode(sample["input_ids"].tolist(), skip_special_tokens=True)
        assert squeezed(text) in squeezed(written[corpus][doc_id]), sample["id"]


def test_no_document_below_the_filter_and_shares_within_003_of_the_mix(mixture):
    root, _, path = mixture
    tokens: Counter = Counter()
    for sample in samples(root / "w2" / "mds" / path.parent.name):
        corpus, rest = sample["id"].split("/", 1)
        if corpus == "edu":
            assert int_score(int(re.search(r"(\d+)-edu", rest).group(1))) >= 3
        tokens[corpus] += len(sample["input_ids"])
    total = sum(tokens.values())
    asked = {"edu": 0.5, "c4": 0.3, "dolma": 0.1, "books": 0.1}
    assert {name: round(tokens[name] / total, 3) for name in asked} == pytest.approx(asked, abs=0.03)
    manifest = json.loads(next((root / "w2").glob("sharded_*/mixture/manifest.json")).read_text())
    figures = manifest["corpora"]
    assert figures["edu"]["dropped"]["filtered"] > 0 and figures["books"]["asked"] == pytest.approx(0.1)
    assert sum(f["documents"] for f in figures.values()) == manifest["counts"]["documents"]


def test_parquet_rows_equal_the_mds_samples(mixture):
    import pyarrow.parquet as pq

    root, _, path = mixture
    rows = []
    for split in ("train", "validation"):
        for file in sorted((root / "w2" / "parquet" / path.parent.name / split).glob("*.parquet")):
            table = pq.read_table(file)
            rows += zip(table.column("id").to_pylist(), table.column("input_ids").to_pylist())
    assert rows == [(s["id"], s["input_ids"].tolist()) for s in samples(root / "w2" / "mds" / path.parent.name)]


def test_a_rerun_reuses_the_build(mixture):
    root, _, path = mixture
    before = build_files(root / "w1")
    proc = build(root / "w1", root / "data" / "mixture.yaml", "--format", "mds", "parquet", "--tokenizer", path,
                 "--vocab", VOCAB, "--workers", "1")
    assert "already complete" in proc.stderr + proc.stdout and build_files(root / "w1") == before


def test_hdf5_from_the_recipe_passes_inspect(mixture, tmp_path):
    root, _, _ = mixture
    build(tmp_path / "h", root / "data" / "mixture.yaml", "--format", "hdf5", "--vocab", VOCAB, "--phase", "1",
          "--workers", "2")
    folder = next((tmp_path / "h").glob("hdf5_*/mixture"))
    proc = run_cli("inspect", folder)
    assert "total of 2 valid file(s)" in proc.stdout


def test_a_wikipedia_corpus_beside_books(tmp_path):
    from testcache import WIKI_FRAGMENT

    data = tmp_path / "data"
    written = write_corpora(data)
    (data / "wiki.yaml").write_text(f"corpora:\n  wiki: {{type: wikipedia, dump: {WIKI_FRAGMENT}}}\n"
                                    "  books: {type: text, files: books/*.txt}\n")
    build(tmp_path / "out", data / "wiki.yaml", "--format", "parquet", "--vocab", VOCAB, "--workers", "2")
    import pyarrow.parquet as pq

    ids = [i for f in sorted((tmp_path / "out" / "parquet").rglob("*.parquet")) for i in pq.read_table(f).column("id")
           .to_pylist()]
    corpora = Counter(i.split("/", 1)[0] for i in ids)
    assert set(corpora) == {"wiki", "books"}
    assert all(i.split("/")[1].isdigit() for i in ids if i.startswith("wiki/"))
    assert {i.split("/")[1] for i in ids if i.startswith("books/")} == set(written["books"])


def _truncate_gzip(data: Path) -> None:
    path = data / "c4" / "c4-train.00000-of-01024.json.gz"
    path.write_bytes(path.read_bytes()[:-40])


def _bad_json_line(data: Path) -> None:
    path = data / "dolma" / "v1-0000.json.gz"
    lines = gzip.decompress(path.read_bytes()).splitlines(keepends=True)
    path.write_bytes(gzip.compress(b"".join(lines[:3] + [b'{"id": "x", "text": \n'] + lines[3:])))


def _corrupt_parquet(data: Path) -> None:
    path = data / "fineweb-edu" / "001_00000.parquet"
    path.write_bytes(path.read_bytes()[:1000])


BAD = [
    ("missing column", RECIPE.replace("id: id,", "id: doc_id,"), None,
     r"001?_00000\.parquet: no column 'doc_id' \(the id: column\)"),
    ("missing key", RECIPE.replace("id: url}", "id: link}"), None, r"c4-train\.00000-of-01024\.json\.gz:1: no key 'link'"),
    ("where on a missing column", RECIPE.replace("int_score >= 3", "edu_score >= 3"), None,
     r"no column 'edu_score' \(which where: reads\)"),
    ("corrupt parquet", RECIPE, _corrupt_parquet, r"001_00000\.parquet: not a readable parquet file"),
    ("truncated gzip", RECIPE, _truncate_gzip, r"c4-train\.00000-of-01024\.json\.gz: truncated"),
    ("bad JSON line", RECIPE, _bad_json_line, r"v1-0000\.json\.gz:4: not JSON"),
    ("mix naming no corpus", RECIPE + "mix: {edu: 1, wiki: 1}\n", None, r"mix: names 'wiki', which corpora: does not"),
    ("a share not positive", RECIPE + "mix: {edu: 1, c4: 0}\n", None, r"mix: c4's share must be a positive number"),
    ("empty after its filter", RECIPE.replace("int_score >= 3", "int_score >= 9"), None,
     r"corpus edu holds no document after its filters \(39 read; dropped: filtered 39\)"),
]


@pytest.mark.parametrize("what, recipe, damage, said", BAD, ids=[b[0] for b in BAD])
def test_bad_input_is_one_line_and_nothing_is_written(tmp_path, what, recipe, damage, said):
    data = tmp_path / "data"
    write_corpora(data)
    (data / "r.yaml").write_text(recipe)
    if damage is not None:
        damage(data)
    proc = build(tmp_path / "out", data / "r.yaml", "--format", "mds", "--vocab", VOCAB, "--workers", "2",
                 check=False)
    lines = [line for line in proc.stderr.strip().splitlines() if "error" in line]
    assert proc.returncode != 0 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert len(lines) == 1 and re.search(said, lines[0]), proc.stderr[-2000:]
    left = [p for p in (tmp_path / "out").rglob("*") if p.is_file() and p.name != "build.log"] \
        if (tmp_path / "out").exists() else []
    assert not [p for p in left if p.name == "manifest.json" or p.suffix in (".mds", ".parquet", ".txt")], left


@pytest.mark.parametrize("moment", [".bertdata-work/runs/*.run", "sharded_*/mixture/*.txt", "mds/*/*/shard.*"])
def test_a_killed_build_run_again_ends_with_the_same_bytes(mixture, tmp_path, moment):
    import os
    import signal
    import subprocess
    import sys
    import time

    from servers import tree_digest

    root, _, tokenizer = mixture
    args = ["build", "--recipe", str(root / "data" / "mixture.yaml"), "--format", "mds", "parquet", "--tokenizer",
            str(tokenizer), "--vocab", str(VOCAB), "--workers", "2", "--output", str(tmp_path / "killed")]
    proc = subprocess.Popen([sys.executable, "-m", "bertdata.cli", *args], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.time() + 300
    while not list((tmp_path / "killed").glob(moment)):
        assert proc.poll() is None and time.time() < deadline, f"the build ended before {moment} appeared"
        time.sleep(0.005)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    run_cli(*args)
    assert tree_digest(tmp_path / "killed") == tree_digest(root / "w2")


def test_inspect_reports_each_corpus(mixture):
    root, _, path = mixture
    for fmt in ("mds", "parquet"):
        proc = run_cli("inspect", root / "w2" / fmt / path.parent.name)
        for corpus in ("edu", "c4", "dolma", "books"):
            assert re.search(rf"corpus {corpus}: [\d,]+ samples, [\d,]+ tokens \(\d+\.\d%\)", proc.stdout), proc.stdout


def test_a_repeated_corpus_gives_copies_named_by_pass(tmp_path):
    import pyarrow.parquet as pq

    data = tmp_path / "data"
    written = write_corpora(data)
    (data / "rep.yaml").write_text('corpora:\n  edu: {type: parquet, files: "fineweb-edu/*.parquet"}\n'
                                   '  books: {type: text, files: "books/*.txt", repeat: 3}\n'
                                   "mix: {edu: 0.3, books: 0.7}\n")
    build(tmp_path / "out", data / "rep.yaml", "--format", "parquet", "--vocab", VOCAB, "--workers", "2")
    ids = [i for f in sorted((tmp_path / "out" / "parquet").rglob("*.parquet"))
           for i in pq.read_table(f).column("id").to_pylist()]
    copies = {i.rsplit("/", 1)[0] for i in ids if i.startswith("books/")}
    assert {c.split("#")[0] for c in copies} == {f"books/{name}" for name in written["books"]}  # every book once
    assert any(c.endswith("#1") for c in copies) and not any(c.endswith("#3") for c in copies)
    manifest = json.loads(next((tmp_path / "out").glob("sharded_*/rep/manifest.json")).read_text())
    assert manifest["corpora"]["books"]["documents"] > len(written["books"])
    assert manifest["corpora"]["books"]["share"] == pytest.approx(0.7, abs=0.03)
