"""Memory and throughput of `bertdata shard`.

(a) Peak RSS of `bertdata shard` (a child process, measured with wait4) on inputs of 1x and 8x
    size; the 8x run must peak at most 1.25x the 1x run. 1x is the largest input that fills
    one bucket (BUCKET_BYTES of uncompressed rows): smaller inputs have smaller buckets, so
    memory grows with the input up to there by design; beyond it buckets stay that size.
(b) hdf5 MB/s in and out against a baseline that only reads each input and gzip-writes it again
    with plain h5py in one process -- the least any re-partitioning must do. Not slower is required.

Inputs are the parity shard (../shared/data/parity) re-written with perturbed rows: token ids
shifted per copy and rows permuted, so copies differ but compress alike.

    python scripts/perf_shard.py [--copies 4] [--parts 8] [--work perf/shard] [--repeats 2]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bertdata.formats.hdf5io import FIELDS, read_shard, write_shard  # noqa: E402
from bertdata.instances.schema import record_dtype  # noqa: E402
from bertdata.reshard.shuffle import BUCKET_BYTES  # noqa: E402

PARITY = ROOT.parent / "shared" / "data" / "parity" / "A_s12345_128_20_p15_d5.hdf5"
VOCAB_SIZE = 30522

BASELINE = """
import sys, h5py
out = sys.argv[1]
for i, path in enumerate(sys.argv[2:]):
    with h5py.File(path, "r") as src, h5py.File(f"{out}/copy_{i}.hdf5", "w") as dst:
        for name in src:
            dst.create_dataset(name, data=src[name][...], compression="gzip", compression_opts=4)
"""


def make_inputs(folder: Path, copies: int) -> list[Path]:
    """`copies` perturbed re-writes of the parity shard, reusing those already made."""
    folder.mkdir(parents=True, exist_ok=True)
    base = read_shard(PARITY)
    paths = []
    for k in range(copies):
        path = folder / f"perf_training_{k}.hdf5"
        if not path.exists():
            rng = np.random.default_rng(k)
            order = rng.permutation(len(base["input_ids"]))
            arrays = {name: base[name][order] for name in FIELDS}
            # Shift real token ids (not the 0 padding) so each copy's rows are distinct.
            for name in ("input_ids", "masked_lm_ids"):
                ids = arrays[name]
                arrays[name] = np.where(ids > 0, (ids + 101 * k) % (VOCAB_SIZE - 1) + 1, 0).astype(ids.dtype)
            write_shard(path, arrays)
        paths.append(path)
    return paths


def run_child(argv: list[str]) -> tuple[float, float, int]:
    """(wall s, cpu s, peak RSS bytes) of one child process."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    stderr = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        sys.exit(f"{' '.join(argv[:4])} ... failed:\n{stderr.decode()[-2000:]}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss * 1024


def shard_run(inputs: list[Path], out: Path, parts: int, workers: int) -> tuple[float, float, int]:
    shutil.rmtree(out, ignore_errors=True)
    return run_child([sys.executable, "-m", "bertdata.cli", "shard", *map(str, inputs), "--output", str(out),
                      "--parts", str(parts), "--workers", str(workers)])


def baseline_run(inputs: list[Path], out: Path) -> tuple[float, float, int]:
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    return run_child([sys.executable, "-c", BASELINE, str(out), *map(str, inputs)])


def folder_bytes(paths) -> int:
    return sum(p.stat().st_size for p in paths)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--copies", type=int, default=0,
                        help="parity copies making 1x (default: as many as fit one bucket)")
    parser.add_argument("--parts", type=int, default=8)
    parser.add_argument("--work", type=Path, default=ROOT / "perf" / "shard")
    parser.add_argument("--repeats", type=int, default=2, help="timed runs per configuration; the best counts")
    args = parser.parse_args()
    if not PARITY.exists():
        sys.exit(f"{PARITY}: not found (needs ../shared beside the repo)")
    os.chdir(ROOT)
    row_bytes = record_dtype(128, 20).itemsize
    instances = len(read_shard(PARITY, 0, None)["next_sentence_labels"])
    copies = args.copies or max(1, BUCKET_BYTES // (instances * row_bytes))
    print(f"1x = {copies} perturbed copies of {PARITY.name} ({copies * instances:,} instances, "
          f"{copies * instances * row_bytes / 1e6:.0f} MB uncompressed); 8x = {8 * copies} copies")
    all_inputs = make_inputs(args.work / "inputs", 8 * copies)
    ok = True

    print("\n(a) peak RSS, --workers 1")
    peaks = {}
    for scale in (1, 8):
        inputs = all_inputs[:scale * copies]
        wall, cpu, peak = shard_run(inputs, args.work / "out", args.parts, 1)
        peaks[scale] = peak
        print(f"  {scale}x: {folder_bytes(inputs) / 1e6:7.1f} MB hdf5 in, peak RSS {peak / 2**20:6.1f} MiB, "
              f"{wall:5.1f} s")
    ratio = peaks[8] / peaks[1]
    ok &= ratio <= 1.25
    print(f"  8x / 1x peak RSS = {ratio:.3f} (limit 1.25): {'PASS' if ratio <= 1.25 else 'FAIL'}")

    print(f"\n(b) throughput on the 8x input, {args.parts} parts, best of {args.repeats} (wall / cpu seconds)")
    inputs = all_inputs
    mb_in = folder_bytes(inputs) / 1e6
    configs = [("baseline: h5py read + gzip write", None)] + [
        (f"bertdata shard --workers {w}", w) for w in sorted({1, os.cpu_count() or 1})]
    best: dict[str, tuple[float, float]] = {}
    for _ in range(args.repeats):
        # Interleaved, so load from other processes on the machine hits every configuration alike.
        for label, workers in configs:
            out = args.work / ("baseline" if workers is None else "out")
            wall, cpu, _ = baseline_run(inputs, out) if workers is None else \
                shard_run(inputs, out, args.parts, workers)
            mb_out = folder_bytes(out.glob("*.hdf5")) / 1e6
            if label not in best or wall < best[label][0]:
                best[label] = (wall, cpu, mb_out)
    base_wall = best[configs[0][0]][0]
    for label, _ in configs:
        wall, cpu, mb_out = best[label]
        print(f"  {label:36s} {wall:6.1f} s wall {cpu:6.1f} s cpu  {mb_in / wall:6.1f} MB/s in "
              f"{mb_out / wall:6.1f} MB/s out  ({wall / base_wall:.2f}x baseline time)")
    fastest = min(best[label][0] for label, w in configs if w is not None)
    ok &= fastest <= base_wall
    print(f"  fastest bertdata shard vs baseline: {fastest / base_wall:.2f}x the time: "
          f"{'PASS' if fastest <= base_wall else 'FAIL'}")
    shutil.rmtree(args.work / "out", ignore_errors=True)
    shutil.rmtree(args.work / "baseline", ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
