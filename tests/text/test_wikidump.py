"""Dump reading: formats, multistream byte ranges, errors, and the bundled sample."""

from __future__ import annotations

import bz2
import io
import re
import subprocess
import sys
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from bertdata.text import decode, multistream, wikidump
from bertdata.errors import BertdataError
from bertdata.text.wikidump import Page, classify, iter_pages
from bertdata.text.multistream import iter_pages_in_range, iter_pages_in_ranges, plan_ranges, stream_ranges
from conftest import ROOT, WIKI_FRAGMENT, need

SAMPLE_DUMP, SAMPLE_INDEX, SAMPLE_VOCAB = wikidump.sample_paths()


@pytest.fixture(scope="module")
def fragment_pages() -> list[Page]:
    need(WIKI_FRAGMENT)
    return list(iter_pages(WIKI_FRAGMENT))


@pytest.fixture(scope="module")
def sample_pages() -> list[Page]:
    return list(iter_pages(SAMPLE_DUMP))


@pytest.fixture(scope="module")
def fragment_multistream(tmp_path_factory, fragment_pages) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("multi")
    dump, index = folder / "frag-multistream.xml.bz2", folder / "frag-multistream-index.txt.bz2"
    multistream.write_multistream(fragment_pages, wikidump.read_siteinfo(WIKI_FRAGMENT), dump, index, pages_per_stream=17)
    return dump, index


# --- the real fragment -------------------------------------------------------------------


def test_fragment_counts(fragment_pages):
    reasons = Counter(classify(p) for p in fragment_pages)
    redirects = [p for p in fragment_pages if p.redirect is not None or p.text.upper().startswith("#REDIRECT")]
    assert len(fragment_pages) == 206
    assert reasons[None] == 106
    assert len(redirects) == 100
    assert sum(p.ns != 0 for p in fragment_pages) == 1
    assert reasons == {None: 106, "redirect": 99, "namespace": 1}  # the project page is also a redirect
    ids = [p.page_id for p in fragment_pages]
    assert ids == sorted(ids) and ids[0] == 10


def test_fragment_page_fields(fragment_pages):
    first, anarchism = fragment_pages[0], fragment_pages[1]
    assert first == Page(10, "AccessibleComputing", 0, "#REDIRECT [[Computer accessibility]]\n\n"
                         "{{Redr|move|from CamelCase|up}}", "Computer accessibility", 631144794,
                         "2014-10-26T04:50:23Z")
    assert anarchism.title == "Anarchism" and anarchism.redirect is None and anarchism.revision_id == 716551092
    # Entities in the XML are decoded once: wikitext keeps its own &nbsp; etc. as text.
    assert "&lt;" not in anarchism.text and "<ref" in anarchism.text and "&nbsp;" in anarchism.text


def test_read_siteinfo(fragment_pages):
    info = wikidump.read_siteinfo(WIKI_FRAGMENT)
    assert info["sitename"] == "Wikipedia" and info["dbname"] == "enwiki"
    assert info["base"] == "https://en.wikipedia.org/wiki/Main_Page"
    assert info["generator"] == "MediaWiki 1.27.0-wmf.22" and info["version"] == "0.10"
    assert info["namespaces"][0] == "" and info["namespaces"][4] == "Wikipedia" and len(info["namespaces"]) == 35


def test_xml_bz2_and_multistream_agree(tmp_path, fragment_pages, fragment_multistream):
    xml = tmp_path / "frag.xml"
    xml.write_bytes(bz2.decompress(WIKI_FRAGMENT.read_bytes()))
    assert list(iter_pages(xml)) == fragment_pages
    dump, _ = fragment_multistream
    assert list(iter_pages(dump)) == fragment_pages
    assert wikidump.read_siteinfo(dump)["namespaces"] == wikidump.read_siteinfo(xml)["namespaces"]


def test_ranges_in_parallel_union_to_all_pages(fragment_pages, fragment_multistream):
    dump, index = fragment_multistream
    ranges = stream_ranges(dump, index)
    assert len(ranges) == -(-206 // 17)
    assert all(a[1] == b[0] for a, b in zip(ranges, ranges[1:]))
    assert ranges[-1][1] == dump.stat().st_size
    items = plan_ranges(ranges, 200_000)
    assert 1 < len(items) < len(ranges)
    with ThreadPoolExecutor(4) as pool:
        parts = list(pool.map(lambda r: list(iter_pages_in_range(dump, *r)), items))
    assert [p for part in parts for p in part] == fragment_pages
    index_ids = [int(line.split(":")[1]) for line in bz2.decompress(index.read_bytes()).decode().splitlines()]
    assert index_ids == [p.page_id for p in fragment_pages]


@pytest.fixture(params=["prefetch", "in line"])
def decoder_options(request) -> dict:
    """prefetch=True decodes with libbz2 on a helper thread, False in line with the compiled decoder."""
    return {"prefetch": request.param == "prefetch"}


def test_prefetch_shortens_the_switch_interval_while_it_runs_and_restores_it(fragment_multistream):
    dump, index = fragment_multistream
    before = sys.getswitchinterval()
    first, second = (iter_pages_in_range(dump, *r, prefetch=True) for r in stream_ranges(dump, index)[:2])
    next(first)
    assert sys.getswitchinterval() == pytest.approx(decode.SWITCH_INTERVAL_S)
    next(second)  # two at once: the first to end must not restore it under the other
    first.close()
    assert sys.getswitchinterval() == pytest.approx(decode.SWITCH_INTERVAL_S)
    second.close()
    assert sys.getswitchinterval() == before
    next(iter_pages_in_range(dump, *stream_ranges(dump, index)[0], prefetch=False))
    assert sys.getswitchinterval() == before


def test_range_including_header_and_footer(fragment_pages, fragment_multistream, decoder_options):
    dump, _ = fragment_multistream
    assert list(iter_pages_in_range(dump, 0, dump.stat().st_size, **decoder_options)) == fragment_pages
    ranges = stream_ranges(dump, fragment_multistream[1])
    assert [p for r in ranges for p in iter_pages_in_range(dump, *r, **decoder_options)] == fragment_pages


def test_ranges_read_back_to_back_give_each_range_its_pages(fragment_pages, fragment_multistream, decoder_options):
    dump, index = fragment_multistream
    ranges = stream_ranges(dump, index)
    each = [list(iter_pages_in_range(dump, *r, **decoder_options)) for r in ranges]
    assert [list(pages) for pages in iter_pages_in_ranges(dump, ranges, **decoder_options)] == each
    # A range left half read is skipped to its end: the next range still gets its own pages.
    got = []
    for k, pages in enumerate(iter_pages_in_ranges(dump, ranges, **decoder_options)):
        got.append(next(pages) if k % 2 else list(pages))
    assert got == [pages[0] if k % 2 else pages for k, pages in enumerate(each)]


def test_a_bad_range_read_back_to_back_fails_after_the_ranges_before_it(fragment_multistream, decoder_options):
    dump, index = fragment_multistream
    ranges = stream_ranges(dump, index)
    bad = [ranges[0], (ranges[1][0] + 5, ranges[1][1])]
    reader = iter_pages_in_ranges(dump, bad, **decoder_options)
    assert list(next(reader)) == list(iter_pages_in_range(dump, *ranges[0], **decoder_options))
    with pytest.raises(BertdataError, match=f"byte {ranges[1][0] + 5} is not the start of a bz2 stream"):
        list(next(reader))


def test_the_compiled_decoder_reads_ahead_across_ranges_and_cuts_its_output_at_their_ends(
        monkeypatch, fragment_multistream):
    """Ranges of a stream or two are decoded as one run, so its walks run 8 at a time; each range
    still gets exactly its own pages."""
    dump, index = fragment_multistream
    ranges = stream_ranges(dump, index)
    real_decode = decode._bunzip.decode
    crossed = []

    def spy(data, bit, level, crc):
        out, bit, level, crc, ends = real_decode(data, bit, level, crc)
        crossed.append(len(ends))
        return out, bit, level, crc, ends

    monkeypatch.setattr(decode._bunzip, "decode", spy)
    each = [list(iter_pages_in_range(dump, *r, prefetch=True)) for r in ranges]
    assert [list(pages) for pages in iter_pages_in_ranges(dump, ranges, prefetch=False)] == each
    assert len(crossed) < len(ranges) and max(crossed) > 1
    # Ranges that do not touch are runs of their own.
    apart = ranges[1::3]
    crossed.clear()
    assert [list(pages) for pages in iter_pages_in_ranges(dump, apart, prefetch=False)] == each[1::3]
    assert max(crossed) == 1


def test_a_range_that_ends_inside_a_stream_fails_in_a_run_as_alone(fragment_multistream):
    """Read ahead, the decoder would go on past such an end; it is caught, and libbz2 names it."""
    dump, index = fragment_multistream
    (a, b), (_, c) = stream_ranges(dump, index)[1:3]
    cut = (b + c) // 2
    for check_start in (lambda f, offset, name: None, multistream._check_stream_start):
        with open(dump, "rb") as f:
            chunks = decode.compiled_ranges_chunks(f, str(dump), [(a, cut), (cut, c)], "", check_start)
            with pytest.raises(BertdataError, match=rf"the byte range \[{a}, {cut}\) ends at compressed byte {cut} "
                                                    rf"inside the stream starting at byte {b}"):
                list(chunks)


def test_damage_in_the_range_read_ahead_fails_after_the_pages_before_it(tmp_path, fragment_multistream):
    dump, index = fragment_multistream
    ranges = stream_ranges(dump, index)
    (a, b), (_, c) = ranges[1:3]
    data = bytearray(dump.read_bytes())
    for i in range(b + 100, b + 140):
        data[i] ^= 0x5A
    bad = tmp_path / "corrupt.xml.bz2"
    bad.write_bytes(bytes(data))
    reader = iter_pages_in_ranges(bad, [(a, b), (b, c)], prefetch=False)
    assert list(next(reader)) == list(iter_pages_in_range(dump, a, b))
    with pytest.raises(BertdataError, match=rf"corrupt bz2 data in the stream starting at byte {b}"):
        list(next(reader))


def test_parse_speed(fragment_pages):
    """Whole-fragment decompress + parse; a floor far below the measured ~9 MB/s per core."""
    import time

    start = time.perf_counter()
    n = sum(1 for _ in iter_pages(WIKI_FRAGMENT))
    seconds = time.perf_counter() - start
    assert n == 206
    assert 6_089_746 / seconds > 1_000_000, f"{6_089_746 / seconds / 1e6:.1f} MB/s"


# --- plan_ranges, classify -----------------------------------------------------------------


def test_plan_ranges():
    ranges = [(100, 150), (150, 400), (400, 420), (420, 900), (900, 950)]
    assert plan_ranges(ranges, 200) == [(100, 400), (400, 900), (900, 950)]
    assert plan_ranges(ranges, 10_000) == [(100, 950)]
    assert plan_ranges(ranges, 1) == ranges
    assert plan_ranges([], 5) == []
    with pytest.raises(BertdataError, match="not contiguous"):
        plan_ranges([(0, 10), (11, 20)], 5)
    with pytest.raises(BertdataError, match="positive"):
        plan_ranges(ranges, 0)


@pytest.mark.parametrize(
    ("page", "reason"),
    [
        (Page(1, "A", 0, "Some prose."), None),
        (Page(1, "A", 0, "#REDIRECT [[B]]", redirect="B"), "redirect"),
        (Page(1, "A", 0, "  #redirect[[B]]"), "redirect"),
        (Page(1, "A", 0, "#Redirect [[B]]"), "redirect"),
        (Page(1, "A", 0, "{{Redirect|the other A}} A is a letter."), None),
        (Page(1, "Talk:A", 1, "Discussion."), "namespace"),
        (Page(1, "A", 0, " \n\t"), "empty"),
    ],
)
def test_classify(page, reason):
    assert classify(page) == reason


# --- errors --------------------------------------------------------------------------------


def test_truncated_bz2_names_file_and_offset(tmp_path):
    data = SAMPLE_DUMP.read_bytes()
    bad = tmp_path / "cut.xml.bz2"
    bad.write_bytes(data[: len(data) // 2])
    with pytest.raises(BertdataError) as err:
        list(iter_pages(bad))
    message = str(err.value)
    assert str(bad) in message and "truncated" in message
    assert f"compressed byte {len(data) // 2}" in message


def test_bytes_that_start_no_stream_are_corrupt_data_for_every_decoder(tmp_path, decoder_options):
    """Not pages lost: the compiled decoder refuses them, and libbz2 names them."""
    data = SAMPLE_DUMP.read_bytes()
    ranges = stream_ranges(SAMPLE_DUMP, SAMPLE_INDEX)
    (a, b), (_, c) = ranges[1], ranges[2]
    between = tmp_path / "between.xml.bz2"
    between.write_bytes(data[:b] + b"\0\0\0" + data[b:])  # inside the range [a, c + 3)
    with pytest.raises(BertdataError, match=rf"corrupt bz2 data in the stream starting at byte {b}"):
        list(iter_pages_in_range(between, a, c + 3, **decoder_options))
    tail = tmp_path / "tail.xml.bz2"
    tail.write_bytes(data + b"junk")
    start, end = ranges[-1]
    with pytest.raises(BertdataError, match=rf"corrupt bz2 data in the stream starting at byte {end}"):
        list(iter_pages_in_range(tail, start, end + 4, **decoder_options))


def test_libbz2_supplies_what_the_compiled_decoder_left_out(monkeypatch, sample_pages):
    """Should the compiled decoder fail on data libbz2 reads, the pages are still all there, once."""
    real_decode = decode._bunzip.decode
    calls = []

    def fails_after_one_call(data, bit, level, crc):
        calls.append(bit)
        if len(calls) > 1:
            raise ValueError("bz2 data: corrupt block")
        out, bit, level, crc, _ = real_decode(data, bit, level, crc)
        return out[:1000], bit, level, crc, ()  # not all it made: the hand-over is mid-block

    monkeypatch.setattr(decode._bunzip, "decode", fails_after_one_call)
    ranges = stream_ranges(SAMPLE_DUMP, SAMPLE_INDEX)
    pages = [p for r in ranges for p in iter_pages_in_range(SAMPLE_DUMP, *r, prefetch=False)]
    assert pages == sample_pages
    assert len(calls) > 1


def test_corrupt_bz2_names_file_stream_and_offset(tmp_path):
    data = bytearray(SAMPLE_DUMP.read_bytes())
    ranges = stream_ranges(SAMPLE_DUMP, SAMPLE_INDEX)
    start, end = ranges[2]
    for i in range(start + 100, start + 140):
        data[i] ^= 0x5A
    bad = tmp_path / "corrupt.xml.bz2"
    bad.write_bytes(bytes(data))
    with pytest.raises(BertdataError, match=rf"{re.escape(str(bad))}: corrupt bz2 data in the stream "
                                            rf"starting at byte {start} \(detected by compressed byte \d+\)"):
        list(iter_pages(bad))
    # A worker reading only the damaged range reports the same stream, whatever its decoder.
    for options in ({"prefetch": True}, {"prefetch": False}):
        with pytest.raises(BertdataError, match=rf"{re.escape(str(bad))}: corrupt bz2 data in the stream "
                                                rf"starting at byte {start} \(detected by compressed byte \d+\)"):
            list(iter_pages_in_range(bad, start, end, **options))
        # Ranges before it are unaffected.
        assert list(iter_pages_in_range(bad, *ranges[0], **options))


def test_non_mediawiki_xml_refused(tmp_path):
    rss = tmp_path / "feed.xml"
    rss.write_text('<?xml version="1.0"?><rss version="2.0"><channel><title>x</title></channel></rss>')
    for read in (iter_pages, wikidump.read_siteinfo):
        with pytest.raises(BertdataError, match=rf"{re.escape(str(rss))}: not a MediaWiki XML export \(root element <rss>"):
            list(read(rss)) if read is iter_pages else read(rss)
    other_ns = tmp_path / "other.xml"
    other_ns.write_text('<mediawiki xmlns="http://example.org/"><page/></mediawiki>')
    with pytest.raises(BertdataError, match="not a MediaWiki XML export"):
        list(iter_pages(other_ns))


def test_malformed_xml_names_line_and_column(tmp_path):
    xml = bz2.decompress(SAMPLE_DUMP.read_bytes()).decode()
    broken = xml.replace("</title>", "</titel>", 3)
    line = broken[: broken.index("</titel>")].count("\n") + 1
    path = tmp_path / "broken.xml"
    path.write_text(broken)
    with pytest.raises(BertdataError, match=rf"{re.escape(str(path))}: malformed XML at line {line}, column \d+: mismatched tag"):
        list(iter_pages(path))
    cut = tmp_path / "cut.xml"
    cut.write_text(xml[: len(xml) // 2])
    with pytest.raises(BertdataError, match="malformed XML at line .*no element found"):
        list(iter_pages(cut))


def test_other_bad_files(tmp_path):
    empty = tmp_path / "empty.xml"
    empty.write_bytes(b"")
    with pytest.raises(BertdataError, match="empty file"):
        list(iter_pages(empty))
    gz = tmp_path / "dump.xml.gz"
    gz.write_bytes(b"\x1f\x8b\x08\x00rest")
    with pytest.raises(BertdataError, match="gzip"):
        list(iter_pages(gz))
    text = tmp_path / "notes.txt"
    text.write_text("just some notes\n")
    with pytest.raises(BertdataError, match="neither XML nor bz2"):
        list(iter_pages(text))
    with pytest.raises(BertdataError, match="not found"):
        list(iter_pages(tmp_path / "missing.xml.bz2"))
    no_id = tmp_path / "noid.xml"
    no_id.write_text('<mediawiki xmlns="http://www.mediawiki.org/xml/export-0.10/">'
                     "<page><title>A</title><ns>0</ns></page></mediawiki>")
    with pytest.raises(BertdataError, match=r"<page> without <id> at line 1"):
        list(iter_pages(no_id))


def test_index_that_does_not_match_the_dump(tmp_path, fragment_multistream):
    dump, index = fragment_multistream
    # The sample's index against the (much larger) fragment dump: offsets land mid-stream.
    with pytest.raises(BertdataError, match="is not the start of a bz2 stream; the multistream index .* does not match"):
        stream_ranges(dump, SAMPLE_INDEX)
    # The fragment's index against the (small) sample: offsets past its end.
    with pytest.raises(BertdataError, match="beyond the end of .*does not match"):
        stream_ranges(SAMPLE_DUMP, index)
    garbage = tmp_path / "index.txt"
    garbage.write_text("600:10:Anarchism\nnot an index line\n")
    with pytest.raises(BertdataError, match=r"index.txt: line 2 is not `offset:page_id:title`"):
        stream_ranges(SAMPLE_DUMP, garbage)
    backwards = tmp_path / "backwards.txt"
    backwards.write_text("900:10:A\n600:12:B\n")
    with pytest.raises(BertdataError, match="offsets go backwards"):
        stream_ranges(SAMPLE_DUMP, backwards)


def _offsets_line_by_line(index: Path) -> list[int]:
    with open(index, "rb") as f:
        return multistream._offsets_by_line(multistream._index_chunks(f, str(index)), str(index))


def test_index_read_a_stream_at_a_time_gives_every_offset(fragment_multistream):
    index = fragment_multistream[1]
    by_line = _offsets_line_by_line(index)
    assert len(by_line) > 10
    assert multistream.index_offsets(index) == by_line
    # The fast path itself, not its fallback, over chunks cut anywhere: inside a stream's lines,
    # inside a line, and in its offset.
    text = bz2.decompress(index.read_bytes())
    for size in (1, 7, 50, 997, len(text)):
        chunks = (text[k:k + size] for k in range(0, len(text), size))
        assert multistream._offsets_by_stream(chunks) == by_line, size
    assert multistream._offsets_by_stream(iter([text.rstrip(b"\n")])) == by_line  # no newline at the end


def test_index_lines_the_fast_path_does_not_take(tmp_path):
    odd = tmp_path / "odd.txt"
    # A blank line, offsets written with a leading zero and a stream whose lines are apart:
    # read line by line, with the same result the line-by-line reading gives.
    odd.write_bytes(b"600:1:A\n\n0600:2:B\n900:3:C d\n900:4:\n1200:5:E\n1200:6:F")
    assert multistream._offsets_by_stream(iter([odd.read_bytes()])) is None
    assert multistream.index_offsets(odd) == [600, 900, 1200]
    digits = tmp_path / "digits.txt"
    digits.write_text("600:1:A\n6\u00b2:2:B\n", encoding="utf-8")  # a superscript two is no digit of an offset
    with pytest.raises(BertdataError, match=r"digits.txt: line 2 is not `offset:page_id:title` \('6\u00b2:2:B'\)"):
        multistream.index_offsets(digits)
    no_lines = tmp_path / "no-lines.bin"
    no_lines.write_bytes(b"600:1:A\n" + bytes(range(11, 256)) * 2000)  # no newline in 490 KB
    with pytest.raises(BertdataError, match=r"no-lines.bin: line 2 is over 65,536 bytes long"):
        multistream.index_offsets(no_lines)
    empty = tmp_path / "empty.txt"
    empty.write_text("\n")
    with pytest.raises(BertdataError, match="empty.txt: empty multistream index"):
        multistream.index_offsets(empty)

    class FailsAfterItsMagic(io.BytesIO):
        def read(self, size=-1):
            if self.tell() >= 3:
                raise OSError("connection reset by peer")
            return super().read(size)

    with pytest.raises(BertdataError, match=r"^remote-index.txt.bz2: unreadable multistream index \(connection reset"):
        multistream.index_offsets("remote-index.txt.bz2", lambda path: FailsAfterItsMagic(bz2.compress(b"600:1:A\n")))
    damaged = bytearray(bz2.compress(b"600:1:A\n" * 5000))
    damaged[len(damaged) // 2] ^= 0xFF
    broken = tmp_path / "broken-index.txt.bz2"
    broken.write_bytes(bytes(damaged))
    with pytest.raises(BertdataError, match=r"broken-index.txt.bz2: corrupt bz2 data in the stream starting at "
                                            r"byte 0 .*; is this a multistream index\?"):
        multistream.index_offsets(broken)


def test_range_not_on_stream_boundaries(fragment_multistream, decoder_options):
    dump, index = fragment_multistream
    ranges = stream_ranges(dump, index)
    with pytest.raises(BertdataError, match="is not the start of a bz2 stream"):
        list(iter_pages_in_range(dump, ranges[1][0] + 5, ranges[1][1], **decoder_options))
    start, end = ranges[1]
    with pytest.raises(BertdataError, match=rf"truncated bz2 data: the byte range \[{start}, {end - 10}\) ends at "
                                            rf"compressed byte {end - 10} inside the stream starting at byte {start}"):
        list(iter_pages_in_range(dump, start, end - 10, **decoder_options))


# --- writing -------------------------------------------------------------------------------


def test_write_multistream_roundtrip_and_refuses_overwrite(tmp_path, sample_pages):
    info = wikidump.read_siteinfo(SAMPLE_DUMP)
    odd = Page(5, 'Quotes "&" <tags>', 0, 'Text with "quotes", <ref>x</ref> &amp; ]]>\nend', "R&D", 7, None)
    pages = [odd] + sample_pages
    dump, index = tmp_path / "d.xml.bz2", tmp_path / "d-index.txt.bz2"
    assert multistream.write_multistream(pages, info, dump, index, pages_per_stream=7) == len(pages)
    assert list(iter_pages(dump)) == pages
    first = dump.read_bytes()
    with pytest.raises(BertdataError, match="already exists"):
        multistream.write_multistream(pages, info, dump, index)
    assert dump.read_bytes() == first
    multistream.write_multistream(pages, info, dump, index, pages_per_stream=7, overwrite=True)
    assert dump.read_bytes() == first  # deterministic
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d-index.txt.bz2", "d.xml.bz2"]  # no temp files


def test_highly_compressible_page(tmp_path):
    """A page whose stream expands far beyond one read: output is drained in bounded pieces."""
    big = Page(1, "Big", 0, "ab " * 1_500_000)
    dump, index = tmp_path / "big.xml.bz2", tmp_path / "big-index.txt.bz2"
    multistream.write_multistream([big, Page(2, "Small", 0, "x")], {"namespaces": {0: ""}}, dump, index)
    assert dump.stat().st_size < 10_000
    assert list(iter_pages(dump)) == [big, Page(2, "Small", 0, "x")]
    assert [p.page_id for r in stream_ranges(dump, index) for p in iter_pages_in_range(dump, *r)] == [1, 2]


def test_scaled_dump_script(tmp_path, sample_pages):
    out = tmp_path / "scaled-multistream.xml.bz2"
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "make_scaled_dump.py"), str(SAMPLE_DUMP), str(out),
                           "--factor", "3"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    index = tmp_path / "scaled-multistream-index.txt.bz2"
    pages = list(iter_pages(out))
    assert len(pages) == 3 * len(sample_pages)
    assert len({p.page_id for p in pages}) == len(pages) and len({p.title for p in pages}) == len(pages)
    assert [p.page_id for p in pages] == sorted(p.page_id for p in pages)
    assert [p.text for p in pages[: len(sample_pages)]] == [p.text for p in sample_pages]
    ranges = stream_ranges(out, index)
    assert [p for r in ranges for p in iter_pages_in_range(out, *r)] == pages


# --- the bundled sample --------------------------------------------------------------------


def test_sample_is_a_multistream_dump_with_index(sample_pages):
    info = wikidump.read_siteinfo(SAMPLE_DUMP)
    assert info["dbname"] == "enwiki" and info["namespaces"][10] == "Template"
    ranges = stream_ranges(SAMPLE_DUMP, SAMPLE_INDEX)
    assert len(ranges) >= 4
    assert [p for r in ranges for p in iter_pages_in_range(SAMPLE_DUMP, *r)] == sample_pages
    ids = [p.page_id for p in sample_pages]
    assert ids == sorted(set(ids))
    assert SAMPLE_DUMP.stat().st_size + SAMPLE_INDEX.stat().st_size + SAMPLE_VOCAB.stat().st_size < 300_000


def test_sample_has_the_promised_pages(sample_pages):
    reasons = Counter(classify(p) for p in sample_pages)
    assert reasons[None] >= 30
    assert reasons["redirect"] >= 5
    assert any(p.redirect is None and classify(p) == "redirect" for p in sample_pages)  # text-only redirect
    assert {p.title.split(":")[0] for p in sample_pages if p.ns != 0} >= {"Talk", "Wikipedia", "Template"}


FEATURES = {
    "infobox": r"\{\{Infobox",
    "nested template": r"\{\{[^{}]*\{\{(convert|coord|birth date|lang|nowrap|URL)",
    "parser function": r"\{\{#(if|expr):",
    "magic word": r"__NOTOC__|\{\{DEFAULTSORT:|\{\{formatnum:",
    "table": r"^\{\|",
    "nested table": r"\n\|[^\n]*\n\{\|",
    "named ref": r"<ref name=\"?[\w]+\"?>",
    "self-closing ref": r"<ref name=\"?[\w]+\"? />",
    "references list": r"\{\{[Rr]eflist\}\}|<references />",
    "bullet list": r"^\* ",
    "numbered list": r"^# ",
    "definition list": r"^; ",
    "piped link": r"\[\[[^|\]]+\|[^\]]+\]\]",
    "link trail": r"\]\][a-z]+",
    "external link": r"\[https?://\S+ [^\]]+\]",
    "file with linked caption": r"\[\[(File|Image):[^\]]*\[\[[^\]]+\]\][^\]]*\]\]",
    "category": r"\[\[Category:",
    "interlanguage link": r"^\[\[(de|fr|nl|es|it):",
    "html entity": r"&ndash;|&nbsp;",
    "comment": r"<!--",
    "math": r"<math>",
    "blockquote": r"<blockquote>",
    "bold and italics": r"'''[^']+'''.*''[^']+''",
    "see also section": r"^== See also ==",
    "external links section": r"^== External links ==",
}


@pytest.mark.parametrize("feature", FEATURES)
def test_sample_has_wikitext_feature(sample_pages, feature):
    pattern = re.compile(FEATURES[feature], re.MULTILINE)
    assert any(pattern.search(p.text) for p in sample_pages if classify(p) is None), feature


def test_sample_articles_are_long_enough(sample_pages):
    from bertdata.text.sentences import split_article
    from bertdata.text.wikitext import clean

    counts = {p.title: len(split_article(clean(p.text, p.title))) for p in sample_pages if classify(p) is None}
    assert min(counts.values()) >= 15, counts


def test_sample_matches_its_sources():
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "make_sample.py"), "--check"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr


def test_sample_vocab_is_valid():
    from bertdata.instances.vocab import SPECIAL_TOKENS, load_vocab

    vocab = load_vocab(SAMPLE_VOCAB)
    assert vocab.tokens[: len(SPECIAL_TOKENS)] == SPECIAL_TOKENS
    assert 2000 <= len(vocab) <= 5000
    assert len(set(vocab.tokens)) == len(vocab)
    assert {"harbour", "the", "##s"} <= set(vocab.tokens)


# --- hostile pages -------------------------------------------------------------------------


def _export(tmp_path: Path, *pages: str, name: str = "d.xml") -> Path:
    path = tmp_path / name
    path.write_text(f'<mediawiki xmlns="http://www.mediawiki.org/xml/export-0.10/">{"".join(pages)}</mediawiki>')
    return path


def _page_xml(page_id="1", ns="0", title="A", texts=("Prose.",)) -> str:
    ns_xml = "" if ns is None else f"<ns>{ns}</ns>"
    revisions = "".join(f"<revision><id>7</id><text>{t}</text></revision>" for t in texts)
    return f"<page><title>{title}</title>{ns_xml}<id>{page_id}</id>{revisions}</page>"


def test_page_over_the_limit_is_counted_not_kept(tmp_path):
    big = "&amp;" + "x" * 2_000_000  # entities count as the one character they stand for
    path = _export(tmp_path, _page_xml("1", texts=(big,)), _page_xml("2", title="B"))
    pages = list(iter_pages(path, max_page_chars=2_000_000))
    assert pages[0] == Page(1, "A", 0, "", revision_id=7, too_large=True)
    assert [classify(p) for p in pages] == ["page_too_large", None]
    # The limit is inclusive, can be raised, or lifted.
    assert list(iter_pages(path, max_page_chars=2_000_001))[0].text == "&" + "x" * 2_000_000
    assert not list(iter_pages(path, max_page_chars=None))[0].too_large
    # Full history: only the last revision counts.
    path = _export(tmp_path, _page_xml("1", texts=(big, "Small.")), name="history.xml")
    assert list(iter_pages(path, max_page_chars=1000)) == [Page(1, "A", 0, "Small.", revision_id=7)]
    # Another namespace is still counted as such.
    path = _export(tmp_path, _page_xml("1", ns="1", texts=(big,)), name="talk.xml")
    assert classify(list(iter_pages(path, max_page_chars=1000))[0]) == "namespace"


@pytest.mark.slow  # a 30 MB page read through, its memory traced
def test_page_over_the_limit_costs_no_memory(tmp_path):
    """A 1 GiB page once took 2 to 8 bytes of memory per character before it was skipped;
    now only the read-ahead buffers are live: ~8 MB of decompressed XML in libbz2's pieces,
    or the compiled decoder's last output (8 blocks, ~7 MB) and the range it decodes."""
    import tracemalloc

    big = Page(1, "Big", 0, "ab " * 10_000_000)
    dump, index = tmp_path / "big.xml.bz2", tmp_path / "big-index.txt.bz2"
    multistream.write_multistream([big, Page(2, "Small", 0, "x")], {"namespaces": {0: ""}}, dump, index)
    del big
    ranges = stream_ranges(dump, index)
    for read, bound in ((lambda: iter_pages(dump, max_page_chars=10_000), 15_000_000),
                        (lambda: (p for r in ranges for p in iter_pages_in_range(dump, *r, max_page_chars=10_000)),
                         15_000_000),
                        (lambda: (p for r in ranges
                                  for p in iter_pages_in_range(dump, *r, max_page_chars=10_000, prefetch=False)),
                         20_000_000)):
        tracemalloc.start()
        try:
            pages = list(read())
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert [(p.page_id, p.too_large) for p in pages] == [(1, True), (2, False)]
        assert peak < bound, f"{peak:,} bytes traced for a 30 MB page over a 10,000-character limit"


@pytest.mark.parametrize(
    ("page", "message"),
    [
        (_page_xml(ns=None), r"<page> 1 without <ns> \(export versions before 0.6"),
        (_page_xml(page_id="-5"), r"<page> with <id> '-5', not a MediaWiki page id at line 1"),
        (_page_xml(page_id="1" * 500), r"<page> with <id> '1{20}\.\.\.\(500 characters\)', not a MediaWiki page id"),
        (_page_xml(page_id="1" * 5000), r"<id> longer than 4,096 characters at line 1"),
        (_page_xml(page_id="1" * 21), r"<page> with <id> '1{21}', not a MediaWiki page id"),
        (_page_xml(page_id="\u0661"), r"<page> with <id> '\u0661'"),
        (_page_xml(ns="main"), r"<page> 1 with <ns> 'main', not a MediaWiki namespace number"),
        (_page_xml(title="T" * 5000), r"<title> longer than 4,096 characters at line 1"),
    ],
)
def test_pages_no_mediawiki_export_holds(tmp_path, page, message):
    path = _export(tmp_path, page)
    with pytest.raises(BertdataError, match=rf"^{re.escape(str(path))}: {message}"):
        list(iter_pages(path))


def test_odd_but_valid_ids_and_namespaces(tmp_path):
    path = _export(tmp_path, _page_xml(page_id=" 18446744073709551615 ", ns="-1"), _page_xml(page_id="0012"))
    pages = list(iter_pages(path))
    assert [(p.page_id, p.ns) for p in pages] == [(18446744073709551615, -1), (12, 0)]
    assert classify(pages[0]) == "namespace"


# --- an index that does not account for every stream ----------------------------------------


def _index_without_first_stream(tmp_path: Path, index: Path) -> Path:
    lines = bz2.decompress(index.read_bytes()).decode().splitlines(keepends=True)
    first = lines[0].split(":")[0]
    cut = tmp_path / "cut-index.txt"
    cut.write_text("".join(line for line in lines if line.split(":")[0] != first))
    return cut


def test_index_missing_its_first_stream(tmp_path, sample_pages):
    """Such an index once dropped the first stream's pages without a word (35 pages read of 45)."""
    cut = _index_without_first_stream(tmp_path, SAMPLE_INDEX)
    header_end = stream_ranges(SAMPLE_DUMP, SAMPLE_INDEX)[0][0]
    second = stream_ranges(SAMPLE_DUMP, SAMPLE_INDEX)[1][0]
    with pytest.raises(BertdataError, match=rf"^{re.escape(str(cut))}: the first stream listed starts at byte "
                                            rf"{second} of {re.escape(str(SAMPLE_DUMP))}, but its header stream "
                                            rf"ends at byte {header_end}; the index misses the streams before"):
        stream_ranges(SAMPLE_DUMP, cut)


def test_index_first_offset_far_past_any_header(tmp_path, fragment_multistream):
    dump, index = fragment_multistream
    offsets = [r[0] for r in stream_ranges(dump, index)]
    far = next(o for o in offsets if o > 1 << 20)
    late = tmp_path / "late-index.txt"
    late.write_text(f"{far}:1:A\n")
    with pytest.raises(BertdataError, match=rf"late-index.txt: the first stream listed starts at byte {far:,} .* "
                                            r"past any header stream"):
        stream_ranges(dump, late)


def test_header_stream_with_pages(tmp_path):
    head = f"{wikidump.EXPORT_ROOT}\n{multistream.render_siteinfo({'namespaces': {0: ''}})}"
    first = bz2.compress((head + multistream.render_page(Page(1, "A", 0, "One."))).encode())
    second = bz2.compress((multistream.render_page(Page(2, "B", 0, "Two.")) + "</mediawiki>").encode())
    dump = tmp_path / "d.xml.bz2"
    dump.write_bytes(first + second)
    # An index listing the first stream's pages at offset 0 reads them all.
    index = tmp_path / "index.txt"
    index.write_text(f"0:1:A\n{len(first)}:2:B\n")
    assert [p.page_id for r in stream_ranges(dump, index) for p in iter_pages_in_range(dump, *r)] == [1, 2]
    # One starting at the second stream would skip page 1.
    index.write_text(f"{len(first)}:2:B\n")
    with pytest.raises(BertdataError, match=r"but the dump's first stream holds pages; the index misses"):
        stream_ranges(dump, index)


def test_a_directory_given_as_dump_or_index(tmp_path):
    folder = tmp_path / "dumps"
    folder.mkdir()
    dump_errors = rf"^{re.escape(str(folder))}: is a directory, not a dump file$"
    for read in (lambda: list(iter_pages(folder)), lambda: wikidump.read_siteinfo(folder),
                 lambda: list(iter_pages_in_range(folder, 0, 10)), lambda: stream_ranges(folder, SAMPLE_INDEX)):
        with pytest.raises(BertdataError, match=dump_errors):
            read()
    with pytest.raises(BertdataError, match=rf"^{re.escape(str(folder))}: is a directory, not a multistream index$"):
        stream_ranges(SAMPLE_DUMP, folder)


# -- other languages and encodings ----------------------------------------------------

_BG_XML = """<mediawiki xmlns="http://www.mediawiki.org/xml/export-0.10/" version="0.10" xml:lang="bg">
  <siteinfo>
    <sitename>Уикипедия</sitename>
    <dbname>bgwiki</dbname>
    <base>https://bg.wikipedia.org/wiki/</base>
    <namespaces>
      <namespace key="-2" case="first-letter">Медия</namespace>
      <namespace key="0" case="first-letter" />
      <namespace key="6" case="first-letter">Файл</namespace>
      <namespace key="14" case="first-letter">Категория</namespace>
    </namespaces>
  </siteinfo>
  <page><title>София</title><ns>0</ns><id>7</id><revision><id>70</id>
    <text xml:space="preserve">'''София''' е град. [[Категория:Столици]]</text></revision></page>
  <page><title>Средец</title><ns>0</ns><id>8</id><revision><id>80</id>
    <text xml:space="preserve">#ПРЕНАСОЧВАНЕ [[София]]</text></revision></page>
</mediawiki>
"""


@pytest.mark.parametrize(("encoding", "declaration"), [
    ("utf-16", '<?xml version="1.0" encoding="UTF-16"?>\n'),  # BOM and declaration
    ("utf-16", ""),  # BOM alone
    ("utf-16-be", '<?xml version="1.0" encoding="UTF-16"?>\n'),  # declaration alone
    ("utf-8-sig", '<?xml version="1.0" encoding="UTF-8"?>\n'),
])
def test_utf16_and_bom_dumps(tmp_path, encoding, declaration):
    path = tmp_path / "bg.xml"
    path.write_bytes((declaration + _BG_XML).encode(encoding))
    info = wikidump.read_siteinfo(path)
    assert info["dbname"] == "bgwiki" and info["namespaces"] == {-2: "Медия", 0: "", 6: "Файл", 14: "Категория"}
    pages = list(iter_pages(path))
    assert [p.title for p in pages] == ["София", "Средец"] and pages[0].text.startswith("'''София''' е град.")
    site = wikidump.read_site(path)
    assert (site.language, site.dataset) == ("bg", "wikicorpus_bg")
    assert [classify(p, site.markup) for p in pages] == [None, "redirect"]
    assert classify(pages[1]) is None  # the English markup does not know #ПРЕНАСОЧВАНЕ


def test_utf16_declared_but_utf8_written_names_the_file(tmp_path):
    path = tmp_path / "bad.xml"
    path.write_bytes(("<?xml version='1.0' encoding='UTF-16'?>\n" + _BG_XML).encode("utf-8"))
    with pytest.raises(BertdataError, match=r"bad\.xml: malformed XML"):
        list(iter_pages(path))


def test_read_site_of_the_english_fragment():
    need(WIKI_FRAGMENT)
    site = wikidump.read_site(WIKI_FRAGMENT)
    assert (site.language, site.dataset, site.siteinfo["dbname"]) == ("en", "wikicorpus_en", "enwiki")
    assert site.siteinfo["namespaces"][6] == "File" and site.siteinfo["namespaces"][4] == "Wikipedia"
