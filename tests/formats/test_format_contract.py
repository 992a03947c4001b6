"""Every format `formats.names()` lists (the built-in ones, the plugins installed, those
registered) states the contract's members for its cut and what it holds, with the contract's
parameters; and the format tables of the README and docs/formats.md name the built-in formats,
no more, no fewer. No format's name is written here."""

from __future__ import annotations

import inspect
import itertools
import re
import typing

import pytest

from bertdata import corpora, formats
from bertdata.formats import contract
from conftest import ROOT

# What each kind of format states, by the protocol that says it.
BY_CUT = {formats.PER_SHARD: (contract.PerShardFormat,), formats.PER_SPLIT: (contract.SplitFormat,),
          formats.ACROSS_SHARDS: ()}
BY_HOLDS = {formats.INSTANCES: (contract.InstanceFormat,), formats.DOCUMENTS: (contract.DocumentFormat,),
            formats.SENTENCES: (contract.Format,)}


def members(protocol: type) -> tuple[dict[str, type], dict[str, inspect.Signature]]:
    """A protocol's fields ({name: annotation}) and methods ({name: signature}), its bases' too."""
    fields, methods = {}, {}
    for klass in reversed(protocol.__mro__):
        if klass in (object, typing.Protocol, typing.Generic):
            continue
        fields.update(typing.get_type_hints(klass, localns=vars(contract)))
        methods.update({name: inspect.signature(value) for name, value in vars(klass).items()
                        if inspect.isfunction(value) and not name.startswith("_")})
    return fields, methods


def field_ok(value, annotation) -> bool:
    wanted = typing.get_args(annotation)[0] if typing.get_origin(annotation) is typing.ClassVar else annotation
    return isinstance(value, typing.get_origin(wanted) or wanted)


@pytest.mark.parametrize("name", formats.names())
def test_every_format_states_its_contract(name):
    fmt = formats.get(name)
    assert fmt.name == name
    assert fmt.cut in BY_CUT and fmt.holds in BY_HOLDS, (fmt.cut, fmt.holds)
    assert isinstance(formats.describe(name), str) and formats.describe(name)
    assert all(isinstance(flag, formats.FormatFlag) for flag in formats.flags_of(name))
    for protocol in (contract.Format, *BY_CUT[fmt.cut], *BY_HOLDS[fmt.holds]):
        fields, methods = members(protocol)
        for field, annotation in fields.items():
            if field == "describe":  # a built-in format's is its registry entry's (checked above)
                continue
            assert hasattr(fmt, field), f"{name}: no {field} ({protocol.__name__})"
            assert field_ok(getattr(fmt, field), annotation), f"{name}: {field} is not {annotation}"
        for method, signature in methods.items():
            assert callable(getattr(fmt, method, None)), f"{name}: no {method}() ({protocol.__name__})"
            wanted = [p for p in signature.parameters if p != "self"]
            given = list(inspect.signature(getattr(fmt, method)).parameters)
            assert given[:len(wanted)] == wanted, f"{name}.{method}{tuple(given)}: the contract's is {tuple(wanted)}"


@pytest.mark.parametrize("name", corpora.names())
def test_every_corpus_type_states_its_hooks(name):
    ctype = corpora.get(name)
    assert ctype.name == name and isinstance(ctype, corpora.CorpusType) and ctype.describe
    for hook in ("files", "check", "documents"):
        assert callable(getattr(ctype, hook))


def format_table(path) -> list[str]:
    """The first backquoted word of each row of the file's table headed by `--format`."""
    lines = path.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| `--format` |"))
    rows = itertools.takewhile(lambda line: line.startswith("|"), lines[start + 2:])
    return [re.match(r"\| `([^`]+)`", row).group(1) for row in rows]


@pytest.mark.parametrize("doc", ["README.md", "docs/formats.md"])
def test_the_docs_tables_name_every_built_in_format(doc):
    builtin = [name for name in formats.names() if name in formats.BUILTIN]
    assert format_table(ROOT / doc) == builtin
