"""A corpus file -> its documents, cleaned and split into sentences, keyed for their text shard:
what the text stage does with each file of a recipe's corpora (bertdata.pipelines.stages.text). Counts
go to `counts` under the corpus's own keys (`corpus_key`): read, dropped by reason, kept."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator

from bertdata import corpora
from bertdata.corpora.contract import CorpusSpec, Opener
from bertdata.text import plaintext
from bertdata.text.articles import Document, joined_text

# A corpus's counts travel among the build's as corpus:<name>:<what>.
PREFIX = "corpus:"


def corpus_key(name: str, what: str) -> str:
    return f"{PREFIX}{name}:{what}"


def split_corpus_counts(counts: dict) -> tuple[dict, dict]:
    """(the build's other counts, {corpus: {what: n}})."""
    other: dict = {}
    per: dict = {}
    for key, value in counts.items():
        if key.startswith(PREFIX):
            name, what = key[len(PREFIX):].rsplit(":", 1)
            per.setdefault(name, {})[what] = value
        else:
            other[key] = value
    return other, per


def copies(spec: CorpusSpec, key: str, doc: Document) -> Iterator[tuple[str, Document]]:
    """The document, and as many copies more as its corpus's `repeat` asks: copy k (from 1) keyed
    (corpus rank, id, k), so that it goes to a shard of its own and its samples' ids end `#k`."""
    yield key, doc
    for k in range(1, spec.repeat):
        yield f"{key}#{k}", Document((*doc.key, k), doc.packed, doc.tokens)


def file_documents(spec: CorpusSpec, rank: int, path: str, open_file: Opener, splitter, counts: Counter,
                   count_tokens: Callable[[bytes], int] | None = None, start: int | None = None,
                   end: int | None = None) -> Iterator[tuple[str, Document]]:
    """(the document's key for its shard, the Document) for each document of `path` (its part
    from `start` to `end`, where the type cuts files into parts) that its
    corpus keeps: not filtered out, with text, and of `spec.min_tokens` tokens or more (counted by
    `count_tokens` where the build counts tokens)."""
    ctype = corpora.get(spec.type)
    at_read: Counter = Counter()  # what the type drops as it reads (filtered, no text)
    dropped: Counter = Counter()
    for doc_id, text in ctype.documents(spec, path, open_file, at_read, start, end):
        counts[corpus_key(spec.name, "read")] += 1
        sentences = plaintext.sentences(plaintext.normalize(text), splitter, ctype.paragraphs)
        if not sentences:
            dropped["empty"] += 1
            continue
        joined = joined_text(sentences)
        tokens = count_tokens(joined) if count_tokens is not None else 0
        if tokens < spec.min_tokens:
            dropped["too_short"] += 1
            continue
        yield from copies(spec, f"{spec.name}/{doc_id}", Document.of_text((rank, doc_id), joined, tokens))
    counts[corpus_key(spec.name, "read")] += sum(at_read.values())
    for reason, n in (at_read + dropped).items():
        counts[corpus_key(spec.name, f"dropped_{reason}")] += n
