"""Shared fixtures: where the test data lies (the ../shared data, skipped where absent, and
the sample packaged with bertdata) and CLI helpers."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "data"
WIKI_FRAGMENT = SHARED / "wiki" / "enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2"
VOCAB = SHARED / "vocab" / "bert-base-uncased-vocab.txt"
PARITY = SHARED / "parity"
SHARD_A = PARITY / "shard_A.txt"
# The reference script's output for shard_A: phase 1, and phase 2 with dupe factor 2.
PARITY_128 = PARITY / "A_s12345_128_20_p15_d5.hdf5"
PARITY_512 = PARITY / "A_s12345_512_80_p15_d2.hdf5"
# Packaged, so tests that need only some WordPiece vocab run without ../shared.
SAMPLE_VOCAB = ROOT / "bertdata" / "sample" / "vocab.txt"


def signals_default() -> None:
    """For `preexec_fn`: a child that a test hangs up or interrupts gets SIGHUP as a closed terminal
    sends it and SIGINT as Ctrl-C does. Under `nohup` every process, this test runner too, starts
    with SIGHUP ignored, and a job a non-interactive shell puts in the background with SIGINT
    ignored; bertdata rightly keeps an ignored signal ignored."""
    signal.signal(signal.SIGHUP, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _absent(path: Path) -> str:
    return f"{path} is absent: the shared test data sits beside the project only in CI and dev sessions"


def need_shared(path: Path = SHARED) -> Path:
    """`path`, or a skip of the calling test where it is absent."""
    if not path.exists():
        pytest.skip(_absent(path))
    return path


def needs_shared(*paths: Path) -> pytest.MarkDecorator:
    """A mark that skips the test where any of `paths` is absent."""
    missing = [path for path in paths if not path.exists()]
    return pytest.mark.skipif(bool(missing), reason=_absent(missing[0]) if missing else "")


def run_cli(*args: str, check: bool = True, timeout: float = 600, **kwargs) -> subprocess.CompletedProcess:
    """Run `bertdata ARGS` in a fresh interpreter, as a user would."""
    proc = subprocess.run([sys.executable, "-m", "bertdata.cli", *map(str, args)], capture_output=True,
                          text=True, timeout=timeout, **kwargs)
    if check and proc.returncode != 0:
        raise AssertionError(f"bertdata {' '.join(map(str, args))} exited {proc.returncode}:\n{proc.stderr}")
    return proc
