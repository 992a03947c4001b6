"""Signatures of the cleaner's compiled passes (_markup.c)."""

from collections.abc import Callable

def tidy_prose(text: str) -> str:
    """The cleaner's last passes over paragraphs joined by newlines, in order: invisible
    characters (U+200B-U+200F, soft hyphen, BOM) go and each run of spaces (' ', tab, CR, FF, VT,
    U+00A0, U+2000-U+200A, U+202F, U+205F, U+3000) becomes one ' ', none at the start or end of
    the text or of a line; ' ', ',', ';' and ':' go after each '(' and before each ')'; a '('
    and ')' holding only ',;:.-' and en or em dashes, with single spaces, go; a space goes before
    ',;:!?)]' and before a '.' not followed by another; "[]" goes; each run of commas becomes
    one; spaces are squeezed again."""

def resolve_simple_links(text: str, link_text: Callable[[str], str]) -> str:
    """Every `[[...]]` of `text` with no bracket inside, left to right, replaced by its text: the
    stripped label after the first '|', else the stripped target without leading '#';
    `link_text(inside)` gives the text of a link whose target holds ':' or whose label is empty,
    and must be no longer than the link."""
