"""Any `tokenizers` file as a text shard's tokenizer: its ids are `tokenizers`' own, its special
tokens are those its post-processor puts around a sequence, and a file that is not one is named in
one line. A WordPiece vocab.txt keeps the compiled path, with the ids of `tokenizers`' WordPiece."""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import threading
from pathlib import Path

import numpy as np
import pytest
from tokenizers import Tokenizer
from tokenizers.implementations import BertWordPieceTokenizer

from bertdata.errors import BertdataError
from bertdata.instances._wordpiece import text_lines
from bertdata.instances.documents import EmptyShard, read_documents
from bertdata.instances import tokenizer_file
from bertdata.instances.tokenize import WordPiece
from bertdata.instances.tokenizer_file import TokenizerFile, id_dtype_for, open_tokenizer
from bertdata.instances.vocab import load_vocab
from conftest import SHARD_A, TOKENIZER_KINDS, VOCAB, trained_tokenizer


def shard_lines() -> list[str]:
    return [line.strip() for line in SHARD_A.read_text(encoding="utf-8").splitlines() if line.strip()]


def joined(lines: list[str]) -> tuple[bytes, np.ndarray]:
    block, starts, _ = text_lines("\n".join(lines).encode("utf-8"))
    return block, np.frombuffer(starts, dtype=np.int64)


def split(ids: np.ndarray, lengths: np.ndarray) -> list[list[int]]:
    return [part.tolist() for part in np.split(ids, np.cumsum(lengths)[:-1])]


@pytest.mark.slow  # the whole shard through `tokenizers` and both compiled paths: seconds
def test_vocab_txt_compiled_path_gives_tokenizers_own_wordpiece_ids():
    lines = shard_lines()
    theirs = BertWordPieceTokenizer(str(VOCAB), lowercase=True)
    expected = [e.ids for e in theirs.encode_batch(lines, add_special_tokens=False)]
    wordpiece = open_tokenizer(VOCAB)
    assert isinstance(wordpiece, WordPiece) and wordpiece.lowercase
    ids, lengths = wordpiece.encode_joined(*joined(lines), dtype=wordpiece.id_dtype)
    assert split(ids, lengths) == expected
    # The same vocab as a tokenizer.json goes through `tokenizers` and gives the same ids.
    as_file = TokenizerFile(trained_tokenizer("wordpiece"))
    ids_file, lengths_file = as_file.encode_joined(*joined(lines), dtype=as_file.id_dtype)
    assert np.array_equal(ids_file, ids) and np.array_equal(lengths_file, lengths)
    # Both put what BERT puts around one sequence.
    vocab = load_vocab(VOCAB)
    assert wordpiece.prefix == as_file.prefix == (vocab.cls_id,)
    assert wordpiece.suffix == as_file.suffix == (vocab.sep_id,)
    assert wordpiece.vocab_size == as_file.vocab_size == len(vocab)
    assert wordpiece.id_dtype == as_file.id_dtype == np.uint16
    assert wordpiece.sha256 == vocab.sha256 and wordpiece.name == "vocab.txt" and wordpiece.max_length is None


@pytest.mark.parametrize("kind", TOKENIZER_KINDS)
def test_ids_are_tokenizers_own(kind):
    path = trained_tokenizer(kind)
    theirs = Tokenizer.from_file(str(path))
    tokenizer = open_tokenizer(path)
    assert isinstance(tokenizer, TokenizerFile) and tokenizer.name == "tokenizer.json"
    lines = shard_lines()[:3000]
    ids, lengths = tokenizer.encode_joined(*joined(lines), dtype=tokenizer.id_dtype)
    assert ids.dtype == np.uint16 and lengths.dtype == np.int32
    assert split(ids, lengths) == [e.ids for e in theirs.encode_batch(lines, add_special_tokens=False)]
    # The special tokens are exactly what its post-processor adds to any text.
    for line in lines[:50]:
        plain = theirs.encode(line, add_special_tokens=False).ids
        assert theirs.encode(line).ids == [*tokenizer.prefix, *plain, *tokenizer.suffix]


def test_special_tokens_of_each_post_processor():
    bpe = TokenizerFile(trained_tokenizer("bpe"))
    vocab = Tokenizer.from_file(str(trained_tokenizer("bpe"))).get_vocab()
    assert (bpe.prefix, bpe.suffix) == ((vocab["<s>"],), (vocab["</s>"],))
    unigram = TokenizerFile(trained_tokenizer("unigram"))
    vocab = Tokenizer.from_file(str(trained_tokenizer("unigram"))).get_vocab()
    assert (unigram.prefix, unigram.suffix) == ((), (vocab["</s>"],))
    assert bpe.kind == "BPE" and unigram.kind == "Unigram"


def test_no_post_processor_means_no_special_tokens(tmp_path):
    data = json.loads(trained_tokenizer("bpe").read_text(encoding="utf-8"))
    data["post_processor"] = None
    (tmp_path / "tokenizer.json").write_text(json.dumps(data), encoding="utf-8")
    assert TokenizerFile(tmp_path / "tokenizer.json").prefix == TokenizerFile(tmp_path / "tokenizer.json").suffix == ()


def test_read_documents_with_a_tokenizer_file(tmp_path):
    tokenizer = TokenizerFile(trained_tokenizer("bpe"))
    documents = read_documents(SHARD_A, tokenizer)
    theirs = Tokenizer.from_file(str(trained_tokenizer("bpe")))
    lines = shard_lines()
    assert documents.num_sentences == len(lines)
    assert documents.tokens.dtype == np.uint16
    expected = [e.ids for e in theirs.encode_batch(lines, add_special_tokens=False)]
    assert documents.tokens.tolist() == [i for one in expected for i in one]
    empty = tmp_path / "empty.txt"
    empty.write_text("\n\n", encoding="utf-8")
    with pytest.raises(EmptyShard):
        read_documents(empty, tokenizer)


def test_truncation_and_padding_in_the_file_are_not_applied_and_its_length_is_read(tmp_path):
    data = json.loads(trained_tokenizer("bpe").read_text(encoding="utf-8"))
    data["truncation"] = {"direction": "Right", "max_length": 8, "strategy": "LongestFirst", "stride": 0}
    data["padding"] = {"strategy": {"Fixed": 16}, "direction": "Right", "pad_to_multiple_of": None,
                       "pad_id": 1, "pad_type_id": 0, "pad_token": "<pad>"}
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    tokenizer = TokenizerFile(path)
    assert tokenizer.max_length == 8
    line = shard_lines()[0]
    ids, lengths = tokenizer.encode_lines([line])
    assert len(ids) == lengths[0] > 16
    assert (tokenizer.prefix, tokenizer.suffix) == (TokenizerFile(trained_tokenizer("bpe")).prefix,
                                                    TokenizerFile(trained_tokenizer("bpe")).suffix)
    # A tokenizer_config.json beside it states a limit too; the smaller counts.
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"model_max_length": 4}), encoding="utf-8")
    assert TokenizerFile(path).max_length == 4
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"model_max_length": int(1e30)}), encoding="utf-8")
    assert TokenizerFile(path).max_length == 8


def test_pickles_with_its_bytes_not_its_path(tmp_path):
    path = tmp_path / "tokenizer.json"
    path.write_bytes(trained_tokenizer("unigram").read_bytes())
    tokenizer = TokenizerFile(path)
    copy = pickle.loads(pickle.dumps(tokenizer))
    path.unlink()
    lines = shard_lines()[:100]
    assert (copy.prefix, copy.suffix, copy.sha256, copy.vocab_size, copy.max_length) == (
        tokenizer.prefix, tokenizer.suffix, tokenizer.sha256, tokenizer.vocab_size, tokenizer.max_length)
    assert np.array_equal(copy.encode_lines(lines)[0], tokenizer.encode_lines(lines)[0])


def test_id_dtype():
    assert id_dtype_for(65_536) == np.uint16
    assert id_dtype_for(65_537) == np.uint32


@pytest.mark.parametrize("content, says", [
    (b"", "not JSON"),
    (b'{"version": "1.0", "model": ', "not JSON"),
    (b"\xff\xfe{}", "not UTF-8 at byte 0"),
    (b"[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nthe\n", "a vocab file (one token per line), not a Hugging Face tokenizer.json"),
    (b'{"model_max_length": 512, "tokenizer_class": "BertTokenizer"}', "a tokenizer_config.json, not a tokenizer.json"),
    (b'{"the": 0, "a": 1}', "a vocab.json"),
    (b'[1, 2]', 'not a Hugging Face tokenizers file (no "model")'),
    (b'{"version": "1.0", "model": {"type": "Nonesuch"}}', "not a tokenizers file this version of `tokenizers` reads"),
])
def test_a_file_that_is_not_a_tokenizer_json_is_named_in_one_line(tmp_path, content, says):
    path = tmp_path / "tokenizer.json"
    path.write_bytes(content)
    with pytest.raises(BertdataError) as err:
        TokenizerFile(path)
    message = str(err.value)
    assert message.startswith(f"{path}: ") and says in message and "\n" not in message


def test_a_missing_file_or_a_folder_is_named(tmp_path):
    with pytest.raises(BertdataError, match="tokenizer file not found"):
        TokenizerFile(tmp_path / "nonesuch.json")
    with pytest.raises(BertdataError, match="is a directory"):
        open_tokenizer(tmp_path)


def test_open_tokenizer_reads_a_vocab_txt_and_names_a_bad_one(tmp_path):
    bad = tmp_path / "vocab.txt"
    bad.write_text("the\na\n", encoding="utf-8")
    with pytest.raises(BertdataError, match="not a WordPiece vocab"):
        open_tokenizer(bad)
    assert open_tokenizer(VOCAB, lowercase=False).lowercase is False


def word_level(tmp_path, vocab: dict, **fields) -> Path:
    """A WordLevel tokenizer.json of `vocab` ([UNK] its unknown token), its other `fields` replaced."""
    data = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": [], "normalizer": None,
            "pre_tokenizer": {"type": "Whitespace"}, "post_processor": None, "decoder": None,
            "model": {"type": "WordLevel", "vocab": vocab, "unk_token": "[UNK]"}, **fields}
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def one_line_refusal(path, says: str) -> None:
    with pytest.raises(BertdataError) as err:
        open_tokenizer(path)
    message = str(err.value)
    assert message.startswith(f"{path}: ") and says in message and "\n" not in message, message


def test_json_nested_past_the_recursion_limit_is_named_in_one_line(tmp_path):
    path = tmp_path / "deep.json"
    path.write_text('{"model": ' + "[" * 100_000 + "]" * 100_000 + "}")
    one_line_refusal(path, "not JSON: nested too deeply")


def test_an_unknown_token_missing_from_the_vocab_is_named(tmp_path):
    one_line_refusal(word_level(tmp_path, {"a": 0, "b": 1}), "unknown token '[UNK]' is not in its vocabulary")


@pytest.mark.parametrize("largest", [2**31, 2**32 - 1])
def test_ids_from_2_31_are_refused_up_front_by_their_token(tmp_path, largest):
    # tokenizers' ids are u32; parquet's list<int32> and Megatron's int32 would wrap them negative.
    path = word_level(tmp_path, {"[UNK]": 0, "a": 1, "b": 2, "c": 3, "d": largest})
    one_line_refusal(path, f"token 'd' has id {largest:,}")
    assert TokenizerFile(word_level(tmp_path, {"[UNK]": 0, "a": 2**31 - 1})).vocab_size == 2**31


def test_a_tokenizer_that_makes_no_token_is_refused(tmp_path):
    deletes_all = {"type": "Replace", "pattern": {"Regex": "[\\s\\S]"}, "content": ""}
    path = word_level(tmp_path, {"[UNK]": 0, "a": 1}, normalizer=deletes_all)
    one_line_refusal(path, "the tokenizer makes no token of 'Hello, world. 12 3'")


def test_a_pipe_is_read_once(tmp_path):
    fifo = tmp_path / "tokenizer.fifo"
    os.mkfifo(fifo)
    data = trained_tokenizer("bpe").read_bytes()
    writer = threading.Thread(target=fifo.write_bytes, args=(data,))
    writer.start()
    tokenizer = open_tokenizer(fifo)
    writer.join()
    assert isinstance(tokenizer, TokenizerFile) and tokenizer.sha256 == hashlib.sha256(data).hexdigest()


def test_a_device_or_a_link_to_one_is_not_read_past_a_bound(tmp_path, monkeypatch):
    monkeypatch.setattr(tokenizer_file, "MAX_FILE_BYTES", 1 << 20)
    one_line_refusal("/dev/zero", "more than 1.0 MB, not a tokenizer file")
    link = tmp_path / "tokenizer.json"
    link.symlink_to("/dev/zero")
    with pytest.raises(BertdataError, match="more than"):
        TokenizerFile(link)


@pytest.mark.parametrize("kind", TOKENIZER_KINDS)
def test_the_fast_path_gives_the_offsets_paths_tokens_and_sentences(kind):
    """Each test tokenizer cuts at spaces (ByteLevel, Metaspace, BertPreTokenizer): its documents'
    sentences are tokenized alone, with the space before them, and give what the documents
    tokenized whole and cut by their offsets give."""
    fast = TokenizerFile(trained_tokenizer(kind))
    assert fast.lines_alone
    slow = TokenizerFile(trained_tokenizer(kind))
    slow.lines_alone = False
    # A dozen documents: the offsets path is the slow one.
    documents = [d.splitlines() for d in SHARD_A.read_text(encoding="utf-8").split("\n\n") if d.strip()][:12]
    lines = [line.strip() for d in documents for line in d if line.strip()]
    numbers = np.repeat(np.arange(len(documents)), [sum(1 for line in d if line.strip()) for d in documents])
    ids, lengths = fast.encode_documents(lines, numbers)
    slow_ids, slow_lengths = slow.encode_documents(lines, numbers)
    assert np.array_equal(ids, slow_ids) and np.array_equal(lengths, slow_lengths)


@pytest.mark.parametrize("spec, alone", [
    ({"pre_tokenizer": {"type": "Sequence", "pretokenizers": [{"type": "WhitespaceSplit"}, {"type": "Digits"}]}}, True),
    ({"pre_tokenizer": {"type": "Split", "pattern": {"Regex": " ?x"}, "behavior": "Isolated"}}, False),
    ({"pre_tokenizer": {"type": "Punctuation"}}, False),  # nothing cuts at spaces
    ({"pre_tokenizer": {"type": "Metaspace", "split": False}}, False),  # SentencePiece's pieces may hold ▁
    ({"pre_tokenizer": {"type": "ByteLevel", "use_regex": False}}, False),
    ({"normalizer": {"type": "Prepend", "prepend": "▁"}, "pre_tokenizer": {"type": "Metaspace"}}, False),
    ({"normalizer": {"type": "Sequence", "normalizers": [{"type": "NFKC"}, {"type": "Lowercase"}]},
      "pre_tokenizer": {"type": "BertPreTokenizer"}}, True),
    ({"pre_tokenizer": {"type": "Whitespace"}, "added_tokens": [{"content": "new york"}]}, False),
    ({"pre_tokenizer": None}, False),
])
def test_which_tokenizers_take_the_fast_path(spec, alone):
    assert tokenizer_file.lines_tokenize_alone(spec) is alone


def test_berts_wordpiece_json_takes_the_compiled_path_with_tokenizers_own_ids(tmp_path):
    """The test suite's WordPiece (BertWordPieceTokenizer's file) runs on the compiled path, and
    gives `tokenizers`' ids on the shard; the same file with accents kept while lower-casing, or
    with a token added, is not BERT's compiled tokenizer and keeps `tokenizers`."""
    path = trained_tokenizer("wordpiece")
    compiled = TokenizerFile(path)
    assert compiled._compiled is not None
    lines = [line.strip() for line in SHARD_A.read_text(encoding="utf-8").splitlines() if line.strip()][:3000]
    reference = Tokenizer.from_file(str(path))
    expected = [i for e in reference.encode_batch(lines, add_special_tokens=False) for i in e.ids]
    ids, lengths = compiled.encode_lines(lines)
    assert ids.tolist() == expected and int(lengths.sum()) == len(expected)
    spec = json.loads(path.read_text())
    for change in ({"normalizer": {**spec["normalizer"], "strip_accents": False}},
                   {"added_tokens": [*spec["added_tokens"], {**spec["added_tokens"][0], "content": "<x>", "id": 5}]}):
        other = tmp_path / "tokenizer.json"
        other.write_text(json.dumps({**spec, **change}))
        assert TokenizerFile(other)._compiled is None
