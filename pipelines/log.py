"""The build's own lines on the console; Beam's output, and its workers', in build.log."""

from __future__ import annotations

import contextlib
import os
import sys
import threading


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
    so the console shows the build's own lines; the log keeps the details. Yields the
    console and the pump (whose `failed` says whether the log is complete)."""
    sys.stderr.flush()
    saved = os.dup(2)
    pump = _LogPump(log_path)
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
