"""Plugins (bertdata.plugins): the example packages under examples/ (a format, nanoGPT's npbin;
a corpus type, CSV), installed beside bertdata by pip, offline, into a folder of their own on
PYTHONPATH, are built with no edit to bertdata, by two local workers and on Dask, and read back;
a plugin that fails to import is one line; a format registered in-process is refused where
workers run elsewhere."""

from __future__ import annotations

import csv
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from bertdata import cli, formats
from conftest import ROOT, VOCAB, run_cli
from corpus_inputs import articles
from servers import dask_cluster, stop_all, tree_digest

EXAMPLES = ("npbin_format", "csv_corpus")


def with_path(folder: Path) -> dict:
    """The environment with `folder` first on PYTHONPATH: every process of a build (the pool's
    server and workers, Dask's) sees what is installed there."""
    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, (str(folder), os.environ.get("PYTHONPATH"))))}


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> dict:
    """The examples pip-installed (no index, no build isolation: offline) into a folder of their
    own, from copies, so that their builds leave nothing in the repository."""
    root = tmp_path_factory.mktemp("plugins")
    for name in EXAMPLES:
        shutil.copytree(ROOT / "examples" / name, root / name)
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--no-build-isolation",
                    "--target", str(root / "site"), *(str(root / name) for name in EXAMPLES)], check=True,
                   capture_output=True)
    return with_path(root / "site")


def csv_recipe(folder: Path) -> Path:
    """The fragment's articles as two CSV files, and a recipe of them as one `type: csv` corpus."""
    (folder / "csv").mkdir(parents=True)
    rows = articles()
    for n, part in enumerate((rows[::2], rows[1::2])):
        with open(folder / "csv" / f"articles_{n}.csv", "w", newline="", encoding="utf-8") as f:
            writer = csv.writer(f)
            writer.writerow(["id", "title", "text"])
            writer.writerows(part)
    recipe = folder / "recipe.yaml"
    recipe.write_text('corpora:\n  wiki: {type: csv, files: "csv/*.csv"}\n')
    return recipe


@pytest.mark.slow
def test_plugins_are_built_by_local_workers_and_on_dask(installed, tmp_path):
    from bertdata.formats.hfparquet import read_input_ids

    recipe = csv_recipe(tmp_path)
    args = ("build", "--recipe", recipe, "--vocab", VOCAB, "--format", "npbin", "parquet",
            "--training-shards", "4", "--test-shards", "2")
    run_cli(*args, "--output", tmp_path / "local", "--workers", "2", env=installed)
    local = tmp_path / "local"
    npbin, parquet = local / "npbin" / "lower_case_1", local / "parquet" / "lower_case_1"
    # The npbin files hold parquet's samples' ids, one after another, split by split.
    for name, split in (("train.bin", "train"), ("val.bin", "validation")):
        written = np.fromfile(npbin / name, dtype="<u2")
        assert len(written) and np.array_equal(written, np.concatenate(list(read_input_ids(parquet, split))))
    assert "npbin" in run_cli("inspect", npbin, env=installed).stdout
    # The contract test, run where the plugin is installed, checks it too.
    contract = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-k", "npbin or csv",
                               str(ROOT / "tests" / "formats" / "test_format_contract.py")],
                              capture_output=True, text=True, env=installed, cwd=ROOT)
    assert contract.returncode == 0 and "2 passed," in contract.stdout, contract.stdout
    (tmp_path / "cluster").mkdir()
    with open(tmp_path / "cluster" / "dask.log", "w") as log:
        scheduler_file, procs = dask_cluster(tmp_path / "cluster", installed, log)
        try:
            run_cli(*args, "--output", tmp_path / "dask", "--runner", "dask", "--",
                    f"--dask_scheduler_file={scheduler_file}", env=installed)
        finally:
            stop_all(procs)
    assert tree_digest(tmp_path / "dask") == tree_digest(local)


def broken_plugin(folder: Path, group: str, name: str) -> dict:
    """An installed package (its metadata written by hand) whose entry point's module fails to
    import."""
    info = folder / "broken_plugin-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: broken-plugin\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[{group}]\n{name} = bertdata_broken:THING\n")
    (folder / "bertdata_broken.py").write_text("import no_such_module_anywhere\n")
    return with_path(folder)


def test_a_plugin_that_fails_to_import_is_one_line(tmp_path):
    env = broken_plugin(tmp_path / "site", "bertdata.formats", "broken")
    out = tmp_path / "out"
    proc = run_cli("build", "--wiki-only", "--sample", "--output", out, "--format", "broken", env=env, check=False)
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [
        "bertdata build: error: plugin broken (entry point bertdata.formats: broken = bertdata_broken:THING): "
        "ModuleNotFoundError: No module named 'no_such_module_anywhere'"]
    assert not out.exists()  # no .bertdata-writing marker, nothing at all
    # Installed, it breaks no build that does not name it: its line in --help says why it is not there.
    assert "broken: (cannot be loaded: plugin broken" in " ".join(run_cli("build", "--help", env=env).stdout.split())


def test_a_corpus_type_plugin_that_fails_to_import_is_one_line(tmp_path):
    env = broken_plugin(tmp_path / "site", "bertdata.corpora", "broken")
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text('corpora:\n  c: {type: broken, files: "*.txt"}\n')
    out = tmp_path / "out"
    proc = run_cli("build", "--recipe", recipe, "--vocab", VOCAB, "--output", out, env=env, check=False)
    assert proc.returncode == 2 and len(proc.stderr.splitlines()) == 1, proc.stderr
    assert "error: plugin broken (entry point bertdata.corpora: broken = bertdata_broken:THING): " in proc.stderr
    assert not list(out.rglob(".bertdata-writing"))


@pytest.fixture
def registered():
    fmt = formats.register(type("Toy", (), {"name": "toy"})())
    yield fmt
    formats.unregister(fmt.name)


@pytest.mark.parametrize("runner", [("--workers", "2"), ("--runner", "dask")])
def test_a_format_registered_in_process_is_refused_where_workers_run_elsewhere(registered, runner, tmp_path, capsys):
    assert formats.in_process_only("toy") and not any(formats.in_process_only(n) for n in formats.BUILTIN)
    out = tmp_path / "out"
    assert cli.main(["build", "--wiki-only", "--sample", "--output", str(out), "--format", "toy", *runner]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "bertdata build: error: --format toy: registered in this process (formats.register), which no worker "
        "process sees; install it as a plugin (entry point group bertdata.formats), or build with --workers 1 "
        "or --runner in-memory"]
    assert not out.exists()
