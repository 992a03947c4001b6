"""The sha1 of local dump files, remembered between runs.

Every build records its dump's sha1 (what Wikimedia publishes), and a re-run compares it to
decide what it may keep. Reading the whole English dump for it takes tens of seconds on one
core before any work starts, on every resume. So a file's sha1 is kept in the user's cache
folder under its real path, with the size, modification time, inode and device it had:
any change to those, as any rewrite of the file makes, means reading it again.
"""

from __future__ import annotations

import contextlib
import json
import os

from bertdata.fsutil import atomic_path, cache_dir

CACHE_FILE = "dump-sha1.json"
# Enough for every dump a user keeps; the oldest entries go first.
MAX_ENTRIES = 64


def file_identity(path: str) -> list[int]:
    st = os.stat(path)
    return [st.st_size, st.st_mtime_ns, st.st_ino, st.st_dev]


def _entries() -> dict:
    try:
        with open(cache_dir() / CACHE_FILE, encoding="utf-8") as f:
            entries = json.load(f)
        return entries if isinstance(entries, dict) else {}
    except (OSError, ValueError):  # none yet, or unreadable: it is only a cache
        return {}


def known_sha1(path: str) -> str | None:
    """The sha1 remembered for `path`, if the file has not changed since."""
    entry = _entries().get(os.path.realpath(path))
    with contextlib.suppress(OSError, TypeError, KeyError):
        if entry["identity"] == file_identity(path):
            return entry["sha1"]
    return None


def remember_sha1(path: str, sha1: str, identity: list[int]) -> None:
    """Keep `sha1` for `path` as it was when hashing began (`identity`, from `file_identity`):
    a file changed during the hash then no longer matches it."""
    entries, key = _entries(), os.path.realpath(path)
    entries.pop(key, None)  # to the end: the newest entry is the last to go
    entries[key] = {"identity": identity, "sha1": sha1}
    kept = dict(list(entries.items())[-MAX_ENTRIES:])
    with contextlib.suppress(OSError):  # a read-only home still builds, hashing every time
        cache_dir().mkdir(parents=True, exist_ok=True)
        with atomic_path(cache_dir() / CACHE_FILE) as tmp:
            tmp.write_text(json.dumps(kept, indent=1), encoding="utf-8")
