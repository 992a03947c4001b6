"""Local files written atomically (a temporary name in the same folder, renamed when complete),
locks, input errors named by file, the download cache, files that are not text, and the checks
every command that writes runs on its output before any work: can the folder be made, can it hold
files (the room a command needs is checked against `bertdata.estimate.free_bytes` by the command:
`build`'s plan, `shard`)."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import socket
import tempfile
import time
import uuid
from collections.abc import Iterable, Iterator
from typing import Any
from pathlib import Path

from bertdata.errors import BertdataError


def check_output_path(path: str | os.PathLike, force: bool = False,
                      inputs: Iterable[str | os.PathLike] = ()) -> Path:
    """Fail early, before any work, if `path` cannot be written, would overwrite a file (unless
    `force`) or is one of the command's `inputs` (whatever `force` says)."""
    path = Path(path)
    for given in inputs:
        if same_file(path, given):
            raise BertdataError(f"{path}: is also an input of this command ({given}); writing it would destroy "
                                "what it reads: choose another output")
    folder = path.parent
    if not folder.is_dir():
        raise BertdataError(f"{path}: output folder {folder} does not exist")
    if path.is_dir():
        raise BertdataError(f"{path}: is a folder; give a file name")
    if path.exists() and not force:
        raise BertdataError(f"{path}: already exists; pass --force to overwrite it")
    check_holds_files(folder, path)
    return path


def make_output_folder(folder: str, below: int = 0) -> list[str]:
    """Make `folder`, a command's output folder, and its missing parents, refusing in one line
    one that cannot be made or cannot hold the command's files (see `check_holds_files`).
    `below`: the length of the longest path the command writes under it. Returns the folders
    it made, outermost first, for `remove_made` should the command be refused later."""
    absolute = os.path.abspath(folder)
    if below:
        length = len(os.fsencode(absolute))
        with contextlib.suppress(OSError, ValueError):
            limit = os.pathconf(_existing_parent(absolute), "PC_PATH_MAX")
            if length + below > limit:
                raise BertdataError(f"{folder[:60]}…: cannot create the output folder (its path is {length:,} bytes "
                                    f"long; with the files written under it, paths would pass the system's limit of "
                                    f"{limit:,} bytes): choose a shorter --output")
    if os.path.lexists(absolute) and not os.path.isdir(absolute):
        raise BertdataError(f"{folder}: exists and is not a folder; choose another --output")
    missing = []
    parent = absolute
    while not os.path.lexists(parent):
        missing.append(parent)
        parent = os.path.dirname(parent)
    made = missing[::-1]
    try:
        os.makedirs(absolute, exist_ok=True)
    except OSError as err:
        remove_made(made)  # those made before the one refused
        raise BertdataError(f"{folder}: cannot create the output folder ({err.strerror})") from None
    try:
        check_holds_files(folder)
    except BertdataError:
        remove_made(made)
        raise
    return made


def remove_made(made: list[str]) -> None:
    """Remove the folders `make_output_folder` made, innermost first, where they are still empty."""
    for folder in reversed(made):
        with contextlib.suppress(OSError):  # not empty: something was written, and stays
            os.rmdir(folder)


def check_holds_files(folder: str | os.PathLike, shown: str | os.PathLike | None = None) -> None:
    """Refuse a folder no file can be created in, saying why (as `shown`: the path the user gave).
    A file is created and removed, as `os.access` answers yes for root whatever the file system
    says: /proc and /sys hold no files, and a read-only mount refuses everyone."""
    try:
        handle, probe = tempfile.mkstemp(prefix=TEMP_PREFIX, dir=folder)
    except OSError as err:
        where = f"{shown}: cannot create files in {folder}" if shown is not None else \
            f"{folder}: cannot create files there"
        raise BertdataError(f"{where} ({err.strerror}){_holds_no_files(folder)}; choose another --output") from None
    os.close(handle)
    os.unlink(probe)


def _holds_no_files(folder: str | os.PathLike) -> str:
    """": it is on a proc file system, which holds no files" where `folder` is on one of the
    kernel's file systems that have no blocks to hold files in (proc, sysfs, cgroup...), else ""."""
    try:
        if os.statvfs(folder).f_blocks:
            return ""
    except OSError:
        return ""
    return f": it is on {_file_system(folder) or 'a file system'}, which holds no files"


def _file_system(folder: str | os.PathLike) -> str | None:
    """The type of the file system `folder` is on ("a proc file system"), from Linux's mount table."""
    path = os.fsencode(os.path.realpath(folder))
    best: tuple[bytes, str | None] = (b"", None)
    with contextlib.suppress(OSError):
        with open("/proc/self/mounts", "rb") as mounts:
            for line in mounts:
                fields = line.split()
                if len(fields) < 3:
                    continue
                point = _MOUNT_ESCAPE.sub(lambda m: bytes([int(m[1], 8)]), fields[1])  # a space is \040
                inside = path == point or path.startswith(point.rstrip(b"/") + b"/")
                if inside and len(point) >= len(best[0]):
                    best = (point, fields[2].decode(errors="replace"))
    return f"a {best[1]} file system" if best[1] else None


_MOUNT_ESCAPE = re.compile(rb"\\([0-7]{3})")


def _existing_parent(path: str) -> str:
    while not os.path.isdir(path) and os.path.dirname(path) != path:
        path = os.path.dirname(path)
    return path


def same_file(a: str | os.PathLike, b: str | os.PathLike) -> bool:
    """Whether two paths name one file: the same resolved path, or the same inode (a hard link,
    a bind mount)."""
    if os.path.realpath(a) == os.path.realpath(b):
        return True
    try:
        return os.path.samefile(a, b)
    except OSError:  # one of them does not exist (yet)
        return False


@contextlib.contextmanager
def input_errors(path: str | os.PathLike, what: str) -> Iterator[None]:
    """Turn an OS error while opening or reading `path` into one line that says what the
    file was meant to be (`what`: "vocab file", "dump file", ...)."""
    try:
        yield
    except FileNotFoundError:
        raise BertdataError(f"{path}: {what} not found") from None
    except IsADirectoryError:
        raise BertdataError(f"{path}: is a directory, not a {what}") from None
    except OSError as err:
        raise BertdataError(f"{path}: cannot read {what} ({err.strerror or err})") from None


def read_bounded(path: str | os.PathLike, limit: int, what: str) -> bytes:
    """The bytes of `path`, read once (a pipe's too), refused past `limit`: a device such as
    /dev/zero, or a link to one (a hub cache's files are links), would otherwise be read until
    memory runs out."""
    with input_errors(path, what), open(path, "rb") as f:
        data = f.read(limit + 1)
    if len(data) > limit:
        raise BertdataError(f"{path}: more than {size_text(limit)}, not a {what}")
    return data


def load_json(data: bytes | str) -> Any:
    """json.loads, JSON nested past Python's recursion limit raised as the JSONDecodeError (a
    ValueError) that every reader already turns into one line naming its file."""
    try:
        return json.loads(data)
    except RecursionError:
        raise json.JSONDecodeError("nested too deeply", data if isinstance(data, str) else "", 0) from None


# Temporary files sit beside their final file, for an atomic rename, but never carry its
# name: trainers pick every file whose name contains "training" (NVIDIA's) or "train"
# (PaddleNLP's), hidden ones too, and would crash on a half-written one.
TEMP_PREFIX = ".bertdata-tmp-"


def temp_basename() -> str:
    """A hidden file name unique per writer (the pid tells whose it was)."""
    return f"{TEMP_PREFIX}{os.getpid()}-{uuid.uuid4().hex[:8]}"


def temp_name(path: str | os.PathLike) -> Path:
    """A temporary path beside `path`, so a crash never leaves `path` half-written."""
    return Path(path).with_name(temp_basename())


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path to write; rename it onto `path` only if the block succeeds."""
    final = Path(path)
    tmp = temp_name(final)
    try:
        yield tmp
        os.replace(tmp, final)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        raise


def _process_start(pid: int) -> str | None:
    """When process `pid` started (Linux: clock ticks since boot), to tell it from a later
    process given the same pid -- in a restarted container the same pids come back."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def this_process() -> dict[str, Any]:
    """What identifies this process to a later run: pid, host, start time."""
    return {"pid": os.getpid(), "host": socket.gethostname(), "start": _process_start(os.getpid()),
            "since": time.strftime("%Y-%m-%d %H:%M:%S")}


def owner_gone(owner: Any) -> bool:
    """Whether the process an ownership record names is certainly dead: it ran on this host
    and its pid is gone (or now belongs to a process that started later)."""
    if not (isinstance(owner, dict) and type(owner.get("pid")) is int and owner["pid"] > 0
            and owner.get("host") == socket.gethostname()):
        return False
    try:
        os.kill(owner["pid"], 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # alive, another user's
        pass
    start = _process_start(owner["pid"])
    return owner.get("start") is not None and start is not None and start != owner["start"]


LOCK_NAME = ".bertdata-lock"


def _link_lock(record: Path, path: Path) -> bool:
    """Put the lock `record` in place at `path`; False where a lock is there already."""
    try:
        os.link(record, path)
    except FileExistsError:
        return False
    except OSError as err:
        if err.errno not in (errno.EPERM, errno.EOPNOTSUPP, errno.EMLINK):
            raise
        # A file system without hard links (FAT, some FUSE mounts): created, then written.
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            return False
        with os.fdopen(fd, "w") as f:
            f.write(record.read_text())
    return True


def lock_owner_text(owner: Any, path: str | os.PathLike) -> str:
    """Who holds the lock at `path`, as its record says, for a refusal."""
    if isinstance(owner, dict):
        return f"pid {owner.get('pid')} on {owner.get('host')}, since {owner.get('since')}"
    return f"unknown; remove {path} if no bertdata runs here"


@contextlib.contextmanager
def folder_lock(folder: str | os.PathLike, what: str) -> Iterator[list[str]]:
    """One writer per output folder: a lock file naming this process, refused while its
    owner lives, taken over once it is dead. Yields notes to show (a lock taken over)."""
    path = Path(folder) / LOCK_NAME
    notes: list[str] = []
    # The record is written whole under a temporary name, then linked into place (a link, unlike a
    # rename, fails where the lock exists): a run that finds the lock always reads who holds it.
    record = Path(folder) / temp_basename()
    record.write_text(json.dumps(this_process()))
    try:
        while not _link_lock(record, path):
            try:
                owner = json.loads(path.read_text())
            except FileNotFoundError:  # released, or taken over, since: try again
                continue
            except (OSError, ValueError):
                owner = None
            if not owner_gone(owner):
                raise BertdataError(f"{folder}: another {what} is writing here ({lock_owner_text(owner, path)}); "
                                    "wait for it or choose another output folder") from None
            # Renamed away first: of two runs taking over together, only one can rename it.
            stale = path.with_name(temp_basename())
            with contextlib.suppress(FileNotFoundError):
                os.rename(path, stale)
                stale.unlink()
                notes.append(f"took over the lock of a {what} that was killed (pid {owner['pid']})")
    finally:
        record.unlink()
    try:
        yield notes
    finally:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


def cache_dir() -> Path:
    """Where downloaded files are kept: $XDG_CACHE_HOME/bertdata, else ~/.cache/bertdata."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "bertdata"


# Files a text file (a text shard, a book) is easily mistaken for. Their bytes are rarely valid
# UTF-8, and with --errors replace they would tokenize into instances of garbage, so they are
# named instead.
SIGNATURES = (
    (b"\x89HDF\r\n\x1a\n", "an HDF5 file (an instance shard?)"),
    (b"BZh", "bz2-compressed"),
    (b"\x1f\x8b", "gzip-compressed"),
    (b"PK\x03\x04", "a zip archive"),
    (b"PK\x05\x06", "an empty zip archive"),
    (b"\xfd7zXZ\x00", "xz-compressed"),
    (b"\x28\xb5\x2f\xfd", "zstd-compressed"),
)


def binary_kind(head: bytes) -> str | None:
    """What a file starting with `head` is, when its signature says it is not text."""
    for magic, kind in SIGNATURES:
        # bz2's "BZh" is three letters a text could start with, so the block size digit and
        # the first block's (or an empty stream's end) marker must follow.
        if head.startswith(magic) and (magic != b"BZh" or head[3:4].isdigit()
                                       and head[4:10] in (b"1AY&SY", b"\x17rE8P\x90")):
            return kind
    return None


def size_text(n: float) -> str:
    """A byte count as people read it: kB, MB or GB."""
    if n < 1e5:
        return f"{n / 1e3:,.0f} kB"
    return f"{n / 1e9:,.1f} GB" if n >= 1e8 else f"{n / 1e6:,.1f} MB"
