"""A recipe's build at scale: the four-corpus mixture of tests/corpus_inputs.py (FineWeb-Edu parquet
filtered on int_score, Dolma and C4 JSON lines gzipped, books; mixed by token shares), grown to 8x
and 64x its documents, built into mds and parquet with the test suite's byte-level BPE: the peak
memory of each (flat: bounded by a work item and a text shard, not the corpora), the time, and the
shares met. Figures, not pass/fail; run it while nothing else runs. --dedup adds `dedup: true`: the
grown corpora repeat each document's text `factor` times under other ids, so dedup keeps one of
each (the memory of the signatures, the band jobs and the clusters at scale).

  .venv/bin/python scripts/perf_recipe.py [--factors 8 64] [--workers 1] [--dedup]
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(ROOT / "tests"))

from perf_scale import WORK, process_tree, tree_memory  # noqa: E402
from conftest import VOCAB, trained_tokenizer  # noqa: E402
from corpus_inputs import MIX, RECIPE, write_corpora  # noqa: E402


def corpora(factor: int) -> Path:
    """The mixture's corpora grown `factor` times, and its recipe (made once, kept under perf/scale)."""
    folder = WORK / f"corpora-x{factor}"
    if not (folder / "mixture.yaml").exists():
        shutil.rmtree(folder, ignore_errors=True)
        print(f"writing the {factor}x corpora (once; cached in {folder})", flush=True)
        write_corpora(folder, copies=factor)
        (folder / "mixture.yaml").write_text(RECIPE + MIX)
    (folder / "dedup.yaml").write_text(RECIPE + MIX + "name: mixture\ndedup: true\n")
    return folder


def measured_build(folder: Path, workers: int, out: Path, recipe: str = "mixture.yaml") -> dict:
    shutil.rmtree(out, ignore_errors=True)
    cmd = [sys.executable, "-m", "bertdata.cli", "build", "--recipe", str(folder / recipe), "--format", "mds",
           "parquet", "--tokenizer", str(trained_tokenizer("bpe")), "--vocab", str(VOCAB), "--workers", str(workers),
           "--output", str(out)]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = psutil.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=WORK)
    peak, samples, procs = 0, 0, []
    while proc.poll() is None:
        if samples % 10 == 0:
            procs = process_tree(proc)
        peak = max(peak, tree_memory(procs, with_pss=False)[0])
        samples += 1
        time.sleep(0.1)
    seconds = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode:
        raise SystemExit(f"build failed ({proc.returncode}): {' '.join(cmd)}\n{proc.stderr.read()[-2000:]}")
    text = json.loads(next(out.glob("sharded_*/mixture/manifest.json")).read_text())
    input_mb = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) / 1e6
    return {"seconds": seconds, "cpu": after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime,
            "peak_mb": peak / 2**20, "input_mb": input_mb, "documents": text["counts"]["documents"],
            "shares": {name: f["share"] for name, f in text["corpora"].items()}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--factors", type=int, nargs="+", default=[8, 64])
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--dedup", action="store_true", help="build the recipe with dedup: true")
    args = parser.parse_args()
    WORK.mkdir(parents=True, exist_ok=True)
    found = {}
    for factor in args.factors:
        m = found[factor] = measured_build(corpora(factor), args.workers, WORK / "out-recipe",
                                           "dedup.yaml" if args.dedup else "mixture.yaml")
        shares = ", ".join(f"{name} {share:.3f}" for name, share in m["shares"].items())
        print(f"{factor}x: {m['input_mb']:.1f} MB of corpora, {m['documents']:,} documents kept, {m['seconds']:.1f} s "
              f"wall, {m['cpu']:.1f} s CPU, peak RSS {m['peak_mb']:.0f} MB; token shares {shares}", flush=True)
    low, high = min(args.factors), max(args.factors)
    print(f"peak RSS {high}x / {low}x = {found[high]['peak_mb'] / found[low]['peak_mb']:.2f} "
          f"for {found[high]['input_mb'] / found[low]['input_mb']:.1f}x the input ({args.workers} worker(s))")


if __name__ == "__main__":
    main()
