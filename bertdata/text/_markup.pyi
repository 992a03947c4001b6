"""Signatures of the cleaner's compiled scans of wikitext markup (_markup.c)."""

from collections.abc import Callable

def resolve_simple_links(text: str, link_text: Callable[[str], str]) -> str:
    """Every `[[...]]` of `text` with no bracket inside, left to right, replaced by its text: the
    stripped label after the first '|', else the stripped target without leading '#';
    `link_text(inside)` gives the text of a link whose target holds ':' or whose label is empty,
    and must be no longer than the link."""
