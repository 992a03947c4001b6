"""A local worker process: Beam's SDK harness, then an exit without the interpreter's teardown.

The FnApiRunner stops its workers one after another, waiting for each process to end, and a
worker's teardown (freeing its heap, joining gRPC's threads) takes about 0.2 s: with two
workers that was 0.4 s of a 17 s build, all of it after the last shard was written. Nothing
is lost by skipping it: every file a worker writes is closed and renamed before its bundle
completes, and the harness has flushed its log to the launcher when it returns. A harness
that fails exits the ordinary way, with its traceback and status.
"""

from __future__ import annotations

import os
import sys

from apache_beam.runners.worker import sdk_worker_main


def main() -> None:
    sdk_worker_main.main(sys.argv)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
