"""Local worker processes forked from one pre-loaded server, started before the launcher loads Beam.

A worker started the plain way is a new interpreter that imports Beam and our modules
(about 0.7 s of CPU) after the runner asks for it, while the launcher waits. The pool's
server (`python -m bertdata.pipelines.runtime.worker --serve`) does those imports once, on a
spare core while the launcher does its own, then forks a worker per request: a worker is
ready in milliseconds, and its imported pages are shared.

The runner still starts each worker with a command (`attach.py`, a stdlib-only script run
with `python -I -S`), which hands the server its environment, working folder and standard
streams over a Unix socket and waits for the worker's exit status. Without a server to
answer, it becomes a plain worker. The socket lives in a private (0700) folder: whoever
can connect to it can make a worker run code.

The server reaps its workers and reports each one that ends abnormally (killed by a signal,
as the OOM killer does, or a non-zero status) on a pipe the launcher reads, with what the
worker last said it was on (`working_on`): the launcher stops the build at once, with one
line, instead of waiting for Beam to notice a worker it may never ask again.

A build that stops (a dead worker, a signal, an error) ends the pool first (`stop`): the
server kills and reaps every worker it forked before it exits. Beam's runner, on its way
out, waits for each worker process to end, and a worker only ends by itself once it has
finished its bundle (minutes, in a long stage) or, if it connected after the runner began
to close, never (see runners.py); and whatever a worker still wrote after the build's
cleanup would be left behind.

This module imports no Beam (nor anything heavy), so the build command can start the pool
before it loads Beam.
"""

from __future__ import annotations

import contextlib
import glob
import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass

from bertdata.config import RunnerConfig
from bertdata.fsutil import owner_gone, this_process

LOCAL_RUNNERS = ("local", "in-memory")
SOCKET_NAME = "workers.sock"
FOLDER_PREFIX = "bertdata-workers-"
OWNER_NAME = "owner.json"  # the launcher that made the folder (bertdata.fsutil.this_process)
# Where the socket's folder goes when the temporary folder's path is too long for a Unix socket
# (about 100 bytes: long TMPDIRs are common on clusters): without the pool, Beam's plain workers
# would run, and nothing would report one that dies.
SHORT_TMP = "/tmp"
SOCKET_PATH_MAX = 100
# What the server ignores (Ctrl-C, Ctrl-\: they reach the terminal's whole process group) from
# its first instruction: the launcher stops the build, and ends the server (see worker.py).
SERVER_IGNORES = {signal.SIGINT, signal.SIGQUIT}
# A forked worker's note of what it is on, in the pool's folder: TASK_PREFIX + its pid.
TASK_PREFIX = "task-"
ATTACH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "attach.py")


def cores() -> int:
    # The cores this process may use (taskset, cgroups), not the machine's total.
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def worker_count(cfg: RunnerConfig) -> int:
    if cfg.runner == "in-memory":
        return 1
    return cfg.workers or cores()


# A plain worker. `-m` puts the current folder first on sys.path, so a build started inside a
# bertdata checkout would run that checkout's code in its workers: -P (Python 3.11+) leaves it out.
# A process is started by its module's name: the worker beside this module, named from this
# package (importing it here to ask would load Beam, which this module does without).
WORKER = (sys.executable, *(("-P",) if sys.version_info >= (3, 11) else ()), "-m", f"{__package__}.worker")


def plain_worker_command() -> str:
    return " ".join(map(shlex.quote, WORKER))


# Set in a forked worker (see worker.py): where it notes what it is on.
task_file: str | None = None


def working_on(what: str | None) -> None:
    """Note what this worker is on (a stage and its shard or group; None: nothing), for the
    launcher's line should the worker die; nothing outside a forked worker."""
    if task_file is None:
        return
    if what is None:
        with contextlib.suppress(OSError):
            os.unlink(task_file)
        return
    with open(task_file + ".new", "w") as f:
        f.write(what)
    os.replace(task_file + ".new", task_file)


def read_task(folder: str, pid: int) -> str | None:
    """What worker `pid` last noted it was on, removing the note."""
    path = os.path.join(folder, f"{TASK_PREFIX}{pid}")
    try:
        with open(path) as f:
            return f.read() or None
    except OSError:
        return None
    finally:
        for leftover in (path, path + ".new"):
            with contextlib.suppress(OSError):
                os.unlink(leftover)


@dataclass(frozen=True)
class WorkerDeath:
    """A worker (or the pool's server) that ended abnormally: by a signal, or a non-zero status."""

    pid: int
    signal: int | None = None
    status: int | None = None
    task: str | None = None
    server: bool = False

    @classmethod
    def from_wait_status(cls, pid: int, wait_status: int, **kwargs) -> "WorkerDeath":
        code = os.waitstatus_to_exitcode(wait_status)
        return cls(pid, -code, None, **kwargs) if code < 0 else cls(pid, None, code, **kwargs)

    def describe(self) -> str:
        who = "the worker pool's server" if self.server else f"worker process {self.pid}"
        if self.signal is not None:
            try:
                name = signal.Signals(self.signal).name
            except ValueError:
                name = f"signal {self.signal}"
            how = f"was killed by {name}"
            if self.signal == signal.SIGKILL:  # the kernel's OOM killer sends it
                how += ", likely out of memory (see dmesg; fewer --workers use less)"
        else:
            how = f"exited with status {self.status}"
        return f"{who} {how}" + (f" while on {self.task}" if self.task else "")


def socket_folder() -> str:
    """A new folder for the pool's socket, its owner recorded: under the temporary folder, or
    SHORT_TMP where a socket path there would be too long. The folders of pools whose launcher
    is gone go first."""
    parent = tempfile.gettempdir()
    if len(os.path.join(parent, FOLDER_PREFIX + "12345678", SOCKET_NAME).encode()) > SOCKET_PATH_MAX:
        parent = SHORT_TMP
    remove_abandoned(parent)
    folder = tempfile.mkdtemp(prefix=FOLDER_PREFIX, dir=parent)
    with open(os.path.join(folder, OWNER_NAME), "w") as f:
        json.dump(this_process(), f)
    return folder


def remove_abandoned(parent: str) -> None:
    """Remove the socket folders under `parent` whose launcher is certainly dead: a SIGKILL to a
    build's process group runs none of its cleanup. A folder of a live build (or with no owner
    it can read) is kept."""
    for folder in glob.glob(os.path.join(glob.escape(parent), FOLDER_PREFIX + "*")):
        try:
            with open(os.path.join(folder, OWNER_NAME)) as f:
                owner = json.load(f)
        except (OSError, ValueError):
            continue
        if owner_gone(owner):
            shutil.rmtree(folder, ignore_errors=True)


class WorkerPool:
    """The server process and the command that attaches a worker to it."""

    def __init__(self) -> None:
        self.folder = socket_folder()
        path = os.path.join(self.folder, SOCKET_NAME)
        reports, self._reports_w = os.pipe()
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listener:
                listener.bind(path)
                listener.listen(64)
                # The server inherits the listening socket: requests made while it is still
                # importing wait in the backlog. Its stdin is how it learns that the launcher
                # is gone, however the launcher ended; it reports dead workers on the pipe.
                # It starts with Ctrl-C and Ctrl-\ blocked (a signal mask outlives exec), so
                # neither reaches it before its first instruction ignores them; one that comes
                # meanwhile reaches this process once they are unblocked here.
                unblocked = signal.pthread_sigmask(signal.SIG_BLOCK, SERVER_IGNORES)
                try:
                    self.server = subprocess.Popen(
                        [*WORKER, "--serve", str(listener.fileno()), str(self._reports_w)],
                        stdin=subprocess.PIPE, pass_fds=(listener.fileno(), self._reports_w))
                finally:
                    signal.pthread_sigmask(signal.SIG_SETMASK, unblocked)
        except BaseException:
            if hasattr(self, "server"):  # Ctrl-C as the signals were unblocked: the server ends with us
                self.server.stdin.close()
                self.server.wait()
            os.close(reports)
            shutil.rmtree(self.folder, ignore_errors=True)
            raise
        finally:
            os.close(self._reports_w)
        # attach.py runs isolated, without bertdata: it is handed the plain worker's command.
        self.command = " ".join(shlex.quote(a) for a in (sys.executable, "-I", "-S", ATTACH, path, *WORKER))
        self.deaths: list[WorkerDeath] = []
        self._on_death: Callable[[WorkerDeath], None] | None = None
        self._closing = False
        self._reported = threading.Condition()
        threading.Thread(target=self._read_reports, args=(reports,), name="worker-deaths", daemon=True).start()

    def _read_reports(self, fd: int) -> None:
        with open(fd, "rb") as reports:
            for line in reports:
                self._died(WorkerDeath(**json.loads(line)))
        # The end of the pipe: the server is gone, and its workers with it (PR_SET_PDEATHSIG).
        status = self.server.wait()
        if not self._closing and status != 0:
            self._died(WorkerDeath.from_wait_status(self.server.pid, _wait_status(status), server=True))

    def _died(self, death: WorkerDeath) -> None:
        with self._reported:
            if self._closing:  # the build is stopping, and the pool with it: nothing to report
                return
            self.deaths.append(death)
            self._reported.notify_all()
            # Under the lock: stop_on_death restores the signal's default (which ends the
            # process) only after it has cleared _on_death under the same lock.
            if self._on_death is not None:
                self._on_death(death)

    def first_death(self, timeout: float = 0) -> WorkerDeath | None:
        """The first abnormal end reported, waiting up to `timeout` seconds for one."""
        with self._reported:
            self._reported.wait_for(lambda: self.deaths, timeout)
            return self.deaths[0] if self.deaths else None

    @contextlib.contextmanager
    def stop_on_death(self):
        """Raise WorkerDied in this (the main) thread as soon as a worker dies: Beam notices a dead
        worker only when it next hands it work, and then as a broken channel, with no cause."""
        main = threading.main_thread().ident
        armed = [True]

        def interrupt(signum, frame) -> None:
            if armed[0] and self.deaths:
                armed[0] = False
                raise WorkerDied(self.deaths[0])

        def on_death(death: WorkerDeath) -> None:
            # The other workers are ended first: Beam's runner, on its way out of the run (which
            # it may already be on, having seen a broken channel), waits for each to end.
            self.stop()
            signal.pthread_kill(main, INTERRUPT)

        previous = signal.signal(INTERRUPT, interrupt)
        with self._reported:
            self._on_death = on_death
            dead = bool(self.deaths)
        try:
            if dead:
                on_death(self.deaths[0])
            yield
        finally:
            armed[0] = False
            with self._reported:
                self._on_death = None
            signal.signal(INTERRUPT, previous)

    def stop(self) -> None:
        """End every worker now: the server kills and reaps them, forks no more and exits. What
        dies from now on is not reported. Returns at once (safe in a signal handler); `close`
        waits for the server."""
        self._closing = True
        # Already closed, or being closed by this thread (a stop signal landing in `close`).
        with contextlib.suppress(OSError, ValueError, RuntimeError):
            self.server.stdin.close()

    def close(self) -> None:
        """Stop the pool and wait until its server (and so every worker) is gone; its folder is removed."""
        try:
            self.stop()
            try:
                self.server.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.server.kill()
                self.server.wait()
        finally:  # also when Ctrl-C or a signal lands while the server is waited for
            shutil.rmtree(self.folder, ignore_errors=True)


# What the report reader sends the launcher's main thread to interrupt the build.
INTERRUPT = signal.SIGUSR1


class WorkerDied(KeyboardInterrupt):
    """Raised in the launcher's main thread when a worker dies: like Ctrl-C, so that no `except
    Exception` in Beam swallows it and every cleanup on the way out runs."""

    def __init__(self, death: WorkerDeath) -> None:
        super().__init__(death.describe())
        self.death = death


def _wait_status(returncode: int) -> int:
    """A Popen returncode as the wait status it was decoded from."""
    return -returncode if returncode < 0 else returncode << 8


def report_line(death: WorkerDeath) -> bytes:
    return json.dumps(asdict(death)).encode() + b"\n"


@contextlib.contextmanager
def worker_pool(cfg: RunnerConfig) -> Iterator[WorkerPool | None]:
    """A WorkerPool when `cfg` runs several local worker processes on Linux (where a fork
    after imports is safe and cheap), else None."""
    if cfg.runner != "local" or worker_count(cfg) < 2 or sys.platform != "linux":
        yield None
        return
    try:
        pool = WorkerPool()
    except OSError:  # no folder for the socket, or the socket refused: plain workers
        yield None
        return
    try:
        yield pool
    finally:
        pool.close()
