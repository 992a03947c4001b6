"""The same build on Beam's DaskRunner against a real dask.distributed cluster on 127.0.0.1."""

from __future__ import annotations

import os

import pytest

from bertdata import formats
from conftest import run_cli
from servers import dask_cluster, stop_all, tree_digest

pytestmark = pytest.mark.slow


@pytest.fixture
def cluster(tmp_path):
    with open(tmp_path / "dask.log", "w") as log:
        scheduler_file, procs = dask_cluster(tmp_path, dict(os.environ), log)
        try:
            yield scheduler_file
        finally:
            stop_all(procs)


def test_dask_runner_gives_the_local_bytes(cluster, tmp_path):
    local = tmp_path / "local"
    # Several shards on every worker; LDDL folders too, whose files workers cut across shards, and
    # every format cut per split, whose splits workers finish.
    shards = ("--training-shards", "8", "--test-shards", "2", "--format", *formats.BUILTIN)
    run_cli("build", "--wiki-only", "--sample", "--output", local, *shards, "--workers", "2")
    on_dask = tmp_path / "dask"
    run_cli("build", "--wiki-only", "--sample", "--output", on_dask, *shards, "--runner", "dask", "--",
            f"--dask_scheduler_file={cluster}")
    digest = tree_digest(on_dask)
    assert any(name.endswith(".txt") for name in digest) and any(name.endswith(".hdf5") for name in digest)
    assert any(name.endswith(".parquet_7") for name in digest)
    assert any(name.endswith("/index.json") for name in digest) and any(name.endswith("README.md") for name in digest)
    assert any(name.endswith("_text_sentence.bin") for name in digest)
    assert digest == tree_digest(local)
