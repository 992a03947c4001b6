"""A text shard's samples for the formats that hold documents: against a plain port of the rule
(sentences added greedily while they fit, a sentence longer than the room cut into pieces of the
room), and decoded by `tokenizers` back to the documents' text."""

from __future__ import annotations

import unicodedata
from pathlib import Path

import numpy as np
import pytest
from tokenizers import Tokenizer

from bertdata.errors import BertdataError
from bertdata.instances.documents import Documents, read_documents
from bertdata.instances.samples import check_sample_length, make_samples
from bertdata.instances.tokenize import WordPiece
from bertdata.instances.tokenizer_file import TokenizerFile
from bertdata.instances.vocab import load_vocab
from conftest import SHARD_A, TOKENIZER_KINDS, VOCAB, trained_tokenizer


def reference(documents: Documents, room: int) -> list[tuple[int, int, list[int]]]:
    """(document, piece, body) of every sample, by the rule written out plainly."""
    tokens = documents.tokens.tolist()
    out = []
    for d in range(documents.num_documents):
        units = []
        for s in range(documents.doc_offsets[d], documents.doc_offsets[d + 1]):
            sentence = tokens[documents.sentence_offsets[s]:documents.sentence_offsets[s + 1]]
            units.extend(sentence[i:i + room] for i in range(0, len(sentence), room))
        pieces, current = [], []
        for unit in units:
            if current and len(current) + len(unit) > room:
                pieces.append(current)
                current = []
            current = current + unit
        pieces.append(current)
        out.extend((d, k, piece) for k, piece in enumerate(pieces))
    return out


def check(samples, documents, tokenizer, max_length):
    prefix, suffix = list(tokenizer.prefix), list(tokenizer.suffix)
    room = max_length - len(prefix) - len(suffix)
    expected = reference(documents, room)
    assert len(samples) == len(expected)
    assert samples.offsets.dtype == np.int64 and samples.document.dtype == np.int64
    assert samples.piece.dtype == np.int32
    assert samples.tokens.dtype == (np.uint16 if tokenizer.vocab_size <= 1 << 16 else np.uint32)
    for i, (document, piece, body) in enumerate(expected):
        got = samples.sample(i).tolist()
        assert len(got) <= max_length
        assert got == prefix + body + suffix
        assert (int(samples.document[i]), int(samples.piece[i])) == (document, piece)
    # Every token of every document once, in order.
    bodies = [samples.sample(i)[len(prefix):len(samples.sample(i)) - len(suffix)] for i in range(len(samples))]
    assert np.array_equal(np.concatenate(bodies), documents.tokens)


@pytest.fixture(scope="module")
def shard_read():
    """SHARD_A read with a tokenizer file, once per file for the module (a second or so each):
    (its TokenizerFile, the documents). make_samples only reads the documents."""
    read: dict[Path, tuple[TokenizerFile, Documents]] = {}

    def get(path: Path) -> tuple[TokenizerFile, Documents]:
        if path not in read:
            tokenizer = TokenizerFile(path)
            read[path] = tokenizer, read_documents(SHARD_A, tokenizer)
        return read[path]

    return get


@pytest.fixture(scope="module")
def bpe(shard_read):
    return shard_read(trained_tokenizer("bpe"))[0]


@pytest.fixture(scope="module")
def bpe_documents(shard_read):
    return shard_read(trained_tokenizer("bpe"))[1]


@pytest.mark.parametrize("max_length", [8, 64, 1024])
def test_real_shard_samples_follow_the_rule(bpe, bpe_documents, max_length):
    documents = bpe_documents
    samples = make_samples(documents, bpe, max_length)
    assert samples.source == "shard_A"
    check(samples, documents, bpe, max_length)
    # The 40 articles are long: they are cut, some pieces fill the length, and greedy packing
    # leaves no two consecutive pieces of a document that would fit in one.
    room = max_length - 2
    bodies = np.diff(samples.offsets) - 2
    assert bodies.max() == room and (samples.piece > 0).any()
    same_document = samples.document[1:] == samples.document[:-1]
    assert (bodies[1:] + bodies[:-1] > room)[same_document].all()


def test_cuts_fall_at_sentence_boundaries_but_inside_a_sentence_longer_than_the_room(bpe, bpe_documents):
    documents = bpe_documents
    max_length = 48
    samples = make_samples(documents, bpe, max_length)
    room = max_length - 2
    bodies = np.diff(samples.offsets) - 2
    starts = np.concatenate(([0], np.cumsum(bodies)[:-1]))  # each sample's first token in the shard
    sentence_starts = set(documents.sentence_offsets[:-1].tolist())
    lengths = np.diff(documents.sentence_offsets)
    sentence_of = np.searchsorted(documents.sentence_offsets, starts, side="right") - 1
    inside = [s for s, t in zip(sentence_of.tolist(), starts.tolist()) if t not in sentence_starts]
    assert inside, "the shard has sentences longer than the room"
    assert all(lengths[s] > room for s in inside)


def test_wordpiece_vocab_txt_samples_carry_cls_and_sep():
    tokenizer = WordPiece(load_vocab(VOCAB))
    documents = read_documents(SHARD_A, tokenizer)
    samples = make_samples(documents, tokenizer, 128, source="A")
    check(samples, documents, tokenizer, 128)
    assert samples.sample_id(0) == "A/0/0"
    assert {int(samples.sample(i)[0]) for i in range(len(samples))} == {tokenizer.vocab.cls_id}


def test_a_sentence_longer_than_the_room_is_cut_into_pieces_of_the_room(bpe):
    # Documents: [3 | 10 | 2 2], [1], [7]; room 4 (max_length 6 with <s> and </s>).
    lengths = [3, 10, 2, 2, 1, 7]
    tokens = np.arange(10, 10 + sum(lengths), dtype=np.uint16)
    documents = Documents(("x.txt",), tokens, np.concatenate(([0], np.cumsum(lengths))).astype(np.int64),
                          np.array([0, 4, 5, 6], dtype=np.int64))
    samples = make_samples(documents, bpe, 6)
    check(samples, documents, bpe, 6)
    bodies = [samples.sample(i)[1:-1].tolist() for i in range(len(samples))]
    # The 10-token sentence makes 4 + 4 + 2, and its last piece takes the next 2-token sentence.
    assert [len(b) for b in bodies] == [3, 4, 4, 4, 2, 1, 4, 3]
    assert bodies[3] == list(range(21, 25))
    assert samples.document.tolist() == [0, 0, 0, 0, 0, 1, 2, 2]
    assert samples.piece.tolist() == [0, 1, 2, 3, 4, 0, 0, 1]


def test_room_of_one_token(bpe, bpe_documents):
    documents = bpe_documents
    samples = make_samples(documents, bpe, 3)
    assert len(samples) == documents.num_tokens
    assert np.array_equal(samples.tokens[1::3], documents.tokens)


def test_empty_shard_makes_no_samples(bpe):
    documents = Documents(("x.txt",), np.empty(0, np.uint16), np.zeros(1, np.int64), np.zeros(1, np.int64))
    samples = make_samples(documents, bpe, 16)
    assert len(samples) == 0 and len(samples.tokens) == 0 and samples.offsets.tolist() == [0]


@pytest.mark.parametrize("kind", ["bpe", "unigram"])
def test_samples_decode_to_the_documents_text(kind, shard_read):
    path = trained_tokenizer(kind)
    tokenizer, documents = shard_read(path)
    theirs = Tokenizer.from_file(str(path))
    samples = make_samples(documents, tokenizer, 64)
    lines = SHARD_A.read_text(encoding="utf-8").split("\n")
    texts, current = [], []
    for line in lines:
        if line.strip():
            current.append(line.strip())
        elif current:
            texts.append(current)
            current = []
    if current:
        texts.append(current)
    assert len(texts) == documents.num_documents
    prefix, suffix = len(tokenizer.prefix), len(tokenizer.suffix)
    for d in range(documents.num_documents):
        ids = np.concatenate([samples.sample(i)[prefix:len(samples.sample(i)) - suffix]
                              for i in np.flatnonzero(samples.document == d)])
        decoded = theirs.decode(ids.tolist(), skip_special_tokens=False)
        if kind == "bpe":  # byte-level, a space before each sentence: exact
            assert decoded == "".join(" " + unicodedata.normalize("NFC", s) for s in texts[d])
        else:  # Metaspace: sentences joined by a space; NFKC as its normalizer
            assert decoded == unicodedata.normalize("NFKC", " ".join(texts[d]))


def test_a_length_the_tokenizer_cannot_hold_is_one_line(bpe, bpe_documents, tmp_path):
    for max_length in (2, 0, -5, 1.5):
        with pytest.raises(BertdataError, match="leaves no room for a token beside the tokenizer's 2 special tokens") as err:
            check_sample_length(bpe, max_length)
        assert str(err.value).startswith(f"{bpe.path}: ") and "\n" not in str(err.value)
    check_sample_length(bpe, 3)
    (tmp_path / "tokenizer.json").write_bytes(trained_tokenizer("bpe").read_bytes())
    (tmp_path / "tokenizer_config.json").write_text('{"model_max_length": 512}', encoding="utf-8")
    limited = TokenizerFile(tmp_path / "tokenizer.json")
    check_sample_length(limited, 512)
    with pytest.raises(BertdataError, match="a sample length of 1024 is over the 512 tokens the tokenizer states"):
        make_samples(bpe_documents, limited, 1024)


def shard_documents() -> list[list[str]]:
    """SHARD_A's documents, each its sentences (lines stripped, a blank line between documents)."""
    documents, current = [], []
    for line in SHARD_A.read_text(encoding="utf-8").splitlines():
        if line.strip():
            current.append(line.strip())
        elif current:
            documents.append(current)
            current = []
    return documents + [current] if current else documents


def roberta_style(folder: Path, kind: str) -> Path:
    """Tokenizers trained here on the shard's first 2,000 sentences, as today's models ship them:
    a byte-level BPE with no prefix space (RoBERTa's, ModernBERT's: `ĠThe` after the first
    sentence, `The` first), and a Metaspace Unigram behind a normalizer that changes the text
    (lower case, runs of spaces and quotes rewritten)."""
    from tokenizers import Regex, decoders, models, normalizers, pre_tokenizers, processors, trainers

    lines = [s for document in shard_documents() for s in document][:2000]
    if kind == "bpe":
        tokenizer = Tokenizer(models.BPE())
        tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tokenizer.decoder = decoders.ByteLevel()
        tokenizer.train_from_iterator(lines, trainers.BpeTrainer(
            vocab_size=3000, special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"],
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False))
        tokenizer.post_processor = processors.RobertaProcessing(
            ("</s>", tokenizer.token_to_id("</s>")), ("<s>", tokenizer.token_to_id("<s>")))
    else:
        tokenizer = Tokenizer(models.Unigram())
        tokenizer.normalizer = normalizers.Sequence([
            normalizers.NFKD(), normalizers.StripAccents(), normalizers.Lowercase(),
            normalizers.Replace(Regex(" {2,}"), " "), normalizers.Replace("``", '"')])
        tokenizer.pre_tokenizer = pre_tokenizers.Metaspace(prepend_scheme="first")
        tokenizer.decoder = decoders.Metaspace(prepend_scheme="first")
        tokenizer.train_from_iterator(lines, trainers.UnigramTrainer(
            vocab_size=2000, special_tokens=["<cls>", "<sep>", "<unk>"], unk_token="<unk>", show_progress=False))
        tokenizer.post_processor = processors.TemplateProcessing(
            single="<cls> $A <sep>", pair="<cls> $A <sep> $B <sep>",
            special_tokens=[(t, tokenizer.token_to_id(t)) for t in ("<cls>", "<sep>")])
    path = folder / "tokenizer.json"
    tokenizer.save(str(path))
    return path


@pytest.fixture(scope="module")
def trained_here(tmp_path_factory):
    """`roberta_style`'s tokenizer of a kind, trained once for the module."""
    made: dict[str, Path] = {}

    def get(kind: str) -> Path:
        if kind not in made:
            made[kind] = roberta_style(tmp_path_factory.mktemp(kind), kind)
        return made[kind]

    return get


# The Unigram's training and its read of the shard take seconds: outside the unit tier.
@pytest.fixture(scope="module", params=["bpe", pytest.param("unigram", marks=pytest.mark.slow)])
def no_prefix_space(request, trained_here):
    return trained_here(request.param)


@pytest.mark.parametrize("max_length", [48, pytest.param(1024, marks=pytest.mark.slow)])
def test_samples_are_runs_of_the_tokenizers_ids_on_each_documents_text(no_prefix_space, max_length, shard_read):
    """A document's text is its sentences joined by one space; its samples, special tokens
    stripped, are `tokenizer.encode(text)` in order, cut at sentence boundaries."""
    theirs = Tokenizer.from_file(str(no_prefix_space))
    tokenizer, documents = shard_read(no_prefix_space)
    samples = make_samples(documents, tokenizer, max_length)
    check(samples, documents, tokenizer, max_length)
    texts = [" ".join(sentences) for sentences in shard_documents()]
    assert documents.num_documents == len(texts)
    prefix, suffix = len(tokenizer.prefix), len(tokenizer.suffix)
    for d, text in enumerate(texts):
        pieces = [samples.sample(i)[prefix:len(samples.sample(i)) - suffix].tolist()
                  for i in np.flatnonzero(samples.document == d)]
        assert [t for piece in pieces for t in piece] == theirs.encode(text, add_special_tokens=False).ids


def test_a_sentence_after_the_first_starts_with_the_space_before_it(trained_here, shard_read):
    """Byte-level, no prefix space: each sentence's tokens decode to the sentence, after the
    first with the space that joins it to the one before (`ĠThe`, not `The`)."""
    path = trained_here("bpe")
    theirs = Tokenizer.from_file(str(path))
    documents = shard_read(path)[1]
    sentences = shard_documents()
    assert documents.num_sentences == sum(map(len, sentences))
    s = 0
    for d, lines in enumerate(sentences):
        for k, line in enumerate(lines):
            ids = documents.tokens[documents.sentence_offsets[s]:documents.sentence_offsets[s + 1]].tolist()
            assert theirs.decode(ids) == (" " if k else "") + line
            s += 1


@pytest.mark.slow  # the whole shard through each of four tokenizers
@pytest.mark.parametrize("kind", [*TOKENIZER_KINDS, "vocab.txt"])
def test_every_kind_gives_its_ids_on_the_documents_text_whatever_the_blocks(kind, monkeypatch):
    """The suite's tokenizers, and the compiled WordPiece of a vocab.txt, give each document's
    ids on its whole text, with documents cut across the blocks the shard is read in."""
    from bertdata.instances import documents as documents_module
    from bertdata.instances.tokenizer_file import open_tokenizer

    theirs = Tokenizer.from_file(str(trained_tokenizer("wordpiece" if kind == "vocab.txt" else kind)))
    tokenizer = open_tokenizer(VOCAB if kind == "vocab.txt" else trained_tokenizer(kind))
    monkeypatch.setattr(documents_module, "BLOCK_BYTES", 5000)
    documents = read_documents(SHARD_A, tokenizer)
    texts = [" ".join(sentences) for sentences in shard_documents()]
    assert documents.num_documents == len(texts)
    expected = [theirs.encode(text, add_special_tokens=False).ids for text in texts]
    assert documents.tokens.tolist() == [t for ids in expected for t in ids]
    assert np.diff(documents.sentence_offsets[documents.doc_offsets]).tolist() == list(map(len, expected))
