"""scripts/perf_dedup.py, issue 59's comparison of a recipe's MinHash dedup with datatrove's: run
small, so that the script keeps working as the build, its dedup and the test helpers it imports
change. The figures themselves are `make perf-dedup`'s (docs/performance.md)."""

from __future__ import annotations

import re

import pytest

import testcache
from conftest import run_script

pytestmark = [pytest.mark.slow, pytest.mark.integration]


def test_the_smoke_run_finds_the_planted_pairs_and_keeps_one_copy_of_each_article(tmp_path):
    done = run_script("perf_dedup.py", "--smoke", "--work", str(tmp_path))
    assert done.returncode == 0, done.stderr
    assert "datatrove: skipped (--smoke)" in done.stdout
    # The planted pairs of true Jaccard 0.8+ are found (LSH's odds: 92% at 0.8, 99% at 0.85), and
    # hardly any below 0.5 (under 1% each): the bounds allow a change of hash functions.
    recall = re.search(r"bertdata +recall \(pairs J >= 0.8 found\) (\d+)/(\d+)", done.stdout)
    assert recall and int(recall[1]) >= 0.9 * int(recall[2]) and int(recall[2]) > 10, done.stdout
    low = re.search(r"flagged pairs with J < 0.5: (\d+) of (\d+) flagged", done.stdout)
    assert low and int(low[1]) <= 2 and int(low[2]) > 20, done.stdout
    # 120 pairs of different pieces of the articles: no cluster joins two of them.
    assert "planted: 120 documents and an edited copy of each" in done.stdout
    assert re.search(r"bertdata +recall .*; merges across planted pairs: 0\n", done.stdout), done.stdout
    # Two retitled copies of the 96 articles: one of each kept.
    assert "kept, grown x2 (192 documents" in done.stdout
    assert ": bertdata 96 (of 192 read)" in done.stdout
    assert "dedup's own cost in bertdata's build:" in done.stdout


@pytest.mark.skipif(not testcache.venv_python("datatrove").exists(),
                    reason="datatrove's virtualenv is not made: `make perf-dedup` makes it from the package index")
def test_datatroves_side_keeps_what_bertdata_keeps_of_the_grown_corpus(tmp_path):
    done = run_script("perf_dedup.py", "--copies", "2", "--pairs", "40", "--runs", "1", "--work", str(tmp_path))
    assert done.returncode == 0, done.stderr
    assert "datatrove recall" in done.stdout
    assert ("bertdata 96 (of 192 read), datatrove 96; kept by both 96, by bertdata only 0, by datatrove only 0"
            in done.stdout), done.stdout
    assert "datatrove/bertdata, CPU:" in done.stdout
