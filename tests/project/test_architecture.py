"""ARCHITECTURE.md's module list is the tree: every package, module and C source of the core,
the pipelines and the benchmark is named there once, and nothing named there is missing."""

from __future__ import annotations

import ast
import re
from collections import Counter

import pytest

from conftest import ROOT
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


# The core's layers, lowest first: a module imports only modules of its own layer or below, so
# each stage builds on the ones before it and none reaches up to a later one. The shared
# modules (errors, config, files, manifests, plugins) sit under every stage; the corpora (a recipe's
# inputs, which a recipe's dedup settings are part of) are read into text as a dump is; `estimate` reads the format
# layer for the commands; the CLI and its commands sit above all.
LAYERS = (
    ("bertdata", "bertdata.errors", "bertdata.config", "bertdata.fsutil", "bertdata.manifest", "bertdata.plugins"),
    ("bertdata.download",),
    ("bertdata.text",),
    ("bertdata.dedup",),
    ("bertdata.corpora",),
    ("bertdata.instances",),
    ("bertdata.formats",),
    ("bertdata.reshard", "bertdata.estimate"),
    ("bertdata.commands", "bertdata.cli"),
)


def layer(module: str) -> int | None:
    """The layer of a core module: that of the longest name in LAYERS it is or lies under (the
    package `bertdata` itself stands for its __init__ alone)."""
    found = [(len(name), rank) for rank, names in enumerate(LAYERS) for name in names
             if module == name or (name != "bertdata" and module.startswith(name + "."))]
    return max(found)[1] if found else None


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    return sorted(f"{a} (layer {layer(a)}) imports {b} (layer {layer(b)})"
                  for a, targets in graph.items() if layer(a) is not None
                  for b in targets if layer(b) is not None and layer(b) > layer(a))


def test_the_layer_check_sees_an_import_running_up():
    graph = {"bertdata.text.books": {"bertdata.instances.documents", "bertdata.fsutil"},
             "bertdata.commands.build": {"bertdata.formats"}, "bertdata.fsutil": {"bertdata.errors"}}
    assert upward_imports(graph) == ["bertdata.text.books (layer 2) imports bertdata.instances.documents (layer 5)"]
    assert layer("bertdata.formats.lddl.writer") == 6 and layer("bertdata") == 0


def test_no_core_import_runs_up_the_layers():
    from codebase import import_graph, module_names

    modules = module_names()
    core = [m for m in modules if m.startswith("bertdata.") and m.split(".")[1] not in ("pipelines", "benchmark")]
    unplaced = [m for m in core if layer(m) is None]
    assert not unplaced, f"place these in LAYERS: {unplaced}"
    found = upward_imports(import_graph(modules))
    assert not found, "imports running up the layers:\n" + "\n".join(found)


# A module named in a string is imported by name at run time (importlib), out of sight of the
# import checks above, of a rename and of a reader: the pipelines import their modules for real.
# Docstrings and comments may name modules.
MODULE_NAME = re.compile(r"\bbertdata(\.[A-Za-z_]\w*)+")


def modules_named_in_strings(source: str, path: str) -> list[str]:
    """`path:line: NAME` for each string literal of `source`, docstrings aside, that names a
    bertdata module (f-strings' literal parts included)."""
    tree = ast.parse(source, path)
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                  and node.body and isinstance(node.body[0], ast.Expr)
                  and isinstance(node.body[0].value, ast.Constant) and isinstance(node.body[0].value.value, str)}
    return [f"{path}:{node.lineno}: {found.group(0)}" for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
            for found in MODULE_NAME.finditer(node.value)]


def test_the_string_check_sees_a_module_name_and_not_a_docstring():
    source = ('"""bertdata.pipelines.text: named in a docstring."""\n'
              'import importlib\n'
              '# bertdata.pipelines.lddl, in a comment\n'
              'STAGES = {"split": "bertdata.pipelines.documents"}\n'
              'def f(x):\n'
              '    """bertdata.formats, in a function\'s docstring."""\n'
              '    return importlib.import_module(f"bertdata.formats.{x}"), "pip install \'bertdata[s3]\'"\n')
    assert modules_named_in_strings(source, "x.py") == ["x.py:4: bertdata.pipelines.documents",
                                                        "x.py:7: bertdata.formats"]


def test_the_pipelines_name_no_module_in_a_string():
    found = [hit for path in sorted((ROOT / "pipelines").rglob("*.py"))
             for hit in modules_named_in_strings(path.read_text(encoding="utf-8"), path.relative_to(ROOT).as_posix())]
    assert not found, "a module named in a string (import it instead):\n" + "\n".join(found)
