"""The input layer: a corpus type is one module and one entry here, as a format is in
bertdata.formats. See bertdata.corpora.contract for what a type states and does, and
bertdata.corpora.recipe for the recipe that names a build's corpora and mixes them."""

from __future__ import annotations

import importlib

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
    return tuple(BUILTIN)


def get(name: str) -> CorpusType:
    if name not in BUILTIN:
        raise BertdataError(f"unknown corpus type {name!r}: one of {', '.join(BUILTIN)}")
    return importlib.import_module(BUILTIN[name]).TYPE
