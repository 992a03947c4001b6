"""Signature of the compiled page reader (_pages.c), which DumpParser (wikidump.py) runs."""

def scan(data: bytes, start: int, final: bool, max_field_chars: int = ...) -> tuple[list[tuple], int, bool]:
    """The whole `<page>` elements of `data[start:]`, where `start` begins a line of the root
    element's content, each as `(title, ns, id, redirect, revision_id, timestamp, text, end)`:
    the last value DumpParser keeps of each (None where absent; `redirect` is the title attribute
    of a `<redirect>`), and `end`, past the line feed that follows its `</page>`. Then `stop`, the
    `end` of the last page (`start` for none), and whether expat must read on from there: the
    XML that follows is not a page this reader takes (or `final`). False: the data ends inside a
    page; more of it will tell. A page with a field but its text and redirect over
    `max_field_chars` characters (unlimited by default), even one a later field replaces, is
    not taken: expat reads on from it and raises DumpParser's error."""
