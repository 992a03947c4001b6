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

def template_spans(text: str, names: frozenset[str], prefix: str, max_name: int, max_depth: int,
                   render: Callable[[str, int, int, list[tuple[int, int, str | None]]], str | None]
                   ) -> list[tuple[int, int, str | None]]:
    """The spans `(start, end, shown)` of `text`'s templates, for `templates.splice`: brace runs
    matched as MediaWiki matches them (three braces close three where both sides have them,
    else two); closing braces with nothing open are a span; an unclosed template runs to the
    next blank line, its closed children listed before it. A closed template nested less than
    `max_depth` deep whose name (before '|', at most `max_name` characters, stripped,
    lower-cased, '_' read as ' ') is one of `names` or starts with `prefix` shows
    `render(name, start, end, children)`; every other shows None."""
