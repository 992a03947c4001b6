"""Plain-text files, one document each (books, papers): what `build --books` reads, as a corpus.
A document's id is its file's name; its paragraphs end at blank lines (hard-wrapped lines are
joined)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

from bertdata.corpora.contract import CorpusSpec, CorpusType, Opener, basename
from bertdata.errors import BertdataError
from bertdata.text.books import SNIFF_BYTES, check_text_file
from bertdata.text.plaintext import BLANK_LINES


class PlainText(CorpusType):
    name = "text"
    describe = "plain UTF-8 text files, one document each (books); a document's id is its file's name"
    keys = ()
    paragraphs = BLANK_LINES

    def files(self, spec: CorpusSpec, match) -> list[str]:
        found = super().files(spec, match)
        names = [basename(p) for p in found]
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:  # the id is the file's name: two of one name would be one document
            raise BertdataError(f"corpus {spec.name}: two files named {repeated[0]} (a text document's id is its "
                                "file's name); rename one")
        return found

    def check(self, spec: CorpusSpec, path: str, open_file: Opener) -> None:
        with open_file(path) as f:
            check_text_file(path, f.read(SNIFF_BYTES))

    def documents(self, spec: CorpusSpec, path: str, open_file: Opener, counts: Counter,
                  start: int | None = None, end: int | None = None) -> Iterator[tuple[str, str]]:
        with open_file(path) as f:
            text = f.read().decode("utf-8", errors="replace")
        if text.strip():
            yield basename(path), text
        else:
            counts["empty"] += 1


TYPE = PlainText()
