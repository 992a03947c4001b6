"""The tests' layout: a folder per package tested, the shared helpers at tests/ (conftest.py and
plain modules), so every helper is defined once and no test file imports another."""

from __future__ import annotations

import ast
from collections import Counter

from conftest import ROOT

TESTS = ROOT / "tests"


def test_no_test_file_imports_another_and_none_sits_at_the_top():
    files = sorted(TESTS.glob("*/test_*.py"))
    stems = {path.stem for path in files}
    imports = []
    for path in files:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            names = ([alias.name for alias in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
            imports += [f"{path.relative_to(TESTS)} imports {name}" for name in names if name.split(".")[0] in stems]
    assert not imports, "move what they share into a helper module at tests/:\n" + "\n".join(imports)
    assert not list(TESTS.glob("test_*.py")), "a test file belongs in the folder of the package it tests"
    # Folders without __init__.py: pytest imports a test file by its name alone.
    twice = [name for name, n in Counter(path.name for path in files).items() if n > 1]
    assert not twice, f"test file names used twice: {twice}"
