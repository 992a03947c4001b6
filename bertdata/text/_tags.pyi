"""Signatures of the cleaner's compiled comment and tag passes (_tags.c)."""

def strip_tags(text: str, drop: frozenset[str], blocks: frozenset[str], keep: frozenset[str], breaks: frozenset[str]
               ) -> str:
    """`text` with each tag `<name attrs>` or `</name attrs>` (an ASCII name, attributes without
    '<' or '>'; attributes that hold something but no value make it prose) handled by its
    lower-cased name: one in `drop` goes, and unless it is a closing or self-closing tag, its
    content with it up to the first closing tag after it, where `re` would find `</name\\s*>`
    with IGNORECASE (no closing tag: only the tag goes); one in `blocks` too leaves a paragraph break
    unless its attributes say "inline". One in `keep` goes and its content stays: "br" leaves a
    space, one in `breaks` a paragraph break. Any other is prose and stays."""

def remove_comments(text: str) -> str:
    """`text` without its `<!-- ... -->` comments; an unclosed one runs to the end of the text,
    as MediaWiki hides it. `text` itself when it has none."""
