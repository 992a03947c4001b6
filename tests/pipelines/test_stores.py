"""Object-store settings without a store: which options a build passes on, and to whom."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re

import apache_beam as beam
import pytest

from bertdata.errors import BertdataError
from bertdata.pipelines.runtime import fsio
from bertdata.pipelines.runtime.stores import check_client, store_args

ENV = {"AWS_ENDPOINT_URL": "http://127.0.0.1:9000", "AWS_ACCESS_KEY_ID": "id", "AWS_SECRET_ACCESS_KEY": "secret",
       "AWS_DEFAULT_REGION": "eu-west-1", "AWS_REGION": "us-east-2"}


def test_the_environment_fills_in_what_the_beam_options_leave_out():
    args = store_args(["s3://bucket/out", "/local/dump.xml.bz2"], ["--s3_access_key_id=given"], ENV)
    assert args == ("--s3_access_key_id=given", "--s3_endpoint_url=http://127.0.0.1:9000",
                    "--s3_region_name=us-east-2", "--s3_secret_access_key=secret")


def test_a_service_specific_endpoint_wins_over_the_general_one():
    args = store_args(["s3://b/k"], [], {**ENV, "AWS_ENDPOINT_URL_S3": "http://s3.example:9000"})
    assert "--s3_endpoint_url=http://s3.example:9000" in args


def test_a_build_without_a_store_passes_no_secrets_on():
    assert store_args(["/out", "/dump.xml.bz2", None], ["--x=1"], ENV) == ("--x=1",)
    assert store_args(["gs://bucket/out"], [], ENV) == ()  # GCS clients read their own environment


def test_an_unknown_scheme_is_refused_and_urls_and_hdfs_pass():
    with pytest.raises(BertdataError, match="unknown storage scheme 'ftp://'"):
        check_client("ftp://host/dump.xml.bz2")
    for path in ("https://dumps.wikimedia.org/x.bz2", "hdfs://nn/out", "/local/out", "s3://bucket/out"):
        check_client(path)


def test_every_dofn_that_touches_files_carries_the_file_options():
    """A DoFn that is not a FilesDoFn would run on a cluster worker with no store settings."""
    import bertdata.pipelines as package

    dofns = []
    for module in pkgutil.walk_packages(package.__path__, "bertdata.pipelines."):
        if module.name.rpartition(".")[2] in ("attach", "pool", "worker"):  # processes, not pipeline code
            continue
        mod = importlib.import_module(module.name)
        dofns += [c for _, c in inspect.getmembers(mod, inspect.isclass)
                  if issubclass(c, beam.DoFn) and c.__module__ == mod.__name__
                  and re.search(r"\bfsio\b", inspect.getsource(c))]  # fsio's functions, or fsio handed on
    assert len(dofns) >= 7
    assert [c.__name__ for c in dofns if not issubclass(c, fsio.FilesDoFn)] == []


def test_a_files_dofn_configures_a_fresh_process_with_the_launchers_options(monkeypatch):
    monkeypatch.setattr(fsio, "_options", ("--s3_endpoint_url=http://127.0.0.1:1",))
    fn = fsio.FilesDoFn()
    monkeypatch.setattr(fsio, "_options", ())  # as in a worker that has not set any
    fn.setup()
    assert fsio._options == ("--s3_endpoint_url=http://127.0.0.1:1",)
    assert fsio.options().get_all_options()["s3_endpoint_url"] == "http://127.0.0.1:1"
    fsio.configure(())


def test_bench_says_it_reads_local_folders_only():
    from conftest import run_cli

    proc = run_cli("bench", "--data", "s3://bucket/hdf5", check=False)
    assert proc.returncode == 2
    assert proc.stderr.strip() == ("bertdata bench: error: s3://bucket/hdf5: bench reads local folders only; copy the "
                                   "shards down first, e.g. bertdata shard s3://bucket/hdf5 --parts N --output DIR")
