"""Local worker processes: Beam's SDK harness, run plainly or forked from the pool's server.

`python -m bertdata.pipelines.runtime.worker` is a plain worker. `--serve FD REPORTS` is the pool's
server (see pool.py): it imports what workers need, then forks one worker per request
arriving on the listening socket FD, until its stdin closes; it reaps its workers and writes a
line to the pipe REPORTS for each that ends abnormally. When its stdin closes (the build has
run, or is stopping) it kills the workers still running and reaps them before it exits.

Either way a worker ends without the interpreter's teardown. The FnApiRunner stops its
workers one after another, waiting for each process to end, and a worker's teardown
(freeing its heap, joining gRPC's threads) takes about 0.2 s: with two workers that was
0.4 s of a 17 s build, all of it after the last shard was written. Nothing is lost by
skipping it: every file a worker writes is closed and renamed before its bundle completes,
and the harness has flushed its log to the launcher when it returns. A plain worker whose
harness fails exits the ordinary way, with its traceback and status.
"""

from __future__ import annotations

import contextlib
import gc
import json
import logging
import os
import select
import shutil
import signal
import socket
import sys
import traceback
import warnings

if __name__ == "__main__" and sys.argv[1:2] == ["--serve"]:
    # The server's first instruction after the standard library's imports, before Beam's (a
    # second or more): it ignores Ctrl-C and Ctrl-\ (the launcher, in the same process group,
    # stops the build and ends the server), which reached it blocked until now (see pool.py). Its
    # forked workers get back what the launcher had: a build started with Ctrl-C ignored (`&` in
    # a shell) goes on.
    from bertdata.pipelines.runtime.pool import SERVER_IGNORES

    LAUNCHER_SIGINT = signal.getsignal(signal.SIGINT)
    for _signum in SERVER_IGNORES:
        signal.signal(_signum, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, SERVER_IGNORES)

# Beam's import warns about optional cloud clients on the stderr this process shares with the
# launcher's terminal; a worker's harness sets its own log level when it starts.
logging.getLogger().setLevel(logging.ERROR)

from apache_beam.runners.worker import sdk_worker_main  # noqa: E402

from bertdata.pipelines.runtime import pool
from bertdata.pipelines.runtime.attach import ATTACHED
from bertdata.pipelines.runtime.sampling import prompt_bundle_ends

# Linux's prctl option: a signal for this process when its parent ends (the pool is Linux-only).
PR_SET_PDEATHSIG = 1
def main() -> None:
    prompt_bundle_ends()  # in the server too: its forked workers inherit it
    if sys.argv[1:2] == ["--serve"]:
        serve(int(sys.argv[2]), int(sys.argv[3]))
        return
    sdk_worker_main.main(sys.argv)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def serve(listener_fd: int, reports_fd: int) -> None:
    listener = socket.socket(fileno=listener_fd)
    folder = os.path.dirname(listener.getsockname())
    server = os.getpid()
    # Ctrl-C and Ctrl-\ are ignored from the first instruction (above); the server ends when the
    # launcher does, and with it the workers (a forked worker keeps SIGQUIT ignored: the
    # launcher, which stops on it, ends them).
    workers: set[int] = set()
    try:
        # What is imported lives as long as the workers: out of the collector's reach, whose
        # passes over it, during the imports and after, would cost time (each worker's too) and
        # write to the pages the workers share with us.
        gc.disable()
        preload()
        gc.freeze()
        gc.enable()
        # A finished worker wakes the loop below (through the wakeup pipe) to be reaped.
        wake_r, wake_w = os.pipe()
        os.set_blocking(wake_r, False)
        os.set_blocking(wake_w, False)
        signal.set_wakeup_fd(wake_w)
        signal.signal(signal.SIGCHLD, lambda signum, frame: None)
        while True:
            ready, _, _ = select.select([listener, 0, wake_r], [], [])
            if wake_r in ready:
                with contextlib.suppress(BlockingIOError):
                    os.read(wake_r, 4096)
                _reap(folder, reports_fd, workers)
            if 0 in ready and not os.read(0, 1):
                break
            if listener in ready:
                conn, _ = listener.accept()
                sys.stdout.flush()
                sys.stderr.flush()
                with warnings.catch_warnings():
                    # Python 3.12+ warns on fork in a multi-threaded process. Ours has no other
                    # Python thread; its only native ones are allocator helpers (jemalloc's, which
                    # Beam's pyarrow import starts, and OpenBLAS's), and both libraries register
                    # fork handlers for them.
                    warnings.simplefilter("ignore", DeprecationWarning)
                    child = os.fork()
                if child == 0:
                    _worker(server, listener, conn, (reports_fd, wake_r, wake_w), folder)
                workers.add(child)
                conn.close()
        # Any worker still running is of a build that stops: it goes before the launcher's
        # cleanup (which waits for this process), so it writes nothing after it.
        _end_workers(workers)
    finally:
        shutil.rmtree(folder, ignore_errors=True)  # already gone if the launcher's close outwaited us
    # Its heap is every worker's preloaded modules: freeing them would hold up the launcher.
    os._exit(0)


def preload() -> None:
    # What the pipelines' DoFns import, what they carry (the stages, the sentence splitter) and
    # what the splitter loads when it first splits (NLTK, which the launcher does without): loaded
    # once in the server, shared by every forked worker. A module first imported in a worker is
    # imported by each, as its first bundle starts. (Not the punkt model's data: the server starts
    # before the build knows its language.) Imported here, not at module level: the runtime
    # imports no stage but in the server (tests/project/test_dependencies.py).
    import nltk.tokenize.punkt  # noqa: F401
    from bertdata import corpora, formats
    from bertdata.errors import BertdataError
    from bertdata.instances import create, tokenizer_spec  # noqa: F401
    from bertdata.text import fastpunkt, sentences  # noqa: F401
    from bertdata.pipelines import chain, manifests  # noqa: F401
    from bertdata.pipelines.formats import CUT_STAGES  # noqa: F401  (and with it the stages of every cut)
    from bertdata.pipelines.stages import instances, text  # noqa: F401

    # Every format and every corpus type, which a build may carry: the plugins' too
    # (bertdata.plugins). One that fails to import is left out: the CLI refuses a build that
    # names it, in one line, before any worker starts.
    for name in formats.names():
        with contextlib.suppress(BertdataError):
            formats.get(name)
    for name in corpora.names():
        with contextlib.suppress(BertdataError):
            corpora.get(name)


def _reap(folder: str, reports_fd: int, workers: set[int]) -> None:
    """Collect finished workers; report those that ended abnormally, with what they were on."""
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        workers.discard(pid)
        task = pool.read_task(folder, pid)
        if status != 0:
            with contextlib.suppress(OSError):  # the launcher is gone: nobody to tell
                os.write(reports_fd, pool.report_line(pool.WorkerDeath.from_wait_status(pid, status, task=task)))


def _end_workers(workers: set[int]) -> None:
    """Kill the workers still running and wait until they are gone (not reported: the launcher
    asked for it)."""
    for pid in workers:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    for pid in workers:
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)


def _end_with_server(server: int) -> None:
    """Be killed when the server ends, which it does when its launcher does, however that ends:
    a worker deep in one long call (a whole single-stream dump) would otherwise notice its
    runner gone only when the call returns, and finish it first."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != server:  # it ended before the request above took effect
        os._exit(1)


def _worker(server: int, listener: socket.socket, conn: socket.socket, server_fds: tuple[int, ...],
            folder: str) -> None:
    """The forked child: take the attaching process's streams, environment and folder, run
    the harness, send its exit status back."""
    status = 1
    try:
        _end_with_server(server)
        signal.signal(signal.SIGINT, LAUNCHER_SIGINT)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.set_wakeup_fd(-1)
        listener.close()
        for fd in server_fds:
            os.close(fd)
        pool.task_file = os.path.join(folder, f"{pool.TASK_PREFIX}{os.getpid()}")
        _, fds, _, _ = socket.recv_fds(conn, len(ATTACHED), 3)
        request = json.loads(b"".join(iter(lambda: conn.recv(1 << 16), b"")))
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        conn.sendall(ATTACHED)
        sdk_worker_main.main(sys.argv)
        status = 0
    except BaseException:  # noqa: B036 - whatever ends the harness is reported, then the process ends
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        try:
            conn.sendall(bytes([status]))
        finally:
            os._exit(status)


if __name__ == "__main__":
    main()
