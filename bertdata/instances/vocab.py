"""WordPiece vocab files: loading, validating, and the cached default vocab."""

from __future__ import annotations

import hashlib
import io
import os
import zlib
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from bertdata.errors import BertdataError
from bertdata.fsutil import cache_dir, input_errors
from bertdata.text.languages import ENGLISH_CODES

# The default vocab's name in the cache (fsutil.cache_dir), downloaded there once.
DEFAULT_VOCAB_NAME = "bert-base-uncased-vocab.txt"
DEFAULT_VOCAB_URL = "https://huggingface.co/bert-base-uncased/resolve/main/vocab.txt"
DEFAULT_VOCAB_SHA256 = "07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3"
SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
# Where a build leaves its vocab, below its output folder: NGC's current recipe (run_pretraining.sh
# with LDDL) reads it from there, and `vocab_for_shard` looks for it above a shard.
VOCAB_PATH = "vocab/vocab"
# The vocab of Google's multilingual cased BERT (104 Wikipedias), the default for any dump
# not in English. Cased: its text must not be lower-cased.
MULTILINGUAL_VOCAB_URL = "https://huggingface.co/bert-base-multilingual-cased/resolve/main/vocab.txt"
# Not yet recorded: this release was made without access to the file. Until it is filled
# in, a download is checked by its layout (MULTILINGUAL_VOCAB_LAYOUT) and its sha256 goes
# into the manifest; fill it in from a trusted copy (`sha256sum vocab.txt`).
MULTILINGUAL_VOCAB_SHA256: str | None = None
MULTILINGUAL_VOCAB_SIZE = 119_547
# Its special tokens sit where BERT's original vocabs put them.
MULTILINGUAL_VOCAB_LAYOUT = {"[PAD]": 0, "[UNK]": 100, "[CLS]": 101, "[SEP]": 102, "[MASK]": 103}


@dataclass(frozen=True)
class Vocab:
    """A WordPiece vocab in file order (token id = line number)."""

    path: str
    tokens: tuple[str, ...] = field(repr=False)
    sha256: str

    def __len__(self) -> int:
        return len(self.tokens)

    @cached_property
    def token_to_id(self) -> dict[str, int]:
        return {token: i for i, token in enumerate(self.tokens)}

    @cached_property
    def word_ids(self) -> "np.ndarray":
        """The reference's `vocab_words` as ids: its vocab is a dict, so a token listed twice
        appears once, at its first place, with the id of its last line. Random replacement
        tokens are drawn from this list."""
        import numpy as np

        ids = self.token_to_id
        return np.fromiter((ids[t] for t in dict.fromkeys(self.tokens)), dtype=np.int32)

    @cached_property
    def word_continues(self) -> "np.ndarray":
        """Per id, whether the piece continues the word before it: the reference's whole-word
        masking groups a word's pieces by the `##` prefix alone, in any language (text the basic
        tokenizer splits into characters, such as Chinese, has a word per character)."""
        import numpy as np

        return np.fromiter((t.startswith("##") for t in self.tokens), dtype=np.bool_, count=len(self.tokens))

    @property
    def unk_id(self) -> int:
        return self.token_to_id["[UNK]"]

    @property
    def cls_id(self) -> int:
        return self.token_to_id["[CLS]"]

    @property
    def sep_id(self) -> int:
        return self.token_to_id["[SEP]"]

    @property
    def mask_id(self) -> int:
        return self.token_to_id["[MASK]"]

    def __reduce__(self):
        # Beam pickles every step that holds the vocab (a dozen in a build) and bz2-compresses
        # each pickle, and each worker unpickles each of them: 30,000 tokens a time. Sent as one
        # deflated text instead, and made once per process.
        packed = zlib.compress("\n".join(self.tokens).encode("utf-8"), 1)
        return _unpickled_vocab, (self.path, self.sha256, packed)


# The vocabs this process has unpickled, by sha256: every step's copy is the same object.
_UNPICKLED: dict[str, Vocab] = {}


def _unpickled_vocab(path: str, sha256: str, packed: bytes) -> Vocab:
    vocab = _UNPICKLED.get(sha256)
    if vocab is None:
        # Tokens are stripped lines: none holds a newline.
        tokens = tuple(zlib.decompress(packed).decode("utf-8").split("\n"))
        vocab = _UNPICKLED[sha256] = Vocab(path=path, tokens=tokens, sha256=sha256)
    return vocab


def load_vocab(path: str | os.PathLike, data: bytes | None = None) -> Vocab:
    """Read and validate a vocab file: UTF-8, one token per line, BERT's special tokens present.
    `data`: its bytes where they are read already (a pipe reads once)."""
    path = os.fspath(path)
    if data is None:
        with input_errors(path, "vocab file"):
            data = Path(path).read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise BertdataError(f"{path}: not a WordPiece vocab (not UTF-8 at byte {err.start})") from None
    # Refused, not skipped: BERT's tokenizers (Google's, Hugging Face's) read the mark as part of
    # the first token, so a trainer given this file would not find that token.
    if text.startswith("\ufeff"):
        raise BertdataError(f"{path}: begins with a UTF-8 byte-order mark (bytes EF BB BF), which BERT's tokenizers "
                            f"read as part of its first token ({text[1:].split(chr(10), 1)[0].strip()!r}); "
                            "save it as UTF-8 without a BOM")
    # Lines as the reference's readline() reads them (text mode: \n, \r\n or a lone \r ends one),
    # each stripped; str.splitlines would also split at U+2028, U+0085, form feeds..., which a
    # token may hold, and shift every id after it.
    tokens = tuple(line.strip() for line in io.StringIO(text, newline=None))
    missing = [t for t in SPECIAL_TOKENS if t not in tokens]
    if missing:
        raise BertdataError(
            f"{path}: not a WordPiece vocab (missing {', '.join(missing)}); "
            "a BERT vocab has one token per line including [PAD] [UNK] [CLS] [SEP] [MASK]"
        )
    return Vocab(path=path, tokens=tokens, sha256=hashlib.sha256(data).hexdigest())


def is_cased(vocab: Vocab) -> bool:
    """Whether the vocab keeps upper case (any token but the bracketed specials has some):
    text for a cased vocab must not be lower-cased."""
    return any(t != t.lower() for t in vocab.tokens if not (t.startswith("[") and t.endswith("]")))


MULTILINGUAL_VOCAB_NAME = "bert-base-multilingual-cased-vocab.txt"


def default_vocab_cached(language: str) -> bool:
    """Whether the language's default vocab is in the cache already (else it is downloaded first)."""
    return (cache_dir() / (DEFAULT_VOCAB_NAME if language in ENGLISH_CODES else MULTILINGUAL_VOCAB_NAME)).is_file()


def multilingual_vocab() -> Vocab:
    """The bert-base-multilingual-cased vocab, downloaded once into the cache and checked."""
    cached = _downloaded_once(
        MULTILINGUAL_VOCAB_NAME, MULTILINGUAL_VOCAB_URL, MULTILINGUAL_VOCAB_SHA256,
        "a dump not in English needs a multilingual vocab, and bert-base-multilingual-cased's could not be "
        "downloaded into {cached} ({err}); pass --vocab PATH, or train one with `bertdata vocab`")
    vocab = load_vocab(cached)
    layout = {t: vocab.token_to_id.get(t) for t in MULTILINGUAL_VOCAB_LAYOUT}
    if (len(vocab) != MULTILINGUAL_VOCAB_SIZE or layout != MULTILINGUAL_VOCAB_LAYOUT or not is_cased(vocab)
            or MULTILINGUAL_VOCAB_SHA256 not in (None, vocab.sha256)):
        raise BertdataError(
            f"{cached}: not the bert-base-multilingual-cased vocab ({len(vocab):,} tokens, sha256 {vocab.sha256}; "
            f"expected {MULTILINGUAL_VOCAB_SIZE:,} cased tokens with [PAD] at 0 and [UNK] [CLS] [SEP] [MASK] "
            "at 100-103); delete it to download again, or pass --vocab PATH")
    return vocab


def _downloaded_once(name: str, url: str, sha256: str | None, failure: str) -> Path:
    """The cached copy of `url`, fetched (and checked against `sha256`) the first time;
    `failure` says what to do instead, with {cached} and {err} filled in."""
    cached = cache_dir() / name
    if not cached.exists():
        from bertdata.download.fetch import fetch

        try:
            cached.parent.mkdir(parents=True, exist_ok=True)
            fetch(url, cached, sha256=sha256, retries=1, backoff=0.5, timeout=10)
        except (BertdataError, OSError) as err:
            raise BertdataError(failure.format(cached=cached, err=err)) from None
    return cached


def resolve_vocab(path: str | os.PathLike | None, language: str = "en") -> Vocab:
    """`path` if given; otherwise for English the standard bert-base-uncased vocab, for any other
    `language` the multilingual cased one (`multilingual_vocab`), downloaded once into the cache.
    Never the English vocab for another language: it would turn most words into [UNK]."""
    if path is not None:
        return load_vocab(path)
    if language not in ENGLISH_CODES:
        return multilingual_vocab()
    cached = _downloaded_once(
        DEFAULT_VOCAB_NAME, DEFAULT_VOCAB_URL, DEFAULT_VOCAB_SHA256,
        "no vocab given and the default bert-base-uncased vocab could not be downloaded into {cached} ({err}); "
        "pass --vocab PATH to a WordPiece vocab.txt")
    vocab = load_vocab(cached)
    if vocab.sha256 != DEFAULT_VOCAB_SHA256:
        raise BertdataError(
            f"{cached}: cached default vocab is corrupt (sha256 {vocab.sha256}, expected "
            f"{DEFAULT_VOCAB_SHA256}); delete it to download again, or pass --vocab PATH"
        )
    return vocab


def check_vocab(vocab: Vocab, attrs: dict, path: str | os.PathLike) -> None:
    """Refuse a vocab other than the one a shard records it was made with: its ids would decode
    to other words, or past the vocab's end, without a sign of trouble."""
    sha256, size = attrs.get("vocab_sha256"), attrs.get("vocab_size")
    if (sha256 is not None and sha256 != vocab.sha256) or (size is not None and size != len(vocab)):
        raise BertdataError(
            f"{path}: made with a vocab of {f'{size:,}' if size is not None else 'unrecorded'} tokens, sha256 "
            f"{sha256 or 'unrecorded'}, but {vocab.path} has {len(vocab):,} tokens, sha256 {vocab.sha256}; "
            "pass the vocab the shard was made with")


def vocab_for_shard(attrs: dict, path: str | os.PathLike) -> Vocab:
    """The vocab a shard was made with, found by the sha256 it records: the one a build left in
    NGC's layout above it (`vocab/vocab`), the standard vocab (downloaded once), the bundled
    sample vocab, or a vocab in the cache. A shard that records none (the reference's) gets the
    standard vocab."""
    sha256 = attrs.get("vocab_sha256")
    beside = [parent / VOCAB_PATH for parent in Path(path).absolute().parents if (parent / VOCAB_PATH).is_file()]
    found = next((c for c in beside if sha256 is not None and _sha256(c) == sha256), None)
    if found is None and (sha256 is None or sha256 == DEFAULT_VOCAB_SHA256):
        vocab = resolve_vocab(None)
    else:
        from bertdata.text.wikidump import sample_paths

        candidates = [sample_paths()[2], *sorted(cache_dir().glob("*.txt"))]
        found = found or next((c for c in candidates if _sha256(c) == sha256), None)
        if found is None:
            raise BertdataError(
                f"{path}: made with a vocab of sha256 {sha256}, which is neither the bundled sample vocab "
                f"nor in {cache_dir()}; pass --vocab PATH")
        vocab = load_vocab(found)
    check_vocab(vocab, attrs, path)
    return vocab


def _sha256(path: Path) -> str:
    with input_errors(path, "vocab file"):
        return hashlib.sha256(path.read_bytes()).hexdigest()
