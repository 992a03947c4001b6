"""The performance plots and the release history table, made from the recorded figures.

Every number comes from one data file (docs/figures/performance.json), each with its date, the
commit it measured and the machine; this script only draws them:

- build.png: the build's speed per core, release by release (the full English dump's projected
  core-hours turned into MB of bz2 per core-second), and the hour's host speed beside it;
- workers.png: the worker curve on 16 cores against a perfect one and the host's ceiling;
- gpu.png: training throughput by precision and sequence length, NGC's published rows beside ours.

  python scripts/plot_performance.py [--data docs/figures/performance.json] [--out docs/figures]
  python scripts/plot_performance.py --table     (the history table docs/performance.md holds)

Needs matplotlib (the `dev` extra).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "docs" / "figures" / "performance.json"
PLOTS = ("build.png", "workers.png", "gpu.png")


def load(path: Path = DATA) -> dict:
    return json.loads(Path(path).read_text(encoding="utf-8"))


def _mb_per_core_second(data: dict, core_hours: float) -> float:
    return data["full_dump_mb"] / (core_hours * 3600)


def _figure(ncols: int = 1, width: float = 9.0):
    import matplotlib

    matplotlib.use("Agg")  # files only: no display needed
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, ncols, figsize=(width, 4.6), dpi=110)
    return plt, fig, axes


def plot_build(data: dict, out: Path) -> Path:
    build = data["build"]
    releases = build["releases"]
    plt, fig, ax = _figure()
    x = range(len(releases))
    speed = [_mb_per_core_second(data, r["core_hours"]) for r in releases]
    ax.plot(x, speed, "o-", color="tab:blue", label="build, MB of bz2 per core-second (projection)")
    for i, r in enumerate(releases):
        ax.annotate(f"{r['core_hours']:.2f} h", (i, speed[i]), textcoords="offset points", xytext=(0, 7),
                    ha="center", fontsize=7)
    ax.set_ylabel("MB of bz2 per core-second")
    ax.set_ylim(0, max(speed) * 1.2)
    ax.set_xticks(list(x))
    ax.set_xticklabels([f"{r['date']}\n{r['commit'] or r['recorded_in'] or ''}" for r in releases],
                       rotation=60, ha="right", fontsize=6.5)
    hour = ax.twinx()
    measured = [(i, r["libbz2_8x_s"]) for i, r in enumerate(releases) if r["libbz2_8x_s"] is not None]
    hour.plot([i for i, _ in measured], [s for _, s in measured], "s", color="tab:gray", alpha=0.6,
              label="the hour's host: libbz2 on the 8x dump, s (lower = faster hour)")
    hour.set_ylabel("libbz2, 8x dump (s)", color="tab:gray")
    hour.set_ylim(0, 3.5)
    lines = ax.get_legend_handles_labels()[0] + hour.get_legend_handles_labels()[0]
    labels = ax.get_legend_handles_labels()[1] + hour.get_legend_handles_labels()[1]
    ax.legend(lines, labels, loc="upper left", fontsize=7.5)
    ax.set_title(f"bertdata build --phase 1, full English dump ({data['full_dump_mb'] / 1000:.0f} GB of bz2) "
                 f"projected from the 8x-64x dumps; {build['machine']}", fontsize=8.5)
    ax.grid(alpha=0.3)
    return _save(plt, fig, out / "build.png")


def plot_workers(data: dict, out: Path) -> Path:
    curve = data["worker_curve"]
    plt, fig, ax = _figure()
    workers, seconds = curve["workers"], curve["seconds"]
    speedup = [seconds[0] / s for s in seconds]
    ax.plot(workers, workers, "--", color="tab:gray", label="N workers, N times as fast")
    ax.plot(workers, speedup, "o-", color="tab:blue",
            label=f"the build, {curve['machine']} ({curve['date']}, {curve['commit']})")
    for w, s, t in zip(workers, speedup, seconds):
        ax.annotate(f"x{s:.2f} ({t:.0f} s)", (w, s), textcoords="offset points", xytext=(6, -12), fontsize=7.5)
    for c in curve["ceilings"]:
        ax.plot([c["cores"], c["cores"]], [c["low"], c["high"]], "-", color="tab:red", lw=3, alpha=0.5)
    low = min(c["low"] for c in curve["ceilings"])
    high = max(c["high"] for c in curve["ceilings"])
    ax.plot([], [], "-", color="tab:red", lw=3, alpha=0.5,
            label=f"host ceiling, measured: 2-core VM x{low:.2f}-x{high:.2f} (N processes on N cores)")
    if curve["ceiling_16"] is None:
        ax.annotate("16-core ceiling not yet measured:\nscripts/host_ceiling.py on that machine",
                    (16, speedup[-1]), textcoords="offset points", xytext=(-170, -80), fontsize=7.5,
                    arrowprops={"arrowstyle": "->", "color": "tab:red"}, color="tab:red")
    else:
        ax.plot([16], [curve["ceiling_16"]], "*", color="tab:red", ms=12)
    ax.set_xlabel("workers")
    ax.set_ylabel("speed-up over one worker")
    ax.set_xticks(workers)
    ax.set_xlim(0, 17)
    ax.set_ylim(0, 17)
    ax.legend(loc="upper left", fontsize=7.5)
    ax.set_title("The worker curve: the real fragment x160, phase 1, the same bytes at every count", fontsize=8.5)
    ax.grid(alpha=0.3)
    return _save(plt, fig, out / "workers.png")


_GPUS = ("V100", "A100", "H100", "H200")


def plot_gpu(data: dict, out: Path) -> Path:
    gpu = data["gpu"]
    rows = gpu["rows"]
    plt, fig, (ax, history) = _figure(ncols=2, width=11.0)
    # Left: each machine's newest row per precision and sequence length (rows are oldest first).
    newest = {(r["machine"], r["precision"], r["seq"]): r for r in rows}
    cases = [(p, seq) for seq in (128, 512) for p in ("FP32", "TF32", "AMP", "bf16")
             if any(key[1:] == (p, seq) for key in newest)]
    machines = sorted({key[0] for key in newest}, key=lambda m: _GPUS.index(m[3:]) if m[3:] in _GPUS else 9)
    width = 0.8 / len(machines)
    for k, machine in enumerate(machines):
        for j, case in enumerate(cases):
            row = newest.get((machine, *case))
            if row is None:
                continue
            who = "NGC" if row["source"] == "NGC" else f"bertdata {row['commit']}"
            who += f", batch {row['batch']}"
            bar = ax.bar(j + (k - (len(machines) - 1) / 2) * width, row["sequences_per_s"], width, color=f"C{k}",
                         hatch="//" if row["source"] == "NGC" else None, edgecolor="white", label=f"{machine} ({who})")
            ax.bar_label(bar, [f"{row['sequences_per_s']:,.0f}"], fontsize=7)
    goal = gpu["goal"]
    j = cases.index((goal["precision"], goal["seq"]))
    ax.plot([j - 0.45, j + 0.45], [goal["sequences_per_s"]] * 2, "--", color="tab:red",
            label=f"goal, {goal['precision']} seq {goal['seq']}: {goal['sequences_per_s']:,}")
    handles, labels = ax.get_legend_handles_labels()
    unique = dict(zip(labels, handles))
    ax.legend(unique.values(), unique.keys(), fontsize=7, loc="upper left")
    ax.set_xticks(range(len(cases)))
    ax.set_xticklabels([f"{p}\nseq {seq}" for p, seq in cases])
    ax.set_ylabel("sequences/s")
    ax.set_ylim(0, goal["sequences_per_s"] * 1.25)
    ax.set_title("BERT-base, one GPU (hatched: NGC's published rows)", fontsize=8.5)
    ax.grid(axis="y", alpha=0.3)
    # Right: our rows by the bench code they measured.
    ours = [r for r in rows if r["source"] != "NGC"]
    codes = list(dict.fromkeys(r["commit"] for r in ours))
    for p, seq in dict.fromkeys((r["precision"], r["seq"]) for r in ours):
        points = [(codes.index(r["commit"]), r["sequences_per_s"]) for r in ours
                  if (r["precision"], r["seq"]) == (p, seq)]
        if len(points) > 1:
            history.plot(*zip(*points), "o-", label=f"{p}, seq {seq}")
            history.annotate(f"{points[-1][1]:,}", points[-1], textcoords="offset points", xytext=(5, 3), fontsize=7)
    history.set_xticks(range(len(codes)))
    history.set_xticklabels(codes, fontsize=8)
    history.set_xlabel("bench code (all 2026-12-04, " + ", ".join(sorted({r["machine"] for r in ours})) + ")")
    history.set_ylabel("sequences/s")
    history.set_ylim(0, goal["sequences_per_s"] * 1.1)
    history.legend(fontsize=7.5, loc="center right")
    history.set_title("bertdata bench by release (benchmark/gpu_check.sh)", fontsize=8.5)
    history.grid(alpha=0.3)
    return _save(plt, fig, out / "gpu.png")


def _save(plt, fig, path: Path) -> Path:
    fig.tight_layout()
    # No timestamp or software version in the file: the same figures give the same bytes.
    fig.savefig(path, metadata={"Software": None})
    plt.close(fig)
    return path


def history_table(data: dict) -> str:
    """docs/performance.md's history: one release per row, every figure short."""
    build = data["build"]
    lines = ["| date | commit | machine, the hour (libbz2 on 8x) | 32x, 1 / 2 workers | 64x, 1 / 2 workers "
             "| second worker per core, 32x | full dump, core-hours | what the build held |",
             "| --- | --- | --- | ---: | ---: | ---: | ---: | --- |"]
    for r in reversed(build["releases"]):
        commit = r["commit"] or (f"(recorded in {r['recorded_in']})" if r["recorded_in"] else "-")
        hour = f"{r['libbz2_8x_s']:.2f} s" if r["libbz2_8x_s"] is not None else "not taken"
        second = f"{r['second_worker']:.2f}x" if r["second_worker"] is not None else "-"
        lines.append(f"| {r['date']} | {commit} | {build['machine']}, {hour} | {r['s32x'][0]} / {r['s32x'][1]} s "
                     f"| {r['s64x'][0]} / {r['s64x'][1]} s | {second} | {r['core_hours']:.2f} | {r['code']} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=DATA, help="the recorded figures (JSON)")
    parser.add_argument("--out", type=Path, default=DATA.parent, help="folder the PNGs are written to")
    parser.add_argument("--table", action="store_true", help="print the history table instead of plotting")
    args = parser.parse_args(argv)
    data = load(args.data)
    if args.table:
        print(history_table(data), end="")
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    for plot in (plot_build, plot_workers, plot_gpu):
        print(plot(data, args.out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
