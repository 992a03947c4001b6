"""The compiled bzip2 decoder (`_bunzip.decode`) against libbz2 (Python's `bz2`)."""

from __future__ import annotations

import bz2
import random

import pytest

from bertdata.text import _bunzip
from bertdata.text.multistream import stream_ranges
from bertdata.text.wikidump import sample_paths
from text_inputs import decode_all, runs


CASES = {
    "empty": b"",
    "one byte": b"a",
    "four equal bytes last": b"xyzzzz",
    "all byte values": bytes(range(256)) * 7,
    "zeros": bytes(1_500_000),
    "text": b"".join(b"the %d quick brown foxes jumped over %d lazy dogs\n" % (i, i * 7) for i in range(60_000)),
    "noise": random.Random(1).randbytes(700_000),
    # Move-to-front indices on both sides of the 16 that the compiled move handles at once.
    "twenty values": bytes(random.Random(3).choices(range(65, 85), k=400_000)),
    "runs": runs(random.Random(2), 2_000_000),
}


@pytest.mark.parametrize("level", [1, 5, 9])
@pytest.mark.parametrize("case", list(CASES))
def test_it_decodes_what_libbz2_decodes(case, level):
    data = CASES[case]
    assert decode_all(bz2.compress(data, level)) == data


def test_streams_back_to_back_with_empty_ones_between_decode_as_one():
    parts = [CASES["text"][:300_000], b"", CASES["runs"][:50_000], b"", b"", CASES["noise"][:120_000]]
    streams = [bz2.compress(p, level) for p, level in zip(parts, [1, 9, 2, 3, 4, 1])]
    data = b"".join(streams)
    assert decode_all(data) == b"".join(parts)
    # Where each stream ends, in the data and in the output, as a caller cutting ranges sees it.
    bit = level = crc = made = 0
    seen = []
    while bit < len(data) * 8:
        out, bit, level, crc, ends = _bunzip.decode(data, bit, level, crc)
        seen += [(byte, made + offset) for byte, offset in ends]
        made += len(out)
    assert seen == [(sum(map(len, streams[:k + 1])), sum(map(len, parts[:k + 1]))) for k in range(len(parts))]


def test_the_sample_dump_range_by_range():
    dump, index, _ = sample_paths()
    raw = dump.read_bytes()
    ranges = stream_ranges(dump, index)
    for start, end in ranges:
        assert decode_all(raw[start:end]) == bz2.decompress(raw[start:end]), (start, end)
    whole = raw[ranges[0][0]:]
    assert decode_all(whole) == bz2.decompress(whole)


@pytest.mark.slow  # 200 MB decoded: ~10 s
def test_a_call_returns_a_bounded_amount_of_a_stream_that_expands_fifty_fold():
    data = bz2.compress(b"a" * (200 << 20) + b"end", 9)  # a few hundred bytes
    sizes: list[int] = []
    assert decode_all(data, sizes) == b"a" * (200 << 20) + b"end"
    assert len(sizes) > 1 and max(sizes) <= 48 << 20  # one block's worth at most (259 / 5 of 900k)


@pytest.mark.parametrize("damage", ["truncated", "trailing bytes", "not bz2", "flipped bits"])
def test_damage_is_a_value_error_never_wrong_bytes(damage):
    original = CASES["text"][:400_000]
    good = bz2.compress(original, 1)
    rng = random.Random(damage)
    for _ in range(60):
        data = bytearray(good)
        if damage == "truncated":
            data = data[:rng.randrange(1, len(data))]
        elif damage == "trailing bytes":
            data += rng.randbytes(rng.randrange(1, 9))
        elif damage == "not bz2":
            data = bytearray(rng.randbytes(rng.randrange(4, 200)))
        else:
            for _ in range(rng.randrange(1, 4)):
                data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
        try:
            out = decode_all(bytes(data))
        except ValueError as err:
            assert str(err).startswith("bz2 data: ")
        else:  # what CRCs let through must be the data itself
            assert out == original


def test_bad_arguments_are_refused():
    data = bz2.compress(b"abc")
    with pytest.raises(ValueError):
        _bunzip.decode(data, 3, 0, 0)  # between streams, but not at a byte boundary
    with pytest.raises(ValueError):
        _bunzip.decode(data, len(data) * 8 + 8, 0, 0)
    with pytest.raises(ValueError):
        _bunzip.decode(data, 0, 10, 0)
    with pytest.raises(TypeError):
        _bunzip.decode("text", 0, 0, 0)


def test_release_unmaps_the_scratch_between_calls_and_decoding_goes_on():
    data = bz2.compress(CASES["text"], 1)  # blocks of 100k: several calls
    bit = level = crc = 0
    parts = []
    while True:
        out, bit, level, crc, _ = _bunzip.decode(data, bit, level, crc)
        _bunzip.release()
        _bunzip.release()  # nothing kept: nothing to do
        if not out and not level and bit == len(data) * 8:
            break
        parts.append(out)
    assert len(parts) > 1 and b"".join(parts) == CASES["text"]
