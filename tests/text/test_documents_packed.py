"""A cleaned document as it travels to its text shard (`Document`), and the quality counts
taken from its sentences (`sentence_counts`)."""

from __future__ import annotations

import random
import threading

import pytest

from bertdata.text.articles import Document, joined_text, sentence_counts

ENDINGS = ".!?\"'\u201d\u2019)]"


@pytest.mark.parametrize("sentences", [
    ["One."],
    ["Ünïcödé text — with “quotes”.", "中文句子。", "Emoji 🙂 and a tab\there."],
    ["x" * 300_000, "y"],
    [""],
])
def test_a_document_gives_back_its_sentences_and_their_utf8_lines(sentences):
    doc = Document.of((0, 7), sentences)
    assert doc.sentences == tuple(sentences)
    assert doc.text == "\n".join(sentences).encode("utf-8")
    assert Document.of_text((0, 7), joined_text(sentences)) == doc
    if len(doc.text) > 1000:
        assert len(doc.packed) < len(doc.text) / 10  # it travels compressed


def test_documents_packed_on_several_threads_at_once_come_back_whole():
    # One compressor per thread: shared ones would garble frames made at the same time.
    rng = random.Random(3)
    texts = [[" ".join(rng.choice(["alpha", "beta", "gamma", "δέλτα"]) for _ in range(rng.randrange(1, 4000)))]
             for _ in range(64)]
    results: dict[int, list[Document]] = {}

    def pack(k: int) -> None:
        results[k] = [Document.of((0, n), t) for n, t in enumerate(texts)]

    threads = [threading.Thread(target=pack, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for docs in results.values():
        assert [d.sentences for d in docs] == [tuple(t) for t in texts]


def _counts_one_by_one(sentences: list[str]) -> dict[str, int]:
    return {"sentences": len(sentences), "text_chars": sum(len(s) for s in sentences),
            "words": sum(s.count(" ") + 1 for s in sentences if s),
            "unterminated_sentences": sum(1 for s in sentences if not s or s[-1] not in ENDINGS)}


def test_sentence_counts_equal_counting_sentence_by_sentence():
    rng = random.Random(5)
    alphabet = "ab .!?)]\u201d\u2019\"'é中🙂"
    for _ in range(3000):
        sentences = ["".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 9)))
                     for _ in range(rng.randrange(0, 6))]
        expected = _counts_one_by_one(sentences)
        assert sentence_counts(sentences) == expected, sentences
        assert sentence_counts(iter(sentences)) == expected, sentences
        assert sentence_counts(tuple(sentences)) == expected, sentences
