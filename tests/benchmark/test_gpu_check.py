"""benchmark/gpu_check.sh in its CPU smoke mode, as on a bare GPU machine: a copy of the checkout
with nothing built, a Python that has torch, h5py, numpy and setuptools but no bertdata install,
no package registry and no ../shared beside it; bertdata's imports of anything else that machine
lacks fail as they would there (tests/lent_imports.py)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

pytest.importorskip("torch", reason="the bench extra (torch) is not installed")

from conftest import ROOT  # noqa: E402

LENT_IMPORTS = ROOT / "tests" / "lent_imports.py"


def bare_python(tmp_path: Path) -> Path:
    """A venv that sees this environment's packages as plain folders: their .pth files (the
    editable install of bertdata among them) are not run, so bertdata does not import; and the
    lent machine's import hook as its sitecustomize."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = next((venv / "lib").glob("python3*")) / "site-packages"
    (site / "packages.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    shutil.copy(LENT_IMPORTS, site / "sitecustomize.py")
    python = venv / "bin" / "python"
    probe = subprocess.run([str(python), "-c", "import torch, h5py, setuptools; import bertdata"],
                           capture_output=True, text=True, cwd=tmp_path)
    assert "No module named 'bertdata'" in probe.stderr
    return python


def checkout_copy(tmp_path: Path) -> Path:
    """The checkout's files as git tracks them, without anything built in place."""
    files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    copy = tmp_path / "checkout"
    for name in files.decode().split("\0"):
        if name and (ROOT / name).is_file():
            (copy / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, copy / name)
    assert not list(copy.rglob("*.so"))
    return copy


@pytest.mark.slow
@pytest.mark.timeout(900)  # the script's own time-out below; a quiet 2-core machine needs a few minutes
def test_the_gpu_check_runs_from_a_bare_checkout_without_a_registry(tmp_path):
    if not (ROOT / ".git").exists():
        pytest.skip("needs a git checkout")
    python, copy, out = bare_python(tmp_path), checkout_copy(tmp_path), tmp_path / "out"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    env.update(PYTHON=str(python), PIP_NO_INDEX="1", DEVICE="cpu", MODEL="tiny", BATCH="8", QUICK="1",
               TARGET_SEQS="0", OUT=str(out), PATH=f"{python.parent}:{env['PATH']}",
               DEADLINE="800")  # on a busy machine too, no run's limit is cut by the 10-minute slot's deadline
    done = subprocess.run(["bash", str(copy / "benchmark" / "gpu_check.sh")], env=env, capture_output=True,
                          text=True, timeout=900)
    log = done.stdout + done.stderr
    assert done.returncode == 0, log[-3000:]
    assert "building its compiled modules in place" in log
    assert "writing synthetic reference-layout shards" in log  # no ../shared beside the copy
    assert "parity on cpu" in log and "parity FAILED" not in log
    assert "host ceiling: " in log
    assert "dropout off, fp32" in log and log.count("dropout on, 8 draws") == 2  # both lengths
    records = [r for name in ("loader", "bf16_compiled", "bf16_compiled_512", "bf16_compiled_global",
                              "bf16_compiled_512_global", "bf16_compiled_graphs", "bf16_compiled_padded",
                              "amp_tf32_compiled", "bf16_compiled_mds1024")
               for r in json.loads((out / f"{name}.json").read_text())]
    assert [(r["precision"], r["seq_len"], r["layout"], r["accumulation"]) for r in records[1:]] == [
        ("bf16", 128, "packed", 1), ("bf16", 512, "packed", 1), ("bf16", 128, "packed", 2),
        ("bf16", 512, "packed", 2), ("bf16", 128, "packed", 1), ("bf16", 128, "padded", 1), ("amp", 128, "packed", 1), ("tf32", 128, "packed", 1),
        ("bf16", 1024, "packed", 1)]
    assert records[-1]["objective"] == "mlm" and records[-1]["data_format"] == "mds"
    # A smoke batch of full rows has no padding (the synthetic shards' rows are 90% full).
    assert all(0 < r["real_tokens_per_second"] <= r["tokens_per_second"] for r in records)
    assert any(r["real_tokens_per_second"] < r["tokens_per_second"] for r in records)
    # Every run states its time against its limit; on a quiet 2-core machine each uses a third at most.
    spent = re.findall(r"run (\w+) took (\d+) s wall, ([\d.]+) s user \+ ([\d.]+) s system CPU, of its limit (\d+) s",
                       log)
    assert [name for name, *_ in spent] == ["parity", "loader", "bf16_compiled", "bf16_compiled_512",
                                            "bf16_compiled_global", "bf16_compiled_512_global",
                                            "bf16_compiled_graphs", "bf16_compiled_padded", "amp_tf32_compiled",
                                            "bf16_compiled_mds1024"]
    assert records[5]["token_buckets"] == 4 and records[5]["batch_shapes"] <= 4
    for name, wall, user, system, limit in spent:
        print(f"{name}: {wall} s wall, {float(user) + float(system):.1f} s CPU of {limit} s")
    assert "kernels by their own time" in (out / "profile_bf16_compiled.txt").read_text()


def heredoc(after: str) -> str:
    """The Python of gpu_check.sh's heredoc on the line that ends with `after`."""
    script = (ROOT / "benchmark" / "gpu_check.sh").read_text()
    found = re.search(re.escape(after) + r" <<'EOF' \|\| exit 1\n(.*?)\nEOF\n", script, re.S)
    assert found, f"gpu_check.sh has no heredoc after {after!r}"
    return found.group(1)


def test_the_gpu_checks_mds_row_imports_only_what_the_lent_machine_has(tmp_path):
    """The MDS row's steps (its folder written, then read by the bench's loader) in this
    environment, under the lent machine's import hook: quicker than the whole check, and the row
    where a codec imported at load (zstandard) broke it there."""
    hook = tmp_path / "hook"
    hook.mkdir()
    shutil.copy(LENT_IMPORTS, hook / "sitecustomize.py")
    env = {**os.environ, "PYTHONPATH": str(hook)}
    refused = subprocess.run([sys.executable, "-c", "import zstandard"], env=env, capture_output=True, text=True)
    assert "the lent GPU machine has none" in refused.stderr  # the hook is on
    data = tmp_path / "mds1024"
    made = subprocess.run([sys.executable, "-", str(ROOT), str(data)], input=heredoc('"$DATA/mds1024"'), env=env,
                          capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert made.returncode == 0, made.stderr[-3000:]
    bench = subprocess.run([sys.executable, "-m", "bertdata.cli", "bench", "--data", str(data), "--device", "cpu",
                            "--model", "tiny", "--workers", "1", "--loader-only", "--batch-size", "4", "--steps", "2",
                            "--warmup-steps", "1", "--vocab", str(ROOT / "tests" / "data" / "vocab.txt")],
                           env=env, capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert bench.returncode == 0, bench.stderr[-3000:]
