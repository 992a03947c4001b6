"""The compiled page reader (_pages.c) against expat alone: the same pages, or the same error at
the same line and column, for real dumps and for thousands of damaged ones, fed in random pieces."""

from __future__ import annotations

import bz2
import random

import pytest

from bertdata.errors import BertdataError
from bertdata.text import multistream
from bertdata.text._pages import scan
from bertdata.text.wikidump import EXPORT_ROOT, DumpParser
from conftest import WIKI_FRAGMENT, need
from page_inputs import PIECES, SAMPLE_DUMP, as_bytes, excerpt, pages_region, read_pages


def _read_range(data: bytes, cuts: list[int], fast: bool, monkeypatch) -> list:
    """As a multistream byte range is read: its pages alone, after the export's root written
    by the reader. The pages yielded, then the error if any."""
    monkeypatch.setattr(multistream, "DumpParser", lambda *a: DumpParser(*a, fast=fast))
    pieces = (data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)]))
    pages = []
    try:
        for page in multistream._range_pages(pieces, "dump.xml", 0, len(data), None):
            pages.append(page)
    except BertdataError as err:
        pages.append(str(err))
    return pages


@pytest.fixture(scope="module")
def documents() -> list[bytes]:
    docs = [bz2.open(SAMPLE_DUMP).read()]
    if WIKI_FRAGMENT.exists():
        docs.append(bz2.open(WIKI_FRAGMENT).read())
    return docs


def test_real_dumps_are_read_fast_to_their_end(documents):
    """Every page of a real dump goes through the compiled reader, none through expat (which
    reads the head, a line feed for each line the reader took, and the root's end tag), and
    they come out as expat reads them."""
    for data in documents:
        parser = DumpParser("dump.xml")
        for i in range(0, len(data), 1 << 16):
            parser.feed(data[i:i + (1 << 16)])
        parser.feed(b"", final=True)
        assert parser.fed == data.index(b"  <page>") + data.count(b"\n", data.index(b"  <page>")) - 1 + \
            len(b"</mediawiki>\n")
        assert parser.drain() == read_pages(data, [], fast=False, max_chars=None)


def _damaged(rng: random.Random, data: bytes) -> bytes:
    start, end = pages_region(data)
    out = bytearray(data)
    for _ in range(rng.choice((1, 1, 2, 3))):
        at = rng.randrange(start, min(end, len(out)))
        what = rng.random()
        if what < 0.75:
            out[at:at] = as_bytes(rng.choice(PIECES))
        elif what < 0.9:
            del out[at:at + rng.randrange(1, 40)]
        else:
            out[at] = rng.randrange(256)
    return bytes(out)


@pytest.mark.slow  # 1,500 damaged excerpts, each read twice
def test_damaged_dumps_read_as_expat_reads_them(documents):
    rng = random.Random(20261203)
    for round_ in range(1500):
        data = _damaged(rng, excerpt(rng, rng.choice(documents), rng.randrange(1, 5)))
        cuts = sorted(rng.sample(range(1, len(data)), rng.randrange(0, 6)))
        max_chars = rng.choice((None, None, 40, 2000))
        fast, slow = read_pages(data, cuts, True, max_chars), read_pages(data, cuts, False, max_chars)
        assert fast == slow, f"round {round_}: {data!r}"


def test_damaged_ranges_read_as_expat_reads_them(documents, monkeypatch):
    rng = random.Random(7)
    for round_ in range(600):
        doc = excerpt(rng, rng.choice(documents), rng.randrange(1, 5))
        start, end = pages_region(doc)
        data = _damaged(rng, doc[start - 2:end + 1])
        cuts = sorted(rng.sample(range(1, len(data)), rng.randrange(0, 4)))
        fast, slow = _read_range(data, cuts, True, monkeypatch), _read_range(data, cuts, False, monkeypatch)
        if slow and isinstance(slow[-1], str):
            # The same error; before it, the pages of the pieces read before the one it came in,
            # which the fast reader may hold a little longer.
            assert isinstance(fast[-1], str) and fast[-1] == slow[-1], f"round {round_}: {data!r}"
            assert fast[:-1] == slow[:len(fast) - 1], f"round {round_}: {data!r}"
        else:
            assert fast == slow, f"round {round_}: {data!r}"


def test_errors_after_fast_pages_name_expats_line_and_column(documents):
    data = documents[0]
    bad = data.rindex(b"</page>")
    broken = data[:bad] + b"&nbsp;" + data[bad:]
    message = read_pages(broken, [len(broken) // 2], fast=True, max_chars=None)[-1]
    line = broken[:bad].count(b"\n") + 1
    column = bad - broken.rindex(b"\n", 0, bad)
    assert f"line {line}, column {column}" in message
    assert message == read_pages(broken, [], fast=False, max_chars=None)[-1]


def test_scan_gives_each_pages_fields_and_where_it_ends():
    xml = (b"  <page>\n    <title>A &amp; B</title>\n    <ns>0</ns>\n    <id>5</id>\n"
           b"    <redirect title=\"C&#233;\" />\n    <revision>\n      <id>7</id>\n"
           b"      <timestamp>2024-01-01T00:00:00Z</timestamp>\n"
           b"      <text bytes=\"9\" xml:space=\"preserve\">x &lt;ref&gt; \xc3\xa9</text>\n"
           b"    </revision>\n  </page>\n  <page>\n    <title>Cut")
    pages, stop, hand_over = scan(xml, 0, False)
    end = xml.index(b"  <page>\n    <title>Cut")
    assert pages == [("A & B", "0", "5", "C\u00e9", "7", "2024-01-01T00:00:00Z", "x <ref> \u00e9", end)]
    assert (stop, hand_over) == (end, False)
    assert scan(xml, 0, True)[1:] == (end, True)
    assert scan(xml + b"</page>\n</mediawiki>", end, False)[1:] == (end, True)


@pytest.mark.parametrize("first", [1, 2, 5, 21, 30, 60, 4096])
def test_a_declared_encoding_is_expats_to_read_however_the_head_is_cut(first):
    """Latin-1 bytes can read as valid UTF-8 ("\xc3\xa9"): a document that declares another
    encoding, or whose first piece is too short to tell, is expat's alone."""
    page = "  <page>\n    <title>Caf\u00c3\u00a9</title>\n    <ns>0</ns>\n    <id>1</id>\n  </page>\n"
    for head in ('<?xml version="1.0" encoding="ISO-8859-1"?>\n', '<?xml version="1.0"?>\n', ""):
        data = (head + EXPORT_ROOT + "\n" + page * 3 + "</mediawiki>\n").encode("latin-1")
        fast = read_pages(data, [first], fast=True, max_chars=None)
        assert fast == read_pages(data, [], fast=False, max_chars=None)
        assert fast[0].title == ("Caf\u00c3\u00a9" if "ISO" in head else "Caf\u00e9")
