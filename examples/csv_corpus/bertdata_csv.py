"""CSV files with a header row, one document a row: a corpus type in three hooks (the files a
corpus names are listed by the base; `check` and `documents` are its own). Its text and id are
the columns a recipe's `text:` and `id:` name (default: `text`, and `id` where there is one, else
the file's name and row)."""

from __future__ import annotations

import csv
import io

from bertdata.corpora.contract import DEFAULT_ID, CorpusType, basename, id_text
from bertdata.errors import BertdataError


def _rows(path: str, open_file):
    with open_file(path) as f:
        try:
            yield from csv.DictReader(io.TextIOWrapper(f, "utf-8", newline=""))
        except (UnicodeDecodeError, csv.Error) as err:
            raise BertdataError(f"{path}: not a UTF-8 CSV file ({err})") from None


class Csv(CorpusType):
    name = "csv"
    describe = "CSV files with a header row, one document a row (a plugin)"
    keys = ("text", "id")

    def check(self, spec, path: str, open_file) -> None:
        with open_file(path) as f:
            header = next(csv.reader(io.TextIOWrapper(f, "utf-8", errors="replace", newline="")), [])
        for column in (spec.text, spec.id):
            if column is not None and column not in header:
                raise BertdataError(f"{path}: no column {column!r}; its columns are {', '.join(header)}")

    def documents(self, spec, path: str, open_file, counts, start=None, end=None):
        for row, record in enumerate(_rows(path, open_file)):
            if not record.get(spec.text):
                counts["empty"] += 1
                continue
            found = record.get(spec.id or DEFAULT_ID)
            yield (id_text(found) if found else f"{basename(path)}:{row}"), record[spec.text]


CSV = Csv()
