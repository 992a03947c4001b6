"""Benchmark `bertdata instances` on one core against the reference script's figures.

Builds an ~11 MB text shard from ../shared/data/parity/shard_A.txt (ten copies; every copy
after the first has the words of each sentence shuffled with a fixed seed, so no line
repeats), then runs `bertdata instances` on it pinned to one core (taskset -c 0), seq 128 /
dupe 5, twice per masking scheme, alternating token and whole-word (the faster run counts; the
machine is shared and noisy). Prints wall seconds, the command's peak RSS, instances/s, MB of
text/s, the ratio to the reference (27.4 s, 740 MB on this shard, token masking), where the time
goes (tokenize / instances / write), and whole-word's cost over token's (target: at most 1.10x).

usage: python scripts/perf_instances.py [--workdir perf] [--runs 2]
"""

from __future__ import annotations

import argparse
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "data"
REFERENCE_SECONDS = 27.4
REFERENCE_RSS_MB = 740.0
TARGET_SECONDS = 6.8
TARGET_RSS_MB = 246.0
SCHEMES = ("token", "whole-word")
TARGET_WHOLE_WORD_RATIO = 1.10
COPIES = 10


def build_shard(source: Path, dest: Path) -> int:
    """Write the benchmark shard; returns its size in bytes."""
    lines = source.read_text(encoding="utf-8").splitlines()
    rng = random.Random(20240601)
    with dest.open("w", encoding="utf-8") as out:
        out.write("\n".join(lines) + "\n")
        for _ in range(COPIES - 1):
            for line in lines:
                words = line.split()
                rng.shuffle(words)
                out.write(" ".join(words) + "\n")
    return dest.stat().st_size


def run_once(shard: Path, output: Path, vocab: Path | None, scheme: str) -> tuple[float, float, float, str, str]:
    """Wall seconds, CPU seconds and peak RSS (MB) of one `bertdata instances` process, its
    stdout and stderr. CPU time is the figure to trust on a busy machine."""
    cmd = [sys.executable, "-m", "bertdata.cli", "instances", str(shard), "--output", str(output),
           "--force", "--max-seq-length", "128", "--max-predictions-per-seq", "20", "--dupe-factor", "5",
           "--masking-scheme", scheme]
    if vocab is not None:
        cmd += ["--vocab", str(vocab)]
    if shutil.which("taskset"):
        cmd = ["taskset", "-c", "0", *cmd]  # taskset execs the command: same pid, same rusage
    env = dict(os.environ, BERTDATA_PROFILE="1")
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=out, stderr=err, text=True)
        # wait4 gives this one child's rusage, so each run's peak RSS is its own.
        _pid, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
    if proc.returncode != 0:
        sys.exit(f"perf: `{' '.join(cmd)}` failed with exit code {proc.returncode}:\n{stderr}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, stdout, stderr


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workdir", default=str(ROOT / "perf"), help="folder for the shard and output")
    parser.add_argument("--runs", type=int, default=2, help="timed runs (default: 2)")
    args = parser.parse_args()

    source = SHARED / "parity" / "shard_A.txt"
    if not source.exists():
        print(f"perf: {source} not found; this benchmark needs ../shared/data beside the project")
        return 2
    vocab = SHARED / "vocab" / "bert-base-uncased-vocab.txt"
    workdir = Path(args.workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    shard = workdir / "perf_shard.txt"
    size = build_shard(source, shard)
    mb = size / 1e6
    print(f"shard: {shard} ({mb:.1f} MB, {COPIES} copies of {source.name}); "
          f"seq 128, max pred 20, dupe 5, one core{'' if shutil.which('taskset') else ' (no taskset!)'}")

    best: dict[str, tuple[float, float, float]] = {}
    for run in range(1, args.runs + 1):
        for scheme in SCHEMES:
            wall, cpu, rss, stdout, stderr = run_once(shard, workdir / "perf_out.hdf5",
                                                      vocab if vocab.exists() else None, scheme)
            instances = int(re.search(r"([\d,]+) instances", stdout).group(1).replace(",", ""))
            stages = re.search(r"stages: (.*)", stderr)
            seconds = {k: float(v) for k, v in re.findall(r"(\w+) ([\d.]+) s", stages.group(1))} if stages else {}
            print(f"run {run}, {scheme}: {wall:.2f} s wall ({cpu:.2f} s CPU), peak RSS {rss:.0f} MB, "
                  f"{instances / wall:,.0f} instances/s, {mb / wall:.2f} MB text/s")
            print(f"  stages: {stages.group(1) if stages else 'n/a'}; the rest is interpreter start and imports")
            if scheme not in best or wall < best[scheme][0]:
                best[scheme] = (wall, rss, seconds.get("instances", float("nan")))
    wall, rss, _ = best["token"]
    print(f"best, token: {wall:.2f} s ({REFERENCE_SECONDS / wall:.1f}x faster than the reference's "
          f"{REFERENCE_SECONDS} s; target <= {TARGET_SECONDS} s {'met' if wall <= TARGET_SECONDS else 'MISSED'}), "
          f"peak RSS {rss:.0f} MB ({REFERENCE_RSS_MB / rss:.1f}x less than {REFERENCE_RSS_MB:.0f} MB; "
          f"target <= {TARGET_RSS_MB:.0f} MB {'met' if rss <= TARGET_RSS_MB else 'MISSED'})")
    ratio = best["whole-word"][0] / wall
    print(f"best, whole-word: {best['whole-word'][0]:.2f} s, peak RSS {best['whole-word'][1]:.0f} MB: "
          f"{ratio:.3f}x token's time (target <= {TARGET_WHOLE_WORD_RATIO:.2f}x "
          f"{'met' if ratio <= TARGET_WHOLE_WORD_RATIO else 'MISSED'}); instance stage alone "
          f"{best['whole-word'][2]:.2f} s vs {best['token'][2]:.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
