"""`bertdata shard`'s processes: the pool that writes parts, its progress bar, and stopping
cleanly on Ctrl-C, SIGTERM, SIGHUP and SIGQUIT."""

from __future__ import annotations

import contextlib
import multiprocessing
import queue
import signal
import threading
from collections.abc import Callable
from typing import Any

from tqdm import tqdm

from bertdata.errors import BertdataError

# Set in each worker process: where it reports rows done.
_progress_queue: Any = None


def _init_worker(progress_queue) -> None:
    global _progress_queue
    _progress_queue = progress_queue
    # Ctrl-C reaches the whole process group; the main process alone acts on it (by ending
    # the pool), instead of every worker printing its own traceback.
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _run_in_worker(task: tuple[Callable, Any, int]):
    func, plan, index = task
    return func(plan, index, _progress_queue.put)


class Terminated(BertdataError):
    """SIGTERM, SIGHUP or SIGQUIT, after the temporary files are removed; the exit code a shell
    gives a process the signal ends (143, 129, 131)."""

    def __init__(self, signum: int) -> None:
        super().__init__(f"stopped by {signal.Signals(signum).name}; temporary files removed, no parts written")
        self.exit_code = 128 + signum


class CtrlC:
    """Ctrl-C, SIGTERM, SIGHUP and SIGQUIT (Ctrl-\\), raised where it is safe to stop.

    h5py runs Python weakref callbacks all the time, and a KeyboardInterrupt that lands in one
    is printed and dropped -- the run would go on to the end. So the signals only set a flag
    here, and `check()`, called between slices, raises. SIGTERM (a job scheduler, `kill`, a
    container stopping), SIGHUP (a closed terminal) and SIGQUIT must clean up as Ctrl-C does: by default each ends the process at once,
    leaving up to 3.4x the input in the temporary folder.
    """

    def __init__(self) -> None:
        self.received: int | None = None
        self.previous: dict[int, Any] = {}

    def __enter__(self) -> CtrlC:
        # Only the main thread may set handlers; an ignored signal (SIGINT in a background job) stays ignored.
        if threading.current_thread() is threading.main_thread():
            for signum, default in ((signal.SIGINT, signal.default_int_handler), (signal.SIGTERM, signal.SIG_DFL),
                                    (signal.SIGHUP, signal.SIG_DFL), (signal.SIGQUIT, signal.SIG_DFL)):
                if signal.getsignal(signum) is default:
                    self.previous[signum] = signal.signal(signum, self._press)
        return self

    def _press(self, signum, frame) -> None:
        self.received = signum

    def check(self) -> None:
        if self.received in (signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT):
            raise Terminated(self.received)
        if self.received is not None:
            raise KeyboardInterrupt

    def __exit__(self, *exc) -> None:
        for signum, handler in self.previous.items():
            signal.signal(signum, handler)


class Workers:
    """Runs `func(plan, i, progress)` for many i, in this process or in a pool of processes.

    The pool is started before the scatter, so the workers' start-up (a fresh interpreter each:
    spawn, not fork, as the main process runs a hashing thread) overlaps it.
    """

    def __init__(self, workers: int, ctrl_c: CtrlC):
        self.pool, self.ctrl_c = None, ctrl_c
        if workers > 1:
            ctx = multiprocessing.get_context("spawn")
            self.progress = ctx.Queue()
            self.pool = ctx.Pool(workers, _init_worker, (self.progress,))

    def run(self, func: Callable, plan: Any, indices: list[int], total: int, desc: str) -> list:
        """`func(plan, index, progress)` for each of `indices` (`plan`, pickled to the workers, is
        whatever `func` takes: shuffle's Plan); the results in completion order."""
        with tqdm(total=total, unit="inst", desc=desc, dynamic_ncols=True, disable=None) as bar:
            if self.pool is None or len(indices) == 1:
                def progress(rows: int) -> None:
                    bar.update(rows)
                    self.ctrl_c.check()

                return [func(plan, i, progress) for i in indices]
            results = self.pool.imap_unordered(_run_in_worker, [(func, plan, i) for i in indices])
            done = []
            while len(done) < len(indices):
                with contextlib.suppress(multiprocessing.TimeoutError):
                    done.append(results.next(timeout=0.2))
                with contextlib.suppress(queue.Empty):
                    while True:
                        bar.update(self.progress.get_nowait())
                self.ctrl_c.check()
            return done

    def close(self) -> None:
        # Workers must be gone before the temporary folder they write in is removed.
        if self.pool is not None:
            self.pool.terminate()
            self.pool.join()
            self.pool = None
