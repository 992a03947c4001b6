"""Megatron-LM's indexed dataset (bertdata.formats.megatron, `build --format megatron`): the codec read back
by hand, the writer, reader, validator and merge, corrupt pairs, the build on the bundled sample,
the same bytes on every runner, and the check by Megatron's own code (megatron-core)."""

from __future__ import annotations

import hashlib
import json
import os
import struct
import sys
from pathlib import Path

import numpy as np
import pytest

from bertdata import formats as registry
from bertdata.formats import megatron
from bertdata.cli import build_parser
from bertdata.commands.build import config_from_args
from bertdata.config import BuildConfig
from bertdata.errors import BertdataError, ValidationError
from bertdata.instances.documents import Documents
from bertdata.instances.tokenize import WordPiece
from bertdata.instances.vocab import load_vocab
from conftest import SAMPLE_SHARDS, SAMPLE_VOCAB, VOCAB, WIKI_FRAGMENT, need, needs_extra, run_cli
from servers import digest

FOLDER = Path("megatron/lower_case_1")
TEXT = "sharded_training_shards_8_test_shards_2_fraction_0.1"
CASED = Path("megatron/lower_case_0")
SPLITS = ("training", "test")


def documents(seed: int, docs: int = 5, vocab_size: int = 30522) -> Documents:
    """Random documents of 1-4 sentences of 1-9 ids."""
    rng = np.random.default_rng(seed)
    per_doc = rng.integers(1, 5, docs)
    lengths = rng.integers(1, 10, per_doc.sum())
    doc_offsets = np.concatenate(([0], np.cumsum(per_doc)))
    sentence_offsets = np.concatenate(([0], np.cumsum(lengths)))
    tokens = rng.integers(0, vocab_size, sentence_offsets[-1]).astype(np.int32)
    return Documents(("random",), tokens, sentence_offsets, doc_offsets)


def write(prefix: Path, docs: Documents, vocab_size: int = 30522) -> megatron.PairInfo:
    return megatron.write_pair(*megatron.pair_paths(prefix), docs, vocab_size)


def same_documents(a: Documents, b: Documents) -> None:
    assert np.array_equal(np.asarray(a.tokens), np.asarray(b.tokens))
    assert np.array_equal(a.sentence_offsets, b.sentence_offsets)
    assert np.array_equal(a.doc_offsets, b.doc_offsets)


# ---------------------------------------------------------------- codec, writer, reader


@pytest.mark.parametrize(("vocab_size", "dtype", "code"), [(30522, np.uint16, 8), (65499, np.uint16, 8),
                                                           (65500, np.int32, 4), (119547, np.int32, 4)])
def test_the_pair_read_back_by_hand(tmp_path, vocab_size, dtype, code):
    docs = documents(1, vocab_size=vocab_size)
    info = write(tmp_path / "p", docs, vocab_size)
    idx = (tmp_path / "p.idx").read_bytes()
    magic, version, found_code, sequences, indices = struct.unpack_from("<9sQBQQ", idx)
    assert (magic, version, found_code) == (b"MMIDIDX\x00\x00", 1, code)
    assert sequences == docs.num_sentences and indices == docs.num_documents + 1
    n = sequences
    lengths = np.frombuffer(idx, np.int32, n, 34)
    pointers = np.frombuffer(idx, np.int64, n, 34 + 4 * n)
    doc_indices = np.frombuffer(idx, np.int64, indices, 34 + 12 * n)
    assert len(idx) == 34 + 12 * n + 8 * indices
    assert np.array_equal(lengths, np.diff(docs.sentence_offsets))
    assert np.array_equal(pointers, docs.sentence_offsets[:-1] * np.dtype(dtype).itemsize)
    assert np.array_equal(doc_indices, docs.doc_offsets)
    assert np.array_equal(np.fromfile(tmp_path / "p.bin", dtype), docs.tokens)
    assert (info.documents, info.sentences, info.tokens, info.dtype) == (
        docs.num_documents, docs.num_sentences, docs.num_tokens, np.dtype(dtype))
    same_documents(megatron.read_pair(tmp_path / "p"), docs)
    assert megatron.validate_pair(tmp_path / "p", vocab_size) == info
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporaries left


def test_a_failed_write_leaves_nothing(tmp_path):
    docs = documents(2)
    with pytest.raises(ValueError, match="past the vocab"):
        write(tmp_path / "p", docs, vocab_size=int(docs.tokens.max()))
    assert not list(tmp_path.iterdir())


def concatenated(parts: list[Documents]) -> Documents:
    tokens = np.concatenate([p.tokens for p in parts])
    sentence_offsets = np.concatenate(([0], np.cumsum(np.concatenate([np.diff(p.sentence_offsets) for p in parts]))))
    ends, shift = [0], 0
    for p in parts:
        ends += list(p.doc_offsets[1:] + shift)
        shift += p.num_sentences
    return Documents(("all",), tokens, sentence_offsets, np.array(ends))


@pytest.mark.parametrize("buffer", [megatron.BUFFER, 8])
def test_merge_is_the_pair_of_all_documents(tmp_path, monkeypatch, buffer):
    """Merged parts are the bytes one pair of all their documents has; a buffer of 8 bytes
    cuts every section of every file into many reads."""
    monkeypatch.setattr(megatron.codec, "BUFFER", buffer)
    parts = [documents(seed, docs=seed) for seed in (3, 1, 4, 2)]
    for i, docs in enumerate(parts):
        write(tmp_path / f"part{i}", docs)
    merged = megatron.merge_pairs([tmp_path / f"part{i}" for i in range(4)], tmp_path / "merged")
    write(tmp_path / "whole", concatenated(parts))
    for ext in (".bin", ".idx"):
        assert (tmp_path / f"merged{ext}").read_bytes() == (tmp_path / f"whole{ext}").read_bytes()
    whole = concatenated(parts)
    assert (merged.documents, merged.sentences, merged.tokens) == (whole.num_documents, whole.num_sentences,
                                                                   whole.num_tokens)
    assert merged.bin_bytes == (tmp_path / "merged.bin").stat().st_size
    assert merged.idx_sha256 == hashlib.sha256((tmp_path / "merged.idx").read_bytes()).hexdigest()


def test_merge_refuses_mixed_dtypes_and_short_parts(tmp_path):
    write(tmp_path / "a", documents(1))
    write(tmp_path / "b", documents(2, vocab_size=70000), vocab_size=70000)
    with pytest.raises(ValidationError, match=r"b\.idx: ids of int32, but .*a\.idx's are uint16"):
        megatron.merge_pairs([tmp_path / "a", tmp_path / "b"], tmp_path / "m")
    write(tmp_path / "c", documents(3))
    data = (tmp_path / "c.bin").read_bytes()
    (tmp_path / "c.bin").write_bytes(data[:-2])
    with pytest.raises(ValidationError, match=r"c\.bin: ends 2 bytes early"):
        megatron.merge_pairs([tmp_path / "a", tmp_path / "c"], tmp_path / "m")
    (tmp_path / "c.bin").write_bytes(data + b"xx")
    with pytest.raises(ValidationError, match=r"c\.bin: longer than its index"):
        megatron.merge_pairs([tmp_path / "a", tmp_path / "c"], tmp_path / "m")
    assert not list(tmp_path.glob("m*")) and not list(tmp_path.glob(".*"))


# ---------------------------------------------------------------- the validator on corrupt pairs


def corrupt_idx(path: Path, offset: int, data: bytes) -> None:
    raw = bytearray(path.read_bytes())
    raw[offset:offset + len(data)] = data
    path.write_bytes(bytes(raw))


def test_corrupt_pairs_are_named_with_their_fault(tmp_path):
    docs = documents(5)
    n, m = docs.num_sentences, docs.num_documents + 1
    cases = {
        "magic": (lambda p: corrupt_idx(p.with_suffix(".idx"), 0, b"MMIDIDY"), r"\.idx: not a Megatron index"),
        "version": (lambda p: corrupt_idx(p.with_suffix(".idx"), 9, struct.pack("<Q", 2)), r"index version 2"),
        "dtype": (lambda p: corrupt_idx(p.with_suffix(".idx"), 17, b"\x06"), r"dtype code 6 is not"),
        "count": (lambda p: corrupt_idx(p.with_suffix(".idx"), 18, struct.pack("<Q", n + 1)),
                  r"\.idx: .* bytes, but its header's"),
        "idx_truncated": (lambda p: p.with_suffix(".idx").write_bytes(p.with_suffix(".idx").read_bytes()[:-8]),
                          r"\.idx: .* bytes, but its header's"),
        "bin_truncated": (lambda p: p.with_suffix(".bin").write_bytes(p.with_suffix(".bin").read_bytes()[:-2]),
                          r"\.bin: .* bytes, but its index's .* ids make"),
        "pointer": (lambda p: corrupt_idx(p.with_suffix(".idx"), 34 + 4 * n + 8 * 2, struct.pack("<q", 7)),
                    r"\.idx: sequence 2 points to byte 7"),
        "length": (lambda p: corrupt_idx(p.with_suffix(".idx"), 34, struct.pack("<i", -3)),
                   r"\.idx: sequence 0 has a negative length"),
        "doc_end": (lambda p: corrupt_idx(p.with_suffix(".idx"), 34 + 12 * n + 8 * (m - 1), struct.pack("<q", n - 1)),
                    r"document indices run from 0 to"),
        "doc_order": (lambda p: corrupt_idx(p.with_suffix(".idx"), 34 + 12 * n + 8, struct.pack("<q", n)),
                      r"document indices decrease"),
        "missing_bin": (lambda p: p.with_suffix(".bin").unlink(), r"\.bin: missing"),
    }
    for name, (damage, message) in cases.items():
        prefix = tmp_path / name
        write(prefix, docs)
        damage(prefix)
        with pytest.raises(ValidationError, match=message) as err:
            megatron.validate_pair(prefix)
        assert str(prefix) in str(err.value), name
    write(tmp_path / "ids", docs)
    with pytest.raises(ValidationError, match=r"ids\.bin: token \d+ has id \d+, outside the vocab's 100 tokens"):
        megatron.validate_pair(tmp_path / "ids", vocab_size=100)


def test_inspect_prints_figures_and_names_a_corrupt_pair(tmp_path):
    docs = documents(6)
    write(tmp_path / "good_text_sentence", docs)
    write(tmp_path / "bad_text_sentence", docs)
    corrupt_idx(tmp_path / "bad_text_sentence.idx", 0, b"XX")
    proc = run_cli("inspect", tmp_path, check=False)
    assert proc.returncode == 1
    assert (f"good_text_sentence: {docs.num_documents} documents, {docs.num_sentences} sentences, "
            f"{docs.num_tokens} uint16 tokens") in proc.stdout
    assert f"invalid shard: {tmp_path / 'bad_text_sentence.idx'}: not a Megatron index" in proc.stdout
    proc = run_cli("inspect", tmp_path / "good_text_sentence.bin")
    assert "good_text_sentence:" in proc.stdout and "bad" not in proc.stdout


def test_bench_refuses_a_megatron_folder_in_one_line(tmp_path):
    write(tmp_path / "x_text_sentence", documents(7))
    proc = run_cli("bench", "--data", tmp_path, check=False)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        f"bertdata bench: error: {tmp_path}: megatron files hold sentences, which bench does not train from; use a "
        "build's hdf5, lddl, mds or parquet output for bench"]


def test_the_folder_is_named_by_the_tokenizer_as_mds_and_parquet_are():
    """--tokenizer's ids go to megatron/<tokenizer>/, beside mds/<tokenizer>/: under the vocab's
    case they would pass for the vocab's ids."""
    from bertdata.formats import SplitSettings, get

    for label in ("bpe", "lower_case_1"):
        settings = SplitSettings("wikicorpus_en", True, None, 128, (), tokenizer_file=label == "bpe", label=label)
        assert [get(name).folder(settings) for name in ("megatron", "mds", "parquet")] == [
            f"megatron/{label}", f"mds/{label}", f"parquet/{label}"]


# ---------------------------------------------------------------- --format


def test_format_flag_takes_several_formats():
    def formats(*argv):
        return config_from_args(build_parser().parse_args(["build", "--wiki-only", *argv])).formats

    assert formats() == ("hdf5",)
    assert formats("--format", "megatron") == ("megatron",)
    assert formats("--format", "hdf5", "megatron") == ("hdf5", "megatron")
    assert formats("--format", "both", "megatron") == ("hdf5", "lddl", "megatron")
    with pytest.raises(BertdataError, match="--format must name one or more formats, each once"):
        BuildConfig(wiki_only=True, formats=("megatron", "megatron"))
    known = ", ".join(registry.names())
    with pytest.raises(BertdataError, match=rf"--format must be one or more of {known}, "
                                            r"each once, or both \(hdf5 and lddl\) \(got npz\)"):
        formats("--format", "npz")
    with pytest.raises(SystemExit):  # shard writes instances: Megatron's pairs are made by build alone
        build_parser().parse_args(["shard", "in", "--output", "out", "--parts", "2", "--format", "megatron"])


# ---------------------------------------------------------------- the build


def build(out: Path, *extra: str, check: bool = True):
    return run_cli("build", "--wiki-only", "--sample", "--output", out, *SAMPLE_SHARDS, *extra, check=check)


def tokenized_text(output: Path, split: str, vocab: Path = SAMPLE_VOCAB, lowercase: bool = True) -> Documents:
    """The split's text shards, in shard order, tokenized line by line by our WordPiece: a blank
    line ends a document; sentences without tokens and documents without sentences dropped."""
    tokenizer = WordPiece(load_vocab(vocab), lowercase=lowercase)
    folder = next(output.glob("sharded_*/wikicorpus_en"))
    shards = sorted(folder.glob(f"wikicorpus_en_{split}_*.txt"), key=lambda p: int(p.stem.rsplit("_", 1)[1]))
    sentences, doc_ends = [], [0]
    for shard in shards:
        for block in shard.read_text(encoding="utf-8").split("\n\n"):
            lines = [line.strip() for line in block.split("\n") if line.strip()]
            ids, lengths = tokenizer.encode_lines(lines) if lines else (np.empty(0, np.int32), np.empty(0, np.int32))
            pieces = np.split(ids, np.cumsum(lengths)[:-1]) if len(lengths) else []
            kept = [p for p in pieces if len(p)]
            if kept:
                sentences += kept
                doc_ends.append(len(sentences))
    lengths = [len(s) for s in sentences]
    return Documents(tuple(map(str, shards)), np.concatenate(sentences), np.concatenate(([0], np.cumsum(lengths))),
                     np.array(doc_ends))


@pytest.fixture(scope="module")
def in_memory(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("megatron") / "in-memory"
    build(out, "--format", "megatron", "--runner", "in-memory")
    return out


def test_sample_build_holds_the_text_shards_tokenized(in_memory):
    folder = in_memory / FOLDER
    assert sorted(p.name for p in folder.iterdir()) == [
        "manifest.json", "wikicorpus_en_test_text_sentence.bin", "wikicorpus_en_test_text_sentence.idx",
        "wikicorpus_en_training_text_sentence.bin", "wikicorpus_en_training_text_sentence.idx"]
    assert not list(in_memory.glob("hdf5_*")) and not (in_memory / ".bertdata-work").exists()
    manifest = json.loads((folder / "manifest.json").read_text())
    vocab = load_vocab(SAMPLE_VOCAB)
    assert manifest["options"] == {"dataset": "wikicorpus_en", "vocab_sha256": vocab.sha256,
                                   "vocab_size": len(vocab), "lowercase": True, "dtype": "uint16"}
    text = json.loads((in_memory / TEXT / "wikicorpus_en" / "manifest.json").read_text())
    shards = sorted(text["shards"], key=lambda s: (SPLITS.index(s["split"]), s["index"]))
    assert manifest["sources"] == [{"split": s["split"], "file": s["file"], "sha256": s["sha256"]} for s in shards]
    total = 0
    for split, entry in zip(SPLITS, manifest["splits"]):
        prefix = folder / f"wikicorpus_en_{split}_text_sentence"
        ours, expected = megatron.read_pair(prefix), tokenized_text(in_memory, split)
        same_documents(ours, expected)
        assert (entry["split"], entry["documents"], entry["sentences"], entry["tokens"]) == (
            split, expected.num_documents, expected.num_sentences, expected.num_tokens)
        total += expected.num_documents
    assert total == text["counts"]["articles"]
    proc = run_cli("inspect", folder)
    assert "wikicorpus_en_training_text_sentence:" in proc.stdout


def test_cased_text_goes_to_its_own_folder(tmp_path):
    out = tmp_path / "cased"
    build(out, "--format", "megatron", "--cased", "--runner", "in-memory")
    assert [p.name for p in (out / "megatron").iterdir()] == ["lower_case_0"]
    assert json.loads((out / CASED / "manifest.json").read_text())["options"]["lowercase"] is False
    for split in SPLITS:
        same_documents(megatron.read_pair(out / CASED / f"wikicorpus_en_{split}_text_sentence"),
                       tokenized_text(out, split, lowercase=False))


def test_a_dump_without_articles_leaves_no_megatron_folder(tmp_path):
    dump = tmp_path / "empty.xml"
    dump.write_text('<mediawiki xmlns="http://www.mediawiki.org/xml/export-0.10/" version="0.10">'
                    "<siteinfo><sitename>W</sitename><dbname>enwiki</dbname></siteinfo>"
                    "<page><title>A</title><ns>0</ns><id>1</id><redirect title=\"B\" />"
                    "<revision><text>#REDIRECT [[B]]</text></revision></page></mediawiki>")
    proc = run_cli("build", "--wiki-only", "--dump", dump, "--vocab", SAMPLE_VOCAB, "--output", tmp_path / "o",
                   "--format", "hdf5", "megatron", "--runner", "in-memory", check=False)
    assert proc.returncode == 2 and "no articles" in proc.stderr
    assert [p.name for p in (tmp_path / "o").iterdir()] == ["build.log"]


@pytest.mark.slow
def test_same_bytes_with_two_workers_and_hdf5_and_resume(in_memory, tmp_path):
    """Two workers, both phases, hdf5 beside: the pairs of the one-process run, made once; a re-run
    keeps the finished folder; pairs no build recorded are refused; an interrupted build's folder
    (its marker, no manifest) is made again, the same."""
    out = tmp_path / "both"
    proc = build(out, "--format", "hdf5", "megatron", "--workers", "2")
    assert proc.stdout.count("megatron: ") == 1
    files = {p.name: p.read_bytes() for p in (out / FOLDER).iterdir()}
    assert digest(files.items()) == digest((p.name, p.read_bytes()) for p in (in_memory / FOLDER).iterdir())
    hdf5 = json.loads(next(out.glob("hdf5_*seq_len_128*/wikicorpus_en/manifest.json")).read_text())
    assert hdf5["counts"]["documents"] == json.loads(files["manifest.json"])["counts"]["documents"]
    proc = build(out, "--format", "hdf5", "megatron", "--workers", "2")
    assert f"{out / FOLDER}: already complete, kept" in proc.stderr
    assert {p.name: p.read_bytes() for p in (out / FOLDER).iterdir()} == files
    (out / FOLDER / "manifest.json").unlink()
    (out / FOLDER / "wikicorpus_en_test_text_sentence.bin").write_bytes(b"half")
    proc = build(out, "--format", "megatron", "--workers", "2", check=False)
    assert proc.returncode == 2
    assert (f"{out / FOLDER}: holds wikicorpus_en_test_text_sentence.bin, which no bertdata build recorded; "
            "pass --force") in proc.stderr
    (out / FOLDER / ".bertdata-writing").write_bytes(b"")
    build(out, "--format", "megatron", "--workers", "2")
    again = {p.name: p.read_bytes() for p in (out / FOLDER).iterdir()}
    assert digest(again.items()) == digest(files.items())


def test_a_folder_of_another_vocab_is_refused(in_memory, tmp_path):
    import shutil

    out = tmp_path / "copy"
    shutil.copytree(in_memory, out)
    manifest_path = out / FOLDER / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    manifest["options"]["vocab_sha256"] = "0" * 64
    manifest_path.write_text(json.dumps(manifest))
    proc = build(out, "--format", "megatron", "--runner", "in-memory", check=False)
    assert proc.returncode == 2
    assert f"{out / FOLDER}: holds megatron files made with another vocab, tokenizer or options" in proc.stderr
    proc = build(out, "--format", "megatron", "--runner", "in-memory", "--force")
    assert (out / FOLDER / "wikicorpus_en_training_text_sentence.bin").read_bytes() == (
        in_memory / FOLDER / "wikicorpus_en_training_text_sentence.bin").read_bytes()


# ---------------------------------------------------------------- Megatron's own code


# Megatron's own code runs on torch, which the bench extra installs (the tested version).
needs_megatron = needs_extra("bench,megatron", "megatron.core", "transformers", "torch")

MEGATRON_CHECK = r'''
import json, os, sys
import numpy as np
import torch
from megatron.core.datasets.indexed_dataset import IndexedDataset, IndexedDatasetBuilder
from megatron.core.datasets.bert_dataset import BERTMaskedWordPieceDataset, BERTMaskedWordPieceDatasetConfig
from megatron.core.datasets.utils import Split
from megatron.core.tokenizers import MegatronTokenizer

with open(sys.argv[1], encoding="utf-8") as f:
    args = json.load(f)
report = {}
tokenizer = MegatronTokenizer.from_pretrained(tokenizer_path=args["tokenizer"],
                                              metadata_path={"library": "huggingface"})
report["tokenizer"] = type(tokenizer._tokenizer.tokenizer).__name__
# The sentences, ids by Megatron's BERT word-piece tokenizer.
report["tokenized"] = [tokenizer.tokenize(line) for line in args["sentences"]]
for split, prefix in args["prefixes"].items():
    ds = IndexedDataset(prefix)
    report[split] = {"document_indices": ds.document_indices.tolist(),
                     "sequences": [ds[i].tolist() for i in range(len(ds))],
                     "dtype": np.dtype(ds.index.dtype).name}
    # The same sentences through Megatron's own writer.
    copy = os.path.join(args["tmp"], split)
    builder = IndexedDatasetBuilder(copy + ".bin", dtype=ds.index.dtype)
    for d in range(len(ds.document_indices) - 1):
        for s in range(ds.document_indices[d], ds.document_indices[d + 1]):
            builder.add_item(torch.from_numpy(ds[s].astype(np.int64)))
        builder.end_document()
    builder.finalize(copy + ".idx")
    report[split]["rewritten"] = copy
# BERT samples, on CPU: the sample index is built on rank 0 of a process group (gloo, one process).
torch.distributed.init_process_group("gloo", init_method="file://" + os.path.join(args["tmp"], "pg"), rank=0,
                                     world_size=1)
prefix = args["prefixes"]["training"]
ds = IndexedDataset(prefix)
config = BERTMaskedWordPieceDatasetConfig(
    random_seed=1234, sequence_length=args["seq_len"], blend=([prefix], None), split="100,0,0",
    path_to_cache=os.path.join(args["tmp"], "cache"), tokenizer=tokenizer, masking_probability=0.15,
    short_sequence_probability=0.1, masking_max_ngram=3, masking_do_full_word=True, masking_do_permutation=False,
    masking_use_longer_ngrams=False, masking_use_geometric_distribution=False, classification_head=True)
bert = BERTMaskedWordPieceDataset(ds, prefix, np.arange(len(ds.document_indices) - 1, dtype=np.int32),
                                  args["samples"], Split.train, config)
samples = []
for i in range(len(bert)):
    s = bert[i]
    original = np.where(s["loss_mask"] == 1, s["labels"], s["text"])
    # padding_mask is 0 wherever text is [PAD], also where masking put a random [PAD] inside the
    # sample; the sample ends with its last 1, the final [SEP] (never masked).
    real = int(np.flatnonzero(s["padding_mask"])[-1]) + 1
    samples.append({"tokens": original[:real].tolist(), "types": s["types"][:real].tolist(),
                    "length": len(s["text"]), "masked_at": np.flatnonzero(s["loss_mask"]).tolist(),
                    "holes": np.flatnonzero(s["padding_mask"][:real] == 0).tolist()})
report["bert"] = {"samples": samples, "cls": tokenizer.cls, "sep": tokenizer.sep}
print(json.dumps(report))
'''


def megatron_check(output: Path, folder: Path, vocab: Path, tmp_path: Path, sentences: int, samples: int) -> dict:
    """Runs MEGATRON_CHECK on a build's pairs and checks what it found; returns its figures."""
    import subprocess

    tokenizer_dir = tmp_path / "tokenizer"
    tokenizer_dir.mkdir()
    (tokenizer_dir / "vocab.txt").write_bytes(vocab.read_bytes())
    (tokenizer_dir / "tokenizer_config.json").write_text(json.dumps({"tokenizer_class": "BertTokenizer",
                                                                     "do_lower_case": True}))
    lines = [line.strip() for shard in sorted(next(output.glob("sharded_*/wikicorpus_en")).glob("*.txt"))
             for line in shard.read_text(encoding="utf-8").splitlines() if line.strip()]
    picked = sorted(np.random.default_rng(0).choice(len(lines), min(sentences, len(lines)), replace=False))
    lines = [lines[i] for i in picked]
    prefixes = {split: str(output / folder / f"wikicorpus_en_{split}_text_sentence") for split in SPLITS}
    args = {"tokenizer": str(tokenizer_dir), "sentences": lines, "prefixes": prefixes, "tmp": str(tmp_path),
            "seq_len": 128, "samples": samples}
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    (tmp_path / "args.json").write_text(json.dumps(args), encoding="utf-8")
    proc = subprocess.run([sys.executable, "-c", MEGATRON_CHECK, tmp_path / "args.json"], capture_output=True,
                          text=True, timeout=600, env=env)
    assert proc.returncode == 0, proc.stderr[-4000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])

    assert report["tokenizer"] == "BertTokenizer"
    ids, lengths = WordPiece(load_vocab(vocab), lowercase=True).encode_lines(lines)
    assert report["tokenized"] == [p.tolist() for p in np.split(ids, np.cumsum(lengths)[:-1])]

    figures = {"documents": 0, "sentences": 0, "tokenizer_sentences": len(lines)}
    for split, prefix in prefixes.items():
        expected = tokenized_text(output, split, vocab)
        found = report[split]
        assert found["dtype"] == "uint16"
        assert found["document_indices"] == expected.doc_offsets.tolist()
        assert found["sequences"] == [expected.tokens[a:b].tolist()
                                      for a, b in zip(expected.sentence_offsets[:-1], expected.sentence_offsets[1:])]
        for ext in (".bin", ".idx"):
            assert Path(found["rewritten"] + ext).read_bytes() == Path(prefix + ext).read_bytes()
        figures["documents"] += expected.num_documents
        figures["sentences"] += expected.num_sentences

    training = tokenized_text(output, "training", vocab)
    streams = [",".join(map(str, training.tokens[training.sentence_offsets[a]:training.sentence_offsets[b]]))
               for a, b in zip(training.doc_offsets[:-1], training.doc_offsets[1:])]
    bert = report["bert"]
    assert len(bert["samples"]) >= samples
    for sample in bert["samples"]:
        tokens, types = sample["tokens"], sample["types"]
        assert sample["length"] == 128 and len(tokens) <= 128
        assert set(sample["holes"]) <= set(sample["masked_at"]), sample  # a hole is a masked token, drawn as [PAD]
        assert tokens[0] == bert["cls"] and tokens[-1] == bert["sep"]
        first_end = types.index(1) - 1 if 1 in types else len(tokens) - 1
        assert tokens[first_end] == bert["sep"]
        for segment in (t for t in (tokens[1:first_end], tokens[first_end + 1:-1]) if t):
            run = ",".join(map(str, segment))
            assert any(f",{run}," in f",{stream}," for stream in streams), segment
    # Megatron may mask nothing in a very short sample, never in all of them.
    assert sum(len(sample["masked_at"]) for sample in bert["samples"]) > len(bert["samples"])
    figures["bert_samples"] = len(bert["samples"])
    return figures


@pytest.mark.slow
@needs_megatron
def test_megatron_core_reads_our_pairs(in_memory, tmp_path):
    """Megatron's own code reads the sample build's pairs (megatron-core, the `megatron` extra).

    - `IndexedDataset`: every document and sentence is ours, i.e. the text shards tokenized by
      our tokenizer; and Megatron's own `IndexedDatasetBuilder`, fed those sentences, writes
      our bytes.
    - Megatron's BERT word-piece tokenizer gives our ids for the text shards' sentences.
      `--tokenizer-type BertWordPieceLowerCase` resolves to Hugging Face's
      `AutoTokenizer.from_pretrained('bert-large-uncased', vocab_file=...)`, which asks the
      Hugging Face hub for the model's config: no network here. So the test builds the same
      tokenizer through megatron-core's `MegatronTokenizer.from_pretrained` from a local folder
      holding the vocab and a tokenizer_config.json saying BertTokenizer, lower case (library
      huggingface): the same BertTokenizer on the same vocab, without the hub.
    - `BERTMaskedWordPieceDataset` draws samples from our training pair on CPU (its sample
      index is built on rank 0 of a torch.distributed group: one gloo process here; the number
      of samples must be given, as Megatron's dataset builder always does), and each sample's
      segments, unmasked, are runs of one of our documents' tokens. Its masking's random tokens
      differ from run to run (it draws them from the Hugging Face tokenizer's vocab in hash-map
      order, another order in every process), so a masked token may become [PAD], which the
      sample's padding_mask marks 0 as it does the padding.
    Runs in a subprocess: megatron-core's import loads torch and warns about missing GPU kernels.
    """
    figures = megatron_check(in_memory, FOLDER, SAMPLE_VOCAB, tmp_path, sentences=10_000, samples=200)
    assert (figures["documents"], figures["sentences"]) == (34, 582)
    assert figures["tokenizer_sentences"] >= 582


@pytest.mark.slow
@needs_megatron
def test_megatron_core_on_the_fragment_with_the_real_vocab(tmp_path):
    """The same check on the real Wikipedia fragment with bert-base-uncased's vocab (the vocab
    BertWordPieceLowerCase downloads), its tokenizer on 3,000 sentences drawn at random."""
    need(WIKI_FRAGMENT)
    out = tmp_path / "fragment"
    run_cli("build", "--wiki-only", "--dump", WIKI_FRAGMENT, "--vocab", VOCAB, "--output", out,
            "--training-shards", "4", "--test-shards", "1", "--format", "megatron", "--workers", "2")
    figures = megatron_check(out, FOLDER, VOCAB, tmp_path, sentences=3_000, samples=500)
    assert figures["sentences"] > 10_000 and figures["tokenizer_sentences"] == 3_000
