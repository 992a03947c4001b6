"""Dump pages for the compiled page reader's tests and fuzz target: real ones, pieces of markup
to damage them with, and the reader run on them the way a build feeds it."""

from __future__ import annotations

import itertools
import random
import re

from bertdata.errors import BertdataError
from bertdata.text import wikidump
from bertdata.text.wikidump import DumpParser


SAMPLE_DUMP = wikidump.sample_paths()[0]


# Inserted into real pages: what the reader must take as expat does, or leave to it.
PIECES = [
    "<", ">", "&", "'", '"', "]", "]]", "]]>", "]>", "\t", "\n", " ", "\r", "\r\n", "\x00", "\x01", "\x0b", "\x7f",
    "&amp;", "&lt;", "&gt;", "&quot;", "&apos;", "&amp", "&nbsp;", "&foo;", "&#65;", "&#x41;", "&#X41;", "&#0;",
    "&#9;", "&#13;", "&#xD;", "&#xD800;", "&#xFFFE;", "&#xFFFD;", "&#x10FFFF;", "&#x110000;", "&#99999999;",
    "&#0000065;", "&#;", "&#x;", "&#65", "é", "\u20ac", "\U0001f600",
    b"\xff", b"\xc3", b"\xc0\x80", b"\xe0\x80\x80", b"\xed\xa0\x80", b"\xef\xbf\xbe", b"\xef\xbf\xbf",
    b"\xf4\x90\x80\x80", b"\xf0\x9f\x98", "<!--c-->", "<!-- c", "<![CDATA[x<y]]>", "<?pi x?>", "<!DOCTYPE x>",
    "</page>", "<page>", "</page>\n<page>", "</page><page>", "</text>", "<text>", "<text/>", "<title>T</title>",
    "<title/>", "<title>" + "t" * 5000 + "</title>", "<id>12</id>", "<id>x</id>", "<id>-1</id>", "<ns>1</ns>",
    "<ns/>", "<redirect title='R &amp; S'/>", "<redirect/>", "<redirect title='a\tb\nc'/>", '<redirect title="<"/>',
    "<x a='1' a='2'/>", "<x a='1'b='2'/>", "<x a = '1' />", "<x a=1/>", "<x a='&#10;'/>", "<é/>", "<x:y/>", "<x/>",
    "</x>", "<x>", "< x/>", "</ x>", "<x></x >", "<1x/>", "<siteinfo>", "<namespaces/>", "<mediawiki>",
    "</mediawiki>", "<revision><id>9</id><text>second</text></revision>", "<revision><text>" + "z" * 300 +
    "</text></revision>", "<contributor><id>3</id></contributor>", "<text><b>bold</b></text>",
]


def as_bytes(piece: str | bytes) -> bytes:
    return piece if isinstance(piece, bytes) else piece.encode()


def read_pages(data: bytes, cuts: list[int], fast: bool, max_chars: int | None) -> list | str:
    parser = DumpParser("dump.xml", max_text_chars=max_chars, fast=fast)
    pages = []
    try:
        for a, b in zip([0, *cuts], [*cuts, len(data)]):
            parser.feed(data[a:b])
            pages += parser.drain()
        parser.feed(b"", final=True)
    except BertdataError as err:
        return [*pages, *parser.drain(), str(err)]  # the pages read before the error too
    return pages + parser.drain()


def pages_region(data: bytes) -> tuple[int, int]:
    return data.index(b"<page>"), data.rindex(b"</page>") + len(b"</page>")


def excerpt(rng: random.Random, data: bytes, pages: int) -> bytes:
    """The document's head, a few of its pages in a row (of its first 60), and its end."""
    starts = [m.start() for m in itertools.islice(re.finditer(b"  <page>", data), 61)]
    first = rng.randrange(len(starts) - pages)
    tail = data.rindex(b"</mediawiki>")
    return data[:starts[0]] + data[starts[first]:starts[first + pages]] + data[tail:]
