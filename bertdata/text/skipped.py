"""Why the cleaner refuses a page: the `SkippedPage` exceptions, whose `reason` the pipeline
counts, and the size limits past which a page is generated junk rather than prose."""

from __future__ import annotations

from bertdata.config import TextConfig
from bertdata.errors import BertdataError

# Pages longer than this are refused; `TextConfig.max_page_chars` says why 5 MB.
DEFAULT_MAX_CHARS = TextConfig.max_page_chars

# Links nest legitimately only inside File captions (depth 2, rarely 3); each level
# copies its label once, so a cap keeps hostile nesting from turning quadratic.
MAX_LINK_DEPTH = 32

# Brackets left once plain and File links are resolved are typos, a handful per page;
# beyond this many the page is generated junk and the per-bracket walk is not worth it.
MAX_STRAY_LINK_BRACKETS = 10_000

# The densest real pages (long lists of flag and convert templates) hold a few tens of
# thousands of templates, tags or table lines; each costs a few microseconds of Python,
# so a page with far more is generated junk refused before the walk, not after it.
MAX_TEMPLATE_BRACES = 500_000

# Templates that show text nest a few deep ({{small|{{native name|ar|{{noitalic|...}}}}}});
# each level copies its text once, so deeper ones are dropped, keeping the walk linear.
MAX_EXPAND_DEPTH = 8

# Longer than any template's name: a head without `|` in this many characters is not one.
MAX_TEMPLATE_NAME = 256

MAX_TAGS = 500_000

MAX_TABLE_MARKS = 100_000


class SkippedPage(BertdataError):
    """A page `clean` refuses; `reason` is the short key the pipeline counts it under."""

    reason = "skipped"


class PageTooLarge(SkippedPage):
    reason = "page_too_large"


class MalformedPage(SkippedPage):
    reason = "malformed_page"


class ListPage(SkippedPage):
    reason = "list_page"
    what = "a list"


class DisambiguationPage(SkippedPage):
    reason = "disambiguation"
    what = "a disambiguation page"


def refuse_if_over(text: str, marks: tuple[str, ...], limit: int, what: str, title: str) -> None:
    """MalformedPage when `marks` occur in `text` more than `limit` times in all (`str.count`).

    The marks start with different characters, so no two occurrences start at one index and a
    text no longer than `limit` holds at most `limit`: it is not counted (a count is a pass over
    the page, and most pages are far shorter than the limits)."""
    if len(text) <= limit:
        return
    count = sum(text.count(mark) for mark in marks)
    if count > limit:
        raise MalformedPage(f"page {title!r}: {count:,} {what}, over the limit of {limit:,}")
