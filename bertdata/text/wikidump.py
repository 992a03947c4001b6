"""Reading MediaWiki XML dumps as a stream: plain `.xml`, single-stream `.bz2`, multistream `.bz2`.

Nothing here holds more than one page and one read buffer in memory, so a 20 GB dump
reads like a 2 MB one. Parsing uses expat directly (measured ~10% faster than
ElementTree's pull parser on the real dump fragment, and it needs no tree pruning).

A multistream dump is a concatenation of independent bz2 streams: the first holds
`<mediawiki><siteinfo>...`, each following one holds whole `<page>` elements (100 in
Wikimedia's dumps), the last holds `</mediawiki>`. Its index lists `offset:page_id:title`
per page, so workers can decompress byte ranges of the dump in parallel
(`stream_ranges`, `plan_ranges`, `iter_pages_in_range`).

The XML may be UTF-8 or, as some non-Wikimedia exports are, UTF-16 (with a byte order
mark or an encoding declaration): expat decodes it. `read_site` tells which wiki, and so
which language, a dump is from.

Files are opened through an `opener(path) -> binary file object` so a Beam pipeline can
pass its own. With Beam's `FileSystems.open`, pass
`compression_type=CompressionTypes.UNCOMPRESSED`: its default decompresses `.bz2` by
extension, which would hide the compressed byte offsets the ranges are made of.
"""

from __future__ import annotations

import bz2
import contextlib
import io
import os
import queue
import re
import threading
import xml.parsers.expat
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path
from typing import BinaryIO
from xml.sax.saxutils import escape, quoteattr

try:
    import indexed_bzip2
except ImportError:  # a platform without its wheel: libbz2 does it all
    indexed_bzip2 = None

from bertdata.errors import BertdataError
from bertdata.fsutil import atomic_path, check_output_path, input_errors
from bertdata.text.languages import dataset_name, dump_language
from bertdata.text.wikitext import DEFAULT_MAX_CHARS, ENGLISH, Markup, PageTooLarge, markup_for

Opener = Callable[[str], BinaryIO]

EXPORT_NS = "http://www.mediawiki.org/xml/export-0.10/"
EXPORT_ROOT = (
    f'<mediawiki xmlns="{EXPORT_NS}" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" '
    f'xsi:schemaLocation="{EXPORT_NS} http://www.mediawiki.org/xml/export-0.10.xsd" '
    'version="0.10" xml:lang="en">'
)
SKIP_REASONS = ("namespace", PageTooLarge.reason, "redirect", "empty")

_READ_SIZE = 1 << 18
# Caps the XML produced per decompress call, so a highly compressible stream cannot balloon memory.
_OUT_SIZE = 1 << 20
_BZ2_MAGIC = b"BZh"
# UTF-16 XML starts with a byte order mark or, without one, with "<" and a zero byte;
# expat reads the encoding from either (and from the XML declaration) by itself.
_UTF16_STARTS = (b"\xff\xfe", b"\xfe\xff", b"<\x00", b"\x00<")
# Every captured field but a revision's text is short in a real dump (titles are at most
# 255 bytes, ids at most 20 digits); a longer one is a broken or hostile file, refused
# before it can fill memory.
_MAX_FIELD_CHARS = 4096
# MediaWiki's ids are unsigned integers of 64 bits at most, so 20 digits at most.
_ID_RE = re.compile(r"\s*([0-9]{1,20})\s*")
_NS_RE = re.compile(r"\s*(-?[0-9]{1,20})\s*")
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


def _open_local(path: str) -> BinaryIO:
    return open(path, "rb")


@contextlib.contextmanager
def _opened(path: str, opener: Opener, what: str = "dump file") -> Iterator[BinaryIO]:
    with input_errors(path, what):
        f = opener(path)
    with f:
        yield f


# --- bytes -> XML bytes ----------------------------------------------------------------


def _bz2_chunks(f: BinaryIO, name: str, start: int, end: int | None, hint: str = "") -> Iterator[bytes]:
    """Decompress the consecutive bz2 streams in bytes [start, end) of `f` (already at `start`).

    Fed chunk by chunk, so errors can name the stream and the compressed offset reached;
    `bz2.BZ2File` would only say "Invalid data stream".
    """
    offset = start  # compressed bytes read so far end here
    stream_start = start
    decomp = bz2.BZ2Decompressor()
    fed = False
    data = b""

    def decompress(chunk: bytes) -> bytes:
        try:
            return decomp.decompress(chunk, _OUT_SIZE)
        except OSError:
            raise BertdataError(
                f"{name}: corrupt bz2 data in the stream starting at byte {stream_start} "
                f"(detected by compressed byte {offset}){hint}"
            ) from None

    while True:
        if not data:
            want = _READ_SIZE if end is None else min(_READ_SIZE, end - offset)
            data = f.read(want) if want > 0 else b""
            if not data:
                break
            offset += len(data)
        out = decompress(data)
        fed, data = True, b""
        while True:
            if out:
                yield out
            if decomp.eof or decomp.needs_input:
                break
            out = decompress(b"")
        if decomp.eof:
            data = decomp.unused_data
            stream_start = offset - len(data)
            decomp = bz2.BZ2Decompressor()
            fed = False
    if fed:
        where = "file" if end is None else f"byte range [{start}, {end})"
        raise BertdataError(
            f"{name}: truncated bz2 data: the {where} ends at compressed byte {offset} inside the "
            f"stream starting at byte {stream_start}{hint}"
        )


def _indexed_bz2_chunks(raw: bytes, name: str, start: int, end: int, hint: str = "") -> Iterator[bytes]:
    """Decompress `raw`, the bz2 streams in bytes [start, end) of the dump, with indexed_bzip2:
    about 28% less CPU than libbz2 (32x dump: 3.2 s against 4.4 s), but it holds the GIL, so it
    is for a worker that has its core to itself.

    libbz2 stays the reference. indexed_bzip2 stops quietly at bytes that do not start a
    stream (garbage between streams or after the last) and its errors do not say where the
    damage is, so unless it ended exactly at the range's end, libbz2 decodes the range again:
    it names the damage as it would have alone, or, finding none, supplies what was missing.

    It reads the range from a memory file descriptor: handed a Python file object, it keeps
    references to it for good, a few objects and about 8 KB per range, which a whole dump
    would add up."""
    produced = 0
    complete = False
    fd = os.memfd_create("bertdata-bz2-range")
    try:
        with open(fd, "wb", closefd=False) as f:
            f.write(raw)
        os.lseek(fd, 0, os.SEEK_SET)
        with indexed_bzip2.open(fd, parallelization=1) as f:
            while chunk := f.read(_OUT_SIZE):
                produced += len(chunk)
                yield chunk
            # Its last block offset is the last stream's end-of-stream marker, which 48 bits of
            # magic and a 32-bit CRC follow, then padding to a byte.
            complete = (max(f.block_offsets(), default=0) + 80 + 7) // 8 == len(raw)
    except Exception:  # noqa: BLE001 - RuntimeError/ValueError with C++ text; libbz2 says it better
        pass
    finally:
        os.close(fd)
    if not complete:
        for chunk in _bz2_chunks(io.BytesIO(raw), name, start, end, hint):
            kept = chunk[produced:]
            produced = max(0, produced - len(chunk))
            if kept:
                yield kept


def _indexed_bz2_usable() -> bool:
    # memfd_create: Linux (see _indexed_bz2_chunks).
    return indexed_bzip2 is not None and hasattr(os, "memfd_create")


_PREFETCH_CHUNKS = 8
_DONE = object()


def _prefetched(chunks: Iterator[bytes]) -> Iterator[bytes]:
    """`chunks`, produced on a helper thread a few chunks ahead of the consumer.

    bz2 decompression releases the GIL, so it overlaps with parsing and cleaning on
    another core: about a third of a single worker's reading time. At most
    _PREFETCH_CHUNKS chunks (1 MB each) wait in between. Closing this generator stops
    the thread before returning, so the caller may close the file right after.
    """
    ahead: queue.Queue = queue.Queue(_PREFETCH_CHUNKS)
    stop = threading.Event()

    def offer(item) -> bool:
        """Hand `item` to the consumer; False once the consumer has stopped listening."""
        while not stop.is_set():
            try:
                ahead.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def produce() -> None:
        try:
            for chunk in chunks:
                if not offer(chunk):
                    return
            item = _DONE
        except BaseException as err:  # handed to the consumer, which re-raises it
            item = err
        offer(item)

    thread = threading.Thread(target=produce, name="bz2-prefetch", daemon=True)
    thread.start()
    try:
        while (item := ahead.get()) is not _DONE:
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        stop.set()
        thread.join()


def _raw_chunks(f: BinaryIO) -> Iterator[bytes]:
    while chunk := f.read(_READ_SIZE):
        yield chunk


def _xml_chunks(f: BinaryIO, name: str) -> Iterator[bytes]:
    """The XML of a whole dump file, decompressing it if it is bz2 (decided by magic bytes)."""
    head = f.read(4)
    if not head:
        raise BertdataError(f"{name}: empty file, not a MediaWiki dump")
    f.seek(0)
    if head.startswith(_BZ2_MAGIC):
        return _prefetched(_bz2_chunks(f, name, 0, None))
    if head.startswith(b"\x1f\x8b"):
        raise BertdataError(f"{name}: gzip-compressed dumps are not supported; use the .bz2 or plain .xml dump")
    if not head.startswith(_UTF16_STARTS) and not head.lstrip(b"\xef\xbb\xbf \t\r\n").startswith(b"<") \
            and head.strip():
        raise BertdataError(f"{name}: neither XML nor bz2 (starts with bytes {head!r})")
    return _raw_chunks(f)


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


class _DumpParser:
    """Expat handlers that turn export XML into Page objects and a siteinfo dict.

    A revision's text is kept only up to `max_text_chars` characters, counted as expat
    hands them over, so a page of any size costs at most that much memory; past it the
    page comes out `too_large` with empty text.
    """

    def __init__(self, name: str, where: str = "", max_text_chars: int | None = DEFAULT_MAX_CHARS) -> None:
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
        try:
            self.parser.Parse(data, final)
        except xml.parsers.expat.ExpatError as err:
            raise BertdataError(
                f"{self.name}: malformed XML at line {err.lineno}, column {err.offset + 1}{self.where}: "
                f"{xml.parsers.expat.ErrorString(err.code)}"
            ) from None

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
        elif self.buf_is_text:
            self.buf.clear()  # a page too large: the count goes on, the characters are not kept
        else:
            raise self._fail(f"<{self.stack[-1]}> longer than {_MAX_FIELD_CHARS:,} characters")

    def _end(self, tag: str) -> None:
        self.stack.pop()
        if self.buf is not None:
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
            self.pages.append(self._page())
        elif tag == "siteinfo":
            self.siteinfo_done = True
        elif not self.stack:
            self.root_closed = True

    def _number(self, pattern: re.Pattern, key: str, what: str, noun: str, page: str = "") -> int | None:
        value = self.fields.get(key)
        if value is None:
            return None
        match = pattern.fullmatch(value)
        if not match:
            shown = value if len(value) <= 40 else f"{value[:20]}...({len(value):,} characters)"
            raise self._fail(f"<page>{page} with {what} {shown!r}, not a MediaWiki {noun}")
        return int(match.group(1))

    def _page(self) -> Page:
        fields = self.fields
        # Export schemas since 0.6 require <ns> and MediaWiki's ids are unsigned: a page
        # breaking either is from a damaged or hand-made file. Guessing (namespace 0, as
        # before) would keep talk and user pages as articles, so it stops the read instead,
        # like a page without <id> or <title>.
        page_id = self._number(_ID_RE, "id", "<id>", "page id")
        if page_id is None:
            raise self._fail("<page> without <id>")
        at = f" {page_id}"
        ns = self._number(_NS_RE, "ns", "<ns>", "namespace number", at)
        if ns is None:
            raise self._fail(f"<page>{at} without <ns> (export versions before 0.6 lack it; "
                             "bertdata reads 0.6 and later)")
        revision_id = self._number(_ID_RE, "revision_id", "revision <id>", "revision id", at)
        title = fields.get("title", "")
        if not title:
            raise self._fail(f"<page>{at} without <title>")
        return Page(
            page_id=page_id,
            title=title,
            ns=ns,
            text=fields.get("revision_text", ""),
            redirect=self.redirect,
            revision_id=revision_id,
            timestamp=fields.get("revision_timestamp"),
            too_large=self.too_large,
        )

    def drain(self) -> list[Page]:
        pages, self.pages = self.pages, []
        return pages


def _iter_parsed(chunks: Iterable[bytes], parser: _DumpParser) -> Iterator[Page]:
    for chunk in chunks:
        parser.feed(chunk)
        yield from parser.drain()
    parser.feed(b"", final=True)
    yield from parser.drain()


def iter_pages(
    path: str | os.PathLike, opener: Opener = _open_local, max_page_chars: int | None = DEFAULT_MAX_CHARS
) -> Iterator[Page]:
    """Every page of a dump (`.xml`, `.bz2` single- or multistream), in file order; filter with `classify`.

    A page whose text is over `max_page_chars` characters (None: no limit) comes out
    `too_large`, its text never held in memory."""
    name = os.fspath(path)
    parser = _DumpParser(name, max_text_chars=max_page_chars)
    with _opened(name, opener) as f, contextlib.closing(_xml_chunks(f, name)) as chunks:
        yield from _iter_parsed(chunks, parser)


def _siteinfo_or_none(name: str, opener: Opener) -> dict | None:
    parser = _DumpParser(name)
    with _opened(name, opener) as f, contextlib.closing(_xml_chunks(f, name)) as chunks:
        for chunk in chunks:
            parser.feed(chunk)
            if parser.siteinfo_done or parser.pages:
                break
        else:
            parser.feed(b"", final=True)
    return parser.siteinfo if parser.siteinfo_done else None


def read_siteinfo(path: str | os.PathLike, opener: Opener = _open_local) -> dict:
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


def read_site(path: str | os.PathLike, lang: str | None = None, opener: Opener = _open_local) -> Site:
    """The Site of a dump, its language found as `languages.dump_language` says (`lang`: --lang)."""
    name = os.fspath(path)
    info = _siteinfo_or_none(name, opener) or {}
    code = dump_language(name, info, lang)
    return Site(code, info, markup_for(code, info.get("namespaces")))


# --- multistream: index, byte ranges ---------------------------------------------------


def read_index(index_path: str | os.PathLike, opener: Opener = _open_local) -> Iterator[tuple[int, int, str]]:
    """The `(offset, page_id, title)` entries of a multistream index (bz2 or plain text)."""
    name = os.fspath(index_path)
    with _opened(name, opener, "multistream index") as f:
        head = f.read(3)
        f.seek(0)
        if head == _BZ2_MAGIC:
            stream = bz2.open(f, "rt", encoding="utf-8")
        else:
            stream = io.TextIOWrapper(f, encoding="utf-8")
        try:
            for lineno, line in enumerate(stream, 1):
                line = line.rstrip("\n")
                if not line:
                    continue
                offset, sep1, rest = line.partition(":")
                page_id, sep2, title = rest.partition(":")
                if not (sep1 and sep2 and offset.isdigit() and page_id.isdigit()):
                    raise BertdataError(
                        f"{name}: line {lineno} is not `offset:page_id:title` ({line[:60]!r}); "
                        "is this a multistream index?"
                    )
                yield int(offset), int(page_id), title
        except (OSError, EOFError, UnicodeDecodeError) as err:
            raise BertdataError(f"{name}: unreadable multistream index ({err})") from None


def _check_stream_start(f: BinaryIO, offset: int, name: str, index_name: str | None = None) -> None:
    f.seek(offset)
    head = f.read(4)
    if not (head[:3] == _BZ2_MAGIC and head[3:4].isdigit()):
        source = f"the multistream index {index_name}" if index_name else "the multistream index used"
        raise BertdataError(f"{name}: byte {offset} is not the start of a bz2 stream; {source} does not match this dump")


# Wikimedia's header stream (`<mediawiki>` and `<siteinfo>`) compresses to a few KB; an
# index whose first offset lies further in cannot have started right after it.
_MAX_HEADER_BYTES = 1 << 20


def _check_header_stream(f: BinaryIO, first: int, name: str, index_name: str) -> None:
    """The index's first stream must start where the dump's header stream ends: pages in
    streams it skips would never be read, and nothing downstream would notice.

    Costs one read of the header stream (a few KB), whatever the size of the dump."""
    missing = f"the index misses the streams before byte {first} (cut at its start, or made for another dump)"
    if first > _MAX_HEADER_BYTES:
        raise BertdataError(
            f"{index_name}: the first stream listed starts at byte {first:,} of {name}, past any header "
            f"stream (<siteinfo> takes a few KB); {missing}"
        )
    f.seek(0)
    data = f.read(first)
    decomp = bz2.BZ2Decompressor()
    try:
        xml_head = decomp.decompress(data, _OUT_SIZE)
    except OSError:
        raise BertdataError(f"{name}: does not start with a bz2 stream; is it a multistream dump?") from None
    listed = f"{index_name}: the first stream listed starts at byte {first} of {name}"
    if b"<page" in xml_head or not (decomp.eof or decomp.needs_input):  # the latter: over 1 MB of XML
        raise BertdataError(f"{listed}, but the dump's first stream holds pages; {missing}")
    if not decomp.eof:
        raise BertdataError(f"{listed}, inside its header stream; the index does not match this dump")
    if decomp.unused_data:
        header_end = first - len(decomp.unused_data)
        raise BertdataError(f"{listed}, but its header stream ends at byte {header_end}; {missing}")


def stream_ranges(
    path: str | os.PathLike, index_path: str | os.PathLike, opener: Opener = _open_local
) -> list[tuple[int, int]]:
    """Byte ranges `[start, end)` of the page streams of a multistream dump, in file order.

    Taken from the index's distinct offsets; the last range runs to the end of the file
    (it carries the closing `</mediawiki>`). The header stream before the first offset
    holds only `<siteinfo>` and is not included; the first offset must be where it ends,
    or 0 for a dump whose first stream holds pages too. Streams the index skips further
    on are still read, as part of the range before them.
    """
    name, index_name = os.fspath(path), os.fspath(index_path)
    offsets: list[int] = []
    for offset, _, _ in read_index(index_name, opener):
        if offsets and offset < offsets[-1]:
            raise BertdataError(f"{index_name}: offsets go backwards ({offsets[-1]} then {offset})")
        if not offsets or offset != offsets[-1]:
            offsets.append(offset)
    if not offsets:
        raise BertdataError(f"{index_name}: empty multistream index")
    with _opened(name, opener) as f:
        f.seek(0, os.SEEK_END)
        size = f.tell()
        if offsets[-1] >= size:
            raise BertdataError(
                f"{index_name}: offset {offsets[-1]} is beyond the end of {name} ({size} bytes); "
                "the index does not match this dump"
            )
        # The first and last offsets catch an index of another dump; inner ones are
        # checked by whichever worker's range starts there.
        _check_stream_start(f, offsets[0], name, index_name)
        _check_stream_start(f, offsets[-1], name, index_name)
        if offsets[0]:
            _check_header_stream(f, offsets[0], name, index_name)
    return list(zip(offsets, offsets[1:] + [size]))


def plan_ranges(ranges: list[tuple[int, int]], target_bytes: int) -> list[tuple[int, int]]:
    """Merge consecutive stream ranges into work items of at least `target_bytes` compressed bytes
    (the last may be smaller), so each worker decompresses a few MB instead of one 100-page stream."""
    if target_bytes <= 0:
        raise BertdataError(f"work item size must be positive (got {target_bytes} bytes)")
    planned: list[tuple[int, int]] = []
    start = prev_hi = None
    for lo, hi in ranges:
        if prev_hi is not None and lo != prev_hi:
            raise BertdataError(f"stream ranges are not contiguous ({prev_hi} then {lo})")
        if start is None:
            start = lo
        prev_hi = hi
        if hi - start >= target_bytes:
            planned.append((start, hi))
            start = None
    if start is not None:
        planned.append((start, prev_hi))
    return planned


def iter_pages_in_range(
    path: str | os.PathLike, start: int, end: int, opener: Opener = _open_local,
    max_page_chars: int | None = DEFAULT_MAX_CHARS, prefetch: bool = True,
) -> Iterator[Page]:
    """The pages in the bz2 streams of bytes `[start, end)` of a multistream dump.

    A range is a run of whole streams: one without the dump's header gets a synthetic
    `<mediawiki>` root, one without the footer a synthetic close. `max_page_chars` as
    for `iter_pages`. `prefetch` decompresses on a helper thread, with libbz2, which
    releases the GIL: worth it only when a core is free for it, else the hand-offs cost more
    than they overlap. Without it the range (a work item: a few MB) is read whole and
    decoded in line by indexed_bzip2, the cheaper decoder for a busy core.
    """
    name = os.fspath(path)
    hint = "; does the multistream index match this dump?"
    where = f" of the XML in bytes [{start}, {end})"
    with _opened(name, opener) as f:
        _check_stream_start(f, start, name)
        f.seek(start)
        if prefetch or not _indexed_bz2_usable():
            chunks = _bz2_chunks(f, name, start, end, hint)
            chunks = _prefetched(chunks) if prefetch else chunks
        else:
            chunks = _indexed_bz2_chunks(f.read(end - start), name, start, end, hint)
        # Closed before the file is, so the prefetch thread never reads a closed file.
        with contextlib.closing(chunks) as chunks:
            first = b""
            for chunk in chunks:
                first += chunk
                if len(first) >= 64:
                    break
            parser = _DumpParser(name, where, max_page_chars)
            if not first.lstrip().startswith((b"<mediawiki", b"<?xml")):
                parser.feed(EXPORT_ROOT.encode())
            parser.feed(first)
            yield from parser.drain()
            for chunk in chunks:
                parser.feed(chunk)
                yield from parser.drain()
        if not parser.root_closed:
            if parser.stack != ["mediawiki"]:
                raise BertdataError(f"{name}: byte range [{start}, {end}) ends inside <{parser.stack[-1]}>{hint}")
            parser.feed(b"</mediawiki>")
        parser.feed(b"", final=True)
        yield from parser.drain()


# --- writing multistream dumps ---------------------------------------------------------


def render_siteinfo(info: dict) -> str:
    """`<siteinfo>` XML for a dict as returned by `read_siteinfo`."""
    case = info.get("case", "first-letter")
    lines = ["  <siteinfo>"]
    for key in ("sitename", "dbname", "base", "generator", "case"):
        if info.get(key) is not None:
            lines.append(f"    <{key}>{escape(info[key])}</{key}>")
    lines.append("    <namespaces>")
    for key, ns_name in sorted(info.get("namespaces", {}).items()):
        if ns_name:
            lines.append(f'      <namespace key="{key}" case="{case}">{escape(ns_name)}</namespace>')
        else:
            lines.append(f'      <namespace key="{key}" case="{case}" />')
    lines += ["    </namespaces>", "  </siteinfo>"]
    return "\n".join(lines) + "\n"


def render_page(page: Page) -> str:
    """A `<page>` element in export-0.10 layout."""
    text = escape(page.text, {'"': "&quot;"})
    lines = [
        "  <page>",
        f"    <title>{escape(page.title)}</title>",
        f"    <ns>{page.ns}</ns>",
        f"    <id>{page.page_id}</id>",
    ]
    if page.redirect is not None:
        lines.append(f"    <redirect title={quoteattr(page.redirect)} />")
    lines.append("    <revision>")
    if page.revision_id is not None:
        lines.append(f"      <id>{page.revision_id}</id>")
    if page.timestamp is not None:
        lines.append(f"      <timestamp>{escape(page.timestamp)}</timestamp>")
    lines += [
        "      <model>wikitext</model>",
        "      <format>text/x-wiki</format>",
        f'      <text bytes="{len(page.text.encode())}" xml:space="preserve">{text}</text>',
        "    </revision>",
        "  </page>",
    ]
    return "\n".join(lines) + "\n"


def write_multistream(
    pages: Iterable[Page],
    siteinfo: dict,
    out_path: str | os.PathLike,
    index_path: str | os.PathLike,
    pages_per_stream: int = 100,
    overwrite: bool = False,
) -> int:
    """Write a multistream `.xml.bz2` dump and its bz2 index the way Wikimedia lays them out:
    a header stream, one stream per `pages_per_stream` pages, a footer stream.
    Deterministic for the same pages; both files appear only when complete. Returns the page count."""
    if pages_per_stream < 1:
        raise BertdataError(f"pages_per_stream must be at least 1 (got {pages_per_stream})")
    out = check_output_path(out_path, force=overwrite)
    index = check_output_path(index_path, force=overwrite)
    count = 0
    with atomic_path(out) as tmp_out, atomic_path(index) as tmp_index:
        with open(tmp_out, "wb") as f, bz2.open(tmp_index, "wt", encoding="utf-8") as idx:
            f.write(bz2.compress(f"{EXPORT_ROOT}\n{render_siteinfo(siteinfo)}".encode(), 9))
            group: list[Page] = []

            def flush() -> None:
                offset = f.tell()
                f.write(bz2.compress("".join(render_page(p) for p in group).encode(), 9))
                idx.writelines(f"{offset}:{p.page_id}:{p.title}\n" for p in group)
                group.clear()

            for page in pages:
                group.append(page)
                count += 1
                if len(group) == pages_per_stream:
                    flush()
            if group:
                flush()
            f.write(bz2.compress(b"</mediawiki>\n", 9))
    return count


def sample_paths() -> tuple[Path, Path, Path]:
    """The bundled sample: (multistream dump, its index, a WordPiece vocab trained on it)."""
    folder = files("bertdata").joinpath("sample")
    paths = tuple(Path(str(folder.joinpath(name))) for name in _SAMPLE_FILES)
    missing = [p for p in paths if not p.is_file()]
    if missing:
        raise BertdataError(f"bundled sample file missing: {missing[0]} (reinstall bertdata)")
    return paths
