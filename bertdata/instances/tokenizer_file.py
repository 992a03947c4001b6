"""Any Hugging Face `tokenizers` file (a tokenizer.json: BPE, Unigram, WordPiece, WordLevel) as a
text shard's tokenizer, with what the formats that hold documents need of it: its special tokens
around one sequence, its vocab size and id dtype, its sha256, the length it states.

A WordPiece vocab.txt keeps its own compiled path (tokenize.WordPiece), which gives the same ids as
`tokenizers`' WordPiece; both offer the interface below, and `open_tokenizer` picks one by the file.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
from pathlib import Path

import numpy as np
from tokenizers import Tokenizer

from bertdata.errors import BertdataError
from bertdata.fsutil import load_json, read_bounded
from bertdata.instances.tokenize import MAX_CHARS_PER_WORD, WordPiece, encode_texts
from bertdata.instances.vocab import SPECIAL_TOKENS, Vocab, is_cased, load_vocab

# Characters handed to the Rust tokenizer per call: enough to amortise the call, few enough that
# its Encoding objects (a few hundred bytes per token) stay a few tens of MB.
ENCODE_CHARS = 1 << 18
# Where Hugging Face keeps a tokenizer's model_max_length: beside its tokenizer.json.
CONFIG_NAME = "tokenizer_config.json"
# transformers writes this (int(1e30)) for "no limit".
NO_LIMIT = 10**29
# Texts the post-processor is asked to wrap, to read off the tokens it puts around any one text:
# one must find the same around each.
PROBES = ("a", "Hello, world. 12 3")
# The largest tokenizer.json a build reads: hub tokenizers of 250,000 tokens are ~35 MB; a bound keeps
# /dev/zero, or a link to it, from being read until memory runs out.
MAX_FILE_BYTES = 1 << 27
# Ids a tokenizer may use: `tokenizers` allows any u32, but parquet's list<int32> and Megatron's
# int32 would wrap the ids from 2**31 on negative.
MAX_IDS = 1 << 31


def id_dtype_for(vocab_size: int) -> np.dtype:
    """The dtype a tokenizer's ids are kept in: uint16 where every id fits, else uint32."""
    return np.dtype(np.uint16 if vocab_size <= 1 << 16 else np.uint32)


class TokenizerFile:
    """A `tokenizers` file, tokenizing a text shard's lines with no special tokens (as
    `read_documents` asks) and saying which the tokenizer puts around a sequence.

    `prefix` / `suffix`: the ids its post-processor puts before / after one text ([CLS] / [SEP]
    for BERT, <s> / </s> for RoBERTa, none where it has none). `vocab_size`: one more than its
    largest id (added tokens included). `max_length`: the longest sequence the file (its
    truncation) or a tokenizer_config.json beside it (model_max_length) states, else None.
    Truncation and padding set in the file are not applied to the lines.
    """

    def __init__(self, path: str | os.PathLike, data: bytes | None = None):
        """`data`: the file's bytes where they are read already (a pipe reads once)."""
        path = os.fspath(path)
        if data is None:
            data = read_bounded(path, MAX_FILE_BYTES, "tokenizer file")
        self._setup(path, data, _stated_max_length(path, _parsed(path, data)))

    def _setup(self, path: str, data: bytes, max_length: int | None) -> None:
        self.path = path
        self.name = os.path.basename(path)
        self.sha256 = hashlib.sha256(data).hexdigest()
        self.max_length = max_length
        self._data = data
        try:
            tokenizer = Tokenizer.from_str(data.decode("utf-8"))
        except Exception as err:  # tokenizers raises plain Exception with serde's message
            raise BertdataError(f"{path}: not a tokenizers file this version of `tokenizers` reads "
                                f"({str(err).splitlines()[0] if str(err) else type(err).__name__})") from None
        tokenizer.no_truncation()
        tokenizer.no_padding()
        spec = load_json(data)
        self.lines_alone = lines_tokenize_alone(spec)
        # BERT's own WordPiece, as `tokenizers` writes it: the compiled path's ids are the same, faster.
        self._compiled = _compiled_wordpiece(path, spec, self.sha256)
        self._tokenizer = tokenizer
        self._encode = getattr(tokenizer, "encode_batch_fast", tokenizer.encode_batch)
        self.kind = type(tokenizer.model).__name__
        vocab = tokenizer.get_vocab(with_added_tokens=True)
        if not vocab:
            raise BertdataError(f"{path}: the tokenizer has an empty vocabulary")
        largest = max(vocab.values())
        if largest >= MAX_IDS:
            token = max(vocab, key=vocab.get)
            raise BertdataError(f"{path}: token {token!r} has id {largest:,}; bertdata's formats hold ids below "
                                f"2**31 ({MAX_IDS:,}): renumber the vocabulary")
        unk = getattr(tokenizer.model, "unk_token", None)
        if unk and unk not in vocab:
            raise BertdataError(f"{path}: its {self.kind} model's unknown token {unk!r} is not in its vocabulary")
        self.vocab_size = largest + 1
        self.id_dtype = id_dtype_for(self.vocab_size)
        self.prefix, self.suffix = _specials(path, tokenizer)

    def __reduce__(self):
        # Workers get the file's bytes, not its path: they may not see the launcher's disk.
        return read_from, (self.path, self._data, self.max_length)

    @property
    def data(self) -> bytes:
        """The file's bytes, as read once."""
        return self._data

    def __repr__(self) -> str:
        return f"TokenizerFile({self.path!r}, {self.kind}, {self.vocab_size:,} ids)"

    def as_vocab(self) -> Vocab:
        """Its tokens by id, as a Vocab, for what reads ids with one (`inspect --vocab`: the id
        range, --show); an id no token has reads as an empty token."""
        vocab = self._tokenizer.get_vocab(with_added_tokens=True)
        if self.vocab_size > 2 * len(vocab) + 1000:  # a list of every id would take all memory
            raise BertdataError(f"{self.path}: ids up to {self.vocab_size - 1:,} for {len(vocab):,} tokens: too "
                                "sparse to read as a vocab")
        tokens = [""] * self.vocab_size
        for token, i in vocab.items():
            tokens[i] = token
        return Vocab(self.path, tuple(tokens), self.sha256)

    def token_id(self, token: str) -> int | None:
        """The id of `token` (added tokens included), or None where the vocabulary has none."""
        return self._tokenizer.token_to_id(token)

    def encode_lines(self, lines: list[str], dtype: np.dtype | type = np.int32) -> tuple[np.ndarray, np.ndarray]:
        """Token ids of all lines (no special tokens added), flat, and each line's token count."""
        if self._compiled is not None:
            return self._compiled.encode_lines(lines, dtype)
        ids, lengths = encode_texts(self._encode, lines, dtype, ENCODE_CHARS)
        return ids, lengths.astype(np.int32)

    def encode_documents(self, lines: list[str], documents: np.ndarray, dtype: np.dtype | type = np.int32
                         ) -> tuple[np.ndarray, np.ndarray]:
        """Token ids of each document's text, its lines (`documents`: each line's document, in
        order) joined by one space, flat, and each line's token count: the tokens that start in
        it or in the space before it. A byte-level BPE sees that space (`ĠThe` after the first
        sentence), so lines tokenized alone would not give the tokenizer's ids on the text."""
        count = len(lines)
        documents = np.asarray(documents)
        if self.lines_alone:
            # Each line after its document's first with the space that joins it before it gives
            # the document's own tokens, a run per line (see `lines_tokenize_alone`): the fast path.
            first = np.diff(documents, prepend=documents[0] - 1) != 0 if count else np.empty(0, bool)
            return self.encode_lines([line if lead else " " + line for line, lead in zip(lines, first.tolist())],
                                     dtype)
        # Positions in all lines joined by one space, documents and all: a document's text is a
        # run of that, from its first line's start.
        line_start = np.zeros(count + 1, dtype=np.int64)
        np.cumsum(np.fromiter(map(len, lines), dtype=np.int64, count=count) + 1, out=line_start[1:])
        firsts = np.flatnonzero(np.diff(documents, prepend=documents[0] - 1)) if count else np.empty(0, np.int64)
        bounds = np.append(firsts, count)  # each document's first line, and the end
        # A token belongs to the line it starts in, a line after its document's first beginning
        # at the space before it.
        line_from = line_start[:-1] - 1
        line_from[firsts] += 1
        ids_parts: list[np.ndarray] = []
        line_tokens = np.zeros(count, dtype=np.int64)
        first = 0  # the first document of the next batch
        while first < len(firsts):
            done = int(line_start[firsts[first]])
            stop = int(np.searchsorted(line_start[firsts], done + ENCODE_CHARS, side="right"))
            stop = min(max(first + 1, stop), len(firsts))
            texts = [" ".join(lines[a:b])
                     for a, b in zip(bounds[first:stop].tolist(), bounds[first + 1:stop + 1].tolist())]
            encodings = self._tokenizer.encode_batch(texts, add_special_tokens=False)
            ids = list(itertools.chain.from_iterable(e.ids for e in encodings))
            ids_parts.append(np.fromiter(ids, dtype=dtype, count=len(ids)))
            token_docs = np.repeat(np.arange(first, stop), [len(e.ids) for e in encodings])
            starts = np.fromiter(itertools.chain.from_iterable(itertools.chain.from_iterable(
                e.offsets for e in encodings)), dtype=np.int64, count=2 * len(ids))[::2]
            where = starts + line_start[firsts[token_docs]]
            # In order even where a normalizer's offsets are not: each line's tokens a run.
            line_of = np.maximum.accumulate(np.searchsorted(line_from, where, side="right") - 1) \
                if len(where) else where
            line_tokens += np.bincount(line_of, minlength=count)
            first = stop
        ids = np.concatenate(ids_parts) if ids_parts else np.empty(0, dtype)
        return ids, line_tokens.astype(np.int32)

    def encode_joined(self, joined: bytes, starts: np.ndarray, dtype: np.dtype | type = np.int32,
                      documents: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """`encode_lines` of lines given in UTF-8, joined by newlines, `starts` where each begins
        (as `_wordpiece.text_lines` gives them); with `documents` (each line's document),
        `encode_documents`."""
        if self._compiled is not None:
            return self._compiled.encode_joined(joined, starts, dtype)
        lines = joined.decode("utf-8").split("\n") if len(starts) else []
        if len(lines) != len(starts):
            raise ValueError("encode_joined: a line contains a newline")
        if documents is None:
            return self.encode_lines(lines, dtype)
        return self.encode_documents(lines, documents, dtype)


# Pre-tokenizers that cut text at whitespace, no piece running across it (the space before a word
# goes with the word, as ByteLevel's Ġ and Metaspace's ▁, or nowhere); and those that only cut the
# pieces finer. Normalizers that map each character alone. Every other (a Split's regex, Strip,
# Prepend, Replace, a precompiled charsmap) may join or change text across a line's edge.
SPLIT_AT_SPACES = {"BertPreTokenizer", "Whitespace", "WhitespaceSplit", "ByteLevel", "Metaspace"}
SPLIT_FINER = {"Punctuation", "Digits"}
CHAR_NORMALIZERS = {"NFC", "NFD", "NFKC", "NFKD", "Lowercase", "StripAccents", "BertNormalizer", "Nmt"}


def lines_tokenize_alone(spec) -> bool:
    """Whether a tokenizer.json (`spec`, parsed) gives a document's tokens as the tokens of each of
    its sentences alone, every sentence after the first with the one space before it: its
    normalizer maps characters one by one, its pre-tokenizer cuts at every space, and no added
    token holds a space. Then a document needs no offsets to know which sentence each token is of
    (`encode_documents`' fast path); tests/instances/test_samples.py holds both paths equal."""
    if not isinstance(spec, dict):
        return False

    def parts(step) -> list:
        if isinstance(step, dict) and step.get("type") == "Sequence":
            return [p for inner in step.get("pretokenizers") or step.get("normalizers") or [] for p in parts(inner)]
        return [step]

    normalizer = spec.get("normalizer")
    if normalizer is not None and not all(isinstance(n, dict) and n.get("type") in CHAR_NORMALIZERS
                                          for n in parts(normalizer)):
        return False
    pre = parts(spec.get("pre_tokenizer"))
    if not all(isinstance(p, dict) and p.get("type") in SPLIT_AT_SPACES | SPLIT_FINER for p in pre):
        return False
    if not any(p["type"] in SPLIT_AT_SPACES for p in pre):
        return False
    if any(p["type"] == "ByteLevel" and not p.get("use_regex", True) for p in pre):
        return False
    if any(p["type"] == "Metaspace" and not p.get("split", True) for p in pre):
        return False
    added = spec.get("added_tokens") or []
    return not any(isinstance(t, dict) and any(c.isspace() for c in str(t.get("content", ""))) for t in added)


def _compiled_wordpiece(path: str, spec, sha256: str) -> WordPiece | None:
    """The compiled WordPiece (tokenize.WordPiece) where the file is BERT's tokenizer as it is
    compiled there (`tokenizers`' BertWordPieceTokenizer writes it so): a WordPiece model with
    [UNK] and "##" over ids 0..n-1, BERT's normalizer that strips accents exactly where it
    lower-cases, BERT's pre-tokenizer, and BERT's five special tokens added, none else. Anything
    else keeps `tokenizers`."""
    if not isinstance(spec, dict):
        return None
    model, normalizer, pre = spec.get("model") or {}, spec.get("normalizer") or {}, spec.get("pre_tokenizer") or {}
    lowercase = normalizer.get("lowercase")
    vocab = model.get("vocab")
    added = spec.get("added_tokens") or []
    if not (model.get("type") == "WordPiece" and model.get("unk_token") == "[UNK]"
            and model.get("continuing_subword_prefix") == "##"
            and model.get("max_input_chars_per_word") == MAX_CHARS_PER_WORD and isinstance(vocab, dict)
            and normalizer.get("type") == "BertNormalizer" and normalizer.get("clean_text") is True
            and normalizer.get("handle_chinese_chars") is True and isinstance(lowercase, bool)
            and normalizer.get("strip_accents") in (None, lowercase) and pre.get("type") == "BertPreTokenizer"
            and sorted(t.get("content") for t in added if isinstance(t, dict)) == sorted(SPECIAL_TOKENS)
            and all(t.get("special") and vocab.get(t.get("content")) == t.get("id") for t in added)):
        return None
    tokens = [None] * len(vocab)
    for token, i in vocab.items():
        if not isinstance(i, int) or not 0 <= i < len(tokens) or tokens[i] is not None:
            return None
        tokens[i] = token
    return WordPiece(Vocab(path, tuple(tokens), sha256), lowercase)


def read_from(path: str, data: bytes, max_length: int | None) -> TokenizerFile:
    """The TokenizerFile of bytes read before, `max_length` as stated then (its unpickling, and
    tokenizer_spec's opening in a worker)."""
    tokenizer = TokenizerFile.__new__(TokenizerFile)
    tokenizer._setup(path, data, max_length)
    return tokenizer


def _parsed(path: str, data: bytes) -> dict:
    """The file's JSON, or one line saying what the file is instead of a tokenizer.json."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise BertdataError(f"{path}: not a tokenizer.json (not UTF-8 at byte {err.start})") from None
    try:
        parsed = load_json(text)
    except json.JSONDecodeError as err:
        lines = {line.strip() for line in text.splitlines()[:1000]}
        if lines & set(SPECIAL_TOKENS) or lines & {"<unk>", "<s>", "<pad>"}:
            raise BertdataError(f"{path}: a vocab file (one token per line), not a Hugging Face tokenizer.json; "
                                "a WordPiece vocab.txt is read as one (`open_tokenizer`)") from None
        raise BertdataError(f"{path}: not a tokenizer.json (not JSON: {err.msg} at line {err.lineno} "
                            f"column {err.colno})") from None
    if not isinstance(parsed, dict) or "model" not in parsed:
        if isinstance(parsed, dict) and ("tokenizer_class" in parsed or "model_max_length" in parsed):
            what = f"a {CONFIG_NAME}, not a tokenizer.json: pass the tokenizer.json beside it"
        elif isinstance(parsed, dict) and parsed and all(isinstance(v, int) for v in parsed.values()):
            what = "a vocab.json (tokens and their ids), not a tokenizer.json; save the tokenizer whole " \
                   "(`tokenizer.save(\"tokenizer.json\")`)"
        else:
            what = "JSON, but not a Hugging Face tokenizers file (no \"model\")"
        raise BertdataError(f"{path}: {what}")
    return parsed


def _stated_max_length(path: str, parsed: dict) -> int | None:
    """The least of the file's truncation max_length and a tokenizer_config.json's model_max_length
    beside it, where they are given."""
    stated = []
    truncation = parsed.get("truncation")
    if isinstance(truncation, dict) and isinstance(truncation.get("max_length"), int):
        stated.append(truncation["max_length"])
    config = Path(path).with_name(CONFIG_NAME)
    if config.is_file():
        try:
            limit = load_json(read_bounded(config, MAX_FILE_BYTES, CONFIG_NAME)).get("model_max_length")
        except (BertdataError, UnicodeDecodeError, json.JSONDecodeError, AttributeError):
            limit = None  # not ours to check: the tokenizer.json is what is read
        if isinstance(limit, (int, float)) and 0 < limit < NO_LIMIT:
            stated.append(int(limit))
    return min(stated) if stated else None


def _specials(path: str, tokenizer: Tokenizer) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The ids the post-processor puts before and after one text: each probe encoded with and
    without special tokens, the text's own ids found inside (where several places fit, the one
    after the leading special tokens), and the same found around every probe."""
    found = set()
    for probe in PROBES:
        try:
            plain = tokenizer.encode(probe, add_special_tokens=False).ids
            full = tokenizer.encode(probe, add_special_tokens=True)
        except Exception as err:  # tokenizers raises plain Exception; its message names the fault
            raise BertdataError(f"{path}: the tokenizer fails on {probe!r} ({str(err).splitlines()[0]})") from None
        if not plain and probe == PROBES[-1]:  # it would write empty folders, marked complete
            raise BertdataError(f"{path}: the tokenizer makes no token of {probe!r} (does its normalizer or "
                                "pre-tokenizer remove every character?)")
        ids, mask = full.ids, full.special_tokens_mask
        fits = [i for i in range(len(ids) - len(plain) + 1) if ids[i:i + len(plain)] == plain]
        if not fits:
            raise BertdataError(f"{path}: the tokenizer's post-processor changes a text's own tokens "
                                f"({probe!r}: {plain} becomes {ids}); one sequence's special tokens cannot be read off it")
        lead = next((i for i, m in enumerate(mask) if not m), len(mask))
        at = lead if lead in fits else fits[0]
        found.add((tuple(ids[:at]), tuple(ids[at + len(plain):])))
    if len(found) != 1:
        raise BertdataError(f"{path}: the tokenizer's post-processor puts different tokens around different texts "
                            f"({sorted(found)})")
    return found.pop()


def open_tokenizer(path: str | os.PathLike, lowercase: bool | None = None) -> WordPiece | TokenizerFile:
    """The tokenizer a file holds: a tokenizer.json (its first non-blank character is "{") as a
    TokenizerFile, else a WordPiece vocab.txt on the compiled path, lower-casing where `lowercase`
    says, else where the vocab has no upper case."""
    path = os.fspath(path)
    data = read_bounded(path, MAX_FILE_BYTES, "tokenizer file")
    if data.lstrip().startswith(b"{"):
        return TokenizerFile(path, data)
    vocab = load_vocab(path, data)
    return WordPiece(vocab, lowercase=not is_cased(vocab) if lowercase is None else lowercase)
