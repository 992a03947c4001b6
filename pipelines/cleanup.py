"""What a build removes, in one place: what a killed run left in a stage's folders (before the
stage runs), the work folder of temporaries (once the text stage is written, and as a build
ends), and what a failed or stopped run leaves (its workers first, so that none writes after)."""

from __future__ import annotations

import os
from collections.abc import Callable

from bertdata.fsutil import TEMP_PREFIX
from bertdata.manifest import MANIFEST
from bertdata.pipelines.manifests import WRITING
from bertdata.pipelines.runtime import fsio
from bertdata.pipelines.runtime.pool import WorkerPool
from bertdata.pipelines.runtime.stores import store_of


def remove_leftovers(folders: list[str], also: tuple[str, ...] = ()) -> list[str]:
    """The temporary files a killed or failed run left in `folders`, and their files matching
    `also` (what a stage made anew replaces); returns what it removed."""
    # A text stage names a folder for every shard count it may halve to (28 by default), and
    # each match is a glob through FileSystems: a local folder that does not exist is skipped.
    folders = [f for f in folders if not fsio.is_local(f) or os.path.isdir(f)]
    doomed = [path for folder in folders for pattern in (TEMP_PREFIX + "*", *also)
              for path in fsio.match(fsio.join(folder, pattern))]
    if doomed:
        fsio.delete(doomed)
    return doomed


def remove_temporaries(work_dir: str) -> None:
    """The work folder and all in it: every stage's run files and parts, and progress markers."""
    fsio.remove_tree(work_dir)


def mark_and_clear(folder: str, ours: Callable[[str], bool]) -> None:
    """Mark `folder` as being written, and remove the files `ours` says are its format's (by their
    path relative to it: a format may write subfolders), its manifest and temporaries: what an
    earlier build left (the stage's decision said they may go)."""
    listed = fsio.tree(folder)
    fsio.write_bytes(fsio.join(folder, WRITING), b"")
    stale = [path for name, path in listed.items()
             if ours(name) or name == MANIFEST or fsio.split(path)[1].startswith(TEMP_PREFIX)]
    if stale:
        fsio.delete(stale)


def clean_up_failed_run(pool: WorkerPool | None, output: str, work_dir: str, folders: list[str]) -> str:
    """End the run's workers, so that none writes after this, then remove the work folder and the
    half-written files in `folders`; says what was removed (the lock and the worker pool's
    folder go as the command ends)."""
    if pool is not None:
        pool.close()
    removed = []
    if not fsio.is_local(work_dir) or os.path.isdir(work_dir):
        remove_temporaries(work_dir)
        removed.append("its work folder")
    half_written = remove_leftovers(folders)
    if half_written:
        removed.append(f"{len(half_written)} half-written file{'s' if len(half_written) > 1 else ''}")
    if pool is not None:
        removed.append("its worker pool")
    if fsio.is_local(output) or store_of(output) is not None:
        removed.append("its lock")
    if not removed:
        return "nothing to remove"
    return (", ".join(removed[:-1]) + " and " if len(removed) > 1 else "") + removed[-1] + " removed"
