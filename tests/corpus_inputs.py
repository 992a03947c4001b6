"""Corpora for the recipe tests, made from the real dump fragment's articles (cleaned prose, each
article's paragraphs on lines of their own) in the exact layouts of the corpora they stand for:

- FineWeb-Edu parquet: text, id, dump, url, file_path, language, language_score, token_count,
  score, int_score (int_score 0-5 from the page id, so a `where:` on it keeps a known part);
- Dolma v1 JSON lines, gzipped: id, text, source, added, created, metadata{};
- C4 JSON lines, gzipped: text, timestamp, url (the url its id);
- books: plain-text files, one a book, paragraphs hard-wrapped.

Each corpus takes its own articles (the fragment's articles in turn), so every document's text
is known: `ARTICLES` maps each corpus's document id to the article it holds.
"""

from __future__ import annotations

import gzip
import json
import textwrap
from functools import lru_cache
from pathlib import Path

from testcache import WIKI_FRAGMENT

RECIPE = """\
corpora:
  edu:   {type: parquet, files: "fineweb-edu/*.parquet", text: text, id: id, where: "int_score >= 3"}
  dolma: {type: jsonl, files: "dolma/*.json.gz"}
  c4:    {type: jsonl, files: "c4/*.json.gz", id: url}
  books: {type: text, files: "books/*.txt"}
"""
MIX = "mix: {edu: 0.5, c4: 0.3, dolma: 0.1, books: 0.1}\n"


@lru_cache(maxsize=1)
def articles() -> tuple[tuple[int, str, str], ...]:
    """(page id, title, text) of each article of the fragment: its cleaned paragraphs, one a line."""
    from bertdata.text.wikidump import classify, iter_pages
    from bertdata.text.wikitext import clean
    from bertdata.text.skipped import SkippedPage

    found = []
    for page in iter_pages(str(WIKI_FRAGMENT)):
        if classify(page) is None:
            try:
                found.append((page.page_id, page.title, clean(page.text, page.title)))
            except SkippedPage:
                continue
    return tuple(found)


def int_score(page_id: int) -> int:
    return page_id % 6


def write_corpora(folder: Path, copies: int = 1) -> dict[str, dict[str, str]]:
    """The four corpora under `folder` (each `copies` times as many documents, ids made unique);
    returns {corpus: {document id: text}} of every document written."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    pages = articles()
    written: dict[str, dict[str, str]] = {"edu": {}, "dolma": {}, "c4": {}, "books": {}}
    rows: dict[str, list] = {name: [] for name in written}
    for copy in range(copies):
        for k, (page_id, title, text) in enumerate(pages):
            corpus = ("edu", "edu", "c4", "dolma", "books")[k % 5]
            rows[corpus].append((page_id + copy * 1_000_000, title, text))
    edu = [{"text": text, "id": f"<urn:uuid:{page_id:08d}-edu>", "dump": "CC-MAIN-2024-10",
            "url": f"https://edu.example.org/{page_id}", "file_path": "s3://commoncrawl/x.warc.gz",
            "language": "en", "language_score": 0.95, "token_count": len(text.split()),
            "score": int_score(page_id) + 0.25, "int_score": int_score(page_id)} for page_id, _, text in rows["edu"]]
    (folder / "fineweb-edu").mkdir(parents=True)
    half = len(edu) // 2
    for n, part in enumerate((edu[:half], edu[half:])):
        pq.write_table(pa.Table.from_pylist(part), folder / "fineweb-edu" / f"{n:03d}_00000.parquet",
                       row_group_size=16)
    written["edu"] = {r["id"]: r["text"] for r in edu}
    (folder / "dolma").mkdir()
    with gzip.open(folder / "dolma" / "v1-0000.json.gz", "wt", encoding="utf-8") as f:
        for page_id, _, text in rows["dolma"]:
            doc_id = f"dolma-{page_id}"
            f.write(json.dumps({"id": doc_id, "text": text, "source": "wiki", "added": "2024-01-01T00:00:00Z",
                                "created": "2020-01-01T00:00:00Z", "metadata": {"length": len(text)}}) + "\n")
            written["dolma"][doc_id] = text
    (folder / "c4").mkdir()
    with gzip.open(folder / "c4" / "c4-train.00000-of-01024.json.gz", "wt", encoding="utf-8") as f:
        for page_id, _, text in rows["c4"]:
            url = f"https://c4.example.com/{page_id}/page.html"
            f.write(json.dumps({"text": text, "timestamp": "2019-04-25T12:57:54Z", "url": url}) + "\n")
            written["c4"][url] = text
    (folder / "books").mkdir()
    for page_id, title, text in rows["books"]:
        name = f"book-{page_id}.txt"
        wrapped = "\n\n".join(textwrap.fill(paragraph, 70) for paragraph in text.split("\n"))
        (folder / "books" / name).write_text(f"{wrapped}\n", encoding="utf-8")
        written["books"][name] = text
    return written
