"""Signatures of the cleaner's compiled markup passes (_markup.c)."""

from collections.abc import Callable

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


def heading_lines(text: str) -> list[int]:
    """Where each line of `text` (split at '\\n') starts whose first characters but spaces and
    tabs are "==": the lines a pattern `^[ \\t]*==...` with MULTILINE can match at."""

def table_lines(text: str) -> list[tuple[int, str, int]]:
    """`(line start, mark, mark end)` for each line of `text` (split at '\\n') whose first
    characters but spaces, tabs and colons are "{|" or "|}": where `^[ \\t:]*(\\{\\||\\|\\})`
    with MULTILINE matches."""

def has_template(text: str, names: tuple[str, ...]) -> bool:
    """Whether `text` calls one of the templates `names` (non-empty lower-case ASCII): what
    `re.search(r"\\{\\{\\s*(?:name|...)\\s*(?:\\||\\}\\})", text, re.IGNORECASE)` finds, letters
    matching in either case and the characters Unicode folds onto i, k and s."""

def contains(text: str, needle: str) -> bool:
    """`needle in text` for a non-empty ASCII `needle`, found by a vector search for its first
    character: quicker than str's own search where that character is rare in `text`."""
