"""How clean the text stage's sentences are, and what a change of the cleaning rules costs.

    .venv/bin/python scripts/text_quality.py [--dump PATH] [--keep-lists] [--save FILE] [--baseline FILE]
                                             [--wikiextractor DIR]

Reads the dump's pages with `bertdata.text.wikidump`, cleans and splits each one with
`bertdata.text.articles.page_document` (the text stage's own function) and prints the page
counts, the share of sentences that do not end like a sentence, and empty brackets.

`--save FILE` writes every article's sentences as JSON, so that the output of one
version of the rules can be compared with another's: run it with the old code on the
path, e.g. `/work/main/.venv/bin/python scripts/text_quality.py --save old.json` from
a checkout of the old commit. `--baseline FILE` then reports the prose the current
rules lose against that file: words of baseline sentences that end like a sentence
(prose, not list debris) and are no longer in the article's output, with a sample.

`--wikiextractor DIR` compares the sentences with WikiExtractor's, the extractor most users
would otherwise pick (`pip install --target DIR wikiextractor==3.1.0`; it is imported from
DIR, never installed with bertdata). WikiExtractor cleans every article-namespace page that
is not a redirect, with its defaults less the section titles it writes as sentences
(`keepSections=False`: bertdata drops headings); both sides are split by the same punkt
model (`SentenceSplitter().split_article`, the text stage's). A WikiExtractor sentence is
recalled when a bertdata sentence of the same article holds at least 90% of its words
(lowercased `\w+` tokens, counted with repeats); a bertdata sentence is precise when a
WikiExtractor sentence of its article holds at least 90% of its words. A page bertdata
skips loses all its reference sentences. It prints a row of docs/text-quality.md's table.
"""

from __future__ import annotations

import argparse
import html
import json
import random
import re
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

from bertdata.text.articles import is_terminated, page_document
from bertdata.text.sentences import SentenceSplitter
from bertdata.text.wikidump import iter_pages

DEFAULT_DUMP = (
    Path(__file__).resolve().parents[1].parent
    / "shared/data/wiki/enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2"
)
EMPTY_BRACKETS = re.compile(r"\(\s*[,;:]?\s*\)|\(\s*[,;]|\s[,;](?:\s|$)|  ")
# tests/pipelines/test_build.py's check of the text stage's shards.
MARKUP = re.compile(r"\{\{|\}\}|\[\[|\]\]|''|<ref|\{\||\|\}|\|-|thumb\||px\||Category:|&nbsp;"
                    r"|</?[a-zA-Z][a-zA-Z0-9]*[\s/>]|&[a-zA-Z]+;|&#\d+;")


def article_sentences(dump: Path, keep_lists: bool) -> tuple[dict[str, list[str]], Counter, float]:
    """Each article's sentences, the page counts, and the seconds the cleaning and splitting took."""
    splitter = SentenceSplitter()
    splitter.split_article("Loaded. Now.")  # the model loads on first use: not part of the time
    counts: Counter = Counter()
    # Rules older than `keep_lists` take no such argument; they keep lists.
    options = {"keep_lists": True} if keep_lists else {}
    out = {}
    pages = list(iter_pages(dump))
    start = time.perf_counter()
    for page in pages:
        doc = page_document(page, splitter, 5_000_000, counts, **options)
        if doc is not None:
            out[page.title] = list(doc.sentences)
    return out, counts, time.perf_counter() - start


def report(articles: dict[str, list[str]], counts: Counter) -> None:
    sentences = [s for ss in articles.values() for s in ss]
    unterminated = [s for s in sentences if not is_terminated(s)]
    untidy = [s for s in sentences if EMPTY_BRACKETS.search(s)]
    markup = [s for s in sentences if MARKUP.search(s)]
    print("counts:", json.dumps(dict(sorted(counts.items()))))
    print(f"articles {len(articles)}, sentences {len(sentences):,}, words {sum(len(s.split()) for s in sentences):,}")
    print(f"unterminated sentences: {len(unterminated):,} = {100 * len(unterminated) / max(1, len(sentences)):.2f}%")
    print(f"sentences with markup: {len(markup)}")
    for s in markup[:10]:
        print("   ", s[:160])
    print(f"sentences with empty brackets, stray separators or double spaces: {len(untidy)}")
    for s in untidy[:10]:
        print("   ", s[:160])
    rng = random.Random(0)
    print("sample of unterminated sentences:")
    for s in rng.sample(unterminated, min(15, len(unterminated))):
        print("   ", s[:160])


def compare(old: dict[str, list[str]], new: dict[str, list[str]]) -> None:
    """Words of the baseline's prose sentences that the new output no longer holds.

    Words are compared as per-article multisets, so a sentence that the new rules split
    differently, or that gained a rendered template, loses nothing; the sample lists
    baseline prose sentences not found verbatim in the article's new text.
    """
    prose_words = lost_words = lost_in_kept = 0
    changed: list[tuple[str, str]] = []
    for title, sentences in old.items():
        prose = [s for s in sentences if is_terminated(s)]
        words = Counter(w for s in prose for w in s.split())
        new_text = "\n".join(new.get(title, ()))
        prose_words += sum(words.values())
        lost = sum((words - Counter(new_text.split())).values())
        lost_words += lost
        lost_in_kept += lost if title in new else 0
        changed += [(title, s) for s in prose if title in new and s not in new_text]
    dropped_pages = sorted(set(old) - set(new))
    print(f"baseline prose words {prose_words:,}; not in the new output: {lost_words:,}"
          f" = {100 * lost_words / max(1, prose_words):.2f}%")
    print(f"articles no longer produced: {len(dropped_pages)} {dropped_pages}")
    print(f"prose words lost in articles still produced: {lost_in_kept:,}"
          f" = {100 * lost_in_kept / max(1, prose_words):.2f}%")
    print(f"baseline prose sentences of kept articles not found verbatim: {len(changed):,}; sample:")
    rng = random.Random(1)
    for title, s in rng.sample(changed, min(25, len(changed))):
        print(f"    [{title}] {s[:200]}")


WORD = re.compile(r"\w+")
OVERLAP = 0.9


def wikiextractor_sentences(dump: Path, installed: Path) -> dict[str, list[str]]:
    """WikiExtractor's sentences of each article of `dump`, split as bertdata splits its own."""
    sys.path.insert(0, str(installed))
    from wikiextractor.extract import Extractor

    splitter = SentenceSplitter()
    out = {}
    for page in iter_pages(dump):
        if page.ns != 0 or page.redirect is not None or page.text.lstrip().lower().startswith("#redirect"):
            continue
        # WikiExtractor reads the text as the dump spells it, XML escapes and all.
        raw = html.escape(page.text, quote=False)
        lines = Extractor(str(page.page_id), str(page.revision_id or ""), "", page.title, [raw],
                          keepSections=False).clean_text(raw, html_safe=False)
        out[page.title] = splitter.split_article("\n".join(lines))
    return out


def _matched(sentences: list[str], others: list[str]) -> int:
    """How many of `sentences` have at least OVERLAP of their words in one of `others`."""
    bags = [Counter(WORD.findall(s.lower())) for s in others]
    exact = {tuple(sorted(b.elements())) for b in bags}
    postings: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for i, bag in enumerate(bags):
        for word, n in bag.items():
            postings[word].append((i, n))
    found = 0
    for sentence in sentences:
        bag = Counter(WORD.findall(sentence.lower()))
        total = sum(bag.values())
        if not total:
            continue
        if tuple(sorted(bag.elements())) in exact:
            found += 1
            continue
        shared: Counter = Counter()
        for word, n in bag.items():
            for i, m in postings.get(word, ()):
                shared[i] += min(n, m)
        found += bool(shared) and max(shared.values()) >= OVERLAP * total
    return found


def against_wikiextractor(dump: Path, installed: Path, articles: dict[str, list[str]]) -> None:
    reference = wikiextractor_sentences(dump, installed)
    ref_total = sum(len([s for s in ss if WORD.search(s)]) for ss in reference.values())
    ours = [s for ss in articles.values() for s in ss]
    recalled = sum(_matched(ss, articles.get(title, [])) for title, ss in reference.items())
    precise = sum(_matched(ss, reference.get(title, [])) for title, ss in articles.items())
    leaks = sum(bool(MARKUP.search(s)) for s in ours)
    unterminated = sum(not is_terminated(s) for s in ours)
    ref_lines = [s for ss in reference.values() for s in ss]
    print(f"WikiExtractor: {len(reference)} articles, {ref_total:,} sentences"
          f" ({1000 * sum(bool(MARKUP.search(s)) for s in ref_lines) / max(1, len(ref_lines)):.1f} with markup /1k,"
          f" {100 * sum(not is_terminated(s) for s in ref_lines) / max(1, len(ref_lines)):.1f}% unpunctuated)")
    print("| recall | precision | markup lines /1k | lines without end punctuation | sentences |")
    print(f"| {recalled / max(1, ref_total):.3f} | {precise / max(1, len(ours)):.3f}"
          f" | {1000 * leaks / max(1, len(ours)):.1f} | {100 * unterminated / max(1, len(ours)):.1f}% | {len(ours):,} |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dump", type=Path, default=DEFAULT_DUMP, help="a pages-articles .xml or .xml.bz2")
    parser.add_argument("--save", type=Path, help="write {title: [sentences]} as JSON here")
    parser.add_argument("--baseline", type=Path, help="a --save file of other rules to compare with")
    parser.add_argument("--keep-lists", action="store_true", help="clean with keep_lists (the --keep-lists build)")
    parser.add_argument("--wikiextractor", type=Path, metavar="DIR",
                        help="compare with WikiExtractor installed in DIR (pip install --target DIR wikiextractor)")
    args = parser.parse_args()
    articles, counts, seconds = article_sentences(args.dump, args.keep_lists)
    report(articles, counts)
    print(f"cleaned and split in {seconds:.2f} s")
    if args.save:
        args.save.write_text(json.dumps(articles, ensure_ascii=False))
    if args.baseline:
        compare(json.loads(args.baseline.read_text()), articles)
    if args.wikiextractor:
        against_wikiextractor(args.dump, args.wikiextractor, articles)
    return 0


if __name__ == "__main__":
    sys.exit(main())
