"""One source document (a wiki page or a book) -> its sentences, with the reason when it is skipped.

Plain functions over the cleaners, so the Beam DoFns stay thin and tests need no Beam.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import zstandard

from bertdata.text import wikitext
from bertdata.text._scan import sentence_stats
from bertdata.text.skipped import SkippedPage
from bertdata.text.wikidump import Page, classify


class _Zstd(threading.local):
    """A zstd compressor and decompressor per thread: reused, their contexts are set up once,
    not per document; and one must not serve two threads at once."""

    def __init__(self) -> None:
        # Level 1: libdeflate's level 1 ratio on prose (about 2.4) in about half its time,
        # both ways (README, Performance).
        self.compressor = zstandard.ZstdCompressor(level=1)
        self.decompressor = zstandard.ZstdDecompressor()


_ZSTD = _Zstd()


@dataclass(frozen=True)
class Document:
    """A cleaned document ready for a text shard; `key` orders documents within a shard.

    The sentences travel compressed: on the way to their shard every document sits in the
    runner's shuffle, whose memory grows with the dump, and text shrinks about threefold.
    """

    key: tuple[int, int | str]  # (source rank, page id or book name): wiki pages first, by page id;
    # in a recipe's build (corpus rank, document id)
    packed: bytes  # the text as one zstd frame, which records the text's size
    tokens: int = 0  # its tokens, where a recipe's mix counts them

    @classmethod
    def of(cls, key: tuple[int, int | str], sentences: Iterable[str]) -> "Document":
        return cls.of_text(key, joined_text(sentences))

    @classmethod
    def of_text(cls, key: tuple[int, int | str], text: bytes, tokens: int = 0) -> "Document":
        """`text`: the sentences as `joined_text` gives them."""
        return cls(key, _ZSTD.compressor.compress(text), tokens)

    @property
    def text(self) -> bytes:
        """The sentences in UTF-8, a newline between each two: as a text shard writes them."""
        return _ZSTD.decompressor.decompress(self.packed)

    @property
    def sentences(self) -> tuple[str, ...]:
        return tuple(self.text.decode("utf-8").split("\n"))


def joined_text(sentences: Iterable[str]) -> bytes:
    """Sentences as a document holds them: in UTF-8, a newline between each two (they never
    contain one: the splitters guarantee it)."""
    return "\n".join(sentences).encode("utf-8")


WIKI_SOURCE, BOOKS_SOURCE = 0, 1


def page_document(
    page: Page, splitter, max_chars: int, counts: Counter, keep_lists: bool = False,
    markup: wikitext.Markup = wikitext.ENGLISH, namespaces: Counter | None = None,
) -> Document | None:
    """Clean and split one page; count it under `pages`, plus `skipped_<reason>` or `articles`.

    `keep_lists` keeps list items and "List of" pages (see `wikitext.clean`). `markup` is
    the dump's (`wikidump.read_site(...).markup`); `splitter` should be of its language.
    A page outside the article namespace is also counted in `namespaces` by its number,
    for `languages.describe_skipped_namespaces`.
    """
    counts["pages"] += 1
    reason = classify(page, markup)
    if reason == "namespace" and namespaces is not None:
        namespaces[page.ns] += 1
    if reason is None:
        try:
            text = wikitext.clean(page.text, page.title, max_chars=max_chars, keep_lists=keep_lists,
                                  markup=markup)
        except SkippedPage as skipped:
            reason = skipped.reason
        else:
            sentences = tuple(splitter.split_article(text))
            if sentences:
                joined = joined_text(sentences)
                counts["articles"] += 1
                counts.update(sentence_counts(sentences))
                return Document.of_text((WIKI_SOURCE, page.page_id), joined)
            reason = "no_text"
    counts[f"skipped_{reason}"] += 1
    return None


def article_texts(pages: Iterable[Page], markup: wikitext.Markup = wikitext.ENGLISH) -> Iterator[str]:
    """The cleaned text of each article among `pages`, lazily: what `sentences.train_punkt`
    learns a language's sentence model from when punkt ships none."""
    for page in pages:
        if classify(page, markup) is None:
            try:
                yield wikitext.clean(page.text, page.title, markup=markup)
            except SkippedPage:
                continue


# A sentence ends with terminal punctuation, possibly followed by closing quotes or brackets
# (`_scan.sentence_stats` counts by the same characters).
_ENDINGS = frozenset(".!?\"'\u201d\u2019)]")


def is_terminated(sentence: str) -> bool:
    return sentence[-1:] in _ENDINGS


def sentence_counts(sentences: Iterable[str]) -> dict[str, int]:
    """What the manifest's quality figures are made of, for one document's sentences.

    Words are counted by spaces: the cleaner leaves single spaces between words. Every
    article's sentences pass through here, so one compiled pass counts them all."""
    sentences = sentences if isinstance(sentences, tuple) else tuple(sentences)
    chars, words, unterminated = sentence_stats(sentences)
    return {"sentences": len(sentences), "text_chars": chars, "words": words,
            "unterminated_sentences": unterminated}


def quality(counts: dict[str, int]) -> dict[str, float]:
    """Figures that tell at a glance whether the text is the prose BERT wants."""
    sentences = counts.get("sentences", 0)
    # A recipe's documents (its wikipedia corpus's articles among them) count as articles do.
    documents = counts.get("documents", 0) or counts.get("articles", 0)
    return {"sentences_per_article": round(sentences / max(1, documents), 2),
            "words_per_sentence": round(counts.get("words", 0) / max(1, sentences), 2),
            "unterminated_share": round(counts.get("unterminated_sentences", 0) / max(1, sentences), 4)}


def count_dict(counts: Counter) -> dict[str, int]:
    return dict(sorted(counts.items()))


def merge_counts(dicts: Iterable[dict[str, int]]) -> dict[str, int]:
    total: Counter = Counter()
    for d in dicts:
        total.update(d)
    return count_dict(total)
