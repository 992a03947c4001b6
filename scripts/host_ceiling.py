"""What a host's cores give independent CPU-bound processes: the ceiling of any worker curve.

N copies of a plain-Python loop that shares nothing (no memory traffic to speak of, no I/O),
one pinned to each of N cores, against one copy alone. On N whole cores that is N. Cores that
are hyperthreads of fewer physical ones, a clock that drops as more cores are busy, or
neighbours on a shared host give less, and no build's N workers can beat it: a 1 -> 16 worker
curve of x8.4 means little until this machine's own x16 is known.

  python3 scripts/host_ceiling.py [N]      (default: every core this process may use)

Standard library only, so that it runs on a bare machine (the lent GPU machine among them).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

# A CPU-bound loop of plain Python, little memory; it prints its own time.
SPIN = "import time\nt = time.perf_counter()\nx = 0\nfor i in range({n}):\n    x += i * i % 7\nprint(time.perf_counter() - t)"
SPIN_ITERATIONS = 4_000_000
REPEATS = 3


def usable_cores() -> list[int]:
    return sorted(os.sched_getaffinity(0))


def _spin(core: int, iterations: int) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", SPIN.format(n=iterations)], stdout=subprocess.PIPE, text=True,
                            preexec_fn=lambda: os.sched_setaffinity(0, {core}))


def ceiling(cores: list[int], iterations: int = SPIN_ITERATIONS, repeats: int = REPEATS) -> tuple[float, float, float]:
    """(speed-up, one alone in s, all together in s): len(cores) copies, one per core, against one
    alone on the first; each the median of `repeats`, alone and together in turn, since a shared
    host's load changes by the second. The speed-up counts the slowest copy: a build waits for it."""
    def together() -> float:
        spinning = [_spin(core, iterations) for core in cores]
        return max(float(p.communicate()[0]) for p in spinning)

    alone, both = zip(*((float(_spin(cores[0], iterations).communicate()[0]), together()) for _ in range(repeats)))
    one, every = sorted(alone)[len(alone) // 2], sorted(both)[len(both) // 2]
    return len(cores) * one / every, one, every


def physical_cores(cores: list[int]) -> int | None:
    """How many physical cores `cores` sit on (hyperthreads of one core count once), from sysfs;
    None where the kernel does not say."""
    siblings = set()
    for core in cores:
        path = Path(f"/sys/devices/system/cpu/cpu{core}/topology/thread_siblings_list")
        try:
            siblings.add(path.read_text().strip())
        except OSError:
            return None
    return len(siblings)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("n", nargs="?", type=int, help="cores to fill (default: all this process may use)")
    parser.add_argument("--iterations", type=int, default=SPIN_ITERATIONS, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    cores = usable_cores()
    n = args.n or len(cores)
    if not 1 <= n <= len(cores):
        print(f"host_ceiling: N must be between 1 and the {len(cores)} cores this process may use (got {n})",
              file=sys.stderr)
        return 2
    cores = cores[:n]
    speedup, one, every = ceiling(cores, args.iterations)
    physical = physical_cores(cores)
    where = f", {physical} physical" if physical is not None else ""
    print(f"host ceiling: {n} CPU-bound processes, one per core ({n} cores{where}): x{speedup:.2f} of x{n} "
          f"(one alone {one:.3f} s, {n} together {every:.3f} s, medians of {REPEATS})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
