"""ARCHITECTURE.md's module list is the tree: every package, module and C source of the core,
the pipelines and the benchmark is named there once, and nothing named there is missing."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ("bertdata", "pipelines", "benchmark")
SOURCES = (".py", ".c", ".h")
# The longest a core module should grow before it is split by job.
MAX_CORE_LINES = 520


def named_in_architecture() -> list[str]:
    text = (ROOT / "ARCHITECTURE.md").read_text()
    section = text[text.index("## Modules"):]
    section = section[:section.index("\n## ", 1)]
    return [p for p in re.findall(r"`([^`\s]+)`", section) if "/" in p and p.split("/")[0] in FOLDERS]


def tree() -> set[str]:
    names = {f"{folder}/" for folder in FOLDERS}
    for folder in FOLDERS:
        for path in (ROOT / folder).rglob("*"):
            rel = path.relative_to(ROOT)
            if "sample" in rel.parts or "__pycache__" in rel.parts:
                continue
            if path.is_dir() and (path / "__init__.py").exists():
                names.add(f"{rel.as_posix()}/")
            elif path.suffix in SOURCES and path.name != "__init__.py":
                names.add(rel.as_posix())
    return names


def test_the_module_list_names_every_file_of_the_tree_once():
    named = named_in_architecture()
    twice = [name for name, n in Counter(named).items() if n > 1]
    assert not twice, f"named more than once in ARCHITECTURE.md: {twice}"
    assert not tree() - set(named), f"in the tree, missing from ARCHITECTURE.md: {sorted(tree() - set(named))}"
    assert not set(named) - tree(), f"in ARCHITECTURE.md, not in the tree: {sorted(set(named) - tree())}"


def test_no_core_module_outgrows_one_job():
    long = {p.relative_to(ROOT).as_posix(): n for p in (ROOT / "bertdata").rglob("*")
            if p.suffix in SOURCES and (n := len(p.read_text().splitlines())) > MAX_CORE_LINES}
    assert not long, f"split these by job: {long}"


def test_the_wheel_lists_every_package():
    """pyproject's explicit package list: a package left out installs in editable mode but is
    missing from a wheel."""
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    where = {folder: package for package, folder in config["package-dir"].items()}
    packages = set()
    for name in tree():
        if name.endswith("/"):
            top, _, rest = name.rstrip("/").partition("/")
            packages.add(".".join([where[top], *rest.split("/")]) if rest else where[top])
    # and the folders of data it ships (package-data), which hold no code
    assert set(config["packages"]) == packages | set(config["package-data"])
