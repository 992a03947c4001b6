"""Plugins: formats and corpus types that a package installed beside bertdata adds, with no edit
to bertdata, through an entry point of the group `bertdata.formats` or `bertdata.corpora`
(its name the `--format` or recipe `type:` value, its value "module:object").

They are listed by name from the installed packages' metadata, without importing them, and
imported when first asked for, in whichever process asks: the CLI, a local pool's server (which
loads every format before it forks its workers), a plain worker, a Dask worker. So a plugin
reaches every process that the build's environment reaches, and none needs it handed over.
"""

from __future__ import annotations

import functools
import importlib
from importlib import metadata

from bertdata.errors import BertdataError

FORMATS, CORPORA = "bertdata.formats", "bertdata.corpora"


@functools.cache
def entry_points(group: str) -> dict[str, str]:
    """{name: "module:object"} of the group's entry points, sorted by name (the first of a name
    that two packages state)."""
    found: dict[str, str] = {}
    for point in sorted(metadata.entry_points(group=group), key=lambda p: p.name):
        found.setdefault(point.name, point.value)
    return found


def load(where: str, what: str):
    """The object at `where` ("module:object"); whatever its import raises becomes one line
    naming `what` (a plugin and its entry point), never a traceback."""
    module, _, name = where.partition(":")
    try:
        found = importlib.import_module(module)
        for attribute in filter(None, name.split(".")):
            found = getattr(found, attribute)
    except Exception as err:  # noqa: BLE001 - a plugin's import may raise anything: one line names it
        raise BertdataError(f"{what}: {type(err).__name__}: {err}") from None
    return found


def load_plugin(group: str, name: str):
    """The object of the group's entry point `name`."""
    where = entry_points(group)[name]
    return load(where, f"plugin {name} (entry point {group}: {name} = {where})")
