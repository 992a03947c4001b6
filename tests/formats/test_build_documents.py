"""The formats holding documents (mds, parquet; megatron beside them) written by real builds: all
five formats from one build, the same bytes for one and two workers, the instance formats'
bytes as a build of them alone writes them, a tokenizer file's samples decoding back to their
documents, the real readers (mosaicml-streaming, datasets) taking the folders, bad input refused."""

from __future__ import annotations

import json
import unicodedata
from pathlib import Path

import pytest

from bertdata import formats
from conftest import SAMPLE_SHARDS, build_files, run_cli, trained_tokenizer
from readers import DATASETS_CHECK, STREAMING_CHECK, run_in_venv

pytestmark = pytest.mark.slow

# Every built-in format (the registry's list, never written out here).
ALL = tuple(formats.BUILTIN)


def build(out: Path, *args: str, check: bool = True):
    return run_cli("build", "--wiki-only", "--sample", "--output", out, "--phase", "1", *SAMPLE_SHARDS, *args,
                   check=check)


@pytest.fixture(scope="module")
def five(tmp_path_factory):
    root = tmp_path_factory.mktemp("five")
    build(root / "one", "--format", *ALL, "--workers", "1")
    build(root / "two", "--format", *ALL, "--workers", "2")
    return root


def test_one_build_writes_all_five_formats_the_same_for_one_and_two_workers(five):
    one, two = build_files(five / "one"), build_files(five / "two")
    assert one == two
    for folder in ("megatron/lower_case_1", "mds/lower_case_1/train", "mds/lower_case_1/val",
                   "parquet/lower_case_1/train", "parquet/lower_case_1/validation", "pretrain/phase1"):
        assert any(name.startswith(folder + "/") for name in one), folder
    assert "parquet/lower_case_1/README.md" in one
    assert not (five / "two" / ".bertdata-work").exists()


def test_the_instance_formats_keep_their_bytes_beside_the_new_ones(five, tmp_path):
    build(tmp_path / "alone", "--format", "hdf5", "lddl", "--workers", "2")
    alone = build_files(tmp_path / "alone")
    together = build_files(five / "two")
    assert {k: v for k, v in together.items() if k in alone} == alone


def test_streaming_reads_every_sample_of_the_build(five, tmp_path):
    root = five / "two" / "mds" / "lower_case_1"
    found = run_in_venv("streaming", STREAMING_CHECK, {"root": str(root), "splits": ["train", "val"]}, tmp_path)
    manifest = json.loads((root / "manifest.json").read_text())
    assert sum(len(found[s]["streamed"]) for s in ("train", "val")) == manifest["counts"]["samples"]
    assert all(f["streamed"][i][:2] == f["read"][i] for f in found.values() for i in range(len(f["read"])))


def test_datasets_loads_the_parquet_folder_of_the_build(five, tmp_path):
    from bertdata.instances.vocab import load_vocab
    from conftest import SAMPLE_VOCAB

    root = five / "two" / "parquet" / "lower_case_1"
    found = run_in_venv("datasets", DATASETS_CHECK,
                        {"folder": str(root), "cache": str(tmp_path / "hf-cache"), "vocab": str(SAMPLE_VOCAB)}, tmp_path)
    manifest = json.loads((root / "manifest.json").read_text())
    vocab = load_vocab(SAMPLE_VOCAB)
    for how in ("card", "data_dir"):
        assert sorted(found[how]) == ["train", "validation"]
        assert sum(len(rows) for rows in found[how].values()) == manifest["counts"]["rows"]
        assert all(ids[0] == vocab.cls_id and ids[-1] == vocab.sep_id for _id, ids in found[how]["train"])
    assert found["batch"]["mask"] == vocab.mask_id


def text_documents(build_root: Path) -> dict[tuple[str, int], str]:
    """Each text shard's documents, by (stem, index among the documents with text), as text."""
    out = {}
    for shard in build_root.glob("sharded_*/*/*.txt"):
        docs = [d for d in shard.read_text(encoding="utf-8").split("\n\n") if d.strip()]
        for i, doc in enumerate(docs):
            out[(shard.stem, i)] = " ".join(line.strip() for line in doc.splitlines() if line.strip())
    return out


def test_a_bpe_tokenizers_samples_decode_back_to_their_documents(tmp_path):
    from tokenizers import Tokenizer

    path = trained_tokenizer("bpe")
    out = tmp_path / "bpe"
    build(out, "--format", "mds", "--tokenizer", path, "--max-seq-length", "256", "--workers", "2")
    tokenizer = Tokenizer.from_file(str(path))
    folder = out / "mds" / path.parent.name
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["options"]["tokenizer_sha256"] and manifest["options"]["max_seq_length"] == 256
    from bertdata.formats.mds import read_samples

    pieces: dict[tuple[str, int], list] = {}
    for split in ("train", "val"):
        for sample in read_samples(folder / split):
            stem, doc, piece = sample["id"].rsplit("/", 2)
            ids = sample["input_ids"].tolist()
            assert len(ids) <= 256 and ids[0] == tokenizer.token_to_id("<s>") and ids[-1] == tokenizer.token_to_id("</s>")
            pieces.setdefault((stem, int(doc)), []).append((int(piece), ids[1:-1]))
    texts = text_documents(out)
    assert pieces.keys() == texts.keys()
    for key, parts in pieces.items():
        ids = [i for _n, p in sorted(parts) for i in p]
        decoded = tokenizer.decode(ids).strip()
        assert " ".join(decoded.split()) == " ".join(unicodedata.normalize("NFC", texts[key]).split())


@pytest.mark.parametrize("args, message", [
    (("--tokenizer", "{not json"), "tokenizer"),
    (("--max-seq-length", "2"), "--max-seq-length must be at least 3"),
])
def test_bad_document_options_are_one_line_and_write_nothing(tmp_path, args, message):
    if args[0] == "--tokenizer":
        bad = tmp_path / "tokenizer.json"
        bad.write_text(args[1])
        args = ("--tokenizer", str(bad))
    proc = build(tmp_path / "out", "--format", "mds", *args, check=False)
    last = proc.stderr.strip().splitlines()[-1]
    assert proc.returncode == 2 and last.startswith("bertdata build: error: ") and message in last
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "out").exists()


def test_inspect_checks_and_shard_refuses_the_document_folders(five, tmp_path):
    out = five / "two"
    proc = run_cli("inspect", out / "mds" / "lower_case_1", out / "parquet" / "lower_case_1")
    assert "MDS split" in proc.stdout and "Hugging Face parquet" in proc.stdout
    for folder in ("mds", "parquet"):
        proc = run_cli("shard", out / folder / "lower_case_1", "--output", tmp_path / folder, "--parts", "2",
                       check=False)
        assert proc.returncode == 2 and f"{folder} files hold documents, not instances to re-partition" in proc.stderr
        assert not (tmp_path / folder).exists()


def offline(cache: Path) -> dict:
    """The environment of a user with no network and an empty cache: any download fails at once."""
    import os

    dead = "http://127.0.0.1:9"
    return {**os.environ, "XDG_CACHE_HOME": str(cache), "HTTP_PROXY": dead, "HTTPS_PROXY": dead,
            "http_proxy": dead, "https_proxy": dead, "NO_PROXY": "", "no_proxy": ""}


def test_a_tokenizer_build_neither_reads_nor_downloads_a_vocab(tmp_path):
    """--tokenizer alone, formats cut per split: offline, an empty cache, rc 0; the file lies in
    each format's folder; --dry-run says the same; a format that needs the vocab still asks."""
    from bertdata.text.wikidump import sample_paths

    path = trained_tokenizer("bpe")
    cache, out = tmp_path / "cache", tmp_path / "out"
    args = ("build", "--wiki-only", "--dump", sample_paths()[0], "--output", out, "--phase", "1", *SAMPLE_SHARDS,
            "--format", "mds", "parquet", "--tokenizer", path)
    plan = run_cli(*args, "--dry-run", env=offline(cache))
    assert f"tokenizer: {path} for every format; no WordPiece vocab is read or downloaded" in plan.stdout
    proc = run_cli(*args, "--workers", "1", env=offline(cache), check=False)
    assert proc.returncode == 0, proc.stderr
    assert not list(cache.rglob("*.txt"))
    assert "no WordPiece vocab" in proc.stdout + proc.stderr
    for folder in ("mds", "parquet"):
        assert (out / folder / path.parent.name / "tokenizer.json").read_bytes() == path.read_bytes()
    # The card names the tokenizer by its folder, as the dataset's folder is named.
    card = (out / "parquet" / path.parent.name / "README.md").read_text(encoding="utf-8")
    assert f' tokenized by {path.parent.name}"\n' in card and "tokenized by tokenizer.json" not in card
    # hdf5 beside it needs the vocab: the default one, not at hand offline.
    refused = run_cli(*args[:-4], "hdf5", "mds", "--tokenizer", path, "--force", env=offline(cache), check=False)
    assert refused.returncode == 2 and "could not be downloaded" in refused.stderr
    plan = run_cli(*args[:-4], "hdf5", "mds", "--tokenizer", path, "--dry-run", env=offline(cache))
    assert "bert-base-uncased's" in plan.stdout and "downloaded there first" in plan.stdout


def test_the_int64_schema_holds_the_default_builds_ids(tmp_path):
    """--mds-schema int64 (ModernBERT's streaming reader): every sample of the default build, its ids
    stored as int64, the schema recorded in the manifest."""
    from bertdata.formats.mds import read_samples

    path = trained_tokenizer("bpe")
    for schema in ("input_ids", "int64"):
        build(tmp_path / schema, "--format", "mds", "--tokenizer", path, "--mds-schema", schema, "--workers", "1")
    read = {}
    for schema in ("input_ids", "int64"):
        folder = tmp_path / schema / "mds" / path.parent.name
        options = json.loads((folder / "manifest.json").read_text())["options"]
        assert options["schema"] == schema and options["dtype"] == ("uint16" if schema == "input_ids" else "int64")
        read[schema] = [(s["id"], s["input_ids"].tolist(), s["input_ids"].dtype.name)
                        for split in ("train", "val") for s in read_samples(folder / split)]
    assert [r[:2] for r in read["int64"]] == [r[:2] for r in read["input_ids"]]
    assert {r[2] for r in read["int64"]} == {"int64"}
