"""Parquet corpora (FineWeb, FineWeb-Edu, DCLM, PG-19, Hugging Face's wikimedia/wikipedia): the
text column, the id column and the columns `where:` reads, and no other, read a batch of rows
at a time."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

from bertdata.corpora.contract import (DEFAULT_ID, CorpusSpec, CorpusType, Opener, Part, basename, field_text,
                                       id_text)
from bertdata.errors import BertdataError

# Rows turned into Python at a time: web documents are a few KB, books a few hundred.
BATCH_ROWS = 64
# Uncompressed bytes of row groups a worker reads in one part: a file of many row groups (a
# FineWeb file holds gigabytes) is read by several workers, in pieces of about this much.
PART_BYTES = 256 << 20


def _open(path: str, open_file: Opener):
    import pyarrow as pa
    import pyarrow.parquet as pq

    f = open_file(path)
    try:
        return pq.ParquetFile(f), f
    except (pa.ArrowInvalid, pa.ArrowException, OSError) as err:
        f.close()
        raise BertdataError(f"{path}: not a readable parquet file ({err})") from None


def _top(column: str) -> str:
    return column.split(".", 1)[0]


class Parquet(CorpusType):
    name = "parquet"
    describe = ("parquet files (FineWeb, FineWeb-Edu, DCLM, PG-19, wikimedia/wikipedia): the text: column "
                "(default text), the id: column (default: id where there is one, else the file and row), only the columns used read")

    def check(self, spec: CorpusSpec, path: str, open_file: Opener) -> None:
        self.parts(spec, path, open_file, 0)

    def parts(self, spec: CorpusSpec, path: str, open_file: Opener, size: int) -> list[Part]:
        """The file's columns checked from its footer; runs of row groups of about PART_BYTES."""
        parquet, f = _open(path, open_file)
        with f:
            schema, meta = parquet.schema_arrow, parquet.metadata
        self._check_schema(spec, path, schema)
        found, start, held = [], 0, 0
        for group in range(meta.num_row_groups):
            held += meta.row_group(group).total_byte_size
            if held >= PART_BYTES or group == meta.num_row_groups - 1:
                found.append((start, group + 1, held))
                start, held = group + 1, 0
        return found or [(0, 0, size)]

    def _check_schema(self, spec: CorpusSpec, path: str, schema) -> None:
        import pyarrow as pa
        wanted = [(spec.text, "the text: column")]
        if spec.id is not None:
            wanted.append((spec.id, "the id: column"))
        wanted += [(c, "which where: reads") for c in (spec.where.columns if spec.where else ())]
        for column, role in wanted:
            if _top(column) not in schema.names:
                raise BertdataError(f"{path}: no column {column!r} ({role}); its columns are "
                                    f"{', '.join(schema.names)}")
        kind = schema.field(spec.text).type if "." not in spec.text else None
        if kind is not None and not (pa.types.is_string(kind) or pa.types.is_large_string(kind)):
            raise BertdataError(f"{path}: column {spec.text!r} (the text) holds {kind}, not strings")

    def documents(self, spec: CorpusSpec, path: str, open_file: Opener, counts: Counter,
                  start: int | None = None, end: int | None = None) -> Iterator[tuple[str, str]]:
        import pyarrow as pa

        keeps = spec.where.keeps if spec.where else None
        name = basename(path)
        parquet, f = _open(path, open_file)
        groups = range(start or 0, parquet.num_row_groups if end is None else end)
        # A row's number is its place in the file, whichever part reads it.
        row = sum(parquet.metadata.row_group(g).num_rows for g in range(groups.start))
        with f:
            id_column = spec.id or (DEFAULT_ID if DEFAULT_ID in parquet.schema_arrow.names else None)
            columns = sorted({_top(c) for c in (spec.text, id_column, *(spec.where.columns if spec.where else ()))
                              if c is not None})
            try:
                # A reader per row group, on this thread: one over the whole file holds memory that
                # grows with the file (measured: 8 MB for 2.6 MB of parquet, 44 MB for 41 MB).
                batches = (batch for group in groups
                           for batch in parquet.iter_batches(batch_size=BATCH_ROWS, columns=columns,
                                                             row_groups=[group], use_threads=False))
                for batch in batches:
                    for record in batch.to_pylist():
                        number, row = row, row + 1
                        if keeps is not None and not keeps(record):
                            counts["filtered"] += 1
                            continue
                        text = field_text(_get(record, spec.text), f"{path}: row {number}, column {spec.text!r}")
                        if not text:
                            counts["empty"] += 1
                            continue
                        if id_column is None:
                            doc_id = f"{name}:{number}"
                        else:
                            value = _get(record, id_column)
                            if value is None:
                                raise BertdataError(f"{path}: row {number}: the id column {id_column!r} is null")
                            doc_id = id_text(value)
                        yield doc_id, text
            except (pa.ArrowException, OSError) as err:
                raise BertdataError(f"{path}: unreadable parquet at row {row} ({err})") from None


def _get(record: dict, column: str):
    from bertdata.corpora.where import MISSING, lookup

    value = lookup(record, column)
    return None if value is MISSING else value


TYPE = Parquet()
