"""Fuzzing the compiled bzip2 decoder against libbz2 (Python's `bz2`): where ours gives bytes they
are libbz2's, and what libbz2 refuses ours refuses (ValueError). Ours may also refuse a damaged
stream that libbz2 reads (an over-subscribed code in a table no selector picks, say): its caller
then lets libbz2 decode the range (text/decode.py), so only a stream as an encoder wrote it must
be decoded by both. Streams are real (the sample dump's),
synthetic (libbz2's own of generated text and runs) and mutated; and crafted: a bzip2 writer here
builds each block from its fields, which the fuzzer sets where no encoder would (origPtr, the
symbol map, the table count, selectors, code lengths, runs of RUNA/RUNB), with true CRCs, so the
decoder's checks, not the CRC, have to catch them."""

from __future__ import annotations

import bz2
import heapq
import random
from functools import cache

from hypothesis import strategies as st

from fuzzing import fuzz
from text_inputs import decode_all, runs
from bertdata.text.multistream import stream_ranges
from bertdata.text.wikidump import sample_paths

# --- the oracle -------------------------------------------------------------------------------------


def _libbz2(data: bytes) -> bytes | None:
    """libbz2's bytes of streams back to back, None if it refuses one. Unlike `bz2.decompress`,
    which ignores what follows the last stream if that is no stream, bytes there are damage, as
    they are to ours and in a dump."""
    out = []
    try:
        while data:
            stream = bz2.BZ2Decompressor()
            out.append(stream.decompress(data))
            if not stream.eof:
                return None
            data = stream.unused_data
    except OSError:
        return None
    return b"".join(out)


def check_stream(data: bytes, may_refuse: bool) -> None:
    """Ours gives libbz2's bytes, or refuses (ValueError) what libbz2 refuses; `may_refuse`: a
    damaged or crafted stream, which ours may refuse though libbz2 reads it."""
    theirs = _libbz2(data)
    try:
        ours = decode_all(data)
    except ValueError as err:
        assert str(err).startswith("bz2 data: "), err
        assert theirs is None or may_refuse, f"libbz2 decodes it, ours refused: {err}"
        return
    assert theirs is not None, "libbz2 refuses it, ours decoded it"
    assert ours == theirs


# --- real, synthetic and mutated streams ------------------------------------------------------------


@cache
def _sample_streams() -> list[bytes]:
    dump, index, _ = sample_paths()
    raw = dump.read_bytes()
    return [raw[start:end] for start, end in stream_ranges(dump, index)]


def _mutate(data: bytes, edits: list[tuple[int, float, int]]) -> bytes:
    """Bit flips, byte changes, insertions, deletions and a cut, at fractions of the length."""
    out = bytearray(data)
    for kind, where, value in edits:
        at = min(int(where * len(out)), max(len(out) - 1, 0))
        if not out:
            out += bytes([value & 0xFF])
        elif kind == 0:
            out[at] ^= 1 << (value % 8)
        elif kind == 1:
            out[at] = value & 0xFF
        elif kind == 2:
            out[at:at] = bytes([value & 0xFF]) * (1 + value % 5)
        elif kind == 3:
            del out[at:at + 1 + value % 16]
        else:
            del out[at:]
    return bytes(out)


EDITS = st.lists(st.tuples(st.integers(0, 4), st.floats(0, 1), st.integers(0, 255)), max_size=4)


def check_mutated(case: list) -> None:
    """case: (stream, edits); the stream itself, then mutated."""
    data, edits = case
    check_stream(data, may_refuse=False)
    check_stream(_mutate(data, [tuple(e) for e in edits]), may_refuse=True)


def test_real_streams_mutated_against_libbz2():
    real = st.builds(lambda k, a, b: b"".join(_sample_streams()[k % len(_sample_streams()):][:1 + a % 2]),
                     st.integers(0, 1000), st.integers(0, 10), st.integers(0, 10))
    fuzz("bunzip-real", st.tuples(real, EDITS), check_mutated, examples=15)


def _synthetic(seed: int, size: int, kind: int, level: int) -> bytes:
    rng = random.Random(seed)
    data = [runs(rng, size), rng.randbytes(size), bytes(rng.choices(b"ab", k=size)), b"x" * size][kind]
    return bz2.compress(data, level)


def test_synthetic_streams_mutated_against_libbz2():
    synthetic = st.builds(_synthetic, st.integers(0, 2**32), st.integers(0, 30_000), st.integers(0, 3),
                          st.integers(1, 9))
    fuzz("bunzip-synthetic", st.tuples(synthetic, EDITS), check_mutated, examples=40)


# --- crafted blocks -----------------------------------------------------------------------------------


def _crc(data: bytes) -> int:
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte << 24
        for _ in range(8):
            crc = ((crc << 1) ^ 0x04C11DB7 if crc & 0x80000000 else crc << 1) & 0xFFFFFFFF
    return crc ^ 0xFFFFFFFF


class _Bits:
    def __init__(self) -> None:
        self.value, self.count = 0, 0

    def put(self, value: int, n: int) -> None:
        self.value = self.value << n | (value & ((1 << n) - 1))
        self.count += n

    def bytes(self) -> bytes:
        pad = -self.count % 8
        return (self.value << pad).to_bytes((self.count + pad) // 8, "big")


def _rle1(data: bytes) -> bytes:
    out, i = bytearray(), 0
    while i < len(data):
        j = i
        while j < len(data) and j - i < 255 and data[j] == data[i]:
            j += 1
        out += data[i:i + min(j - i, 4)]
        if j - i >= 4:
            out.append(j - i - 4)
        i = j
    return bytes(out)


def _huffman_lengths(freqs: list[int]) -> list[int]:
    heap = [(f + 1, [s]) for s, f in enumerate(freqs)]
    heapq.heapify(heap)
    lengths = [0] * len(freqs)
    while len(heap) > 1:
        fa, a = heapq.heappop(heap)
        fb, b = heapq.heappop(heap)
        for s in a + b:
            lengths[s] += 1
        heapq.heappush(heap, (fa + fb, a + b))
    if max(lengths) > 17:
        lengths = [max(1, (len(freqs) - 1).bit_length())] * len(freqs)
    return lengths


def _codes(lengths: list[int]) -> list[int]:
    """libbz2's canonical codes (BZ2_hbAssignCodes) for any lengths, sensible or not."""
    codes, vec = [0] * len(lengths), 0
    for n in range(min(lengths), max(lengths) + 1):
        for s, length in enumerate(lengths):
            if length == n:
                codes[s] = vec
                vec += 1
        vec <<= 1
    return codes


def crafted_block(data: bytes, f: dict) -> tuple[bytes, int]:
    """One block of `data` as bzip2 writes it, each field replaced where `f` says; its bits and
    the data's block CRC (true to `data`, whatever the fields)."""
    block = _rle1(data)
    n = len(block)
    order = sorted(range(n), key=lambda i: block[i:] + block[:i])
    last = bytes(block[i - 1] for i in order)
    orig_ptr = order.index(0)
    used = sorted(set(block))
    mtf, symbols, zeros = list(used), [], 0

    def flush() -> None:
        nonlocal zeros
        if zeros:
            zeros -= 1
            while True:
                symbols.append(zeros & 1)
                if zeros < 2:
                    break
                zeros = (zeros - 2) // 2
            zeros = 0

    for c in last:
        j = mtf.index(c)
        if j == 0:
            zeros += 1
            continue
        flush()
        symbols.append(j + 1)
        mtf.insert(0, mtf.pop(j))
    flush()
    if f.get("runs"):  # RUNA/RUNB digits spliced in: runs past the block, weights past 2**21
        at, digits = f["runs"]
        symbols[at % (len(symbols) + 1):at % (len(symbols) + 1)] = digits
    in_use = set(used) if f.get("in_use") is None else set(f["in_use"])
    alpha = len(in_use) + 2
    symbols = [s for s in symbols if s < alpha - 1] + [alpha - 1]  # EOB of the alphabet written
    groups = f.get("groups") or 2
    freqs = [0] * alpha
    for s in symbols:
        freqs[s] += 1
    lengths = [_huffman_lengths(freqs) for _ in range(max(groups, 1))]
    for g, s, length in f.get("lengths", []):
        lengths[g % len(lengths)][s % alpha] = length
    selectors = [k % max(groups, 1) for k in range(-(-len(symbols) // 50))]
    for at, value in f.get("selectors", []):
        if selectors:
            selectors[at % len(selectors)] = value
    selectors += [0] * f.get("extra_selectors", 0)

    bits = _Bits()
    bits.put(0x314159265359, 48)
    bits.put(0, 32)  # the CRC, filled in by the stream
    bits.put(f.get("randomised", 0), 1)
    bits.put(orig_ptr if f.get("orig_ptr") is None else f["orig_ptr"], 24)
    ranges = [r for r in range(16) if any(r * 16 + k in in_use for k in range(16))]
    bits.put(sum(0x8000 >> r for r in ranges), 16)
    for r in ranges:
        bits.put(sum(0x8000 >> k for k in range(16) if r * 16 + k in in_use), 16)
    bits.put(groups, 3)
    bits.put(len(selectors), 15)
    pos = list(range(8))
    for v in selectors:  # move-to-front, then unary
        j = pos.index(v) if v in pos else v
        bits.put((1 << (j + 1)) - 2, j + 1)
        if v in pos:
            pos.insert(0, pos.pop(j))
    for table in lengths[:groups]:
        curr = table[0] if 1 <= table[0] <= 20 else 5
        bits.put(curr, 5)
        for length in table:
            for _ in range(64):  # a length outside 1..20 is walked to as far as the field goes
                if curr == length or not 0 <= curr <= 31:
                    break
                bits.put(0b10 if curr < length else 0b11, 2)
                curr += 1 if curr < length else -1
            bits.put(0, 1)
    codes = [_codes(table) for table in lengths]
    for k, s in enumerate(symbols):
        table = selectors[k // 50] % len(codes) if k // 50 < len(selectors) else 0
        bits.put(codes[table][s], lengths[table][s])
    return bits, _crc(data)


def crafted_stream(blocks: list[tuple[bytes, dict]], level: int) -> bytes:
    out, combined = _Bits(), 0
    out.put(0x425A6830 + level, 32)
    for data, fields in blocks:
        bits, crc = crafted_block(data, fields)
        crc = fields.get("crc", crc)
        combined = ((combined << 1 | combined >> 31) & 0xFFFFFFFF) ^ crc
        at = bits.count - 48 - 32  # the CRC's place in the block
        bits.value |= crc << at
        out.put(bits.value, bits.count)
    out.put(0x177245385090, 48)
    out.put(combined, 32)
    return out.bytes()


def check_crafted(case: list) -> None:
    """case: (level, [(data, fields), ...])."""
    level, blocks = case
    check_stream(crafted_stream([(bytes(d), f) for d, f in blocks], level), may_refuse=any(f for _, f in blocks))


def test_the_writer_writes_what_libbz2_reads():
    rng = random.Random(0)
    for data in (b"a", b"banana", b"x" * 1000, runs(rng, 3000), rng.randbytes(500), bytes(range(256)) * 3):
        stream = crafted_stream([(data, {}), (data[::-1], {})], 9)
        assert bz2.decompress(stream) == data + data[::-1]
        assert decode_all(stream) == data + data[::-1]


SYMBOL = st.integers(0, 259)
FIELDS = st.fixed_dictionaries({}, optional={
    "orig_ptr": st.one_of(st.integers(0, 2**24 - 1), st.integers(0, 40)),
    "randomised": st.integers(0, 1),
    "in_use": st.lists(st.integers(0, 255), max_size=20),
    "groups": st.integers(0, 7),
    "selectors": st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 7)), max_size=4),
    "extra_selectors": st.one_of(st.integers(0, 60), st.just(18_010)),
    "lengths": st.lists(st.tuples(st.integers(0, 6), SYMBOL, st.integers(0, 22)), max_size=4),
    "runs": st.tuples(st.integers(0, 10**6), st.lists(st.integers(0, 1), min_size=1, max_size=25)),
    "crc": st.integers(0, 2**32 - 1),
})
BLOCK_DATA = st.one_of(st.binary(min_size=1, max_size=300),
                       st.builds(lambda s, n: runs(random.Random(s), n), st.integers(0, 2**32), st.integers(1, 2000)),
                       st.builds(lambda b, n: bytes([b]) * n, st.integers(0, 255), st.integers(1, 3000)))


def test_crafted_block_headers_against_libbz2():
    blocks = st.lists(st.tuples(BLOCK_DATA, FIELDS), min_size=1, max_size=2)
    fuzz("bunzip-crafted", st.tuples(st.integers(1, 9), blocks), check_crafted, examples=60)
