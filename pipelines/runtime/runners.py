"""Choosing and configuring the Beam runner.

Beam's default runner tries to download the Prism binary on every run, and the
FnApiRunner's multi_threading mode was seen to lose elements, so the runner is
always named explicitly and never runs in that mode.
"""

from __future__ import annotations

import difflib
import threading

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions
from apache_beam.transforms.environments import SubprocessSDKEnvironment

from bertdata.config import RunnerConfig
from bertdata.errors import BertdataError
from bertdata.pipelines.runtime.pool import LOCAL_RUNNERS, WorkerPool, cores, plain_worker_command, worker_count


def spare_cores(cfg: RunnerConfig) -> bool:
    """Whether a worker has a core beside its own (for helper threads). Unknown on a
    cluster runner: assume so."""
    return cfg.runner not in LOCAL_RUNNERS or worker_count(cfg) < cores()


def check_runner(cfg: RunnerConfig) -> None:
    """Refuse, before any work, a runner Beam does not know and options after `--` that no
    PipelineOptions class defines (Beam would log that it drops them, and run without)."""
    if cfg.runner not in (*LOCAL_RUNNERS, "dask"):
        from apache_beam.runners.runner import create_runner

        known = ", ".join((*LOCAL_RUNNERS, "dask", *StandardOptions.KNOWN_RUNNER_NAMES))
        try:
            create_runner(cfg.runner)  # which also defines the runner's own options
        except ImportError as err:
            raise BertdataError(f"--runner {cfg.runner}: cannot be loaded ({err})") from None
        except (ValueError, AttributeError):
            raise BertdataError(f"--runner {cfg.runner}: no such runner; known: {known}, or the full name "
                                "of a PipelineRunner subclass") from None
    if cfg.runner == "dask" or any(a.startswith("--dask_") for a in cfg.beam_args):
        import apache_beam.runners.dask.dask_runner  # noqa: F401 - defines the --dask_* options
    # The parser Beam builds from every PipelineOptions class defined so far.
    parsers = []
    PipelineOptions(list(cfg.beam_args)).get_all_options(add_extra_args_fn=parsers.append)
    _, unknown = parsers[0].parse_known_args(list(cfg.beam_args))
    flags = list(dict.fromkeys(a.split("=", 1)[0] for a in unknown if a.startswith("--")))
    if flags:
        names = list(parsers[0]._option_string_actions)
        described = []
        for flag in flags:
            close = difflib.get_close_matches(flag, names, n=1)
            described.append(flag + (f" (did you mean {close[0]}?)" if close else ""))
        raise BertdataError(f"not a Beam pipeline option: {', '.join(described)}; "
                            "the options after -- go to Beam's PipelineOptions")


def make_pipeline(cfg: RunnerConfig, pool: WorkerPool | None = None) -> beam.Pipeline:
    """A Pipeline for `cfg`: `local` (FnApiRunner, one process per worker, forked by `pool`
    when there is one; in this process when there is one worker), `in-memory` (FnApiRunner
    in this process), `dask` (DaskRunner; pass --dask_client_address=HOST:PORT after `--`),
    or any other Beam runner name with its options after `--`."""
    # Construction-time type inference over every DoFn and lambda is a fixed cost every run;
    # the pipeline's types are fixed and covered by the tests.
    args = ["--no_pipeline_type_check", *cfg.beam_args]
    if "multi_threading" in " ".join(args):
        raise BertdataError("direct_running_mode=multi_threading loses elements; use local or in-memory")
    if cfg.runner in LOCAL_RUNNERS:
        import shutil

        from apache_beam.runners.portability.fn_api_runner import FnApiRunner

        from bertdata.pipelines.runtime.sampling import prompt_bundle_ends

        prompt_bundle_ends()  # for the bundles run in this process
        workers = worker_count(cfg)
        if workers > 1:
            tell_late_workers_to_stop()
        # One worker runs in this process (in-memory: several would run on threads): it gains
        # nothing from a subprocess but its start-up and the gRPC hops. Several run as processes
        # of our worker command (bertdata.pipelines.runtime.worker, or the pool's), which is what
        # direct_running_mode=multi_processing does with Beam's, a mode that would replace ours.
        # (The runner's warning that in_memory wants one worker is below the CLI's log level.)
        command = pool.command if pool else plain_worker_command()
        environment = SubprocessSDKEnvironment.from_command_string(command) if workers > 1 else None
        options = PipelineOptions(args, direct_running_mode="in_memory", direct_num_workers=workers)
        pipeline = beam.Pipeline(runner=FnApiRunner(default_environment=environment), options=options)
        # A Pipeline makes a folder in TMPDIR that only cross-language transforms use (we have
        # none) and removes it only when its run ends: a build that fails or is stopped before
        # it runs would leave it behind.
        shutil.rmtree(pipeline.local_tempdir, ignore_errors=True)
        return pipeline
    if cfg.runner == "dask":
        from apache_beam.runners.dask.dask_runner import DaskRunner

        check_dask_scheduler(args)

        if not any(a.startswith("--dask_npartitions") or a.startswith("--dask_partition_size") for a in args):
            # Dask's default packs up to 128 elements in one partition, which would run a
            # whole build's shards on a single worker.
            args.append(f"--dask_npartitions={max(2, 4 * runner_workers(cfg))}")
        return beam.Pipeline(runner=DaskRunner(), options=PipelineOptions(args))
    return beam.Pipeline(options=PipelineOptions(["--runner", cfg.runner, *args]))


def tell_late_workers_to_stop() -> None:
    """Make the FnApiRunner stop a worker that connects after the runner has begun to close.

    Closing, the runner tells each worker it has started to stop (its control stream's end)
    and waits for its process to end. It tells only those connected by then: for one not yet
    connected it just marks the connection closed, and when that worker connects later it is
    given a stream that never ends. The runner then waited for it forever: a build stopped
    while its workers started (one killed at its start, a SIGTERM) never ended. Here such a
    worker is told to stop as it connects."""
    from apache_beam.runners.portability.fn_api_runner import worker_handlers

    connection, servicer = worker_handlers.ControlConnection, worker_handlers.BeamFnControlServicer
    if getattr(connection, "stops_late_workers", False):
        return
    set_input = connection.set_input
    # Reentrant, so that the check below and Beam's own set_input (which takes it too) are one
    # step for close(), which takes it: a close comes either before (seen here) or after the
    # connection has started (and then ends it itself).
    connection._lock = threading.RLock()

    def set_input_or_stop(self, input) -> None:
        with connection._lock:
            closed = self._state == servicer.DONE_STATE
            set_input(self, input)
            if closed:
                self.push(servicer._DONE_MARKER)
                self._state = servicer.DONE_STATE

    connection.set_input = set_input_or_stop
    connection.stops_late_workers = True


def runner_workers(cfg: RunnerConfig) -> int:
    """How many workers the work is cut for: the local ones, or on Dask (unless --workers says)
    the threads of the cluster's workers, asked of its scheduler."""
    if cfg.runner != "dask" or cfg.workers:
        return worker_count(cfg)
    from distributed import Client

    address = check_dask_scheduler(list(cfg.beam_args))
    with Client(address, timeout=30) as client:
        return max(1, sum(w["nthreads"] for w in client.scheduler_info()["workers"].values()))


def check_dask_scheduler(args: list[str]) -> str:
    """The address of the scheduler named in `args`; fails in seconds, in one line, when it cannot
    be reached (dask's client would retry for 30 s, then print its own traceback)."""
    import json
    import socket

    values = dict(a.split("=", 1) for a in args if a.startswith("--dask_") and "=" in a)
    address = values.get("--dask_client_address")
    if address is None and "--dask_scheduler_file" in values:
        path = values["--dask_scheduler_file"]
        try:
            with open(path) as f:
                address = json.load(f)["address"]
        except (OSError, ValueError, KeyError, TypeError) as err:
            raise BertdataError(f"{path}: not a readable dask scheduler file ({err})") from None
    if address is None:
        raise BertdataError("--runner dask needs its scheduler: pass -- --dask_client_address=HOST:PORT "
                            "or --dask_scheduler_file=FILE")
    host, _, port = address.split("://", 1)[-1].rpartition(":")
    try:
        socket.create_connection((host, int(port)), timeout=5).close()
    except (OSError, ValueError) as err:
        raise BertdataError(f"dask scheduler {address}: cannot connect ({getattr(err, 'strerror', None) or err}); "
                            "is it running, and is the address right?") from None
    return address
