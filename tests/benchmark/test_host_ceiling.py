"""scripts/host_ceiling.py: the ceiling of a worker curve, measured with the standard library only."""

from __future__ import annotations

import os
import re
import subprocess
import sys

from conftest import ROOT

SCRIPT = ROOT / "scripts" / "host_ceiling.py"


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-I", str(SCRIPT), *args], capture_output=True, text=True, timeout=120)


def test_the_ceiling_of_every_usable_core_is_one_line_with_its_physical_cores():
    n = len(os.sched_getaffinity(0))
    done = run("--iterations", "2000000")  # ~0.2 s a copy: long enough for the scheduler's noise to even out
    assert done.returncode == 0, done.stderr
    found = re.fullmatch(rf"host ceiling: {n} CPU-bound processes, one per core \({n} cores, (\d+) physical\): "
                         rf"x(\d+\.\d\d) of x{n} \(one alone [\d.]+ s, {n} together [\d.]+ s, medians of 3\)\n",
                         done.stdout)
    assert found, done.stdout
    assert 1 <= int(found[1]) <= n
    # Independent processes cannot go faster together than one per core alone (timer noise aside).
    assert 0 < float(found[2]) <= n * 1.5


def test_more_cores_than_usable_is_refused_in_one_line():
    n = len(os.sched_getaffinity(0))
    done = run(str(n + 1))
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == (f"host_ceiling: N must be between 1 and the {n} cores this process may use "
                           f"(got {n + 1})\n")
