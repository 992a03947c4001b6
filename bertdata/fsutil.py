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


def temp_name(path: str | os.PathLike) -> Path:
    """A hidden name beside `path`, unique per writer, so a crash never leaves `path` half-written."""
    path = Path(path)
    return path.with_name(f".{path.name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}")


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
