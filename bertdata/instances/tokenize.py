"""BERT WordPiece tokenization on Hugging Face `tokenizers`, giving the reference's token ids.

Speed: BERT tokenization never looks across whitespace, so a line's ids are the ids of its
whitespace-separated pieces laid end to end. Pieces repeat a great deal (Zipf), so each
distinct piece goes through the Rust tokenizer once and its ids are kept in a hash table of
UTF-8 bytes that compiled code splits and looks up, never making a Python string per word.
That is about 8x faster than handing whole lines to `encode_batch`, with the same ids.
"""

from __future__ import annotations

import itertools
import os
import unicodedata
from collections.abc import Callable

import numpy as np
from tokenizers import AddedToken, Tokenizer, normalizers, pre_tokenizers
from tokenizers.models import WordPiece as WordPieceModel

from bertdata.instances._wordpiece import assemble as _assemble
from bertdata.instances._wordpiece import count_ids as _count_ids
from bertdata.instances._wordpiece import count_pieces as _count_pieces
from bertdata.instances._wordpiece import rehash as _rehash
from bertdata.instances._wordpiece import scan as _scan
from bertdata.instances.vocab import SPECIAL_TOKENS, Vocab

# Lines handled together: enough to amortise each call into compiled code and the Rust
# tokenizer, few enough that a batch's scratch arrays stay small.
BATCH_LINES = 2048
# The reference tokenizer turns any word longer than this into [UNK].
MAX_CHARS_PER_WORD = 100
# Distinct pieces kept (~40 bytes each with their key and ids, ~10 MB in all); past this
# the table starts afresh, which costs only speed: frequent pieces are back within a batch.
CACHE_PIECES = 1 << 18
# Key bytes kept, for long pieces: it bounds the memory, and keeps the table's int32 offsets
# far from 2**31 (only a batch of over 2 GiB could pass it, and the compiled scan refuses that).
CACHE_KEY_BYTES = 1 << 26
# Texts longer than this many characters reach the Rust tokenizer in pieces of about this
# size, and pieces at most ENCODE_CHARS at a time: it keeps a few hundred bytes per token
# for a whole call, so a 10 MB line of commas once took 4.65 GB.
PIECE_CHARS = 1 << 15
ENCODE_CHARS = 1 << 16
# Only ASCII space, tab and CR separate pieces in the compiled path. A line holding any other
# character Python or BERT counts as whitespace (or that BERT deletes, joining neighbours:
# \x0b \x0c \x1c-\x1f \x85) is sent to the Rust tokenizer whole, which is always exact.


class WordPiece:
    """The reference BERT tokenizer: basic tokenization then greedy longest-match WordPiece.

    `lowercase=True` (uncased) lower-cases and strips accents; `lowercase=False` (cased)
    keeps both, as BERT's cased models do. `id_dtype` is the smallest dtype that holds every
    id (uint16 for vocabs of up to 65,536 entries): text shards keep their tokens in it.
    Reuse one across shards to keep its piece cache warm, but not across threads.
    """

    def __init__(self, vocab: Vocab, lowercase: bool = True):
        self.vocab = vocab
        self.lowercase = lowercase
        model = WordPieceModel(vocab=vocab.token_to_id, unk_token="[UNK]",
                               max_input_chars_per_word=MAX_CHARS_PER_WORD)
        tokenizer = Tokenizer(model)
        tokenizer.normalizer = normalizers.BertNormalizer(
            clean_text=True, handle_chinese_chars=True, strip_accents=lowercase, lowercase=lowercase)
        tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
        # The reference never splits or lower-cases a standalone "[SEP]" etc. in the text;
        # as special tokens they are matched before normalisation, which does the same.
        tokenizer.add_special_tokens([AddedToken(t, special=True) for t in SPECIAL_TOKENS])
        self._encode = getattr(tokenizer, "encode_batch_fast", tokenizer.encode_batch)
        self.id_dtype = np.dtype(np.uint16 if len(vocab) <= 1 << 16 else np.int32)
        self._table = _PieceTable(self.id_dtype)

    # What the formats that hold documents ask of any tokenizer (as of tokenizer_file.TokenizerFile).
    kind = "WordPiece"
    # A vocab.txt states no sequence length.
    max_length = None

    @property
    def path(self) -> str:
        return self.vocab.path

    @property
    def name(self) -> str:
        return os.path.basename(self.vocab.path)

    @property
    def sha256(self) -> str:
        return self.vocab.sha256

    @property
    def vocab_size(self) -> int:
        return len(self.vocab)

    @property
    def prefix(self) -> tuple[int, ...]:
        """The ids BERT puts before one sequence: [CLS]."""
        return (self.vocab.cls_id,)

    @property
    def suffix(self) -> tuple[int, ...]:
        """The ids BERT puts after one sequence: [SEP]."""
        return (self.vocab.sep_id,)

    def encode_lines(self, lines: list[str], dtype: np.dtype | type = np.int32
                     ) -> tuple[np.ndarray, np.ndarray]:
        """Token ids of all lines (no [CLS]/[SEP] added), flat, and each line's token count.
        Lines must not contain a newline."""
        def batch(start: int, stop: int) -> tuple[bytes, Callable[[int], str]]:
            return "\n".join(lines[start:stop]).encode("utf-8"), lambda k: lines[start + k]

        return self._encode_all(len(lines), batch, dtype)

    def encode_joined(self, joined: bytes, starts: np.ndarray, dtype: np.dtype | type = np.int32,
                      documents: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """`encode_lines` of lines given in UTF-8, joined by newlines, `starts` where each begins
        (as `_wordpiece.text_lines` gives them): no str is made but for a line sent whole.
        `documents` (each line's document) changes nothing: BERT's pre-tokenizer splits at every
        space, so a document's lines tokenized alone give its text's ids, joined by spaces."""
        count = len(starts)
        ends = np.append(starts[1:] - 1, len(joined)).tolist()
        starts = starts.tolist()

        def batch(start: int, stop: int) -> tuple[bytes, Callable[[int], str]]:
            return (joined[starts[start]:ends[stop - 1]],
                    lambda k: joined[starts[start + k]:ends[start + k]].decode("utf-8"))

        return self._encode_all(count, batch, dtype)

    def _encode_all(self, count: int, batch: Callable[[int, int], tuple[bytes, Callable[[int], str]]],
                dtype: np.dtype | type) -> tuple[np.ndarray, np.ndarray]:
        """`count` lines' ids, `batch(start, stop)` giving lines start:stop joined by newlines in
        UTF-8 and a function from a line's place in that batch to its text."""
        id_parts: list[np.ndarray] = []
        lengths = np.empty(count, dtype=np.int32)
        for start in range(0, count, BATCH_LINES):
            stop = min(count, start + BATCH_LINES)
            ids, lengths[start:stop] = self._encode_batch(*batch(start, stop), stop - start)
            id_parts.append(ids)
        ids = np.concatenate(id_parts) if id_parts else np.empty(0, self.id_dtype)
        return ids.astype(dtype, copy=ids.dtype != np.dtype(dtype)), lengths

    def _encode_batch(self, data: bytes, line: Callable[[int], str], count: int) -> tuple[np.ndarray, np.ndarray]:
        """Ids of `count` lines, `data` in UTF-8 joined by newlines; `line(k)`: the k-th as str."""
        buf = np.frombuffer(data, dtype=np.uint8)
        # Exactly how many pieces `_scan` will find, to size its output.
        pieces, newlines = _count_pieces(buf)
        if newlines != count - 1:
            raise ValueError("encode_lines: a line contains a newline")
        table = self._table
        if table.count > CACHE_PIECES or table.meta[1] > CACHE_KEY_BYTES:
            table.clear()
        table.reserve(pieces, len(buf))
        first_new, first_key_byte = table.count, int(table.meta[1])
        word_entry = np.empty(pieces, dtype=np.int32)
        line_words = np.empty(count, dtype=np.int32)
        whole_line = np.zeros(count, dtype=np.bool_)
        words = _scan(buf, slots=table.slots, hashes=table.hashes, key_offsets=table.key_offsets,
                      key_lengths=table.key_lengths, keys=table.keys, meta=table.meta,
                      word_entry=word_entry, line_words=line_words, whole_line=whole_line)
        if table.count > first_new:
            keys = table.keys[first_key_byte:int(table.meta[1])].tobytes()
            bounds = np.concatenate(([0], np.cumsum(table.key_lengths[first_new:table.count]))).tolist()
            table.set_values(first_new, self._encode_ids([keys[a:b].decode("utf-8")
                                                          for a, b in zip(bounds, bounds[1:])]))
        whole = np.flatnonzero(whole_line)
        whole_ids, whole_lengths = self._encode_ids([line(k) for k in whole.tolist()])
        whole_offsets = np.zeros(count + 1, dtype=np.int64)
        whole_offsets[whole + 1] = whole_lengths
        np.cumsum(whole_offsets, out=whole_offsets)
        lengths = np.empty(count, dtype=np.int32)
        # An upper bound: pieces of lines sent whole are counted too.
        size = _count_ids(word_entry, words, table.value_lengths) + len(whole_ids)
        out = np.empty(size, dtype=self.id_dtype)
        used = _assemble(word_entry, line_words=line_words, whole_line=whole_line,
                         value_offsets=table.value_offsets, value_lengths=table.value_lengths,
                         values=table.values, whole_ids=whole_ids, whole_offsets=whole_offsets,
                         out=out, lengths=lengths)
        return out[:used], lengths

    def _encode_ids(self, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """Ids of each text through the Rust tokenizer: flat, and each text's count.

        A long text goes in pieces cut only where BERT's basic tokenization splits anyway
        (see `split_long`), so its ids are the pieces' ids laid end to end."""
        if not texts:
            return np.empty(0, self.id_dtype), np.empty(0, np.int64)
        chars = np.fromiter(map(len, texts), dtype=np.int64, count=len(texts))
        pieces, owners = texts, None
        if chars.max() > PIECE_CHARS:
            pieces, owners = [], []
            for k, text in enumerate(texts):
                cut = split_long(text) if len(text) > PIECE_CHARS else (text,)
                pieces.extend(cut)
                owners.extend([k] * len(cut))
            chars = np.fromiter(map(len, pieces), dtype=np.int64, count=len(pieces))
        ids, piece_lengths = encode_texts(self._encode, pieces, self.id_dtype, ENCODE_CHARS, chars)
        lengths = piece_lengths if owners is None else np.bincount(
            owners, weights=piece_lengths, minlength=len(texts)).astype(np.int64)
        return ids, lengths


def encode_texts(encode: Callable, texts: list[str], dtype: np.dtype | type, chars_per_call: int,
                 chars: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Ids of each text through a Rust tokenizer's `encode` (its encode_batch, or encode_batch_fast),
    no special tokens added: flat in `dtype`, and each text's count (int64). Texts go about
    `chars_per_call` characters a call (at least one text): enough to amortise the call, few enough
    that its Encoding objects (a few hundred bytes per token) stay small. `chars`: each text's
    length, where it is known. The one encode loop of WordPiece and TokenizerFile."""
    if chars is None:
        chars = np.fromiter(map(len, texts), dtype=np.int64, count=len(texts))
    ends = np.cumsum(chars)
    parts: list[np.ndarray] = []
    lengths = np.empty(len(texts), dtype=np.int64)
    start = 0
    while start < len(texts):
        done = int(ends[start - 1]) if start else 0
        stop = max(start + 1, int(np.searchsorted(ends, done + chars_per_call, side="right")))
        ids = [e.ids for e in encode(texts[start:stop], add_special_tokens=False)]
        lengths[start:stop] = [len(one) for one in ids]
        parts.append(np.fromiter(itertools.chain.from_iterable(ids), dtype=dtype,
                                 count=int(lengths[start:stop].sum())))
        start = stop
    return (np.concatenate(parts) if parts else np.empty(0, dtype)), lengths


# BERT's CJK ideograph blocks, less U+2B820-U+2B91F, which the Rust tokenizer does not space apart.
_CJK = ((0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B81F), (0x2B920, 0x2CEAF),
        (0xF900, 0xFAFF), (0x2F800, 0x2FA1F))


def _is_cut_after(c: str) -> bool:
    """Whether BERT's basic tokenization always ends a token after `c`, whatever follows:
    after whitespace and punctuation (which is its own token), and after a CJK ideograph
    (spaced apart before splitting). Not after "[", which may open a special token."""
    code = ord(c)
    if code < 128:
        return c in " \t" or (c != "[" and (33 <= code <= 47 or 58 <= code <= 64 or 91 <= code <= 96
                                           or 123 <= code <= 126))
    if any(lo <= code <= hi for lo, hi in _CJK):
        return True
    # The Rust tokenizer's Unicode tables are older than Python's: punctuation added since
    # (U+061D, U+2E43...) is no boundary to it, so only what Unicode 3.2 already had counts.
    category, old = unicodedata.category(c), unicodedata.ucd_3_2_0.category(c)
    return category == old and (category[0] == "P" or category == "Zs")


def split_long(text: str, size: int | None = None) -> list[str]:
    """`text` cut into pieces of about `size` characters (default PIECE_CHARS), each cut
    right after a character `_is_cut_after` accepts; a piece is longer only where no
    such character comes sooner (one long word)."""
    size = PIECE_CHARS if size is None else size
    pieces = []
    start = 0
    while len(text) - start > size:
        cut = next((i for i in range(start + size, start, -1) if _is_cut_after(text[i - 1])), None)
        if cut is None:
            cut = next((i + 1 for i in range(start + size, len(text) - 1) if _is_cut_after(text[i])), None)
            if cut is None:
                break
        pieces.append(text[start:cut])
        start = cut
    pieces.append(text[start:])
    return pieces


class _PieceTable:
    """Open-addressing hash table from a piece's UTF-8 bytes to its ids, in flat numpy arrays
    so compiled code can use it. Entry e: key bytes keys[key_offsets[e]:][:key_lengths[e]],
    ids values[value_offsets[e]:][:value_lengths[e]]. meta = (entries, key bytes, id count)."""

    def __init__(self, id_dtype: np.dtype):
        self.meta = np.zeros(3, dtype=np.int64)
        self.slots = np.full(1 << 10, -1, dtype=np.int32)
        self.hashes = np.zeros(0, dtype=np.uint64)
        # int32 is plenty: the table is cleared past CACHE_PIECES entries and CACHE_KEY_BYTES.
        self.key_offsets = np.zeros(0, dtype=np.int32)
        self.key_lengths = np.zeros(0, dtype=np.int32)
        self.value_offsets = np.zeros(0, dtype=np.int32)
        self.value_lengths = np.zeros(0, dtype=np.int32)
        self.keys = np.zeros(0, dtype=np.uint8)
        self.values = np.zeros(0, dtype=id_dtype)

    @property
    def count(self) -> int:
        return int(self.meta[0])

    def clear(self) -> None:
        self.meta[:] = 0
        self.slots[:] = -1

    def reserve(self, pieces: int, nbytes: int) -> None:
        """Room for every one of a batch's `pieces` (`nbytes` bytes in all) to be new."""
        entries = self.count + pieces
        if len(self.hashes) < entries:
            size = max(entries, len(self.hashes) * 3 // 2)
            for name in ("hashes", "key_offsets", "key_lengths", "value_offsets", "value_lengths"):
                setattr(self, name, _grown(getattr(self, name), size))
        if len(self.keys) < self.meta[1] + nbytes:
            self.keys = _grown(self.keys, max(int(self.meta[1]) + nbytes, len(self.keys) * 3 // 2))
        if len(self.slots) < 2 * entries:  # at most half full, so probes stay short
            size = len(self.slots)
            while size < 2 * entries:
                size *= 2
            self.slots = np.full(size, -1, dtype=np.int32)
            _rehash(self.slots, self.hashes, self.count)

    def set_values(self, first: int, encoded: tuple[np.ndarray, np.ndarray]) -> None:
        ids, lengths = encoded
        used = int(self.meta[2])
        if used + len(ids) > np.iinfo(np.int32).max:
            raise OverflowError("piece table: its ids would pass 2**31 - 1, more than its int32 "
                                "value_offsets hold (clear it first)")
        if len(self.values) < used + len(ids):
            self.values = _grown(self.values, max(used + len(ids), len(self.values) * 3 // 2))
        self.values[used:used + len(ids)] = ids
        self.value_lengths[first:first + len(lengths)] = lengths
        self.value_offsets[first:first + len(lengths)] = used + np.cumsum(lengths) - lengths
        self.meta[2] = used + len(ids)


def _grown(array: np.ndarray, size: int) -> np.ndarray:
    out = np.zeros(size, dtype=array.dtype)
    out[:len(array)] = array
    return out

