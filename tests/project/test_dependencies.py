"""The dependency rule: the core (`bertdata/`, every subpackage) imports neither Beam nor torch
nor the two packages built on it, the CLI commands import those only inside functions, the
instance core not the format layer that writes its rows, and
`pipelines` and `benchmark` never import each other -- so the core and `bertdata inspect`
work without the heavy extras, and each extra installs alone. And no import circles: the
module graph of all three is acyclic."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from codebase import PACKAGES, import_graph, imported_modules, module_names
from conftest import ROOT

HEAVY = ("apache_beam", "torch", "bertdata.pipelines", "bertdata.benchmark")
# Each source folder: its package name, what it must not import, and whether importing
# that inside a function (at run time, not at import time) is allowed.
RULES = {
    "bertdata": ("bertdata", HEAVY, False),
    "bertdata/commands": ("bertdata.commands", HEAVY, True),
    # The instance core makes rows; the format layer, built on it, writes them.
    "bertdata/instances": ("bertdata.instances", (*HEAVY, "bertdata.formats"), False),
    "pipelines": ("bertdata.pipelines", ("torch", "bertdata.benchmark"), False),
    "benchmark": ("bertdata.benchmark", ("apache_beam", "bertdata.pipelines"), False),
}


def violations(source: str, path: str, package: str, forbidden: tuple[str, ...], lazy_ok: bool) -> list[str]:
    """`path:line: imports MODULE` for each import of a forbidden module (or a submodule of
    one) in `source`; with `lazy_ok`, those inside a function body are allowed."""
    found = []

    def visit(node: ast.AST, in_function: bool) -> None:
        if isinstance(node, (ast.Import, ast.ImportFrom)) and not (lazy_ok and in_function):
            for module in imported_modules(node, package):
                if any(module == bad or module.startswith(bad + ".") for bad in forbidden):
                    where = "inside a function" if in_function else "at module level"
                    found.append(f"{path}:{node.lineno}: imports {module} {where}")
                    break
        inner = in_function or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
        for child in ast.iter_child_nodes(node):
            visit(child, inner)

    visit(ast.parse(source, path), False)
    return found


def test_checker_catches_each_kind_of_import():
    source = (
        "import os\n"
        "import torch.nn\n"
        "from bertdata import pipelines\n"
        "def f():\n"
        "    from apache_beam.io import ReadFromText\n"
        "    from ..benchmark import train\n"
        "    import numpy\n"
        "class C:\n"
        "    def g(self):\n"
        "        import torch\n"
        "import torchvision\n"  # another package, not torch
    )
    assert violations(source, "x.py", "bertdata.commands", HEAVY, False) == [
        "x.py:2: imports torch.nn at module level",
        "x.py:3: imports bertdata.pipelines at module level",
        "x.py:5: imports apache_beam.io inside a function",
        "x.py:6: imports bertdata.benchmark inside a function",
        "x.py:10: imports torch inside a function",
    ]
    assert violations(source, "x.py", "bertdata.commands", HEAVY, True) == [
        "x.py:2: imports torch.nn at module level",
        "x.py:3: imports bertdata.pipelines at module level",
    ]
    assert violations("from .build import run\nfrom . import fsio\n", "p.py", "bertdata.pipelines",
                      ("bertdata.benchmark",), False) == []


def sources(folder: str) -> list[tuple[Path, str]]:
    """Each Python source below `folder` (subpackages too, not the bundled sample) and the
    package its relative imports start from."""
    top = folder.split("/")[0]
    found = []
    for path in sorted((ROOT / folder).rglob("*.py")):
        rel = path.relative_to(ROOT / top)
        if "sample" in rel.parts or "__pycache__" in rel.parts:
            continue
        found.append((path, ".".join([PACKAGES[top], *rel.parent.parts])))
    return found


@pytest.mark.parametrize("folder", sorted(RULES))
def test_sources_keep_the_dependency_rule(folder):
    _, forbidden, lazy_ok = RULES[folder]
    # A folder with a rule of its own (bertdata/commands) is checked by that rule.
    others = [ROOT / f for f in RULES if f != folder and f.startswith(folder + "/")]
    files = [(f, package) for f, package in sources(folder) if not any(f.is_relative_to(o) for o in others)]
    assert files, f"no sources under {ROOT / folder}"
    found = [v for f, package in files
             for v in violations(f.read_text(encoding="utf-8"), str(f.relative_to(ROOT)), package, forbidden, lazy_ok)]
    assert not found, "the dependency rule is broken:\n" + "\n".join(found)


def test_the_runtime_imports_no_stage():
    """pipelines/runtime runs the stages and is none of them: none of its modules imports a stage's
    module at module level (the pool's server loads them inside a function, before it forks)."""
    stages = ("bertdata.pipelines.stages", *(f"bertdata.pipelines.{p.stem}" for p in sorted((ROOT / "pipelines").glob("*.py"))
                                              if p.stem != "__init__"))
    files = sources("pipelines/runtime")
    assert files and "bertdata.pipelines.stages" in stages and "bertdata.pipelines.chain" in stages
    found = [v for f, package in files
             for v in violations(f.read_text(encoding="utf-8"), str(f.relative_to(ROOT)), package, stages, True)]
    assert not found, "the runtime imports a stage:\n" + "\n".join(found)


def test_the_rule_covers_the_core_subpackages():
    checked = {f.relative_to(ROOT).as_posix() for f, _ in sources("bertdata")}
    assert {"bertdata/formats/hdf5.py", "bertdata/formats/lddl/writer.py", "bertdata/instances/create.py",
            "bertdata/reshard/shuffle.py", "bertdata/commands/build.py"} <= checked
    assert dict(sources("bertdata"))[ROOT / "bertdata/formats/lddl/writer.py"] == "bertdata.formats.lddl"


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One circle through each strongly connected group of modules, as a path that ends
    where it starts (Tarjan's algorithm, then a walk inside the group)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[set[str]] = []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = set()
            while True:
                w = stack.pop()
                group.add(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(group)

    for v in sorted(graph):
        if v not in index:
            connect(v)
    found = []
    for group in groups:
        start = min(group)
        path, seen = [start], {start}
        while True:  # every module of the group reaches `start` inside it: walk towards it
            here = path[-1]
            nexts = sorted(graph[here] & group)
            if start in nexts:
                found.append([*path, start])
                break
            step = next((w for w in nexts if w not in seen), nexts[0])
            if step in seen:  # a smaller circle not through start
                found.append([*path[path.index(step):], step])
                break
            path.append(step)
            seen.add(step)
    return found


def test_circles_are_found_and_shown():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"f"}, "f": {"e"}}
    assert circles(graph) == [["a", "b", "c", "a"], ["e", "f", "e"]]
    assert circles({"a": {"b"}, "b": set()}) == []


def test_import_graph_sees_every_kind_of_import():
    graph = import_graph(module_names())
    # a function-level import (the hdf5 writer), a relative one in a package, a compiled module
    assert "bertdata.formats.hdf5" in graph["bertdata.commands.instances"]
    assert "bertdata.formats.lddl.codec" in graph["bertdata.formats.lddl.writer"]
    assert "bertdata.formats._chunks" in graph["bertdata.formats.hdf5io"]
    assert "bertdata.formats" not in graph["bertdata.formats.hdf5io"]


def test_no_import_circles():
    found = circles(import_graph(module_names()))
    assert not found, "import circles:\n" + "\n".join(" -> ".join(c) for c in found)


def heavy_modules_after_help(first: str = "") -> str:
    """The heavy modules loaded, in a fresh interpreter, by `first` and then importing the
    CLI and asking for `bertdata --help` and every command's --help."""
    script = f"""
import contextlib, io, sys
{first}
from bertdata.cli import build_parser
from bertdata.commands import COMMANDS
for argv in [["--help"], *([name, "--help"] for name in COMMANDS)]:
    with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):
        build_parser().parse_args(argv)
print(" ".join(sorted(m for m in sys.modules if any(m == h or m.startswith(h + ".") for h in {HEAVY!r}))))
"""
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


def test_cli_help_imports_no_heavy_package():
    """`import bertdata.cli`, `bertdata --help` and every command's --help (inspect's
    included) load none of them: the commands import their work lazily."""
    loaded = heavy_modules_after_help()
    assert loaded == "", f"the CLI's help imported {loaded}"
    # The same check sees a heavy package that something did load.
    assert heavy_modules_after_help("import bertdata.pipelines\n") == "bertdata.pipelines"
