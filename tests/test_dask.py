"""The same build on Beam's DaskRunner against a real dask.distributed cluster on 127.0.0.1."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from conftest import run_cli
from test_build import tree_digest

pytestmark = pytest.mark.slow


@pytest.fixture
def dask_cluster(tmp_path):
    """A scheduler and two single-threaded worker processes, all on 127.0.0.1."""
    scheduler_file = tmp_path / "scheduler.json"
    dask = [sys.executable, "-m", "dask"]
    logs = open(tmp_path / "dask.log", "w")
    procs = [subprocess.Popen([*dask, "scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
                               "--scheduler-file", str(scheduler_file)], stdout=logs, stderr=logs)]
    try:
        deadline = time.time() + 60
        while not scheduler_file.exists():
            assert time.time() < deadline, "dask scheduler did not start"
            time.sleep(0.2)
        for _ in range(2):
            procs.append(subprocess.Popen(
                [*dask, "worker", "--scheduler-file", str(scheduler_file), "--nthreads", "1",
                 "--nworkers", "1", "--no-dashboard", "--host", "127.0.0.1", "--memory-limit", "4GiB"],
                stdout=logs, stderr=logs, cwd=tmp_path))
        from distributed import Client

        with Client(scheduler_file=str(scheduler_file), timeout=60) as client:
            client.wait_for_workers(2, timeout=90)
        yield scheduler_file
    finally:
        for proc in reversed(procs):
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
        logs.close()


def test_dask_runner_gives_the_local_bytes(dask_cluster, tmp_path):
    local = tmp_path / "local"
    # Several shards on every worker; LDDL folders too, whose files workers cut across shards.
    shards = ("--training-shards", "8", "--test-shards", "2", "--format", "both")
    run_cli("build", "--wiki-only", "--sample", "--output", local, *shards, "--workers", "2")
    on_dask = tmp_path / "dask"
    run_cli("build", "--wiki-only", "--sample", "--output", on_dask, *shards, "--runner", "dask", "--",
            f"--dask_scheduler_file={dask_cluster}")
    digest = tree_digest(on_dask)
    assert any(name.endswith(".txt") for name in digest) and any(name.endswith(".hdf5") for name in digest)
    assert any(name.endswith(".parquet_7") for name in digest)
    assert digest == tree_digest(local)
