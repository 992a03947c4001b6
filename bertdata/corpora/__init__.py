"""The input layer: a corpus type is one module and one entry here (or an entry point of the group
`bertdata.corpora` in a package installed beside bertdata: `bertdata.plugins`), as a format is in
bertdata.formats. See bertdata.corpora.contract for what a type states and does, and
bertdata.corpora.recipe for the recipe that names a build's corpora and mixes them."""

from __future__ import annotations

from bertdata import plugins
from bertdata.corpora.contract import CorpusSpec, CorpusType
from bertdata.errors import BertdataError

__all__ = ["BUILTIN", "CorpusSpec", "CorpusType", "get", "names"]

# name -> the module whose TYPE it is; imported when first asked for.
BUILTIN = {
    "parquet": "bertdata.corpora.parquet",
    "jsonl": "bertdata.corpora.jsonl",
    "text": "bertdata.corpora.text",
    "wikipedia": "bertdata.corpora.wikipedia",
}


def names() -> tuple[str, ...]:
    """Every corpus type's name, the plugins' after the built-in ones, without importing any."""
    return tuple(dict.fromkeys([*BUILTIN, *plugins.entry_points(plugins.CORPORA)]))


def get(name: str) -> CorpusType:
    if name in BUILTIN:
        return plugins.load(f"{BUILTIN[name]}:TYPE", f"corpus type {name}")
    if name in plugins.entry_points(plugins.CORPORA):
        return plugins.load_plugin(plugins.CORPORA, name)
    raise BertdataError(f"unknown corpus type {name!r}: one of {', '.join(names())}")
