"""A dump file's bytes -> its XML bytes, a chunk at a time: plain `.xml`, single-stream `.bz2`,
or a byte range of a multistream `.bz2`.

Files are opened through an `opener(path) -> binary file object` so a Beam pipeline can
pass its own. With Beam's `FileSystems.open`, pass
`compression_type=CompressionTypes.UNCOMPRESSED`: its default decompresses `.bz2` by
extension, which would hide the compressed byte offsets the ranges are made of.
"""

from __future__ import annotations

import bz2
import contextlib
import queue
import sys
import threading
from collections.abc import Callable, Iterator
from typing import BinaryIO

from bertdata.errors import BertdataError
from bertdata.fsutil import input_errors
from bertdata.text import _bunzip

Opener = Callable[[str], BinaryIO]

_READ_SIZE = 1 << 18

# Caps the XML produced per decompress call, so a highly compressible stream cannot balloon memory.
OUT_SIZE = 1 << 20

BZ2_MAGIC = b"BZh"

# UTF-16 XML starts with a byte order mark or, without one, with "<" and a zero byte;
# expat reads the encoding from either (and from the XML declaration) by itself.
_UTF16_STARTS = (b"\xff\xfe", b"\xfe\xff", b"<\x00", b"\x00<")


def open_local(path: str) -> BinaryIO:
    return open(path, "rb")


@contextlib.contextmanager
def opened(path: str, opener: Opener, what: str = "dump file") -> Iterator[BinaryIO]:
    with input_errors(path, what):
        f = opener(path)
    with f:
        yield f


def bz2_chunks(f: BinaryIO, name: str, start: int, end: int | None, hint: str = "") -> Iterator[bytes]:
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
            return decomp.decompress(chunk, OUT_SIZE)
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


@contextlib.contextmanager
def compiled_decoder_scratch() -> Iterator[None]:
    """Inside, the compiled decoder keeps its scratch (~22 MB) from one range to the next: mapped
    afresh for each range, its first touch cost ~7% of a two-worker build of the 64x dump, whose
    ranges are ~1 MB. Unmapped on the way out, so later stages do not carry it."""
    try:
        yield
    finally:
        _bunzip.release()


# The marker that ends each range's chunks in compiled_ranges_chunks.
RANGE_END = object()

# Compressed bytes the compiled decoder is handed past where it stands: a few groups of its 4
# blocks (~250 KB each in a text dump), so each call reads a whole group across the ends of
# ranges smaller than that. When a call walked one chain per block, ranges of one 4-block stream
# decoded one at a time took 1.33x the CPU time of ranges of two (README, Performance).
LOOKAHEAD = 4 << 20


def compiled_ranges_chunks(f: BinaryIO, name: str, ranges: list[tuple[int, int]], hint: str,
                           check_start: Callable[[BinaryIO, int, str], None]) -> Iterator[bytes | memoryview | object]:
    """Each range's XML chunks, then RANGE_END, range after range: the bz2 streams in bytes
    [start, end) of the dump `f`, decoded with bertdata's own decoder (`_bunzip`), which walks
    several blocks' inverse BWTs at once, for about 0.65x libbz2's CPU time (README,
    Performance). Ranges that follow one another in the file are read ahead (LOOKAHEAD) and
    decoded as one run, the output cut where each range's last stream ends; `check_start(f,
    offset, name)` checks each range that starts a run.

    libbz2 stays the reference. The compiled decoder checks every block's CRC and every
    stream's before it hands their bytes over, and stops at any damage (bytes that start no
    stream included), as at a range whose end is not a stream's; libbz2 then decodes that
    range again, names the damage as it would have alone, and passes on only what the
    compiled decoder had not."""
    window, base, loaded = b"", 0, 0  # the compressed bytes [base, base + len(window)), ranges[:loaded] read
    bit = level = crc = 0
    current, produced = 0, 0  # the range being decoded, and its bytes handed over so far

    def pieces(out: bytes, at: int, to: int) -> Iterator[memoryview]:
        # At most OUT_SIZE each, as the other decoders give, for the prefetch queue's bound; views, not copies.
        view = memoryview(out)
        for k in range(at, to, OUT_SIZE):
            yield view[k:min(k + OUT_SIZE, to)]

    while current < len(ranges):
        start, end = ranges[current]
        if current == loaded:
            check_start(f, start, name)
            f.seek(start)
            window, base, loaded = f.read(end - start), start, current + 1
            bit = level = crc = 0
        ahead = base + len(window)
        while (loaded < len(ranges) and ranges[loaded][0] == ahead < ranges[loaded][1]
               and ahead - (base + bit // 8) < LOOKAHEAD):
            try:
                check_start(f, ahead, name)
            except BertdataError:
                break  # named once the range is reached, after the pages before it
            f.seek(ahead)
            more = f.read(ranges[loaded][1] - ahead)
            cut = bit // 8  # what the decoder is done with
            window, base, bit, loaded = window[cut:] + more, base + cut, bit - 8 * cut, loaded + 1
            ahead = base + len(window)
        try:
            out, bit, level, crc, ends = _bunzip.decode(window, bit, level, crc)
            at = 0
            for byte, offset in ends:
                if base + byte < end:
                    continue
                if base + byte > end:
                    raise ValueError("the range ends inside a stream")
                yield from pieces(out, at, offset)
                yield RANGE_END
                at, current, produced = offset, current + 1, 0
                if current == loaded:
                    break
                start, end = ranges[current]
            if current < loaded and base * 8 + bit > end * 8:
                raise ValueError("the range ends inside a stream")
            if at < len(out):
                yield from pieces(out, at, len(out))
                produced += len(out) - at
            elif not ends and not level and bit == len(window) * 8:  # nothing left: only an empty range ends so
                if start < end:
                    raise ValueError("the range ends inside a stream")
                yield RANGE_END
                current += 1
        except ValueError:
            f.seek(start)
            for chunk in bz2_chunks(f, name, start, end, hint):
                kept = chunk[produced:]
                produced = max(0, produced - len(chunk))
                if kept:
                    yield kept
            yield RANGE_END
            current, produced = current + 1, 0
            loaded = current  # the next range starts a run of its own


_PREFETCH_CHUNKS = 8

_DONE = object()

# While a helper thread decodes, the GIL's switch interval is cut from Python's 5 ms: libbz2
# lets go of the GIL for each block of output, and each time waited to take it back from the
# busy parser for up to the whole interval, which kept the decoder idle and the parser
# waiting on it (README, Performance).
SWITCH_INTERVAL_S = 0.0001


class _ShortSwitchInterval:
    """A context in which the switch interval is SWITCH_INTERVAL_S while any thread is inside
    it; the interval from before the first entry comes back after the last exit."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._users = 0
        self._saved = 0.0

    def __enter__(self) -> None:
        with self._lock:
            if not self._users:
                self._saved = sys.getswitchinterval()
                sys.setswitchinterval(min(SWITCH_INTERVAL_S, self._saved))
            self._users += 1

    def __exit__(self, *exc) -> None:
        with self._lock:
            self._users -= 1
            if not self._users:
                sys.setswitchinterval(self._saved)


_short_switch_interval = _ShortSwitchInterval()


def prefetched(chunks: Iterator[bytes]) -> Iterator[bytes]:
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

    with _short_switch_interval:
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


def raw_chunks(f: BinaryIO) -> Iterator[bytes]:
    """An uncompressed file's bytes, in reads of the size the decoders read."""
    while chunk := f.read(_READ_SIZE):
        yield chunk


def xml_chunks(f: BinaryIO, name: str) -> Iterator[bytes]:
    """The XML of a whole dump file, decompressing it if it is bz2 (decided by magic bytes)."""
    head = f.read(4)
    if not head:
        raise BertdataError(f"{name}: empty file, not a MediaWiki dump")
    f.seek(0)
    if head.startswith(BZ2_MAGIC):
        return prefetched(bz2_chunks(f, name, 0, None))
    if head.startswith(b"\x1f\x8b"):
        raise BertdataError(f"{name}: gzip-compressed dumps are not supported; use the .bz2 or plain .xml dump")
    if not head.startswith(_UTF16_STARTS) and not head.lstrip(b"\xef\xbb\xbf \t\r\n").startswith(b"<") \
            and head.strip():
        raise BertdataError(f"{name}: neither XML nor bz2 (starts with bytes {head!r})")
    return raw_chunks(f)
