"""Signature of the cleaner's compiled splice (_spans.c)."""

def splice(text: str, spans: list[tuple[int, int, str | None]]) -> str:
    """`text` with each span `(start, end, shown)` (0 <= start <= end <= len(text)) replaced by
    `shown` (None: nothing). Spans are taken by start, the longest first, ties in list order; a
    span inside the one taken goes with it; one that overlaps it without being inside widens it
    to both, shown as nothing. `text` itself when there are no spans."""
