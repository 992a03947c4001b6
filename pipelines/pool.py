"""Local worker processes forked from one pre-loaded server, started before the launcher loads Beam.

A worker started the plain way is a new interpreter that imports Beam and our modules
(about 0.7 s of CPU) after the runner asks for it, while the launcher waits. The pool's
server (`python -m bertdata.pipelines.worker --serve`) does those imports once, on a
spare core while the launcher does its own, then forks a worker per request: a worker is
ready in milliseconds, and its imported pages are shared.

The runner still starts each worker with a command (`attach.py`, a stdlib-only script run
with `python -I -S`), which hands the server its environment, working folder and standard
streams over a Unix socket and waits for the worker's exit status. Without a server to
answer, it becomes a plain worker. The socket lives in a private (0700) folder: whoever
can connect to it can make a worker run code.

This module imports no Beam (nor anything heavy), so the build command can start the pool
before it loads Beam.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator

from bertdata.config import RunnerConfig

LOCAL_RUNNERS = ("local", "in-memory")
SOCKET_NAME = "workers.sock"
ATTACH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "attach.py")


def cores() -> int:
    # The cores this process may use (taskset, cgroups), not the machine's total.
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def worker_count(cfg: RunnerConfig) -> int:
    if cfg.runner == "in-memory":
        return 1
    return cfg.workers or cores()


def plain_worker_command() -> str:
    return f"{shlex.quote(sys.executable)} -m bertdata.pipelines.worker"


class WorkerPool:
    """The server process and the command that attaches a worker to it."""

    def __init__(self) -> None:
        self.folder = tempfile.mkdtemp(prefix="bertdata-workers-")
        path = os.path.join(self.folder, SOCKET_NAME)
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listener:
                listener.bind(path)
                listener.listen(64)
                # The server inherits the listening socket: requests made while it is still
                # importing wait in the backlog. Its stdin is how it learns that the launcher
                # is gone, however the launcher ended.
                self.server = subprocess.Popen(
                    [sys.executable, "-m", "bertdata.pipelines.worker", "--serve", str(listener.fileno())],
                    stdin=subprocess.PIPE, pass_fds=(listener.fileno(),))
        except BaseException:
            shutil.rmtree(self.folder, ignore_errors=True)
            raise
        self.command = " ".join(shlex.quote(a) for a in (sys.executable, "-I", "-S", ATTACH, path))

    def close(self) -> None:
        try:
            self.server.stdin.close()
            try:
                self.server.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.server.kill()
                self.server.wait()
        finally:  # also when Ctrl-C or a signal lands while the server is waited for
            shutil.rmtree(self.folder, ignore_errors=True)


@contextlib.contextmanager
def worker_pool(cfg: RunnerConfig) -> Iterator[WorkerPool | None]:
    """A WorkerPool when `cfg` runs several local worker processes on Linux (where a fork
    after imports is safe and cheap), else None."""
    if cfg.runner != "local" or worker_count(cfg) < 2 or sys.platform != "linux":
        yield None
        return
    try:
        pool = WorkerPool()
    except OSError:  # e.g. a TMPDIR too long for a socket path (about 100 bytes): plain workers
        yield None
        return
    try:
        yield pool
    finally:
        pool.close()
