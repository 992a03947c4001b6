"""The dependency rule: the core (`bertdata/`) imports neither Beam nor torch nor the two
packages built on it, the CLI commands import those only inside functions, and
`pipelines` and `benchmark` never import each other -- so the core and `bertdata inspect`
work without the heavy extras, and each extra installs alone."""

from __future__ import annotations

import ast
import subprocess
import sys

import pytest

from conftest import ROOT

HEAVY = ("apache_beam", "torch", "bertdata.pipelines", "bertdata.benchmark")
# Each source folder: its package name, what it must not import, and whether importing
# that inside a function (at run time, not at import time) is allowed.
RULES = {
    "bertdata": ("bertdata", HEAVY, False),
    "bertdata/commands": ("bertdata.commands", HEAVY, True),
    "pipelines": ("bertdata.pipelines", ("torch", "bertdata.benchmark"), False),
    "benchmark": ("bertdata.benchmark", ("apache_beam", "bertdata.pipelines"), False),
}


def imported_modules(node: ast.Import | ast.ImportFrom, package: str) -> list[str]:
    """Every module an import statement in `package` may load: `from bertdata import
    pipelines` loads bertdata.pipelines, `from ..pipelines import x` is resolved too."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    base = node.module or ""
    if node.level:
        parts = package.split(".")
        base = ".".join(parts[:len(parts) - node.level + 1] + ([node.module] if node.module else []))
    return [base, *(f"{base}.{alias.name}" for alias in node.names)]


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


@pytest.mark.parametrize("folder", sorted(RULES))
def test_sources_keep_the_dependency_rule(folder):
    package, forbidden, lazy_ok = RULES[folder]
    files = sorted((ROOT / folder).glob("*.py"))
    assert files, f"no sources under {ROOT / folder}"
    found = [v for f in files
             for v in violations(f.read_text(encoding="utf-8"), str(f.relative_to(ROOT)), package, forbidden, lazy_ok)]
    assert not found, "the dependency rule is broken:\n" + "\n".join(found)


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
