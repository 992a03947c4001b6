"""scripts/perf_corpora.py, issue 58's speed check against datatrove: run small, so that the
script keeps working as the build and the test helpers it imports change. The figures themselves
are `make perf-corpora`'s (docs/performance.md)."""

from __future__ import annotations

import pytest

import testcache
from conftest import run_script

pytestmark = [pytest.mark.slow, pytest.mark.integration]


def test_the_smoke_run_prints_bertdatas_figures_for_both_tokenizers(tmp_path):
    done = run_script("perf_corpora.py", "--smoke", "--work", str(tmp_path))
    assert done.returncode == 0, done.stderr
    assert "datatrove: skipped (--smoke)" in done.stdout
    lines = [line for line in done.stdout.splitlines() if line.strip().startswith("bertdata ")]
    assert len(lines) == 2, done.stdout  # WordPiece and byte-level BPE
    for line in lines:
        tokens = int(line.split()[1].replace(",", ""))
        assert tokens > 10_000 and "tokens/s per core" in line


@pytest.mark.skipif(not testcache.venv_python("datatrove").exists(),
                    reason="datatrove's virtualenv is not made: `make perf-corpora` makes it from the package index")
def test_datatroves_side_runs_and_its_token_count_is_explained(tmp_path):
    done = run_script("perf_corpora.py", "--copies", "1", "--runs", "1", "--tokenizers", "wordpiece", "--work",
                      str(tmp_path))
    assert done.returncode == 0, done.stderr
    assert "bertdata/datatrove, tokens/s: CPU" in done.stdout
    # WordPiece ignores the newlines between paragraphs that bertdata's sentences drop: less the
    # special tokens, the two tools write the same tokens.
    counts = next(line for line in done.stdout.splitlines() if "token counts:" in line)
    assert counts.endswith("(+0.00%)"), counts
