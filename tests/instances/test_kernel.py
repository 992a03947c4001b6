"""The compiled kernel's interface: the keyword calls, the checks that turn malformed arrays into
clean exceptions (never a crash, a hang or a silently wrapped value), the replay self-check
against `random`, and the stub. Its output against the reference is tested in test_instances."""

from __future__ import annotations

import ast
import inspect
import platform
import random
from pathlib import Path

import numpy as np
import pytest

from kernel_calls import (CLS, MASK, PRED, SEP, SEQ, assemble_arrays, empty_table, fill_arrays, generate_kwargs,
                          small_documents, small_params)
from bertdata.instances import _engine, _rows, _wordpiece
from bertdata.formats import _chunks, _zrle
from bertdata.text import _bunzip, _markup, _prose, _scan, _tags

from bertdata.instances import kernel


def test_a_valid_call_writes_rows_and_advances_the_state():
    kwargs = generate_kwargs()
    start = kwargs["state"].copy()
    count = _engine.generate(**kwargs)
    assert 0 < count <= 100
    assert not np.array_equal(kwargs["state"], start)
    assert kwargs["spans"][:count, 1].min() > 0 and not kwargs["spans"][count:].any()


def test_generate_takes_all_but_the_state_by_keyword():
    kwargs = generate_kwargs()
    state, tokens = kwargs.pop("state"), kwargs.pop("tokens")
    with pytest.raises(TypeError, match="positional"):
        _engine.generate(state, tokens, **kwargs)


def _read_only(a):
    a = a.copy()
    a.flags.writeable = False
    return a


def _big_word(state):
    state = state.copy()
    state[7] = 1 << 32
    return state


def _index(state):
    state = state.copy()
    state[624] = 625
    return state


BROKEN = {
    # element types, ranks, layout
    "float tokens": ("tokens", lambda a: a.astype(np.float32), TypeError, "tokens must be an integer array"),
    "uint64 tokens": ("tokens", lambda a: a.astype(np.uint64), TypeError, "tokens must be an integer array"),
    "list tokens": ("tokens", lambda a: a.tolist(), TypeError, "tokens must be a C-contiguous"),
    "2-d tokens": ("tokens", lambda a: a[:len(a) // 2 * 2].reshape(2, -1), ValueError, "tokens must have 1 dimension"),
    "strided tokens": ("tokens", lambda a: np.repeat(a, 2)[::2], TypeError, "tokens must be a C-contiguous"),
    "read-only spans": ("spans", _read_only, TypeError, "spans must be a C-contiguous, writable"),
    "spans [N, 3]": ("spans", lambda a: a[:, :3].copy(), ValueError, "spans \\[N, 4\\]"),
    "1-d positions": ("positions", lambda a: a.ravel().copy(), ValueError, "positions must have 2 dimensions"),
    "positions [N, P + 1]": ("positions", lambda a: np.zeros((len(a), PRED + 1), a.dtype), ValueError,
                             "max_predictions_per_seq"),
    "random_next of other rows": ("random_next", lambda a: a[:-1].copy(), ValueError, "random_next \\[N\\]"),
    # the generator's state
    "int32 state": ("state", lambda a: a.astype(np.int32), TypeError, "state must be int64"),
    "624-word state": ("state", lambda a: a[:624].copy(), ValueError, "625 words"),
    "state word of 33 bits": ("state", _big_word, OverflowError, "word 7 .* is not a 32-bit word"),
    "state index 625": ("state", _index, ValueError, "index 625"),
    # offsets that would read out of bounds
    "sentence offsets past the tokens": ("sentence_offsets", lambda a: a + np.arange(len(a)), ValueError,
                                         "run past the tokens"),
    "decreasing sentence offsets": ("sentence_offsets", lambda a: np.concatenate((a[:2], a[1:2] - 1, a[3:])),
                                    ValueError, "must not decrease"),
    "sentence offsets from 1": ("sentence_offsets", lambda a: np.concatenate(([1], a[1:])), ValueError,
                                "must start at 0"),
    "doc offsets past the sentences": ("doc_offsets", lambda a: a + np.arange(len(a)), ValueError,
                                       "run past the sentences"),
    "an empty document": ("doc_offsets", lambda a: np.concatenate((a[:1], a[:1], a[1:])), ValueError,
                          "every document needs a sentence"),
    "short num_to_predict": ("num_to_predict", lambda a: a[:SEQ].copy(), ValueError, "max_seq_length \\+ 1"),
    "num_to_predict over P": ("num_to_predict", lambda a: a + PRED, ValueError, "exceeds max_predictions_per_seq"),
    "no vocab words": ("vocab_words", lambda a: a[:0].copy(), ValueError, "vocab_words must not be empty"),
    "word_continues short of the ids": ("word_continues", lambda a: a[:200].copy(), ValueError,
                                        "id \\d+ has no entry in word_continues"),
    "int8 word_continues": ("word_continues", lambda a: a.astype(np.int8), TypeError, "word_continues must be bool"),
    # parameters the replay cannot draw from
    "max_seq_length 4": ("max_seq_length", lambda v: 4, ValueError, "max_seq_length must be in 5..2\\*\\*31-1"),
    "max_seq_length 2**31": ("max_seq_length", lambda v: 1 << 31, ValueError, "max_seq_length must be in"),
    "cls_id of 70 bits": ("cls_id", lambda v: 1 << 70, OverflowError, "too big"),
    # values that do not fit the array they go to
    "int8 labels": ("labels", lambda a: a.astype(np.int8), OverflowError, "labels: \\d+ does not fit its int8"),
    "int8 spans": ("spans", lambda a: a.astype(np.int8), OverflowError, "spans: \\d+ does not fit its int8"),
    "uint8 shown": ("shown", lambda a: a.astype(np.uint8), OverflowError, "shown: \\d+ does not fit its uint8"),
}


@pytest.mark.parametrize("case", BROKEN)
def test_generate_refuses_malformed_input_cleanly(case):
    name, breaks, error, message = BROKEN[case]
    kwargs = generate_kwargs(rows=1000)
    if case in ("int8 spans",):  # spans reach past 127 only with more tokens
        docs = small_documents(num_docs=60)
        kwargs.update(tokens=docs.tokens, sentence_offsets=docs.sentence_offsets, doc_offsets=docs.doc_offsets)
    if case == "uint8 shown":  # [MASK] is shown in most predictions
        kwargs["mask_id"] = 300
    start = kwargs["state"].copy()
    kwargs[name] = breaks(kwargs[name])
    with pytest.raises(error, match=message):
        _engine.generate(**kwargs)
    if name != "state":
        assert np.array_equal(kwargs["state"], start), "a failed run must not advance the state"


def test_the_capacity_guess_costs_only_a_rerun():
    docs, params = small_documents(3, num_docs=20), small_params()
    roomy = kernel.generate(5, docs, params, 10_000)
    tight = kernel.generate(5, docs, params, 1)
    count = len(roomy.order)
    assert count > 20 and len(tight.spans) == count
    assert np.array_equal(roomy.order, tight.order)
    for name in ("spans", "random_next", "positions", "labels", "shown"):
        assert np.array_equal(getattr(roomy, name)[:count], getattr(tight, name)), name


# --- the other entry points ---------------------------------------------------------------------------

def test_shuffle_and_replay_refuse_malformed_input():
    state = kernel._state(random.Random(2))
    with pytest.raises(ValueError, match="625 words"):
        _engine.shuffle(state[:-1].copy(), np.arange(5))
    with pytest.raises(TypeError, match="x must be int64"):
        _engine.shuffle(state, np.arange(5, dtype=np.int32))
    with pytest.raises(TypeError, match="x must be a C-contiguous"):
        _engine.shuffle(state, np.arange(10)[::2])
    for bound in (-1, 1 << 32):
        with pytest.raises(ValueError, match="not in 0..2\\*\\*32-1"):
            _engine.replay(state, np.array([0, bound]))
    assert np.array_equal(state, kernel._state(random.Random(2)))


def test_fill_input_ids_writes_a_row_and_refuses_what_does_not_fit():
    tokens, spans, positions, shown = fill_arrays()
    out = np.zeros((1, 8), np.int32)
    _rows.fill_input_ids(out, np.array([0]), tokens, spans, positions, shown, CLS, SEP)
    assert out.tolist() == [[CLS, MASK, 600, SEP, 40000, 800, 900, SEP]]
    # uint16 tokens into int32 rows take an unchecked copy loop: the same row.
    fast = np.zeros((1, 8), np.int32)
    _rows.fill_input_ids(fast, np.array([0]), tokens.astype(np.uint16), spans, positions, shown, CLS, SEP)
    assert fast.tolist() == out.tolist()
    with pytest.raises(OverflowError, match="out: 500 does not fit its int8"):
        _rows.fill_input_ids(np.zeros((1, 8), np.int8), np.array([0]), tokens, spans, positions, shown, 1, 2)
    with pytest.raises(OverflowError, match="out: 40000 does not fit its int16"):
        _rows.fill_input_ids(np.zeros((1, 8), np.int16), np.array([0]), tokens, spans, positions, shown, 1, 2)
    with pytest.raises(OverflowError, match="out: 4294967296 does not fit its int32"):
        _rows.fill_input_ids(np.zeros((0, 8), np.int32), np.array([], np.int64), tokens, spans, positions,
                             shown, 1 << 32, SEP)
    with pytest.raises(IndexError, match="rows: 1 is out of range"):
        _rows.fill_input_ids(out, np.array([1]), tokens, spans, positions, shown, CLS, SEP)
    with pytest.raises(ValueError, match="span does not fit"):
        _rows.fill_input_ids(out, np.array([0]), tokens[:4].copy(), spans, positions, shown, CLS, SEP)
    with pytest.raises(ValueError, match="masked position is outside the row"):
        _rows.fill_input_ids(out, np.array([0]), tokens, spans, positions + 8, shown, CLS, SEP)
    with pytest.raises(ValueError, match="out must have 2 dimensions"):
        _rows.fill_input_mask(np.zeros(8, np.int8), np.array([0]), spans)
    mask = np.zeros((1, 8), np.bool_)
    _rows.fill_segment_ids(mask, np.array([0]), spans)
    assert mask.tolist() == [[False] * 4 + [True] * 4]
    # One-byte rows are set by memset, wider ones element by element: the same ones.
    for dtype in (np.int8, np.uint8, np.int16, np.int64):
        ones = np.zeros((1, 9), dtype)
        _rows.fill_input_mask(ones, np.array([0]), spans)
        assert ones.tolist() == [[1] * 8 + [0]]
        ones[:] = 0
        _rows.fill_segment_ids(ones, np.array([0]), spans)
        assert ones.tolist() == [[0] * 4 + [1] * 4 + [0]]


# --- the piece table ---------------------------------------------------------------------------------


def scan(text: bytes, table: dict) -> int:
    lines = text.count(b"\n") + 1
    return _wordpiece.scan(np.frombuffer(text, np.uint8), **table, word_entry=np.zeros(len(text), np.int32),
                      line_words=np.zeros(lines, np.int32), whole_line=np.zeros(lines, np.bool_))


def test_scan_finds_pieces_and_refuses_a_table_that_does_not_add_up():
    table = empty_table()
    assert scan(b"ab cd\nab", table) == 3 and table["meta"][:2].tolist() == [2, 4]
    bad = empty_table()
    bad["meta"][0] = 5  # more entries than the arrays hold
    with pytest.raises(ValueError, match="meta \\(5 entries, 0 key bytes\\) disagrees"):
        scan(b"ab", bad)
    bad = empty_table()
    bad["slots"][:] = 3  # slots naming entries the table does not have
    with pytest.raises(ValueError, match="slots point outside"):
        scan(b"ab", bad)
    bad = empty_table()
    bad["slots"][:] = 0  # no free slot: the probe must not go round for ever
    bad["meta"][0] = 1
    bad["hashes"][0] = 1
    with pytest.raises(ValueError, match="slots point outside"):
        scan(b"ab", bad)
    bad = empty_table()
    bad["key_offsets"] = np.zeros(4, np.int64)
    with pytest.raises(TypeError, match="key_offsets must be int32"):
        scan(b"ab", bad)


def test_scan_refuses_key_bytes_past_its_int32_offsets():
    # np.zeros maps untouched pages lazily: a 2 GiB key array costs a page or two of memory.
    table = empty_table(key_bytes=(1 << 31) + 64)
    table["meta"][1] = (1 << 31) - 2
    with pytest.raises(OverflowError, match="key bytes would pass 2\\*\\*31 - 1"):
        scan(b"abc", table)
    assert table["meta"][0] == 0, "nothing was added"


def test_rehash_refuses_counts_past_int32_and_full_slots():
    with pytest.raises(OverflowError, match="do not fit the int32 slots"):
        _wordpiece.rehash(np.full(8, -1, np.int32), np.zeros(4, np.uint64), 1 << 31)
    with pytest.raises(ValueError, match="power of two"):
        _wordpiece.rehash(np.full(6, -1, np.int32), np.zeros(4, np.uint64), 2)
    with pytest.raises(ValueError, match="no free slot"):
        _wordpiece.rehash(np.zeros(4, np.int32), np.zeros(4, np.uint64), 1)
    slots = np.full(4, -1, np.int32)
    _wordpiece.rehash(slots, np.array([1, 1], np.uint64), 2)
    assert slots.tolist() == [-1, 0, 1, -1]


def test_assemble_refuses_lines_past_int32_and_entries_outside_the_table():
    arrays = assemble_arrays([0, 3])
    assert _wordpiece.assemble(np.zeros(0, np.int32), **arrays) == 3 and arrays["lengths"].tolist() == [3]
    with pytest.raises(OverflowError, match="more ids than its int32 length"):
        _wordpiece.assemble(np.zeros(0, np.int32), **assemble_arrays([0, 1 << 31]))
    with pytest.raises(ValueError, match="points outside"):
        _wordpiece.assemble(np.zeros(0, np.int32), **assemble_arrays([0, 5]))
    arrays = assemble_arrays([0, 0])
    arrays.update(whole_line=np.zeros(1, np.bool_), line_words=np.ones(1, np.int32))
    with pytest.raises(ValueError, match="points outside"):
        _wordpiece.assemble(np.array([7], np.int32), **arrays)
    arrays["out"] = np.zeros(4, np.int32)
    with pytest.raises(TypeError, match="out must be uint16"):
        _wordpiece.assemble(np.array([0], np.int32), **arrays)


# --- the replay self-check ----------------------------------------------------------------------------

@pytest.mark.parametrize("advance", [0, 1, 700])
def test_the_replay_matches_random(advance):
    rng = random.Random(advance)
    for _ in range(advance):  # 700 draws run past the 624 words: a twist mid-check
        rng.random()
    kernel.verify_replay(rng)


class DriftedRandom(random.Random):
    def random(self):
        return super().random() / 2


class DriftedRandbelow(random.Random):
    def _randbelow(self, n):
        return self._randbelow_without_getrandbits(n)


class DriftedShuffle(random.Random):
    def shuffle(self, x):
        super().shuffle(x)
        x.reverse()


class OtherStateFormat(random.Random):
    def getstate(self):
        version, internal, gauss = super().getstate()
        return 4, internal, gauss


@pytest.mark.parametrize(("rng_class", "what"), [(DriftedRandom, "random\\(\\) or randint\\(\\)"),
                                                 (DriftedRandbelow, "random\\(\\) or randint\\(\\)"),
                                                 (DriftedShuffle, "shuffle\\(\\)"),
                                                 (OtherStateFormat, "version 4")])
def test_the_self_check_catches_a_drifted_random(rng_class, what):
    with pytest.raises(kernel.ReplayMismatch, match=what) as caught:
        kernel.verify_replay(rng_class(3))
    assert platform.python_version() in str(caught.value)


@pytest.fixture
def fresh_self_check():
    kernel._check_replay_once.cache_clear()
    yield
    kernel._check_replay_once.cache_clear()


def test_generate_checks_the_replay_once_before_its_first_run(fresh_self_check, monkeypatch):
    checked = []
    verify = kernel.verify_replay
    monkeypatch.setattr(kernel, "verify_replay", lambda rng: checked.append(verify(rng)))
    docs, params = small_documents(), small_params()
    kernel.generate(1, docs, params, 100)
    kernel.generate(2, docs, params, 100)
    assert len(checked) == 1


def test_generate_refuses_to_run_on_a_drifted_random(fresh_self_check, monkeypatch):
    monkeypatch.setattr(random, "Random", DriftedRandom)
    with pytest.raises(kernel.ReplayMismatch, match="no longer matches"):
        kernel.generate(1, small_documents(), small_params(), 100)


# --- the stub -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("module", [_engine, _rows, _wordpiece, _scan, _markup, _tags, _prose, _chunks, _zrle, _bunzip], ids=lambda m: m.__name__)
def test_the_stub_lists_every_function_with_its_signature(module):
    stub = ast.parse(Path(module.__file__).with_name(module.__name__.rsplit(".", 1)[1] + ".pyi").read_text())
    stubbed = {node.name: node for node in stub.body if isinstance(node, ast.FunctionDef)}
    compiled = {name for name, f in vars(module).items() if callable(f) and not name.startswith("_")}
    assert set(stubbed) == compiled
    for name, node in stubbed.items():
        args = node.args
        expected = ([(a.arg, "POSITIONAL_OR_KEYWORD") for a in args.args]
                    + [(a.arg, "KEYWORD_ONLY") for a in args.kwonlyargs])
        actual = [(p.name, p.kind.name) for p in inspect.signature(getattr(module, name)).parameters.values()]
        assert actual == expected, name
