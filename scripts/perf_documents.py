"""The formats holding documents beside hdf5: `build --phase 1 --format mds parquet` against
`build --phase 1` (hdf5) of the same scaled dump, both whole builds from the dump, alternating
so that both see the same load, and the peak memory of the document build from the smallest
dump to the largest (flat: bounded by a text shard, not the dump). Figures, not pass/fail;
run it while nothing else runs.

  .venv/bin/python scripts/perf_documents.py [--factor 32] [--repeats 3] [--workers 1] [--memory 8 64]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from perf_scale import WORK, scaled_dump, timed_build  # noqa: E402

DOCUMENTS = ("mds", "parquet")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--factor", type=int, default=32, help="the timed dump's size (default 32)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--memory", type=int, nargs="*", default=[8, 64], help="dumps whose peak RSS is compared")
    args = parser.parse_args()
    python = sys.executable
    dump = scaled_dump(args.factor)
    runs: dict[str, list[dict]] = {"hdf5": [], "documents": []}
    for _ in range(args.repeats):
        runs["hdf5"].append(timed_build(python, dump, args.workers, WORK / "out-hdf5", formats=("hdf5",)))
        runs["documents"].append(timed_build(python, dump, args.workers, WORK / "out-docs", formats=DOCUMENTS))
    print(f"{args.factor}x dump ({runs['hdf5'][0]['bz2_mb']:.1f} MB bz2), phase 1, {args.workers} worker(s), "
          f"median of {args.repeats}:")
    med = {}
    for name, label in (("hdf5", "--format hdf5"), ("documents", "--format " + " ".join(DOCUMENTS))):
        med[name] = {k: statistics.median(r[k] for r in runs[name]) for k in ("seconds", "cpu", "tree_mb", "out_mb")}
        m = med[name]
        print(f"  {label:24} {m['seconds']:7.2f} s wall, {m['cpu']:7.2f} s CPU, peak RSS {m['tree_mb']:6.0f} MB, "
              f"{m['out_mb']:7.1f} MB written")
    print(f"  ratio (documents / hdf5): wall {med['documents']['seconds'] / med['hdf5']['seconds']:.2f}x, "
          f"CPU {med['documents']['cpu'] / med['hdf5']['cpu']:.2f}x")
    if len(args.memory) >= 2:
        peaks = {f: timed_build(python, scaled_dump(f), args.workers, WORK / "out-docs", formats=DOCUMENTS)["tree_mb"]
                 for f in args.memory}
        low, high = min(args.memory), max(args.memory)
        print(f"  --format {' '.join(DOCUMENTS)} peak RSS: " + ", ".join(f"{f}x {peaks[f]:.0f} MB" for f in args.memory)
              + f"; {high}x / {low}x = {peaks[high] / peaks[low]:.2f}")


if __name__ == "__main__":
    main()
