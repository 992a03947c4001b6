"""Memory and throughput of the Megatron merge (bertdata.formats.megatron.merge_pairs).

(a) Peak RSS of a child process merging parts of 1x and 8x the data: the merge streams, so the
    8x run should peak about as high as the 1x run (a ratio near 1), not 8 times higher.
(b) MB/s of our merge against Megatron's own (megatron-core's IndexedDatasetBuilder.add_index,
    which merge_datasets.py runs), where megatron-core is installed; both outputs compared.

Parts are random documents (1-30 sentences of 5-60 ids, as Wikipedia's), written by write_pair.

    python scripts/perf_megatron.py [--parts 16] [--mb 64] [--work perf/megatron]
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bertdata.formats.megatron import pair_paths, write_pair  # noqa: E402
from bertdata.instances.documents import Documents  # noqa: E402

OURS = """
import sys
from bertdata.formats.megatron import merge_pairs
merge_pairs(sys.argv[2:], sys.argv[1])
print(next(line for line in open("/proc/self/status") if line.startswith("VmHWM")))
"""
MEGATRON = """
import sys, numpy
from megatron.core.datasets.indexed_dataset import IndexedDatasetBuilder, get_bin_path, get_idx_path
builder = IndexedDatasetBuilder(get_bin_path(sys.argv[1]), dtype=numpy.uint16)
for part in sys.argv[2:]:
    builder.add_index(part)
builder.finalize(get_idx_path(sys.argv[1]))
print(next(line for line in open("/proc/self/status") if line.startswith("VmHWM")))
"""


def make_parts(folder: Path, parts: int, total_mb: float, seed: int) -> list[str]:
    rng = np.random.default_rng(seed)
    prefixes = []
    sentences = int(total_mb * 1e6 / 2 / 32.5 / parts)  # 32.5 ids per sentence on average
    for i in range(parts):
        lengths = rng.integers(5, 61, sentences)
        ends = np.cumsum(rng.integers(1, 31, sentences))
        doc_offsets = np.concatenate(([0], ends[ends < sentences], [sentences]))
        sentence_offsets = np.concatenate(([0], np.cumsum(lengths)))
        tokens = rng.integers(0, 30522, sentence_offsets[-1]).astype(np.uint16)
        prefix = folder / f"part{i}"
        write_pair(*pair_paths(prefix), Documents(("random",), tokens, sentence_offsets, doc_offsets), 30522)
        prefixes.append(str(prefix))
    return prefixes


def run(code: str, out: Path, parts: list[str]) -> tuple[float, float]:
    """Seconds and peak RSS (MB) of a child process running `code`. The peak is the child's own
    VmHWM: wait4's ru_maxrss would keep the parent's RSS, copied at the fork, across the exec."""
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", code, str(out), *parts], cwd=ROOT, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if proc.returncode:
        raise SystemExit(f"merge exited with status {proc.returncode}:\n{proc.stderr}")
    hwm = next(line for line in proc.stdout.splitlines() if line.startswith("VmHWM"))
    return seconds, int(hwm.split()[1]) / 1024


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--parts", type=int, default=16)
    ap.add_argument("--mb", type=float, default=64, help=".bin MB of the 1x data")
    ap.add_argument("--work", default="perf/megatron")
    args = ap.parse_args()
    work = Path(args.work)
    shutil.rmtree(work, ignore_errors=True)
    peaks = {}
    for scale in (1, 8):
        folder = work / f"x{scale}"
        folder.mkdir(parents=True)
        parts = make_parts(folder, args.parts, args.mb * scale, seed=scale)
        seconds, peak = run(OURS, folder / "merged", parts)
        size = sum(os.path.getsize(p) for p in pair_paths(folder / "merged")) / 1e6
        peaks[scale] = peak
        print(f"{scale}x: {size:,.0f} MB merged in {seconds:.2f} s ({size / seconds:,.0f} MB/s), "
              f"peak RSS {peak:,.0f} MB")
        if importlib.util.find_spec("megatron") is not None:
            theirs, their_peak = run(MEGATRON, folder / "theirs", parts)
            same = all(Path(a).read_bytes() == Path(b).read_bytes()
                       for a, b in zip(pair_paths(folder / "merged"), pair_paths(folder / "theirs")))
            print(f"    megatron-core's add_index: {theirs:.2f} s, peak RSS {their_peak:,.0f} MB (its import of torch "
                  "included); "
                  f"ours/theirs time {seconds / theirs:.2f}, same bytes: {same}")
        shutil.rmtree(folder)
    print(f"peak RSS 8x / 1x: {peaks[8] / peaks[1]:.2f}")


if __name__ == "__main__":
    main()
