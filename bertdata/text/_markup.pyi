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

def strip_tags(text: str, drop: frozenset[str], blocks: frozenset[str], keep: frozenset[str], breaks: frozenset[str],
               closer: Callable[[str, int], tuple[int, int] | None]) -> str:
    """`text` with each tag `<name attrs>` or `</name attrs>` (an ASCII name, attributes without
    '<' or '>'; attributes that hold something but no value make it prose) handled by its
    lower-cased name: one in `drop` goes, and unless it is a closing or self-closing tag, its
    content with it up to `closer(name, end of the tag)`'s `(start, end)` of its closing tag
    (None: no closing tag, only the tag goes); one in `blocks` too leaves a paragraph break
    unless its attributes say "inline". One in `keep` goes and its content stays: "br" leaves a
    space, one in `breaks` a paragraph break. Any other is prose and stays."""
