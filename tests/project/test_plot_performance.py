"""scripts/plot_performance.py: the plots and the history table made from the recorded figures."""

from __future__ import annotations

import json

import pytest

from conftest import ROOT, run_script

pytest.importorskip("matplotlib", reason="matplotlib (the dev extra) draws the performance plots")
from PIL import Image  # noqa: E402  (matplotlib's own dependency)

DATA = ROOT / "docs" / "figures" / "performance.json"


def test_the_script_writes_every_plot_as_a_valid_png(tmp_path):
    done = run_script("plot_performance.py", "--out", str(tmp_path / "plots"), timeout=300)
    assert done.returncode == 0, done.stderr
    written = sorted(p.name for p in (tmp_path / "plots").iterdir())
    assert written == ["build.png", "gpu.png", "workers.png"]
    for name in written:
        with Image.open(tmp_path / "plots" / name) as image:
            image.verify()  # the PNG's chunks and checksums
        with Image.open(tmp_path / "plots" / name) as image:
            assert image.format == "PNG" and image.width >= 800 and image.height >= 400
            # drawn on, not a blank canvas
            assert len(image.convert("L").getcolors(1 << 16)) > 20


def test_every_recorded_figure_keeps_its_date_commit_and_machine():
    data = json.loads(DATA.read_text())
    for release in data["build"]["releases"]:
        assert release["date"] and {"commit", "recorded_in", "code"} <= release.keys()
    curve = data["worker_curve"]
    assert curve["date"] and curve["commit"] and curve["machine"]
    assert all(c["date"] and c["commit"] and c["machine"] for c in curve["ceilings"])
    for row in data["gpu"]["rows"]:
        assert row["machine"] and (row["source"] == "NGC" or (row["date"] and row["commit"]))


def test_the_history_table_in_performance_md_is_the_scripts():
    done = run_script("plot_performance.py", "--table", timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout in (ROOT / "docs" / "performance.md").read_text()


def test_no_table_cell_of_performance_md_is_over_400_characters():
    for line in (ROOT / "docs" / "performance.md").read_text().splitlines():
        if line.startswith("|"):
            long = [cell for cell in line.strip().strip("|").split(" | ") if len(cell.strip()) > 400]
            assert not long, f"a table cell of {len(long[0])} characters: move the reading to performance-log.md"
