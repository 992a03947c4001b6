"""Hostile arguments to the compiled modules, called directly as no caller of ours calls them:
each is a Python exception or a correct result, never a read or write out of bounds (issue 46's
defects 1-6, each with the argument that found it). `make test-sanitize` runs these under
AddressSanitizer and UndefinedBehaviorSanitizer, where a stray access aborts the run."""

from __future__ import annotations

import os
import random
from pathlib import Path

import numpy as np
import pytest

from bertdata.formats import _chunks, _zrle
from bertdata.instances import _engine, _rows, _wordpiece, kernel
from bertdata.text import _bunzip, _markup, _pages, _prose, _scan, _spans, _tags
from bertdata.text.wikidump import EXPORT_ROOT
from kernel_calls import assemble_arrays, generate_kwargs
from page_inputs import read_pages

MODULES = (_chunks, _zrle, _engine, _rows, _wordpiece, _bunzip, _markup, _pages, _prose, _scan, _spans, _tags)


@pytest.mark.skipif(not os.environ.get("BERTDATA_SANITIZED"), reason="only under make test-sanitize")
def test_the_sanitized_build_is_the_one_under_test():
    """Under `make test-sanitize` every module is the instrumented copy and both runtimes are loaded:
    a run against the plain build would pass without checking anything."""
    for module in MODULES:
        assert "build/sanitize" in Path(module.__file__).as_posix(), module.__file__
    maps = Path("/proc/self/maps").read_text()
    assert "libasan" in maps and "libubsan" in maps


# --- 1. _rows: the span check's sum wrapped -----------------------------------------------------------

@pytest.mark.parametrize("fill", [_rows.fill_segment_ids, _rows.fill_input_mask])
@pytest.mark.parametrize("dtype", [np.int32, np.int8])
def test_span_lengths_that_would_wrap_their_sum_are_refused(fill, dtype):
    out = np.zeros((1, 8), dtype)
    for span in ([0, 2**63 - 2, 0, 1000], [0, 1000, 0, 2**63 - 2], [0, 2**62, 0, 2**62], [0, 6, 0, 0]):
        with pytest.raises(ValueError, match="span does not fit"):
            fill(out, np.array([0]), np.array([span], np.int64))
    assert not out.any()
    fill(out, np.array([0]), np.array([[0, 2, 0, 3]], np.int64))  # 2 + 3 + 3 = 8: the whole row
    assert out.sum() == (8 if fill is _rows.fill_input_mask else 4)


# --- 2. _wordpiece.assemble: a whole line's negative word count -----------------------------------

def test_a_whole_lines_negative_word_count_is_refused():
    arrays = assemble_arrays([0, 2, 2])
    arrays.update(line_words=np.array([-5, 1], np.int32), whole_line=np.array([1, 0], np.bool_),
                  lengths=np.zeros(2, np.int32))
    with pytest.raises(ValueError, match="points outside"):
        _wordpiece.assemble(np.zeros(1, np.int32), **arrays)
    arrays["line_words"] = np.array([2, 1], np.int32)  # past word_entry's one entry
    with pytest.raises(ValueError, match="points outside"):
        _wordpiece.assemble(np.zeros(1, np.int32), **arrays)


# --- 3. _engine.generate: the scratch size's product wrapped ----------------------------------------

def test_a_huge_prediction_count_with_no_rows_allocates_no_wrapped_scratch():
    kwargs = generate_kwargs(rows=0)
    p = 2**61 + 1
    kwargs.update(max_predictions_per_seq=p, positions=np.zeros((0, p), np.int8),
                  labels=np.zeros((0, p), np.int8), shown=np.zeros((0, p), np.int8))
    count = _engine.generate(**kwargs)
    assert count == _engine.generate(**generate_kwargs(rows=0))  # the same instances, none written


def test_generates_scratch_is_sized_by_the_row_not_the_prediction_columns():
    """More prediction columns than tokens in a row: at most max_seq_length are ever masked."""
    kwargs = generate_kwargs(rows=100)
    p = kwargs["max_seq_length"] * 4
    kwargs.update(max_predictions_per_seq=p, **{name: np.zeros((100, p), np.int64)
                                                for name in ("positions", "labels", "shown")})
    kwargs["num_to_predict"] = np.full(kwargs["max_seq_length"] + 1, p, np.int64)
    count = _engine.generate(**kwargs)
    assert 0 < count <= 100
    assert (kwargs["positions"][:count] > 0).sum(axis=1).max() < kwargs["max_seq_length"]


# --- 4 and 5. _pages: an empty first field; a long field a later one replaces -----------------------

def _dump(*pages: str) -> bytes:
    return (EXPORT_ROOT + "\n" + "".join(pages) + "</mediawiki>\n").encode()


def _page(title: str = "<title>T</title>", extra: str = "", before: str = "") -> str:
    return (f"<page>\n{before}{title}\n<ns>0</ns>\n<id>1</id>\n{extra}"
            "<revision><id>2</id><text>hello</text></revision>\n</page>\n")


def test_an_empty_field_first_in_a_scan_is_read():
    pages, stop, hand_over = _pages.scan(_page("<title></title>", "<title>T</title>\n").encode(), 0, False)
    assert [p[0] for p in pages] == ["T"] and not hand_over
    pages, _, _ = _pages.scan(b"<page><title></title><ns/><id>1</id></page>\n", 0, True)
    assert pages[0][:3] == ("", "", "1")


@pytest.mark.parametrize("first", ["<title>" + "t" * 5000 + "</title>", "<title>" + "\u00e9" * 4097 + "</title>",
                                   "<revision><timestamp>" + "9" * 4097 + "</timestamp></revision>"])
def test_a_long_field_a_later_one_replaces_is_refused_as_expat_refuses_it(first):
    data = _dump(_page(before=first + "\n"))
    rng = random.Random(0)
    splits = [[], [len(data) // 2], sorted(rng.sample(range(1, len(data)), 20)), list(range(1, len(data), 97))]
    results = {repr(read_pages(data, cuts, fast, None)) for cuts in splits for fast in (True, False)}
    assert len(results) == 1, results  # the same error at the same line and column, however split
    assert "longer than 4,096 characters at line 3" in results.pop()


def test_the_field_limit_is_in_characters_and_leaves_text_and_redirects_alone():
    at_limit = _page("<title>" + "\u00e9" * 4096 + "</title>", "<redirect title='" + "r" * 5000 + "'/>\n")
    pages, _, hand_over = _pages.scan(at_limit.encode(), 0, True, max_field_chars=4096)
    assert len(pages) == 1 and len(pages[0][0]) == 4096 and len(pages[0][3]) == 5000
    pages, stop, hand_over = _pages.scan(at_limit.encode(), 0, False, max_field_chars=4095)
    assert (pages, stop, hand_over) == ([], 0, True)
    with pytest.raises(ValueError, match="max_field_chars"):
        _pages.scan(b"", 0, True, max_field_chars=-1)


# --- 6. _zrle: 32-bit symbol counts ---------------------------------------------------------------

def test_zlib_rle_refuses_a_call_whose_counts_could_wrap():
    # np.zeros maps untouched pages lazily: 2 GiB costs no memory, and is refused before a read.
    with pytest.raises(ValueError, match="more than 2\\*\\*31 - 1 in one call"):
        _zrle.zlib_rle(np.zeros(1 << 31, np.uint8))


# --- the rest of every module's entry points --------------------------------------------------------

def test_chunk_sizes_near_the_index_limit_are_refused():
    values = np.arange(6, dtype=np.int32).reshape(3, 2)
    for rows, cols in ((2**63 - 1, 1), (1, 2**63 - 1), (2**62, 2**62), (0, 1), (1, -1)):
        with pytest.raises(ValueError):
            _chunks.shuffle_chunks(np.zeros(64, np.uint8), values, rows, cols)


def test_bunzip_refuses_positions_past_the_data_and_odd_states():
    with pytest.raises((ValueError, OverflowError)):
        _bunzip.decode(b"BZh9", -1, 0, 0)
    with pytest.raises(ValueError):
        _bunzip.decode(b"BZh9", 33, 0, 0)
    for level in (-1, 10, 2**31 - 1):
        with pytest.raises(ValueError):
            _bunzip.decode(b"BZh9", 0, level, 0)
    # Mid-stream from any bit of random bytes: damage, never a read past them.
    rng = random.Random(5)
    for _ in range(200):
        data = rng.randbytes(rng.randrange(0, 64))
        try:
            _bunzip.decode(data, rng.randrange(0, len(data) * 8 + 1), rng.randrange(1, 10), rng.randrange(2**32))
        except ValueError as err:
            assert str(err).startswith("bz2 data: ")


def test_engine_state_and_shuffle_refuse_what_is_not_a_state():
    state = kernel._state(random.Random(0))
    for bad in (state[:-1].copy(), np.zeros(625, np.int32), np.full(625, -1, np.int64)):
        with pytest.raises((ValueError, TypeError, OverflowError)):
            _engine.shuffle(bad, np.arange(4, dtype=np.int64))
    bad = state.copy()
    bad[-1] = 10**6  # the index into the key past its 624 words
    with pytest.raises(ValueError):
        _engine.replay(bad, np.zeros(3, np.int64))


def test_template_name_limits_outside_the_text_are_refused_or_clamped():
    def render(name, start, end, children):
        return name

    text = "a {{lang-fr|mot}} b"
    spans = _markup.template_spans(text, frozenset(), "lang-", 256, 8, render)
    assert _markup.template_spans(text, frozenset(), "lang-", 2**63 - 1, 8, render) == spans
    with pytest.raises(ValueError, match="max_name"):
        _markup.template_spans(text, frozenset(), "lang-", -1, 8, render)


def test_punkt_refuses_ortho_flags_that_are_no_flags():
    class Dropping(int):
        """Its value empties the dict it is read from, as it is read."""

        def __index__(self):
            ortho.clear()
            return 2

    from bertdata.text.fastpunkt import _FLAGS

    def sentences(text):
        return _scan.punkt_sentences(text, {"mr"}, set(), set(), ortho, lambda context: False, _FLAGS)

    words = ("i", "saw", "mr", "smith", "he", "left")
    ortho = dict.fromkeys(words, -1)
    with pytest.raises(ValueError, match="negative flags"):
        sentences("I saw Mr. Smith. He left.")
    ortho = {word: Dropping(2) for word in words}
    sentences("I saw Mr. Smith. He left.")  # no read of what the dict dropped
    with pytest.raises(TypeError):
        ortho = dict.fromkeys(words, "flags")
        sentences("I saw Mr. Smith. He left.")


def test_splice_refuses_spans_outside_the_text():
    for span in ((-1, 2, None), (2, 1, None), (0, 4, None), (0, 1, 5), (0, 2**63 - 1, None)):
        with pytest.raises((ValueError, TypeError)):
            _spans.splice("abc", [span])
    assert _spans.splice("abc", [(1, 1, "x" * 1000)] * 50) == "a" + "x" * 50_000 + "bc"


def test_arrays_that_are_one_another_are_copied_between_safely():
    """A caller may pass one array as two arguments: the copies between them are memmove's."""
    arrays = assemble_arrays([1, 6])
    arrays["whole_ids"] = arrays["out"] = np.arange(8, dtype=np.uint16)
    assert _wordpiece.assemble(np.zeros(0, np.int32), **arrays) == 5
    assert arrays["out"].tolist() == [1, 2, 3, 4, 5, 5, 6, 7]
    buf = np.frombuffer(b"ab cd\nab" + bytes(56), np.uint8).copy()
    table = {"slots": np.full(8, -1, np.int32), "hashes": np.zeros(4, np.uint64), "key_offsets": np.zeros(4, np.int32),
             "key_lengths": np.zeros(4, np.int32), "keys": buf, "meta": np.zeros(3, np.int64)}
    table["meta"][1] = 1  # the keys start at buf[1]: each piece is copied onto the bytes it is read from
    assert _wordpiece.scan(buf[:8], **table, word_entry=np.zeros(8, np.int32), line_words=np.zeros(2, np.int32),
                           whole_line=np.zeros(2, np.bool_)) == 3
