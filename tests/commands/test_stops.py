"""A stop signal ends the command even where Python cannot raise it (see bertdata.commands.stops)."""

from __future__ import annotations

import logging
import signal
import sys
import threading
import time

import pytest

from bertdata.commands.stops import stopped_by_signals
from bertdata.errors import Stopped


class _SignalledInDel:
    """Sends `signum` to this process from its `__del__`: the handler's exception is raised there,
    where Python drops it, as it does one raised while a Cython module registers its types."""

    def __init__(self, signum: int) -> None:
        self.signum = signum

    def __del__(self) -> None:
        signal.pthread_kill(threading.get_ident(), self.signum)


@pytest.fixture(autouse=True)
def _logging_back():
    yield
    logging.disable(logging.NOTSET)  # a stop silences logging for the rest of a (dying) process
    threading.excepthook = threading.__excepthook__


@pytest.mark.parametrize("signum, raised", [(signal.SIGINT, KeyboardInterrupt), (signal.SIGTERM, Stopped)])
def test_a_stop_python_drops_is_raised_again_and_its_hooks_run_once(signum, raised, capfd):
    hooks = []
    went_on = False
    with pytest.raises(raised):
        with stopped_by_signals(signum) as on_stop:
            on_stop.append(lambda: hooks.append(1))
            doomed = _SignalledInDel(signum)
            del doomed
            time.sleep(0.5)
            went_on = True
    assert not went_on and hooks == [1]
    assert "Exception ignored" not in capfd.readouterr().err


def test_other_unraisable_errors_go_to_the_hook_there_was(monkeypatch):
    class Failing:
        def __del__(self):
            raise ValueError("a __del__ that fails")

    seen = []
    monkeypatch.setattr(sys, "unraisablehook", lambda args: seen.append(args.exc_value))
    with stopped_by_signals(signal.SIGTERM):
        doomed = Failing()
        del doomed
    assert [str(e) for e in seen] == ["a __del__ that fails"]
