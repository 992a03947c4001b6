"""Manifests: one writer, so build and shard folders record the tool alike."""

from __future__ import annotations

import json
import time

import numpy as np

from bertdata import __version__
from bertdata.manifest import MANIFEST, Run, library_versions, tool_record, write_manifest
from shards import random_shard, reshard


def test_a_manifest_gets_its_tool_and_run_records_and_replaces_the_old_one_whole(tmp_path):
    run = Run(time.time() - 3, "local", 2)
    tool = tool_record("bertdata test")
    path = tmp_path / MANIFEST
    path.write_text("an older manifest")
    write_manifest(path, {"counts": {"b": 2, "a": 1}}, tool, run.record(reused_shards=4))
    manifest = json.loads(path.read_text())
    assert manifest["tool"] == {"name": "bertdata test", "version": __version__, "libraries": library_versions()}
    record = manifest["run"]
    assert record["started"] == run.started_at and record["finished"] >= record["started"]
    assert 3 <= record["seconds"] < 60
    assert (record["runner"], record["workers"], record["reused_shards"]) == ("local", 2, 4)
    assert manifest["counts"] == {"a": 1, "b": 2}
    assert [p.name for p in tmp_path.iterdir()] == [MANIFEST]  # no temporary left beside it


def test_a_shard_folders_manifest_records_the_tool_as_a_builds_does(tmp_path):
    rng = np.random.default_rng(3)
    source = random_shard(tmp_path / "wikicorpus_en_training_0.hdf5", 40, rng)
    reshard(source, output=tmp_path / "out", parts=2)
    manifest = json.loads((tmp_path / "out" / MANIFEST).read_text())
    assert manifest["tool"]["name"] == "bertdata shard" and manifest["tool"]["version"] == __version__
    assert set(manifest["tool"]) == {"name", "version", "libraries"} and "python" in manifest["tool"]["libraries"]
    assert "run" not in manifest  # the same inputs and options give the same bytes
