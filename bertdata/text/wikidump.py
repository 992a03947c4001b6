"""Reading MediaWiki XML dumps as a stream of pages: plain `.xml`, single-stream `.bz2`, multistream
`.bz2` (bytes to XML: bertdata.text.decode; the index and byte ranges: bertdata.text.multistream).

Nothing here holds more than one page and one read buffer in memory, so a 20 GB dump
reads like a 2 MB one. Parsing uses expat directly (measured ~10% faster than
ElementTree's pull parser on the real dump fragment, and it needs no tree pruning).

The XML may be UTF-8 or, as some non-Wikimedia exports are, UTF-16 (with a byte order
mark or an encoding declaration): expat decodes it. `read_site` tells which wiki, and so
which language, a dump is from.

Files are opened through an `opener` (bertdata.text.decode) so a Beam pipeline can pass its own.
"""

from __future__ import annotations

import codecs
import contextlib
import os
import re
import xml.parsers.expat
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path

from bertdata.errors import BertdataError
from bertdata.text import _pages
from bertdata.text.decode import Opener, open_local, opened, xml_chunks
from bertdata.text.languages import dataset_name, dump_language
from bertdata.text.wikitext import ENGLISH, Markup, markup_for

from bertdata.text.skipped import DEFAULT_MAX_CHARS, PageTooLarge

EXPORT_NS = "http://www.mediawiki.org/xml/export-0.10/"
EXPORT_ROOT = (
    f'<mediawiki xmlns="{EXPORT_NS}" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" '
    f'xsi:schemaLocation="{EXPORT_NS} http://www.mediawiki.org/xml/export-0.10.xsd" '
    'version="0.10" xml:lang="en">'
)
SKIP_REASONS = ("namespace", PageTooLarge.reason, "redirect", "empty")

# Every captured field but a revision's text is short in a real dump (titles are at most
# 255 bytes, ids at most 20 digits); a longer one is a broken or hostile file, refused
# before it can fill memory.
_MAX_FIELD_CHARS = 4096
# MediaWiki's ids are unsigned integers of 64 bits at most, so 20 digits at most.
_ID_RE = re.compile(r"\s*([0-9]{1,20})\s*")
_NS_RE = re.compile(r"\s*(-?[0-9]{1,20})\s*")
# The fast reader (_pages.c) holds a page's XML whole: a page longer than this, or than twice
# the characters a page may keep (1 MiB at least), is left to expat, which streams it.
_FAST_MAX_BYTES = 1 << 23
# Where the XML is not UTF-8 (an encoding declared, UTF-16), expat alone reads it.
_XML_DECL = re.compile(rb'<\?xml\s+version\s*=\s*(["\'])[^"\']*\1(?:\s+encoding\s*=\s*(["\'])([A-Za-z0-9._-]+)\2)?'
                       rb'(?:\s+standalone\s*=\s*(["\'])(?:yes|no)\4)?\s*\?>')
_SEEK, _FAST, _EXPAT = "seek", "fast", "expat"
# XML is not UTF-8 whose first two bytes are a UTF-16 byte-order mark or hold a NUL. The last
# bytes given to expat are kept: an encoding error's byte may end an earlier read.
_UTF16_MARKS = (b"\xff\xfe", b"\xfe\xff")
_TAIL_BYTES = 4096
_SAMPLE_FILES = (
    "enwiki-sample-pages-articles-multistream.xml.bz2",
    "enwiki-sample-pages-articles-multistream-index.txt.bz2",
    "vocab.txt",
)


@dataclass(frozen=True)
class Page:
    """One `<page>` of a dump with its latest revision's text."""

    page_id: int
    title: str
    ns: int
    text: str
    redirect: str | None = None
    revision_id: int | None = None
    timestamp: str | None = None
    # The revision's text was longer than the reader's `max_page_chars`: it was counted as
    # it streamed past but never kept, and `text` is empty.
    too_large: bool = False


def classify(page: Page, markup: Markup = ENGLISH) -> str | None:
    """Why a page is not an article to keep (one of SKIP_REASONS), or None to keep it.

    Redirects are caught by the `<redirect>` element and also by their text, because
    older dumps and hand-made exports carry only the `#REDIRECT [[...]]` line, or the
    wiki's own word for it (`#WEITERLEITUNG`), which `markup` knows.
    """
    if page.ns != 0:
        return "namespace"
    if page.too_large:
        return PageTooLarge.reason
    if page.redirect is not None or markup.redirect.match(page.text):
        return "redirect"
    if not page.text.strip():
        return "empty"
    return None


# --- bytes -> XML bytes ----------------------------------------------------------------

# --- XML -> pages ----------------------------------------------------------------------

# (parent, element) pairs whose text is kept; everything else in a page is skipped cheaply.
_CAPTURE = {
    ("page", "title"),
    ("page", "ns"),
    ("page", "id"),
    ("revision", "id"),
    ("revision", "timestamp"),
    ("revision", "text"),
    ("siteinfo", "sitename"),
    ("siteinfo", "dbname"),
    ("siteinfo", "base"),
    ("siteinfo", "generator"),
    ("siteinfo", "case"),
    ("namespaces", "namespace"),
}


class _Unread(Exception):
    """A page the fast reader found that DumpParser refuses: expat reads it again, and says why."""


def _utf8(head: bytes) -> bool:
    """Whether XML that begins with `head` is UTF-8: no declaration, or a whole one that says so
    (False for a head too short to tell)."""
    head = head.removeprefix(b"\xef\xbb\xbf")
    if head.startswith(b"<?") or b"<?xml".startswith(head[:5]):
        decl = _XML_DECL.match(head)
        return decl is not None and (decl.group(3) is None or decl.group(3).lower() == b"utf-8")
    return head.startswith(b"<") and not head.startswith(b"<\x00")


class DumpParser:
    """Expat handlers that turn export XML into Page objects and a siteinfo dict.

    A revision's text is kept only up to `max_text_chars` characters, counted as expat
    hands them over, so a page of any size costs at most that much memory; past it the
    page comes out `too_large` with empty text.
    """

    def __init__(self, name: str, where: str = "", max_text_chars: int | None = DEFAULT_MAX_CHARS,
                 fast: bool = True) -> None:
        if max_text_chars is not None and max_text_chars < 0:
            raise BertdataError(f"max_page_chars must be zero or more (got {max_text_chars})")
        self.name = name
        self.where = where  # appended to line/column positions: which XML they count in
        self.max_text_chars = max_text_chars
        self.parser = xml.parsers.expat.ParserCreate()
        self.parser.buffer_text = True
        self.parser.buffer_size = 1 << 16
        self.parser.StartElementHandler = self._start
        self.parser.EndElementHandler = self._end
        self.parser.CharacterDataHandler = self._chars
        self.parser.StartCdataSectionHandler = lambda: setattr(self, "in_cdata", True)
        self.parser.EndCdataSectionHandler = lambda: setattr(self, "in_cdata", False)
        self.in_cdata = False
        self.mode = _SEEK if fast else _EXPAT  # fast=False: expat alone, what the fast reader is checked against
        self.fed = 0  # bytes given to expat
        self.head = self.tail = b""  # for an encoding error's line, with the encoding declared, the last page
        self.declared: str | None = None
        self.parser.XmlDeclHandler = lambda version, encoding, standalone: setattr(self, "declared", encoding)
        self.last_page: Page | None = None
        self.carry = b""  # seeking: the line the first <page> may begin on, not given to expat yet
        self.pending = b""  # reading fast: from the end of the last page it read
        self.rescan_at = 0
        self.fast_max = _FAST_MAX_BYTES if max_text_chars is None else \
            max(1 << 20, min(_FAST_MAX_BYTES, 2 * max_text_chars))
        self.skipped_lines = 0  # line feeds the fast reader took, which expat must count too
        self.stack: list[str] = []
        self.buf: list[str] | None = None
        self.buf_chars = 0
        self.buf_limit: int | None = None
        self.buf_is_text = False
        self.fields: dict[str, str] = {}
        self.too_large = False
        self.redirect: str | None = None
        self.ns_key = ""
        self.pages: list[Page] = []
        self.siteinfo: dict | None = None
        self.siteinfo_done = False
        self.root_closed = False

    def feed(self, data: bytes, final: bool = False) -> None:
        """Read the next bytes of the XML. The pages themselves are read in C (_pages.c), from the
        line the first one begins on, wherever they are written as Wikimedia writes them; at
        anything else expat reads on from the last line break between pages, with the line
        count the C reader took, so every page and every error is expat's."""
        if self.mode == _SEEK:
            data = self._seek_pages(data, final)
        if self.mode == _FAST:
            self._read_fast(data, final)
        elif data or final:
            self._parse(data, final)

    def settle(self) -> None:
        """Give expat all it has not read yet, so `stack` and `root_closed` say where the XML
        stands (a byte range's end); expat reads whatever comes after."""
        if self.mode == _FAST:
            self._read_fast(b"", final=False, settle=True)
        elif self.carry:
            self._parse(self.carry, False)
        self.mode, self.carry = _EXPAT, b""

    def _parse(self, data: bytes, final: bool) -> None:
        start = self.fed
        self.fed += len(data)
        try:
            self.parser.Parse(data, final)
        except xml.parsers.expat.ExpatError as err:
            at = f"at line {err.lineno}, column {err.offset + 1}{self.where}"
            encoding = self._not_utf8(err, data, start, final)
            if encoding is not None:
                raise BertdataError(f"{self.name}: {encoding}, {at}") from None
            raise BertdataError(f"{self.name}: malformed XML {at}: {xml.parsers.expat.ErrorString(err.code)}") from None
        self.head = (self.head + bytes(data[:2]))[:2]
        self.tail = (self.tail + bytes(data[-_TAIL_BYTES:]))[-_TAIL_BYTES:]

    def _not_utf8(self, err: xml.parsers.expat.ExpatError, data: bytes, start: int, final: bool) -> str | None:
        """"not UTF-8 (byte 0xE9) in page 'Title' (id 12)" where expat stopped at bytes that are
        not UTF-8 in XML that is: as near the page as expat's own reading tells, which is the same
        however the XML was cut into reads (it never looks past the byte), else None."""
        codes = xml.parsers.expat.errors.codes
        if err.code not in (codes[xml.parsers.expat.errors.XML_ERROR_INVALID_TOKEN],
                            codes[xml.parsers.expat.errors.XML_ERROR_PARTIAL_CHAR]):
            return None
        head = (self.head + bytes(data[:2]))[:2]
        if (self.declared or "utf-8").lower() != "utf-8" or head.startswith(_UTF16_MARKS) or b"\0" in head:
            return None
        at = self.parser.ErrorByteIndex - start
        if -at > len(self.tail):
            return None
        seen = ((self.tail[at:] if at < 0 else b"") + bytes(data[max(at, 0):max(at, 0) + 4]))[:4]
        try:
            codecs.getincrementaldecoder("utf-8")().decode(seen, final=final and at + 4 >= len(data))
        except UnicodeDecodeError as bad:
            if bad.start != 0:
                return None
        else:
            return None  # UTF-8, refused for another reason (a character XML does not allow)
        return f"not UTF-8 (byte 0x{seen[0]:02X}){self._where_in_pages()}"

    def _where_in_pages(self) -> str:
        """Which page expat is in, as near as it can tell: its title and id once read."""
        if "page" not in self.stack:
            return ""
        last = self.last_page
        unnamed = f"the page after {last.title!r} (id {last.page_id})" if last else "the first page read here"
        if self.stack[-1] == "title":
            return f" in the title of {unnamed}"
        title, page_id = self.fields.get("title"), self.fields.get("id")
        if title is None:
            return f" in {unnamed}"
        return f" in page {title!r}" + (f" (id {page_id.strip()})" if page_id is not None else "")

    def _seek_pages(self, data: bytes, final: bool) -> bytes:
        """Expat reads up to the line the first `<page>` begins on; the rest is the fast reader's
        (returned) where expat then stands between tokens in the root element, or expat's."""
        buf, self.carry = self.carry + data, b""
        if not self.fed and buf and not _utf8(buf):
            self.mode = _EXPAT
            return buf
        at = buf.find(b"<page>")
        while at >= 0:
            line = buf.rfind(b"\n", 0, at) + 1
            if line and not buf[line:at].strip(b" \t"):
                self._parse(buf[:line], False)
                between = self.stack == ["mediawiki"] and self.buf is None and not self.in_cdata
                self.mode = _FAST if between and self.parser.CurrentByteIndex == self.fed else _EXPAT
                return buf[line:]
            at = buf.find(b"<page>", at + 1)
        if final:
            self.mode = _EXPAT
            return buf
        keep = buf.rfind(b"\n")
        if keep < 0 or len(buf) - keep > 64:
            keep = len(buf)
        self._parse(buf[:keep], False)
        self.carry = buf[keep:]
        return b""

    def _read_fast(self, data: bytes, final: bool, settle: bool = False) -> None:
        pending = self.pending + data if self.pending else bytes(data)  # the decoder's chunks are views
        if not (final or settle) and len(pending) < min(self.rescan_at, self.fast_max):
            self.pending = pending
            return
        found, _, hand_over = _pages.scan(pending, 0, final, max_field_chars=_MAX_FIELD_CHARS)
        done = 0
        for fields in found:
            try:
                page = self._fast_page(fields)
            except _Unread:
                hand_over = True
                break
            self.pages.append(page)
            self.last_page = page
            done = fields[-1]
        self.skipped_lines += pending.count(b"\n", 0, done)
        rest = pending[done:]
        # A page still coming is read again from its start: wait for twice its bytes so far.
        self.pending, self.rescan_at = rest, 2 * len(rest)
        if hand_over or settle or len(rest) > self.fast_max:
            self.mode, self.pending = _EXPAT, b""
            lines, self.skipped_lines = self.skipped_lines, 0
            while lines:
                step = min(lines, 1 << 20)
                self._parse(b"\n" * step, False)
                lines -= step
            self._parse(rest, final)

    def _fast_page(self, fields: tuple) -> Page:
        title, ns, page_id, redirect, revision_id, timestamp, text, _ = fields
        too_large = text is not None and self.max_text_chars is not None and len(text) > self.max_text_chars
        named = {"title": title, "ns": ns, "id": page_id, "revision_id": revision_id,
                 "revision_timestamp": timestamp, "revision_text": "" if too_large else text}
        return self._page({k: v for k, v in named.items() if v is not None}, redirect, too_large, _Unread)

    def _fail(self, what: str) -> BertdataError:
        line, col = self.parser.CurrentLineNumber, self.parser.CurrentColumnNumber + 1
        return BertdataError(f"{self.name}: {what} at line {line}, column {col}{self.where}")

    def _start(self, tag: str, attrs: dict[str, str]) -> None:
        stack = self.stack
        if not stack:
            xmlns = attrs.get("xmlns", "")
            if tag != "mediawiki" or not xmlns.startswith("http://www.mediawiki.org/xml/export-"):
                raise BertdataError(
                    f"{self.name}: not a MediaWiki XML export (root element <{tag}> "
                    f"xmlns={xmlns!r}; expected <mediawiki xmlns=\"http://www.mediawiki.org/xml/export-...\">)"
                )
            self.siteinfo = {"version": attrs.get("version"), "lang": attrs.get("xml:lang")}
        elif tag == "page":
            self.fields = {}
            self.redirect = None
            self.too_large = False
        elif tag == "redirect":
            self.redirect = attrs.get("title", "")
        elif tag == "namespaces":
            self.siteinfo["namespaces"] = {}
        if stack and (stack[-1], tag) in _CAPTURE:
            self.buf = []
            self.buf_chars = 0
            self.buf_is_text = tag == "text"
            self.buf_limit = self.max_text_chars if self.buf_is_text else _MAX_FIELD_CHARS
            if tag == "namespace":
                self.ns_key = attrs.get("key", "")
        stack.append(tag)

    def _chars(self, data: str) -> None:
        if self.buf is None:
            return
        self.buf_chars += len(data)
        if self.buf_limit is None or self.buf_chars <= self.buf_limit:
            self.buf.append(data)
        else:
            # Past the limit the count goes on, the characters are not kept: a page too large,
            # or a field refused at its end tag (where expat hands characters over depends on
            # how the XML was cut into reads; the end tag's position does not).
            self.buf.clear()

    def _end(self, tag: str) -> None:
        self.stack.pop()
        if self.buf is not None:
            if not self.buf_is_text and self.buf_chars > _MAX_FIELD_CHARS:
                raise self._fail(f"<{tag}> longer than {_MAX_FIELD_CHARS:,} characters")
            value = "".join(self.buf)
            self.buf = None
            parent = self.stack[-1]
            if parent == "revision":
                # A full-history dump lists revisions oldest first: the last one wins.
                self.fields["revision_" + tag] = value
                if tag == "text":
                    self.too_large = self.buf_limit is not None and self.buf_chars > self.buf_limit
            elif parent == "page":
                self.fields[tag] = value
            elif parent == "namespaces":
                try:
                    self.siteinfo["namespaces"][int(self.ns_key)] = value
                except ValueError:
                    raise self._fail(f"namespace key {self.ns_key!r} is not an integer") from None
            else:
                self.siteinfo[tag] = value
        elif tag == "page":
            self.last_page = self._page(self.fields, self.redirect, self.too_large, self._fail)
            self.pages.append(self.last_page)
        elif tag == "siteinfo":
            self.siteinfo_done = True
        elif not self.stack:
            self.root_closed = True

    @staticmethod
    def _number(fields: dict[str, str], pattern: re.Pattern, key: str, what: str, noun: str,
                fail: Callable[[str], Exception], page: str = "") -> int | None:
        value = fields.get(key)
        if value is None:
            return None
        match = pattern.fullmatch(value)
        if not match:
            shown = value if len(value) <= 40 else f"{value[:20]}...({len(value):,} characters)"
            raise fail(f"<page>{page} with {what} {shown!r}, not a MediaWiki {noun}")
        return int(match.group(1))

    def _page(self, fields: dict[str, str], redirect: str | None, too_large: bool,
              fail: Callable[[str], Exception]) -> Page:
        # Export schemas since 0.6 require <ns> and MediaWiki's ids are unsigned: a page
        # breaking either is from a damaged or hand-made file. Guessing (namespace 0, as
        # before) would keep talk and user pages as articles, so it stops the read instead,
        # like a page without <id> or <title>.
        page_id = self._number(fields, _ID_RE, "id", "<id>", "page id", fail)
        if page_id is None:
            raise fail("<page> without <id>")
        at = f" {page_id}"
        ns = self._number(fields, _NS_RE, "ns", "<ns>", "namespace number", fail, at)
        if ns is None:
            raise fail(f"<page>{at} without <ns> (export versions before 0.6 lack it; "
                       "bertdata reads 0.6 and later)")
        revision_id = self._number(fields, _ID_RE, "revision_id", "revision <id>", "revision id", fail, at)
        title = fields.get("title", "")
        if not title:
            raise fail(f"<page>{at} without <title>")
        return Page(
            page_id=page_id,
            title=title,
            ns=ns,
            text=fields.get("revision_text", ""),
            redirect=redirect,
            revision_id=revision_id,
            timestamp=fields.get("revision_timestamp"),
            too_large=too_large,
        )

    def drain(self) -> list[Page]:
        pages, self.pages = self.pages, []
        return pages


def _iter_parsed(chunks: Iterable[bytes], parser: DumpParser) -> Iterator[Page]:
    for chunk in chunks:
        parser.feed(chunk)
        yield from parser.drain()
    parser.feed(b"", final=True)
    yield from parser.drain()


def iter_pages(
    path: str | os.PathLike, opener: Opener = open_local, max_page_chars: int | None = DEFAULT_MAX_CHARS
) -> Iterator[Page]:
    """Every page of a dump (`.xml`, `.bz2` single- or multistream), in file order; filter with `classify`.

    A page whose text is over `max_page_chars` characters (None: no limit) comes out
    `too_large`, its text never held in memory."""
    name = os.fspath(path)
    parser = DumpParser(name, max_text_chars=max_page_chars)
    with opened(name, opener) as f, contextlib.closing(xml_chunks(f, name)) as chunks:
        yield from _iter_parsed(chunks, parser)


def _siteinfo_or_none(name: str, opener: Opener) -> dict | None:
    parser = DumpParser(name)
    with opened(name, opener) as f, contextlib.closing(xml_chunks(f, name)) as chunks:
        for chunk in chunks:
            parser.feed(chunk)
            if parser.siteinfo_done or parser.pages:
                break
        else:
            parser.feed(b"", final=True)
    return parser.siteinfo if parser.siteinfo_done else None


def read_siteinfo(path: str | os.PathLike, opener: Opener = open_local) -> dict:
    """The dump's `<siteinfo>` (sitename, dbname, base, generator, case, namespaces {key: name}),
    plus the export `version` and `lang`; reads only as far as `</siteinfo>`."""
    name = os.fspath(path)
    info = _siteinfo_or_none(name, opener)
    if info is None:
        raise BertdataError(f"{name}: MediaWiki export without a <siteinfo> block before the first page")
    return info


@dataclass(frozen=True)
class Site:
    """The wiki a dump comes from: its language, its siteinfo ({} where the dump has none)
    and the markup its pages are written in, for `classify` and `wikitext.clean`."""

    language: str
    siteinfo: dict
    markup: Markup

    @property
    def dataset(self) -> str:
        return dataset_name(self.language)


def read_site(path: str | os.PathLike, lang: str | None = None, opener: Opener = open_local) -> Site:
    """The Site of a dump, its language found as `languages.dump_language` says (`lang`: --lang)."""
    name = os.fspath(path)
    info = _siteinfo_or_none(name, opener) or {}
    code = dump_language(name, info, lang)
    return Site(code, info, markup_for(code, info.get("namespaces")))


# --- multistream: index, byte ranges ---------------------------------------------------

# --- writing multistream dumps ---------------------------------------------------------


def sample_paths() -> tuple[Path, Path, Path]:
    """The bundled sample: (multistream dump, its index, a WordPiece vocab trained on it)."""
    folder = files("bertdata").joinpath("sample")
    paths = tuple(Path(str(folder.joinpath(name))) for name in _SAMPLE_FILES)
    missing = [p for p in paths if not p.is_file()]
    if missing:
        raise BertdataError(f"bundled sample file missing: {missing[0]} (reinstall bertdata)")
    return paths
