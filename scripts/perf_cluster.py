"""Cluster benchmark: the 32x dump, phase 1, built two ways on this machine, alternating:

  local  the local runner, 2 workers, dump and output on local disk;
  dask-disk  a Dask cluster of 2 single-threaded `dask worker` processes (each in its own
         folder and TMPDIR), dump and output on local disk: the runner's own cost;
  dask   the same cluster (no worker with the store's settings), dump and output on an S3
         store (moto's server on 127.0.0.1, the same one the tests use).

It prints each run's time and peak memory (RSS of the launcher's process tree; for dask, plus
the workers'), the best of each, and the ratio local / dask (1.0: as fast as local disk). The
S3 server runs on the same 2 cores as the build, so the dask figure carries its CPU too.

  .venv/bin/python scripts/perf_cluster.py [--factor 32] [--repeats 2]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "scripts"), str(ROOT / "tests")]

from perf_scale import VOCAB, process_tree, scaled_dump, tree_memory  # noqa: E402
from servers import BUCKET, S3Server, clear, dask_cluster, put_file, stop_all  # noqa: E402


class PeakMemory:
    """Peak of the summed RSS of some process trees, sampled every 0.1 s."""

    def __init__(self, procs):
        self.procs, self.peak = procs, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self):
        while not self._stop.wait(0.1):
            self.peak = max(self.peak, sum(tree_memory(process_tree(p), False)[0] for p in self.procs))

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


def build(args: list[str], env: dict, watch: list) -> tuple[float, int]:
    started = time.time()
    proc = subprocess.Popen([sys.executable, "-m", "bertdata.cli", "build", "--wiki-only", "--phase", "1",
                             "--vocab", str(VOCAB), *args], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    with PeakMemory([psutil.Process(proc.pid), *watch]) as memory:
        _, err = proc.communicate()
    if proc.returncode:
        raise SystemExit(f"build failed:\n{err}")
    return time.time() - started, memory.peak


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--factor", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=2)
    opts = parser.parse_args()
    dump = scaled_dump(opts.factor)
    work = Path(tempfile.mkdtemp(prefix="perf-cluster-"))
    server = S3Server(work / "moto.log")
    s3 = server.client()
    s3.create_bucket(Bucket=BUCKET)
    stored_dump = put_file(s3, dump, f"dumps/{dump.name}")
    put_file(s3, Path(str(dump).replace(".xml.bz2", "-index.txt.bz2")), f"dumps/{dump.name}".replace(
        ".xml.bz2", "-index.txt.bz2"))
    plain = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    log = open(work / "dask.log", "w")
    scheduler_file, cluster = dask_cluster(work, plain, log)
    workers = [psutil.Process(p.pid) for p in cluster[1:]]
    moto = psutil.Process(server.proc.pid)
    store_cpu = []  # CPU seconds the S3 server spent on each dask build, on the build's cores
    results = {"local": [], "dask-disk": [], "dask": []}
    try:
        for repeat in range(opts.repeats):
            out = work / "local"
            shutil.rmtree(out, ignore_errors=True)
            results["local"].append(build(["--dump", str(dump), "--output", str(out), "--workers", "2"], plain, []))
            out = work / "dask-disk"
            shutil.rmtree(out, ignore_errors=True)
            results["dask-disk"].append(build(["--dump", str(dump), "--output", str(out), "--runner", "dask", "--",
                                               f"--dask_scheduler_file={scheduler_file}"], plain, workers))
            clear(s3, "out")
            before = sum(moto.cpu_times()[:2])
            results["dask"].append(build(["--dump", stored_dump, "--output", f"s3://{BUCKET}/out", "--runner", "dask",
                                          "--", f"--dask_scheduler_file={scheduler_file}"],
                                         {**plain, **server.env}, workers))
            store_cpu.append(sum(moto.cpu_times()[:2]) - before)
            for kind in results:
                seconds, peak = results[kind][-1]
                print(f"run {repeat + 1}  {kind:9}  {seconds:6.1f} s  peak {peak / 2**20:7.0f} MiB", flush=True)
    finally:
        stop_all(cluster)
        log.close()
        server.stop()
        shutil.rmtree(work, ignore_errors=True)
    best = {kind: min(runs) for kind, runs in results.items()}
    print(f"{opts.factor}x dump, phase 1, best of {opts.repeats}: local 2 workers {best['local'][0]:.1f} s "
          f"(peak {best['local'][1] / 2**20:.0f} MiB); dask 2 workers, local disk {best['dask-disk'][0]:.1f} s; "
          f"dask 2 workers s3->s3 {best['dask'][0]:.1f} s "
          f"(peak {best['dask'][1] / 2**20:.0f} MiB, launcher + workers); speed vs local "
          f"{best['local'][0] / best['dask'][0]:.2f}; the S3 server used {min(store_cpu):.0f} CPU-s of the 2 cores "
          "during a dask build")


if __name__ == "__main__":
    main()
