"""Progress of a running build, read from what the pipeline has written so far.

Beam's runners report progress in runner-specific ways (or not at all), so workers leave
an empty marker file per finished dump range, and the launcher counts markers, text
shards and hdf5 shards through FileSystems: the same bars on every runner.
"""

from __future__ import annotations

import fnmatch
import threading

from tqdm import tqdm

from bertdata.pipelines.runtime import fsio

MARKERS = "progress"
POLL_SECONDS = 1.0
# A listing of an object store is a billed request, and slower: the bars move less often there.
STORE_POLL_SECONDS = 5.0


def mark_done(work_dir: str, item: tuple) -> None:
    fsio.write_bytes(fsio.join(work_dir, MARKERS, "-".join(map(str, item))), b"")


def reading_bars(markers: list[tuple]) -> list[tuple[str, str, int]]:
    """The text stage's bars, from the markers its work items will leave: (what, marker glob, total)
    for the dump's ranges, and for each corpus of a recipe its files."""
    bars = []
    ranges = sum(len(m) == 2 for m in markers)
    if ranges:
        bars.append(("reading and cleaning the dump", "[0-9]*", ranges))
    corpora: dict = {}
    for marker in markers:
        if len(marker) == 1:
            name = marker[0].split("~")[1]
            corpora[name] = corpora.get(name, 0) + 1
    bars += [(f"reading corpus {name}", f"corpus~{name}~*", n) for name, n in corpora.items()]
    return bars


class Watcher:
    """Bars for the text stage's reading (the dump's ranges, each corpus's files) and the hdf5
    shards written, updated from a thread."""

    def __init__(self, console, work_dir: str, text_manifest, reading: list[tuple[str, str, int]],
                 phase_dirs: list[str]):
        """`reading`: (what, marker glob, total) of each bar of the text stage (`reading_bars`);
        `phase_dirs`: a glob per phase folder matching one file of each finished shard;
        `text_manifest()` gives the text stage's StageManifest once it has ended, else None."""
        self.console, self.work_dir, self.text_manifest = console, work_dir, text_manifest
        self.reading, self.phase_dirs = reading, phase_dirs
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="build-progress", daemon=True)

    def __enter__(self) -> "Watcher":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def _bar(self, total: int, desc: str, unit: str) -> tqdm:
        return tqdm(total=total, desc=desc, unit=unit, file=self.console, disable=None, leave=False)

    def _watch(self) -> None:
        reading = [(self._bar(total, what, "range" if glob[0] == "[" else "file"), glob)
                   for what, glob, total in self.reading]
        shards = None
        poll = POLL_SECONDS if fsio.is_local(self.work_dir) else STORE_POLL_SECONDS
        while not self._stop.wait(poll):
            if reading:
                done = [fsio.split(p)[1] for p in fsio.match(fsio.join(self.work_dir, MARKERS, "*"))]
                for bar, glob in reading:
                    bar.update(sum(fnmatch.fnmatchcase(name, glob) for name in done) - bar.n)
            text = self.text_manifest() if self.phase_dirs and shards is None else None
            if text is not None:
                for bar, _ in reading:  # the text stage is over
                    bar.update(bar.total - bar.n)
                    bar.close()
                reading = []
                shards = self._bar(len(text.manifest["shards"]) * len(self.phase_dirs), "writing shard files", "shard")
            if shards is not None:
                done = sum(len(fsio.match(pattern)) for pattern in self.phase_dirs)
                shards.update(min(done, shards.total) - shards.n)
        for bar in [b for b, _ in reading] + [shards]:
            if bar is not None:
                bar.close()
