"""A corpus's `where:` filter: a small language over a document's other columns, parsed (never
`eval`ed) into a predicate.

    where: "int_score >= 3 and language == 'en'"
    where: "not (source == 'wiki' or metadata.length < 200)"

Grammar: comparisons (`==`, `!=`, `<`, `<=`, `>`, `>=`) between a column (a name; a dotted name
reaches into a nested object, as Dolma's `metadata`) and a number, a string in single or double
quotes, `true`, `false` or `null`; combined with `and`, `or`, `not` and parentheses. A comparison
whose sides cannot be ordered (a string and a number, a null with `<`) is false, as in SQL.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from bertdata.errors import BertdataError

_TOKEN = re.compile(r"""\s*(?:
    (?P<number>-?\d+(?:\.\d*)?(?:[eE][-+]?\d+)?)
  | (?P<string>'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")
  | (?P<op>==|!=|<=|>=|<|>)
  | (?P<paren>[()])
  | (?P<name>[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)
)""", re.VERBOSE)

_COMPARE = {"==": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le,
            ">": operator.gt, ">=": operator.ge}
_WORDS = {"and", "or", "not"}
_CONSTANTS = {"true": True, "false": False, "null": None}
MISSING = object()


def lookup(row: Mapping[str, Any], column: str) -> Any:
    """`row[column]`, a dotted column reaching into nested objects; MISSING where it is absent."""
    value: Any = row
    for part in column.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return MISSING
        value = value[part]
    return value


@dataclass(frozen=True)
class Filter:
    """A parsed `where:`: `keeps(row)` says whether the document stays; `columns` are the columns it reads."""

    source: str
    columns: tuple[str, ...]
    keeps: Callable[[Mapping[str, Any]], bool]

    def __reduce__(self):  # a closure does not pickle: workers parse the text again
        return parse, (self.source,)


def parse(source: str) -> Filter:
    """The filter `source` states; a BertdataError saying where it goes wrong."""
    tokens = _tokenize(source)
    parser = _Parser(source, tokens)
    predicate = parser.expression()
    if parser.position < len(tokens):
        raise _error(source, f"unexpected {tokens[parser.position][1]!r}")
    return Filter(source, tuple(sorted(parser.columns)), predicate)


def _error(source: str, what: str) -> BertdataError:
    return BertdataError(f"where {source!r}: {what}")


def _tokenize(source: str) -> list[tuple[str, Any]]:
    if not isinstance(source, str) or not source.strip():
        raise BertdataError(f"where {source!r}: an empty filter; give a comparison such as \"int_score >= 3\"")
    tokens, position = [], 0
    while position < len(source):
        if source[position:].strip() == "":
            break
        match = _TOKEN.match(source, position)
        if match is None or match.end() == position:
            raise _error(source, f"cannot read {source[position:].strip()[:20]!r}")
        kind = match.lastgroup
        text = match.group(kind)
        if kind == "number":
            tokens.append(("value", float(text) if any(c in text for c in ".eE") else int(text)))
        elif kind == "string":
            tokens.append(("value", re.sub(r"\\(.)", r"\1", text[1:-1])))
        elif kind == "name" and text in _WORDS:
            tokens.append((text, text))
        elif kind == "name" and text in _CONSTANTS:
            tokens.append(("value", _CONSTANTS[text]))
        else:
            tokens.append((kind, text))
        position = match.end()
    return tokens


class _Parser:
    def __init__(self, source: str, tokens: list[tuple[str, Any]]):
        self.source, self.tokens, self.position = source, tokens, 0
        self.columns: set[str] = set()

    def peek(self) -> str | None:
        return self.tokens[self.position][0] if self.position < len(self.tokens) else None

    def take(self) -> tuple[str, Any]:
        if self.position >= len(self.tokens):
            raise _error(self.source, "ends too soon")
        token = self.tokens[self.position]
        self.position += 1
        return token

    def expression(self):
        return self.joined("or", self.conjunction, any)

    def conjunction(self):
        return self.joined("and", self.negation, all)

    def joined(self, word: str, operand, combine):
        """Operands joined by `word` (and, or): one predicate, `combine` (all, any) of theirs."""
        parts = [operand()]
        while self.peek() == word:
            self.take()
            parts.append(operand())
        return parts[0] if len(parts) == 1 else (lambda row: combine(p(row) for p in parts))

    def negation(self):
        if self.peek() == "not":
            self.take()
            inner = self.negation()
            return lambda row: not inner(row)
        if self.peek() == "paren" and self.tokens[self.position][1] == "(":
            self.take()
            inner = self.expression()
            kind, text = self.take()
            if (kind, text) != ("paren", ")"):
                raise _error(self.source, f"expected ')', found {text!r}")
            return inner
        return self.comparison()

    def operand(self):
        kind, text = self.take()
        if kind == "name":
            self.columns.add(text)
            return lambda row, c=text: lookup(row, c)
        if kind == "value":
            return lambda row, v=text: v
        raise _error(self.source, f"expected a column or a value, found {text!r}")

    def comparison(self):
        left = self.operand()
        kind, text = self.take()
        if kind != "op":
            raise _error(self.source, f"expected a comparison (==, !=, <, <=, >, >=), found {text!r}")
        right = self.operand()
        compare = _COMPARE[text]
        equality = text in ("==", "!=")

        def holds(row):
            a, b = left(row), right(row)
            if a is MISSING or b is MISSING:
                return False
            if equality:
                return compare(a, b)
            try:
                return bool(compare(a, b))
            except TypeError:  # unordered types (a string and a number, a null)
                return False

        return holds
