"""Measure what a build writes per byte of bz2 dump, the figures behind bertdata/estimate.py.

Builds the real fragment with `--format both --phase both` (one worker), polling the work
folder every 0.1 s, then prints, per byte of dump and per byte of clean text (the form
estimate.py keeps, so that books count too), the text shards, each format's phase folders and
the peaks of the temporaries: the text stage's run files (removed once it ends) and LDDL's
(kept until its files are cut).
Then times `--phase 1 --format hdf5` against `--phase both --format both` and `--stop-after
text` on a 4x multistream copy of the fragment (scripts/make_scaled_dump.py; less of the time
is start-up than on 1x), one worker each: the ratios scale the measured phase-1 rate.

  .venv/bin/python scripts/perf_disk.py
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "data"
FRAGMENT = SHARED / "wiki" / "enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2"
VOCAB = SHARED / "vocab" / "bert-base-uncased-vocab.txt"


def size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) if path.exists() else 0


def build(dump: Path, out: Path, *extra: str) -> tuple[float, dict[str, int]]:
    """Wall seconds and the peak bytes of the work folder's run files: the text stage's and LDDL's."""
    shutil.rmtree(out, ignore_errors=True)
    cmd = [sys.executable, "-m", "bertdata.cli", "build", "--wiki-only", "--dump", str(dump), "--vocab",
           str(VOCAB), "--workers", "1", "--output", str(out), *extra]
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    peak = {"runs": 0, "lddl": 0}
    while proc.poll() is None:
        for name in peak:
            peak[name] = max(peak[name], size(out / ".bertdata-work" / name))
        time.sleep(0.1)
    if proc.returncode:
        raise SystemExit(f"build failed ({proc.returncode}): {' '.join(cmd)}")
    return time.perf_counter() - start, peak


def main() -> None:
    if not FRAGMENT.exists():
        raise SystemExit(f"{FRAGMENT} is absent: this benchmark needs ../shared")
    dump = FRAGMENT.stat().st_size
    with tempfile.TemporaryDirectory(prefix="perf-disk-") as tmp:
        out = Path(tmp) / "both"
        _, work = build(FRAGMENT, out, "--phase", "both", "--format", "both", "megatron")
        folders = {
            "text": next(out.glob("sharded_*")),
            "hdf5 phase 1": next(out.glob("hdf5_*_seq_len_128_*")),
            "hdf5 phase 2": next(out.glob("hdf5_*_seq_len_512_*")),
            "lddl phase 1": out / "pretrain" / "phase1",
            "lddl phase 2": out / "pretrain" / "phase2",
            "megatron": out / "megatron",
        }
        sizes = {name: size(folder) for name, folder in folders.items()}
        scaled = Path(tmp) / "x4-pages-articles-multistream.xml.bz2"
        subprocess.run([sys.executable, str(ROOT / "scripts" / "make_scaled_dump.py"), str(FRAGMENT), str(scaled),
                        "--factor", "4"], check=True, capture_output=True)
        text_s, _ = build(scaled, Path(tmp) / "text", "--stop-after", "text")
        one_s, _ = build(scaled, Path(tmp) / "one", "--phase", "1", "--format", "hdf5")
        both_s, _ = build(scaled, Path(tmp) / "both4", "--phase", "both", "--format", "both")
    text = sizes["text"]
    print(f"dump {dump:,} bytes (bz2); clean text {text:,} bytes: {text / dump:.3f} per dump byte")
    for name, n in sizes.items():
        print(f"  {name:13} {n:>12,} bytes  {n / dump:6.3f} per dump byte  {n / text:6.3f} per text byte")
    for name, n in work.items():
        print(f"  {'runs: ' + name:13} {n:>12,} bytes  {n / dump:6.3f} per dump byte  {n / text:6.3f} per text byte"
              " (peak)")
    lddl = sizes["lddl phase 1"] + sizes["lddl phase 2"]
    print(f"  LDDL runs per byte of LDDL output: {work['lddl'] / lddl:.3f}")
    print(f"4x dump, one worker: --phase 1 --format hdf5 {one_s:.1f} s; --phase both --format both {both_s:.1f} s "
          f"({both_s / one_s:.2f}x); --stop-after text {text_s:.1f} s ({text_s / one_s:.2f}x)")
    print(f"(cores on this machine: {os.cpu_count()}; the machine is shared, times are noisy)")


if __name__ == "__main__":
    main()
