"""File I/O through Beam's FileSystems, so the same pipeline writes to local disk, gs://, s3:// or hdfs://.

FileSystems takes its options (an object store's endpoint and credentials) per process: the
launcher sets them with `configure`, and every DoFn that reads or writes files is a
`FilesDoFn`, which carries them to whichever process or cluster worker runs it.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import tempfile
import threading
from collections.abc import Iterator, Sequence

import apache_beam as beam
from apache_beam.io.filesystem import BeamIOError, CompressionTypes, FileSystem
from apache_beam.io.filesystems import FileSystems
from apache_beam.options.pipeline_options import PipelineOptions

from bertdata.fsutil import temp_basename
from bertdata.pipelines.runtime.pool import working_on


# The Beam options this process's FileSystems was configured with.
_options: tuple[str, ...] = ()
_threads = threading.local()


def configure(beam_args: Sequence[str]) -> None:
    """Give this process's FileSystems the Beam options `beam_args` (see bertdata.pipelines.runtime.stores)."""
    global _options
    _options = tuple(beam_args)
    FileSystems.set_options(PipelineOptions(list(_options)))


def options() -> PipelineOptions:
    return PipelineOptions(list(_options))


class FilesDoFn(beam.DoFn):
    """A DoFn that reads or writes through FileSystems: it takes the launcher's file-system
    options along, since a cluster worker (Dask's) runs DoFns with none of the pipeline's."""

    def __init__(self):
        super().__init__()
        self.file_options = _options

    def setup(self):
        if self.file_options != _options:
            configure(self.file_options)

    def finish_bundle(self):
        # What a DoFn noted its worker was on (see pool.working_on) is done.
        working_on(None)


def join(*parts: str) -> str:
    return FileSystems.join(*parts)


def split(path: str) -> tuple[str, str]:
    return FileSystems.split(path)


def is_local(path: str) -> bool:
    return "://" not in path


def gcs_client(options):
    """A google-cloud-storage client for Beam's options: an anonymous one for an emulator
    (STORAGE_EMULATOR_HOST), where Beam would first look for credentials for half a minute."""
    from google.cloud import storage

    if os.environ.get("STORAGE_EMULATOR_HOST"):
        return storage.Client.create_anonymous_client()
    from apache_beam.options.pipeline_options import GoogleCloudOptions

    return storage.Client(project=options.view_as(GoogleCloudOptions).project)


class _StoreFiles:
    """s3:// and gs:// paths on Beam's S3IO / GcsIO, one per thread and store: Beam's file
    systems build a new client for every call, which costs more CPU than most calls."""

    def __init__(self, scheme: str):
        self.scheme = scheme
        if scheme == "s3":
            from apache_beam.io.aws import s3io

            self.io = s3io.S3IO(options=options())
        else:
            from apache_beam.io.gcp import gcsio

            self.io = gcsio.GcsIO(storage_client=gcs_client(options()), pipeline_options=options())

    def open(self, path: str, buffer: int):
        return self.io.open(path, "rb", read_buffer_size=buffer)

    def create(self, path: str):
        return self.io.open(path, "wb")

    def write_bytes(self, path: str, data: bytes) -> None:
        # One request: atomic on its own, so no temporary and copy (and Beam's S3 writer
        # cannot write an empty object: S3 refuses a multipart upload of no parts).
        bucket, key = path.split("://", 1)[1].split("/", 1)
        if self.scheme == "s3":
            self.io.client.client.put_object(Bucket=bucket, Key=key, Body=data)
        else:
            self.io.client.bucket(bucket).blob(key).upload_from_string(data)

    def upload(self, local: str, path: str) -> None:
        # Atomic on its own: S3's managed upload aborts a failed multipart upload, and a GCS
        # upload appears only once finished; so no temporary and copy.
        bucket, key = path.split("://", 1)[1].split("/", 1)
        if self.scheme == "s3":
            self.io.client.client.upload_file(local, bucket, key)
        else:
            self.io.client.bucket(bucket).blob(key).upload_from_filename(local)

    def exists(self, path: str) -> bool:
        return self.io.exists(path)

    def delete(self, paths: list[str]) -> None:
        if self.scheme == "s3":
            failed = {p: e for p, e in self.io.delete_paths(paths).items() if e is not None}
        else:
            failed = {p: e for p, e in self.io.delete_batch(paths) if e is not None}
        if failed:
            raise BeamIOError("Delete operation failed", failed)

    def replace(self, src: str, dest: str) -> None:
        self.io.rename(src, dest)  # a copy, which overwrites, then a delete

    def match(self, pattern: str) -> list[str]:
        prefix = re.split(r"[*?\[]", pattern, maxsplit=1)[0]
        regex = re.compile(FileSystem.translate_pattern(pattern))
        return [path for path, _size in self.io.list_files(prefix) if regex.match(path)]

    def size(self, path: str) -> int:
        return self.io.size(path)


class _BeamFiles:
    """Any other path, through FileSystems."""

    def open(self, path: str, buffer: int):
        return FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED)

    def create(self, path: str):
        return FileSystems.create(path, compression_type=CompressionTypes.UNCOMPRESSED)

    def write_bytes(self, path: str, data: bytes) -> None:
        with atomic_writer(path) as f:
            f.write(data)

    def upload(self, local: str, path: str) -> None:
        with open(local, "rb") as src, atomic_writer(path) as dst:
            shutil.copyfileobj(src, dst, READ_BUFFER)

    def exists(self, path: str) -> bool:
        return FileSystems.exists(path)

    def delete(self, paths: list[str]) -> None:
        FileSystems.delete(paths)

    def replace(self, src: str, dest: str) -> None:
        if FileSystems.exists(dest):
            FileSystems.delete([dest])
        FileSystems.rename([src], [dest])

    def match(self, pattern: str) -> list[str]:
        try:
            result = FileSystems.match([pattern])[0]
        except BeamIOError:
            return []
        return [m.path for m in result.metadata_list]

    def size(self, path: str) -> int:
        return FileSystems.match([path])[0].metadata_list[0].size_in_bytes


_BEAM_FILES = _BeamFiles()


def _files(path: str):
    scheme = path.split("://", 1)[0] if "://" in path else None
    if scheme not in ("s3", "gs"):
        return _BEAM_FILES
    if getattr(_threads, "options", None) != _options:
        _threads.stores, _threads.options = {}, _options
    if scheme not in _threads.stores:
        _threads.stores[scheme] = _StoreFiles(scheme)
    return _threads.stores[scheme]


# What reads of a whole file buffer: Beam's S3 default (16 MB) would fetch 16 MB for a
# manifest of a few KB.
READ_BUFFER = 1 << 20


def open_file(path: str, buffer: int = READ_BUFFER):
    """`path`'s raw bytes to read (no decompression by extension: readers want the bytes)."""
    return _files(path).open(path, buffer)


def exists(path: str) -> bool:
    return _files(path).exists(path)


def delete(paths: list[str]) -> None:
    if paths:
        _files(paths[0]).delete(paths)


def match(pattern: str) -> list[str]:
    return sorted(_files(pattern).match(pattern))


def listing(folder: str) -> dict[str, str]:
    """The folder's files, {name: path}."""
    return {split(path)[1]: path for path in match(join(folder, "*"))}


def tree(folder: str) -> dict[str, str]:
    """Every file below the folder, at any depth: {path relative to the folder: path}."""
    if is_local(folder):
        root = folder.rstrip(os.sep) or os.sep
        return {os.path.relpath(os.path.join(d, name), root): os.path.join(d, name)
                for d, _dirs, names in os.walk(root) for name in names}
    prefix = folder.rstrip("/") + "/"
    return {path[len(prefix):]: path for path in _objects(folder)}


def replace(src: str, dest: str) -> None:
    """`src` renamed onto `dest` (a copy and a delete on an object store), its folder made as needed."""
    if is_local(dest):
        os.makedirs(os.path.dirname(dest) or ".", exist_ok=True)
    _files(dest).replace(src, dest)


def size(path: str) -> int:
    return _files(path).size(path)


def _temp_name(path: str) -> str:
    return join(split(path)[0], temp_basename())


@contextlib.contextmanager
def atomic_writer(path: str) -> Iterator:
    """A file to write under a temporary name, renamed onto `path` when the block succeeds,
    so readers never see a partial file (an object store would publish a failed upload)."""
    tmp = _temp_name(path)
    files = _files(path)
    try:
        with files.create(tmp) as f:
            yield f
    except BaseException:
        with contextlib.suppress(Exception):
            files.delete([tmp])
        raise
    files.replace(tmp, path)


def write_bytes(path: str, data: bytes) -> None:
    """`path` holds `data` once this returns, and never less than all of it."""
    _files(path).write_bytes(path, data)


def read_bytes(path: str) -> bytes:
    with open_file(path) as f:
        return f.read()


def read_range(path: str, offset: int, length: int) -> bytes:
    with open_file(path, max(length, 1)) as f:
        f.seek(offset)
        data = f.read(length)
    if len(data) != length:
        raise OSError(f"{path}: {length} bytes expected at offset {offset}, found {len(data)}")
    return data


@contextlib.contextmanager
def scratch_writer(path: str) -> Iterator:
    """A work file to write in place: only the record that names it, emitted once it is
    written, leads a reader to it, and a retry overwrites it; so no temporary (a copy on an
    object store)."""
    with _files(path).create(path) as f:
        yield f


def upload(local: str, path: str) -> None:
    """The local file `local` copied onto `path`, which never holds less than all of it."""
    _files(path).upload(local, path)


@contextlib.contextmanager
def local_input(path: str) -> Iterator[str]:
    """A local path for `path`: itself when local, else a temporary download."""
    if is_local(path):
        yield path
        return
    with tempfile.TemporaryDirectory(prefix="bertdata-") as tmpdir:
        local = os.path.join(tmpdir, split(path)[1])
        with open_file(path) as src, open(local, "wb") as dst:
            shutil.copyfileobj(src, dst, READ_BUFFER)
        yield local


@contextlib.contextmanager
def local_output(path: str) -> Iterator[str]:
    """A local path to write; on success it is moved onto `path` (atomically where local)."""
    if is_local(path):
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        yield path
        return
    with tempfile.TemporaryDirectory(prefix="bertdata-") as tmpdir:
        local = os.path.join(tmpdir, split(path)[1])
        yield local
        upload(local, path)


@contextlib.contextmanager
def local_folder(folder: str) -> Iterator[str]:
    """A local folder to write files in; on success they are at `folder` (itself where local)."""
    if is_local(folder):
        os.makedirs(folder, exist_ok=True)
        yield folder
        return
    with tempfile.TemporaryDirectory(prefix="bertdata-") as tmpdir:
        yield tmpdir
        for d, _dirs, names in os.walk(tmpdir):
            for name in names:
                upload(os.path.join(d, name), join(folder, os.path.relpath(os.path.join(d, name), tmpdir)))


def remove_folder(folder: str) -> None:
    """A folder of plain files (none hidden), and the folder itself where that means something."""
    delete(match(join(folder, "*")))
    if is_local(folder) and exists(folder):
        delete([folder])


def remove_tree(folder: str) -> None:
    """A folder and everything under it, at any depth."""
    if not is_local(folder):
        delete(_objects(folder))
    elif exists(folder):
        delete([folder])


def _objects(prefix: str) -> list[str]:
    """Every object under the folder `prefix` of a store, at any depth."""
    return [p for p in match(prefix.rstrip("/") + "/**") if not p.endswith("/")]


@contextlib.contextmanager
def staged_inputs(paths: Sequence[str]) -> Iterator[list[str]]:
    """`paths` as local paths: local ones as they are; a stored file, or every object of a
    stored folder, copied into a temporary folder for the block (commands that read files
    with libraries that want local ones: h5py, pyarrow)."""
    with contextlib.ExitStack() as stack:
        local = []
        for path in paths:
            if is_local(path):
                local.append(path)
                continue
            root = os.path.join(stack.enter_context(tempfile.TemporaryDirectory(prefix="bertdata-")),
                                split(path.rstrip("/"))[1])
            if exists(path):
                copies = {path: root}
            else:
                copies = {obj: os.path.join(root, obj[len(path.rstrip("/")) + 1:]) for obj in _objects(path)}
                if not copies:
                    from bertdata.errors import BertdataError

                    raise BertdataError(f"{path}: not found")
            for obj, target in copies.items():
                os.makedirs(os.path.dirname(target), exist_ok=True)
                with open_file(obj) as src, open(target, "wb") as dst:
                    shutil.copyfileobj(src, dst, READ_BUFFER)
            local.append(root)
        yield local


@contextlib.contextmanager
def staged_output(folder: str, force: bool) -> Iterator[str]:
    """A local folder to write `folder`'s files into; on success each is copied onto the store
    (atomically), manifests last, and with `force` objects the run did not write are removed.
    A stored folder that holds objects is refused without `force`."""
    if is_local(folder):
        yield folder
        return
    from bertdata.errors import BertdataError
    from bertdata.manifest import MANIFEST

    old = _objects(folder)
    if old and not force:
        raise BertdataError(f"{folder}: holds {len(old)} objects already; pass --force to replace them, or choose "
                            "another --output")
    with tempfile.TemporaryDirectory(prefix="bertdata-") as local:
        yield local
        names = sorted((os.path.relpath(os.path.join(root, f), local) for root, _, files in os.walk(local)
                        for f in files), key=lambda n: (os.path.basename(n) == MANIFEST, n))
        for name in names:
            upload(os.path.join(local, name), join(folder, name))
        written = {join(folder, n) for n in names}
        delete([p for p in old if p not in written])
