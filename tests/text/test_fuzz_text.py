"""Fuzzing the text stage's compiled passes against their Python references.

The cleaner's passes (_markup, _tags, _prose, _spans) and the splitter's tidying (_scan) each
have a test that draws tens of thousands of strings from an alphabet of their markup and
compares the C with the Python it replaced (text_references.py); here those
tests run again on fresh seeds, so their references are used as they stand, never copied. The
splitter's punkt (_scan, _punkt.h) is compared with NLTK on generated text, and the whole
cleaner takes arbitrary text (the sanitizers are its oracle: a page is cleaned, or refused with
a SkippedPage)."""

from __future__ import annotations

import contextlib
import random
from collections.abc import Iterator

import pytest
from hypothesis import strategies as st

import text_references
from fuzzing import fuzz
from text_inputs import SOUP, SPACES, pair
from bertdata.text.skipped import SkippedPage
from bertdata.text.wikitext import clean

# The differential tests of the C passes: each seeds one random.Random and compares on its draws.
REFERENCE_TESTS = {name: getattr(text_references, name) for name in dir(text_references) if name.startswith("test_")}


@contextlib.contextmanager
def _reseeded(seed: int) -> Iterator[None]:
    """random.Random(x), while it lasts, is seeded with (x, seed): the test's draws, afresh."""
    original = random.Random

    class Reseeded(original):
        def __init__(self, x=None):
            super().__init__(f"{x}/{seed}")

    random.Random = Reseeded
    try:
        yield
    finally:
        random.Random = original


def check_reference(case: list) -> None:
    """case: (test name, seed): that test's comparisons on the seed's draws."""
    name, seed = case
    with _reseeded(seed):
        REFERENCE_TESTS[name]()


def test_there_are_references_to_fuzz_against():
    assert len(REFERENCE_TESTS) >= 12, sorted(REFERENCE_TESTS)


@pytest.mark.slow
def test_the_cleaners_passes_against_their_python_references_on_fresh_draws():
    fuzz("cleaner", st.tuples(st.sampled_from(sorted(REFERENCE_TESTS)), st.integers(0, 2**32)), check_reference,
         examples=len(REFERENCE_TESTS))


MARKUP = ["{{", "}}", "{{{", "}}}", "[[", "]]", "[", "]", "|", "{|", "|}", "|-", "!", "<!--", "-->", "<ref>", "</ref>",
          "<ref name=x/>", "<br/>", "<b>", "</b>", "<math>", "</math>", "''", "'''", "==", "\n", "\n\n", "*", "#", ":",
          ";", "----", "File:", "Category:", "lang-fr", "convert", "&nbsp;", "(", ")", ",", ".", " ", "\t", "\u00a0",
          "\u200b", "\ufeff", "a", "Word", "é", "Ж", "中", "😀", "\U0010ffff", "\ud800", "\x00", "\x85", "\u2028"]


def check_cleaner(text: str) -> None:
    try:
        out = clean(text, "T")
    except SkippedPage:
        return
    assert isinstance(out, str)


def test_the_cleaner_takes_any_text():
    text = st.lists(st.one_of(st.sampled_from(MARKUP), st.characters()), max_size=80).map("".join)
    fuzz("cleaner-any", text, check_cleaner, examples=150)


def check_punkt(case: list) -> None:
    """case: (model, text): the compiled punkt's sentences are NLTK's."""
    model, text = case
    nltk, fast = _pairs(model)
    assert fast.tokenize(text) == nltk.tokenize(text)


_PAIRS: dict = {}


def _pairs(model: str) -> tuple:
    if model not in _PAIRS:
        _PAIRS[model] = pair(model)
    return _PAIRS[model]


def test_punkt_against_nltk():
    words = st.one_of(st.sampled_from(SOUP), st.text(max_size=3))
    text = st.lists(st.tuples(words, st.sampled_from(SPACES)), max_size=30).map(lambda ws: "".join(a + b for a, b in ws))
    fuzz("punkt", st.tuples(st.sampled_from(["english", "german", "russian"]), text), check_punkt, examples=150)
