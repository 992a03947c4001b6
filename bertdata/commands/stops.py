"""SIGTERM (schedulers, `kill`, `timeout`, systemd), SIGHUP (a closed terminal) and SIGQUIT
(Ctrl-\\) end a command as Ctrl-C does: one line, the same cleanup, and the exit code a shell
gives a process the signal ends (143, 129, 131)."""

from __future__ import annotations

import contextlib
import logging
import signal
import sys
import threading
import time
import warnings

from bertdata.errors import Stopped

# What a command that cleans up on a stop handles besides Ctrl-C (SIGINT). SIGQUIT by default ends
# the process at once (with a core dump where they are enabled), as SIGKILL would.
STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)


@contextlib.contextmanager
def stopped_by_signals(*signums: int):
    """End the command on these signals as on Ctrl-C (KeyboardInterrupt, or Stopped for another
    signal), cleaning up on the way out: by default SIGTERM, SIGHUP and SIGQUIT end the process at
    once, leaving temporaries behind (a build's lock, work folder and worker pool's socket folder,
    a download's staging folder). Yields a list: callables appended to it run as the stop begins,
    before the exception is raised (a build's worker pool is ended there, before Beam's runner
    waits for its workers on the way out).

    Python drops an exception it cannot raise (it reports it as "unraisable"): one raised in a
    `__del__`, a weakref callback, or a compiled module's start-up (every Cython module registers
    its types with collections.abc while it is imported, and drops what that raises). A stop that
    lands there is raised again at once, where it can be: dropped, the build went on with its
    worker pool ended, and waited for ever on a worker that no server would start."""
    stopping: list[int] = []
    dropped: list[bool] = []
    in_hook = [False]
    on_stop: list = []
    main = threading.main_thread().ident

    def interruption(signum: int) -> BaseException:
        return KeyboardInterrupt() if signum == signal.SIGINT else Stopped(signum)

    def stop(signum, frame) -> None:
        if stopping and not dropped:  # a repeated signal must not break off the cleanup the first one started
            return
        if not stopping:
            stopping.append(signum)
            threading.excepthook = _quiet
            # Their logged errors too ("Failed to read inputs in the data plane", with its
            # traceback, as the workers the signal also reached vanish): once the build's
            # stderr is the terminal again they would land after the command's line. And the
            # warnings of what the stop breaks off (a Cython module "failed to patch" abc).
            logging.disable(logging.CRITICAL)
            warnings.simplefilter("ignore")
            for hook in on_stop:
                with contextlib.suppress(Exception):  # the stop goes on whatever a hook meets
                    hook()
        dropped.clear()
        raise interruption(stopping[0])

    def unraisable(args) -> None:
        if stopping and isinstance(args.exc_value, KeyboardInterrupt) and threading.get_ident() == main:
            dropped.append(True)
            # Sent again once this hook has returned: handled in it, the signal's exception
            # would be dropped again.
            in_hook[0] = True
            threading.Thread(target=_send_after, args=(in_hook, main, stopping[0]), daemon=True).start()
            in_hook[0] = False  # the hook's last instruction: Python handles no signal on a store
            return
        previous_hook(args)

    # One that is ignored (SIGHUP under nohup, SIGINT in a background job) stays ignored.
    previous = {s: signal.signal(s, stop) for s in signums
                if signal.getsignal(s) in (signal.SIG_DFL, signal.default_int_handler)}
    previous_hook, sys.unraisablehook = sys.unraisablehook, unraisable
    try:
        yield on_stop
    except Exception:
        # A build with one local worker runs the DoFns in this process, and Beam re-raises what one
        # raised, the signal's exception too, as an error of its own: what follows the signal is its
        # doing.
        if stopping:
            raise interruption(stopping[0]) from None
        raise
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        sys.unraisablehook = previous_hook


def _send_after(in_hook: list[bool], thread: int, signum: int) -> None:
    while in_hook[0]:
        time.sleep(0.001)
    signal.pthread_kill(thread, signum)


def _quiet(args: threading.ExceptHookArgs) -> None:
    """The thread error hook once a stop has begun, for the rest of the process (which is ending).
    Threads still at work fail as what they use is torn down under them, Beam's gRPC server
    threads as their server shuts ("server must be started and not shutting down"): their
    tracebacks would bury the command's one line, which says why it ended."""
