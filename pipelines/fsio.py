"""File I/O through Beam's FileSystems, so the same pipeline writes to local disk, gs://, s3:// or hdfs://."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator

from apache_beam.io.filesystem import BeamIOError
from apache_beam.io.filesystems import FileSystems

from bertdata.fsutil import temp_basename


def join(*parts: str) -> str:
    return FileSystems.join(*parts)


def exists(path: str) -> bool:
    return FileSystems.exists(path)


def is_local(path: str) -> bool:
    return "://" not in path


def _temp_name(path: str) -> str:
    return FileSystems.join(FileSystems.split(path)[0], temp_basename())


@contextlib.contextmanager
def atomic_writer(path: str) -> Iterator:
    """A file to write under a temporary name, renamed onto `path` when the block succeeds,
    so readers never see a partial file."""
    tmp = _temp_name(path)
    try:
        with FileSystems.create(tmp, compression_type="uncompressed") as f:
            yield f
    except BaseException:
        with contextlib.suppress(Exception):
            FileSystems.delete([tmp])
        raise
    if FileSystems.exists(path):
        FileSystems.delete([path])
    FileSystems.rename([tmp], [path])


def write_bytes(path: str, data: bytes) -> None:
    with atomic_writer(path) as f:
        f.write(data)


def read_bytes(path: str) -> bytes:
    with FileSystems.open(path) as f:
        return f.read()


def read_range(path: str, offset: int, length: int) -> bytes:
    with FileSystems.open(path, compression_type="uncompressed") as f:
        f.seek(offset)
        data = f.read(length)
    if len(data) != length:
        raise OSError(f"{path}: {length} bytes expected at offset {offset}, found {len(data)}")
    return data


@contextlib.contextmanager
def local_input(path: str) -> Iterator[str]:
    """A local path for `path`: itself when local, else a temporary download."""
    if is_local(path):
        yield path
        return
    with tempfile.TemporaryDirectory(prefix="bertdata-") as tmpdir:
        local = os.path.join(tmpdir, FileSystems.split(path)[1])
        with FileSystems.open(path) as src, open(local, "wb") as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
        yield local


@contextlib.contextmanager
def local_output(path: str) -> Iterator[str]:
    """A local path to write; on success it is moved onto `path` (atomically where local)."""
    if is_local(path):
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        yield path
        return
    with tempfile.TemporaryDirectory(prefix="bertdata-") as tmpdir:
        local = os.path.join(tmpdir, FileSystems.split(path)[1])
        yield local
        tmp = _temp_name(path)
        with open(local, "rb") as src, FileSystems.create(tmp) as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
        if FileSystems.exists(path):
            FileSystems.delete([path])
        FileSystems.rename([tmp], [path])


def size(path: str) -> int:
    return FileSystems.match([path])[0].metadata_list[0].size_in_bytes


def remove_folder(folder: str) -> None:
    """A folder of plain files (none hidden), and the folder itself where that means something."""
    files = match(join(folder, "*"))
    if files:
        FileSystems.delete(files)
    if is_local(folder) and exists(folder):
        FileSystems.delete([folder])


def match(pattern: str) -> list[str]:
    try:
        result = FileSystems.match([pattern])[0]
    except BeamIOError:
        return []
    return sorted(m.path for m in result.metadata_list)
