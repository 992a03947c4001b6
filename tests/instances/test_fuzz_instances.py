"""Hostile arrays into the instance stage's compiled entry points (_engine, _rows, _wordpiece):
a valid call with some of its arguments swapped for arrays of another type, shape, layout or
values, or for extreme integers. Each call returns or raises a Python exception; under
`make test-sanitize` and `make fuzz` any read or write out of bounds aborts the run. The piece
table's line stripping is also checked against the Python it replaced."""

from __future__ import annotations

import contextlib
import operator
import random

import numpy as np
from hypothesis import strategies as st

from fuzzing import fuzz
from kernel_calls import WHITE_SPACE, assemble_arrays, empty_table, fill_arrays, generate_kwargs, python_lines
from bertdata.instances import _engine, _rows, _wordpiece, kernel

REFUSALS = (TypeError, ValueError, OverflowError, IndexError, MemoryError)


def _calls() -> dict:
    """Each entry point with the arguments of a valid call, made afresh (they are written to)."""
    tokens, spans, positions, shown = fill_arrays()
    table = empty_table()
    text = np.frombuffer(b"ab cd\nab\n\tx", np.uint8).copy()
    state = kernel._state(random.Random(3))
    return {
        "generate": (_engine.generate, generate_kwargs(rows=20)),
        "shuffle": (_engine.shuffle, {"state": state, "x": np.arange(9, dtype=np.int64)}),
        "replay": (_engine.replay, {"state": state.copy(), "bounds": np.array([0, 1, 7, 2**32 - 1])}),
        "fill_input_ids": (_rows.fill_input_ids, {"out": np.zeros((1, 8), np.int32), "rows": np.array([0]),
                                                  "tokens": tokens, "spans": spans, "positions": positions,
                                                  "shown": shown, "cls_id": 101, "sep_id": 102}),
        "fill_input_mask": (_rows.fill_input_mask, {"out": np.zeros((1, 8), np.int8), "rows": np.array([0]),
                                                    "spans": spans}),
        "fill_segment_ids": (_rows.fill_segment_ids, {"out": np.zeros((1, 8), np.int8), "rows": np.array([0]),
                                                      "spans": spans}),
        "rehash": (_wordpiece.rehash, {"slots": np.full(8, -1, np.int32), "hashes": np.arange(4, dtype=np.uint64),
                                       "count": 3}),
        "count_pieces": (_wordpiece.count_pieces, {"buf": text}),
        "count_ids": (_wordpiece.count_ids, {"word_entry": np.array([0, 1, 0], np.int32), "words": 3,
                                             "value_lengths": np.array([2, 1], np.int32)}),
        "scan": (_wordpiece.scan, {"buf": text, **table, "word_entry": np.zeros(len(text), np.int32),
                                   "line_words": np.zeros(4, np.int32), "whole_line": np.zeros(4, np.bool_)}),
        "assemble": (_wordpiece.assemble, {"word_entry": np.zeros(2, np.int32), **assemble_arrays([0, 3])}),
    }


CALLS = sorted(_calls())
DTYPES = ["?", "i1", "u1", "i2", "u2", "i4", "u4", "i8", "u8", "f4"]
EXTREMES = [0, 1, -1, 2, 7, 8, 2**31 - 1, 2**31, -(2**31), 2**32, 2**61 + 1, 2**63 - 1, -(2**63), 2**64]


def _array(spec: list) -> np.ndarray:
    dtype, shape, fill, layout, seed = spec
    info = np.iinfo(dtype) if dtype not in ("?", "f4") else None
    rng = np.random.default_rng(seed)
    size = int(np.prod(shape)) if shape else 1
    if fill == "random" and info is not None:
        values = rng.integers(info.min, info.max, size, dtype=dtype, endpoint=True)
    elif fill == "small":
        values = rng.integers(-3, 10, size).astype(dtype)
    elif fill in ("min", "max") and info is not None:
        values = np.full(size, getattr(info, fill), dtype)
    else:
        values = np.full(size, {"zeros": 0, "ones": 1, "minus": -1}.get(fill, 0)).astype(dtype)
    try:
        a = values.reshape(shape) if size else np.zeros(shape, dtype)
    except ValueError:  # numpy's own limit: a dimension past 2**63 bytes, even beside a 0
        a = np.zeros(0, dtype)
    if layout == "strided" and a.ndim and a.shape[-1] > 1:
        a = a[..., ::2]
    elif layout == "readonly":
        a.flags.writeable = False
    return a


SHAPES = st.one_of(st.lists(st.integers(0, 9), max_size=3).map(tuple),
                   st.sampled_from([(0, 2**61 + 1), (2**40, 0), (0,), (625,), (1, 8), (1, 4), (3, 4)]))
ARRAYS = st.tuples(st.sampled_from(DTYPES), SHAPES,
                   st.sampled_from(["zeros", "ones", "minus", "min", "max", "random", "small"]),
                   st.sampled_from(["c", "c", "strided", "readonly"]), st.integers(0, 2**32)).map(list)
SWAPS = st.lists(st.tuples(st.integers(0, 30), st.one_of(ARRAYS, st.sampled_from(EXTREMES), st.integers(),
                                                         st.just("alias")), st.floats(0, 1)), min_size=1, max_size=3)


def check_hostile_call(case: list) -> None:
    """case: (entry point, [(argument index, array spec, integer or "alias", where), ...]): the
    valid call with those arguments swapped (an integer argument given an array, or the other way
    round), an element of an array argument set to the integer, or an argument made the very array
    another one is (the one `where` picks); a result or a Python exception."""
    name, swaps = case
    fn, kwargs = _calls()[name]
    names = sorted(kwargs)
    for index, value, where in swaps:
        arg = names[index % len(names)]
        current = kwargs[arg]
        if value == "alias":
            kwargs[arg] = kwargs[names[int(where * len(names)) % len(names)]]
            continue
        if isinstance(value, int) and isinstance(current, np.ndarray) and current.size and where < 0.7:
            if not current.flags.writeable:
                continue
            flat = current.reshape(-1)
            info = np.iinfo(flat.dtype) if flat.dtype.kind in "iu" else None
            if info is not None and info.min <= value <= info.max:
                flat[int(where / 0.7 * flat.size) % flat.size] = value
            continue
        kwargs[arg] = _array(value) if isinstance(value, list) else value
    with contextlib.suppress(TypeError):  # any integer, a 0-d array's too
        if operator.index(kwargs.get("dupe_factor")) > 3:
            kwargs["dupe_factor"] = 3  # a valid request for years of work is not what this looks for
    try:
        fn(**kwargs)
    except REFUSALS:
        pass


def test_hostile_arrays_into_the_instance_engine():
    fuzz("instances", st.tuples(st.sampled_from(CALLS), SWAPS), check_hostile_call, examples=150)


def check_text_lines(data: bytes) -> None:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        assert _wordpiece.text_lines(data) is None
        return
    assert _wordpiece.text_lines(data) == python_lines(text)


def test_text_lines_strip_as_python_does():
    text = st.text(st.one_of(st.characters(), st.sampled_from(["\n", " ", "\t"] + WHITE_SPACE)), max_size=40)
    data = st.one_of(text.map(lambda t: t.encode("utf-8", "surrogatepass")), st.binary(max_size=40))
    fuzz("text-lines", data, check_text_lines, examples=100)
