"""The build's bars: the text stage's, one for the dump's ranges and one per corpus of a recipe,
moved by the markers its workers leave."""

from __future__ import annotations

import io
import time

from bertdata.pipelines.runtime import progress
from bertdata.pipelines.work import WorkItem


def test_a_bar_per_corpus_and_one_for_the_dump():
    items = [WorkItem("dump", "d.bz2", 0, 10), WorkItem("dump", "d.bz2", 10, 20),
             WorkItem("corpus", "a/1.parquet", corpus="edu"), WorkItem("corpus", "a/2.parquet", corpus="edu"),
             WorkItem("corpus", "c/1.json.gz", corpus="edu-x")]
    bars = progress.reading_bars([i.marker for i in items if i.marker is not None])
    assert bars == [("reading and cleaning the dump", "[0-9]*", 2), ("reading corpus edu", "corpus~edu~*", 2),
                    ("reading corpus edu-x", "corpus~edu-x~*", 1)]


class Console(io.StringIO):
    def isatty(self) -> bool:  # tqdm draws where the console is a terminal
        return True


def test_the_bars_count_each_corpus_own_markers(tmp_path, monkeypatch):
    monkeypatch.setattr(progress, "POLL_SECONDS", 0.01)
    items = [WorkItem("corpus", f"a/{k}.parquet", corpus="edu") for k in range(3)] + \
        [WorkItem("corpus", "c/1.json.gz", corpus="edu-x")]
    console = Console()
    work = str(tmp_path)
    with progress.Watcher(console, work, lambda: None, progress.reading_bars([i.marker for i in items]), []):
        for item in items[:2]:
            progress.mark_done(work, item.marker)
        time.sleep(0.2)
    shown = console.getvalue()
    assert "reading corpus edu: " in shown and "2/3" in shown and "reading corpus edu-x: " in shown and "0/1" in shown
