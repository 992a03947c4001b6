"""Throughput of wikitext cleaning and sentence splitting on the real dump fragment, one process.

    .venv/bin/python scripts/perf_text.py [--dump PATH] [--repeats N]

Prints articles/s and MB/s of wikitext for `bertdata.text.wikitext.clean`, and MB/s of
cleaned text for `bertdata.text.sentences.split_article`. Rates use this process's CPU time,
the best of N runs, so other work on a shared machine disturbs them little; the wall
time of that run is printed alongside.
"""

from __future__ import annotations

import argparse
import bz2
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

from bertdata.text.sentences import SentenceSplitter
from bertdata.text.wikitext import clean

from bertdata.text.skipped import SkippedPage

DEFAULT_DUMP = (
    Path(__file__).resolve().parents[1].parent
    / "shared/data/wiki/enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2"
)


def read_articles(path: Path) -> list[tuple[str, str]]:
    """(title, wikitext) of the main-namespace, non-redirect pages."""
    articles = []
    with bz2.open(path) as f:
        for _, elem in ET.iterparse(f):
            if elem.tag.rsplit("}", 1)[-1] != "page":
                continue
            if elem.findtext("{*}ns") == "0" and elem.find("{*}redirect") is None:
                text = elem.findtext("{*}revision/{*}text") or ""
                articles.append((elem.findtext("{*}title"), text))
            elem.clear()
    return articles


def best_of(repeats: int, work) -> tuple[float, float, object]:
    """(CPU seconds, wall seconds, result) of the run that used the least CPU time."""
    best = (float("inf"), float("inf"), None)
    for _ in range(repeats):
        cpu, wall = time.process_time(), time.perf_counter()
        result = work()
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        if cpu < best[0]:
            best = (cpu, wall, result)
    return best


def clean_or_skip(text: str, title: str) -> str:
    """The clean text, or "" for a page the cleaner skips (a list, a disambiguation)."""
    try:
        return clean(text, title)
    except SkippedPage:
        return ""


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--dump", type=Path, default=DEFAULT_DUMP, help="a pages-articles .xml.bz2")
    parser.add_argument("--repeats", type=int, default=3, help="runs per measurement (best is kept)")
    args = parser.parse_args()
    if not args.dump.exists():
        print(f"perf_text: error: dump not found: {args.dump}", file=sys.stderr)
        return 2

    articles = read_articles(args.dump)
    wikitext_mb = sum(len(text.encode("utf-8")) for _, text in articles) / 1e6
    seconds, wall, cleaned = best_of(args.repeats, lambda: [clean_or_skip(text, title) for title, text in articles])
    cleaned_mb = sum(len(text.encode("utf-8")) for text in cleaned) / 1e6
    print(f"clean:  {len(articles)} articles, {wikitext_mb:.2f} MB wikitext -> {cleaned_mb:.2f} MB text "
          f"in {seconds:.3f} s CPU ({wall:.3f} s wall): {len(articles) / seconds:.0f} articles/s, "
          f"{wikitext_mb / seconds:.1f} MB/s")

    splitter = SentenceSplitter()
    seconds, wall, sentences = best_of(
        args.repeats, lambda: [splitter.split_article(text) for text in cleaned]
    )
    n_sentences = sum(map(len, sentences))
    print(f"split:  {n_sentences} sentences in {seconds:.3f} s CPU ({wall:.3f} s wall): "
          f"{cleaned_mb / seconds:.2f} MB/s of text, "
          f"{n_sentences / seconds:.0f} sentences/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
