"""The build's own lines on the console; Beam's output, and its workers', in build.log."""

from __future__ import annotations

import contextlib
import functools
import os
import sys
import threading
import traceback


def note(message: str) -> None:
    print(f"bertdata build: {message}", file=sys.stderr, flush=True)


class _LogPump:
    """Copies what its pipe receives into the log file. When the disk refuses (full, say),
    it goes on draining the pipe, so no process ever fails or blocks writing its stderr:
    a Beam worker that cannot report its error leaves the run waiting forever."""

    def __init__(self, log_path: str):
        self.read_fd, self.write_fd = os.pipe()
        self.log = open(log_path, "ab", buffering=0)
        self.failed: OSError | None = None
        self.thread = threading.Thread(target=self._pump, name="build-log", daemon=True)
        self.thread.start()

    def _pump(self) -> None:
        while chunk := os.read(self.read_fd, 1 << 16):
            if self.failed is None:
                try:
                    self.log.write(chunk)
                except OSError as err:
                    self.failed = err

    def close(self) -> None:
        os.close(self.write_fd)
        self.thread.join(timeout=5)  # a worker that outlives the run keeps its end open
        with contextlib.suppress(OSError):
            self.log.close()


@contextlib.contextmanager
def beam_output_to(log_path: str):
    """Send stderr -- Beam's and its worker processes', which inherit it -- to `log_path`,
    so the console shows the build's own lines; the log keeps the details, threads' tracebacks
    too, from here to the process's end. Yields the console and the pump (whose `failed` says
    whether the log is complete)."""
    sys.stderr.flush()
    saved = os.dup(2)
    pump = _LogPump(log_path)
    threading.excepthook = functools.partial(_thread_failed, log_path)
    os.dup2(pump.write_fd, 2)
    console = os.fdopen(os.dup(saved), "w")
    try:
        yield console, pump  # the terminal, for progress bars
    finally:
        console.close()
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)
        pump.close()


def _thread_failed(log_path: str, args: threading.ExceptHookArgs) -> None:
    """The thread error hook from the pipeline's start to the end of the process: a thread's
    traceback goes to the build's log, never to the terminal. Beam's threads fail as a build
    stops, however it stops (a worker killed, a signal, an error), when what they use is torn
    down under them ("Exception in thread run_worker ... RuntimeError"), some of them after
    the build's stderr is the terminal again, where they would bury the command's one line."""
    if args.exc_type is SystemExit:
        return
    lines = traceback.format_exception(args.exc_type, args.exc_value, args.exc_traceback)
    name = args.thread.name if args.thread is not None else threading.get_ident()
    with contextlib.suppress(OSError):  # no log (removed, or uploaded to an object store): no traceback
        fd = os.open(log_path, os.O_WRONLY | os.O_APPEND)
        with os.fdopen(fd, "w") as log:
            log.write(f"Exception in thread {name}:\n{''.join(lines)}")
