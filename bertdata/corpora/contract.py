"""What every corpus type states and does, and the records that cross the input layer.

A corpus type is one module (bertdata.corpora.parquet, .jsonl, .text, .wikipedia, or a plugin's:
bertdata.plugins, examples/csv_corpus) whose object, a `CorpusType`, states its `name`, the recipe
keys it takes beyond the common ones, and three hooks (`files` the base's, where patterns are all
a corpus names; `parts` the base's, where a file is read whole):

- `files(spec, match)`: the files a corpus entry names (each pattern matched through `match`,
  the build's file system: local, s3://, gs://), sorted, each once;
- `check(spec, path, open_file)`: before any output is made, what can be known of a file
  cheaply (a parquet footer's columns, a JSON-lines file's first record), as one-line errors
  naming the file;
- `parts(spec, path, open_file, size)`: the file checked, and cut into the parts one worker
  reads at a time, (start, end, bytes): a parquet file's runs of row groups; by default the
  file whole, (None, None, size);
- `documents(spec, path, open_file, counts, start, end)`: a part's documents, read in bounded
  memory, as (document id, text), after the corpus's `where:` filter (what it drops is counted
  in `counts` by reason).

Cleaning and sentence splitting are the same for every type holding plain text
(bertdata.text.plaintext); a type says how its paragraphs are marked (`paragraphs`). Wikipedia
is cleaned by the wikitext cleaner instead, in the text stage's own dump reading.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, BinaryIO, ClassVar

from bertdata.corpora.where import Filter
from bertdata.errors import BertdataError
from bertdata.text.plaintext import LINES

Opener = Callable[[str], BinaryIO]
# A part of a file one worker reads in one piece: (start, end, its bytes); what start and end
# count is the type's (a parquet file's row groups); (None, None, size): the file whole.
Part = tuple[int | None, int | None, int]
# Where a corpus names no id: column, a document's id is its `id` column or key (FineWeb's, Dolma's),
# and where it has none, its file's name and its row (or line) there.
DEFAULT_ID = "id"
Matcher = Callable[[str], list[str]]


@dataclass(frozen=True)
class CorpusSpec:
    """One corpus of a recipe, as its entry states it (relative paths made absolute)."""

    name: str
    type: str
    files: tuple[str, ...]  # patterns; wikipedia: the dump
    text: str = "text"  # the text column or key
    id: str | None = None  # the id column or key; None: `id` where a document has one, else file and row (line)
    where: Filter | None = None
    language: str = "en"  # its punkt model's language
    min_tokens: int = 0  # documents with fewer tokens are dropped (too_short)
    repeat: int = 1  # passes over it the build may take: each document up to this many times (copy k's id ends #k)
    index: str | None = None  # wikipedia: the multistream index, found beside the dump when None

    def record(self) -> dict:
        """What the manifest records of it (and a re-run compares)."""
        return {"type": self.type, "files": list(self.files), "text": self.text, "id": self.id,
                "where": self.where.source if self.where else None, "language": self.language,
                "min_tokens": self.min_tokens, "repeat": self.repeat}


class CorpusType:
    """The shape every corpus type has; subclasses state the hooks."""

    name: ClassVar[str]
    describe: ClassVar[str]  # one line, for docs and `build --help`
    keys: ClassVar[tuple[str, ...]] = ("text", "id", "where")  # the recipe keys it takes besides type, files...
    paragraphs: ClassVar[str] = LINES

    def files(self, spec: CorpusSpec, match: Matcher) -> list[str]:
        found: set[str] = set()
        for pattern in spec.files:
            matched = [p for p in match(pattern) if not _hidden(p)]
            if not matched:
                raise BertdataError(f"corpus {spec.name}: no file matches {pattern}")
            found.update(matched)
        return sorted(found)

    def check(self, spec: CorpusSpec, path: str, open_file: Opener) -> None:
        """Before any output: refuse a file this corpus cannot read, in one line naming it."""

    def parts(self, spec: CorpusSpec, path: str, open_file: Opener, size: int) -> list[Part]:
        self.check(spec, path, open_file)
        return [(None, None, size)]

    def documents(self, spec: CorpusSpec, path: str, open_file: Opener, counts: Counter,
                  start: int | None = None, end: int | None = None) -> Iterator[tuple[str, str]]:
        raise NotImplementedError


def _hidden(path: str) -> bool:
    return path.rstrip("/").rsplit("/", 1)[-1].startswith(".")


def basename(path: str) -> str:
    return path.rstrip("/").rsplit("/", 1)[-1]


def field_text(value: Any, where: str) -> str | None:
    """A text column's value as text: None (a null) is no text; anything but a string is refused."""
    if value is None or isinstance(value, str):
        return value
    raise BertdataError(f"{where}: the text is {type(value).__name__}, not a string")


def id_text(value: Any) -> str:
    """A document id as the samples' id names it: integers as written, strings as they are."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return value if isinstance(value, str) else str(value)
