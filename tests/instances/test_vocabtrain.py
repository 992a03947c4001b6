"""`bertdata vocab`: WordPiece training that is deterministic, complete and safe to run."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from bertdata.config import VocabConfig
from bertdata.errors import BertdataError
from bertdata.instances.vocab import SPECIAL_TOKENS, load_vocab
from bertdata.instances.vocabtrain import CharacterCounter, build_vocab
from bertdata.text.wikidump import sample_paths
from conftest import SHARD_A, run_cli

SAMPLE_DUMP = sample_paths()[0]


@pytest.fixture(scope="module")
def sample_sentences(tmp_path_factory) -> Path:
    """The sample's articles as a text file, one sentence per line, blank line between articles."""
    from bertdata.text.articles import page_document
    from bertdata.text.sentences import default_splitter
    from bertdata.text.wikidump import iter_pages

    counts: Counter = Counter()
    docs = [page_document(p, default_splitter(), 5_000_000, counts) for p in iter_pages(SAMPLE_DUMP)]
    path = tmp_path_factory.mktemp("text") / "sample.txt"
    path.write_text("".join("".join(s + "\n" for s in d.sentences) + "\n" for d in docs if d), encoding="utf-8")
    return path


def test_cli_is_deterministic_across_processes(tmp_path, sample_sentences):
    # Each process seeds the Rust trainer's hash maps differently: equal output here means
    # the result does not depend on hash order.
    outputs = []
    for i in range(3):
        out = tmp_path / f"vocab{i}.txt"
        proc = run_cli("vocab", sample_sentences, "--output", out, "--size", "1500", "--limit-alphabet", "40")
        assert "1,500 tokens" in proc.stdout and "40 of" in proc.stdout
        assert proc.stderr == ""  # no progress bars drawn into a pipe or a log
        outputs.append(out.read_bytes())
    assert outputs[0] == outputs[1] == outputs[2]
    tokens = outputs[0].decode().splitlines()
    assert tuple(tokens[:5]) == SPECIAL_TOKENS
    assert len(tokens) == len(set(tokens)) == 1500


def test_vocab_layout(tmp_path, sample_sentences):
    out = tmp_path / "vocab.txt"
    summary = build_vocab([sample_sentences], out, VocabConfig(size=2000))
    tokens = out.read_text(encoding="utf-8").splitlines()
    assert summary.tokens == len(tokens) == 2000
    assert tuple(tokens[:5]) == SPECIAL_TOKENS
    alphabet = tokens[5 : 5 + summary.alphabet]
    assert all(len(t) == 1 for t in alphabet) and alphabet == sorted(alphabet)
    assert "##s" in tokens and "harbour" in tokens and "the" in tokens
    assert not any(t != t.lower() for t in tokens[5:])  # uncased: lower-cased
    assert "##," not in tokens  # punctuation never continues a word
    load_vocab(out)  # a valid vocab for the rest of bertdata


def test_alphabet_ties_break_by_code_point(tmp_path):
    text = tmp_path / "ties.txt"
    # z, y, x, w each appear 3 times; a more often. A limit of 3 keeps a, then w and x.
    text.write_text("aaaa zzz yyy xxx www\naaaa\n", encoding="utf-8")
    counter = CharacterCounter(lowercase=True)
    counter.add_lines(text.read_text().splitlines(keepends=True))
    assert counter.alphabet(3) == ["a", "w", "x"]
    out = tmp_path / "v.txt"
    build_vocab([text], out, VocabConfig(size=30, min_frequency=1, limit_alphabet=3))
    tokens = out.read_text().splitlines()
    assert {"a", "w", "x"} <= set(tokens) and "y" not in tokens and "z" not in tokens


def test_cased(tmp_path, sample_sentences):
    out = tmp_path / "cased.txt"
    build_vocab([sample_sentences], out, VocabConfig(size=1200, lowercase=False))
    tokens = out.read_text(encoding="utf-8").splitlines()
    assert "H" in tokens and "V" in tokens
    assert any(t[0].isupper() and len(t) > 1 for t in tokens[5:])


def test_dump_equals_its_sentences(tmp_path, sample_sentences):
    """Training on the dump cleans and splits exactly as the pipeline's text shards do."""
    from_dump, from_text = tmp_path / "dump.txt", tmp_path / "text.txt"
    summary = build_vocab([], from_dump, VocabConfig(size=1800), dumps=[SAMPLE_DUMP])
    build_vocab([sample_sentences], from_text, VocabConfig(size=1800))
    assert summary.articles == 34
    assert from_dump.read_bytes() == from_text.read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dump.txt", "text.txt"]  # temp text removed


def test_refuses_to_overwrite_without_force(tmp_path, sample_sentences):
    out = tmp_path / "vocab.txt"
    out.write_text("mine\n")
    proc = run_cli("vocab", sample_sentences, "--output", out, "--size", "500", check=False)
    assert proc.returncode == 2
    assert f"bertdata vocab: error: {out}: already exists; pass --force" in proc.stderr
    assert out.read_text() == "mine\n"
    run_cli("vocab", sample_sentences, "--output", out, "--size", "500", "--force")
    assert out.read_text().splitlines()[:5] == list(SPECIAL_TOKENS)
    assert [p.name for p in tmp_path.iterdir()] == ["vocab.txt"]


def test_bad_inputs(tmp_path):
    out = tmp_path / "vocab.txt"
    with pytest.raises(BertdataError, match="nothing to train on"):
        build_vocab([], out, VocabConfig())
    with pytest.raises(BertdataError, match="input file not found"):
        build_vocab([tmp_path / "missing.txt"], out, VocabConfig())
    latin1 = tmp_path / "latin1.txt"
    latin1.write_bytes("caf\xe9 au lait\n".encode("latin-1"))
    with pytest.raises(BertdataError, match=r"latin1.txt: not UTF-8"):
        build_vocab([latin1], out, VocabConfig())
    blank = tmp_path / "blank.txt"
    blank.write_text("\n  \n")
    with pytest.raises(BertdataError, match="no text to train on"):
        build_vocab([blank], out, VocabConfig())
    with pytest.raises(BertdataError, match="output folder .* does not exist"):
        build_vocab([blank], tmp_path / "nowhere" / "v.txt", VocabConfig())
    with pytest.raises(BertdataError, match="--size must be at least 10"):
        VocabConfig(size=3)
    assert not out.exists()
    proc = run_cli("vocab", "--output", out, check=False)
    assert proc.returncode == 2 and "nothing to train on" in proc.stderr


@pytest.mark.slow  # a vocab of 8,000 trained on a whole shard
def test_trained_vocab_covers_the_parity_shard(tmp_path):
    """A vocab trained on a shard tokenizes that shard with almost no [UNK]."""
    shard = SHARD_A
    from bertdata.instances.tokenize import WordPiece

    out = tmp_path / "vocab.txt"
    build_vocab([shard], out, VocabConfig(size=8000))
    vocab = load_vocab(out)
    lines = [line for line in shard.read_text(encoding="utf-8").splitlines() if line.strip()]
    ids, _ = WordPiece(vocab).encode_lines(lines)
    assert len(ids) > 100_000
    assert (ids == vocab.unk_id).mean() < 0.001


def test_cleaning_a_dump_draws_no_bar_into_a_log(tmp_path):
    proc = run_cli("vocab", "--dump", SAMPLE_DUMP, "--output", tmp_path / "vocab.txt", "--size", "500")
    assert "34 articles" in proc.stdout and proc.stderr == ""
