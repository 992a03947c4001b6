"""How clean the text stage's sentences are, and what a change of the cleaning rules costs.

    .venv/bin/python scripts/text_quality.py [--dump PATH] [--keep-lists] [--save FILE] [--baseline FILE]

Reads the dump's pages with `bertdata.text.wikidump`, cleans and splits each one with
`bertdata.text.articles.page_document` (the text stage's own function) and prints the page
counts, the share of sentences that do not end like a sentence, and empty brackets.

`--save FILE` writes every article's sentences as JSON, so that the output of one
version of the rules can be compared with another's: run it with the old code on the
path, e.g. `/work/main/.venv/bin/python scripts/text_quality.py --save old.json` from
a checkout of the old commit. `--baseline FILE` then reports the prose the current
rules lose against that file: words of baseline sentences that end like a sentence
(prose, not list debris) and are no longer in the article's output, with a sample.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
from collections import Counter
from pathlib import Path

from bertdata.text.articles import is_terminated, page_document
from bertdata.text.sentences import SentenceSplitter
from bertdata.text.wikidump import iter_pages

DEFAULT_DUMP = (
    Path(__file__).resolve().parents[1].parent
    / "shared/data/wiki/enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2"
)
EMPTY_BRACKETS = re.compile(r"\(\s*[,;:]?\s*\)|\(\s*[,;]|\s[,;](?:\s|$)|  ")
# tests/test_build.py's check of the text stage's shards.
MARKUP = re.compile(r"\{\{|\}\}|\[\[|\]\]|''|<ref|\{\||\|\}|\|-|thumb\||px\||Category:|&nbsp;"
                    r"|</?[a-zA-Z][a-zA-Z0-9]*[\s/>]|&[a-zA-Z]+;|&#\d+;")


def article_sentences(dump: Path, keep_lists: bool) -> tuple[dict[str, list[str]], Counter]:
    splitter = SentenceSplitter()
    counts: Counter = Counter()
    # Rules older than `keep_lists` take no such argument; they keep lists.
    options = {"keep_lists": True} if keep_lists else {}
    out = {}
    for page in iter_pages(dump):
        doc = page_document(page, splitter, 5_000_000, counts, **options)
        if doc is not None:
            out[page.title] = list(doc.sentences)
    return out, counts


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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dump", type=Path, default=DEFAULT_DUMP, help="a pages-articles .xml or .xml.bz2")
    parser.add_argument("--save", type=Path, help="write {title: [sentences]} as JSON here")
    parser.add_argument("--baseline", type=Path, help="a --save file of other rules to compare with")
    parser.add_argument("--keep-lists", action="store_true", help="clean with keep_lists (the --keep-lists build)")
    args = parser.parse_args()
    articles, counts = article_sentences(args.dump, args.keep_lists)
    report(articles, counts)
    if args.save:
        args.save.write_text(json.dumps(articles, ensure_ascii=False))
    if args.baseline:
        compare(json.loads(args.baseline.read_text()), articles)
    return 0


if __name__ == "__main__":
    sys.exit(main())
