"""Local files written atomically: a temporary name in the same folder, renamed when complete."""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Iterator
from pathlib import Path

from bertdata.errors import BertdataError


def check_output_path(path: str | os.PathLike, force: bool = False) -> Path:
    """Fail early, before any work, if `path` cannot be written or would overwrite a file."""
    path = Path(path)
    folder = path.parent
    if not folder.is_dir():
        raise BertdataError(f"{path}: output folder {folder} does not exist")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise BertdataError(f"{path}: output folder {folder} is not writable")
    if path.is_dir():
        raise BertdataError(f"{path}: is a folder; give a file name")
    if path.exists() and not force:
        raise BertdataError(f"{path}: already exists; pass --force to overwrite it")
    return path


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
