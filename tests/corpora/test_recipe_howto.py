"""The README's how-to "a ModernBERT-style mixture", run as written: its YAML and its command, taken
from the README, in a folder holding corpora of the layouts it names."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import trained_tokenizer
from corpus_inputs import write_corpora

pytestmark = pytest.mark.slow

README = Path(__file__).resolve().parents[2] / "README.md"


def howto() -> tuple[str, str]:
    """The how-to's YAML and its build command, as the README gives them."""
    text = README.read_text()
    section = text[text.index("**How-to: a ModernBERT-style mixture.**"):]
    yaml = re.search(r"```yaml\n(.*?)```", section, re.S).group(1)
    command = re.search(r"```\n(bertdata build --recipe .*?)\n```", section, re.S).group(1)
    return yaml, command


def test_the_readme_mixture_runs_as_written(tmp_path):
    yaml, command = howto()
    write_corpora(tmp_path)
    (tmp_path / "mixture.yaml").write_text(yaml)
    shutil.copy(trained_tokenizer("bpe"), tmp_path / "tokenizer.json")
    args = command.split()
    assert args[:2] == ["bertdata", "build"]
    proc = subprocess.run([sys.executable, "-m", "bertdata.cli", *args[1:]], cwd=tmp_path, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    text = json.loads(next(tmp_path.glob("mixture/sharded_*/mixture/manifest.json")).read_text())
    figures = text["corpora"]
    assert set(figures) == {"edu", "c4", "dolma", "books"}
    shares = {name: f["share"] for name, f in figures.items()}
    assert shares == pytest.approx({"edu": 0.6, "c4": 0.2, "dolma": 0.1, "books": 0.1}, abs=0.03)
    assert (tmp_path / "mixture" / "mds").is_dir() and (tmp_path / "mixture" / "parquet").is_dir()
