"""The project's modules and the imports between them, read from the source (ast): what the
dependency and architecture tests check."""

from __future__ import annotations

import ast
from pathlib import Path

from conftest import ROOT


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


# The three source folders and the packages they install as.
PACKAGES = {"bertdata": "bertdata", "pipelines": "bertdata.pipelines", "benchmark": "bertdata.benchmark"}


def module_names() -> dict[str, Path | None]:
    """Every module of the three folders by its installed name: its source, or None for a
    compiled extension (a leaf of the graph)."""
    modules: dict[str, Path | None] = {}
    for top, package in PACKAGES.items():
        for path in sorted((ROOT / top).rglob("*")):
            rel = path.relative_to(ROOT / top)
            if "sample" in rel.parts or "__pycache__" in rel.parts or path.suffix not in (".py", ".c"):
                continue
            parts = list(rel.with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            name = ".".join([package, *parts])
            if path.suffix == ".py":
                modules[name] = path
            else:
                modules.setdefault(name, None)
    return modules


def import_graph(modules: dict[str, Path | None]) -> dict[str, set[str]]:
    """Module -> the modules among `modules` it imports, at module level, inside functions or
    under TYPE_CHECKING alike (any of them closes a circle once the code runs or is checked).
    `from a import b` is an edge to a.b where that is a module, else to a; importing a.b also
    runs a's __init__, but that edge is left out: a package's __init__ importing its own
    modules is how packages are made, not a circle."""
    def known(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        if path is None:
            continue
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if not isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            loaded = imported_modules(node, package)
            if isinstance(node, ast.ImportFrom):  # [base, base.name...]: a name that is no module means base
                loaded = [m for m in loaded[1:] if m in modules] or loaded[:1]
            graph[name] |= {target for m in loaded if (target := known(m)) not in (None, name)}
    return graph
