"""Shared fixtures: the ../shared test data (skip where absent) and CLI helpers."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "data"
WIKI_FRAGMENT = SHARED / "wiki" / "enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2"
VOCAB = SHARED / "vocab" / "bert-base-uncased-vocab.txt"
PARITY = SHARED / "parity"


def need_shared(path: Path = SHARED) -> Path:
    if not path.exists():
        pytest.skip(f"{path} is absent: the shared test data sits beside the project only in CI and dev sessions")
    return path


def run_cli(*args: str, check: bool = True, timeout: float = 600, **kwargs) -> subprocess.CompletedProcess:
    """Run `bertdata ARGS` in a fresh interpreter, as a user would."""
    proc = subprocess.run([sys.executable, "-m", "bertdata.cli", *map(str, args)], capture_output=True,
                          text=True, timeout=timeout, **kwargs)
    if check and proc.returncode != 0:
        raise AssertionError(f"bertdata {' '.join(map(str, args))} exited {proc.returncode}:\n{proc.stderr}")
    return proc
