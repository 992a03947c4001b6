"""Indented lines, definition lists and list pages (issue 47): the prose in them is kept by default,
list items are not, and a page that says it is a list is judged by what it holds."""

from __future__ import annotations

import pytest

from bertdata.text.articles import is_terminated
from bertdata.text.sentences import split_article
from bertdata.text.skipped import SkippedPage
from bertdata.text.wikidump import classify, iter_pages
from bertdata.text.wikitext import clean
from conftest import TABLE_FRAGMENT, WIKI_FRAGMENT, need


@pytest.mark.parametrize(
    ("wikitext", "expected"),
    [
        # an indented line of whole sentences is a paragraph of its own
        ("Intro.\n: These are the only Austroasiatic languages to have tone systems. They are few.\nAfter.",
         "Intro.\nThese are the only Austroasiatic languages to have tone systems. They are few.\nAfter."),
        ("::: Deeper, and ''still'' a sentence!", "Deeper, and still a sentence!"),
        # a definition on the term's line, or on its own line
        ("; Recursion : A recursive algorithm is one that invokes itself.",
         "A recursive algorithm is one that invokes itself."),
        ("; Recursion\n: A recursive algorithm is one that invokes itself.",
         "A recursive algorithm is one that invokes itself."),
        # quotes and brackets may close the sentence
        (': "We want good algorithms."', '"We want good algorithms."'),
        (": (This ends in a bracket.)", "(This ends in a bracket.)"),
        # whole sentences only: a fragment after the last one goes, a line without one goes
        (": It runs in linear time. See below", "It runs in linear time."),
        (": Brad Pitt in Troy (2004)\n:<math>x^2</math>\n; Term only\n: {{convert|5|km}}", ""),
        # a lead-in before indented lines goes as before a list
        ("He wrote:\n: It is done.", "It is done."),
        # list items stay out: bullets, numbers, and items indented or continued
        ("Intro.\n* One item.\n# Two item.\n:* Indented item.\n#: Continued item.\n*: Also continued.", "Intro."),
    ],
)
def test_indented_and_definition_prose_is_kept(wikitext: str, expected: str) -> None:
    assert clean(wikitext) == expected


def test_keep_lists_keeps_every_item_whole() -> None:
    assert clean(": It runs. See below\n; Term : Definition\n* item", keep_lists=True) == (
        "It runs. See below\nTerm: Definition\nitem")


SKIP_REASONS = ("list_page", "disambiguation")


def _cleaned(path) -> dict[str, str]:
    """Each article of a dump cleaned, or the reason it is skipped."""
    out = {}
    for page in iter_pages(need(path)):
        if classify(page) is None:
            try:
                out[page.title] = clean(page.text, page.title)
            except SkippedPage as skipped:
                out[page.title] = skipped.reason
    return out


def test_real_indented_and_definition_prose_is_kept() -> None:
    cleaned = _cleaned(WIKI_FRAGMENT)
    assert "A recursive algorithm is one that invokes (makes reference to) itself repeatedly" in cleaned["Algorithm"]
    assert ("These are the only Austroasiatic languages to have highly developed tone systems"
            in cleaned["Austroasiatic languages"])
    # list pages and disambiguations of the fragment are mostly list items: still skipped
    assert [cleaned[t] for t in ("List of anthropologists", "List of Atlas Shrugged characters",
                                 "Aberdeen (disambiguation)", "Ada")] == ["list_page"] * 2 + ["disambiguation"] * 2
    sentences = [s for text in cleaned.values() for s in split_article(text) if text not in SKIP_REASONS]
    assert sum(not is_terminated(s) for s in sentences) < 0.01 * len(sentences)


def test_a_list_page_of_prose_is_kept() -> None:
    """gensim's table fragment: "List of Prison Break characters" is character descriptions in prose."""
    cleaned = _cleaned(TABLE_FRAGMENT)
    prison_break = cleaned["List of Prison Break characters"]
    assert prison_break not in SKIP_REASONS and len(split_article(prison_break)) > 400
    assert "Michael Scofield" in prison_break
