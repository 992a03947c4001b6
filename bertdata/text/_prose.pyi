"""Signatures of the cleaner's compiled tidying of its prose (_prose.c)."""

def drop_junk_lines(text: str, indented: bool = False) -> str:
    """`text` with every line (split at '\\n' only) that is a heading (`[ \\t]*=.*=[ \\t]*`), a
    horizontal rule (`[ \\t]*-{4,}.*`), or a table row or list item (`[ \\t]*[|!*#:;].*`) emptied,
    its newline kept: `re.sub` of that alternation with MULTILINE.

    With `indented`, a line that starts `[ \\t]*[:;]` and whose run of marks (`[:;*#]+`) holds no
    `*` or `#` keeps its text as a paragraph of its own, `"\\n\\x01" + text + "\\n"` in place of the
    line: the text after the marks for an indented line, after the first colon past them for a
    definition (`;` among the marks), spaces and tabs skipped; a line left with no text is emptied
    as before."""

def join_paragraphs(text: str) -> str:
    """`text`'s paragraphs one per line, then every run of two or more apostrophes removed: what
    `re.sub("''+", "", "\\n".join(p.replace("\\n", " ") for p in re.split(r"\\n[ \\t]*(?:\\n[ \\t]*)+", text) if p))`
    gives (a paragraph of apostrophes alone leaves its line, empty)."""

def worded_lines(text: str) -> list[str]:
    """The lines of `text` (split at '\\n') that hold a word character (`re`'s \\w)."""

def tidy_prose(text: str) -> str:
    """The cleaner's last passes over paragraphs joined by newlines, in order: invisible
    characters (U+200B-U+200F, soft hyphen, BOM) go and each run of spaces (' ', tab, CR, FF, VT,
    U+00A0, U+2000-U+200A, U+202F, U+205F, U+3000) becomes one ' ', none at the start or end of
    the text or of a line; ' ', ',', ';' and ':' go after each '(' and before each ')'; a '('
    and ')' holding only ',;:.-' and en or em dashes, with single spaces, go; a space goes before
    ',;:!?)]' and before a '.' not followed by another; "[]" goes; each run of commas becomes
    one; spaces are squeezed again."""
