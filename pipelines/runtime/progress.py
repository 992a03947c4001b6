"""Progress of a running build, read from what the pipeline has written so far.

Beam's runners report progress in runner-specific ways (or not at all), so workers leave
an empty marker file per finished dump range, and the launcher counts markers, text
shards and hdf5 shards through FileSystems: the same bars on every runner.
"""

from __future__ import annotations

import threading

from tqdm import tqdm

from bertdata.pipelines.runtime import fsio

MARKERS = "progress"
POLL_SECONDS = 1.0
# A listing of an object store is a billed request, and slower: the bars move less often there.
STORE_POLL_SECONDS = 5.0


def mark_done(work_dir: str, item: tuple) -> None:
    fsio.write_bytes(fsio.join(work_dir, MARKERS, "-".join(map(str, item))), b"")


class Watcher:
    """Bars for the dump ranges read and the hdf5 shards written, updated from a thread."""

    def __init__(self, console, work_dir: str, text_manifest, ranges: int | None, phase_dirs: list[str]):
        """`phase_dirs`: a glob per phase folder matching one file of each finished shard."""
        """`text_manifest()` gives the text stage's StageManifest once it has ended, else None."""
        self.console, self.work_dir, self.text_manifest = console, work_dir, text_manifest
        self.ranges, self.phase_dirs = ranges, phase_dirs
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
        ranges = self._bar(self.ranges, "reading and cleaning the dump", "range") if self.ranges else None
        shards = None
        poll = POLL_SECONDS if fsio.is_local(self.work_dir) else STORE_POLL_SECONDS
        while not self._stop.wait(poll):
            if ranges is not None:
                ranges.update(len(fsio.match(fsio.join(self.work_dir, MARKERS, "*"))) - ranges.n)
            text = self.text_manifest() if self.phase_dirs and shards is None else None
            if text is not None:
                if ranges is not None:  # the text stage is over
                    ranges.update(ranges.total - ranges.n)
                    ranges.close()
                    ranges = None
                shards = self._bar(len(text.manifest["shards"]) * len(self.phase_dirs), "writing shard files", "shard")
            if shards is not None:
                done = sum(len(fsio.match(pattern)) for pattern in self.phase_dirs)
                shards.update(min(done, shards.total) - shards.n)
        for bar in (ranges, shards):
            if bar is not None:
                bar.close()
