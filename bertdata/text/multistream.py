"""Multistream dumps: the index, the byte ranges workers decompress in parallel, and writing one.

A multistream dump is a concatenation of independent bz2 streams: the first holds
`<mediawiki><siteinfo>...`, each following one holds whole `<page>` elements (100 in
Wikimedia's dumps), the last holds `</mediawiki>`. Its index lists `offset:page_id:title`
per page, so workers can decompress byte ranges of the dump in parallel
(`stream_ranges`, `plan_ranges`, `iter_pages_in_range`).
"""

from __future__ import annotations

import bz2
import contextlib
import itertools
import os
import re
from collections.abc import Iterable, Iterator
from typing import BinaryIO
from xml.sax.saxutils import escape, quoteattr

from bertdata.errors import BertdataError
from bertdata.fsutil import atomic_path, check_output_path
from bertdata.text.decode import (BZ2_MAGIC, OUT_SIZE, RANGE_END, Opener, bz2_chunks, compiled_ranges_chunks,
                                  compiled_decoder_scratch, open_local, opened, prefetched, raw_chunks)
from bertdata.text.wikidump import EXPORT_ROOT, DumpParser, Page
from bertdata.text.skipped import DEFAULT_MAX_CHARS


# An index has a line per page, and a stream's lines share its offset: one match per stream
# (100 lines in Wikimedia's dumps), so English's ~24M lines are read at the speed of
# decompressing them, where a loop over lines took longer than that again.
_STREAM_LINES = re.compile(rb"(\d+):\d+:[^\n]*\n(?:\1:\d+:[^\n]*\n)*")
# A title is at most 255 bytes; a file given as the index by mistake may have no newline at
# all, and is refused here instead of held whole.
_MAX_LINE_BYTES = 1 << 16


def index_offsets(index_path: str | os.PathLike, opener: Opener = open_local) -> list[int]:
    """The distinct stream offsets a multistream index (bz2 or plain text) lists, in its order.

    Its lines are `offset:page_id:title`; titles are not read. An index that does not read a
    stream at a time (a malformed or blank line, offsets that go backwards) is read again a
    line at a time, which names what is wrong."""
    name = os.fspath(index_path)
    try:
        with opened(name, opener, "multistream index") as f:
            offsets = _offsets_by_stream(_index_chunks(f, name))
        if offsets is None:
            with opened(name, opener, "multistream index") as f:
                offsets = _offsets_by_line(_index_chunks(f, name), name)
    except OSError as err:  # a read that fails part way (a network file system, an object store)
        raise BertdataError(f"{name}: unreadable multistream index ({err})") from None
    if not offsets:
        raise BertdataError(f"{name}: empty multistream index")
    return offsets


def _index_chunks(f: BinaryIO, name: str) -> Iterator[bytes]:
    if f.read(3) == BZ2_MAGIC:
        f.seek(0)
        return bz2_chunks(f, name, 0, None, "; is this a multistream index?")
    f.seek(0)
    return raw_chunks(f)


def _offsets_by_stream(chunks: Iterator[bytes]) -> list[int] | None:
    """The offsets, or None where the lines do not match a stream at a time."""
    offsets: list[int] = []
    carry = b""
    for chunk in chunks:
        data = carry + chunk
        end = data.rfind(b"\n") + 1
        if not _add_stream_offsets(data, end, offsets):
            return None
        carry = data[end:]
        if len(carry) > _MAX_LINE_BYTES:
            return None
    if carry and not _add_stream_offsets(carry + b"\n", len(carry) + 1, offsets):  # no newline at the end
        return None
    return offsets


def _add_stream_offsets(data: bytes, end: int, offsets: list[int]) -> bool:
    pos = 0
    while pos < end:
        match = _STREAM_LINES.match(data, pos, end)
        if match is None:
            return False
        offset = int(match[1])
        if not offsets or offset > offsets[-1]:
            offsets.append(offset)  # a stream's lines cut by a chunk's end match twice
        elif offset < offsets[-1]:
            return False
        pos = match.end()
    return True


def _offsets_by_line(chunks: Iterator[bytes], name: str) -> list[int]:
    offsets: list[int] = []
    lineno = 0
    carry = b""
    for chunk in itertools.chain(chunks, [b"\n"]):
        *lines, carry = (carry + chunk).split(b"\n")
        if len(carry) > _MAX_LINE_BYTES:
            shown = carry[:60].decode(errors="replace")
            raise BertdataError(f"{name}: line {lineno + len(lines) + 1} is over {_MAX_LINE_BYTES:,} bytes long "
                                f"({shown!r}...); is this a multistream index?")
        for line in lines:
            lineno += 1
            if not line:
                continue
            offset, sep1, rest = line.partition(b":")
            page_id, sep2, _ = rest.partition(b":")
            if not (sep1 and sep2 and offset.isdigit() and page_id.isdigit()):
                shown = line[:60].decode(errors="replace")
                raise BertdataError(f"{name}: line {lineno} is not `offset:page_id:title` ({shown!r}); "
                                    "is this a multistream index?")
            value = int(offset)
            if offsets and value < offsets[-1]:
                raise BertdataError(f"{name}: offsets go backwards ({offsets[-1]} then {value})")
            if not offsets or value != offsets[-1]:
                offsets.append(value)
    return offsets


def _check_stream_start(f: BinaryIO, offset: int, name: str, index_name: str | None = None) -> None:
    f.seek(offset)
    head = f.read(4)
    if not (head[:3] == BZ2_MAGIC and head[3:4].isdigit()):
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
        xml_head = decomp.decompress(data, OUT_SIZE)
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
    path: str | os.PathLike, index_path: str | os.PathLike, opener: Opener = open_local
) -> list[tuple[int, int]]:
    """Byte ranges `[start, end)` of the page streams of a multistream dump, in file order.

    Taken from the index's distinct offsets; the last range runs to the end of the file
    (it carries the closing `</mediawiki>`). The header stream before the first offset
    holds only `<siteinfo>` and is not included; the first offset must be where it ends,
    or 0 for a dump whose first stream holds pages too. Streams the index skips further
    on are still read, as part of the range before them.
    """
    name, index_name = os.fspath(path), os.fspath(index_path)
    offsets = index_offsets(index_name, opener)
    with opened(name, opener) as f:
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
    path: str | os.PathLike, start: int, end: int, opener: Opener = open_local,
    max_page_chars: int | None = DEFAULT_MAX_CHARS, prefetch: bool = True,
) -> Iterator[Page]:
    """The pages in the bz2 streams of bytes `[start, end)` of a multistream dump.

    A range is a run of whole streams: one without the dump's header gets a synthetic
    `<mediawiki>` root, one without the footer a synthetic close. `max_page_chars` as
    for `iter_pages`. `prefetch` decompresses on a helper thread, with libbz2, which
    releases the GIL: worth it only when a core is free for it, else the hand-offs cost more
    than they overlap. Without it the range (a work item: a few MB) is read whole and decoded
    in line by the compiled decoder, the cheaper one for a busy core; libbz2 keeps the
    helper thread's memory to 1 MB pieces, where the compiled decoder's scratch is ~22 MB.
    """
    for pages in iter_pages_in_ranges(path, [(start, end)], opener, max_page_chars, prefetch):
        yield from pages


_HINT = "; does the multistream index match this dump?"


def iter_pages_in_ranges(
    path: str | os.PathLike, ranges: list[tuple[int, int]], opener: Opener = open_local,
    max_page_chars: int | None = DEFAULT_MAX_CHARS, prefetch: bool = True,
) -> Iterator[Iterator[Page]]:
    """The pages of each byte range in turn, as `iter_pages_in_range` gives them: one iterator
    per range, whose pages are read before the next range's iterator is asked for (what is left
    of it is skipped then). With `prefetch`, one helper thread decodes the ranges back to back:
    one per range waited at each range's end for the parser to catch up, and the parser at each
    start for the first chunk (README, Performance)."""
    name = os.fspath(path)
    chunks = _ranges_xml(name, ranges, opener, prefetch)
    chunks = prefetched(chunks) if prefetch else chunks
    # Closed before the file is, so the prefetch thread never reads a closed file.
    with contextlib.closing(chunks):
        for start, end in ranges:
            range_chunks = _until_range_end(chunks)
            pages = _range_pages(range_chunks, name, start, end, max_page_chars)
            try:
                yield pages
            finally:
                pages.close()
            for _ in range_chunks:  # the rest of a range whose pages were not all read
                pass


def _ranges_xml(name: str, ranges: list[tuple[int, int]], opener: Opener, prefetch: bool) -> Iterator[bytes | object]:
    """Each range's XML chunks, then RANGE_END, range after range."""
    with opened(name, opener) as f, compiled_decoder_scratch():
        if not prefetch:
            yield from compiled_ranges_chunks(f, name, ranges, _HINT, _check_stream_start)
            return
        for start, end in ranges:
            _check_stream_start(f, start, name)
            f.seek(start)
            yield from bz2_chunks(f, name, start, end, _HINT)
            yield RANGE_END


def _until_range_end(chunks: Iterator[bytes | object]) -> Iterator[bytes]:
    for chunk in chunks:
        if chunk is RANGE_END:
            return
        yield chunk


def _range_pages(chunks: Iterator[bytes], name: str, start: int, end: int,
                 max_page_chars: int | None) -> Iterator[Page]:
    where = f" of the XML in bytes [{start}, {end})"
    first = b""
    for chunk in chunks:
        first += chunk
        if len(first) >= 64:
            break
    parser = DumpParser(name, where, max_page_chars)
    if not first.lstrip().startswith((b"<mediawiki", b"<?xml")):
        parser.feed(EXPORT_ROOT.encode())
    parser.feed(first)
    yield from parser.drain()
    for chunk in chunks:
        parser.feed(chunk)
        yield from parser.drain()
    parser.settle()
    yield from parser.drain()
    if not parser.root_closed:
        if parser.stack != ["mediawiki"]:
            raise BertdataError(f"{name}: byte range [{start}, {end}) ends inside <{parser.stack[-1]}>{_HINT}")
        parser.feed(b"</mediawiki>")
    parser.feed(b"", final=True)
    yield from parser.drain()


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
