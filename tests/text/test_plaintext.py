"""Text that is not wikitext: normalized, its control characters out, paragraphs kept apart."""

from __future__ import annotations

import unicodedata

from bertdata.text.plaintext import BLANK_LINES, LINES, normalize, sentences
from bertdata.text.sentences import default_splitter


def test_normalize_makes_nfc_removes_controls_and_unifies_line_ends():
    text = "Cafe\u0301 ok.\r\nNext\u2028line\x00 and\x1b[0m\u200b here\ufeff.\x85End\tx."
    got = normalize(text)
    assert got == "Caf\u00e9 ok.\nNext\nline and[0m here.\nEnd\tx."
    assert unicodedata.is_normalized("NFC", got)


def test_web_lines_are_paragraphs_and_book_paragraphs_end_at_blank_lines():
    splitter = default_splitter()
    web = "A heading\nThe first sentence. The second one.\n  \n* a list item"
    assert sentences(web, splitter, LINES) == ["A heading", "The first sentence.", "The second one.", "* a list item"]
    book = "It was a dark\nand stormy night.  Rain fell.\n\nChapter two\nbegins here."
    assert sentences(book, splitter, BLANK_LINES) == ["It was a dark and stormy night.", "Rain fell.",
                                                      "Chapter two begins here."]
    assert sentences(" \n\t\n", splitter, LINES) == []
