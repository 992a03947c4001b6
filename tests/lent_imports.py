"""The lent GPU machine's Python, as an import hook: copied into a folder as `sitecustomize.py` and
put on PYTHONPATH, it makes any import that bertdata's code (a `bertdata.*` module, or `__main__`:
a `python -` heredoc, `python -m bertdata.cli`) makes of a top-level module that machine lacks fail
as it would fail there. What torch or pyarrow import for themselves comes with them, so it passes."""

from __future__ import annotations

import sys

# What the lent machine has besides the standard library (and gcc): benchmark/gpu_check.sh's list.
LENT = {"torch", "h5py", "numpy", "tqdm", "pyarrow", "tokenizers", "setuptools", "bertdata"}
_IMPORT_MACHINERY = ("importlib", "_frozen_importlib", "_frozen_importlib_external", __name__)


def _importer() -> str:
    """The module whose code asked for the import being found."""
    frame = sys._getframe(2)
    while frame is not None and str(frame.f_globals.get("__name__", "")).startswith(_IMPORT_MACHINERY):
        frame = frame.f_back
    return str(frame.f_globals.get("__name__", "")) if frame is not None else ""


class LentMachine:
    """A finder first on sys.meta_path that refuses, and otherwise lets the others find."""

    @staticmethod
    def find_spec(name, path=None, target=None):
        top = name.partition(".")[0]
        if top in LENT or top in sys.stdlib_module_names:
            return None
        importer = _importer()
        if importer == "__main__" or importer.partition(".")[0] == "bertdata":
            raise ModuleNotFoundError(f"No module named {top!r} (the lent GPU machine has none; imported by "
                                      f"{importer})", name=top)
        return None


sys.meta_path.insert(0, LentMachine())
