"""Signature of the cleaner's compiled tidying of its prose (_prose.c)."""

def tidy_prose(text: str) -> str:
    """The cleaner's last passes over paragraphs joined by newlines, in order: invisible
    characters (U+200B-U+200F, soft hyphen, BOM) go and each run of spaces (' ', tab, CR, FF, VT,
    U+00A0, U+2000-U+200A, U+202F, U+205F, U+3000) becomes one ' ', none at the start or end of
    the text or of a line; ' ', ',', ';' and ':' go after each '(' and before each ')'; a '('
    and ')' holding only ',;:.-' and en or em dashes, with single spaces, go; a space goes before
    ',;:!?)]' and before a '.' not followed by another; "[]" goes; each run of commas becomes
    one; spaces are squeezed again."""
