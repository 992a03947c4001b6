"""Fuzzing the hdf5 writer's compiled code: its deflate (`_zrle`) read back by zlib and libdeflate,
and its chunk layout (`_chunks`) against numpy's pad and byte transpose, on shapes and chunk sizes
of every kind, edges and hostile sizes included."""

from __future__ import annotations

import zlib

import deflate
import numpy as np
import pytest
from hypothesis import strategies as st

from fuzzing import fuzz
from shards import numpy_shuffled_chunks
from bertdata.formats._chunks import shuffle_chunks
from bertdata.formats._zrle import zlib_rle


def check_deflate(data: bytes) -> None:
    stream = zlib_rle(data)
    assert zlib.decompress(stream) == data
    assert deflate.zlib_decompress(stream, len(data)) == data
    assert zlib_rle(data) == stream  # the same bytes every time: no state left from a call


RUNS = st.lists(st.tuples(st.integers(0, 255), st.integers(1, 700)), max_size=60).map(
    lambda runs: b"".join(bytes([b]) * n for b, n in runs))
FEW_VALUES = st.builds(lambda seed, n, k: np.random.default_rng(seed).integers(0, k, n).astype(np.uint8).tobytes(),
                       st.integers(0, 2**32), st.integers(0, 70_000), st.integers(1, 256))
# Counts like Fibonacci numbers make the optimal code deeper than deflate's 15 bits.
DEEP = st.builds(lambda seed, k: np.random.default_rng(seed).permutation(
    np.repeat(np.arange(k, dtype=np.uint8), [int(1.618 ** i) + 1 for i in range(k)])).tobytes(),
    st.integers(0, 2**32), st.integers(2, 26))


def test_deflate_round_trips_through_zlib_and_libdeflate():
    fuzz("deflate", st.one_of(st.binary(max_size=2000), RUNS, FEW_VALUES, DEEP), check_deflate, examples=60)


DTYPES = ["i1", "u1", "i2", "u2", "i4", "u4", "i8", "u8"]


def check_chunks(case: list) -> None:
    """case: (dtype, n, m, chunk rows, chunk cols, seed, one_d): the layout equals numpy's; an out
    of any other size is refused."""
    dtype, n, m, rows, cols, seed, one_d = case
    values = np.random.default_rng(seed).integers(0, 256, (n, m * np.dtype(dtype).itemsize), np.uint8)
    values = values.view(dtype)
    if one_d:
        values, cols = values[:, 0].copy(), 1
    expected = numpy_shuffled_chunks(values, rows, cols)
    out = np.full(len(expected), 0xAB, np.uint8)
    shuffle_chunks(out, values, rows, cols)
    assert np.array_equal(out, expected)
    for size in (len(expected) - 1, len(expected) + 1, 0):
        if size >= 0 and size != len(expected):
            with pytest.raises(ValueError, match="out must hold"):
                shuffle_chunks(np.zeros(size, np.uint8), values, rows, cols)


def test_chunk_layout_against_numpy():
    case = st.tuples(st.sampled_from(DTYPES), st.integers(1, 40), st.integers(1, 20), st.integers(1, 45),
                     st.integers(1, 25), st.integers(0, 2**32), st.booleans())
    fuzz("chunks", case, check_chunks, examples=60)


def check_chunk_sizes(case: list) -> None:
    """case: (n, m, chunk rows, chunk cols, out size): sizes anywhere in int64 are taken exactly
    where they make a layout that int64 can index, and are a ValueError otherwise."""
    n, m, rows, cols, size = case
    chunk = rows * cols * 4
    fits = rows >= 1 and cols >= 1 and chunk < 2**63 and size == -(-n // rows) * -(-m // cols) * chunk
    try:
        shuffle_chunks(np.zeros(size, np.uint8), np.zeros((n, m), np.int32), rows, cols)
    except ValueError:
        assert not fits
    else:
        assert fits


def test_hostile_chunk_sizes_are_refused():
    big = st.one_of(st.integers(-2, 64), st.integers(2**31 - 2, 2**31 + 2), st.integers(2**62, 2**63 - 1))
    fuzz("chunk-sizes", st.tuples(st.integers(0, 5), st.integers(1, 5), big, big, st.integers(0, 256)),
         check_chunk_sizes, examples=80)
