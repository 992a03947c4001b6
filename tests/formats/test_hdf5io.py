"""hdf5io: the reference layout, read back by plain h5py; atomic, deterministic writes."""

from __future__ import annotations

import hashlib
import subprocess
import sys
import zlib

import deflate
import h5py
import numpy as np
import pytest

from bertdata.formats.hdf5io import (DTYPES, FIELDS, WRITE_ORDER, ShardWriter, chunk_rows, read_shard, shard_attrs,
                             write_shard)
from bertdata.formats._chunks import shuffle_chunks
from bertdata.formats._zrle import zlib_rle
from conftest import ROOT
from shards import STORED, filters, numpy_shuffled_chunks, reference_rows


@pytest.mark.parametrize("n", [0, 1, 7, 773, 1546, 5000])
def test_round_trip_through_plain_h5py(tmp_path, n):
    arrays = reference_rows(n)
    path = tmp_path / "s.hdf5"
    write_shard(path, arrays, {"random_seed": 5, "lower_case": True, "masked_lm_prob": 0.15})
    with h5py.File(path, "r") as f:
        for name in FIELDS:
            assert f[name].dtype == DTYPES[name]
            assert np.array_equal(f[name][...], arrays[name])
            if n:
                assert filters(f[name]) == STORED
    assert shard_attrs(path) == {"random_seed": 5, "lower_case": True, "masked_lm_prob": 0.15}


def test_unaligned_slices_match_whole_writes(tmp_path):
    arrays = reference_rows(3000)
    with ShardWriter(tmp_path / "sliced.hdf5", 3000, 128, 20) as writer:
        for name in FIELDS:
            for start in range(0, 3000, 999):  # deliberately not on chunk boundaries
                writer.write(name, start, arrays[name][start:start + 999])
    back = read_shard(tmp_path / "sliced.hdf5")
    assert all(np.array_equal(back[k], arrays[k]) for k in FIELDS)


def test_chunk_aligned_slices_give_the_bytes_of_one_write(tmp_path):
    arrays = reference_rows(5000)
    write_shard(tmp_path / "whole.hdf5", arrays)
    with ShardWriter(tmp_path / "rows.hdf5", 5000, 128, 20) as writer:
        rows = chunk_rows(writer)
        # write_shard's order: the two largest datasets first, then the rest.
        order = ["input_ids", "masked_lm_positions"] + [f for f in FIELDS if f not in ("input_ids", "masked_lm_positions")]
        for name in order:
            step = rows[name] * 2
            for start in range(0, 5000, step):
                writer.write(name, start, arrays[name][start:start + step])
    digest = [hashlib.sha256((tmp_path / f).read_bytes()).hexdigest() for f in ("whole.hdf5", "rows.hdf5")]
    assert digest[0] == digest[1]


def test_a_function_source_is_asked_for_each_array_once_in_write_order(tmp_path):
    arrays = reference_rows(2000)
    asked = []

    def get(name):
        asked.append(name)
        return arrays[name].astype(np.int64)  # any integer dtype: cast on the way in

    write_shard(tmp_path / "called.hdf5", get)
    write_shard(tmp_path / "mapping.hdf5", arrays)
    assert asked == list(WRITE_ORDER) and sorted(WRITE_ORDER) == sorted(FIELDS)
    assert (tmp_path / "called.hdf5").read_bytes() == (tmp_path / "mapping.hdf5").read_bytes()


def test_failed_write_leaves_nothing(tmp_path):
    arrays = reference_rows(10)
    arrays["input_mask"] = arrays["input_mask"][:5]
    with pytest.raises(ValueError):
        write_shard(tmp_path / "s.hdf5", arrays)
    assert list(tmp_path.iterdir()) == []


def test_chunks_compressed_off_thread_are_stored_in_write_order(tmp_path, monkeypatch):
    # Aligned writes go to the compressing thread, unaligned ones through HDF5's own filter: the
    # file must be the one written when each write's chunks were stored before it returned.
    from bertdata.formats import hdf5io

    arrays = reference_rows(5000)
    # ... and so must a writer without a helper thread, which compresses in line.
    for copy, ahead, helper in (("a.hdf5", hdf5io.COMPRESS_AHEAD, True), ("b.hdf5", 0, True),
                                ("c.hdf5", hdf5io.COMPRESS_AHEAD, False)):
        monkeypatch.setattr(hdf5io, "COMPRESS_AHEAD", ahead)
        with ShardWriter(tmp_path / copy, 5000, 128, 20, helper_thread=helper) as writer:
            rows = chunk_rows(writer)
            for name in WRITE_ORDER:
                aligned = rows[name] * 3
                writer.write(name, 0, arrays[name][:aligned])
                writer.write(name, aligned, arrays[name][aligned:aligned + 7])
                writer.write(name, aligned + 7, arrays[name][aligned + 7:])
    assert (tmp_path / "a.hdf5").read_bytes() == (tmp_path / "b.hdf5").read_bytes() == (tmp_path / "c.hdf5").read_bytes()
    back = read_shard(tmp_path / "a.hdf5")
    assert all(np.array_equal(back[k], arrays[k]) for k in FIELDS)


def test_a_compression_error_leaves_nothing(tmp_path, monkeypatch):
    from bertdata.formats import hdf5io

    calls = []

    def failing(chunk):
        calls.append(1)
        if len(calls) == 40:
            raise MemoryError("no room to compress")
        return hdf5io.zlib_rle(chunk)

    monkeypatch.setattr(hdf5io, "_compress", failing)
    with pytest.raises(MemoryError, match="no room"):
        write_shard(tmp_path / "s.hdf5", reference_rows(5000))
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("dtype", ["i1", "i2", "i4", "i8", "u2"])
def test_compiled_chunk_layout_equals_the_byte_transpose(dtype):
    rng = np.random.default_rng(7)
    for _ in range(60):
        n, m = int(rng.integers(1, 40)), int(rng.integers(1, 30))
        rows, cols = int(rng.integers(1, n + 3)), int(rng.integers(1, m + 3))
        values = rng.integers(-100, 30000, (n, m)).astype(dtype)
        for data, c in ((values, cols), (values[:, 0].copy(), 1)):
            expected = numpy_shuffled_chunks(data, rows, c)
            out = np.full(len(expected), 0xAB, np.uint8)  # every byte must be written, padding too
            shuffle_chunks(out, data, rows, c)
            assert np.array_equal(out, expected), (dtype, n, m, rows, c)


def test_compiled_chunk_layout_refuses_bad_arguments():
    values = np.arange(12, dtype="i4").reshape(3, 4)
    with pytest.raises(ValueError, match="out must hold 4 chunks of 2 x 2 elements of 4 bytes"):
        shuffle_chunks(np.zeros(10, np.uint8), values, 2, 2)
    with pytest.raises(ValueError, match="at least 1"):
        shuffle_chunks(np.zeros(64, np.uint8), values, 0, 2)
    with pytest.raises(ValueError, match="chunk_cols 1"):
        shuffle_chunks(np.zeros(64, np.uint8), values[:, 0].copy(), 2, 2)
    with pytest.raises(TypeError, match="out must be uint8"):
        shuffle_chunks(np.zeros(16, np.int32), values, 2, 2)
    with pytest.raises(TypeError, match="values must be a C-contiguous"):
        shuffle_chunks(np.zeros(64, np.uint8), values[:, ::2], 2, 2)
    with pytest.raises(TypeError, match="out must be a C-contiguous, writable"):
        shuffle_chunks(np.zeros(64, np.uint8)[::2], values, 2, 2)


# --- the compiled deflate ---------------------------------------------------------------------------

def byte_strings() -> list[bytes]:
    """Edge cases, then random strings of few or many byte values, with runs or without, one with
    counts deep enough (Fibonacci) to need more than deflate's 15-bit codes."""
    rng = np.random.default_rng(7)
    fixed = [b"", b"a", b"ab", b"aaa", b"aaaa", b"aaaaa", bytes(100_000), b"\xff" * 100_000, b"\xff" * 5553,
             bytes(range(256)) * 300, rng.bytes(70_000), rng.bytes(200_000)]
    made = []
    for _ in range(600):
        n = int(rng.choice([1, 2, 3, 7, 100, 1000, 20_000]))
        values = rng.integers(0, int(rng.choice([1, 2, 3, 50, 256])), n)
        lengths = rng.integers(1, 600 if rng.random() < 0.5 else 2, n)
        made.append(np.repeat(values, lengths)[:n].astype(np.uint8).tobytes())
    fib = [1, 1]
    while len(fib) < 24:
        fib.append(fib[-1] + fib[-2])
    deep = np.repeat(np.arange(24, dtype=np.uint8), fib)
    return fixed + made + [rng.permutation(deep).tobytes()]


def test_zlib_rle_is_read_back_by_zlib_and_libdeflate():
    for data in byte_strings():
        stream = zlib_rle(data)
        assert zlib.decompress(stream) == data, len(data)
        assert deflate.zlib_decompress(stream, len(data)) == data, len(data)


def test_zlib_rle_sends_runs_as_matches_and_random_bytes_stored():
    assert len(zlib_rle(bytes(1_000_000))) < 4_000 + 20  # 258 bytes a match, a few bits each
    noise = np.random.default_rng(0).bytes(100_000)
    assert len(zlib_rle(noise)) <= len(noise) + 5 * 2 + 6  # two stored blocks, header and checksum


def test_zlib_rle_writes_the_same_bytes_in_another_process():
    data = reference_rows(2000)["input_ids"]
    digest = hashlib.sha256(b"".join(zlib_rle(data[i:i + 100]) for i in range(0, 2000, 100))).hexdigest()
    code = ("import hashlib, numpy as np, sys; sys.path.insert(0, 'tests'); from shards import reference_rows; "
            "from bertdata.formats._zrle import zlib_rle; d = reference_rows(2000)['input_ids']; "
            "print(hashlib.sha256(b''.join(zlib_rle(d[i:i + 100]) for i in range(0, 2000, 100))).hexdigest())")
    other = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True,
                           cwd=ROOT)
    assert other.stdout.strip() == digest


def test_zlib_rle_refuses_what_is_not_a_contiguous_buffer():
    with pytest.raises(TypeError):
        zlib_rle("text")
    with pytest.raises(ValueError, match="contiguous"):
        zlib_rle(np.zeros((4, 4), "i4")[:, :2])
