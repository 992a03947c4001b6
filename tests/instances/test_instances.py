"""The compiled instance kernel against a plain-Python port of the reference algorithm,
text shard reading, and `bertdata instances` on bad input."""

from __future__ import annotations

import random
import re
from collections import OrderedDict
from dataclasses import replace

import numpy as np
import pytest

from bertdata import cli
from bertdata.config import InstanceConfig
from bertdata.errors import BertdataError
from bertdata.formats.hdf5io import FIELDS, read_shard, shard_attrs
from bertdata.formats.hdf5 import write_instances
from bertdata.instances import masking
from bertdata.instances.create import create_instances, make_shard
from bertdata.instances.documents import Documents, read_documents
from bertdata.instances.tokenize import WordPiece
from bertdata.instances.vocab import Vocab, load_vocab
from conftest import SAMPLE_VOCAB, SHARD_A, VOCAB, needs_test_data


# --- the reference algorithm: create_pretraining_data.py, as NVIDIA's BERT recipe runs it, ported plainly

def reference_instances(documents, vocab_tokens, cfg, seed):
    """documents: lists of sentences, each a list of token strings. Returns the six arrays."""
    rng = random.Random(seed)
    vocab = OrderedDict()
    for index, token in enumerate(vocab_tokens):
        vocab[token] = index
    vocab_words = list(vocab.keys())
    documents = [d for d in documents if d]
    rng.shuffle(documents)
    instances = []
    for _ in range(cfg.dupe_factor):
        for d in range(len(documents)):
            instances.extend(_from_document(documents, d, cfg, vocab_words, rng))
    rng.shuffle(instances)

    n, seq, pred = len(instances), cfg.max_seq_length, cfg.max_predictions_per_seq
    out = {
        "input_ids": np.zeros((n, seq), "i4"), "input_mask": np.zeros((n, seq), "i1"),
        "segment_ids": np.zeros((n, seq), "i1"), "masked_lm_positions": np.zeros((n, pred), "i4"),
        "masked_lm_ids": np.zeros((n, pred), "i4"), "next_sentence_labels": np.zeros(n, "i1"),
    }
    for row, (tokens, segments, is_random_next, positions, labels) in enumerate(instances):
        out["input_ids"][row, :len(tokens)] = [vocab[t] for t in tokens]
        out["input_mask"][row, :len(tokens)] = 1
        out["segment_ids"][row, :len(tokens)] = segments
        out["masked_lm_positions"][row, :len(positions)] = positions
        out["masked_lm_ids"][row, :len(labels)] = [vocab[t] for t in labels]
        out["next_sentence_labels"][row] = int(is_random_next)
    return out


def _from_document(documents, d, cfg, vocab_words, rng):
    document = documents[d]
    max_num_tokens = cfg.max_seq_length - 3
    target = max_num_tokens
    if rng.random() < cfg.short_seq_prob:
        target = rng.randint(2, max_num_tokens)
    instances, chunk, length, i = [], [], 0, 0
    while i < len(document):
        chunk.append(document[i])
        length += len(document[i])
        if i == len(document) - 1 or length >= target:
            if chunk:
                a_end = rng.randint(1, len(chunk) - 1) if len(chunk) >= 2 else 1
                tokens_a = [t for sentence in chunk[:a_end] for t in sentence]
                tokens_b = []
                if len(chunk) == 1 or rng.random() < 0.5:
                    is_random_next = True
                    target_b = target - len(tokens_a)
                    for _ in range(10):
                        r = rng.randint(0, len(documents) - 1)
                        if r != d:
                            break
                    if r == d:
                        is_random_next = False
                    other = documents[r]
                    for j in range(rng.randint(0, len(other) - 1), len(other)):
                        tokens_b.extend(other[j])
                        if len(tokens_b) >= target_b:
                            break
                    i -= len(chunk) - a_end
                else:
                    is_random_next = False
                    tokens_b = [t for sentence in chunk[a_end:] for t in sentence]
                while len(tokens_a) + len(tokens_b) > max_num_tokens:
                    longer = tokens_a if len(tokens_a) > len(tokens_b) else tokens_b
                    if rng.random() < 0.5:
                        del longer[0]
                    else:
                        longer.pop()
                tokens = ["[CLS]", *tokens_a, "[SEP]", *tokens_b, "[SEP]"]
                segments = [0] * (len(tokens_a) + 2) + [1] * (len(tokens_b) + 1)
                tokens, positions, labels = _mask(tokens, cfg, vocab_words, rng)
                instances.append((tokens, segments, is_random_next, positions, labels))
            chunk, length = [], 0
        i += 1
    return instances


def _mask(tokens, cfg, vocab_words, rng):
    # The masking rule as bertdata states it (bertdata.instances.masking), on the port's tokens:
    # the kernel's masks equal to this port's are the compiled loop tested equal to the module,
    # with the same draws. Whole-word masking (Google's --do_whole_word_mask) marks "##" pieces
    # as continuing a word; token masking marks none.
    ids = {t: i for i, t in enumerate(vocab_words)}
    continues = np.array([cfg.masking_scheme == "whole-word" and t.startswith("##") for t in vocab_words])
    n = int(masking.prediction_count(len(tokens), cfg.masked_lm_prob, cfg.max_predictions_per_seq))
    masked = masking.mask_sequence([ids[t] for t in tokens], rng, n, ids["[CLS]"], ids["[SEP]"], ids["[MASK]"],
                                   range(len(vocab_words)), continues)
    output = list(tokens)
    for k, shown in masked:
        output[k] = vocab_words[shown]
    return output, [k for k, _ in masked], [tokens[k] for k, _ in masked]


# --- helpers -----------------------------------------------------------------------------------

def small_vocab(extra=()):
    tokens = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *(f"w{i}" for i in range(60)), *extra)
    return Vocab(path="<test>", tokens=tokens, sha256="0" * 64)


def documents_from_ids(docs, dtype=np.uint16):
    sentences = [s for doc in docs for s in doc]
    lengths = [len(s) for s in sentences]
    return Documents(
        paths=("<test>",),
        tokens=np.array([t for s in sentences for t in s], dtype=dtype),
        sentence_offsets=np.concatenate(([0], np.cumsum(lengths))).astype(np.int64),
        doc_offsets=np.concatenate(([0], np.cumsum([len(d) for d in docs]))).astype(np.int64),
    )


def random_docs(rng, num_docs, max_sentences, max_len, vocab_size, special_every=0):
    docs = []
    for _ in range(num_docs):
        doc = []
        for _ in range(rng.randint(1, max_sentences)):
            sentence = [rng.randrange(5, vocab_size) for _ in range(rng.randint(1, max_len))]
            if special_every and rng.random() < special_every:
                sentence[rng.randrange(len(sentence))] = rng.choice((2, 3))  # a typed "[CLS]"/"[SEP]"
            doc.append(sentence)
        docs.append(doc)
    return docs


def assert_same(got, expected):
    for name in FIELDS:
        array = got.array(name) if hasattr(got, "array") else got[name]
        assert array.dtype == expected[name].dtype, name
        assert array.shape == expected[name].shape, name
        assert np.array_equal(array, expected[name]), name


def check_against_reference(docs_ids, vocab, cfg, seed):
    expected = reference_instances([[[vocab.tokens[t] for t in s] for s in d] for d in docs_ids],
                                   vocab.tokens, cfg, seed)
    assert_same(create_instances(documents_from_ids(docs_ids), vocab, cfg, seed=seed), expected)
    return expected


# --- kernel == reference port --------------------------------------------------------------------

SMALL = InstanceConfig(max_seq_length=64, max_predictions_per_seq=10, masked_lm_prob=0.2,
                       short_seq_prob=0.5, dupe_factor=3)


@pytest.mark.parametrize("seed", [0, 1, 7, 12345, 2**40 + 3])
def test_kernel_matches_reference_on_synthetic_shards(seed):
    vocab = small_vocab()
    docs = random_docs(random.Random(seed), num_docs=25, max_sentences=12, max_len=30, vocab_size=len(vocab))
    expected = check_against_reference(docs, vocab, SMALL, seed)
    assert len(expected["next_sentence_labels"]) > 50
    assert expected["next_sentence_labels"].any() and not expected["next_sentence_labels"].all()


@pytest.mark.parametrize("cfg", [
    InstanceConfig(max_seq_length=128, max_predictions_per_seq=20, dupe_factor=2),
    InstanceConfig(max_seq_length=40, max_predictions_per_seq=5, masked_lm_prob=0.1,
                   short_seq_prob=0.0, dupe_factor=2),  # round(25 * 0.1) etc.: half to even
    InstanceConfig(max_seq_length=5, max_predictions_per_seq=2, masked_lm_prob=0.5,
                   short_seq_prob=1.0, dupe_factor=2),  # smallest sequences: truncation everywhere
    InstanceConfig(max_seq_length=256, max_predictions_per_seq=40, masked_lm_prob=0.99,
                   short_seq_prob=0.3, dupe_factor=1),
])
def test_kernel_matches_reference_across_parameters(cfg):
    vocab = small_vocab()
    docs = random_docs(random.Random(3), num_docs=15, max_sentences=20, max_len=60, vocab_size=len(vocab))
    check_against_reference(docs, vocab, cfg, seed=42)


# A vocab where half the words continue the one before: words of one to many pieces, "##"
# pieces first in a segment (after [CLS] or [SEP], or where truncation cut a word), and words
# longer than an instance's predictions.
PIECES = tuple(f"##p{i}" for i in range(60))


@pytest.mark.parametrize("seed", [0, 5, 12345])
@pytest.mark.parametrize("cfg", [
    replace(SMALL, masking_scheme="whole-word"),
    InstanceConfig(max_seq_length=128, max_predictions_per_seq=20, dupe_factor=2, masking_scheme="whole-word"),
    InstanceConfig(max_seq_length=5, max_predictions_per_seq=2, masked_lm_prob=0.5, short_seq_prob=1.0,
                   dupe_factor=2, masking_scheme="whole-word"),
    InstanceConfig(max_seq_length=64, max_predictions_per_seq=3, masked_lm_prob=0.9, dupe_factor=2,
                   masking_scheme="whole-word"),  # most words do not fit: skipped, smaller ones taken
])
def test_whole_word_masking_matches_reference(cfg, seed):
    vocab = small_vocab(PIECES)
    docs = random_docs(random.Random(seed), num_docs=20, max_sentences=12, max_len=30, vocab_size=len(vocab),
                       special_every=0.1)
    expected = check_against_reference(docs, vocab, cfg, seed)
    token = create_instances(documents_from_ids(docs), vocab, replace(cfg, masking_scheme="token"), seed=seed)
    assert not np.array_equal(token.array("masked_lm_positions"), expected["masked_lm_positions"])


def test_whole_word_masking_without_continuations_is_token_masking():
    vocab = small_vocab()
    docs = random_docs(random.Random(1), num_docs=15, max_sentences=10, max_len=40, vocab_size=len(vocab))
    token = check_against_reference(docs, vocab, SMALL, seed=1)
    assert_same(create_instances(documents_from_ids(docs), vocab, replace(SMALL, masking_scheme="whole-word"),
                                 seed=1), token)


def test_one_document_shard():
    vocab = small_vocab()
    docs = random_docs(random.Random(5), num_docs=1, max_sentences=30, max_len=20, vocab_size=len(vocab))
    expected = check_against_reference(docs, vocab, SMALL, seed=9)
    assert not expected["next_sentence_labels"].any()  # B always comes from the one document


def test_tiny_documents():
    vocab = small_vocab()
    docs = [[[10]], [[11], [12]], [[13]], [[14, 15]], [[16], [17], [18]]]
    check_against_reference(docs, vocab, SMALL, seed=1)
    check_against_reference([[[20]]], vocab, SMALL, seed=2)


def test_typed_special_tokens_are_never_masked():
    vocab = small_vocab()
    docs = random_docs(random.Random(8), num_docs=10, max_sentences=8, max_len=25,
                       vocab_size=len(vocab), special_every=0.5)
    expected = check_against_reference(docs, vocab, SMALL, seed=4)
    ids, positions = expected["input_ids"], expected["masked_lm_positions"]
    # Beyond each instance's one [CLS] and two [SEP]s, the typed ones are there...
    assert np.isin(ids, (2, 3)).sum() > 3 * len(ids) + 50
    # ...and none of them was picked for a prediction, though plenty of tokens were.
    assert (positions > 0).sum() > 5 * len(ids)
    assert not np.isin(expected["masked_lm_ids"][positions > 0], (2, 3)).any()


def test_vocab_with_repeated_token_follows_reference_dict():
    # The reference's vocab is a dict: a repeated token is one random word, with its last id.
    vocab = small_vocab(extra=("w3", "w7", "zz"))
    docs = random_docs(random.Random(2), num_docs=12, max_sentences=10, max_len=20, vocab_size=len(vocab))
    # A tokenizer only ever emits a repeated token's last id.
    docs = [[[vocab.token_to_id[vocab.tokens[t]] for t in s] for s in d] for d in docs]
    cfg = InstanceConfig(max_seq_length=64, max_predictions_per_seq=20, masked_lm_prob=0.9, dupe_factor=4)
    check_against_reference(docs, vocab, cfg, seed=11)


def test_int32_tokens_for_large_vocab():
    vocab = Vocab(path="<big>", tokens=("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]",
                                         *(f"t{i}" for i in range(70000))), sha256="1" * 64)
    docs = random_docs(random.Random(4), num_docs=8, max_sentences=6, max_len=30, vocab_size=len(vocab))
    expected = reference_instances([[[vocab.tokens[t] for t in s] for s in d] for d in docs],
                                   vocab.tokens, SMALL, 6)
    assert_same(create_instances(documents_from_ids(docs, np.int32), vocab, SMALL, seed=6), expected)


def test_instances_are_deterministic():
    vocab = small_vocab()
    docs = documents_from_ids(random_docs(random.Random(1), 10, 8, 20, len(vocab)))
    a, b = (create_instances(docs, vocab, SMALL, seed=5) for _ in range(2))
    assert_same(a, b.arrays())
    c = create_instances(docs, vocab, SMALL, seed=6)
    assert not np.array_equal(a.array("input_ids"), c.array("input_ids"))


@needs_test_data
@pytest.mark.slow
def test_shard_a_slice_at_seq_512_matches_reference():
    vocab = load_vocab(VOCAB)
    lines = SHARD_A.read_text(encoding="utf-8").split("\n\n")[:12]
    wp = WordPiece(vocab)
    docs = []
    for block in lines:
        sentences = [line.strip() for line in block.split("\n") if line.strip()]
        ids, lengths = wp.encode_lines(sentences)
        offsets = np.concatenate(([0], np.cumsum(lengths)))
        doc = [ids[offsets[k]:offsets[k + 1]].tolist() for k in range(len(sentences)) if lengths[k]]
        if doc:
            docs.append(doc)
    cfg = InstanceConfig(max_seq_length=512, max_predictions_per_seq=80, dupe_factor=2, random_seed=777)
    expected = reference_instances([[[vocab.tokens[t] for t in s] for s in d] for d in docs],
                                   vocab.tokens, cfg, 777)
    assert_same(create_instances(documents_from_ids(docs), vocab, cfg), expected)


# --- text shards -------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def wordpiece():
    return WordPiece(load_vocab(SAMPLE_VOCAB))


def _tokens(docs: Documents, wp: WordPiece):
    """Each document's sentences as lists of word pieces."""
    return [[[wp.vocab.tokens[i] for i in docs.tokens[docs.sentence_offsets[s]:docs.sentence_offsets[s + 1]]]
             for s in range(docs.doc_offsets[d], docs.doc_offsets[d + 1])]
            for d in range(docs.num_documents)]


def _sentences(docs: Documents, wp: WordPiece):
    """Each document's sentences as text, word pieces joined back into words."""
    return [[" ".join(sentence).replace(" ##", "") for sentence in doc] for doc in _tokens(docs, wp)]


def test_read_documents_structure(tmp_path, wordpiece):
    path = tmp_path / "shard.txt"
    # CRLF and lone CR end lines too; a blank (whitespace-only) line ends a document; a line
    # with no tokens (a zero-width space) is dropped without ending one.
    path.write_bytes("\n\n  one two  \r\nthree\r\n \t \nfour\rfive\n\u200b\nsix\n\n\n".encode())
    docs = read_documents(path, wordpiece)
    assert _sentences(docs, wordpiece) == [["one two", "three"], ["four", "five", "six"]]
    assert docs.tokens.dtype == np.uint16
    assert docs.num_tokens == 6 and docs.num_sentences == 5


def test_documents_continue_across_files(tmp_path, wordpiece):
    (tmp_path / "a.txt").write_text("alpha\n\nbeta\n")
    (tmp_path / "b.txt").write_text("gamma\n\ndelta")
    docs = read_documents([tmp_path / "a.txt", tmp_path / "b.txt"], wordpiece)
    assert _sentences(docs, wordpiece) == [["alpha"], ["beta", "gamma"], ["delta"]]


def test_small_blocks_give_the_same_documents(tmp_path, wordpiece, monkeypatch):
    from bertdata.instances import documents as textshard

    path = tmp_path / "shard.txt"
    path.write_text("".join(f"sentence number {i} here\r\n" + ("\n" if i % 5 == 4 else "") for i in range(60)))
    whole = read_documents(path, wordpiece)
    monkeypatch.setattr(textshard, "BLOCK_BYTES", 7)
    small = read_documents(path, wordpiece)
    assert _sentences(small, wordpiece) == _sentences(whole, wordpiece)
    assert whole.num_documents == 12


def test_non_utf8_names_line_and_offset(tmp_path, wordpiece):
    path = tmp_path / "bad.txt"
    path.write_bytes(b"fine line\nsecond\nbad \xff byte\n")
    with pytest.raises(BertdataError, match=r"bad.txt: not UTF-8 at line 3 \(byte offset 21.*--errors replace"):
        read_documents(path, wordpiece)
    docs = read_documents(path, wordpiece, errors="replace")
    assert _sentences(docs, wordpiece) == [["fine line", "second", "bad byte"]]


@pytest.mark.parametrize("content", [b"", b"\n\n  \n", "\u200b\n".encode()])
def test_empty_shard(tmp_path, wordpiece, content):
    path = tmp_path / "empty.txt"
    path.write_bytes(content)
    with pytest.raises(BertdataError, match="empty.txt: empty shard"):
        read_documents(path, wordpiece)


def test_missing_and_directory_inputs(tmp_path, wordpiece):
    with pytest.raises(BertdataError, match="nope.txt: text shard not found"):
        read_documents(tmp_path / "nope.txt", wordpiece)
    with pytest.raises(BertdataError, match="is a directory"):
        read_documents(tmp_path, wordpiece)


# --- make_shard and the command line -------------------------------------------------------------

def test_make_shard_matches_reference_and_records_parameters(tmp_path, wordpiece):
    text = "\n\n".join("\n".join(f"sentence {d} {s} " + "word " * (s % 7 + 1) for s in range(d % 6 + 1))
                       for d in range(30))
    (tmp_path / "shard.txt").write_text(text)
    cfg = InstanceConfig(max_seq_length=32, max_predictions_per_seq=5, dupe_factor=2, random_seed=3)
    shard = make_shard(tmp_path / "shard.txt", wordpiece.vocab, cfg, tokenizer=wordpiece)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["shard.txt"]  # the core writes no file
    write_instances(tmp_path / "out.hdf5", shard.instances, shard.attrs)
    docs = read_documents(tmp_path / "shard.txt", wordpiece)
    expected = reference_instances(_tokens(docs, wordpiece), wordpiece.vocab.tokens, cfg, 3)
    assert_same(read_shard(tmp_path / "out.hdf5"), expected)
    stats = shard.stats
    assert stats["instances"] == len(expected["next_sentence_labels"]) and stats["documents"] == 30
    attrs = shard_attrs(tmp_path / "out.hdf5")
    assert attrs["random_seed"] == 3 and attrs["max_seq_length"] == 32 and attrs["dupe_factor"] == 2
    assert attrs["vocab_sha256"] == wordpiece.vocab.sha256 and attrs["lower_case"] == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.hdf5", "shard.txt"]


def instances_in_process(*argv):
    """`bertdata instances ARGV` in this process (conftest's run_cli starts a fresh one): its exit code."""
    return cli.main(["instances", *map(str, argv)])


def test_cli_writes_summary_and_refuses_to_overwrite(tmp_path, capsys):
    (tmp_path / "in.txt").write_text("one sentence here.\nanother one.\n\nsecond document.\n")
    out = tmp_path / "out.hdf5"
    assert instances_in_process(tmp_path / "in.txt", "--output", out, "--vocab", SAMPLE_VOCAB) == 0
    summary = capsys.readouterr().out
    instances = len(read_shard(out)["next_sentence_labels"])
    tokens = sum(len(WordPiece(load_vocab(SAMPLE_VOCAB)).encode_lines([line])[0])
                 for line in ("one sentence here.", "another one.", "second document."))
    assert re.fullmatch(rf"wrote {re.escape(str(out))}: {instances} instances from 2 documents "
                        rf"\(3 sentences, {tokens} tokens\) in \d+\.\d s\n", summary), summary
    assert instances > 0
    before = out.read_bytes()
    assert instances_in_process(tmp_path / "in.txt", "--output", out, "--vocab", SAMPLE_VOCAB, "--random-seed", "1") == 2
    assert "already exists" in capsys.readouterr().err and out.read_bytes() == before
    assert instances_in_process(tmp_path / "in.txt", "--output", out, "--vocab", SAMPLE_VOCAB, "--force", "--random-seed", "1") == 0
    assert out.read_bytes() != before


@pytest.mark.parametrize("case", ["missing_input", "empty", "non_utf8", "missing_dir", "seq", "pred", "prob",
                                  "short", "dupe", "seed", "directory_input"])
def test_cli_bad_input_exit_2_and_no_output(tmp_path, capsys, case):
    good = tmp_path / "in.txt"
    good.write_text("a sentence.\n\nanother document.\n")
    inputs, output, flags = [good], tmp_path / "out.hdf5", []
    if case == "missing_input":
        inputs = [tmp_path / "missing.txt"]
    elif case == "empty":
        (tmp_path / "empty.txt").write_text("\n\n")
        inputs = [tmp_path / "empty.txt"]
    elif case == "non_utf8":
        (tmp_path / "bad.txt").write_bytes(b"ok\n\xc3\x28 broken\n")
        inputs = [tmp_path / "bad.txt"]
    elif case == "missing_dir":
        output = tmp_path / "no" / "such" / "out.hdf5"
    elif case == "directory_input":
        inputs = [tmp_path]
    else:
        flags = {"seq": ["--max-seq-length", "4"], "pred": ["--max-predictions-per-seq", "0"],
                 "prob": ["--masked-lm-prob", "1.5"], "short": ["--short-seq-prob", "-0.1"],
                 "dupe": ["--dupe-factor", "0"], "seed": ["--random-seed", "-1"]}[case]
    assert instances_in_process(*inputs, "--output", output, "--vocab", SAMPLE_VOCAB, *flags) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("bertdata instances: error: "), err
    if case == "non_utf8":
        assert "line 2" in err[0] and "byte offset 3" in err[0] and "--errors replace" in err[0]
    assert not output.exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


def test_cli_errors_replace(tmp_path):
    (tmp_path / "bad.txt").write_bytes(b"ok fine\n\xc3\x28 broken\n")
    assert instances_in_process(tmp_path / "bad.txt", "--output", tmp_path / "out.hdf5", "--vocab", SAMPLE_VOCAB,
                   "--errors", "replace", "--dupe-factor", "2") == 0
    assert len(read_shard(tmp_path / "out.hdf5")["next_sentence_labels"]) > 0


def test_kernel_regrows_its_arrays(monkeypatch):
    from bertdata.instances import create as instances
    from bertdata.instances import kernel

    vocab = small_vocab()
    docs = documents_from_ids(random_docs(random.Random(6), 12, 10, 25, len(vocab)))
    expected = create_instances(docs, vocab, SMALL, seed=3)
    generate = kernel.generate

    def tiny_arrays(seed, documents, params, capacity):
        return generate(seed, documents, params, 1)

    monkeypatch.setattr(kernel, "generate", tiny_arrays)
    regrown = instances.create_instances(docs, vocab, SMALL, seed=3)
    assert len(regrown) == len(expected) > 20
    assert_same(regrown, expected.arrays())


def test_sliced_write_gives_the_same_file_as_one_write(tmp_path, monkeypatch):
    from bertdata.formats import hdf5 as module
    from bertdata.formats.hdf5io import write_shard

    vocab = small_vocab()
    docs = documents_from_ids(random_docs(random.Random(9), 60, 12, 30, len(vocab)))
    inst = create_instances(docs, vocab, SMALL, seed=1)
    write_shard(tmp_path / "whole.hdf5", inst.arrays(), {"a": 1})
    monkeypatch.setattr(module, "WRITE_BLOCK_BYTES", 1)  # one chunk row per write
    write_instances(tmp_path / "sliced.hdf5", inst, {"a": 1})
    assert (tmp_path / "sliced.hdf5").read_bytes() == (tmp_path / "whole.hdf5").read_bytes()


def _binary_files(folder):
    import bz2
    import gzip
    import lzma
    import zipfile

    text = b"a sentence.\n\nanother document.\n"
    files = {"bz2": bz2.compress(text), "empty bz2": bz2.compress(b""), "gzip": gzip.compress(text),
             "xz": lzma.compress(text), "zstd": b"\x28\xb5\x2f\xfd\x04\x00" + text}
    with zipfile.ZipFile(folder / "z.zip", "w") as z:
        z.writestr("shard.txt", text)
    files["zip"] = (folder / "z.zip").read_bytes()
    return files


@pytest.mark.parametrize(("kind", "words"), [("bz2", "bz2-compressed"), ("empty bz2", "bz2-compressed"),
                                             ("gzip", "gzip-compressed"), ("xz", "xz-compressed"),
                                             ("zstd", "zstd-compressed"), ("zip", "a zip archive")])
def test_compressed_input_is_named(tmp_path, wordpiece, kind, words):
    path = tmp_path / "shard.txt"
    path.write_bytes(_binary_files(tmp_path)[kind])
    for errors in ("strict", "replace"):
        with pytest.raises(BertdataError, match=rf"^{re.escape(str(path))}: {words}, not a text shard"):
            read_documents(path, wordpiece, errors=errors)


def test_text_that_starts_like_a_signature_is_text(tmp_path, wordpiece):
    path = tmp_path / "shard.txt"
    path.write_text("BZh9 is how a bz2 file starts.\nPK is a monogram.\n")
    assert read_documents(path, wordpiece).num_sentences == 2


def test_cli_hdf5_input_named_even_with_errors_replace(tmp_path, capsys):
    """An instance shard given back to `instances` was once read as text with --errors replace."""
    good = tmp_path / "in.txt"
    good.write_text("a sentence.\n\nanother document.\n")
    shard = tmp_path / "shard.hdf5"
    assert instances_in_process(good, "--output", shard, "--vocab", SAMPLE_VOCAB, "--dupe-factor", "1") == 0
    capsys.readouterr()
    out = tmp_path / "out.hdf5"
    assert instances_in_process(shard, "--output", out, "--vocab", SAMPLE_VOCAB, "--errors", "replace") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"bertdata instances: error: {shard}: an HDF5 file (an instance shard?), not a text shard "
                   "(UTF-8 text, one sentence per line)"]
    assert not out.exists()


def test_a_line_longer_than_many_blocks_is_read_in_linear_time(tmp_path, monkeypatch):
    """Each block of a long line once copied all of the line before it: quadratic time."""
    import time

    from bertdata.instances import documents as textshard

    monkeypatch.setattr(textshard, "BLOCK_BYTES", 64)
    path = tmp_path / "long.txt"
    path.write_text("x" * 2_000_000 + "\nend\r\n")
    started = time.perf_counter()
    starts = np.array([0, 2_000_001], dtype=np.int64).tobytes()
    assert list(textshard._blocks(str(path), "strict", None)) == [(b"x" * 2_000_000 + b"\nend", starts, b"\0\0")]
    assert time.perf_counter() - started < 1.5  # ~0.06 s; 4.5 s before
