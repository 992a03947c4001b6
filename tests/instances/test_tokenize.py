"""WordPiece ids: the piece-cached fast path against a plain port of the reference tokenizer.

The tokenizer's claims hold for any vocab, so most tests use the sample vocab packaged with
bertdata and run anywhere; the real-text comparison uses the vocab trained on the real fragment (tests/data)."""

from __future__ import annotations

import pickle
import unicodedata

import numpy as np
import pytest

from bertdata.instances import tokenize
from bertdata.instances import vocab as vocab_module
from bertdata.instances.tokenize import WordPiece
from bertdata.instances.vocab import load_vocab
from conftest import SAMPLE_VOCAB, SHARD_A, VOCAB, needs_test_data
from kernel_calls import WHITE_SPACE, python_lines

NEVER_SPLIT = ("[UNK]", "[SEP]", "[PAD]", "[CLS]", "[MASK]")


class ReferenceTokenizer:
    """The reference script's BERT tokenizer, ported plainly: basic tokenization (clean,
    CJK spacing, whitespace split, lower-case + strip accents, punctuation split, special
    tokens kept whole) then greedy longest-match WordPiece."""

    def __init__(self, tokens, lowercase=True):
        self.vocab = {}
        for i, token in enumerate(tokens):
            self.vocab[token] = i
        self.lowercase = lowercase

    @staticmethod
    def _is_whitespace(c):
        return c in " \t\n\r" or unicodedata.category(c) == "Zs"

    @staticmethod
    def _is_control(c):
        return c not in "\t\n\r" and unicodedata.category(c) in ("Cc", "Cf")

    @staticmethod
    def _is_punctuation(c):
        cp = ord(c)
        if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
            return True
        return unicodedata.category(c).startswith("P")

    @staticmethod
    def _is_cjk(cp):
        return (0x4E00 <= cp <= 0x9FFF or 0x3400 <= cp <= 0x4DBF or 0x20000 <= cp <= 0x2A6DF
                or 0x2A700 <= cp <= 0x2B73F or 0x2B740 <= cp <= 0x2B81F or 0x2B820 <= cp <= 0x2CEAF
                or 0xF900 <= cp <= 0xFAFF or 0x2F800 <= cp <= 0x2FA1F)

    def _basic(self, text):
        text = "".join(" " if self._is_whitespace(c) else c for c in text
                       if not (ord(c) in (0, 0xFFFD) or self._is_control(c)))
        text = "".join(f" {c} " if self._is_cjk(ord(c)) else c for c in text)
        out = []
        for token in text.strip().split():
            if self.lowercase and token not in NEVER_SPLIT:
                token = token.lower()
                token = "".join(c for c in unicodedata.normalize("NFD", token)
                                if unicodedata.category(c) != "Mn")
            if token in NEVER_SPLIT:
                out.append(token)
                continue
            words, start_new = [], True
            for c in token:
                if self._is_punctuation(c):
                    words.append(c)
                    start_new = True
                else:
                    if start_new:
                        words.append("")
                    start_new = False
                    words[-1] += c
            out.extend(words)
        return " ".join(out).split()

    def _wordpiece(self, word):
        if len(word) > 100:
            return ["[UNK]"]
        pieces, start = [], 0
        while start < len(word):
            end = len(word)
            while start < end:
                piece = word[start:end] if start == 0 else "##" + word[start:end]
                if piece in self.vocab:
                    break
                end -= 1
            else:
                return ["[UNK]"]
            pieces.append(piece)
            start = end
        return pieces

    def ids(self, line):
        return [self.vocab[p] for word in self._basic(line) for p in self._wordpiece(word)]


TRICKY = [
    "Hello, World!  Café naïve résumé — “quotes” (brackets) [x] {y} 3.14 $5 50% a/b",
    "ÀÉÎÕÜ ß æ ø Ångström İstanbul ǅ ﬁ ligature",
    "中文字符 mixed with English 日本語 한국어",
    "tab\tseparated\tvalues and nbsp\u00a0here and thin\u2009space\u3000ideographic",
    "zero\u200bwidth joiner\u200d soft\u00adhyphen control\x07bell del\x7f",
    "file\x1cseparator unit\x1fsep next\x85line line\u2028sep para\u2029sep vt\x0bff\x0c",
    "emoji 🤗😀 and symbols ™ © ® ° ± × ÷ ∑ √ ∞",
    "a" * 101 + " " + "b" * 100 + " supercalifragilisticexpialidocious",
    "[SEP] [CLS] [MASK] [UNK] [PAD] stand alone",
    "   leading and trailing spaces   ",
    "\ufeffbyte order mark then text",
    "replacement \ufffd char and NUL \x00 char",
    "combining e\u0301 and a \u0301 lone mark, Ǆ title",
]
# The reference keeps a special token whole only when whitespace delimits it; the Rust
# tokenizer also finds it glued to other characters. Known, documented difference.
GLUED_SPECIAL = "x[SEP]y and ([MASK])"


def _encode(wp, lines):
    ids, lengths = wp.encode_lines(lines)
    offsets = np.concatenate(([0], np.cumsum(lengths)))
    return [ids[offsets[i]:offsets[i + 1]].tolist() for i in range(len(lines))]


@pytest.mark.parametrize("lowercase", [True, False])
def test_tricky_lines_match_reference_port(lowercase):
    vocab = load_vocab(SAMPLE_VOCAB)
    reference = ReferenceTokenizer(vocab.tokens, lowercase=lowercase)
    got = _encode(WordPiece(vocab, lowercase=lowercase), TRICKY)
    for line, ids in zip(TRICKY, got):
        assert ids == reference.ids(line), line


def test_vocab_lines_end_where_the_references_readline_ends_them(tmp_path):
    """Only \n, \r\n and a lone \r end a vocab line, as the reference's readline() in text mode:
    a token holding U+2028, U+0085 or a form feed is one line, and every id after it stays."""
    sample = load_vocab(SAMPLE_VOCAB)
    tokens = list(sample.tokens)
    odd = {1000: "odd\u2028token", 1001: "next\x85line", 1002: "form\x0cfeed", 1003: "sep\u2029par\x1cfs"}
    for i, token in odd.items():
        tokens[i] = token
    path = tmp_path / "vocab.txt"
    path.write_bytes(("\r\n".join(tokens[:500]) + "\r" + "\n".join(tokens[500:]) + "\n").encode())
    vocab = load_vocab(path)
    assert vocab.tokens == tuple(tokens)  # one token a line: every id as in the sample vocab
    lines = ["the quick brown fox, again!", *TRICKY]
    assert _encode(WordPiece(vocab), lines) == _encode(WordPiece(sample), lines)


def test_glued_special_token_is_the_known_difference():
    vocab = load_vocab(SAMPLE_VOCAB)
    (ids,) = _encode(WordPiece(vocab), [GLUED_SPECIAL])
    assert ids != ReferenceTokenizer(vocab.tokens).ids(GLUED_SPECIAL)
    assert vocab.sep_id in ids


@needs_test_data
@pytest.mark.slow  # a whole shard through both tokenizers
def test_shard_a_matches_reference_port_and_whole_line_encoding():
    vocab = load_vocab(VOCAB)
    lines = [line.strip() for line in SHARD_A.read_text(encoding="utf-8").splitlines()]
    lines = [line for line in lines if line]
    wp = WordPiece(vocab)
    got = _encode(wp, lines)
    reference = ReferenceTokenizer(vocab.tokens)
    assert got == [reference.ids(line) for line in lines]
    # The piece cache must give exactly what the Rust tokenizer gives for whole lines.
    whole = [e.ids for e in wp._encode(lines, add_special_tokens=False)]
    assert got == whole


def test_cache_reset_and_batches_do_not_change_ids(monkeypatch):
    vocab = load_vocab(SAMPLE_VOCAB)
    lines = [f"word{i} shared words, again{i % 7}!" for i in range(300)] + TRICKY
    expected = _encode(WordPiece(vocab), lines)
    monkeypatch.setattr(tokenize, "BATCH_LINES", 16)
    monkeypatch.setattr(tokenize, "CACHE_PIECES", 20)
    assert _encode(WordPiece(vocab), lines) == expected


@needs_test_data
def test_cache_reset_past_its_key_bytes_does_not_change_ids(monkeypatch):
    vocab = load_vocab(VOCAB)
    lines = [f"longerword{i} shared words, again{i % 7}!" for i in range(300)] + TRICKY
    expected = _encode(WordPiece(vocab), lines)
    monkeypatch.setattr(tokenize, "BATCH_LINES", 16)
    monkeypatch.setattr(tokenize, "CACHE_KEY_BYTES", 64)
    wp = WordPiece(vocab)
    clears = []
    clear = wp._table.clear
    monkeypatch.setattr(wp._table, "clear", lambda: clears.append(wp._table.count) or clear())
    assert _encode(wp, lines) == expected
    assert len(clears) > 10


def test_piece_table_refuses_ids_past_its_int32_offsets():
    table = tokenize._PieceTable(np.dtype(np.uint16))
    table.reserve(1, 1)
    table.meta[2] = (1 << 31) - 2
    with pytest.raises(OverflowError, match="ids would pass 2\\*\\*31 - 1"):
        table.set_values(0, (np.arange(3, dtype=np.uint16), np.array([3])))


def test_encode_lines_shapes_and_dtypes():
    vocab = load_vocab(SAMPLE_VOCAB)
    wp = WordPiece(vocab)
    ids, lengths = wp.encode_lines(["The world", "", "\u200b", "the"])
    assert ids.dtype == np.int32 and lengths.dtype == np.int32
    assert lengths.tolist() == [2, 0, 0, 1]
    the, world = vocab.token_to_id["the"], vocab.token_to_id["world"]
    assert ids.tolist() == [the, world, the]
    compact, _ = wp.encode_lines(["the world"], dtype=wp.id_dtype)
    assert compact.dtype == np.uint16
    empty_ids, empty_lengths = wp.encode_lines([])
    assert len(empty_ids) == 0 and len(empty_lengths) == 0


@pytest.mark.parametrize("lowercase", [True, False])
def test_piece_cache_equals_whole_line_encoding_on_random_text(lowercase):
    # Fuzz the one claim the fast path rests on: ids of a line == ids of its
    # str.split() pieces laid end to end (or the line is sent whole).
    import random

    pool = ("abcdefghij ABC  \t\u00a0\u2009\u3000\x0b\x0c\x1c\x1f\x85\u2028\u2029\u200b\x00\ufffd"
            ".,;!?()[]{}'\"-–—/\\#@&*é\u0301ñüÅß中文字日本한국🤗™°")
    rng = random.Random(0)
    words = ["the", "un", "##able", "[SEP]", "[MASK]", "naïve", "x" * 120, "Ångström", "co-op"]
    lines = []
    for _ in range(2000):
        parts = [rng.choice(words) if rng.random() < 0.3
                 else "".join(rng.choice(pool) for _ in range(rng.randint(1, 8)))
                 for _ in range(rng.randint(1, 12))]
        lines.append(rng.choice(("", " ", "\t")).join(parts))
    wp = WordPiece(load_vocab(SAMPLE_VOCAB), lowercase=lowercase)
    assert _encode(wp, lines) == [e.ids for e in wp._encode(lines, add_special_tokens=False)]


# --- long lines go to the Rust tokenizer in pieces ---------------------------------------------


def _cut_characters():
    """Every character a long text may be cut after: all punctuation and spaces, and CJK
    ideographs at their blocks' ends and every 97th between."""
    cjk = {c for lo, hi in tokenize._CJK for c in (*range(lo, hi + 1, 97), hi)}
    chars = [chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF
             and (c in cjk or tokenize._is_cut_after(chr(c)) and not any(lo <= c <= hi for lo, hi in tokenize._CJK))]
    assert len(chars) > 1000 and "," in chars and "[" not in chars and "\u3000" in chars and "\u4e00" in chars
    return chars


@pytest.mark.slow  # every cut character, each with eight right-hand texts
@pytest.mark.parametrize("lowercase", [True, False])
def test_bert_splits_after_every_cut_character(lowercase):
    """The claim the piecewise path rests on, for each character: what follows it, even a
    combining mark, a control character or "]", never joins a token with what precedes it."""
    wp = WordPiece(load_vocab(SAMPLE_VOCAB), lowercase=lowercase)
    lefts, rights = [], ["cd", "\u0301e", "]x", "SEP]", "\x00y", "中", "\u200bz", "##a"]
    for c in _cut_characters():
        lefts += [f"ab{c}", f"[SEP]{c}", f"é{c}"]
    whole = [left + right for left in lefts for right in rights]
    encode = lambda texts: [e.ids for e in wp._encode(texts, add_special_tokens=False)]  # noqa: E731
    left_ids, right_ids = encode(lefts), encode(rights)
    got = encode(whole)
    expected = [a + b for a in left_ids for b in right_ids]
    wrong = [text for text, g, e in zip(whole, got, expected) if g != e]
    assert not wrong, [ascii(t) for t in wrong[:10]]


LONG_LINES = [
    "," * 5000,
    "a." * 3000,
    "." * 777 + "x" * 300 + "!" * 900,  # a word longer than a piece, between punctuation
    "y" * 2500,  # one word, no cut at all: [UNK]
    "中文字符日本語" * 400 + "and English",
    "Café naïve résumé e\u0301\u0301 ǅ ﬁ İstanbul, " * 150,
    "[SEP][MASK]" * 300 + "x[SEP]y" * 200,
    "nbsp\u00a0and\u3000ideographic\u2009spaces—dashes…" * 200,
    "control\x07\x00\ufffd\u200bchars. " * 300 + "\x85\x0b",
]


@pytest.mark.parametrize("lowercase", [True, False])
def test_long_lines_in_pieces_give_the_whole_lines_ids(lowercase, monkeypatch):
    import random

    rng = random.Random(7)
    pool = ".,;!?()[]{}'\"-–—/\\#@&*é\u0301ñüÅß中文字日本한국🤗™°abcXYZ \u00a0\x00"
    lines = LONG_LINES + ["".join(rng.choice(pool) for _ in range(rng.randint(500, 3000))) for _ in range(40)]
    wp = WordPiece(load_vocab(SAMPLE_VOCAB), lowercase=lowercase)
    whole = [e.ids for e in wp._encode(lines, add_special_tokens=False)]
    monkeypatch.setattr(tokenize, "PIECE_CHARS", 64)
    monkeypatch.setattr(tokenize, "ENCODE_CHARS", 300)
    assert all(len(tokenize.split_long(line)) > 1 for line in LONG_LINES if line != "y" * 2500)
    assert _encode(wp, lines) == whole
    reference = ReferenceTokenizer(load_vocab(SAMPLE_VOCAB).tokens, lowercase=lowercase)
    assert [_encode(wp, [line])[0] == reference.ids(line) for line in LONG_LINES] == [True] * 6 + [False] + [True] * 2


def test_split_long():
    assert tokenize.split_long("ab,cd,ef", size=3) == ["ab,", "cd,", "ef"]
    assert tokenize.split_long("abcdefg,h", size=3) == ["abcdefg,", "h"]  # no cut within reach: the next one
    assert tokenize.split_long("[[[[x", size=2) == ["[[[[x"]  # never after "[": it may open [SEP]
    assert tokenize.split_long("a b\u00a0c", size=2) == ["a ", "b\u00a0", "c"]
    assert "".join(tokenize.split_long("x" * 100 + ", y" * 50, size=10)) == "x" * 100 + ", y" * 50


@pytest.mark.slow  # 10 MB through the tokenizer
def test_ten_megabyte_line_of_commas_in_bounded_memory(tmp_path):
    """Once 4.97 GB peak to tokenize; now the arrays of its 10 M ids and a few copies of the line."""
    import subprocess
    import sys

    script = (
        "import resource\n"
        "from bertdata.instances.tokenize import WordPiece\nfrom bertdata.instances.vocab import load_vocab\n"
        f"wp = WordPiece(load_vocab({str(SAMPLE_VOCAB)!r}))\n"
        "base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        "ids, lengths = wp.encode_lines([',' * 4_000_000, 'the world'])\n"
        "assert lengths.tolist() == [4_000_000, 2] and set(ids[:-2].tolist()) == {wp.vocab.token_to_id[',']}\n"
        "print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base) // 1024)\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    grown_mb = int(proc.stdout)
    assert grown_mb < 400, f"{grown_mb} MB more to tokenize a 4 MB line"


def test_text_lines_strip_as_str_strip_does():
    """A text shard's lines stripped in UTF-8 (`_wordpiece.text_lines`) as `str.strip` strips them,
    every white space character of str.isspace included, or None where the bytes are not UTF-8."""
    from bertdata.instances._wordpiece import text_lines

    rng = __import__("random").Random(11)
    alphabet = ["a", "é", "中", "🙂", "\n", "\n", " "] + WHITE_SPACE
    for _ in range(4000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 20)))
        assert text_lines(text.encode("utf-8")) == python_lines(text), repr(text)
    for space in WHITE_SPACE:  # each alone, at either end, between words
        for text in (space, f"{space}x{space}", f"x{space}y\n{space}\n{space}{space}z"):
            assert text_lines(text.encode("utf-8")) == python_lines(text), repr(text)
    for bad in (b"\xff", b"a\xc3", b"\xed\xa0\x80", b"\xc0\xaf", b"\xf4\x90\x80\x80", b"\xe0\x80\xaf", b"x\n\x80"):
        assert text_lines(bad) is None, bad


def test_a_vocab_pickles_whole_and_is_made_once_per_process(tmp_path):
    """Beam pickles every step that holds the vocab: each copy comes back equal, every token in
    place, a token of odd whitespace inside included, as one object per process."""
    import pickle

    from bertdata.instances import vocab as vocab_module

    path = tmp_path / "vocab.txt"
    path.write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nthe\n##s\na\u00a0b\n\u2028x\n")
    vocab = load_vocab(path)
    vocab_module._UNPICKLED.pop(vocab.sha256, None)
    first, second = pickle.loads(pickle.dumps(vocab)), pickle.loads(pickle.dumps(vocab))
    assert first == vocab and first.tokens == vocab.tokens and first.sha256 == vocab.sha256
    assert first is second
