"""Build the bundled sample dump, its index and its vocab from bertdata/sample/src/.

Each source file is one page: a few `key: value` header lines (`title`, optional `ns`
and `redirect`), a line `---`, then the page's wikitext. Pages get increasing ids in
file-name order. The output is byte-identical for the same sources, so the committed
files can be checked against a fresh build (`--check`).

  python scripts/make_sample.py            rebuild dump, index and vocab.txt in place
  python scripts/make_sample.py --check    rebuild the dump and index into a temporary
                                           folder and fail if they differ from the committed ones
"""

from __future__ import annotations

import argparse
import filecmp
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bertdata.config import VocabConfig  # noqa: E402
from bertdata.errors import BertdataError  # noqa: E402
from bertdata.text.wikidump import Page  # noqa: E402
from bertdata.text.multistream import write_multistream  # noqa: E402

SAMPLE = ROOT / "bertdata" / "sample"
DUMP_NAME = "enwiki-sample-pages-articles-multistream.xml.bz2"
INDEX_NAME = "enwiki-sample-pages-articles-multistream-index.txt.bz2"
VOCAB_NAME = "vocab.txt"
# Small streams so the sample has several, as a real dump has thousands: range reading
# and work-item planning get exercised on it.
PAGES_PER_STREAM = 10
# More than the ~2,700 tokens the sample's ~14k words support at min-frequency 2, so the
# vocab is everything the text can teach: small enough that many words split into pieces.
VOCAB = VocabConfig(size=4000, min_frequency=2)

NAMESPACES = {
    -2: "Media", -1: "Special", 0: "", 1: "Talk", 2: "User", 3: "User talk",
    4: "Wikipedia", 5: "Wikipedia talk", 6: "File", 7: "File talk", 8: "MediaWiki",
    9: "MediaWiki talk", 10: "Template", 11: "Template talk", 12: "Help", 13: "Help talk",
    14: "Category", 15: "Category talk", 100: "Portal", 101: "Portal talk",
    118: "Draft", 119: "Draft talk", 828: "Module", 829: "Module talk",
}
SITEINFO = {
    "sitename": "Bertdata Sample Wiki",
    "dbname": "enwiki",
    "base": "https://sample.bertdata.invalid/wiki/Main_Page",
    "generator": "bertdata scripts/make_sample.py",
    "case": "first-letter",
    "namespaces": NAMESPACES,
}


def read_source(path: Path, index: int) -> Page:
    header, sep, text = path.read_text(encoding="utf-8").partition("\n---\n")
    if not sep:
        raise BertdataError(f"{path}: no `---` line between the header and the wikitext")
    fields = {}
    for line in header.splitlines():
        key, colon, value = line.partition(":")
        if not colon or key.strip() not in ("title", "ns", "redirect"):
            raise BertdataError(f"{path}: bad header line {line!r} (expected title:, ns:, redirect:)")
        fields[key.strip()] = value.strip()
    title, ns = fields["title"], int(fields.get("ns", "0"))
    prefix = title.partition(":")[0] if ":" in title else ""
    expected_ns = next((k for k, name in NAMESPACES.items() if name and name == prefix), 0)
    if ns != expected_ns:
        raise BertdataError(f"{path}: title {title!r} belongs to namespace {expected_ns}, header says {ns}")
    return Page(
        page_id=10 + 4 * index,
        title=title,
        ns=ns,
        text=text.rstrip("\n"),
        redirect=fields.get("redirect"),
        revision_id=1_000_003 + 37 * index,
        timestamp=f"2024-03-{1 + index % 28:02d}T{index * 7 % 24:02d}:{index * 13 % 60:02d}:00Z",
    )


def sample_pages() -> list[Page]:
    return [read_source(path, i) for i, path in enumerate(sorted((SAMPLE / "src").glob("*.wiki")))]


def build(folder: Path, with_vocab: bool) -> None:
    dump, index = folder / DUMP_NAME, folder / INDEX_NAME
    count = write_multistream(sample_pages(), SITEINFO, dump, index, PAGES_PER_STREAM, overwrite=True)
    print(f"wrote {dump} ({dump.stat().st_size:,} bytes, {count} pages) and {index.name}")
    if with_vocab:
        from bertdata.instances.vocabtrain import build_vocab

        summary = build_vocab([], folder / VOCAB_NAME, VOCAB, dumps=[dump], force=True)
        print(f"wrote {folder / VOCAB_NAME}: {summary.tokens:,} tokens from {summary.lines:,} sentences "
              f"of {summary.articles} articles")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true",
                        help="verify that the committed dump and index match the sources")
    args = parser.parse_args()
    try:
        if not args.check:
            build(SAMPLE, with_vocab=True)
            return 0
        with tempfile.TemporaryDirectory() as tmp:
            build(Path(tmp), with_vocab=False)
            stale = [name for name in (DUMP_NAME, INDEX_NAME)
                     if not (SAMPLE / name).is_file()
                     or not filecmp.cmp(Path(tmp) / name, SAMPLE / name, shallow=False)]
    except BertdataError as err:
        print(f"make_sample: error: {err}", file=sys.stderr)
        return 2
    if stale:
        print(f"make_sample: {', '.join(stale)} differ from a fresh build of bertdata/sample/src; "
              "run `python scripts/make_sample.py`", file=sys.stderr)
        return 1
    print("the committed sample matches its sources")
    return 0


if __name__ == "__main__":
    sys.exit(main())
