"""Fuzzing the compiled page reader against expat alone, on real dumps mutated: the same pages, or
the same error at the same line and column, whichever of the two reads it and however the XML is
cut into reads."""

from __future__ import annotations

import bz2
import random
from functools import cache

from hypothesis import strategies as st

from fuzzing import fuzz
from conftest import WIKI_FRAGMENT
from page_inputs import PIECES, SAMPLE_DUMP, as_bytes, excerpt, pages_region, read_pages


@cache
def _documents() -> list[bytes]:
    return [bz2.open(path).read() for path in (SAMPLE_DUMP, WIKI_FRAGMENT) if path.exists()]


def check_pages(case: list) -> None:
    """case: (xml, cuts, other cuts, max_chars): read fast and by expat alone, each cut both ways."""
    data, cuts, other, max_chars = case
    expected = read_pages(data, cuts, False, max_chars)
    for fast, at in ((True, cuts), (False, other), (True, other)):
        assert read_pages(data, at, fast, max_chars) == expected, (fast, at)


@st.composite
def mutated_dumps(draw) -> list:
    docs = _documents()
    rng = random.Random(draw(st.integers(0, 2**32)))
    data = bytearray(excerpt(rng, docs[draw(st.integers(0, len(docs) - 1))], draw(st.integers(1, 4))))
    start, end = pages_region(bytes(data))
    piece = st.one_of(st.sampled_from(PIECES).map(as_bytes), st.binary(max_size=6),
                      st.text(max_size=4).map(lambda t: t.encode("utf-8", "surrogatepass")))
    for kind, where, value in draw(st.lists(st.tuples(st.integers(0, 2), st.floats(0, 1), piece), max_size=4)):
        at = min(start + int(where * (end - start)), len(data) - 1)
        if kind == 0:
            data[at:at] = value
        elif kind == 1:
            del data[at:at + 1 + len(value) * 7]
        else:
            data[at] = value[0] if value else 0
    data = bytes(data)
    cuts = st.lists(st.integers(1, max(len(data) - 1, 1)), max_size=6, unique=True).map(sorted)
    return [data, draw(cuts), draw(cuts), draw(st.sampled_from([None, None, 40, 2000]))]


def test_mutated_dumps_read_as_expat_reads_them_however_cut():
    fuzz("pages", mutated_dumps(), check_pages, examples=40)
