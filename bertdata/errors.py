"""Errors the CLI turns into one clear line and an exit code."""


class BertdataError(Exception):
    """A problem the user can fix: bad input, bad flags, a missing file. Exit code 2."""

    exit_code = 2


class ValidationError(BertdataError):
    """A shard that exists but is not a valid shard. Exit code 1, as `inspect` promises."""

    exit_code = 1


class WorkerLost(BertdataError):
    """A worker process of the build died (killed by a signal, out of memory, a crash): the
    build failed, though not for bad input. Exit code 1."""

    exit_code = 1


class Stopped(KeyboardInterrupt):
    """A signal that ends a run as Ctrl-C does (SIGTERM from a scheduler or `kill`, SIGHUP from a
    closed terminal): raised like KeyboardInterrupt, so the same cleanup runs and no `except
    Exception` swallows it. The exit code is the one a shell gives a process the signal ends."""

    def __init__(self, signum: int) -> None:
        import signal

        self.name = signal.Signals(signum).name
        self.exit_code = 128 + signum
        super().__init__(self.name)
