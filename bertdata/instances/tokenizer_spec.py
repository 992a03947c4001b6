"""What a build tokenizes with, as a small frozen, picklable descriptor (`TokenizerSpec`): the
WordPiece vocab and its case, or a tokenizer.json with the bytes the launcher read. The build makes
each once; the stages and their records carry it (equal descriptors are one tokenizer), and each
worker thread opens it once (`open`), whatever carries it there.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from dataclasses import dataclass, field

from bertdata.instances.vocab import Vocab

# Tokenizers a thread keeps open: a build uses one or two; tests make many.
KEEP_OPEN = 4

_opened = threading.local()


@dataclass(frozen=True)
class TokenizerSpec:
    """A tokenizer as a build names it: `path` and `sha256` of its file, and `lowercase` for a
    WordPiece vocab (None: a tokenizers file, whose own normalizer decides). Equal where these are:
    the vocab's tokens or the file's bytes travel along (pickled to workers, who may not see the
    launcher's disk, and a pipe is read once) but are not compared."""

    path: str
    sha256: str
    lowercase: bool | None
    vocab: Vocab | None = field(default=None, compare=False, repr=False)
    data: bytes | None = field(default=None, compare=False, repr=False)
    max_length: int | None = field(default=None, compare=False)

    @classmethod
    def of_vocab(cls, vocab: Vocab, lowercase: bool) -> TokenizerSpec:
        """The compiled WordPiece of a vocab.txt."""
        return cls(vocab.path, vocab.sha256, bool(lowercase), vocab=vocab)

    @classmethod
    def of_file(cls, path: str | os.PathLike) -> TokenizerSpec:
        """A tokenizer.json (--tokenizer's), read here once and checked; the caller's thread keeps
        the TokenizerFile open."""
        from bertdata.instances.tokenizer_file import TokenizerFile

        tokenizer = TokenizerFile(path)
        spec = cls(tokenizer.path, tokenizer.sha256, None, data=tokenizer.data, max_length=tokenizer.max_length)
        _keep(spec, tokenizer)
        return spec

    @property
    def is_file(self) -> bool:
        """Whether it is a tokenizers file (--tokenizer's), not the WordPiece vocab."""
        return self.lowercase is None

    @property
    def name(self) -> str:
        """Its file's name, as manifests record it."""
        return os.path.basename(self.path)

    def open(self):
        """The tokenizer (a WordPiece, or a TokenizerFile): made once per worker thread (a process
        of the build's pool runs one), and kept, its piece cache warm, for every shard after."""
        cache = _cache()
        tokenizer = cache.get(self)
        if tokenizer is None:
            tokenizer = self._make()
            _keep(self, tokenizer)
        else:
            cache.move_to_end(self)
        return tokenizer

    def _make(self):
        if self.is_file:
            from bertdata.instances.tokenizer_file import TokenizerFile, read_from

            if self.data is None:
                return TokenizerFile(self.path)
            return read_from(self.path, self.data, self.max_length)
        from bertdata.instances.tokenize import WordPiece

        return WordPiece(self.vocab, self.lowercase)


def _cache() -> OrderedDict:
    # Per thread: the compiled WordPiece's piece cache is not for two threads at once.
    cache = getattr(_opened, "cache", None)
    if cache is None:
        cache = _opened.cache = OrderedDict()
    return cache


def _keep(spec: TokenizerSpec, tokenizer) -> None:
    cache = _cache()
    cache[spec] = tokenizer
    cache.move_to_end(spec)
    while len(cache) > KEEP_OPEN:
        cache.popitem(last=False)
