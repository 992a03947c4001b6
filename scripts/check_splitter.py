"""Does `--splitter fast` find NLTK punkt's boundaries? Checked against NLTK itself on every
paragraph of a dump's articles (by default the real fragment, whose pages the 8x-64x dumps of
perf_scale.py repeat) and of tests/punkt_texts, each language with its own punkt model and
with every other one.

    .venv/bin/python scripts/check_splitter.py [--dump PATH] [--limit N]

Prints, per source and model, paragraphs, NLTK's sentences, sentences that differ, and each
splitter's CPU time; exits 1 if any sentence differs.
"""

from __future__ import annotations

import argparse
import itertools
import sys
import time
from pathlib import Path

from nltk.tokenize.punkt import PunktSentenceTokenizer

from bertdata.text.articles import article_texts
from bertdata.text.fastpunkt import FastPunkt
from bertdata.text.sentences import PUNKT_MODELS, SentenceSplitter, choose_punkt, punkt_parameters
from bertdata.text.wikidump import iter_pages, read_site

ROOT = Path(__file__).resolve().parents[1]
FRAGMENT = ROOT.parent / "shared/data/wiki/enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2"
TEXTS = ROOT / "tests" / "punkt_texts"


def timed(work):
    start = time.process_time()
    result = work()
    return result, time.process_time() - start


def compare(name: str, model: str, paragraphs: list[str]) -> int:
    """Print one row; the number of NLTK's sentences that fast did not give alike."""
    params = punkt_parameters(model)
    nltk, fast = PunktSentenceTokenizer(params), FastPunkt(params)
    theirs, nltk_s = timed(lambda: [nltk.tokenize(p) for p in paragraphs])
    ours, fast_s = timed(lambda: [fast.tokenize(p) for p in paragraphs])
    sentences = sum(map(len, theirs))
    # Sentences of NLTK's that fast's split of the same paragraph lacks, or the count's difference.
    differing = sum(max(len(set(t) - set(o)), abs(len(t) - len(o))) for t, o in zip(theirs, ours) if t != o)
    print(f"{name:<28} {model:<11} {len(paragraphs):>9} {sentences:>9} {differing:>9} "
          f"{nltk_s:>8.2f} {fast_s:>8.2f}", flush=True)
    return differing


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dump", type=Path, default=FRAGMENT, help="a pages-articles dump (default: the fragment)")
    parser.add_argument("--limit", type=int, help="only the first N articles of the dump")
    args = parser.parse_args()
    if not args.dump.exists():
        print(f"check_splitter: error: {args.dump} is absent", file=sys.stderr)
        return 2
    print(f"{'source':<28} {'model':<11} {'paragraphs':>9} {'sentences':>9} {'differing':>9} "
          f"{'nltk s':>8} {'fast s':>8}")
    site = read_site(args.dump)
    articles = list(itertools.islice(article_texts(iter_pages(args.dump), site.markup), args.limit))
    model = choose_punkt(site.language).model or "english"  # a language without one: English's
    paragraphs = [p for text in articles for p in text.split("\n") if p.strip()]
    differing = compare(args.dump.name[:28], model, paragraphs)
    fast, nltk = SentenceSplitter(model), SentenceSplitter(model, kind="nltk")
    articles_differing = sum(fast.split_article(a) != nltk.split_article(a) for a in articles)
    print(f"  split_article: {len(articles)} articles, {articles_differing} differing")
    differing += articles_differing
    for path in sorted(TEXTS.glob("*.txt")):
        paragraphs = [p for p in path.read_text(encoding="utf-8").split("\n") if p.strip()]
        for other in (path.stem, *(m for m in PUNKT_MODELS if m != path.stem)):
            differing += compare(f"tests/punkt_texts/{path.name}", other, paragraphs)
    print("all sentences alike" if not differing else f"{differing} sentences differ")
    return 1 if differing else 0


if __name__ == "__main__":
    sys.exit(main())
