"""Make a larger multistream dump for benchmarks by repeating the pages of a dump.

Copy 0 is the source as it is; copy k (k >= 1) has every page id and revision id shifted
by k * (largest id + 1) and " (k)" appended to every title and redirect target, so ids and
titles stay unique and increasing, as in a real dump. Written as a multistream dump with
its index, like Wikimedia's, so range reading can be benchmarked on it.

  python scripts/make_scaled_dump.py bertdata/sample/enwiki-sample-pages-articles-multistream.xml.bz2 \\
      perf/scaled-multistream.xml.bz2 --factor 200
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from tqdm import tqdm

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bertdata.errors import BertdataError  # noqa: E402
from bertdata.text.wikidump import Page, iter_pages, read_siteinfo  # noqa: E402
from bertdata.text.multistream import write_multistream  # noqa: E402


def default_index(dest: str) -> str:
    stem = dest[: -len(".xml.bz2")] if dest.endswith(".xml.bz2") else dest
    return stem + "-index.txt.bz2"


def scaled_pages(src: str, factor: int) -> Iterator[Page]:
    stride = max(max(p.page_id, p.revision_id or 0) for p in iter_pages(src)) + 1
    for k in range(factor):
        for page in iter_pages(src):
            if k == 0:
                yield page
                continue
            yield dataclasses.replace(
                page,
                page_id=page.page_id + k * stride,
                title=f"{page.title} ({k})",
                redirect=None if page.redirect is None else f"{page.redirect} ({k})",
                revision_id=None if page.revision_id is None else page.revision_id + k * stride,
            )


def make_scaled_dump(src: str, dest: str, factor: int, index: str | None = None,
                     pages_per_stream: int = 100, force: bool = False) -> int:
    """Write `factor` copies of `src`'s pages to the multistream dump `dest`; returns the page count."""
    if factor < 1:
        raise BertdataError(f"--factor must be at least 1 (got {factor})")
    pages = tqdm(scaled_pages(src, factor), desc="writing", unit=" pages", leave=False, delay=1)
    return write_multistream(pages, read_siteinfo(src), dest, index or default_index(dest),
                             pages_per_stream, overwrite=force)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("src", help="a dump: .xml, .xml.bz2, multistream or not")
    parser.add_argument("dest", help="the multistream .xml.bz2 to write")
    parser.add_argument("--factor", type=int, required=True, help="how many copies of the source's pages")
    parser.add_argument("--index", help="index to write (default: DEST with -index.txt.bz2)")
    parser.add_argument("--pages-per-stream", type=int, default=100, help="pages per bz2 stream (default: 100)")
    parser.add_argument("--force", action="store_true", help="overwrite DEST and its index")
    args = parser.parse_args()
    start = time.perf_counter()
    try:
        count = make_scaled_dump(args.src, args.dest, args.factor, args.index, args.pages_per_stream, args.force)
    except BertdataError as err:
        print(f"make_scaled_dump: error: {err}", file=sys.stderr)
        return 2
    size = Path(args.dest).stat().st_size
    print(f"wrote {args.dest}: {count:,} pages, {size / 1e6:.1f} MB, in {time.perf_counter() - start:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
