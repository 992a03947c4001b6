"""A recipe build with dedup: and decontaminate: on real articles, with planted exact copies (in
the same corpus and in another), near copies at known word-edit rates and true 5-gram Jaccard,
and evaluation rows lifted from documents (SQuAD and JSON lines): what goes, what stays, the
audit file, the manifest, and the same bytes for 1 and 2 workers."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import pytest

from bertdata.pipelines.stages.dedup import AUDIT
from conftest import VOCAB, WIKI_FRAGMENT, build_files, run_cli
from corpus_inputs import articles

pytestmark = pytest.mark.slow

RATES = (0.004, 0.008, 0.012, 0.016, 0.02, 0.1, 0.15, 0.2, 0.3, 0.5)


def words(text: str) -> list[str]:
    return re.findall(r"\w+", text.lower())


def true_jaccard(a: str, b: str, n: int = 5) -> float:
    wa, wb = words(a), words(b)
    sa = {tuple(wa[i:i + n]) for i in range(len(wa) - n + 1)}
    sb = {tuple(wb[i:i + n]) for i in range(len(wb) - n + 1)}
    return len(sa & sb) / len(sa | sb)


def edited(text: str, rate: float, rng: random.Random, pool: list[str]) -> str:
    """`text` with about `rate` of its words replaced by words of other articles, lines kept."""
    return "\n".join(" ".join(w if rng.random() >= rate else rng.choice(pool) for w in line.split())
                     for line in text.split("\n"))


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    root = tmp_path_factory.mktemp("dedup")
    rng = random.Random(59)
    pages = [(pid, text) for pid, _, text in articles() if len(words(text)) >= 200]
    pool = [w for _, text in pages[60:] for w in text.split()]
    web, more = [], []
    truth = {"exact": {}, "near": {}, "far": {}, "evals": set(), "kept": set()}
    for k, (pid, text) in enumerate(pages):
        web.append({"id": f"web-{k:03d}", "text": text})
    for k in range(8):  # exact copies in the same corpus: the original (smaller id) stays
        web.append({"id": f"web-copy-{k}", "text": pages[k][1]})
        truth["exact"][f"web/web-copy-{k}"] = f"web/web-{k:03d}"
    for k in range(8, 12):  # in a later corpus: the earlier corpus's copy stays
        more.append({"id": f"m-{k}", "text": pages[k][1]})
        truth["exact"][f"more/m-{k}"] = f"web/web-{k:03d}"
    for n, rate in enumerate(RATES * 2):
        k = 12 + n
        copy = edited(pages[k][1], rate, rng, pool)
        j = true_jaccard(pages[k][1], copy)
        name = f"web/web-near-{n:02d}"
        web.append({"id": f"web-near-{n:02d}", "text": copy})
        if j >= 0.8:
            truth["near"][name] = j
        elif j <= 0.5:
            truth["far"][name] = j
    lifted = []
    for k in (40, 41, 42):
        line = next(line for line in pages[k][1].split("\n") if len(line.split()) >= 30)
        lifted.append({"context": " ".join(line.split()[5:25]), "label": k})
        truth["evals"].add(f"web/web-{k:03d}")
    squad_line = next(line for line in pages[43][1].split("\n") if len(line.split()) >= 30)
    truth["evals"].add(f"web/web-{43:03d}")
    data = root / "data"
    data.mkdir()
    (data / "web.jsonl").write_text("".join(json.dumps(r) + "\n" for r in web))
    (data / "more.jsonl").write_text("".join(json.dumps(r) + "\n" for r in more))
    (data / "evals.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lifted))
    (data / "dev-v1.1.json").write_text(json.dumps({"data": [{"title": "t", "paragraphs": [
        {"context": "Nothing here. " + squad_line, "qas": [{"question": "What?", "id": "q1", "answers": []}]}]}]}))
    (data / "r.yaml").write_text(
        "corpora:\n  web: {type: jsonl, files: web.jsonl}\n  more: {type: jsonl, files: more.jsonl}\n"
        "dedup:\n  exact: true\n  minhash: {ngram: 5, bands: 14, rows: 8}\n"
        "decontaminate:\n  ngram: 13\n  against:\n"
        "    - {files: dev-v1.1.json, type: squad}\n    - {files: evals.jsonl, text: context}\n")
    truth["all"] = {f"web/{r['id']}" for r in web} | {f"more/{r['id']}" for r in more}
    for workers in ("2", "1"):
        run_cli("build", "--recipe", data / "r.yaml", "--output", root / f"w{workers}", "--format", "mds",
                "--vocab", VOCAB, "--workers", workers)
    return root, truth


def _text_folder(out: Path) -> Path:
    return next(out.glob("sharded_*/r"))


def kept_documents(out: Path) -> set[str]:
    return {json.loads(line) for f in _text_folder(out).glob("*.ids.jsonl") for line in f.read_text().splitlines()}


def audit(out: Path) -> dict[str, dict]:
    lines = [json.loads(line) for line in (_text_folder(out) / "dedup.jsonl").read_text().splitlines()]
    return {line["document"]: line for line in lines}


def test_the_same_bytes_for_one_and_two_workers(planted):
    root, _ = planted
    assert build_files(root / "w1") == build_files(root / "w2")


def test_every_exact_copy_is_kept_once_by_the_rule(planted):
    root, truth = planted
    kept, removed = kept_documents(root / "w2"), audit(root / "w2")
    for copy, original in truth["exact"].items():
        assert copy not in kept and original in kept
        assert removed[copy] == {"document": copy, "removed": "exact", "kept": original}


def test_near_copies_go_and_far_ones_stay(planted):
    root, truth = planted
    kept, removed = kept_documents(root / "w2"), audit(root / "w2")
    assert len(truth["near"]) >= 6 and len(truth["far"]) >= 6
    gone = [name for name in truth["near"] if name not in kept]
    assert len(gone) >= 0.9 * len(truth["near"]), (truth["near"], gone)
    assert all(removed[name]["removed"] == "near" and 0.5 < removed[name]["similarity"] <= 1 for name in gone)
    stayed = [name for name in truth["far"] if name in kept]
    assert len(stayed) >= 0.95 * len(truth["far"]), (truth["far"], stayed)


def test_every_contaminated_document_is_gone_naming_its_eval_row(planted):
    root, truth = planted
    kept, removed = kept_documents(root / "w2"), audit(root / "w2")
    assert not truth["evals"] & kept
    rows = {removed[name]["row"] for name in truth["evals"]}
    assert "data[0].paragraphs[0].context" in rows and {"line 1", "line 2", "line 3"} <= rows
    assert all(removed[name]["removed"] == "contaminated" for name in truth["evals"])


def test_nothing_else_is_lost_and_the_manifest_counts_each_reason(planted):
    root, truth = planted
    kept, removed = kept_documents(root / "w2"), audit(root / "w2")
    planted_names = set(truth["exact"]) | set(truth["near"]) | set(truth["far"]) | truth["evals"]
    rest = truth["all"] - planted_names
    assert len(rest - kept) <= 0.01 * len(rest), sorted(rest - kept)
    assert set(removed) == truth["all"] - kept
    manifest = json.loads((_text_folder(root / "w2") / "manifest.json").read_text())
    reasons = {r: sum(1 for line in removed.values() if line["removed"] == r) for r in ("exact", "near",
                                                                                    "contaminated")}
    assert manifest["dedup"]["removed"] == reasons and reasons["contaminated"] == 4
    assert manifest["corpora"]["more"]["dropped"] == {"exact": 4}
    hits = manifest["dedup"]["evals"]
    assert [v["documents_hit"] for v in hits.values()] == [1, 3]
    assert manifest["dump"]["recipe"]["dedup"]["minhash"]["bands"] == 14


def test_a_bad_eval_file_is_one_line_and_nothing_is_written(tmp_path):
    (tmp_path / "web.jsonl").write_text(json.dumps({"id": "a", "text": "some text here"}) + "\n")
    (tmp_path / "evals.jsonl").write_text(json.dumps({"question": "a row without the key"}) + "\n")
    (tmp_path / "r.yaml").write_text("corpora:\n  web: {type: jsonl, files: web.jsonl}\n"
                                     "decontaminate: {against: [{files: evals.jsonl, text: context}]}\n")
    proc = run_cli("build", "--recipe", tmp_path / "r.yaml", "--output", tmp_path / "out", "--format", "mds",
                   "--vocab", VOCAB, check=False)
    assert proc.returncode == 2 and proc.stderr.strip().splitlines()[-1].endswith(
        "evals.jsonl: record 0 has no key 'context'"), proc.stderr
    assert not (tmp_path / "out").exists()


def test_inspect_prints_what_dedup_removed(planted):
    root, _ = planted
    removed = audit(root / "w2")
    reasons = [line["removed"] for line in removed.values()]
    proc = run_cli("inspect", root / "w2" / "mds")
    assert (f"removed by dedup: exact {reasons.count('exact')}, near {reasons.count('near')}, contaminated 4 ("
            in proc.stdout), proc.stdout


def test_a_dry_run_says_what_dedup_and_decontaminate_will_do(planted, tmp_path):
    root, _ = planted
    proc = run_cli("build", "--recipe", root / "data" / "r.yaml", "--output", tmp_path / "o", "--format", "mds",
                   "--vocab", VOCAB, "--dry-run")
    assert ("dedup: exact copies + MinHash near-duplicates (5-grams, 14 bands of 8, joined at 0.6) across every "
            "corpus" in proc.stdout)
    assert ("decontaminate: documents sharing a 13-gram with 2 evaluation file(s) removed: dev-v1.1.json (squad), "
            "evals.jsonl (jsonl)" in proc.stdout), proc.stdout
    assert not (tmp_path / "o").exists()


# --dedup and --decontaminate on a build from a dump: the real fragment's articles, books that copy
# one of them and each other, and SQuAD and TSV rows lifted from three articles.

@pytest.fixture(scope="module")
def dump_build(tmp_path_factory):
    root = tmp_path_factory.mktemp("dump_dedup")
    pages = [(pid, text) for pid, _, text in articles() if len(words(text)) >= 200]
    books = root / "books"
    books.mkdir()
    (books / "copy.txt").write_text(pages[5][1].replace("\n", "\n\n") + "\n")  # blank-line paragraphs, the same text
    twin = "\n\n".join(pages[40][1].split("\n")[:3]) + "\n"
    (books / "twin1.txt").write_text(twin)
    (books / "twin2.txt").write_text(twin)
    (books / "own.txt").write_text("A book of its own. It copies nothing at all.\n")
    lifted = [" ".join(pages[k][1].split()[30:60]) for k in (10, 11, 12)]
    (root / "dev.json").write_text(json.dumps({"data": [{"title": "t", "paragraphs": [
        {"context": c, "qas": []} for c in lifted[:2]]}]}))
    (root / "dev.tsv").write_text(f"sentence\tlabel\n{lifted[2]}\t1\n")
    flags = ("--books", books, "--dump", WIKI_FRAGMENT, "--vocab", VOCAB, "--stop-after", "text")
    for workers in ("2", "1"):
        run_cli("build", *flags, "--dedup", "--decontaminate", root / "dev.json", f"{root / 'dev.tsv'}=sentence",
                "--output", root / f"w{workers}", "--workers", workers)
    return root, flags, {"copy": pages[5][0], "contaminated": [pages[k][0] for k in (10, 11, 12)]}


def _dump_text(out: Path) -> Path:
    return next(out.glob("sharded_*/books_wiki_en_corpus"))


def test_a_dump_build_dedups_and_decontaminates_its_articles_and_books(dump_build):
    root, _, ids = dump_build
    assert build_files(root / "w1") == build_files(root / "w2")
    lines = [json.loads(line) for line in (_dump_text(root / "w2") / AUDIT).read_text().splitlines()]
    assert lines == [
        *({"document": f"wiki/{pid}", "removed": "contaminated", "eval": str(root / name), "row": row}
          for pid, name, row in zip(ids["contaminated"], ("dev.json", "dev.json", "dev.tsv"),
                                    ("data[0].paragraphs[0].context", "data[0].paragraphs[1].context", "line 2"))),
        {"document": "books/copy.txt", "removed": "exact", "kept": f"wiki/{ids['copy']}"},
        {"document": "books/twin2.txt", "removed": "exact", "kept": "books/twin1.txt"},
    ]
    manifest = json.loads((_dump_text(root / "w2") / "manifest.json").read_text())
    assert manifest["dedup"]["removed"] == {"exact": 2, "near": 0, "contaminated": 3}
    assert manifest["counts"]["articles"] == len(articles()) - 3 and manifest["counts"]["books"] == 2
    assert manifest["options"]["dedup"]["minhash"]["bands"] == 14
    assert [e["type"] for e in manifest["options"]["decontaminate"]["against"]] == ["squad", "tsv"]
    text = "".join(f.read_text() for f in _dump_text(root / "w2").glob("*.txt"))
    assert text.count("A book of its own.") == 1


def test_a_dump_build_without_the_flags_keeps_its_options_and_refuses_the_deduped_text(dump_build, tmp_path):
    root, flags, _ = dump_build
    proc = run_cli("build", *flags, "--output", root / "w1", check=False)
    assert proc.returncode == 2 and "holds text shards built with other options (decontaminate" in proc.stderr
    plain = tmp_path / "plain"
    run_cli("build", *flags, "--output", plain)
    manifest = json.loads((_dump_text(plain) / "manifest.json").read_text())
    assert "dedup" not in manifest["options"] and "dedup" not in manifest and manifest["counts"]["books"] == 4


@pytest.mark.parametrize("args, line", [
    (("--decontaminate", "dev.tsv"), "--decontaminate dev.tsv: a tsv file needs its text column or key: dev.tsv=KEY"),
    (("--decontaminate", "nothing.json"), "--decontaminate: no evaluation file matches nothing.json"),
    (("--decontaminate", "dev.tsv=text"), "dev.tsv: no column 'text' in its header (sentence, label)"),
])
def test_a_bad_decontaminate_value_is_one_line_and_nothing_is_written(dump_build, args, line):
    root, flags, _ = dump_build
    out = root / "refused"
    proc = run_cli("build", *flags, *args, "--output", out, check=False, cwd=root)
    assert proc.returncode == 2 and proc.stderr.strip().splitlines()[-1].endswith(line), proc.stderr
    assert not out.exists()


def test_a_recipe_refuses_the_dump_builds_flags(planted, tmp_path):
    root, _ = planted
    proc = run_cli("build", "--recipe", root / "data" / "r.yaml", "--dedup", "--output", tmp_path / "o",
                   "--format", "mds", "--vocab", VOCAB, check=False)
    assert proc.returncode == 2 and "--dedup is for a build from a dump: a recipe states its own dedup:" in proc.stderr
    assert not (tmp_path / "o").exists()


def test_a_dump_builds_dry_run_says_what_its_flags_will_do(dump_build, tmp_path):
    root, flags, _ = dump_build
    proc = run_cli("build", *flags, "--dedup", "--decontaminate", "dev.json", "--dry-run", "--output", tmp_path / "o",
                   cwd=root)
    assert ("dedup: exact copies + MinHash near-duplicates (5-grams, 14 bands of 8, joined at 0.6) across the "
            "articles and books" in proc.stdout)
    assert "decontaminate: documents sharing a 13-gram with 1 evaluation file(s) removed: dev.json (squad)" in proc.stdout
    assert not (tmp_path / "o").exists()
