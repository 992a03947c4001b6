"""What a stopped build leaves behind: its files, and its processes' children (read from /proc)."""

from __future__ import annotations

import os
from pathlib import Path


def leftovers(out: Path) -> list[Path]:
    """What a stopped build must not leave: its lock, its work folder, temporary files."""
    from bertdata.fsutil import LOCK_NAME, TEMP_PREFIX
    from bertdata.text.shards import WORK_FOLDER

    return [p for p in out.rglob("*") if p.name in (LOCK_NAME, WORK_FOLDER) or p.name.startswith(TEMP_PREFIX)]


def child_pids(pid: int) -> list[int]:
    """The children of every thread of `pid` (Beam starts workers from threads of its own)."""
    found = []
    try:
        threads = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for tid in threads:
        try:
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                found += [int(c) for c in f.read().split()]
        except OSError:
            pass
    return found


def cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode()
    except OSError:
        return ""
