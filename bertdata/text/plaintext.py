"""Text that is not wikitext (web pages, papers, books) -> clean sentences: Unicode normalized,
control characters out, whitespace made single spaces, paragraphs kept apart, punkt in the
corpus's language. Web text never goes through the wikitext cleaner: its braces, brackets and
asterisks are prose there, not markup."""

from __future__ import annotations

import re
import unicodedata

# A paragraph ends at a blank line (books, hard-wrapped text), or at every line end (web text,
# whose lines are its paragraphs, headings and list items: a sentence never runs across them).
BLANK_LINES, LINES = "blank", "line"
PARAGRAPHS = (BLANK_LINES, LINES)
_BREAKS = {BLANK_LINES: re.compile(r"\n\s*\n"), LINES: re.compile(r"\n")}
_SPACES = re.compile(r"\s+")
# C0 and C1 controls but tab and line ends, and the Unicode line and paragraph separators (made
# line ends); a zero-width or byte-order mark is no text either.
_CONTROLS = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u200b\ufeff]")
_SEPARATORS = re.compile("[\r\u2028\u2029\x85]")


def normalize(text: str) -> str:
    """NFC, every line end a \\n, control characters removed."""
    text = unicodedata.normalize("NFC", text.replace("\r\n", "\n"))
    return _CONTROLS.sub("", _SEPARATORS.sub("\n", text))


def sentences(text: str, splitter, paragraphs: str = BLANK_LINES) -> list[str]:
    """`text`'s paragraphs, each with its whitespace made single spaces, split into sentences."""
    found: list[str] = []
    for paragraph in _BREAKS[paragraphs].split(text):
        paragraph = _SPACES.sub(" ", paragraph).strip()
        if paragraph:
            found.extend(s for s in (s.strip() for s in splitter.split(paragraph)) if s)
    return found
